"""The Evaluator's per-position calls: the address of one arena header instead of eleven arrays
and the position as a tuple of ints (``kernels.nnue.arena``), through the kernels' compiled functions
without Numba's dispatcher (``evaluator._entry_index``).  The same numbers as the ``forward``
kernels called with the arrays and as Stockfish 15.1, one compiled signature per kernel, headers
that follow every array the evaluator replaces, pickled evaluators with a header of their own,
and the stored value of an evaluated ply never returned for a board changed behind the
evaluator's back."""

from __future__ import annotations

import pickle

import chess
import numba
import numpy as np
import pytest
from numba.core.dispatcher import Dispatcher

from nnue_infer import Evaluator, PositionError
from nnue_infer import evaluator as E
from nnue_infer.kernels.nnue import arena
from nnue_infer.kernels.nnue import forward

GAME = ["e2e4", "c7c5", "g1f3", "d7d6", "d2d4", "c5d4", "f3d4", "g8f6", "b1c3", "a7a6"]


def test_direct_calls_equal_batch_calls_and_stockfish(network, corpus):
    ev = Evaluator(network)
    rows = corpus[::50]
    for row in rows:
        board = chess.Board(row["fen"])
        assert ev.evaluate(board) == row["raw"]["value"], row["fen"]
    assert ev.evaluate_batch([row["fen"] for row in rows]).tolist() == [row["raw"]["value"] for row in rows]
    ev.set_position(chess.Board())
    for uci in GAME:
        ev.push(chess.Move.from_uci(uci))
        got = ev.evaluate()
        assert got == Evaluator(network).evaluate(ev.board) == ev.evaluate_batch([ev.board])[0]
        ply = len(ev.board.move_stack)
        # the incremental kernel again on the same ply (recomputed from its parent), not the stored value
        assert E._entry(ev._ply_entry)(ev._address, ply, ply + 1, _position(ev.board)) == got


def test_entry_points_have_the_dispatchers_signature(network):
    ev = Evaluator(network)
    ev.evaluate(chess.Board())
    ev.evaluate()
    entries = arena.kernels(forward.config_of_cfg(ev._cfg))
    if not isinstance(entries.evaluate_ply, Dispatcher):
        pytest.skip("NUMBA_DISABLE_JIT is set")
    for kernel, n_ints, index in ((entries.evaluate_ply, 3, ev._ply_entry), (entries.evaluate_board, 1, ev._board_entry)):
        types = (numba.types.int64,) * n_ints + (arena.POSITION,)
        assert E._ENTRY_INDEX[(kernel, types)] == index
        assert E._ENTRIES[index] is kernel.overloads[types].entry_point
        assert kernel.signatures == [types]


def test_pickled_evaluators_look_the_entry_points_up_again(network):
    ev = Evaluator(network)
    for uci in GAME[:4]:
        ev.push(chess.Move.from_uci(uci))
    want = ev.evaluate()
    state = ev.__getstate__()
    # addresses and indices are this process's; the in-use token is the object's own
    assert not {"_header", "_address", "_ply_entry", "_board_entry", "_kernels", "_free"} & set(state)
    clone = pickle.loads(pickle.dumps(ev))
    assert (clone._ply_entry, clone._board_entry) == (ev._ply_entry, ev._board_entry)
    assert_header_matches(clone)
    assert clone.evaluate() == want
    clone.push(chess.Move.from_uci(GAME[4]))
    assert clone.evaluate() == Evaluator(network).evaluate(clone.board)


def assert_header_matches(ev):
    """The evaluator's header holds the addresses and shapes of its current arrays."""
    h = ev._header
    assert ev._address == h.ctypes.data
    for k, a in enumerate(ev._kernel_args):
        assert h[arena.SLOT * k] == a.ctypes.data
        assert tuple(h[arena.SLOT * k + 1:arena.SLOT * k + 1 + a.ndim]) == a.shape


def test_header_follows_the_arrays_the_evaluator_replaces(network):
    """A deep stack reallocates the accumulator arrays; a new network rebuilds everything."""
    ev = Evaluator(network)
    assert_header_matches(ev)
    accs = ev._accs
    ev.set_position(chess.Board())
    for _ in range(75):  # 300 plies: beyond the initial 256 of the stack
        for uci in ("g1f3", "g8f6", "f3g1", "f6g8"):
            ev.push(chess.Move.from_uci(uci))
            ev.evaluate()
    board = ev.board
    assert ev.evaluate() == Evaluator(network).evaluate(board)
    assert ev._accs is not accs and ev._accs.shape[0] > accs.shape[0]
    assert_header_matches(ev)
    ev.network = network
    assert_header_matches(ev)
    assert ev.evaluate() == Evaluator(network).evaluate(board)


def test_write_header_refuses_arrays_of_other_types(network):
    ev = Evaluator(network)
    h = np.zeros(arena.HEADER_SIZE, np.int64)
    args = list(ev._kernel_args)
    arena.write_header(h, tuple(args))
    assert (h == ev._header).all()
    bad = args.copy()
    bad[7] = args[7].astype(np.int32)  # accs
    with pytest.raises(TypeError, match=r"arena array accs: expected C-contiguous int16\[3d\], got int32\[3d\]"):
        arena.write_header(h, tuple(bad))
    bad = args.copy()
    bad[10] = np.zeros(64, np.int16)[::2]  # scratch, not contiguous
    with pytest.raises(TypeError, match="arena array scratch"):
        arena.write_header(h, tuple(bad))
    with pytest.raises(TypeError, match="expected 11 arrays, got 10"):
        arena.write_header(h, tuple(args[:10]))


def _position(board):
    return (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
            board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK], board.turn)


def test_arena_kernels_read_the_position_tuple(network):
    """The bitboards of the tuple land in the ply's pair (int64, the same bits: Black's pieces
    on rank 8 make its uint64 above 2**63) and the side to move comes from its last item."""
    ev = Evaluator(network)
    board = chess.Board()
    board.push_uci("e2e4")
    value = ev.evaluate(board)
    ev.set_position(board)
    assert ev.evaluate() == value
    pair = ev._stack_base + 1
    assert ev._state[pair, 0, :8].view(np.uint64).tolist() == list(_position(board)[:8])
    evaluate_board = E._entry(ev._board_entry)  # (the dispatcher would compile int64 bitboards too)
    assert evaluate_board(ev._address, _position(board)) == value
    assert evaluate_board(ev._address, _position(board)[:8] + (True,)) == Evaluator(network).evaluate(
        board.fen().replace(" b ", " w "))


def test_an_evaluated_ply_is_recomputed_when_the_board_changed_behind_the_evaluators_back(network):
    """evaluate() of an evaluated ply returns the stored value only for the same eight bitboards
    and side to move: a board edited directly (python-chess's own methods or its bitboards)
    gets its own value, and the original board its original one again."""
    ev, fresh = Evaluator(network), Evaluator(network)
    ev.set_position(chess.Board())
    for uci in GAME[:6]:
        ev.push_uci(uci)
    want = ev.evaluate()
    assert ev.evaluate() == want  # the stored value
    board = ev._board  # edited below without python-chess's public setters, which would clear the move stack
    for edit, undo in [
        (lambda: board._remove_piece_at(chess.B2), lambda: board._set_piece_at(chess.B2, chess.PAWN, chess.WHITE)),
        (lambda: setattr(board, "turn", not board.turn), lambda: setattr(board, "turn", not board.turn)),
        (lambda: board._set_piece_at(chess.H5, chess.QUEEN, chess.BLACK), lambda: board._remove_piece_at(chess.H5)),
    ]:
        edit()
        assert ev.evaluate() == fresh.evaluate(board.copy()) != want
        undo()
        assert ev.evaluate() == want
    # the same after a pop: the parent ply's stored value, then an edited parent
    ev.pop()
    parent = ev.evaluate()
    assert parent == fresh.evaluate(ev.board)
    board._remove_piece_at(chess.A2)
    assert ev.evaluate() == fresh.evaluate(board.copy())
    board._set_piece_at(chess.A2, chess.PAWN, chess.WHITE)
    assert ev.evaluate() == parent
    ev.push_uci(GAME[5])
    assert ev.evaluate() == want


def test_a_refused_edited_board_leaves_no_stale_accumulator_behind(network):
    """An evaluated ply whose board is edited into one the network cannot represent: evaluate()
    raises (the kernel wrote the refused bitboards into that ply's pair), and after the board is
    put back, the next ply, updated from that pair, is still right.  (Ply 2 refreshes the refresh
    cache, ply 3 is an update from it, so the update from ply 3 is cheaper than from the cache.)"""
    ev, fresh = Evaluator(network), Evaluator(network)
    ev.set_position(chess.Board())
    for uci in GAME[:2]:
        ev.push_uci(uci)
    ev.evaluate()
    ev.push_uci(GAME[2])
    ev.evaluate()
    board = ev._board
    knights = board.knights
    board.knights |= chess.BB_E1  # a square with two piece types
    with pytest.raises(PositionError):
        ev.evaluate()
    board.knights = knights
    assert ev.evaluate() == fresh.evaluate(board.copy())
    ev.push_uci(GAME[3])
    assert ev.evaluate() == fresh.evaluate(board.copy())


def test_the_evaluators_arrays_are_cache_line_aligned_also_when_unpickled(network):
    """The SIMD kernels' 32-byte loads of accumulator rows split cache lines on NumPy's usual
    16-byte offset: every array the per-position kernels stream through starts on simd.ALIGNMENT."""
    from nnue_infer.kernels import simd

    ev = Evaluator(network)
    ev.push(chess.Move.from_uci("e2e4"))
    want = ev.evaluate()
    for e in (ev, pickle.loads(pickle.dumps(ev))):
        for name in ("_accs", "_psqts", "_state", "_scratch", "_acc", "_psqt"):
            assert getattr(e, name).ctypes.data % simd.ALIGNMENT == 0, name
        assert_header_matches(e)
        assert e.evaluate() == want


def test_refresh_forgets_the_values_stored_for_evaluated_plies(network):
    """refresh() after the network's arrays were changed in place: no evaluated ply (here the
    parent, reached by pop after the refresh) returns the value stored before."""
    from nnue_infer.network import Network

    net = Network(architecture=network.architecture, ft_biases=network.ft_biases.copy(),
                  ft_weights=network.ft_weights.copy(), psqt_weights=network.psqt_weights.copy(),
                  layer_weights=network.layer_weights, layer_biases=network.layer_biases)
    ev = Evaluator(net)
    ev.set_position(chess.Board())
    for uci in GAME[:3]:
        ev.push_uci(uci)
        ev.evaluate()
    net.ft_weights[:] = net.ft_weights // 2 + 3
    ev.refresh()
    assert ev.evaluate() == Evaluator(net).evaluate(ev.board)
    ev.pop()
    assert ev.evaluate() == Evaluator(net).evaluate(ev.board)


def test_a_refused_position_leaves_its_pair_unflagged_in_the_kernel(network):
    """arena.evaluate_ply clears the ply's "computed" flags before it checks the position, so a
    refused position's bitboards (written into the pair) never stand for its accumulator, whatever
    ``trusted`` the caller passes (e.g. another evaluator sharing the arrays after copy.copy)."""
    from nnue_infer.kernels.nnue.accumulator import STATE_FLAG
    from nnue_infer.kernels.nnue.forward import INVALID_POSITION

    ev = Evaluator(network)
    ev.set_position(chess.Board())
    for uci in GAME[:3]:
        ev.push_uci(uci)
    want = ev.evaluate()
    pair = ev._stack_base + 3
    assert ev._state[pair, :, STATE_FLAG].tolist() == [1, 1]
    board = ev.board
    board.knights |= chess.BB_E1
    evaluate_ply = E._entry(ev._ply_entry)
    assert evaluate_ply(ev._address, 3, 4, _position(board)) == INVALID_POSITION
    assert ev._state[pair, :, STATE_FLAG].tolist() == [0, 0]
    assert evaluate_ply(ev._address, 3, 4, _position(ev.board)) == want
    assert ev._state[pair, :, STATE_FLAG].tolist() == [1, 1]

"""The Evaluator's per-position calls: one arena header instead of eleven arrays
(``kernels.arena``), through the kernels' compiled functions without Numba's dispatcher
(``evaluator._entry_index``).  The same numbers as the ``forward`` kernels called with the
arrays and as Stockfish 15.1, one compiled signature per kernel, headers that follow every
array the evaluator replaces, and pickled evaluators with a header of their own."""

from __future__ import annotations

import pickle

import chess
import numba
import numpy as np
import pytest
from numba.core.dispatcher import Dispatcher

from nnue_infer import Evaluator
from nnue_infer import evaluator as E
from nnue_infer.kernels import arena
from nnue_infer.kernels.forward import evaluate_fresh, evaluate_stack

GAME = ["e2e4", "c7c5", "g1f3", "d7d6", "d2d4", "c5d4", "f3d4", "g8f6", "b1c3", "a7a6"]


def test_direct_calls_equal_dispatcher_calls_and_stockfish(network, corpus):
    ev = Evaluator(network)
    rows = corpus[::50]
    for row in rows:
        board = chess.Board(row["fen"])
        got = ev.evaluate(board)
        assert got == row["raw"]["value"], row["fen"]
        # the same kernel through the dispatcher, on the state evaluate(board) left
        assert evaluate_fresh(0 if board.turn else 1, *ev._kernel_args) == got
    ev.set_position(chess.Board())
    for uci in GAME:
        ev.push(chess.Move.from_uci(uci))
        got = ev.evaluate()
        assert got == Evaluator(network).evaluate(ev.board)
        ply = len(ev.board.move_stack)
        # dispatcher call of the incremental kernel on the same (already computed) ply
        assert evaluate_stack(ply, 0 if ev.board.turn else 1, ply + 1, *ev._kernel_args) == got


def test_entry_points_have_the_dispatchers_signature(network):
    ev = Evaluator(network)
    ev.evaluate(chess.Board())
    ev.evaluate()
    if not isinstance(evaluate_stack, Dispatcher):
        pytest.skip("NUMBA_DISABLE_JIT is set")
    for kernel, n_ints, index in ((arena.evaluate_stack, 3, ev._stack_entry), (arena.evaluate_fresh, 1, ev._fresh_entry)):
        types = (numba.types.int64,) * n_ints + (numba.typeof(ev._header),)
        assert E._ENTRY_INDEX[(kernel, types)] == index
        assert E._ENTRIES[index] is kernel.overloads[types].entry_point
        assert kernel.signatures == [types]


def test_pickled_evaluators_look_the_entry_points_up_again(network):
    ev = Evaluator(network)
    for uci in GAME[:4]:
        ev.push(chess.Move.from_uci(uci))
    want = ev.evaluate()
    state = ev.__getstate__()
    assert not {"_header", "_stack_entry", "_fresh_entry"} & set(state)  # addresses and indices are this process's
    clone = pickle.loads(pickle.dumps(ev))
    assert (clone._stack_entry, clone._fresh_entry) == (ev._stack_entry, ev._fresh_entry)
    assert_header_matches(clone)
    assert clone.evaluate() == want
    clone.push(chess.Move.from_uci(GAME[4]))
    assert clone.evaluate() == Evaluator(network).evaluate(clone.board)


def assert_header_matches(ev):
    """The evaluator's header holds the addresses and shapes of its current arrays."""
    h = ev._header
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

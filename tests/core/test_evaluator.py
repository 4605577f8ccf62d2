"""Incremental evaluation: push/pop/evaluate() and evaluate_game equal a fresh refresh, bit for bit.

The oracle is ``Evaluator.evaluate(board)`` (full refresh, itself checked against Stockfish
15.1 in test_corpus.py) and, where the dev corpus has the position, Stockfish's own value.
"""

from __future__ import annotations

import json
import random

import chess
import chess.variant
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnue_infer
from nnue_infer import Evaluator, IllegalMoveError, PositionError
from nnue_infer.errors import FenError
import copy
from nnue_infer import Evaluator
import threading
from nnue_infer.errors import ConcurrentUseError
from nnue_infer.errors import IllegalMoveError
from nnue_infer.errors import IllegalMoveError, NetworkNotFoundError
import sys
import warnings
from nnue_infer import Architecture, ConcurrentUseError, Evaluator, FloatNetwork, HiddenLayer, PositionError, quantise


@pytest.fixture(scope="module")
def games(data_dir) -> list[dict]:
    with open(data_dir / "games-dev.jsonl") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert len(rows) == 264
    return rows


@pytest.fixture(scope="module")
def ev(network) -> Evaluator:
    """The evaluator under test (incremental state)."""
    return Evaluator(network)


@pytest.fixture(scope="module")
def fresh(network) -> Evaluator:
    """A second evaluator used only for full refreshes (the oracle)."""
    return Evaluator(network)


def random_network(seed: int, ft_width: int = 32) -> nnue_infer.Network:
    """A small Stockfish-15.1-shaped network with random parameters (a different network)."""
    rng = np.random.default_rng(seed)
    arch = nnue_infer.stockfish_15_1_architecture(ft_width=ft_width)
    nf = 22528  # HalfKAv2_hm: 64 * 11 * 32
    weights, biases = [], []
    for layer, n_in in zip(arch.layers, arch.layer_inputs()):
        weights.append(rng.integers(-60, 60, (arch.output_buckets, layer.outputs, n_in), dtype=np.int8))
        biases.append(rng.integers(-3000, 3000, (arch.output_buckets, layer.outputs), dtype=np.int32))
    return nnue_infer.Network(
        arch,
        ft_biases=rng.integers(-100, 100, ft_width, dtype=np.int16),
        ft_weights=rng.integers(-60, 60, (nf, ft_width), dtype=np.int16),
        psqt_weights=rng.integers(-3000, 3000, (nf, arch.psqt_buckets), dtype=np.int32),
        layer_weights=tuple(weights),
        layer_biases=tuple(biases),
    )


def test_bit_helpers_against_python():
    """popcount / lowest_square / without_lowest on int64 bitboards, h8 (the sign bit) included."""
    from nnue_infer.kernels.chess.bitboard import lowest_square, popcount, without_lowest

    rng = np.random.default_rng(11)
    values = [1 << 63, (1 << 64) - 1, 1, 3 << 62, 0x8000000000000001] + rng.integers(0, 1 << 64, 300, np.uint64).tolist()
    for u in values:
        b = np.uint64(u).view(np.int64)
        assert popcount(b) == bin(u).count("1"), hex(u)
        low = (u & -u).bit_length() - 1
        assert lowest_square(b) == low, hex(u)
        assert np.int64(without_lowest(b)).view(np.uint64) == u & (u - 1), hex(u)


def test_every_ply_of_every_dev_game(games, corpus, ev, fresh):
    """26,333 plies: evaluate() after each push equals a refresh, and Stockfish's value where known."""
    sf = {(r["game_id"], r["ply"]): r["raw"]["value"] for r in corpus if r["game_id"] is not None}
    plies = checked_sf = 0
    for game in games:
        board = chess.Board(game["start_fen"])
        ev.set_position(board)
        for ply in range(len(game["moves"]) + 1):
            if ply:
                move = board.parse_uci(game["moves"][ply - 1])
                board.push(move)
                ev.push(move)
                plies += 1
            value = ev.evaluate()
            assert value == fresh.evaluate(board), f"{game['id']} ply {ply}: {board.fen()}"
            if (game["id"], ply) in sf:
                assert value == sf[game["id"], ply], f"{game['id']} ply {ply}: Stockfish says {sf[game['id'], ply]}"
                checked_sf += 1
        assert ev.board.fen() == board.fen()
    assert plies == 26333
    assert checked_sf > 2500


def test_evaluate_game_matches_incremental_on_dev_games(games, corpus, ev, fresh, network):
    sf = {(r["game_id"], r["ply"]): r["raw"]["value"] for r in corpus if r["game_id"] is not None}
    for game in games:
        values = ev.evaluate_game(game["start_fen"], game["moves"])
        assert values.dtype == np.int32 and values.shape == (len(game["moves"]) + 1,)
        for (gid, ply), v in ((k, v) for k, v in sf.items() if k[0] == game["id"]):
            assert values[ply] == v, f"{gid} ply {ply}"
    # Spot-check against the refresh on a few games, with chess.Move input and the module-level function.
    for game in games[::40]:
        board = chess.Board(game["start_fen"])
        expected = [fresh.evaluate(board)]
        moves = []
        for uci in game["moves"]:
            moves.append(board.parse_uci(uci))
            board.push(moves[-1])
            expected.append(fresh.evaluate(board))
        assert ev.evaluate_game(game["start_fen"], moves).tolist() == expected
        assert nnue_infer.evaluate_game(chess.Board(game["start_fen"]), game["moves"], network).tolist() == expected


def test_random_walks_with_pops_and_lazy_evaluation(games, ev, fresh):
    """Push and pop at random along dev games, evaluating only sometimes (lazy accumulators)."""
    rng = random.Random(3)
    for game in games[::8]:
        start = chess.Board(game["start_fen"])
        ev.set_position(start)
        board = start.copy()
        line = game["moves"]
        for _ in range(300):
            r = rng.random()
            if r < 0.35 and board.move_stack:
                for _ in range(rng.randint(1, min(6, len(board.move_stack)))):
                    assert ev.pop() == board.pop()
            elif len(board.move_stack) < len(line):
                n = rng.randint(1, 5)
                for uci in line[len(board.move_stack):len(board.move_stack) + n]:
                    move = board.parse_uci(uci)
                    board.push(move)
                    ev.push(move)
            if rng.random() < 0.5:
                assert ev.evaluate() == fresh.evaluate(board), f"{game['id']} {board.fen()}"
        assert ev.evaluate() == fresh.evaluate(board)


# (FEN, move in UCI as python-chess parses it, chess960) covering every kind of move.
MOVE_KINDS = {
    "quiet": ("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3", "f1c4", False),
    "capture": ("rnbqkbnr/ppp1pppp/8/3p4/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2", "e4d5", False),
    "double push": (chess.STARTING_FEN, "e2e4", False),
    "en passant white": ("rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3", "e5f6", False),
    "en passant black": ("rnbqkbnr/pppp1ppp/8/8/3Pp3/5N2/PPP1PPPP/RNBQKB1R b KQkq d3 0 3", "e4d3", False),
    "promotion": ("8/4P3/8/8/8/2k5/8/4K3 w - - 0 1", "e7e8q", False),
    "under-promotion knight": ("8/4P3/8/8/8/2k5/8/4K3 w - - 0 1", "e7e8n", False),
    "under-promotion rook": ("8/8/8/8/8/2K5/4p3/6k1 b - - 0 1", "e2e1r", False),
    "promotion capture": ("3r4/4P3/8/8/8/2k5/8/4K3 w - - 0 1", "e7d8q", False),
    "under-promotion capture": ("8/8/8/8/8/2K5/4p3/3R2k1 b - - 0 1", "e2d1b", False),
    "castle white king side": ("r3k2r/pppq1ppp/2npbn2/4p3/4P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 0 1", "e1g1", False),
    "castle white queen side": ("r3k2r/pppq1ppp/2npbn2/4p3/4P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 0 1", "e1c1", False),
    "castle black king side": ("r3k2r/pppq1ppp/2npbn2/4p3/4P3/2NPBN2/PPPQ1PPP/R3K2R b KQkq - 0 1", "e8g8", False),
    "castle black queen side": ("r3k2r/pppq1ppp/2npbn2/4p3/4P3/2NPBN2/PPPQ1PPP/R3K2R b KQkq - 0 1", "e8c8", False),
    "960 king stays put": ("k7/8/8/8/8/8/8/6KR w H - 0 1", "g1h1", True),
    "960 rook stays put": ("k7/8/8/8/8/8/8/4KR2 w F - 0 1", "e1f1", True),
    "960 king and rook swap": ("k7/8/8/8/8/8/8/5KR1 w G - 0 1", "f1g1", True),
    "960 king lands on rook square": ("k7/8/8/8/8/8/8/4K1R1 w G - 0 1", "e1g1", True),
    "960 queen side from b1": ("k7/8/8/8/8/8/8/RK6 w A - 0 1", "b1a1", True),
    "960 black queen side, king crosses to c8": ("1rk5/8/8/8/8/8/8/6K1 b b - 0 1", "c8b8", True),
    "960 black king side across the d/e files": ("1rk3r1/8/8/8/8/8/8/6K1 b bg - 0 1", "c8g8", True),
    "king move across the d/e files": ("4k3/8/8/8/8/8/8/3K4 w - - 0 1", "d1e1", False),
    "null move": ("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3", "0000", False),
}


@pytest.mark.parametrize("kind", sorted(MOVE_KINDS))
def test_each_move_kind(kind, ev, fresh):
    fen, uci, chess960 = MOVE_KINDS[kind]
    board = chess.Board(fen, chess960=chess960)
    move = board.parse_uci(uci)
    if kind.startswith(("castle", "960")):
        assert board.is_castling(move)
    if "en passant" in kind:
        assert board.is_en_passant(move)
    before = fresh.evaluate(board)
    for evaluate_first in (True, False):  # incremental from the parent, or lazily with no parent computed
        ev.set_position(board)
        if evaluate_first:
            assert ev.evaluate() == before
        ev.push(move)
        board.push(move)
        assert ev.evaluate() == fresh.evaluate(board)
        assert ev.board.fen() == board.fen()
        assert ev.pop() == board.pop()
        assert ev.evaluate() == before


def test_null_move_flips_side_to_move_only(ev, fresh):
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    ev.set_position(board)
    white = ev.evaluate()
    ev.push(chess.Move.null())
    black = ev.evaluate()
    flipped = board.copy()
    flipped.turn = chess.BLACK
    assert black == fresh.evaluate(flipped) and black != white
    ev.push(chess.Move.null())
    assert ev.evaluate() == white
    assert ev.board.move_stack == [chess.Move.null(), chess.Move.null()]


@pytest.mark.parametrize(
    "fen, uci",
    [
        (chess.STARTING_FEN, "e2e5"),  # not a pawn move
        (chess.STARTING_FEN, "e7e5"),  # the other side's piece
        (chess.STARTING_FEN, "e1g1"),  # castling through pieces
        ("4k3/8/8/8/8/8/4r3/4K3 w - - 0 1", "e1d2"),  # king into check
        ("4k3/8/8/8/1b6/8/3P4/4K3 w - - 0 1", "d2d3"),  # pinned pawn
        ("8/4P3/8/8/8/2k5/8/4K3 w - - 0 1", "e7e8"),  # promotion without a piece
        ("8/4P3/8/8/8/2k5/8/4K3 w - - 0 1", "e7e8k"),  # promotion to a king
        ("4k3/8/8/8/8/8/4R3/4K3 w - - 0 1", "e2e8"),  # impossible position: captures the king
    ],
)
def test_illegal_move_raises_and_changes_nothing(fen, uci, ev, fresh):
    board = chess.Board(fen)
    move = chess.Move.from_uci(uci)
    ev.set_position(board)
    ev.push(chess.Move.null(), validate=False)  # (refused validated when in check)
    ev.pop()
    value = ev.evaluate()
    with pytest.raises(IllegalMoveError) as info:
        ev.push(move)
    assert isinstance(info.value, ValueError) and move.uci() in str(info.value)
    assert ev.board.fen() == board.fen() and ev.board.move_stack == []
    assert ev.evaluate() == value == fresh.evaluate(board)
    legal = next(m for m in board.legal_moves if not board.kings & chess.BB_SQUARES[m.to_square])
    ev.push(legal)
    board.push(legal)
    assert ev.evaluate() == fresh.evaluate(board)


def test_unvalidated_push_follows_the_board(games, ev, fresh):
    for game in games[::30]:
        board = chess.Board(game["start_fen"])
        ev.set_position(board)
        for uci in game["moves"]:
            move = board.parse_uci(uci)
            board.push(move)
            ev.push(move, validate=False)
            assert ev.evaluate() == fresh.evaluate(board), f"{game['id']} {board.fen()}"


def test_unvalidated_push_to_an_unrepresentable_board_is_reported_and_undone(ev, fresh):
    board = chess.Board("4k3/8/8/8/8/8/4R3/4K3 w - - 0 1")  # impossible: Black is in check, White to move
    ev.set_position(board)
    before = ev.evaluate()
    ev.push(chess.Move.from_uci("e2e8"), validate=False)  # captures the king: python-chess allows it
    with pytest.raises(PositionError, match="Black must have exactly one king"):
        ev.evaluate()
    ev.pop()
    assert ev.evaluate() == before
    ev.push(chess.Move.from_uci("e2e7"))
    board.push_uci("e2e7")
    assert ev.evaluate() == fresh.evaluate(board)


def test_bad_arguments(ev):
    ev.set_position(chess.Board())
    with pytest.raises(TypeError):
        ev.push("e2e4")  # type: ignore[arg-type]
    with pytest.raises(PositionError, match="king"):
        ev.set_position("8/8/8/8/8/8/8/4K3 w - - 0 1")
    with pytest.raises(FenError, match="invalid character 'o' in the placement field at column 2 of 'not a fen'"):
        ev.set_position("not a fen")
    assert ev.board.fen() == chess.STARTING_FEN  # unchanged by the failed calls


def test_pop_on_empty_stack_raises_index_error(ev):
    ev.set_position(chess.Board())
    with pytest.raises(IndexError):
        ev.pop()
    ev.push(chess.Move.from_uci("g1f3"))
    ev.pop()
    with pytest.raises(IndexError):
        ev.pop()


def test_set_position_keeps_the_boards_move_stack(ev, fresh):
    board = chess.Board()
    for uci in ["e2e4", "e7e5", "e1e2", "e8e7"]:
        board.push_uci(uci)
    ev.set_position(board)
    assert ev.evaluate() == fresh.evaluate(board)
    for _ in range(4):
        board.pop()
        ev.pop()
        assert ev.evaluate() == fresh.evaluate(board)
    with pytest.raises(IndexError):
        ev.pop()


def test_fresh_evaluate_and_evaluate_game_leave_the_stack_alone(games, ev, fresh):
    board = chess.Board()
    ev.set_position(board)
    for uci in ["e2e4", "c7c5", "g1f3"]:
        ev.push(chess.Move.from_uci(uci))
        board.push_uci(uci)
    ev.evaluate()
    other = games[5]
    ev.evaluate_game(other["start_fen"], other["moves"])
    ev.evaluate(chess.Board(other["start_fen"]))
    assert ev.evaluate() == fresh.evaluate(board)
    ev.pop()
    board.pop()
    assert ev.evaluate() == fresh.evaluate(board)


def test_evaluate_game_names_the_bad_move(ev):
    moves = ["e2e4", "e7e5", "g1f3", "b8c6", "f1c4", "e8e6"]
    with pytest.raises(IllegalMoveError, match=r"moves\[5\]"):
        ev.evaluate_game(chess.Board(), moves)
    with pytest.raises(IllegalMoveError, match=r"moves\[1\]"):
        ev.evaluate_game(chess.Board(), ["e2e4", "zz"])
    with pytest.raises(TypeError, match=r"moves\[0\]"):
        ev.evaluate_game(chess.Board(), [42])
    values = ev.evaluate_game(chess.STARTING_FEN, ["e2e4", "0000", chess.Move.from_uci("d2d4")])
    assert values.shape == (4,)
    assert ev.evaluate_game(chess.Board(), []).tolist() == [ev.evaluate(chess.Board())]


def test_evaluate_game_unvalidated(games, ev):
    for game in games[::25]:
        expected = ev.evaluate_game(game["start_fen"], game["moves"]).tolist()
        moves = [chess.Move.from_uci(u) for u in game["moves"]]
        assert ev.evaluate_game(game["start_fen"], game["moves"], validate=False).tolist() == expected
        assert ev.evaluate_game(chess.Board(game["start_fen"]), moves, validate=False).tolist() == expected
    impossible = "4k3/8/8/8/8/8/4R3/4K3 w - - 0 1"  # Black in check with White to move: e2e8 takes the king
    with pytest.raises(IllegalMoveError, match=r"moves\[0\]"):
        ev.evaluate_game(impossible, ["e2e8"])
    with pytest.raises(PositionError, match=r"moves\[0\]"):
        ev.evaluate_game(impossible, ["e2e8"], validate=False)
    with pytest.raises(PositionError, match="variant"):
        ev.evaluate_game(chess.variant.AtomicBoard(), ["e2e4"])


def test_cp_and_white_pov(ev, fresh):
    board = chess.Board("rnbqkbnr/pppp1ppp/8/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 1 2")
    ev.set_position(board)
    assert ev.evaluate_cp() == fresh.evaluate_cp(board)
    assert ev.evaluate_cp(white_pov=True) == fresh.evaluate_cp(board, white_pov=True) == -ev.evaluate_cp()


def test_network_change_invalidates_accumulators_and_cache(network, games):
    other = random_network(7)
    ev = Evaluator(network)
    ref_sf, ref_other = Evaluator(network), Evaluator(other)
    game = games[0]
    board = chess.Board(game["start_fen"])
    ev.set_position(board)
    for i, uci in enumerate(game["moves"][:60]):
        move = board.parse_uci(uci)
        ev.push(move)
        board.push(move)
        if i % 20 == 10:
            ev.network = other if ev.network is network else network
        ref = ref_sf if ev.network is network else ref_other
        assert ev.evaluate() == ref.evaluate(board), i
    ref = ref_sf if ev.network is network else ref_other
    part = game["moves"][:30]
    assert ev.evaluate_game(game["start_fen"], part).tolist() == ref.evaluate_game(game["start_fen"], part).tolist()
    ev.refresh()
    assert ev.evaluate() == ref.evaluate(board)


def test_deep_stack_grows(ev, fresh):
    """More plies than the preallocated stack: knights shuffle for 600 plies."""
    board = chess.Board()
    ev.set_position(board)
    shuffle = ["g1f3", "g8f6", "f3g1", "f6g8"]
    for i in range(600):
        move = chess.Move.from_uci(shuffle[i % 4])
        ev.push(move)
        board.push(move)
        if i % 97 == 0:
            assert ev.evaluate() == fresh.evaluate(board)
    assert ev.evaluate() == fresh.evaluate(board)
    for _ in range(599):
        ev.pop()
        board.pop()
    assert ev.evaluate() == fresh.evaluate(board)


def _special(board: chess.Board, move: chess.Move) -> bool:
    return bool(move.promotion) or board.is_castling(move) or board.is_en_passant(move) or board.is_capture(move) \
        or board.piece_type_at(move.from_square) == chess.KING


START_FENS = [
    chess.STARTING_FEN,
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",  # perft "kiwipete"
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1",
    "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8",
    "n1n5/PPPk4/8/8/8/8/4Kppp/5N1N b - - 0 1",
    "8/8/1k6/2b5/2pP4/8/5K2/8 b - d3 0 1",
]


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_legal_games_with_pops(data, ev, fresh):
    """Random legal games (standard, Chess960 and tactical starts), biased to special moves,
    with random pops, null moves and lazy evaluation: evaluate() always equals a refresh."""
    start = data.draw(st.one_of(st.sampled_from(START_FENS), st.integers(0, 959)))
    board = chess.Board.from_chess960_pos(start) if isinstance(start, int) else chess.Board(start)
    ev.set_position(board)
    for _ in range(data.draw(st.integers(1, 120))):
        action = data.draw(st.integers(0, 19))
        if action == 0 and board.move_stack:
            assert ev.pop() == board.pop()
        elif action == 1 and not board.is_check():
            ev.push(chess.Move.null())
            board.push(chess.Move.null())
        else:
            moves = list(board.legal_moves)
            if not moves:
                break
            special = [m for m in moves if _special(board, m)]
            pool = special if special and action < 12 else moves
            move = pool[data.draw(st.integers(0, len(pool) - 1))]
            ev.push(move)
            board.push(move)
        if data.draw(st.booleans()):
            assert ev.evaluate() == fresh.evaluate(board), board.fen()
    assert ev.evaluate() == fresh.evaluate(board), board.fen()


# -- hostile input ---------------------------------------------------------------------------------------------------

def test_copy_copy_is_independent(network, corpus):
    row = next(r for r in corpus if not r["in_check"] and r["side_to_move"] == "w" and r["piece_count"] > 20)
    ev = Evaluator(network)
    ev.set_position(chess.Board(row["fen"]))
    assert ev.evaluate() == row["raw"]["value"]
    clone = copy.copy(ev)
    board = chess.Board(row["fen"])  # python-chess: the position after each move
    for move in list(board.legal_moves)[:3]:
        clone.push(move)
        board.push(move)
        assert clone.board.fen() == board.fen()
        assert clone.evaluate() == Evaluator(network).evaluate(board)
        assert ev.board.fen() == row["fen"] and ev.board.move_stack == []
        assert ev.evaluate() == row["raw"]["value"]
        clone.pop()
        board.pop()
    ev.push(next(iter(board.legal_moves)))
    assert clone.board.fen() == row["fen"] and clone.evaluate() == row["raw"]["value"]


def _interleaved(function, call, action):
    """Run ``call()`` once per bytecode of ``function``'s frame (the method ``call`` calls), running
    ``action()`` (standing for another thread's call on the same evaluator) just before that bytecode;
    returns ``call()``'s results (or the exceptions it raised), one per bytecode, and the exceptions
    ``action`` raised."""
    import inspect
    import sys

    code = inspect.unwrap(function).__code__  # the method's own frame, inside any wrapper taking the token
    results, refused = [], []
    k = 0
    while True:
        count = [0]
        done = [False]

        def local(frame, event, arg, target=k):
            if event == "opcode":
                if count[0] == target and not done[0]:
                    done[0] = True
                    try:
                        action()
                    except Exception as exc:  # noqa: BLE001 - ConcurrentUseError is the promised outcome
                        refused.append(exc)
                count[0] += 1
            return local

        def tracer(frame, event, arg):
            if frame.f_code is code:
                frame.f_trace_opcodes = True
                return local
            return None

        sys.settrace(tracer)
        try:
            results.append(call())
        except Exception as exc:  # noqa: BLE001 - compared by the caller
            results.append(exc)
        finally:
            sys.settrace(None)
        if not done[0]:
            return results[:-1], refused
        k += 1


@pytest.mark.parametrize("method", ["evaluate_cp", "evaluate_moves_cp"])
def test_centipawns_while_another_thread_pushes_or_reassigns(method):
    """Thread safety: ``evaluate_cp`` and ``evaluate_moves_cp`` released the in-use token after the value
    and then read the side to move and the network's units per pawn; another thread's ``push`` or
    ``network`` assignment in that gap was not refused with ``ConcurrentUseError`` (as the docs promise for
    a call made while another is inside one) and the result mixed them: the value of one position with
    the side to move of the next (White's view with the wrong sign), or one network's value in another's
    units.  Now the token is held for the whole call: at any bytecode the other call is refused or comes
    first, and the result is that of one position and one network."""
    import dataclasses

    import chess

    from nnue_infer import ConcurrentUseError, Evaluator, FloatNetwork, quantise, stockfish_15_1_architecture

    arch = stockfish_15_1_architecture(32)
    first = quantise(FloatNetwork.random(arch, seed=1))
    second = quantise(FloatNetwork.random(dataclasses.replace(arch, units_per_pawn=100), seed=1))
    start = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    after = start.copy()
    after.push_san("Bb5")

    def value(net, board):
        ev = Evaluator(net)
        out = getattr(ev, method)(board, white_pov=True)
        return out.tolist() if method == "evaluate_moves_cp" else out

    allowed = {repr(value(net, b)) for net in (first, second) for b in (start, after)}
    assert len(allowed) == 4
    ev = Evaluator(first)
    for action in (lambda: ev.push(after.move_stack[-1]), lambda: setattr(ev, "network", second)):
        def run():
            ev.network = first
            ev.set_position(start)
            out = getattr(ev, method)(white_pov=True)
            return out.tolist() if method == "evaluate_moves_cp" else out

        results, refused = _interleaved(getattr(Evaluator, method), run, action)
        assert len(results) > 20 and all(isinstance(exc, ConcurrentUseError) for exc in refused), refused[:3]
        for i, got in enumerate(results):
            assert repr(got) in allowed, f"bytecode {i}: {got!r}"


def test_board_read_while_another_thread_pushes():
    """Thread safety: ``Evaluator.board`` copied the evaluator's board without the in-use token, so a thread
    reading it while another was inside ``push`` (python-chess's ``Board.push`` appends the move to the stack
    before it moves the pieces) got a board that is no position of the game: the move on its stack, the
    pieces before it (popping it then "undid" a move that was never made).  Now reading ``board`` during
    another call raises ``ConcurrentUseError`` like every other call; read alone it is the position."""
    import chess

    from nnue_infer import ConcurrentUseError, Evaluator

    ev = Evaluator()
    start = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    move = chess.Move.from_uci("f1c4")
    after = start.copy()
    after.push(move)
    seen = []

    def read():
        board = ev.board
        seen.append((board.fen(), tuple(m.uci() for m in board.move_stack)))

    def run():
        ev.set_position(start.copy(stack=False))
        ev.push(move)

    results, refused = _interleaved(chess.Board.push, run, read)
    assert len(results) > 20 and all(isinstance(exc, ConcurrentUseError) for exc in refused)
    assert set(seen) <= {(start.fen(), ()), (after.fen(), ("f1c4",))}, seen
    assert ev.board.fen() == after.fen() and ev.board.move_stack == [move]


class _InterruptedBoard(chess.Board):
    """A board whose ``parse_uci`` / ``parse_san`` first run ``interrupt`` (once): another thread acting on
    the evaluator while the parse reads the board (``Board.copy`` keeps the class, so the evaluator's own
    copy is one too)."""

    interrupt = None

    def _run_interrupt(self):
        hook, type(self).interrupt = type(self).interrupt, None
        if hook is not None:
            hook()

    def parse_uci(self, uci):
        self._run_interrupt()
        return super().parse_uci(uci)

    def parse_san(self, san):
        self._run_interrupt()
        return super().parse_san(san)


@pytest.mark.parametrize("method, text", [("push_uci", "e2e4"), ("push_san", "e4")])
def test_push_text_parses_under_the_in_use_token(method, text):
    """``push_uci`` / ``push_san`` parsed the move before taking the in-use token: a push from another
    thread could run during the parse (reading a board half pushed), and the move parsed for one position was
    then played on another (here refused as illegal; a move legal in both was played silently).  The parse
    now holds the token: the other thread's push is refused with ConcurrentUseError and the board has only
    the parsed move."""
    ev = nnue_infer.Evaluator()
    ev.set_position(_InterruptedBoard())
    other: list = []

    def push_from_another_thread():
        def run():
            try:
                ev.push(chess.Move.from_uci("g1f3"))
                other.append("pushed")
            except ConcurrentUseError as exc:
                other.append(exc)

        t = threading.Thread(target=run)
        t.start()
        t.join()

    _InterruptedBoard.interrupt = push_from_another_thread
    move = getattr(ev, method)(text)
    assert move == chess.Move.from_uci("e2e4")
    assert len(other) == 1 and isinstance(other[0], ConcurrentUseError), other
    assert ev.board.move_stack == [chess.Move.from_uci("e2e4")]
    after = chess.Board()
    after.push_uci("e2e4")
    assert ev.evaluate() == nnue_infer.evaluate(after)


def test_push_text_errors_still_name_the_move_and_change_nothing():
    ev = nnue_infer.Evaluator()
    ev.set_position(chess.Board())
    with pytest.raises(nnue_infer.IllegalMoveError, match="e2e5"):
        ev.push_uci("e2e5")
    with pytest.raises(nnue_infer.IllegalMoveError, match="Ke2"):
        ev.push_san("Ke2")
    with pytest.raises(TypeError, match="expected a UCI move string, got int"):
        ev.push_uci(7)
    assert ev.board.move_stack == [] and ev._free == [None]  # the token is back after each error


CHECKED = "rnbqkbnr/ppppp1pp/8/5p1Q/4P3/8/PPPP1PPP/RNB1KBNR b KQkq - 1 2"  # 1. e4 f5 2. Qh5+


def test_a_null_move_in_check_is_refused_by_the_api_and_changes_nothing():
    ev = nnue_infer.Evaluator()
    ev.set_position(chess.Board(CHECKED))
    for push in (lambda: ev.push(chess.Move.null()), lambda: ev.push_uci("0000"), lambda: ev.push_san("--")):
        with pytest.raises(IllegalMoveError, match="null move in check"):
            push()
        assert ev.board.fen() == CHECKED and not ev.board.move_stack
    with pytest.raises(IllegalMoveError, match="null move in check"):
        nnue_infer.evaluate_game(chess.Board(CHECKED), [chess.Move.null()])
    assert len(nnue_infer.evaluate_game(chess.Board(CHECKED), [chess.Move.null()], validate=False)) == 2


def test_push_uci_and_push_san_name_bad_moves_once_and_refuse_non_strings():
    ev = nnue_infer.Evaluator()
    with pytest.raises(IllegalMoveError) as info:
        ev.push_san("Rd1")
    assert str(info.value).count(chess.STARTING_FEN) == 1
    with pytest.raises(IllegalMoveError) as info:
        ev.push_uci("a1a8q")
    assert str(info.value).count(chess.STARTING_FEN) == 1
    for push in (ev.push_uci, ev.push_san):
        with pytest.raises(TypeError, match="move string, got NoneType"):
            push(None)
    assert ev.board.fen() == chess.STARTING_FEN and not ev.board.move_stack


START = chess.STARTING_FEN


@pytest.fixture(scope="module")
def small_network():
    from nnue_infer import FloatNetwork, quantise, stockfish_15_1_architecture

    return quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=4))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=1, max_size=60))
def test_odd_operation_sequences_keep_incremental_equal_to_fresh(network, small_network, ops):
    """Legal, illegal, wrong-side and null moves, pops past the start, set_position with move
    stacks, network swaps, evaluate_game and fresh evaluations interleaved: after every step the
    incremental value equals a fresh evaluation, and a refused move changes nothing."""
    from nnue_infer import Evaluator, IllegalMoveError

    ev = Evaluator(network)
    for op, r in ops:
        board = ev.board
        legal = list(board.legal_moves)
        if op <= 3 and legal:
            ev.push(legal[r % len(legal)])
        elif op == 4:  # a random or wrong-side move
            flipped = board.copy(stack=False)
            flipped.turn = not flipped.turn
            candidates = [chess.Move(r % 64, r // 64 % 64), *flipped.pseudo_legal_moves]
            move = candidates[r % len(candidates)]
            if not board.is_legal(move) and move:
                before = (board.fen(), board.move_stack)
                with pytest.raises(IllegalMoveError):
                    ev.push(move)
                after = ev.board
                assert (after.fen(), after.move_stack) == before
        elif op == 5:
            if board.is_check():  # a pass in check would leave the king in check: refused, nothing changes
                with pytest.raises(IllegalMoveError):
                    ev.push(chess.Move.null())
                assert ev.board.move_stack == board.move_stack
            else:
                ev.push(chess.Move.null())
        elif op == 6:
            if board.move_stack:
                ev.pop()
            else:
                with pytest.raises(IndexError):
                    ev.pop()
        elif op == 7:
            ev.set_position(board if r % 2 else board.fen())
        elif op == 8:
            ev.network = small_network if ev.network is network else network
        else:
            values = ev.evaluate_game(board.root(), board.move_stack)
            assert values[-1] == ev.evaluate(board)
        assert ev.evaluate() == ev.evaluate(ev.board)


def test_module_functions_do_not_keep_every_network_alive(small_network):
    """nnue_infer.evaluate(board, network=net) cached one evaluator per network forever: a
    program trying many networks kept them all in memory (+12 MB per L1=256 network)."""
    import gc
    import weakref

    import nnue_infer
    from nnue_infer import Network

    def copy_of(net):
        return Network(net.architecture, net.ft_biases.copy(), net.ft_weights.copy(), net.psqt_weights.copy(),
                       net.layer_weights, net.layer_biases)

    first = copy_of(small_network)
    expected = nnue_infer.evaluate(START, network=first)
    gone = weakref.ref(first)
    del first
    for _ in range(8):
        assert nnue_infer.evaluate(START, network=copy_of(small_network)) == expected
    gc.collect()
    assert gone() is None


def test_unvalidated_moves_from_empty_or_enemy_squares_change_nothing(network):
    """push(move, validate=False) from an empty square failed python-chess's assertion half-way
    through Board.push: AssertionError, with the move left on the evaluator's stack."""
    from nnue_infer import Evaluator, IllegalMoveError

    ev = Evaluator(network)
    for uci in ("e4e5", "e7e5"):
        with pytest.raises(IllegalMoveError, match="side to move"):
            ev.push(chess.Move.from_uci(uci), validate=False)
        assert ev.board.move_stack == [] and ev.board.fen() == START
        with pytest.raises(IllegalMoveError, match=r"moves\[1\]"):
            ev.evaluate_game(START, ["e2e4", uci if uci == "e4e5" else "e2e4"], validate=False)
    assert ev.evaluate() == ev.evaluate(START)


AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"


def test_evaluator_takes_a_name_or_a_path(network, network_path):
    assert nnue_infer.Evaluator("stockfish").network is nnue_infer.stockfish_15_1_network()
    assert nnue_infer.Evaluator(network_path).evaluate(AFTER_E4) == -52
    assert nnue_infer.Evaluator(str(network_path)).evaluate(AFTER_E4) == -52
    assert nnue_infer.Evaluator("default").network is nnue_infer.default_network()
    with pytest.raises(NetworkNotFoundError, match="does not exist"):
        nnue_infer.Evaluator("no-such-net.nnue")
    with pytest.raises(TypeError, match="a network file or a name"):
        nnue_infer.Evaluator(42)


def test_module_functions_take_a_name_or_a_path(network_path):
    assert nnue_infer.evaluate(AFTER_E4, "stockfish") == -52
    assert nnue_infer.evaluate(AFTER_E4, network_path) == -52
    assert nnue_infer.evaluate_batch([AFTER_E4, chess.STARTING_FEN], "stockfish").tolist() == [-52, 69]
    assert nnue_infer.evaluate_game(chess.Board(), ["e2e4"], str(network_path)).tolist() == [69, -52]


def test_module_evaluate_cp(network):
    assert nnue_infer.evaluate_cp(AFTER_E4, network) == -14
    assert nnue_infer.evaluate_cp(AFTER_E4, "stockfish", white_pov=True) == 14
    assert nnue_infer.evaluate_cp(AFTER_E4) == nnue_infer.Evaluator().evaluate_cp(AFTER_E4)
    results = []
    threads = [threading.Thread(target=lambda: results.append(nnue_infer.evaluate_cp(AFTER_E4, "stockfish")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [-14] * 4


def test_push_uci_and_push_san(network):
    ev = nnue_infer.Evaluator(network)
    assert ev.push_uci("e2e4") == chess.Move.from_uci("e2e4")
    assert ev.push_san("e5") == chess.Move.from_uci("e7e5")
    ev.push_san("Nf3")
    ev.push_uci("b8c6")
    ev.push_san("Bc4")
    ev.push_san("Nf6")
    assert ev.push_san("O-O") == chess.Move.from_uci("e1g1")
    assert ev.evaluate() == -66 and ev.evaluate() == ev.evaluate(ev.board)
    with pytest.raises(TypeError, match=r"push_uci\('e2e4'\) and push_san\('e4'\) take text"):
        ev.push("e2e4")
    fen = ev.board.fen()
    for bad, push in (("e2e4", ev.push_uci), ("Ke2", ev.push_san), ("xyz", ev.push_uci), ("Nc3", ev.push_san)):
        with pytest.raises(IllegalMoveError, match=fen.split()[0].replace("/", "/")):
            push(bad)
        assert ev.board.fen() == fen  # nothing changed


def test_evaluate_game_names_an_illegal_uci_move_and_the_position_once():
    """python-chess's parse_uci message names the FEN too: it appeared twice (fresh-user trial)."""
    board = chess.Board()
    board.push_uci("e2e4")
    with pytest.raises(IllegalMoveError) as info:
        nnue_infer.evaluate_game(chess.Board(), ["e2e4", "e2e4"])
    assert str(info.value) == f"moves[1] ('e2e4') in {board.fen()}: illegal uci: 'e2e4'"


FENS = [
    chess.STARTING_FEN,
    "4k3/8/8/8/8/8/8/Q3K3 w - - 0 1",
    "q3k3/8/8/8/8/8/8/4K3 w - - 0 1",
    "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R b KQkq - 0 1",
]


GAME = ["e2e4", "e7e5", "g1f3", "b8c6", "f1c4", "g8f6", "e1g1", "f8c5"]


def small_net(ft_width: int, psqt_buckets: int, output_buckets: int, king_buckets, mirror, seed: int):
    """A random quantised Chess768 network; ``king_buckets`` None or a 64-entry table."""
    arch = Architecture("Chess768", ft_width, "pairwise", 127, 7, psqt_buckets=psqt_buckets,
                        output_buckets=output_buckets, layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")),
                        king_buckets=king_buckets, mirror=mirror)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # saturated random parameters do not matter here
        return quantise(FloatNetwork.random(arch, seed=seed))


@pytest.fixture(scope="module")
def networks(network):
    """Networks that differ in every dimension the evaluator's buffers depend on."""
    return [
        network,  # Stockfish 15.1: HalfKAv2_hm, 1024 wide, 8 PSQT buckets, 8 layer stacks
        nnue_infer.default_network(),  # Chess768, 4 mirrored king buckets, 256 wide
        quantise(FloatNetwork.random(Architecture("Chess768", 256, "pairwise", 127, 7, psqt_buckets=0,
                                                  output_buckets=1, layers=(HiddenLayer(1, "none"),)))),
        small_net(64, 8, 8, None, None, 1),
        small_net(64, 0, 2, tuple(sq // 8 for sq in range(64)), "none", 2),  # 8 king buckets, no mirror
        small_net(32, 4, 4, tuple(sq % 2 for sq in range(64)), "e-h", 3),
    ]


def reference_values(net) -> dict:
    """What a fresh Evaluator on ``net`` computes: per FEN, and along GAME."""
    ev = Evaluator(net)
    return {"fens": [ev.evaluate(f) for f in FENS],
            "game": ev.evaluate_game(chess.Board(), GAME).tolist()}


VARIANTS = [chess.variant.RacingKingsBoard(), chess.variant.AtomicBoard(), chess.variant.CrazyhouseBoard(),
            chess.variant.ThreeCheckBoard(), chess.variant.AntichessBoard(), chess.variant.HordeBoard()]


def _game_boards():
    board = chess.Board()
    yield board.copy()
    for uci in GAME:
        board.push_uci(uci)
        yield board.copy()


def _child_work(ev, queue):
    queue.put((ev.evaluate(FENS[3]), ev.evaluate_batch(FENS).tolist()))


def test_switching_networks_mid_game_gives_the_new_networks_numbers():
    """Item 1: switching to a network with other PSQT buckets raised half-way and left the evaluator
    half-switched (``ev.network is b`` but evaluate gave the old network's value: 1962, want 133)."""
    a = nnue_infer.default_network()
    b = quantise(FloatNetwork.random(Architecture("Chess768", 256, "pairwise", 127, 7, psqt_buckets=0,
                                                  output_buckets=1, layers=(HiddenLayer(1, "none"),))))
    ev = Evaluator(a)
    ev.evaluate("4k3/8/8/8/8/8/8/Q3K3 w - - 0 1")
    ev.network = b
    fen = "q3k3/8/8/8/8/8/8/4K3 w - - 0 1"
    assert ev.network is b
    assert ev.evaluate(fen) == ev.evaluate_batch([fen])[0] == Evaluator(b).evaluate(fen)


def test_random_switches_give_the_new_networks_numbers(networks):
    """Item 1: random switches among networks of different widths, PSQT buckets, king buckets and
    mirroring, mid-game; every path (fresh, incremental, batch, game, trace) gives a fresh evaluator's numbers."""
    refs = [reference_values(n) for n in networks]
    rng = random.Random(8)
    ev = Evaluator(networks[0])
    ev.set_position(chess.Board())
    for step in range(60):
        k = rng.randrange(len(networks))
        ev.network = networks[k]
        assert ev.network is networks[k]
        ref = refs[k]
        ply = rng.randrange(len(GAME) + 1)  # the board is kept over the switch: move along it
        while len(ev.board.move_stack) > ply:
            ev.pop()
        while len(ev.board.move_stack) < ply:
            ev.push(chess.Move.from_uci(GAME[len(ev.board.move_stack)]))
        assert ev.evaluate() == ref["game"][ply], (step, k, ply)
        i = rng.randrange(len(FENS))
        assert ev.evaluate(FENS[i]) == ref["fens"][i]
        assert ev.evaluate_batch(FENS).tolist() == ref["fens"]
        assert ev.evaluate_game(chess.Board(), GAME).tolist() == ref["game"]
        assert ev.trace(FENS[i]).value == ref["fens"][i]
        assert ev.evaluate() == ref["game"][ply]  # the incremental state survived the other calls


def test_a_failed_switch_changes_nothing(networks, monkeypatch):
    """Item 1: a switch that fails (while building the new state, or for a non-network) raises and
    leaves the evaluator exactly as it was, still giving the old network's numbers."""
    ev = Evaluator(networks[1])
    ev.set_position(chess.Board())
    for uci in GAME[:3]:
        ev.push(chess.Move.from_uci(uci))
    before = (ev.evaluate(), ev.evaluate(FENS[3]), ev.board.fen())
    with pytest.raises(TypeError, match="expected a Network"):
        ev.network = 42
    with pytest.raises(FileNotFoundError):
        ev.network = "no-such-net.nnue"
    import nnue_infer.evaluator as E

    def broken(arch):
        raise MemoryError("simulated failure while building the new state")

    monkeypatch.setattr(E, "architecture_features", broken)
    with pytest.raises(MemoryError):
        ev.network = networks[0]
    monkeypatch.undo()
    assert ev.network is networks[1]
    assert (ev.evaluate(), ev.evaluate(FENS[3]), ev.board.fen()) == before
    ev.pop()
    assert ev.evaluate() == reference_values(networks[1])["game"][2]


@pytest.mark.parametrize("bad", [None, 42, b"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", ["a"]])
def test_module_evaluate_refuses_non_boards(bad):
    """Item 7: ``nnue_infer.evaluate(None)`` returned the thread-cached evaluator's current position (69)."""
    nnue_infer.evaluate(chess.STARTING_FEN)  # the cached evaluator exists
    with pytest.raises(TypeError, match="expected a chess.Board or a FEN string"):
        nnue_infer.evaluate(bad)


def test_evaluate_game_refuses_a_single_uci_string(evaluator):
    """Item 11: ``evaluate_game(board, "e2e4")`` iterated the string's characters."""
    with pytest.raises(TypeError, match="single str"):
        evaluator.evaluate_game(chess.Board(), "e2e4")
    with pytest.raises(TypeError, match="single Move"):
        nnue_infer.evaluate_game(chess.Board(), chess.Move.from_uci("e2e4"))


@pytest.mark.parametrize("validate", [True, False])
def test_push_none_is_a_type_error(network, validate):
    """Item 11: ``push(None, validate=False)`` raised ``AttributeError``; nothing changes."""
    ev = Evaluator(network)
    before = ev.evaluate()
    with pytest.raises(TypeError, match="expected a chess.Move, got NoneType"):
        ev.push(None, validate=validate)
    assert ev.board.move_stack == [] and ev.evaluate() == before


@pytest.mark.parametrize("board", VARIANTS, ids=lambda b: b.uci_variant)
def test_variant_boards_are_refused_everywhere(evaluator, board):
    """Item 12: variant boards were evaluated by evaluate, evaluate_batch and trace but refused
    by set_position and evaluate_game; now every entry point refuses them with one message."""
    message = f"chess variant '{board.uci_variant}' \\({type(board).__name__}\\) is not supported"
    calls = [
        lambda: evaluator.evaluate(board),
        lambda: evaluator.evaluate_cp(board),
        lambda: evaluator.evaluate_batch([chess.Board(), board]),
        lambda: evaluator.trace(board),
        lambda: evaluator.set_position(board),
        lambda: evaluator.evaluate_game(board, []),
        lambda: nnue_infer.evaluate(board),
        lambda: nnue_infer.evaluate_batch([board]),
        lambda: nnue_infer.evaluate_game(board, []),
    ]
    for call in calls:
        with pytest.raises(PositionError, match=message):
            call()
    assert evaluator.evaluate(chess.Board(chess960=True)) == evaluator.evaluate(chess.Board())  # Chess960 is fine


def test_concurrent_use_raises(network):
    """Item 14: a call made while another thread is inside a call on the same Evaluator raises
    ``ConcurrentUseError`` instead of corrupting the other call's accumulators."""
    ev = Evaluator(network)
    inside, release = threading.Event(), threading.Event()
    result = {}

    class SlowBoard(chess.Board):  # evaluate_game copies the start board while holding the evaluator
        def copy(self, *args, **kwargs):
            inside.set()
            release.wait(10)
            return chess.Board(self.fen()).copy(*args, **kwargs)

    def worker():
        result["values"] = ev.evaluate_game(SlowBoard(), GAME).tolist()

    t = threading.Thread(target=worker)
    t.start()
    assert inside.wait(10)
    calls = [ev.evaluate, lambda: ev.evaluate(FENS[1]), lambda: ev.push(chess.Move.from_uci("e2e4")), ev.pop,
             lambda: ev.set_position(chess.Board()), lambda: ev.trace(FENS[1]), ev.refresh,
             lambda: ev.evaluate_game(chess.Board(), GAME), lambda: ev.evaluate_cp(FENS[1])]
    for call in calls:
        with pytest.raises(ConcurrentUseError, match="used by another thread at the same time"):
            call()
    with pytest.raises(ConcurrentUseError):
        ev.network = nnue_infer.default_network()
    assert ev.evaluate_batch(FENS).tolist() == Evaluator(network).evaluate_batch(FENS).tolist()  # safe, allowed
    release.set()
    t.join()
    assert result["values"] == Evaluator(network).evaluate_game(chess.Board(), GAME).tolist()
    assert ev.network is network and ev.evaluate() == 69  # usable again, unchanged


def test_reentrant_use_is_named(network):
    """A call from code the evaluator runs inside one of its calls (here a method of a board subclass given to
    evaluate_game; a move iterator is read before the call takes the evaluator) raises ConcurrentUseError whose
    message names that case, not only another thread."""
    ev = Evaluator(network)

    class PeekingBoard(chess.Board):
        def copy(self, *args, **kwargs):
            ev.evaluate()
            return chess.Board(self.fen()).copy(*args, **kwargs)

    with pytest.raises(ConcurrentUseError, match="called again from code that call runs"):
        ev.evaluate_game(PeekingBoard(), GAME[:2])
    assert ev.evaluate_game(chess.Board(), GAME[:2]).tolist() == Evaluator(network).evaluate_game(chess.Board(), GAME[:2]).tolist()


def test_threads_sharing_an_evaluator_never_get_a_wrong_number(network):
    """Item 14: 4 threads evaluating on one Evaluator (13 of 7,998 results were wrong before):
    every call returns the right number or raises ConcurrentUseError."""
    ev = Evaluator(network)
    ref = Evaluator(network)
    fens = [b.fen() for b in _game_boards()] + FENS
    truth = [ref.evaluate(f) for f in fens]
    game_truth = ref.evaluate_game(chess.Board(), GAME).tolist()
    wrong, counts = [], {"done": 0, "refused": 0}
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible

    def worker(seed):
        rng = random.Random(seed)
        for _ in range(400):
            i = rng.randrange(len(fens))
            try:
                if rng.random() < 0.8:
                    got, want = ev.evaluate(fens[i]), truth[i]
                else:
                    got, want = ev.evaluate_game(chess.Board(), GAME).tolist(), game_truth
            except ConcurrentUseError:
                counts["refused"] += 1
                continue
            counts["done"] += 1
            if got != want:
                wrong.append((seed, i, got, want))

    try:
        threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert wrong == []
    assert counts["done"] + counts["refused"] == 1600
    assert counts["refused"] > 0  # the threads did collide, and it was reported


def test_evaluate_batch_refuses_none():
    with pytest.raises(TypeError, match="expected a sequence of FEN strings or boards, got NoneType"):
        nnue_infer.evaluate_batch(None)
    assert np.array_equal(nnue_infer.evaluate_batch([]), np.empty(0, np.int32))


def test_evaluators_pickle_and_deepcopy(network):
    """The in-use lock (item 14) made Evaluators unpicklable ("cannot pickle '_thread.lock'"):
    spawn pools and ``copy.deepcopy`` need them; the copy follows the same game."""
    import copy
    import pickle

    ev = Evaluator(network)
    for uci in GAME[:5]:
        ev.push(chess.Move.from_uci(uci))
    want = ev.evaluate()
    for clone in (pickle.loads(pickle.dumps(ev)), copy.deepcopy(ev)):
        assert clone.evaluate() == want and clone.board.fen() == ev.board.fen()
        clone.push(chess.Move.from_uci(GAME[5]))
        assert clone.evaluate() == Evaluator(network).evaluate(clone.board)
    assert ev.evaluate() == want  # the original is untouched


def test_a_forked_child_is_not_blocked_by_locks_held_in_the_parent(network):
    """A thread of the parent inside ``evaluate_game`` (holding the evaluator's lock) and one holding
    the batch lock at the moment of a fork: the child's evaluator and batches must still work
    (before: ConcurrentUseError / a batch waiting forever in the child)."""
    import multiprocessing as mp

    import nnue_infer.batch as B

    ev = Evaluator(network)
    truth = (Evaluator(network).evaluate(FENS[3]), Evaluator(network).evaluate_batch(FENS).tolist())
    inside, release = threading.Event(), threading.Event()

    def slow_moves():
        inside.set()
        release.wait(30)
        yield from GAME

    t = threading.Thread(target=lambda: ev.evaluate_game(chess.Board(), slow_moves()))
    t.start()
    assert inside.wait(10)
    B.PARALLEL_LOCK.acquire()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork() with threads running
            ctx = mp.get_context("fork")
            queue = ctx.Queue()
            child = ctx.Process(target=_child_work, args=(ev, queue))
            child.start()
        child.join(120)
        assert child.exitcode == 0, "the child hung or failed"
        assert queue.get(timeout=10) == truth
    finally:
        B.PARALLEL_LOCK.release()
        release.set()
        t.join()

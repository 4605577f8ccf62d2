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

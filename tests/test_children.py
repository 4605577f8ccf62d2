"""Every child of a position in one call (Evaluator.evaluate_moves, evaluate_children_batch): the
same numbers as ``push(move)`` + ``evaluate()`` + ``pop()`` over ``board.legal_moves``, on every
network the suite has (default, Stockfish 15.1, and the 16-19 nets from npm when fetched).

Also the FEN string path of ``evaluate`` (compiled parser): the values of ``chess.Board(fen)`` and
the errors of python-chess's strict reading.
"""

from __future__ import annotations

import random

import chess
import pytest

import nnue_infer
from nnue_infer import Evaluator, FenError, IllegalMoveError, PositionError
from nnue_infer.children import decode_moves
from nnue_infer.errors import NetworkNotFoundError
from nnue_infer.positions import board_from_fen
from nnue_infer.resources import default_network, known_network

from test_movegen import CHESS960_TRICKY, TRICKY

NETS = ["default", "sf15.1", "sf16", "sf17.1", "sf18", "sf19"]


@pytest.fixture(scope="module", params=NETS)
def net(request, network) -> nnue_infer.Network:
    if request.param == "sf15.1":
        return network
    if request.param == "default":
        return default_network()
    try:
        return known_network(request.param)
    except NetworkNotFoundError as exc:
        pytest.skip(str(exc))


def loop_values(ev: Evaluator, board: chess.Board, moves=None) -> list[int]:
    """The oracle: push / evaluate / pop per move on a second evaluator."""
    ev.set_position(board)
    out = []
    for move in board.legal_moves if moves is None else moves:
        ev.push(move)
        out.append(ev.evaluate())
        ev.pop()
    return out


def sample_positions(corpus, step: int) -> list[chess.Board]:
    """Dev positions, tricky ones, Chess960 starts (back ranks emptied so castling is possible) and
    positions of random games (standard and Chess960)."""
    boards = [chess.Board(row["fen"], chess960=row["chess960"]) for row in corpus[::step]]
    boards += [chess.Board(fen) for fen in TRICKY] + [chess.Board(fen, chess960=True) for fen in CHESS960_TRICKY]
    rng = random.Random(7)
    for n in rng.sample(range(960), 4):
        board = chess.Board.from_chess960_pos(n)
        for sq in chess.SquareSet(board.occupied & (chess.BB_RANK_1 | chess.BB_RANK_8) & ~board.kings & ~board.rooks):
            board.remove_piece_at(sq)
        boards.append(board)
    for game in range(6):
        board = chess.Board.from_chess960_pos(rng.randrange(960)) if game % 2 else chess.Board()
        for ply in range(120):
            moves = list(board.legal_moves)
            if not moves:
                break
            if ply % 15 == 7:
                boards.append(board.copy())
            board.push(rng.choice(moves))
    return boards


def test_equal_to_push_evaluate_pop(net, corpus):
    ev, oracle = Evaluator(net), Evaluator(net)
    boards = sample_positions(corpus, 60 if net.architecture.ft_width < 2048 else 150)
    for board in boards:
        expected = loop_values(oracle, board)
        assert ev.evaluate_moves(board).tolist() == expected, board.fen()
        ev.set_position(board)  # the current position: its ply and the next of the accumulator stack
        assert ev.evaluate_moves().tolist() == expected, board.fen()
        assert ev.evaluate() == oracle.evaluate(board)
    offsets, codes, values = ev.evaluate_children_batch(boards[:40])
    for i, board in enumerate(boards[:40]):
        assert decode_moves(codes[offsets[i]:offsets[i + 1]]) == list(board.legal_moves)
        assert values[offsets[i]:offsets[i + 1]].tolist() == loop_values(oracle, board), board.fen()


@pytest.fixture(scope="module")
def ev(network) -> Evaluator:
    return Evaluator(network)


@pytest.fixture(scope="module")
def oracle(network) -> Evaluator:
    return Evaluator(network)


def test_given_moves(ev, oracle):
    board = chess.Board("r3k2r/1P6/8/8/8/8/6p1/R3K2R w KQkq - 0 1")
    moves = list(board.legal_moves)
    some = [moves[5], moves[0], moves[5], moves[-1]]
    assert ev.evaluate_moves(board, some).tolist() == loop_values(oracle, board, some)
    assert ev.evaluate_moves(board, [m.uci() for m in some]).tolist() == loop_values(oracle, board, some)
    # castling as king-takes-rook is accepted in standard chess (as python-chess's parse_uci does)
    assert ev.evaluate_moves(board, ["e1a1", "e1c1"]).tolist() == 2 * loop_values(oracle, board, [chess.Move.from_uci("e1c1")])
    with pytest.raises(IllegalMoveError, match=r"moves\[0\] \('e1h1'\) is not a legal move"):  # g2 attacks f1
        ev.evaluate_moves(board, ["e1h1"])
    assert ev.evaluate_moves(board, []).tolist() == []
    many = moves * (1 + 300 // len(moves))  # more than the evaluator's buffer holds: a buffer of the call's own
    first = ev.evaluate_moves(board, many)
    assert first.tolist() == loop_values(oracle, board, moves) * (1 + 300 // len(moves))
    ev.evaluate_moves(chess.Board())  # results are copies, not views of a buffer the next call reuses
    assert first.tolist() == loop_values(oracle, board, moves) * (1 + 300 // len(moves))
    c960 = chess.Board("1rk1r3/8/8/8/8/8/8/1RK1R3 w EBeb - 0 1", chess960=True)
    castle = [m for m in c960.legal_moves if c960.is_castling(m)]
    assert castle and ev.evaluate_moves(c960, castle).tolist() == loop_values(oracle, c960, castle)


def test_promoted_king(ev, oracle):
    """A king marked promoted (``K~``): python-chess ignores the file pin of an en passant capturer."""
    board = chess.Board("4r2k/8/8/3pP3/8/8/8/4K~3 w - d6 0 1")
    assert chess.Move.from_uci("e5d6") in board.legal_moves
    assert ev.evaluate_moves(board).tolist() == loop_values(oracle, board)
    assert ev.evaluate_moves(board, ["e5d6"]).tolist() == loop_values(oracle, board, [chess.Move.from_uci("e5d6")])
    with pytest.raises(PositionError, match="row 0: the side to move's king is marked promoted"):
        ev.evaluate_children_batch([board])


def test_refusals_change_nothing(ev, oracle):
    start = chess.Board()
    ev.set_position(start)
    ev.push(chess.Move.from_uci("e2e4"))
    before = ev.evaluate()
    with pytest.raises(IllegalMoveError, match=r"moves\[1\] \('e2e5'\) is not a legal move"):
        ev.evaluate_moves(start, ["e2e4", "e2e5"])
    with pytest.raises(IllegalMoveError, match=r"moves\[0\] is a null move"):
        ev.evaluate_moves(start, [chess.Move.null()])
    with pytest.raises(IllegalMoveError, match=r"moves\[0\] \('e7e8x'\)"):
        ev.evaluate_moves(start, ["e7e8x"])
    with pytest.raises(TypeError, match=r"moves\[0\]: expected a chess.Move or a UCI string, got int"):
        ev.evaluate_moves(start, [1])
    with pytest.raises(TypeError, match="single str"):
        ev.evaluate_moves(start, "e2e4")
    with pytest.raises(PositionError, match="side not to move is in check"):
        ev.evaluate_moves(chess.Board("4k3/8/8/8/8/8/4R3/4K3 w - - 0 1"))
    with pytest.raises(PositionError, match="White must have exactly one king"):
        ev.evaluate_moves(chess.Board("4k3/8/8/8/8/8/8/8 w - - 0 1"))
    with pytest.raises(FenError, match="castling rights"):
        ev.evaluate_moves("4k3/8/8/8/8/8/8/4K3 w")
    with pytest.raises(PositionError, match="row 1: .*Black must have exactly one king"):
        ev.evaluate_children_batch([chess.Board(), "4K3/8/8/8/8/8/8/8 w - - 0 1"])
    assert ev.evaluate() == before == oracle.evaluate(ev.board)
    ev.push(chess.Move.from_uci("e7e5"))
    assert ev.evaluate() == oracle.evaluate(ev.board)
    assert ev.evaluate_moves().tolist() == loop_values(oracle, ev.board)


def test_incremental_state_kept(ev, oracle):
    """evaluate_moves(board) between pushes leaves the followed game's values intact."""
    game = chess.Board()
    ev.set_position(game)
    rng = random.Random(3)
    for _ in range(40):
        move = rng.choice(list(game.legal_moves))
        game.push(move)
        ev.push(move)
        other = chess.Board(rng.choice(TRICKY))
        assert ev.evaluate_moves(other).tolist() == loop_values(oracle, other)
        assert ev.evaluate() == oracle.evaluate(game)
        if rng.random() < 0.3:
            assert ev.evaluate_moves().tolist() == loop_values(oracle, game)
        if rng.random() < 0.2:
            ev.pop()
            game.pop()
            assert ev.evaluate() == oracle.evaluate(game)


def test_cp_and_module_function(ev, network):
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    expected = []
    for move in board.legal_moves:
        board.push(move)
        expected.append(ev.evaluate_cp(board, white_pov=True))
        board.pop()
    assert ev.evaluate_moves_cp(board, white_pov=True).tolist() == expected
    assert (nnue_infer.evaluate_moves(board, network=network) == ev.evaluate_moves(board)).all()
    offsets, uci, _ = ev.evaluate_children_batch([board.fen(), board], uci=True)
    assert uci == 2 * [m.uci() for m in board.legal_moves] and offsets.tolist() == [0, len(uci) // 2, len(uci)]


def test_fen_string_path(ev, corpus):
    """evaluate(FEN) through the compiled parser: the value of chess.Board(fen), and python-chess's
    strict reading's errors for FENs it refuses."""
    for row in corpus[::7]:
        assert ev.evaluate(row["fen"]) == ev.evaluate(chess.Board(row["fen"])), row["fen"]
    for fen in ["8/8/8/8/8/8/8/8 w - - 0 1", "4k3/8/8/8/8/8/8/4K3 w", "4k3/8/8/8/8/8/8/4K3 w - - 0",
                "4k3/8/8/8/8/8/8/4K2X w - - 0 1", "4k3/8/8/8/8/8/8/4K3 w - - 0 1 extra", "",
                "4k3/8/8/8/8/8/8/4K3 x - - 0 1", "4k3/8/8/8/8/8/8/4K3\u3000w - - 0 1"]:
        try:
            board = board_from_fen(fen, strict=True, hint="api")
        except ValueError as exc:
            with pytest.raises(type(exc)) as info:
                ev.evaluate(fen)
            assert str(info.value) == str(exc)
            continue
        try:
            expected = ev.evaluate(board)
        except PositionError as exc:
            with pytest.raises(PositionError) as info:
                ev.evaluate(fen)
            assert str(info.value) == str(exc)
        else:
            assert ev.evaluate(fen) == expected


def test_cli_eval_moves(capsys, ev, oracle):
    """``nnue-infer eval --moves``: every legal move once, best first for the mover, values of the loop."""
    import json

    from nnue_infer.cli import main

    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    board = chess.Board(fen)
    expected = dict(zip([m.uci() for m in board.legal_moves], loop_values(oracle, board)))
    assert main(["eval", "--net", "stockfish", "--moves", "--json", fen]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["move"]: r["value"] for r in rows} == expected and len(rows) == len(expected)
    assert [r["value"] for r in rows] == sorted(expected.values())  # children have Black to move: lowest first
    # cp is the child's side to move (as eval's rows), cp_mover the text's cp (the sign differed unnamed: fresh-user)
    assert all(r["cp_mover"] == -r["cp"] == r["cp_white"] for r in rows)
    assert main(["eval", "--net", "stockfish", "--moves", fen]) == 0
    lines = capsys.readouterr().out.splitlines()
    best = min(expected, key=expected.get)
    assert lines[0] == f"{fen}\t27 legal moves, best first for White"
    assert lines[1].startswith(f"{board.san(chess.Move.from_uci(best))}\t{best}\tvalue {expected[best]}\t")
    assert main(["eval", "--moves", "4k3/8/8/8/8/8/4R3/4K3 w - - 0 1"]) == 1
    assert "side not to move is in check" in capsys.readouterr().err

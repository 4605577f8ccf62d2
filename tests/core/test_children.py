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

from tests.kernels.test_movegen import CHESS960_TRICKY, TRICKY

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


# -- hostile input ---------------------------------------------------------------------------------------------------

#: 29 pieces, one king each, nothing on a back rank a pawn could not stand on: a position the network
#: represents, with 271 legal moves for White (found by hill climbing on python-chess's move count).
MANY_MOVES = "BQQQQQBk/Q5RB/Q6Q/Q6Q/Q6Q/Q6Q/Q6Q/KQQQQQQQ w - - 0 1"


def test_evaluate_moves_names_the_illegal_move_of_an_iterator():
    """Children evaluation: ``moves=`` is documented as an iterable, but an illegal move given through
    an iterator or generator raised ``IndexError: list index out of range`` (the error message re-read
    the already consumed iterator to quote the move) from ``evaluate_moves``, ``evaluate_moves_cp``
    and the module-level ``evaluate_moves``.  Now it is the ``IllegalMoveError`` a list gives, naming
    the index and the move, and the evaluator is unchanged."""
    import chess

    import nnue_infer
    from nnue_infer import Evaluator, IllegalMoveError

    board = chess.Board()
    ev = Evaluator()
    ev.push_uci("g1f3")
    message = f"moves[1] ('e1g1') is not a legal move in {chess.STARTING_FEN}"
    for call in (lambda m: ev.evaluate_moves(board, m), lambda m: ev.evaluate_moves_cp(board, m),
                 lambda m: nnue_infer.evaluate_moves(board, m)):
        for moves in (iter(["e2e4", "e1g1"]), (m for m in ["e2e4", "e1g1"]), map(str, ["e2e4", "e1g1"])):
            with pytest.raises(IllegalMoveError) as info:
                call(moves)
            assert str(info.value) == message
    assert ev.board.fen() == "rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1"
    assert ev.evaluate() == ev.evaluate(ev.board)
    assert ev.evaluate_moves(board, iter(["e2e4", "d2d4"])).tolist() == ev.evaluate_moves(board, ["e2e4", "d2d4"]).tolist()


def test_children_of_a_position_with_more_than_256_moves():
    """Children evaluation of positions with many moves: the move generator's buffers held 256 moves
    ("most legal moves of any chess position, 218, rounded up"), but the evaluator accepts any
    position with one king a side and at most 32 pieces, and one with 271 legal moves made
    ``evaluate_moves`` return 256 values (15 moves silently missing) and ``evaluate_children_batch``
    write past its buffers (glibc: "free(): invalid next size", the process aborted).  The buffers now
    hold any such position's moves (at most 30 pieces x 27 + 10 for the king = 820, rounded up to
    1,024); every child equals push / evaluate / pop, in ``board.legal_moves`` order."""
    import json
    import subprocess
    import sys

    import chess

    from nnue_infer import Evaluator

    board = chess.Board(MANY_MOVES)
    legal = list(board.legal_moves)
    assert len(legal) == 271
    ev = Evaluator()
    expected = []
    for move in legal:
        child = board.copy(stack=False)
        child.push(move)
        expected.append(ev.evaluate(child))
    assert ev.evaluate_moves(board).tolist() == expected
    script = (
        "import json, chess, nnue_infer\n"
        f"offsets, moves, values = nnue_infer.Evaluator().evaluate_children_batch([{MANY_MOVES!r}, chess.Board()], "
        "uci=True)\n"
        "print(json.dumps([offsets.tolist(), moves, values.tolist()]))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]  # before: aborted by glibc (heap overwritten)
    offsets, moves, values = json.loads(run.stdout)
    start = list(chess.Board().legal_moves)
    assert offsets == [0, 271, 291]
    assert moves == [m.uci() for m in legal + start]
    assert values[:271] == expected and values[271:] == ev.evaluate_moves(chess.Board()).tolist()


START_E5 = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"


def test_moves_generator_may_read_the_evaluators_board():
    """Item 1 (Evaluator.board takes the in-use token, eb8e8d9): a generator of moves given to
    ``evaluate_moves`` is read while the call holds the token, so one filtering the current position's
    moves by ``ev.board`` (``ev.evaluate_moves(moves=(m for m in ... if ev.board.is_capture(m)))``)
    raised ConcurrentUseError in the caller's own thread; it worked before the session.  The moves are
    now read before the token is taken, for ``evaluate_moves`` and ``evaluate_moves_cp``."""
    ev = nnue_infer.Evaluator()
    board = chess.Board(START_E5)
    ev.set_position(board)
    captures = [m for m in board.legal_moves if board.is_capture(m)]
    assert captures  # Nxe5
    expected = ev.evaluate_moves(moves=captures)
    values = ev.evaluate_moves(moves=(m for m in list(ev.board.legal_moves) if ev.board.is_capture(m)))
    assert values.tolist() == expected.tolist()
    cps = ev.evaluate_moves_cp(moves=(m for m in list(ev.board.legal_moves) if ev.board.is_capture(m)))
    assert cps.tolist() == ev.evaluate_moves_cp(moves=captures).tolist()


def test_evaluate_game_moves_generator_may_read_the_evaluators_board():
    """``evaluate_game`` read its moves while holding the in-use token, so a generator of moves reading
    ``ev.board`` raised ConcurrentUseError in the caller's own thread (71a6d4c mended ``evaluate_moves``);
    so did the module-level ``evaluate_game`` given a generator calling ``nnue_infer.evaluate`` (the same
    per-thread evaluator).  The moves are now read into a list before the token is taken."""
    ev = nnue_infer.Evaluator()
    ev.set_position(chess.Board(START_E5))
    board = chess.Board(START_E5)
    captures = [m for m in board.legal_moves if board.is_capture(m)]
    assert captures  # Nxe5
    expected = ev.evaluate_game(START_E5, captures[:1])
    values = ev.evaluate_game(START_E5, (m for m in list(ev.board.legal_moves) if ev.board.is_capture(m)))
    assert values.tolist() == expected.tolist()
    moves = ["e2e4", "e7e5", "g1f3"]
    seen = []

    def moves_noting_their_values():
        b = chess.Board()
        for uci in moves:
            seen.append(nnue_infer.evaluate(b))
            b.push_uci(uci)
            yield uci

    values = nnue_infer.evaluate_game(chess.Board(), moves_noting_their_values())
    assert values.tolist() == nnue_infer.evaluate_game(chess.Board(), moves).tolist()
    assert seen == values[:-1].tolist()


def test_evaluate_children_batch_positions_generator_may_read_the_evaluators_board():
    """``evaluate_children_batch`` likewise read its positions under the token."""
    ev = nnue_infer.Evaluator()
    ev.set_position(chess.Board(START_E5))
    expected = ev.evaluate_children_batch([START_E5, chess.STARTING_FEN], uci=True)
    got = ev.evaluate_children_batch((ev.board.fen() if i == 0 else chess.STARTING_FEN for i in range(2)), uci=True)
    assert got[0].tolist() == expected[0].tolist() and got[1] == expected[1]
    assert got[2].tolist() == expected[2].tolist()
    with pytest.raises(TypeError, match="single str"):
        ev.evaluate_children_batch(START_E5)

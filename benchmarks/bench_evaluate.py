"""Single positions: fresh ``evaluate(board)``, ``push(move)`` + ``evaluate()``, ``pop()``."""

from __future__ import annotations

import chess
import pytest
from common import cycling


def test_evaluate_board(benchmark, evaluator, boards):
    nxt = cycling(boards)
    benchmark(lambda: evaluator.evaluate(nxt()))


def test_evaluate_fen_string(benchmark, evaluator, fens):
    nxt = cycling(fens)
    benchmark(lambda: evaluator.evaluate(nxt()))


def test_board_push_python_chess(benchmark, games):
    """python-chess's own ``Board.push``: the floor under ``Evaluator.push``."""
    start, moves = max(games, key=lambda g: len(g[1]))

    def setup():
        return (start.copy(), moves), {}

    def play(board, moves):
        for move in moves:
            board.push(move)

    benchmark.pedantic(play, setup=setup, rounds=50)
    benchmark.extra_info["moves_per_round"] = len(moves)


@pytest.mark.parametrize("kind", ["non-king", "king"])
def test_push_evaluate(benchmark, evaluator, games, kind):
    """One ``push`` + ``evaluate()`` after a position whose next move is of ``kind``."""
    cases = []
    for start, moves in games[:60]:
        board = start.copy()
        for move in moves:
            if (board.piece_type_at(move.from_square) == chess.KING) == (kind == "king"):
                cases.append((board.copy(), move))
            board.push(move)
    nxt = cycling(cases)

    def setup():
        board, move = nxt()
        evaluator.set_position(board)
        evaluator.evaluate()
        return (move,), {}

    def run(move):
        evaluator.push(move)
        evaluator.evaluate()

    benchmark.pedantic(run, setup=setup, rounds=2000)


def test_pop(benchmark, evaluator, games):
    """``pop()`` of an evaluated ``push``."""
    start, moves = games[0]

    def setup():
        evaluator.set_position(start)
        evaluator.push(moves[0])
        evaluator.evaluate()
        return (), {}

    benchmark.pedantic(evaluator.pop, setup=setup, rounds=2000)

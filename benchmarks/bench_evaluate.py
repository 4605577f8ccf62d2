"""Single positions, fresh (full refresh): ``evaluate(board)`` and ``evaluate(fen)``.

Incremental operations (push, evaluate, pop) are in ``bench_incremental.py``.
"""

from __future__ import annotations

from common import cycling


def test_evaluate_board(benchmark, evaluator, boards):
    nxt = cycling(boards)
    benchmark(lambda: evaluator.evaluate(nxt()))


def test_evaluate_fen_string(benchmark, evaluator, fens):
    nxt = cycling(fens)
    benchmark(lambda: evaluator.evaluate(nxt()))

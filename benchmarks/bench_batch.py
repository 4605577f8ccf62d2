"""Throughput: ``evaluate_batch`` from FEN strings and from boards, ``evaluate_game`` over whole games.

Rates (positions/s, plies/s) are in each benchmark's ``extra_info``; one round evaluates the
whole dev corpus (3,298 positions) or every dev game.
"""

from __future__ import annotations

import numba
import pytest
from common import record_rate


@pytest.mark.parametrize("threads", ["all", 1])
def test_batch_fen_strings(benchmark, evaluator, fens, threads):
    before = numba.get_num_threads()
    numba.set_num_threads(before if threads == "all" else threads)
    try:
        benchmark(evaluator.evaluate_batch, fens)
    finally:
        numba.set_num_threads(before)
    benchmark.extra_info["threads"] = before if threads == "all" else threads
    record_rate(benchmark, "positions", len(fens))


def test_batch_boards(benchmark, evaluator, boards):
    benchmark(evaluator.evaluate_batch, boards)
    record_rate(benchmark, "positions", len(boards))


def test_whole_games(benchmark, evaluator, games):
    plies = sum(len(m) + 1 for _, m in games)
    benchmark.pedantic(lambda: [evaluator.evaluate_game(b, m) for b, m in games], rounds=3)
    record_rate(benchmark, "plies", plies)

"""Baselines on the same positions: plain NumPy (``numpy_baseline.py``) and Stockfish 15.1's ``eval`` over UCI.

Compare with ``bench_evaluate.py::test_evaluate_board`` / ``test_evaluate_fen_string`` and the
per-position time of ``bench_batch.py`` (``report.py`` prints the ratios).
"""

from __future__ import annotations

from common import cycling


def test_numpy_baseline_evaluate_board(benchmark, numpy_evaluator, boards):
    """Bit-identity with Stockfish: tests/core/test_evaluator_corpus.py::test_numpy_baseline_is_bit_identical_to_stockfish."""
    nxt = cycling(boards[::10])
    benchmark(lambda: numpy_evaluator.evaluate(nxt()))


def test_stockfish_eval_over_uci(benchmark, stockfish, fens):
    nxt = cycling(fens[::10])
    benchmark(lambda: stockfish.eval(nxt()))

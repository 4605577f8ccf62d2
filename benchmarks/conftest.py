"""Fixtures of the pytest-benchmark suite (``python -m pytest benchmarks --benchmark-enable -n 0``).

Everything is compiled or loaded before timing; inputs come from :mod:`common`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import chess
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from numpy_baseline import NumpyEvaluator  # noqa: E402
from stockfish_uci import StockfishEval  # noqa: E402

import nnue_infer  # noqa: E402


def pytest_report_header(config):
    return f"machine: {common.machine()}"


@pytest.fixture(scope="session")
def network() -> nnue_infer.Network:
    return nnue_infer.stockfish_15_1_network()


@pytest.fixture(scope="session")
def evaluator(network) -> nnue_infer.Evaluator:
    ev = nnue_infer.Evaluator(network)
    ev.evaluate(chess.Board())
    ev.evaluate_batch([chess.STARTING_FEN])
    ev.evaluate_batch([chess.Board()])
    return ev


@pytest.fixture(scope="session")
def fens() -> list[str]:
    return list(common.positions())


@pytest.fixture(scope="session")
def boards(fens) -> list[chess.Board]:
    return [chess.Board(f) for f in fens]


@pytest.fixture(scope="session")
def games():
    return list(common.games())


@pytest.fixture(scope="session")
def numpy_evaluator(network) -> NumpyEvaluator:
    return NumpyEvaluator(network)


@pytest.fixture(scope="session")
def stockfish():
    with StockfishEval() as sf:
        yield sf

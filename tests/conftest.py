"""Session fixtures: Stockfish 15.1 (the oracle), its network, an Evaluator and the dev corpus.

Nothing here skips: CI installs Debian's ``stockfish`` package and puts ``shared/`` beside the
clone, so a missing engine or corpus is a failure with a message saying what to do.

Where the suite's compile time goes: with ``NNUE_INFER_COMPILE_LOG=FILE`` every compile of a kernel
(a cache miss, with the kernels compiled inside it) appends one JSON line to FILE: the test that
caused it, the kernel, its process CPU seconds, the process id (``nnue_infer.kernels.cache``'s DEBUG
records).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import sys
from pathlib import Path

import chess
import numpy as np
import pytest

import nnue_infer
from nnue_infer import constants as C

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/reference.py

import reference  # noqa: E402


def shared_dir() -> Path:
    """The project's ``shared/`` directory (reference specs and data).

    Looked up as ``$NNUE_INFER_SHARED``, else ``<repo>/../shared`` (CI puts a copy of
    ``shared/`` beside the clone), else ``/work/shared``.
    """
    env = os.environ.get("NNUE_INFER_SHARED")
    if env:
        if not (Path(env) / "data" / "positions-dev.jsonl").is_file():
            pytest.fail(f"NNUE_INFER_SHARED={env} has no data/positions-dev.jsonl", pytrace=False)
        return Path(env)
    candidates = [REPO.parent / "shared", Path("/work/shared")]
    for c in candidates:
        if (c / "data" / "positions-dev.jsonl").is_file():
            return c
    pytest.fail(
        "shared data not found: set NNUE_INFER_SHARED to the directory holding data/positions-dev.jsonl "
        f"(looked in {', '.join(str(c) for c in candidates)})",
        pytrace=False,
    )


class _CompileLog(logging.Handler):
    """Appends the end of every kernel compile to ``$NNUE_INFER_COMPILE_LOG`` (see the module docstring)."""

    test = None

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "compile", None) == "end":
            with open(os.environ["NNUE_INFER_COMPILE_LOG"], "a") as f:
                f.write(json.dumps({"test": self.test, "kernel": record.args[0], "cpu_seconds":
                                    round(record.cpu_seconds, 2), "pid": os.getpid()}) + "\n")


_compile_log = _CompileLog(logging.DEBUG)
if os.environ.get("NNUE_INFER_COMPILE_LOG"):
    logging.getLogger("nnue_infer").addHandler(_compile_log)
    logging.getLogger("nnue_infer").setLevel(logging.DEBUG)


def pytest_runtest_setup(item):
    _compile_log.test = item.nodeid


@pytest.fixture(scope="session", autouse=True)
def compile_notice_already_said():
    """The command line shows the first-use compile notice once per process, in whichever command
    first compiles a kernel; in a test process that depends on the order pytest-xdist's work stealing
    gives the tests, so in-process commands never show it here (a cold cache would otherwise add it
    to the stderr of some test that checks stderr). Its own tests run commands in fresh processes
    (tests/kernels/test_cache.py)."""
    from nnue_infer.kernels import cache

    cache._Notice.done = True


def pytest_collection_modifyitems(session, config, items):
    """The longest tests go first: the per-path checks (``test_simd_paths.py``: each compiles the kernels
    of another instruction set for a network's configuration) and Stockfish 19 in pure Python
    (``tests/kernels/test_simd_paths.py``, test_every_path_runs_without_jit_*); pytest-xdist's work stealing then spreads the rest over the
    workers while they run, instead of one worker finishing alone on one of them at the end."""
    first = {"test_network_on_every_path", "test_suite_passes_on_every_path",
             "test_item4_every_path_runs_without_jit_stockfish_19"}
    items.sort(key=lambda item: getattr(item, "originalname", "") not in first)


@pytest.fixture(scope="session")
def stockfish_binary() -> Path:
    """Debian's Stockfish 15.1 binary; the test fails (never skips) when it is missing."""
    path = Path(C.DEBIAN_STOCKFISH)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"{path} not found: install Debian's stockfish package (apt-get install stockfish, "
            "Stockfish 15.1); it is the test oracle and the source of the network",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def network_path(stockfish_binary: Path) -> Path:
    """``nn-ad9b42354671.nnue``, extracted from the binary into the cache on first use."""
    return nnue_infer.stockfish_15_1_network_path(stockfish_binary)


@pytest.fixture(scope="session")
def network(network_path: Path) -> nnue_infer.Network:
    return nnue_infer.load(network_path)


@pytest.fixture(scope="session")
def net_bytes(network_path: Path) -> bytes:
    """The 47 MB network file's bytes, read once (tests write modified copies of it)."""
    return network_path.read_bytes()


@pytest.fixture(scope="session")
def evaluator(network: nnue_infer.Network) -> nnue_infer.Evaluator:
    return nnue_infer.Evaluator(network)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return shared_dir() / "data"


@pytest.fixture(scope="session")
def corpus(data_dir: Path) -> list[dict]:
    """The 3,298 dev positions with Stockfish's printed strings (``sf``) and raw integers (``raw``)."""
    with open(data_dir / "positions-dev.jsonl") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert len(rows) == 3298, f"expected 3298 dev positions, found {len(rows)}"
    return rows


@pytest.fixture(scope="session")
def corpus_raw_lines(data_dir: Path) -> dict[str, list[str]]:
    """FEN -> Stockfish's complete ``eval`` output, line by line."""
    out = {}
    with gzip.open(data_dir / "positions-dev-raw.jsonl.gz", "rt") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                out[d["fen"]] = d["lines"]
    return out


@pytest.fixture(scope="session")
def sample_boards() -> list[chess.Board]:
    """Seeded positions not taken from the corpus: 120 random playouts (20 of them Chess960)
    and 66 random placements (every piece count 2..32, twice, kings anywhere)."""
    rng = np.random.default_rng(20261130)
    boards = [reference.random_board(rng, chess960=i % 6 == 5) for i in range(120)]
    boards += [reference.random_placement(rng, n) for n in range(2, 33) for _ in range(2)]
    boards += [chess.Board(), chess.Board("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1")]
    return boards


@pytest.fixture(scope="session")
def stockfish(stockfish_binary: Path):
    """One live Stockfish 15.1 process for the whole session (see tests/stockfish_uci.py)."""
    from stockfish_uci import Stockfish

    engine = Stockfish(stockfish_binary)
    yield engine
    engine.close()


@pytest.fixture
def dask_timeouts(monkeypatch):
    """Generous Dask network timeouts (3 minutes, defaults 30 s) for tests that run local clusters: on a
    machine busy with other jobs a worker may wait long for a core.  Set in this process's Dask config
    and in the environment, so worker processes and interpreters a test starts read them too."""
    import dask

    settings = {"distributed.comm.timeouts.connect": "180s", "distributed.comm.timeouts.tcp": "180s"}
    for key, value in settings.items():
        monkeypatch.setenv("DASK_" + key.upper().replace(".", "__").replace("-", "_"), value)
    with dask.config.set(settings):
        yield

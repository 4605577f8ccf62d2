"""Inputs and machine facts shared by the benchmarks and ``report.py``.

Positions and games come from the dev corpus (``shared/data``: ``$NNUE_INFER_SHARED``,
``<repo>/../shared`` or ``/work/shared``); without it, from seeded random legal playouts,
so the benchmarks run anywhere the package and Debian's ``stockfish`` are installed.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import random
import time
from functools import lru_cache
from pathlib import Path

import chess

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path | None:
    """The corpus directory, or ``None`` when it is not on this machine."""
    candidates = [Path(os.environ["NNUE_INFER_SHARED"])] if os.environ.get("NNUE_INFER_SHARED") else []
    candidates += [REPO.parent / "shared", Path("/work/shared")]
    for c in candidates:
        if (c / "data" / "positions-dev.jsonl").is_file():
            return c / "data"
    return None


def _playouts(seed: int, count: int) -> list[tuple[chess.Board, list[chess.Move]]]:
    rng = random.Random(seed)
    games = []
    for _ in range(count):
        board = chess.Board()
        moves = []
        for _ in range(rng.randrange(40, 160)):
            legal = list(board.legal_moves)
            if not legal:
                break
            moves.append(rng.choice(legal))
            board.push(moves[-1])
        games.append((chess.Board(), moves))
    return games


@lru_cache(maxsize=None)
def positions() -> tuple[str, ...]:
    """FENs of the 3,298 dev positions (or of 3,000 playout positions without the corpus)."""
    d = data_dir()
    if d is not None:
        with open(d / "positions-dev.jsonl") as f:
            return tuple(json.loads(line)["fen"] for line in f if line.strip())
    fens = []
    for start, moves in _playouts(1, 60):
        board = start.copy()
        for move in moves:
            board.push(move)
            fens.append(board.fen())
    return tuple(fens[:3000])


@lru_cache(maxsize=None)
def games() -> tuple[tuple[chess.Board, tuple[chess.Move, ...]], ...]:
    """The 264 dev games as (start board, moves) (or 100 seeded random playouts)."""
    d = data_dir()
    if d is None:
        return tuple((b, tuple(m)) for b, m in _playouts(2, 100))
    out = []
    with open(d / "games-dev.jsonl") as f:
        for line in f:
            g = json.loads(line)
            start = chess.Board(g["start_fen"])
            out.append((start, tuple(chess.Move.from_uci(u) for u in g["moves"])))
    return tuple(out)


def best_of(fns: dict, repeat: int, number: int, clock=time.perf_counter) -> dict:
    """Per key, the minimum over ``repeat`` rounds of the mean seconds (of ``clock``: wall clock, or
    ``time.thread_time`` for thread CPU) per call of ``fns[key]`` called ``number`` times, after one warm-up
    call each.  The functions are timed round-robin within each round, so load changes on a shared machine
    hit all of them alike."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for key, fn in fns.items():
            t = clock()
            for _ in range(number):
                fn()
            best[key] = min(best[key], (clock() - t) / number)
    return best


def cycling(items):
    """A zero-argument callable returning the next item of ``items`` on each call, forever."""
    return itertools.cycle(items).__next__


def record_rate(benchmark, unit: str, count: int) -> None:
    """Store ``count`` and ``count`` per second (median round) in a benchmark's ``extra_info``."""
    benchmark.extra_info[unit] = count
    if benchmark.stats is not None:  # None under --benchmark-disable
        benchmark.extra_info[f"{unit}_per_s"] = round(count / benchmark.stats.stats.median)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """One line: CPU model, logical cores, Numba threads, Python/NumPy/Numba/python-chess versions."""
    import numba
    import numpy

    return (f"{cpu_model()}, {os.cpu_count()} logical cores, Numba threads {numba.get_num_threads()} "
            f"({numba.threading_layer() if _parallel_ran() else 'layer not chosen yet'}); Python "
            f"{platform.python_version()}, NumPy {numpy.__version__}, Numba {numba.__version__}, "
            f"python-chess {chess.__version__}")


def _parallel_ran() -> bool:
    import numba

    try:
        numba.threading_layer()
    except ValueError:
        return False
    return True


def time_evaluators(evaluators: dict, boards: list, repeat: int) -> tuple[dict, dict]:
    """Best-of-``repeat`` wall time per position, in seconds, of ``Evaluator.evaluate(board)`` one
    position at a time and of ``Evaluator.evaluate_batch(boards)``, for each evaluator of
    ``evaluators`` (name -> Evaluator), the evaluators taking turns within each round.  A first
    pass compiles or loads the kernels and pages in the weights.  Returns ``(single, batch)``, two
    dicts name -> seconds per position."""
    for ev in evaluators.values():
        for b in boards:
            ev.evaluate(b)
        ev.evaluate_batch(boards)
    single = dict.fromkeys(evaluators, float("inf"))
    batch = dict.fromkeys(evaluators, float("inf"))
    for _ in range(repeat):
        for name, ev in evaluators.items():
            t = time.perf_counter()
            for b in boards:
                ev.evaluate(b)
            single[name] = min(single[name], (time.perf_counter() - t) / len(boards))
            t = time.perf_counter()
            ev.evaluate_batch(boards)
            batch[name] = min(batch[name], (time.perf_counter() - t) / len(boards))
    return single, batch


def print_rates(rates: dict[str, list[float]], baseline: str, label: str, unit: str) -> None:
    """A table of rates measured in rounds: per configuration the median, the range and the ratio of
    medians to ``baseline`` (``label``: the first column's title, ``unit``: the rates')."""
    import statistics

    base = statistics.median(rates[baseline])
    width = max(len(label), *map(len, rates))
    print(f"{label:<{width}} {unit + ' (median)':>30} {'range':>21} {'ratio':>7}")
    for name, r in rates.items():
        med = statistics.median(r)
        print(f"{name:<{width}} {med:>30,.0f} {min(r):>10,.0f}-{max(r):<10,.0f} {med / base:>6.1f}x")


def row(figure: str, value: str, baseline: str = "", ratio: str = "", target: str = "", area: str = "",
        met: bool | None = None) -> dict:
    """One figure of a run for ``write_json``: what was measured, its value with unit, the baseline
    measured in the same run (``"name: value"``), the ratio to it, the target an issue set and whether
    the figure met it, and the area of docs/benchmarks.md it belongs to (empty: the run's own area)."""
    return {"figure": figure, "value": value, "baseline": baseline, "ratio": ratio, "target": target,
            "met": met, "area": area}


def commit() -> str:
    """The checkout's short commit, with ``+changes`` when tracked files differ from it."""
    import subprocess

    def git(*args):
        try:
            return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()
        except OSError:  # no git on this machine: the commit is unknown, the run's figures still written
            return ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no", "--", "nnue_infer") else "")


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the system has none (``os.getloadavg``
    raises or is missing; benchmarks/manual.py then writes "load average not recorded")."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def output_file(text: str) -> Path:
    """argparse type of ``--json FILE``: the path, checked before the run so that a run of minutes or hours
    does not end in a traceback with its figures lost.

    Raises
    ------
    argparse.ArgumentTypeError
        ``text`` names a directory, a file in a directory that does not exist, or one this process may not
        write (the message names it).
    """
    import argparse

    path = Path(text)
    parent = path.parent
    if not text or path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file to write")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: there is no directory {parent}")
    if not os.access(path if path.exists() else parent, os.W_OK):
        what = "the file" if path.exists() else f"the directory {parent}"
        raise argparse.ArgumentTypeError(f"{text}: {what} is not writable")
    return path


def write_json(path, area: str, rows: list[dict], settings: str = "", argv: list[str] | None = None,
               raw: dict | None = None) -> None:
    """Write one run's figures as JSON for ``benchmarks/manual.py`` (which makes docs/benchmarks.md from
    such files): the area, the rows (``row``), the command that measured them, what the run measured
    on (``settings``), the date (UTC), the commit, the machine and the load average at the end; ``raw``:
    the script's raw measurements, kept beside the rows."""
    import datetime
    import sys

    args = sys.argv[1:] if argv is None else argv
    script = Path(sys.argv[0]).resolve()
    script = script.relative_to(REPO) if script.is_relative_to(REPO) else Path(script.name)
    record = {
        "area": area,
        "command": " ".join(["python", str(script), *args]),
        "settings": settings,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "machine": machine(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load": load_average(),
        "rows": rows,
    }
    if raw is not None:
        record["raw"] = raw
    Path(path).write_text(json.dumps(record, indent=1) + "\n")

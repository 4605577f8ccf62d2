"""Print one table of nnue-infer's speed figures, its baselines and their ratios, measured in one run.

Usage::

    python benchmarks/report.py            # about a minute on an idle machine; --quick: smaller run
    python benchmarks/report.py --no-cold  # skip the cold-JIT CLI run (compiles everything: 7-15 s here)

Figures (targets from issues 2 and 3, this project's 2-core machine, Stockfish 15.1's net):

* ``Evaluator.evaluate(board)``, fresh (full refresh), median per call (<= 10 us);
* ``push(move)`` + ``evaluate()`` for non-king and king moves, and ``pop()``, medians along
  the dev games (``bench_incremental.walk``), beyond python-chess's own ``Board.push``
  (<= 2 us / 4 us);
* ``evaluate_batch`` throughput from FEN strings (>= 200,000/s) and from boards (>= 100,000/s);
* ``evaluate_game`` over whole games (plies/s);
* ``load()`` of the 47 MB network, warm (<= 0.5 s); ``nnue-infer eval --fen`` as a whole
  process with a warm Numba cache (<= 1.5 s) and cold (empty cache, <= 30 s);
* baselines measured in the same run on the same positions: a plain NumPy implementation
  (``numpy_baseline.py``) and Stockfish 15.1's ``eval`` over UCI (``stockfish_uci.py``), and
  nnue-infer's per-position speed-up over each (>= 20x).

Times are wall-clock (``time.perf_counter``); medians of per-call timings for single calls,
best of several runs for throughputs.  Other work on the machine slows every wall-clock
figure (the header prints the load average); the batch kernel's CPU time per position
(``time.process_time``, one thread) is the figure least affected by it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import chess
import numba

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from bench_incremental import walk  # noqa: E402
from numpy_baseline import NumpyEvaluator  # noqa: E402
from stockfish_uci import StockfishEval  # noqa: E402

import nnue_infer  # noqa: E402

clock = time.perf_counter


def per_call(fn, items, rounds: int = 3) -> float:
    """Median seconds of ``fn(item)`` over ``rounds`` passes over ``items``."""
    times = []
    for _ in range(rounds):
        for item in items:
            t = clock()
            fn(item)
            times.append(clock() - t)
    return statistics.median(times)


def best_of(fn, runs: int = 5, clock=clock) -> float:
    """Fastest of ``runs`` timings of ``fn()``, in seconds (wall clock, or ``clock``)."""
    times = []
    for _ in range(runs):
        t = clock()
        fn()
        times.append(clock() - t)
    return min(times)


def cli_wall(env: dict[str, str] | None = None, runs: int = 5) -> float:
    """Median wall time of ``nnue-infer eval --fen <start position>`` as a new process."""
    exe = Path(sys.executable).with_name("nnue-infer")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "nnue_infer"]
    cmd += ["eval", "--fen", chess.STARTING_FEN]
    times = []
    for _ in range(runs):
        t = clock()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(clock() - t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer positions and repetitions")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-JIT CLI run")
    parser.add_argument("--json", metavar="FILE", type=common.output_file,
                        help="also write the figures to FILE for benchmarks/manual.py")
    args = parser.parse_args(argv)
    k = 1 if args.quick else 3

    network = nnue_infer.stockfish_15_1_network()
    net_path = nnue_infer.stockfish_15_1_network_path()
    ev = nnue_infer.Evaluator(network)
    fens = list(common.positions())
    boards = [chess.Board(f) for f in fens]
    games = list(common.games())
    sample = boards[:: max(1, len(boards) // (100 if args.quick else 300))]
    sample_fens = [b.fen() for b in sample]

    # Warm-up: JIT (or cache load) of every kernel measured below.
    ev.evaluate(boards[0])
    ev.evaluate_batch(fens[:10])
    ev.evaluate_batch(boards[:10])
    ev.evaluate_game(*games[0])
    ev.set_position(games[0][0])
    ev.push(games[0][1][0])
    ev.evaluate()
    ev.pop()

    rows: list[tuple[str, str, str, str]] = []  # (figure, value, target, met)
    records: list[dict] = []  # the same figures for --json
    area = "evaluation"

    def add(name: str, value: str, target: str = "", met: bool | None = None, baseline: str = "") -> None:
        rows.append((name, value, target, "" if met is None else "yes" if met else "NO"))
        if baseline:  # a speed-up: the value is the ratio
            records.append(common.row(name, "", baseline, value, target, area, met))
        else:
            records.append(common.row(name, value, target=target, area=area, met=met))
        print(f"  measured: {name}: {value}", file=sys.stderr)

    # --- single positions --------------------------------------------------------
    t_eval = per_call(ev.evaluate, boards, rounds=k)
    add("evaluate(board), fresh, median", f"{t_eval * 1e6:.2f} us", "<= 10 us", t_eval <= 10e-6)
    t_eval_fen = per_call(ev.evaluate, sample_fens, rounds=k)
    add("evaluate(fen string), fresh, median", f"{t_eval_fen * 1e6:.2f} us")

    med = lambda xs: statistics.median(xs) * 1e-9  # noqa: E731  (ns -> s)
    walk_games = [(b, list(m)) for b, m in games[: 40 if args.quick else len(games)]]
    for validate in (True, False):
        t = walk(ev, walk_games, validate)
        board_push = med(t["board_push"])
        quiet, king = med(t["push"]) + med(t["eval"]), med(t["push_king"]) + med(t["eval_king"])
        how = "push(move)" if validate else "push(move, validate=False)"
        if validate:
            add("python-chess Board.push, median", f"{board_push * 1e6:.2f} us")
        add(f"{how}+evaluate() beyond Board.push, non-king move", f"{(quiet - board_push) * 1e6:.2f} us", "<= 2 us",
            quiet - board_push <= 2e-6)
        add(f"{how}+evaluate() beyond Board.push, king move", f"{(king - board_push) * 1e6:.2f} us", "<= 4 us",
            king - board_push <= 4e-6)
    add("pop(), median", f"{med(t['pop']) * 1e6:.2f} us")

    # --- batches -----------------------------------------------------------------
    reps = max(1, 100_000 // len(fens)) if not args.quick else 5
    big_fens, big_boards = fens * reps, boards * reps
    threads = numba.get_num_threads()
    t = best_of(lambda: ev.evaluate_batch(big_fens), runs=2 + k)
    batch_fen_rate = len(big_fens) / t
    add(f"evaluate_batch, FEN strings, {threads} threads", f"{batch_fen_rate:,.0f} positions/s", ">= 200,000/s",
        batch_fen_rate >= 200_000)
    t = best_of(lambda: ev.evaluate_batch(big_boards), runs=2 + k)
    add(f"evaluate_batch, Boards, {threads} threads", f"{len(big_boards) / t:,.0f} positions/s", ">= 100,000/s",
        len(big_boards) / t >= 100_000)
    numba.set_num_threads(1)
    try:
        t = best_of(lambda: ev.evaluate_batch(big_fens), runs=1 + k)
        cpu = best_of(lambda: ev.evaluate_batch(big_fens), runs=1 + k, clock=time.process_time)
    finally:
        numba.set_num_threads(threads)
    add("evaluate_batch, FEN strings, 1 thread", f"{len(big_fens) / t:,.0f} positions/s")
    add("evaluate_batch, FEN strings, CPU time per position (1 thread)", f"{cpu / len(big_fens) * 1e6:.2f} us")
    plies = sum(len(m) + 1 for _, m in games)
    t = best_of(lambda: [ev.evaluate_game(b, m) for b, m in games], runs=k)
    add("evaluate_game, whole games", f"{plies / t:,.0f} plies/s")

    # --- baselines, same positions ----------------------------------------------
    numpy_ev = NumpyEvaluator(network)
    mismatches = sum(numpy_ev.evaluate(b) != ev.evaluate(b) for b in sample)
    if mismatches:
        raise SystemExit(f"numpy baseline disagrees with nnue-infer on {mismatches} positions")
    t_numpy = per_call(numpy_ev.evaluate, sample, rounds=k)
    add("numpy baseline, evaluate(board), median", f"{t_numpy * 1e6:.1f} us")
    with StockfishEval() as sf:
        for fen in sample_fens[:20]:
            sf.eval(fen)
        t_sf = per_call(sf.eval, sample_fens, rounds=k)
        sf_name = sf.version
    add(f"{sf_name} 'eval' over UCI, median", f"{t_sf * 1e6:.1f} us")
    per_pos_batch = 1 / batch_fen_rate
    for name, base in (("numpy baseline", t_numpy), (f"{sf_name} eval", t_sf)):
        for how, ours in (("evaluate(board)", t_eval), ("evaluate(fen string)", t_eval_fen),
                          ("evaluate_batch(FENs) per position", per_pos_batch)):
            add(f"speed-up over {name}: {how}", f"{base / ours:.1f}x", ">= 20x", base / ours >= 20,
                baseline=f"{name}: {base * 1e6:.1f} us")

    # --- load and whole process ---------------------------------------------------
    area = "startup"
    nnue_infer.load(net_path)
    t = per_call(nnue_infer.load, [net_path] * 5, rounds=1)
    add(f"load() of {net_path.name} ({net_path.stat().st_size / 1e6:.0f} MB), warm, median", f"{t:.3f} s",
        "<= 0.5 s", t <= 0.5)
    cli_wall(runs=1)
    t = cli_wall()
    add("nnue-infer eval --fen, whole process, warm cache, median", f"{t:.2f} s", "<= 1.5 s", t <= 1.5)
    if not args.no_cold:
        cache = tempfile.mkdtemp(prefix="nnue-infer-cold-")
        try:
            t = cli_wall(env={**os.environ, "NUMBA_CACHE_DIR": cache}, runs=1)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        add("nnue-infer eval --fen, whole process, cold JIT (empty NUMBA_CACHE_DIR)", f"{t:.2f} s", "<= 30 s",
            t <= 30)

    # --- the table --------------------------------------------------------------
    print(f"nnue-infer {nnue_infer.__version__} benchmark report, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {common.machine()}")
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
          + f" on {os.cpu_count()} cores (other work on the machine slows every figure)")
    print(f"inputs: {len(fens)} positions, {len(games)} games ({plies} positions), "
          f"{'dev corpus' if common.data_dir() else 'seeded random playouts'}; baselines on {len(sample)} positions")
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(r[1]) for r in rows)
    twidth = max(len(r[2]) for r in rows)
    print(f"{'figure':<{width}}  {'value':>{vwidth}}  {'target':<{twidth}}  met")
    print(f"{'-' * width}  {'-' * vwidth}  {'-' * twidth}  ---")
    for name, value, target, met in rows:
        print(f"{name:<{width}}  {value:>{vwidth}}  {target:<{twidth}}  {met}".rstrip())
    if args.json:
        common.write_json(args.json, "evaluation", records,
                          f"{len(fens)} positions, {len(games)} games ({plies} positions), "
                          f"{'dev corpus' if common.data_dir() else 'seeded random playouts'}; "
                          f"baselines on {len(sample)} positions; Stockfish 15.1's network", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())

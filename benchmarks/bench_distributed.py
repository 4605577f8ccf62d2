"""Dask-distributed scoring against single-process ``evaluate_batch``, in the same run, and where a task's time goes.

Inputs: EPD shards of real FENs (the dev positions and every position of the dev games, repeated
to fill the shards), written to a temporary directory.  Figures, all in one run:

* ``evaluate_batch`` over all FENs on 1 Numba thread (the baseline), then
  ``score_files(client=None)`` (reading, evaluation, Arrow tables, Parquet writing, one task after
  another), wall clock and thread CPU time, values compared;
* ``score_files`` on a ``LocalCluster`` of 1 and 2 worker processes x 1 thread (cluster up and
  warmed up before the clock starts; :func:`score_files` warms its workers itself too), wall clock,
  with the CPU time of the worker processes;
* the profile of one in-process task by stage (thread CPU time under cProfile with
  ``time.thread_time`` as its clock: reading and splitting lines, FEN parsing, evaluation,
  check/outcome flags, Arrow tables, Parquet writing), and the per-task cost from many tiny shards.

The machine is shared: compare the ratios and CPU times of one run, not wall-clock figures across runs.

Run: ``python benchmarks/bench_distributed.py [--shards 16 --size 10000] [--out benchmarks/results/distributed.txt]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import games, positions  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.io import distributed as D  # noqa: E402

#: Stages of a task: (label, (source file, function) pairs whose cumulative thread CPU time it is).
STAGES = (
    ("reading, splitting lines (io.epd, kernels.epd)", (("io/epd.py", "iter_epd"),)),
    ("FEN parsing (kernels.fen)", (("positions.py", "parse_fen_buffer"),)),
    ("evaluation (Evaluator.evaluate_bitboards)", (("nnue_infer/evaluator.py", "evaluate_bitboards"),)),
    ("checkmate / stalemate verdicts (io.score.outcomes)", (("io/score.py", "outcomes"),)),
    ("result columns (io.score: values, text, errors)", (("io/score.py", "value_columns"),
                                                          ("io/score.py", "error_column"))),
    ("Arrow tables (io.parquet: to_arrow, conform)", (("io/parquet.py", "to_arrow"), ("io/parquet.py", "conform"))),
    ("Parquet writing (io.parquet.write_table)", (("io/parquet.py", "write_table"),)),
)


def real_fens() -> list[str]:
    """The dev positions and the positions of every dev game (about 30,000 distinct FENs)."""
    fens = list(positions())
    for start, moves in games():
        board = start.copy()
        for move in moves:
            board.push(move)
            fens.append(board.fen())
    return fens


def write_shards(directory: str, fens: list[str], shards: int, size: int, prefix: str = "s") -> list[str]:
    os.makedirs(directory)
    used = []
    for k in range(shards):
        part = [fens[(k * size + i) % len(fens)] for i in range(size)]
        used += part
        with open(os.path.join(directory, f"{prefix}{k:04d}.epd"), "w") as f:
            f.write("\n".join(part) + "\n")
    return used


def timed(fn) -> tuple[float, float]:
    """(wall seconds, thread CPU seconds) of ``fn()``."""
    t, c = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - t, time.thread_time() - c


def _process_cpu() -> float:
    return time.process_time()


def stage_profile(pattern: str, out: str, net: str) -> tuple[list[tuple[str, float]], float]:
    """Thread CPU seconds per stage of ``score_files`` in process, and the total."""
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    D.score_files(pattern, out, net)
    profile.disable()
    stats = pstats.Stats(profile, stream=io.StringIO()).stats

    def cumulative(source: str, name: str) -> float:
        return sum(ct for (file, _, func), (_, _, _, ct, _) in stats.items() if func == name and file.endswith(source))

    total = cumulative("io/distributed.py", "score_files")
    rows = [(label, sum(cumulative(*f) for f in functions)) for label, functions in STAGES]
    return rows + [("the rest (scheduling the tasks, files, tables' glue)", total - sum(s for _, s in rows))], total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--size", type=int, default=10_000, help="positions per shard")
    parser.add_argument("--tiny", type=int, default=60, help="tiny shards (5 positions) for the per-task cost")
    parser.add_argument("--net", default="stockfish")
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args()
    import dask
    from distributed import Client, LocalCluster

    tmp = tempfile.mkdtemp()
    lines = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    try:
        fens = write_shards(os.path.join(tmp, "in"), real_fens(), args.shards, args.size)
        write_shards(os.path.join(tmp, "tiny"), fens, args.tiny, 5, "t")
        n = len(fens)
        pattern = os.path.join(tmp, "in", "*.epd")
        numba.set_num_threads(1)
        ev = nnue_infer.Evaluator(nnue_infer.resources.network_from_spec(args.net))
        ev.evaluate_batch(fens[:100])
        D.warm_up(args.net)
        rows = []
        want = []
        rows.append(("evaluate_batch, one process, 1 thread", *timed(lambda: want.append(ev.evaluate_batch(fens)))))
        rows.append(("score_files, in process (client=None), 1 thread",
                     *timed(lambda: D.score_files(pattern, os.path.join(tmp, "p0"), args.net))))
        rows.append(("evaluate_batch, one process, 1 thread (again)", *timed(lambda: ev.evaluate_batch(fens))))
        tiny_wall, _ = timed(lambda: D.score_files(os.path.join(tmp, "tiny", "*.epd"), os.path.join(tmp, "lt"), args.net))
        cluster_cpu = {}
        for workers in (1, 2):
            with dask.config.set(D.QUIET_WORKERS), LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                                host="127.0.0.1", dashboard_address=None) as lc, \
                    Client(lc) as client:
                client.run(D.warm_up, args.net, 1)
                before = client.run(_process_cpu)
                wall, _ = timed(lambda: D.score_files(pattern, os.path.join(tmp, f"c{workers}"), args.net, client, threads=1))
                after = client.run(_process_cpu)
                rows.append((f"score_files, LocalCluster {workers} worker(s) x 1 thread", wall, None))
                cluster_cpu[workers] = [after[w] - before[w] for w in after]
                if workers == 2:  # per-task cost on the cluster: worker time per tiny task
                    tiny_cluster, _ = timed(lambda: D.score_files(os.path.join(tmp, "tiny", "*.epd"),
                                                                  os.path.join(tmp, "ct"), args.net, client, threads=1))
        import pyarrow.parquet as pq

        for d in ("p0", "c1", "c2"):
            t = pq.read_table(os.path.join(tmp, d), columns=["source", "line", "value"]).to_pydict()
            order = sorted(range(len(t["line"])), key=lambda i: (t["source"][i], t["line"][i]))
            assert np.array_equal(np.array(t["value"])[order], want[0]), f"values differ in {d}"
        stages, total = stage_profile(pattern, os.path.join(tmp, "prof"), args.net)

        base_wall = (rows[0][1] + rows[2][1]) / 2
        base_cpu = (rows[0][2] + rows[2][2]) / 2
        say(f"{n:,} positions ({len(set(fens)):,} distinct real FENs) in {args.shards} EPD shards of {args.size:,}; "
            f"net {args.net}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; values identical in "
            "every run")
        say(f"{'':<52} {'positions/s':>12} {'vs evaluate_batch':>18} {'thread CPU s':>13} {'CPU ratio':>10}")
        for label, wall, cpu in rows:
            cpu_text = f"{cpu:>13.3f} {base_cpu / cpu:>9.2f}x" if cpu is not None else f"{'':>13} {'':>10}"
            say(f"{label:<52} {n / wall:>12,.0f} {base_wall / wall:>17.2f}x {cpu_text}")
        for workers, cpus in cluster_cpu.items():
            say(f"LocalCluster {workers} worker(s): {sum(cpus):.2f} s CPU in the worker processes "
                f"({n / sum(cpus):,.0f} positions per CPU second; evaluate_batch {n / base_cpu:,.0f}); busiest worker "
                f"{max(cpus):.2f} s: {n / max(cpus):,.0f} positions/s with a core per worker, "
                f"{base_cpu / max(cpus):.2f}x evaluate_batch's 1 thread")
        say(f"per-task cost, {args.tiny} shards of 5 positions: in process {tiny_wall / args.tiny * 1e3:.1f} ms per task, "
            f"LocalCluster 2 workers {tiny_cluster * 2 / args.tiny * 1e3:.1f} ms of worker time per task (wall clock)")
        say()
        say(f"one in-process score_files over the {args.shards} shards under cProfile (thread CPU time, profiler "
            "overhead included):")
        for label, seconds in stages:
            say(f"  {label:<46} {seconds:>7.3f} s {100 * seconds / total:>5.1f} %")
        say(f"  {'total':<46} {total:>7.3f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"$ python benchmarks/bench_distributed.py {' '.join(sys.argv[1:])}\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

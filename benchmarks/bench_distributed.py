"""Dask-distributed scoring against single-process ``evaluate_batch``, in the same run.

Inputs: EPD shards of the dev positions (repeated), written to a temporary directory.  Figures:

* single process: ``evaluate_batch`` over all FENs (1 and all Numba threads), and
  ``score_files(client=None)`` (reading, evaluation, Parquet writing, one input after another);
* ``score_files`` on a ``LocalCluster`` of 1 and 2 worker processes (1 thread each), after the
  cluster is up and the workers have loaded the network (a warm-up job), as a ratio to the
  single-process figures;
* per-task cost: many tiny shards (5 positions each) in process and on 2 workers, seconds per
  input file beyond the positions' own cost (reading, Parquet writing, and on the cluster scheduling).

Run: ``python benchmarks/bench_distributed.py [--shards 8 --copies 10]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numba

sys.path.insert(0, os.path.dirname(__file__))
from common import positions  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.io import distributed as D  # noqa: E402


def write_shards(directory: str, fens: list[str], shards: int, prefix: str = "s") -> None:
    os.makedirs(directory)
    size = -(-len(fens) // shards)
    for k in range(shards):
        with open(os.path.join(directory, f"{prefix}{k:04d}.epd"), "w") as f:
            f.write("\n".join(fens[k * size:(k + 1) * size]) + "\n")


def _warm_up(net: str) -> None:
    """Run on every worker: load the network (once per process), the compiled kernels and pyarrow."""
    import pyarrow.parquet  # noqa: F401

    D.worker_evaluator(net).evaluate_batch(list(positions()[:64]))


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--copies", type=int, default=10, help="times the dev positions are repeated")
    parser.add_argument("--tiny", type=int, default=60, help="tiny shards for the per-task overhead")
    parser.add_argument("--net", default="stockfish")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    fens = list(positions()) * args.copies
    n = len(fens)
    net = nnue_infer.resources.network_from_spec(args.net)
    tmp = tempfile.mkdtemp()
    try:
        write_shards(os.path.join(tmp, "in"), fens, args.shards)
        write_shards(os.path.join(tmp, "tiny"), fens[:args.tiny * 5], args.tiny, "t")
        pattern = os.path.join(tmp, "in", "*.epd")
        rows = []
        ev = nnue_infer.Evaluator(net)
        ev.evaluate_batch(fens[:100])
        cores = numba.get_num_threads()
        for threads in (1, cores):
            numba.set_num_threads(threads)
            rows.append((f"evaluate_batch, one process, {threads} thread(s)", timed(lambda: ev.evaluate_batch(fens))))
        numba.set_num_threads(1)
        D.score_files(pattern, os.path.join(tmp, "warm"), args.net)
        rows.append(("score_files, in process (client=None), 1 thread",
                     timed(lambda: D.score_files(pattern, os.path.join(tmp, "p0"), args.net))))
        overhead = None
        task_stats = []
        t_tiny_local = timed(lambda: D.score_files(os.path.join(tmp, "tiny", "*.epd"), os.path.join(tmp, "lt"), args.net))
        for workers in (1, 2):
            t0 = time.perf_counter()
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address=None) as lc, Client(lc) as client:
                up = time.perf_counter() - t0
                client.run(_warm_up, args.net)  # every worker: network, kernels, pyarrow
                reports = []
                rows.append((f"score_files, LocalCluster {workers} worker(s) x 1 thread",
                             timed(lambda: reports.append(D.score_files(pattern, os.path.join(tmp, f"c{workers}"),
                                                                        args.net, client, threads=1)))))
                inside = sum(p["seconds"] for p in reports[0].parts)
                cpu = sum(p["thread_cpu_seconds"] for p in reports[0].parts)
                task_stats.append((workers, inside, cpu))
                if workers == 2:
                    t_tiny = timed(lambda: D.score_files(os.path.join(tmp, "tiny", "*.epd"), os.path.join(tmp, "ct"),
                                                         args.net, client, threads=1))
                    per_position = rows[-1][1] / n
                    overhead = (t_tiny - args.tiny * 5 * per_position) * workers / args.tiny
            print(f"(LocalCluster of {workers} worker(s) up in {up:.1f} s)")
        base = rows[0][1]
        print(f"{n:,} positions in {args.shards} EPD shards; load average {os.getloadavg()[0]:.2f} on "
              f"{os.cpu_count()} cores")
        print(f"{'':<58} {'positions/s':>12} {'vs evaluate_batch 1 thread':>28}")
        for label, t in rows:
            print(f"{label:<58} {n / t:>12,.0f} {base / t:>27.2f}x")
        for workers, inside, cpu in task_stats:
            print(f"{workers} worker(s): time inside the tasks {inside:.2f} s wall, {cpu:.2f} s CPU of the task threads "
                  f"({n / cpu:,.0f} positions per CPU second)")
        print(f"per-task cost, {args.tiny} shards of 5 positions: in process {t_tiny_local / args.tiny * 1e3:.1f} ms "
              f"per input; on 2 workers {overhead * 1e3:.1f} ms per task (worker time, beyond the positions' own cost)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

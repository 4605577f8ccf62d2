"""Dask-distributed scoring against single-process ``evaluate_batch``, in the same run, and where a task's time goes.

Inputs: EPD shards of real FENs (the dev positions and every position of the dev games, repeated
to fill the shards), written to a temporary directory.  Figures, all in one run:

* ``evaluate_batch`` over all FENs on 1 Numba thread (the baseline) and ``score_files(client=None)``
  (reading, evaluation, Arrow tables, Parquet writing, one task after another) with the parts' free
  text zstd-compressed (the default) and uncompressed (``compression="none"``), alternated
  ``--rounds`` times (``evaluate_batch`` before and after each round's two runs, whose order alternates:
  each is paired with the mean of the two): wall clock and thread CPU time, the best and the median of
  the rounds, values compared;
* ``score_files`` on a ``LocalCluster`` of 1 worker process (zstd) and 2 (zstd and none) x 1 thread (cluster up and
  warmed up before the clock starts; :func:`score_files` warms its workers itself too), ``--rounds``
  jobs each (each paired with the mean of ``evaluate_batch`` runs just before and after it): wall clock,
  and the load-robust figures: positions per thread-CPU second inside the
  worker tasks (the tasks' own summaries) against in process, per process-CPU second of the worker
  processes (all their threads: Dask's event loop too), and the busiest worker's process CPU (what
  the job's wall clock would be with a core per worker), with the CPU time of the client's process
  (the scheduler's threads included);
* the cost per input from many tiny shards, in process and on 2 workers;
* one machine's choice: ``evaluate_batch`` and ``score_files(client=None)`` on every core of one process (wall
  clock), against the LocalCluster of one worker per core;
* the ceiling of the in-process ratio: the steps a task cannot skip (splitting lines, parsing with the flags,
  evaluating, pyarrow writing the part), each timed alone on one shard, against ``evaluate_batch`` on it
  (:func:`ceiling`);
* the profile of one in-process ``score_files`` (thread CPU time under cProfile with
  ``time.thread_time`` as its clock): by stage (reading and splitting lines, FEN parsing with the
  check/outcome flags, evaluation, Arrow tables, Parquet writing) and the functions with the most own time.

The machine may be shared: the load average is printed with every figure.  Wall clock measures
the machine's load as much as this code; thread and process CPU times are this code's (less
exposed to load, though caches and hyper-threads shared with other jobs still slow them).

Run: ``python benchmarks/bench_distributed.py [--shards 16 --size 10000 --rounds 3] [--out benchmarks/results/distributed.txt]``.
"""

from __future__ import annotations

import argparse
import cProfile
import glob
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
import common  # noqa: E402
from common import best_of, games, positions  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.io import distributed as D  # noqa: E402
from nnue_infer.io.distributed import task as T  # noqa: E402
from nnue_infer.resources import network_from_spec  # noqa: E402

#: Stages of a task: (label, (source file, function) pairs whose cumulative thread CPU time it is).
STAGES = (
    ("reading, splitting lines (io.epd, kernels.data.epd)", (("io/epd.py", "iter_epd"),)),
    ("FEN parsing, in-check and outcome flags (kernels.chess.status)", (("io/score.py", "parse_and_flag"),)),
    ("evaluation (Evaluator.evaluate_bitboards)", (("nnue_infer/evaluator.py", "evaluate_bitboards"),)),
    ("outcomes python-chess decides (io.score.outcomes)", (("io/score.py", "outcomes"),)),
    ("result columns (io.score: values, text, errors)", (("io/score.py", "value_columns"),
                                                          ("io/score.py", "error_column"))),
    ("Arrow tables (io.parquet.dataset_table)", (("io/parquet.py", "dataset_table"),)),
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


def timed(fn) -> tuple[float, float, float]:
    """(wall seconds, thread CPU seconds, load average) of ``fn()``."""
    t, c = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - t, time.thread_time() - c, os.getloadavg()[0]


def _process_cpu() -> float:
    return time.process_time()


#: Codecs of the parts' free text measured (``score_files(compression=...)``): the default first.
CODECS = ("zstd", "none")


def stage_profile(pattern: str, out: str, net: str, top: int) -> tuple[list[tuple[str, float]], float, list[str]]:
    """Thread CPU seconds per stage of ``score_files`` in process, the total, and the ``top`` functions
    by own time (one line each)."""
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    D.score_files(pattern, out, net)
    profile.disable()
    stats = pstats.Stats(profile, stream=io.StringIO()).stats

    def cumulative(source: str, name: str) -> float:
        return sum(ct for (file, _, func), (_, _, _, ct, _) in stats.items() if func == name and file.endswith(source))

    total = cumulative("io/distributed/job.py", "score_files")
    rows = [(label, sum(cumulative(*f) for f in functions)) for label, functions in STAGES]
    rows.append(("the rest (scheduling the tasks, files, tables' glue)", total - sum(s for _, s in rows)))
    own = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    root = os.path.dirname(os.path.dirname(nnue_infer.__file__))
    functions = []
    for (file, line, func), (_, calls, tt, ct, _) in own:
        where = os.path.relpath(file, root) if file.startswith(root) else (
            file.split("site-packages/")[-1] if "site-packages/" in file else file)
        functions.append(f"{tt:>7.3f} s {100 * tt / total:>5.1f} %  {calls:>6} calls  {where}:{line}({func})")
    return rows, total, functions


def ceiling(ev, path: str, repeats: int = 7, calls: int = 10) -> dict[str, float]:
    """Thread CPU milliseconds (best of ``repeats`` runs of ``calls`` calls, the steps interleaved so they see one
    load) of the steps a shard's ``score_files`` task cannot skip, each timed alone, with ``evaluate_batch`` on the
    same FENs: splitting the file's lines (``read_epd``), parsing with the in-check and mate flags
    (``parse_and_flag``), evaluating (``Evaluator.evaluate_bitboards``) and pyarrow writing the part's table
    (``pyarrow.parquet.write_table`` into memory, the parts' settings, per codec).  Their sum is the least a task
    could cost: ``evaluate_batch`` over it is the best ratio ``score_files(client=None)`` can reach."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nnue_infer.io.epd import read_epd
    from nnue_infer.io.score import parse_and_flag, score_epd

    with open(path, "rb") as f:
        data = f.read()
    fens = data.decode().splitlines()
    rows = read_epd(data)
    buf, offsets = rows.fen_buffer()
    bitboards, stm = parse_and_flag(buf, offsets)[:2]
    table, _ = T._score_tables(score_epd(ev, rows, operations=False), path)

    def write(codec: str) -> None:
        pq.write_table(table, pa.BufferOutputStream(), **T._parquet(codec))

    steps = {"evaluate_batch": lambda: ev.evaluate_batch(fens), "split lines": lambda: read_epd(data),
             "parse + flags": lambda: parse_and_flag(buf, offsets),
             "evaluate": lambda: ev.evaluate_bitboards(bitboards, stm)}
    steps |= {f"write part, {codec}": (lambda c=codec: write(c)) for codec in CODECS}
    return {name: seconds * 1e3 for name, seconds in best_of(steps, repeats, calls, time.thread_time).items()}


def stats(values: list[float]) -> tuple[float, float]:
    """(best, median) of ``values``."""
    return min(values), float(np.median(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--size", type=int, default=10_000, help="positions per shard")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each measurement (best and median shown)")
    parser.add_argument("--tiny", type=int, default=60, help="tiny shards (5 positions) for the cost per input")
    parser.add_argument("--top", type=int, default=15, help="functions listed from the profile")
    parser.add_argument("--net", default="stockfish")
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--json", metavar="FILE", type=common.output_file,
                        help="also write the main figures to FILE for benchmarks/manual.py")
    args = parser.parse_args()
    records = []
    import dask
    import pyarrow.parquet as pq
    from distributed import Client, LocalCluster

    tmp = tempfile.mkdtemp()
    lines = []
    jobs = iter(range(1 << 30))

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    def check(out: str) -> None:
        t = pq.read_table(out, columns=["source", "line", "value"]).to_pydict()
        order = sorted(range(len(t["line"])), key=lambda i: (t["source"][i], t["line"][i]))
        assert np.array_equal(np.array(t["value"])[order], want), f"values differ in {out}"

    def job(client=None, pattern=None, compression="zstd", threads=1) -> tuple[str, dict]:
        out = os.path.join(tmp, f"out{next(jobs)}")
        report = D.score_files(pattern or shards, out, args.net, client, threads=threads, compression=compression)
        return out, report

    def dataset_bytes(out: str) -> int:
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(out) for f in files)

    try:
        fens = write_shards(os.path.join(tmp, "in"), real_fens(), args.shards, args.size)
        write_shards(os.path.join(tmp, "tiny"), fens, args.tiny, 5, "t")
        n = len(fens)
        shards = os.path.join(tmp, "in", "*.epd")
        tiny = os.path.join(tmp, "tiny", "*.epd")
        numba.set_num_threads(1)
        ev = nnue_infer.Evaluator(network_from_spec(args.net))
        want = ev.evaluate_batch(fens)
        D.warm_up(args.net, 1)
        job()
        base, around, task_cpu = [], [], []
        local: dict[str, list] = {codec: [] for codec in CODECS}
        sizes = {}
        for k in range(args.rounds):  # alternated, so that all see the same load
            base.append(timed(lambda: ev.evaluate_batch(fens)))
            for codec in CODECS if k % 2 == 0 else CODECS[::-1]:
                result = []
                local[codec].append(timed(lambda: result.append(job(compression=codec))))
                check(result[0][0])
                sizes[codec] = dataset_bytes(result[0][0])
                if codec == "zstd":
                    task_cpu.append(sum(p["thread_cpu_seconds"] for p in result[0][1].parts))
            base.append(timed(lambda: ev.evaluate_batch(fens)))
            around.append((base[-2][1] + base[-1][1]) / 2)  # the baseline before and after the round's jobs
        base_wall, base_cpu = stats([r[0] for r in base])[1], stats([r[1] for r in base])[0]
        tiny_wall, _, _ = timed(lambda: job(pattern=tiny))
        cores = os.cpu_count() or 1
        every_core: dict[str, list] = {"evaluate_batch": [], "score_files": []}
        for _ in range(args.rounds):  # one machine's choice: one process on every core, or a worker per core
            numba.set_num_threads(cores)
            every_core["evaluate_batch"].append(timed(lambda: ev.evaluate_batch(fens)))
            every_core["score_files"].append(timed(lambda: job(threads=cores)))
        numba.set_num_threads(1)
        clusters = {}
        for workers in (1, 2):
            with dask.config.set(D.QUIET_WORKERS), LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                                host="127.0.0.1", dashboard_address=":0") as lc, \
                    Client(lc) as client:
                client.run(D.warm_up, args.net, 1)
                codecs = CODECS if workers == 2 else CODECS[:1]
                runs: dict[str, list] = {codec: [] for codec in codecs}
                for _ in range(args.rounds):
                    for codec in codecs:
                        paired = timed(lambda: ev.evaluate_batch(fens))[1]  # the baseline around each job, same load
                        before = client.run(_process_cpu)
                        result = []
                        client_cpu = time.process_time()  # the client process: its scheduler's threads too
                        wall, _, load = timed(lambda: result.append(job(client, compression=codec)))
                        client_cpu = time.process_time() - client_cpu
                        after = client.run(_process_cpu)
                        paired = (paired + timed(lambda: ev.evaluate_batch(fens))[1]) / 2
                        check(result[0][0])
                        parts = result[0][1].parts
                        runs[codec].append({"wall": wall, "client": client_cpu, "load": load, "base": paired,
                                            "workers": [after[w] - before[w] for w in after],
                                            "tasks": sum(p["thread_cpu_seconds"] for p in parts),
                                            "scoring": sum(p["positions_seconds"] for p in parts),
                                            "dask_tasks": len(D.batches([D.Task(p["input"], "epd") for p in parts],
                                                                        workers))})
                if workers == 2:  # per-task cost on the cluster: worker time per tiny task
                    tiny_cluster, _, _ = timed(lambda: job(client, tiny))
            for codec, codec_runs in runs.items():
                clusters[workers, codec] = codec_runs
        floor = ceiling(ev, sorted(glob.glob(shards))[0])
        stages, total, top = stage_profile(shards, os.path.join(tmp, "prof"), args.net, args.top)

        say(f"{n:,} positions ({len(set(fens)):,} distinct real FENs) in {args.shards} EPD shards of {args.size:,}; "
            f"net {args.net}; {os.cpu_count()} cores; {args.rounds} rounds; values identical in every run")
        everything = base + [r for runs in local.values() for r in runs]
        say(f"load average (1 min) during the runs: {min(r[2] for r in everything):.1f}-"
            f"{max([r[2] for r in everything] + [r['load'] for c in clusters.values() for r in c]):.1f}")
        say("dataset size: " + ", ".join(f"compression={codec!r} {sizes[codec] / n:.1f} bytes per position"
                                         for codec in CODECS))
        say()
        say("in process, 1 Numba thread (evaluate_batch and score_files alternated; best / median of the rounds)")
        say(f"{'':<44} {'thread CPU s':>15} {'positions/CPU s':>16} {'CPU ratio':>10} {'wall s':>15} "
            f"{'wall ratio':>10} {'load':>9}")
        rows = [("evaluate_batch (the baseline)", base)]
        rows += [(f"score_files(client=None{'' if c == 'zstd' else f', compression={c!r}'})", local[c]) for c in CODECS]
        for label, runs in rows:
            cpu, wall, load = stats([r[1] for r in runs]), stats([r[0] for r in runs]), stats([r[2] for r in runs])
            say(f"{label:<44} {cpu[0]:>7.3f} {cpu[1]:>7.3f} {n / cpu[0]:>16,.0f} {base_cpu / cpu[0]:>9.2f}x "
                f"{wall[0]:>7.3f} {wall[1]:>7.3f} {base_wall / wall[1]:>9.2f}x {load[0]:>4.1f}-{max(r[2] for r in runs):.1f}")
        local_cpu = stats([r[1] for r in local["zstd"]])[0]
        records.append(common.row("score_files(client=None): EPD shards -> Parquet in process, 1 thread, per thread-CPU "
                                  "second (best of the rounds)", f"{n / local_cpu:,.0f} positions/s",
                                  f"evaluate_batch of the FENs: {n / base_cpu:,.0f} positions/s",
                                  f"{base_cpu / local_cpu:.2f}x"))
        say(f"{'  of which inside score_task (zstd)':<44} {min(task_cpu):>7.3f} {float(np.median(task_cpu)):>7.3f} "
            f"{n / min(task_cpu):>16,.0f}")
        for codec in CODECS:
            pairs = [b / r[1] for b, r in zip(around, local[codec])]
            say(f"{f'  paired CPU ratio, {codec}':<44} {float(np.median(pairs)):>.2f}x median ({min(pairs):.2f}-"
                f"{max(pairs):.2f}): evaluate_batch's thread CPU (the mean of the runs before and after) over "
                "score_files' of the same round")
        say()
        say("LocalCluster, worker processes x 1 thread (best / median of the rounds; ratios of the best against "
            "evaluate_batch's best thread CPU, wall ratios of the medians)")
        say(f"{'':<18} {'wall s':>15} {'wall ratio':>10} {'task thread CPU s':>19} {'pos/task CPU s':>15} "
            f"{'worker proc CPU s':>19} {'pos/proc CPU s':>15} {'busiest worker':>15} {'its ratio':>10} "
            f"{'paired (range)':>19} {'client+scheduler CPU s':>23} {'load':>9}")
        for (workers, codec), runs in clusters.items():
            wall, tasks = stats([r["wall"] for r in runs]), stats([r["tasks"] for r in runs])
            proc, busiest = stats([sum(r["workers"]) for r in runs]), stats([max(r["workers"]) for r in runs])
            client_cpu, load = stats([r["client"] for r in runs]), [r["load"] for r in runs]
            pairs = [r["base"] / max(r["workers"]) for r in runs]
            records.append(common.row(f"score_files on a LocalCluster, {workers} worker(s) x 1 thread, {codec}: the busiest "
                                      "worker's process CPU (the job's wall clock with a core per worker)",
                                      f"{busiest[0]:.3f} s", f"evaluate_batch on 1 thread: {base_cpu:.3f} s",
                                      f"{base_cpu / busiest[0]:.2f}x", ">= 1.5x" if workers == 2 else "",
                                      met=base_cpu / busiest[0] >= 1.5 if workers == 2 else None))
            say(f"{f'{workers} worker(s), {codec}':<18} {wall[0]:>7.3f} {wall[1]:>7.3f} {base_wall / wall[1]:>9.2f}x "
                f"{tasks[0]:>9.3f} {tasks[1]:>9.3f} {n / tasks[0]:>15,.0f} {proc[0]:>9.3f} {proc[1]:>9.3f} "
                f"{n / proc[0]:>15,.0f} {busiest[0]:>7.3f} s {base_cpu / busiest[0]:>9.2f}x "
                f"{float(np.median(pairs)):>6.2f}x ({min(pairs):.2f}-{max(pairs):.2f}) {client_cpu[1]:>23.3f} "
                f"{min(load):>4.1f}-{max(load):.1f}")
        say(f"in process: {n / local_cpu:,.0f} positions per thread-CPU second (score_files), "
            f"{n / min(task_cpu):,.0f} inside its tasks; evaluate_batch {n / base_cpu:,.0f}. 'busiest worker': the "
            "largest process CPU time of one worker, the job's wall clock with a core per worker; 'its ratio': "
            "evaluate_batch's thread CPU over it (the issue's target: 1.5x for 2 workers); 'paired': the median over the "
            "rounds of that ratio with the mean of the evaluate_batch runs just before and after each job (the same load); "
            "'client+scheduler': "
            "process CPU of this process during a job (the LocalCluster's scheduler runs in it)")
        say(f"one machine, wall clock (medians of {args.rounds}): in one process on all {cores} cores, evaluate_batch "
            + f", score_files(client=None, threads={cores}) ".join(
                f"{stats([r[0] for r in every_core[k]])[1]:.3f} s ({base_wall / stats([r[0] for r in every_core[k]])[1]:.2f}x "
                "of evaluate_batch on 1 thread)" for k in ("evaluate_batch", "score_files"))
            + "; the LocalCluster of 2 workers x 1 thread: its wall ratio above")
        for (workers, codec), runs in clusters.items():
            extra = [(sum(r["workers"]) - r["tasks"]) / r["dask_tasks"] for r in runs]
            say(f"{workers} worker(s), {codec}: {runs[0]['dask_tasks']} Dask tasks a job; the workers' process CPU "
                f"beyond their tasks' threads (Dask's work, idle monitors included) per Dask task: "
                f"{1e3 * float(np.median(extra)):.1f} ms median ({1e3 * min(extra):.1f}-{1e3 * max(extra):.1f})")
        records.append(common.row(f"cost per input ({args.tiny} shards of 5 positions), in process; LocalCluster 2 workers",
                                  f"{tiny_wall / args.tiny * 1e3:.1f} ms; {tiny_cluster * 2 / args.tiny * 1e3:.1f} ms "
                                  "of worker time (wall clock)"))
        say(f"per-input cost, {args.tiny} shards of 5 positions: in process {tiny_wall / args.tiny * 1e3:.1f} ms per "
            f"shard, LocalCluster 2 workers {tiny_cluster * 2 / args.tiny * 1e3:.1f} ms of worker time per shard (wall "
            "clock; small shards run several to a Dask task)")
        say()
        say(f"the steps of one shard's task that score_files cannot skip, each timed alone (thread CPU ms, best of 7 "
            f"runs of 10 calls), and evaluate_batch on the shard's {args.size:,} FENs:")
        say("  " + ", ".join(f"{name} {ms:.2f}" for name, ms in floor.items()))
        least = floor["split lines"] + floor["parse + flags"] + floor["evaluate"]
        for codec in CODECS:
            say(f"  ceiling of score_files(client=None{'' if codec == 'zstd' else f', compression={codec!r}'}): "
                f"evaluate_batch / (split + parse + evaluate + write) = {floor['evaluate_batch']:.2f} / "
                f"{least + floor[f'write part, {codec}']:.2f} = "
                f"{floor['evaluate_batch'] / (least + floor[f'write part, {codec}']):.3f}x, with no other code at all")
        say()
        say(f"one in-process score_files over the {args.shards} shards under cProfile (thread CPU time, profiler "
            "overhead included), by stage:")
        for label, seconds in stages:
            say(f"  {label:<54} {seconds:>7.3f} s {100 * seconds / total:>5.1f} %")
        say(f"  {'total':<54} {total:>7.3f} s")
        say(f"the {args.top} functions with the most own time:")
        for line in top:
            say(f"  {line}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"$ python benchmarks/bench_distributed.py {' '.join(sys.argv[1:])}\n" + "\n".join(lines) + "\n")
    if args.json:
        common.write_json(args.json, "files", records,
                          f"{n:,} positions in {args.shards} EPD shards of {args.size:,}, net {args.net}, {args.rounds} rounds; "
                          "thread / process CPU time")


if __name__ == "__main__":
    main()

"""Stockfish training data on one core: .binpack -> columns, .binpack -> .plain against the tools'
own ``convert``, and ``rescore`` against ``evaluate_batch``.

Input: ``shared/data/binpack/selfplay.binpack`` (real depth-4 self-play data written by the tools)
repeated ``--copies`` times into one multi-block file.  Every figure is process CPU time with one
Numba thread, measured side by side in this run (best of ``--repeat``); outputs are checked equal:

* decode: :func:`nnue_infer.io.training_data.read` of the file (positions per CPU second; target
  at least 8 million);
* to .plain: read + :func:`write` to ``.plain`` in this process against the tools' ``convert
  X.binpack Y.plain`` (child CPU time; ``--tools PATH`` or ``$STOCKFISH_TOOLS`` names a binary
  built from Stockfish's ``tools`` branch; skipped without one); the two files must be identical;
* the command: ``nnue-infer data convert X.binpack Y.plain`` as a child process (its CPU time,
  start-up included, and its peak resident memory, from ``wait4``) against the tools' process
  (target: at most 2x the CPU, at most 300 MB), on the whole input and on a quarter of it (the
  memory must not grow with the input); and the start-up: ``data convert`` of a one-position file
  (target at most 0.3 s of CPU);
* rescore: :func:`rescore` of the selfplay rows with the bundled network against
  :func:`nnue_infer.evaluate_batch` of their FENs (target: within 20 %); values must be equal;
* compile (``--compile``): child-process CPU time of the first read and write of every kind with
  an empty Numba cache (``NUMBA_CACHE_DIR`` in a temporary directory), against the same run warm.

Run: ``python benchmarks/bench_binpack.py [--copies 50] [--tools /path/to/stockfish]``.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
import subprocess
import sys
import tempfile
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
from common import data_dir  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.io import training_data as td  # noqa: E402
from nnue_infer.resources import network_from_spec  # noqa: E402


def cpu(fn, repeat: int) -> tuple[float, object]:
    """Best process CPU seconds of ``repeat`` calls of ``fn`` and its last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return best, out


#: Runs a command and writes its user + system CPU seconds and peak resident memory (KB) to ``sys.argv[1]``:
#: started from this small process, the command's peak is its own (Linux keeps the peak of the process that
#: forked it, so a child of this benchmark reported this benchmark's 500 MB).
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
"""


def child_usage(cmd: list[str]) -> tuple[float, float]:
    """User + system CPU seconds and peak resident memory (MB) of ``cmd`` run to the end (:data:`LAUNCHER`)."""
    with tempfile.NamedTemporaryFile("r", suffix=".usage") as out:
        proc = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, out.name, *cmd], capture_output=True,
                              timeout=3600, check=False)
        status, seconds, kb = out.read().split()
    if proc.returncode or int(status):
        raise RuntimeError(f"{cmd}: status {status}: {proc.stderr.decode()}")
    return float(seconds), int(kb) / 1024


def best_usage(cmd: list[str], repeat: int) -> tuple[float, float]:
    runs = [child_usage(cmd) for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def child_cpu(cmd: list[str], stdin: str) -> float:
    """User + system CPU seconds of a child process run to the end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, input=stdin, text=True, capture_output=True, check=True, timeout=3600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


COMPILE_RUN = """
import sys
from nnue_infer.io import training_data as td
src = sys.argv[1]
data = td.read(src)
for kind in ("plain", "bin", "binpack"):
    td.write(data, sys.argv[2] + "." + kind)
    td.read(sys.argv[2] + "." + kind)
data.fens(), data.uci(), td.flags(data)
"""


def compile_cost(src: str, tmp: str) -> tuple[float, float]:
    """Child CPU seconds of :data:`COMPILE_RUN` with an empty Numba cache, then with it filled."""
    env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "numba-cache"))
    cmd = [sys.executable, "-c", COMPILE_RUN, src, os.path.join(tmp, "c")]
    costs = []
    for _ in range(2):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, env=env, check=True, timeout=3600)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        costs.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return costs[0], costs[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=100, help="Copies of selfplay.binpack in the input (20,000 rows each).")
    ap.add_argument("--repeat", type=int, default=3, help="Runs per figure (best is reported).")
    ap.add_argument("--tools", default=os.environ.get("STOCKFISH_TOOLS"),
                    help="Stockfish built from the tools branch (for the .plain comparison).")
    ap.add_argument("--compile", action="store_true", help="Also measure the kernels' first-use compile time.")
    ap.add_argument("--json", metavar="FILE", type=common.output_file,
                    help="Also write the figures to FILE for benchmarks/manual.py.")
    args = ap.parse_args()
    records = []
    numba.set_num_threads(1)
    src = data_dir() / "binpack" / "selfplay.binpack"
    base = td.read(src)
    with tempfile.TemporaryDirectory() as tmp:
        big = os.path.join(tmp, "big.binpack")
        td.write(td.TrainingData.concat([base] * args.copies), big)
        n = len(td.read(big))
        print(f"input: {args.copies} x selfplay.binpack = {n:,} positions, {os.path.getsize(big):,} bytes; "
              f"1 Numba thread, process CPU time, best of {args.repeat}")

        def decode():
            for _ in td.iter_chunks(big):
                pass

        t_read, _ = cpu(decode, args.repeat)
        print(f"decode .binpack -> columns (iter_chunks): {t_read:.3f} s = {n / t_read / 1e6:.2f} M positions/s "
              f"per core (target >= 8)")
        records.append(common.row("decode .binpack -> columns (iter_chunks), one core", f"{n / t_read / 1e6:.2f} M positions/s",
                                  target=">= 8 M/s", met=n / t_read >= 8e6))

        ours = os.path.join(tmp, "ours.plain")
        t_plain, _ = cpu(lambda: td.write(td.read(big), ours), args.repeat)
        if args.tools:
            theirs = os.path.join(tmp, "tools.plain")
            t_tools = min(child_cpu([args.tools], f"convert {big} {theirs}\nquit\n") for _ in range(args.repeat))
            same = filecmp.cmp(ours, theirs, shallow=False)
            print(f".binpack -> .plain: nnue-infer {t_plain:.3f} s, tools convert {t_tools:.3f} s: "
                  f"ratio {t_plain / t_tools:.2f}x (in this process: no start-up); files identical: {same}")
        else:
            print(f".binpack -> .plain: nnue-infer {t_plain:.3f} s ({n / t_plain / 1e6:.2f} M positions/s); "
                  "tools comparison skipped (no --tools / $STOCKFISH_TOOLS)")
        records.append(common.row(".binpack -> .plain (read + write, in this process)",
                                  f"{n / t_plain / 1e6:.2f} M positions/s",
                                  f"tools convert: {n / t_tools / 1e6:.2f} M positions/s" if args.tools else "",
                                  f"{t_plain / t_tools:.2f}x CPU" if args.tools else ""))
        command = [sys.executable, "-m", "nnue_infer", "data", "convert", "-q", "--threads", "1"]
        one = os.path.join(tmp, "one.plain")
        td.write(base[:1], one)
        child_usage([*command, one, os.path.join(tmp, "one.binpack")])  # the kernels loaded once (the cache warm)
        t_start, rss_start = best_usage([*command, one, os.path.join(tmp, "one.binpack")], args.repeat)
        print(f"start-up: data convert of a one-position file: {t_start:.3f} s CPU, {rss_start:.0f} MB "
              "(target <= 0.3 s)")
        records.append(common.row("nnue-infer data convert of a one-position file (start-up), process CPU",
                                  f"{t_start:.3f} s, {rss_start:.0f} MB", target="<= 0.3 s", met=t_start <= 0.3))
        quarter = os.path.join(tmp, "quarter.binpack")
        td.write(td.TrainingData.concat([base] * max(1, args.copies // 4)), quarter)
        for name, path in (("a quarter of the input", quarter), ("the whole input", big)):
            t_cmd, rss_cmd = best_usage([*command, path, ours], args.repeat)
            line = f"nnue-infer data convert, {name}: {t_cmd:.3f} s CPU, {rss_cmd:.0f} MB"
            if args.tools:
                t_sf, rss_sf = best_usage([args.tools, "convert", path, theirs], args.repeat)
                same = filecmp.cmp(ours, theirs, shallow=False)
                line += (f"; tools convert {t_sf:.3f} s, {rss_sf:.0f} MB: ratio {t_cmd / t_sf:.2f}x CPU (target <= 2), "
                         f"{rss_cmd / rss_sf:.2f}x memory (target: at most 300 MB); files identical: {same}")
            print(line)
            records.append(common.row(f"nnue-infer data convert .binpack -> .plain, {name} ({os.path.getsize(path):,} bytes), "
                                      "process CPU", f"{t_cmd:.3f} s, {rss_cmd:.0f} MB",
                                      f"tools convert: {t_sf:.3f} s, {rss_sf:.0f} MB" if args.tools else "",
                                      f"{t_cmd / t_sf:.2f}x CPU" if args.tools else "",
                                      "<= 2x the tools' CPU, <= 300 MB" if args.tools else "<= 300 MB",
                                      met=rss_cmd <= 300 and (not args.tools or t_cmd / t_sf <= 2)))
        if args.compile:
            cold, warm = compile_cost(str(src), tmp)
            print(f"first use of every training-data kernel (child process, CPU): {cold:.1f} s with an empty "
                  f"Numba cache, {warm:.1f} s with it filled: compile {cold - warm:.1f} s")

    ev = nnue_infer.Evaluator(network_from_spec(None))
    fens = base.fens()
    ev.evaluate_batch(fens[:64])
    td.rescore(base[:64], ev)
    t_batch, ref = cpu(lambda: ev.evaluate_batch(fens), args.repeat)
    t_rescore, out = cpu(lambda: td.rescore(base, ev), args.repeat)
    equal = np.array_equal(out.score.astype(np.int32), np.clip(ref, -32768, 32767))
    print(f"rescore {len(base):,} positions: rescore {t_rescore:.3f} s, evaluate_batch {t_batch:.3f} s: "
          f"rate ratio {t_batch / t_rescore:.2f} (target >= 0.8); values equal: {equal}")
    records.append(common.row(f"rescore of {len(base):,} positions (bundled network), rate", f"{len(base) / t_rescore:,.0f} positions/s",
                              f"evaluate_batch of their FENs: {len(base) / t_batch:,.0f} positions/s",
                              f"{t_batch / t_rescore:.2f}", ">= 0.8", met=t_batch / t_rescore >= 0.8))
    if args.json:
        common.write_json(args.json, "training-data", records,
                          f"{args.copies} x selfplay.binpack ({n:,} positions); process CPU time, 1 Numba thread, "
                          f"best of {args.repeat}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The CLI's file mode against ``evaluate_batch`` on the same 200,000-line EPD file, in one run.

Issue 12's target: ``nnue-infer eval --epd FILE -o OUT`` (read, split, evaluate, flag check /
checkmate / stalemate, write CSV or JSON lines) reaches at least 80 % of the throughput of
``evaluate_batch`` on the file's FENs (a Python list already in memory).  Both are timed back
to back, alternating, with warm kernels; the ratio of medians is what counts (the machine's
load moves both).  The CLI runs in-process (``nnue_infer.cli.main``) and, once, as a process.

    python benchmarks/bench_cli_epd.py [--lines 200000] [--repeat 5] [--net stockfish]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import positions  # noqa: E402


def write_epd(path: Path, lines: int) -> list[str]:
    """``lines`` dev-corpus positions (repeated), every other line with EPD operations; returns the FENs."""
    pool = positions()
    fens = [pool[i % len(pool)] for i in range(lines)]
    with open(path, "w") as f:
        for i, fen in enumerate(fens):
            f.write(f'{fen} id "p{i}"; c0 "dev corpus";\n' if i % 2 else fen + "\n")
    return fens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--net", default="stockfish")
    args = ap.parse_args()

    import numba

    import nnue_infer
    from nnue_infer.cli import main as cli_main

    net = nnue_infer.network_from_spec(args.net)
    with tempfile.TemporaryDirectory() as tmp:
        epd = Path(tmp) / "positions.epd"
        fens = write_epd(epd, args.lines)
        outputs = {fmt: Path(tmp) / f"out.{fmt}" for fmt in ("csv", "jsonl")}
        nnue_infer.evaluate_batch(fens[:1000], net)  # compile / load everything first
        for fmt, out in outputs.items():
            cli_main(["eval", "--net", args.net, "--epd", str(epd), "-o", str(out)] + ["--json"] * (fmt == "jsonl"))
        times: dict[str, list[float]] = {"evaluate_batch": [], "csv": [], "jsonl": []}
        for _ in range(args.repeat):
            t = time.perf_counter()
            nnue_infer.evaluate_batch(fens, net)
            times["evaluate_batch"].append(time.perf_counter() - t)
            for fmt, out in outputs.items():
                t = time.perf_counter()
                status = cli_main(["eval", "--net", args.net, "--epd", str(epd), "-o", str(out)]
                                  + ["--json"] * (fmt == "jsonl"))
                times[fmt].append(time.perf_counter() - t)
                assert status == 0
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "nnue_infer", "eval", "--net", args.net, "--epd", str(epd),
                               "-o", str(outputs["csv"])], capture_output=True)
        process = time.perf_counter() - t
        assert proc.returncode == 0, proc.stderr
        size = epd.stat().st_size
    base = statistics.median(times["evaluate_batch"])
    print(f"{args.lines} EPD lines ({size / 1e6:.1f} MB), network {args.net}, Numba threads {numba.get_num_threads()}, "
          f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'':44s} {'median s':>9s} {'positions/s':>12s} {'vs evaluate_batch':>18s}")
    print(f"{'evaluate_batch(list of FEN strings)':44s} {base:9.3f} {args.lines / base:12,.0f} {'100 %':>18s}")
    for fmt in ("csv", "jsonl"):
        m = statistics.median(times[fmt])
        print(f"{'nnue-infer eval --epd FILE -o OUT (' + fmt + ')':44s} {m:9.3f} {args.lines / m:12,.0f} "
              f"{100 * base / m:16.0f} %")
    print(f"{'the same as a process (csv, cold start)':44s} {process:9.3f} {args.lines / process:12,.0f} "
          f"{100 * base / process:16.0f} %")


if __name__ == "__main__":
    main()

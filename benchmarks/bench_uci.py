"""The UCI engine's start-up and perft cost against Debian's Stockfish 15.1, measured in one run.

Each engine runs as a fresh process on a pipe; the figures are that process's CPU time (user + sys of all
its threads, ``/proc/<pid>/stat``) read when it printed the line that ends a phase, so other jobs on a
shared machine move them little:

* ``readyok``: from the process start to its answer to ``uci`` then ``isready`` (the warm start a GUI
  waits for; nnue-infer's kernel cache filled by a run before the measured ones);
* ``search``: the first ``go nodes N`` after that (nnue-infer loads its cached search kernels here);
* ``perft``: ``go perft D`` of Kiwipete (the Chess Programming Wiki's position 2; both engines count
  bulk at the last ply; Stockfish's move generator is hand-written C++).

``--cold`` also starts nnue-infer on an empty ``NUMBA_CACHE_DIR`` and reports the CPU time of its first
search (the kernels compiled; issue 36's target: at most 30 s).

    python benchmarks/bench_uci.py                       # 5 runs of each, default network
    python benchmarks/bench_uci.py --runs 9 --net stockfish --cold
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

REPO = Path(__file__).resolve().parents[1]
STOCKFISH = "/usr/games/stockfish"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

KIWIPETE = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all threads; ``/proc/<pid>/stat`` fields 14, 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Engine:
    """One engine process on a pipe."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.start = time.perf_counter()
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1, env=env)

    def until(self, commands: str, done: str) -> tuple[float, float]:
        """Send ``commands``; read to the line starting with ``done``; (CPU seconds, wall seconds) at that line."""
        self.proc.stdin.write(commands)
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(done):
                return cpu_seconds(self.proc.pid), time.perf_counter() - self.start
        raise RuntimeError(f"{self.proc.args} exited before {done!r}")

    def quit(self) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=120)


def measure(command: list[str], nodes: int, depth: int, env: dict[str, str] | None = None) -> dict[str, float]:
    """One process: CPU seconds to readyok, of the first search, of the perft; wall seconds to readyok."""
    engine = Engine(command, env)
    try:
        ready, ready_wall = engine.until("uci\nisready\n", "readyok")
        searched, _ = engine.until(f"position startpos\ngo nodes {nodes}\n", "bestmove")
        counted, _ = engine.until(f"position fen {KIWIPETE}\ngo perft {depth}\n", "Nodes searched")
    finally:
        engine.quit()
    return {"readyok": ready, "readyok wall": ready_wall, "search": searched - ready, "perft": counted - searched}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per engine (median reported)")
    parser.add_argument("--net", default="default", help="nnue-infer's network (--net)")
    parser.add_argument("--nodes", type=int, default=10000, help="the first search's node limit")
    parser.add_argument("--depth", type=int, default=5, help="perft depth on Kiwipete")
    parser.add_argument("--cold", action="store_true", help="also nnue-infer's first search on an empty kernel cache")
    parser.add_argument("--json", metavar="FILE", type=common.output_file,
                        help="also write the figures to FILE for benchmarks/manual.py")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ours = [sys.executable, "-m", "nnue_infer", "uci", "--net", args.net]
    print(f"# bench_uci: process CPU seconds (median of {args.runs}); python {sys.version.split()[0]}, "
          f"os.getloadavg() {os.getloadavg()[0]:.1f}", flush=True)
    measure(ours, args.nodes, args.depth, env)  # fills the kernel cache: the runs below start warm
    results: dict[str, list[dict[str, float]]] = {"nnue-infer": [], "stockfish 15.1": []}
    for _ in range(args.runs):  # interleaved: a change of the machine's load hits both
        results["nnue-infer"].append(measure(ours, args.nodes, args.depth, env))
        results["stockfish 15.1"].append(measure([STOCKFISH], args.nodes, args.depth))
    median = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in results.items()}
    print(f"{'':16s} {'readyok':>9s} {'(wall)':>8s} {'search ' + str(args.nodes):>14s} {'perft ' + str(args.depth):>9s}")
    for name, m in median.items():
        print(f"{name:16s} {m['readyok']:9.3f} {m['readyok wall']:8.3f} {m['search']:14.3f} {m['perft']:9.3f}")
    ours_m, peer = median["nnue-infer"], median["stockfish 15.1"]
    print(f"{'ratio':16s} {ours_m['readyok'] / peer['readyok']:9.1f} {'':8s} "
          f"{ours_m['search'] / max(peer['search'], 1 / TICK):14.1f} {ours_m['perft'] / max(peer['perft'], 1 / TICK):9.1f}"
          f"   (nnue-infer / stockfish; CPU clock resolution {1 / TICK:.2f} s)")
    floor = 1 / TICK
    records = [common.row(f"UCI {label}, process CPU", f"{ours_m[key]:.3f} s", f"Stockfish 15.1: {peer[key]:.3f} s",
                          f"{ours_m[key] / max(peer[key], floor):.1f}x")
               for key, label in (("readyok", "start to readyok (warm kernel cache)"),
                                  ("search", f"first go nodes {args.nodes}"), ("perft", f"go perft {args.depth} of Kiwipete"))]
    if args.cold:
        with tempfile.TemporaryDirectory(prefix="nnue-uci-cold-") as cache:
            cold = measure(ours, args.nodes, args.depth, dict(env, NUMBA_CACHE_DIR=cache))
        print(f"cold start (empty NUMBA_CACHE_DIR): readyok {cold['readyok']:.2f} s CPU, first search "
              f"{cold['search']:.1f} s CPU (its kernels compiled), perft {cold['perft']:.1f} s CPU")
        records.append(common.row("UCI first search on an empty NUMBA_CACHE_DIR (its kernels compiled), process CPU",
                                  f"{cold['search']:.1f} s", target="<= 30 s", met=cold["search"] <= 30))
    if args.json:
        common.write_json(args.json, "uci", records, f"median of {args.runs} fresh processes per engine, interleaved; "
                          f"nnue-infer --net {args.net}; process CPU time (CPU clock resolution {floor:.2f} s)")


if __name__ == "__main__":
    main()

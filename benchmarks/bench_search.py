"""Nodes per second of the compiled search (``nnue_infer.search.Engine``) with Stockfish 15.1's
network against Debian's Stockfish 15.1 ``bench`` on the same positions, measured in one run.

The positions are those of Stockfish 15.1's ``bench`` (48: 46 standard, 2 of them stalemates, and 2
Chess960), as the Debian binary prints them (``Position: i/48 (FEN)``), so nothing of Stockfish's
source is copied here.  Stockfish runs ``bench
16 1 DEPTH default depth`` (Hash 16 MB, one thread); its node count, and its CPU time taken from the
child process's resource usage (the ``Nodes/second`` it prints is wall time, which a loaded
machine inflates).  nnue-infer searches the same positions in the same order with ``Hash`` 16 MB
and the table kept from one position to the next (Stockfish clears it once, at the start), to a
fixed depth; its CPU time is the searching thread's.  A node is counted as Stockfish counts one
(a position reached by a move in the main or quiescence search), so nodes per CPU second compare
the cost of a node; the trees differ (the two searches prune differently), so the node counts
themselves are not expected to agree.

The evaluation's share of the search is measured by the cycle counter around every evaluation
(``Engine.profile``): cycles in evaluations / cycles of the whole search, per node.

    python benchmarks/bench_search.py                 # depth 9 for nnue-infer, 13 for Stockfish
    python benchmarks/bench_search.py --depth 7 --sf-depth 11 --out benchmarks/results/search-X.txt
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import chess

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from common import machine  # noqa: E402

STOCKFISH = "/usr/games/stockfish"
def bench_positions(binary: str = STOCKFISH) -> list[chess.Board]:
    """The positions of Stockfish 15.1's ``bench`` as the engine itself prints them (``bench 16 1 1
    default depth`` writes ``Position: i/48 (FEN)`` for each, after the moves its list plays); a FEN
    whose castling rights are files (``HFhf``) is a Chess960 board."""
    run = subprocess.run([binary, "bench", "16", "1", "1", "default", "depth"], capture_output=True, text=True,
                         check=True)
    fens = re.findall(r"^Position: \d+/\d+ \((.*)\)$", run.stderr + run.stdout, re.M)
    boards = [chess.Board(fen, chess960=bool(re.search(r" [A-H]+[a-h]* ", fen))) for fen in fens]
    if len(boards) != 48:
        raise SystemExit(f"expected the 48 bench positions of Stockfish 15.1, {binary} printed {len(boards)}")
    return boards


def stockfish_bench(depth: int) -> tuple[int, float, float]:
    """(nodes, CPU seconds, wall seconds) of ``stockfish bench 16 1 DEPTH default depth``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run = subprocess.run([STOCKFISH, "bench", "16", "1", str(depth), "default", "depth"], capture_output=True,
                         text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    nodes = int(re.search(r"Nodes searched\s*:\s*(\d+)", run.stderr).group(1))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return nodes, cpu, wall


def ours(boards: list[chess.Board], depth: int) -> tuple[int, float, float, int, float]:
    """(nodes, thread CPU seconds, wall seconds, evaluations, share of cycles in evaluations)."""
    from nnue_infer.search import Engine

    engine = Engine("stockfish", hash_mb=16)
    engine.search(chess.Board(), depth=2)  # compile (or load) the kernels first
    engine.new_game()
    engine.profile = True
    nodes = evals = 0
    eval_cycles = 0
    cpu = wall = 0.0
    total_cycles = 0
    for board in boards:
        c0, w0 = time.thread_time(), time.perf_counter()
        t0 = _rdtsc_estimate()
        result = engine.search(board, depth=depth)
        cpu += time.thread_time() - c0
        wall += time.perf_counter() - w0
        total_cycles += _rdtsc_estimate() - t0
        nodes += result.nodes
        evals += engine.evaluations
        eval_cycles += engine.evaluation_cycles
    return nodes, cpu, wall, evals, eval_cycles / max(total_cycles, 1)


def _rdtsc_estimate() -> int:
    """The cycle counter read from Python (the search kernels' own counter, ``alphabeta.cycles``)."""
    from nnue_infer.kernels.search.alphabeta import read_cycles

    return int(read_cycles())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=9, help="nnue-infer's depth per position")
    parser.add_argument("--sf-depth", type=int, default=13, help="Stockfish bench depth (13: its default)")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    parser.add_argument("--json", metavar="FILE", type=common.output_file,
                        help="also write the figures to FILE for benchmarks/manual.py")
    args = parser.parse_args()
    boards = bench_positions()
    sf_nodes, sf_cpu, sf_wall = stockfish_bench(args.sf_depth)
    n, cpu, wall, evals, share = ours(boards, args.depth)
    sf_nodes2, sf_cpu2, sf_wall2 = stockfish_bench(args.sf_depth)  # before and after: load drifts
    sf_rate = (sf_nodes + sf_nodes2) / (sf_cpu + sf_cpu2)
    rate = n / cpu
    lines = [
        f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}",
        f"positions: Stockfish 15.1 bench ({len(boards)}, read from {STOCKFISH})",
        f"Stockfish 15.1 bench 16 1 {args.sf_depth}: {sf_nodes} nodes, {sf_cpu:.2f} s CPU ({sf_wall:.2f} s wall); "
        f"again {sf_nodes2} nodes, {sf_cpu2:.2f} s CPU",
        f"nnue-infer depth {args.depth}: {n} nodes, {cpu:.2f} s thread CPU ({wall:.2f} s wall), {evals} evaluations "
        f"({evals / max(n, 1):.2f} per node)",
        "",
        f"{'engine':<34}{'nodes/CPU s':>14}{'ratio':>8}",
        f"{'Stockfish 15.1 (Debian, SSE2)':<34}{sf_rate:>14,.0f}{1.0:>8.2f}",
        f"{'nnue-infer search, sf15.1 net':<34}{rate:>14,.0f}{rate / sf_rate:>8.2f}",
        "",
        f"nnue-infer: {1e6 / rate:.2f} us per node; evaluation's share of the search's cycles {100 * share:.0f} %"
        f" ({1e6 / rate * share * n / max(evals, 1):.2f} us per evaluation)",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    if args.json:
        common.write_json(args.json, "search", [
            common.row(f"nnue-infer search (Stockfish 15.1's net), depth {args.depth}, nodes per CPU second",
                       f"{rate:,.0f} nodes/s", f"Debian Stockfish 15.1 bench depth {args.sf_depth}: {sf_rate:,.0f} nodes/s",
                       f"{rate / sf_rate:.2f}x"),
            common.row("nnue-infer: time per node; evaluation's share of the search's cycles",
                       f"{1e6 / rate:.2f} us; {100 * share:.0f} % ({evals / max(n, 1):.2f} evaluations a node)"),
        ], f"Stockfish 15.1's bench positions ({len(boards)}), Hash 16 MB, one thread; thread CPU (nnue-infer), "
           "child-process CPU (Stockfish, before and after)")


if __name__ == "__main__":
    main()

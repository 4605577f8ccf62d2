"""Every known Stockfish network's speed as a ratio to Stockfish 15.1's, measured in one run.

Run:  python benchmarks/bench_stockfish_nets.py [--positions 1000] [--repeat 5]

For each net of ``nnue_infer.formats.registry`` in the cache (``nnue-infer fetch SPEC`` gets the others;
the lite net of 17.1 and 18 is one file, measured once): full-refresh ``Evaluator.evaluate(board)``
(mean microseconds per position) and ``evaluate_batch`` (positions per second on Numba's
threads) over the same boards (dev corpus or seeded playouts), round-robin within each round
so that load on a shared machine hits every net alike; each figure is the best of
``--repeat`` rounds, and the ratio is to Stockfish 15.1's net of the same round set.  Also
``load()`` time of each file (best of 3).
"""

from __future__ import annotations

import argparse
import time

import chess

import common
import nnue_infer
from nnue_infer.errors import NetworkNotFoundError
from nnue_infer.formats.stockfish import read_stockfish
from nnue_infer.formats.registry import KNOWN_NETWORKS
from nnue_infer.resources import known_network, known_network_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    boards = [chess.Board(f) for f in common.positions()][: args.positions]
    nets, paths, seen = {}, {}, set()
    for k in KNOWN_NETWORKS:
        if k.sha256 in seen:
            continue
        try:
            nets[k.spec] = known_network(k.spec)
            paths[k.spec] = known_network_path(k.spec)
            seen.add(k.sha256)
        except NetworkNotFoundError as exc:
            print(f"skipped {k.spec}: {exc}")
    evaluators = {spec: nnue_infer.Evaluator(net) for spec, net in nets.items()}
    single, batch = common.time_evaluators(evaluators, boards, args.repeat)
    load = {}
    for spec, path in paths.items():
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            read_stockfish(path)
            best = min(best, time.perf_counter() - t)
        load[spec] = best
    base = "sf15.1"
    print(f"{len(boards)} positions, best of {args.repeat} rounds; ratios to {base} (>1 = slower for evaluate, "
          "<1 = fewer positions/s for batch)")
    print(f"{'net':<14}{'L1':>6}{'evaluate us':>13}{'x sf15.1':>10}{'batch pos/s':>14}{'x sf15.1':>10}{'load s':>9}")
    for spec, ev in evaluators.items():
        rate = 1 / batch[spec]
        print(f"{spec:<14}{ev.network.architecture.ft_width:>6}{single[spec] * 1e6:>13.2f}"
              f"{single[spec] / single[base]:>10.2f}{rate:>14,.0f}{batch[base] / batch[spec]:>10.2f}{load[spec]:>9.2f}")


if __name__ == "__main__":
    main()

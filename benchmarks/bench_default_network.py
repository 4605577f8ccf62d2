"""The bundled default network vs Stockfish 15.1's: full-refresh ``Evaluator.evaluate(board)`` speed.

Run:  python benchmarks/bench_default_network.py [--positions 1000] [--repeat 7]

Both evaluators run over the same boards (the dev corpus, or seeded playouts without it),
round-robin within each round so load changes on a shared machine hit both alike; the figure
is the minimum over ``--repeat`` rounds of the mean microseconds per position, and the ratio
Stockfish 15.1 / default (the issue's target for ``evaluate(board)``: at least 2x).  The same
for ``evaluate_batch`` over all the boards at once (Numba's threads).
"""

from __future__ import annotations

import argparse

import chess

import nnue_infer
import common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    boards = [chess.Board(f) for f in common.positions()][: args.positions]
    evaluators = {"default": nnue_infer.Evaluator(nnue_infer.default_network()),
                  "stockfish-15.1": nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network())}
    best, batch = common.time_evaluators(evaluators, boards, args.repeat)
    print(f"# {common.machine()}; {len(boards)} positions, min of {args.repeat} rounds")
    print(f"{'network':16s} {'evaluate(board)':>16s} {'evaluate_batch':>16s}")
    for name, ev in evaluators.items():
        print(f"{name:16s} {best[name] * 1e6:10.2f} us/pos {batch[name] * 1e6:10.2f} us/pos   {ev.network!r}")
    print(f"speed-up of the default network: evaluate(board) {best['stockfish-15.1'] / best['default']:.2f}x "
          f"(target >= 2x), evaluate_batch {batch['stockfish-15.1'] / batch['default']:.2f}x")


if __name__ == "__main__":
    main()

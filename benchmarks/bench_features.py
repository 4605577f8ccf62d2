"""Feature indices for a training loader: ``features_batch`` against the per-board feature sets, one run.

Run:  python benchmarks/bench_features.py [--repeat 3]

On the dev positions (``common.positions()``, FEN strings), one Numba thread, thread CPU time per
position, best of ``--repeat`` rounds (the paths alternate within a round):

* ``features_batch(fens, spec)`` for nnue-pytorch's ``HalfKAv2_hm`` and its default
  ``Full_Threats+PP_3Wide+HalfKAv2_hm``;
* the per-board path a loader would otherwise write: ``chess.Board(fen)`` and each component's
  ``active(board)`` (nnue_infer.features), the indices offset and concatenated per perspective;
* ``evaluate_batch(fens)`` with Stockfish 15.1's net, for scale.

Printed: microseconds per position and the ratio per-board / features_batch (> 1: the batch path is faster).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import chess
import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.features import feature_set, full_threats, pawn_pairs  # noqa: E402
from nnue_infer.training.feature_indices import COMPONENTS, features_batch, torch_halfka  # noqa: E402

SPECS = ("HalfKAv2_hm", "Full_Threats+PP_3Wide+HalfKAv2_hm")


def per_board(fens: list[str], spec: str) -> list[list[np.ndarray]]:
    """The loop a loader writes without the batch path: python-chess board, each component's ``active``."""
    out = []
    for fen in fens:
        board = chess.Board(fen)
        rows, offset = [[], []], 0
        for name in spec.split("+"):
            if name == "HalfKAv2_hm":
                found = [sorted(torch_halfka(np.array(r)).tolist()) for r in feature_set(name).active(board)]
            else:
                found = {"Full_Threats": full_threats, "PP_3Wide": pawn_pairs}[name].active(board)
            for p in range(2):
                rows[p].extend(offset + f for f in found[p])
            offset += COMPONENTS[name]
        out.append([np.asarray(r, np.int32) for r in rows])
    return out


def timed(fn) -> float:
    t = time.thread_time()
    fn()
    return time.thread_time() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", metavar="FILE", type=common.output_file,
                        help="also write the figures to FILE for benchmarks/manual.py")
    args = parser.parse_args()
    numba.set_num_threads(1)
    records = []
    fens = list(common.positions())
    ev = nnue_infer.Evaluator(nnue_infer.load(nnue_infer.stockfish_15_1_network_path()))
    ev.evaluate_batch(fens[:4])
    print(f"{common.machine()}\n{len(fens)} positions, one thread, thread CPU, best of {args.repeat}")
    for spec in SPECS:
        batch = features_batch(fens, spec)  # compiles on first use
        reference = per_board(fens, spec)
        for i in range(0, len(fens), max(1, len(fens) // 50)):  # the two paths agree
            for p, colour in enumerate((chess.WHITE, chess.BLACK)):
                assert np.array_equal(batch.row(i, colour), reference[i][p]), (spec, fens[i])
        best = {"features_batch": np.inf, "per board": np.inf, "evaluate_batch": np.inf}
        for _ in range(args.repeat):
            best["features_batch"] = min(best["features_batch"], timed(lambda: features_batch(fens, spec)))
            best["per board"] = min(best["per board"], timed(lambda: per_board(fens, spec)))
            best["evaluate_batch"] = min(best["evaluate_batch"], timed(lambda: ev.evaluate_batch(fens)))
        us = {k: 1e6 * v / len(fens) for k, v in best.items()}
        print(f"{spec}: features_batch {us['features_batch']:.2f} us, per board {us['per board']:.1f} us "
              f"({us['per board'] / us['features_batch']:.0f}x), evaluate_batch (SF 15.1) {us['evaluate_batch']:.2f} us "
              f"per position")
        records.append(common.row(f"features_batch(fens, {spec!r}), per position", f"{us['features_batch']:.2f} us",
                                  f"per-board feature sets: {us['per board']:.1f} us; evaluate_batch (SF 15.1 net): "
                                  f"{us['evaluate_batch']:.2f} us", f"{us['per board'] / us['features_batch']:.0f}x"))
    if args.json:
        common.write_json(args.json, "research", records,
                          f"{len(fens)} dev positions, one Numba thread, thread CPU time, best of {args.repeat}")


if __name__ == "__main__":
    main()

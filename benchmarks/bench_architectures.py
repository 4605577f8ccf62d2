"""Feature-transformer activations: kernel and full-evaluation speed for widths 256/512/1024.

Run:  python benchmarks/bench_architectures.py [--positions 300] [--repeat 7]

Prints, per activation and accumulator width L1 (per perspective):

* the activation kernel (``kernels.nnue.activation.ft_activate`` on both perspectives), microseconds
  per call and the ratio to ``pairwise`` at the same width;
* a full evaluation (``Evaluator.evaluate(board)``: features, refresh, activation, layer stack)
  of a quantised random network of the Stockfish 15.1 shape, microseconds per position and the
  ratio to the reference row: Stockfish 15.1's own network (L1 = 1024, pairwise);
* the pairwise kernel before the gated-unit family was added (lower clamps fixed at 0, uint8
  output), compiled here as the baseline that the new dispatch must not slow down.

Timings are the minimum over ``--repeat`` runs (the machine is shared); the positions are the
first ``--positions`` of the dev corpus.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import chess
import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_of, machine, positions  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.float_network import FloatNetwork
from nnue_infer.kernels.nnue.activation import ft_activate  # noqa: E402
from nnue_infer.network import FT_ACTIVATIONS, Architecture, HiddenLayer, default_gate_table  # noqa: E402
from nnue_infer.quantisation import SCHEMES, quantise, table_samples  # noqa: E402

WIDTHS = (256, 512, 1024)


@njit(cache=True)
def pairwise_before(acc, stm, clamp_max, shift, out):
    """The pairwise kernel as it was before the activation family (baseline only)."""
    half = acc.shape[1] // 2
    for h in range(2):
        row = acc[stm ^ h]
        base = h * half
        for j in range(half):
            a = min(max(row[j], 0), clamp_max)
            b = min(max(row[j + half], 0), clamp_max)
            out[base + j] = (a * b) >> shift


def architecture(activation: str, width: int) -> Architecture:
    shift = {1: 0, 2: 7, 3: 14, 4: 21}[FT_ACTIVATIONS[activation].degree]
    return Architecture(feature_set="HalfKAv2_hm", ft_width=width, ft_activation=activation, ft_clamp=127,
                        ft_shift=shift, psqt_buckets=8, output_buckets=8,
                        layers=(HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"),
                                HiddenLayer(1, "none")), skip_index=15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    boards = [chess.Board(fen) for fen in positions()[: args.positions]]
    print(f"# {machine()}\n# {len(boards)} positions, min of {args.repeat} runs, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")

    rng = np.random.default_rng(0)
    table = np.rint(127 * table_samples(default_gate_table(), 127)).astype(np.int32)  # lut_glu's gate
    print("\n## activation kernel (both perspectives), us/call, ratio to pairwise at the same width")
    print(f"{'activation':18s}" + "".join(f"{f'L1={w}':>22s}" for w in WIDTHS))
    kernel: dict[tuple[str, int], float] = {}
    for w in WIDTHS:
        acc = rng.integers(-127, 255, (2, w), dtype=np.int16)
        fns = {}
        for name, act in FT_ACTIVATIONS.items():
            out = np.empty(w if act.paired else 2 * w, np.int16)
            shift = {1: 0, 2: 7, 3: 14, 4: 21}[act.degree]
            fns[name] = lambda act=act, out=out, shift=shift: ft_activate(acc, 0, act.code, 127, shift, table, out)
        out8 = np.empty(w, np.uint8)
        fns["pairwise (before)"] = lambda: pairwise_before(acc, 0, 127, 7, out8)
        for name, t in best_of(fns, args.repeat, 2000).items():
            kernel[name, w] = t
    for name in [*FT_ACTIVATIONS, "pairwise (before)"]:
        print(f"{name:18s}" + "".join(f"{kernel[name, w] * 1e6:12.3f} ({kernel[name, w] / kernel['pairwise', w]:5.2f}x)"
                                      for w in WIDTHS))

    print("\n## full evaluation (random quantised network, Stockfish 15.1 layer stack), us/position, "
          "ratio to the reference")
    sf = nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network())
    full: dict[tuple[str, int], float] = {}
    for w in WIDTHS:
        fns = {"reference": lambda: [sf.evaluate(b) for b in boards]}
        for name in FT_ACTIVATIONS:
            ev = nnue_infer.Evaluator(quantise(FloatNetwork.random(architecture(name, w), seed=1), SCHEMES["stockfish"]))
            fns[name] = lambda ev=ev: [ev.evaluate(b) for b in boards]
        for name, t in best_of(fns, args.repeat, 1).items():
            full[name, w] = t / len(boards)
    ref = min(full["reference", w] for w in WIDTHS)
    print(f"reference: Stockfish 15.1's network (L1 = 1024, pairwise), full evaluation {ref * 1e6:.2f} us/position")
    print(f"{'activation':18s}" + "".join(f"{f'L1={w}':>22s}" for w in WIDTHS))
    for name in FT_ACTIVATIONS:
        print(f"{name:18s}" + "".join(f"{full[name, w] * 1e6:12.2f} ({full[name, w] / ref:5.2f}x)" for w in WIDTHS))


if __name__ == "__main__":
    main()

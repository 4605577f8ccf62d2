"""Signed gates (``glu``, ``bilinear``, ...) against ``pairwise``: batch speed from scratch.

Run:  python benchmarks/bench_gated.py [--positions 3298] [--repeat 7] [--study DIR]

Per network: ``Evaluator.evaluate_batch`` of the dev corpus's FENs on ONE Numba thread, process
CPU time per position (best of ``--repeat``; the networks take turns within each round, so load
changes on a shared machine hit all of them alike), positions per second and the ratio to the
``pairwise`` network of the same shape, plus the first dense layer's path
(``kernels.simd.first_layer_isa``: ``avx2-wide`` is AVX2's non-saturating form, taken by the
Stockfish-shaped ``bilinear`` network whose first-layer weights are replaced by values up to
-128 / 127).

Networks: random quantised networks (``quantise(FloatNetwork.random(...))``, seed 1) of two shapes,
the activation study's (Chess768, 4 mirrored king buckets, 2 x 128 -> 8 x (16 -> 32 -> 1)) and
Stockfish 15.1's (HalfKAv2_hm, 2 x 1024, same stack); with ``--study DIR`` also the study's own
seed-1 long-budget networks (``DIR/runs/long-<variant>-s1/network.safetensors``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import machine, positions  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.float_network import FloatNetwork  # noqa: E402
from nnue_infer.kernels.nnue import forward as K# noqa: E402
from nnue_infer.kernels import simd# noqa: E402
from nnue_infer.network import Architecture, HiddenLayer  # noqa: E402
from nnue_infer.quantisation import SCHEMES, quantise  # noqa: E402
from nnue_infer.training.train import default_architecture  # noqa: E402

VARIANTS = ("pairwise", "glu", "bilinear", "hswish_glu", "lut_glu")
#: Names of the first layer's paths (``kernels.simd``).
FC0_NAMES = {**dict(enumerate(simd.ISA_NAMES)), 4: "avx2-wide", -1: "portable-int8"}


def study_shape(variant: str) -> Architecture:
    return dataclasses.replace(default_architecture(128), ft_activation=variant,
                               ft_shift=SCHEMES["stockfish"].shift_for(variant))


def stockfish_shape(variant: str) -> Architecture:
    return Architecture(feature_set="HalfKAv2_hm", ft_width=1024, ft_activation=variant, ft_clamp=127,
                        ft_shift=SCHEMES["stockfish"].shift_for(variant), psqt_buckets=8, output_buckets=8,
                        layers=(HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"),
                                HiddenLayer(1, "none")), skip_index=15)


def networks(study: Path | None) -> dict[str, dict[str, nnue_infer.Network]]:
    """Groups of networks (group -> variant -> network), ``pairwise`` first in each."""
    groups = {
        shape: {v: quantise(FloatNetwork.random(make(v), seed=1), SCHEMES["stockfish"]) for v in VARIANTS}
        for shape, make in (("study shape, random", study_shape), ("SF 15.1 shape, random", stockfish_shape))
    }
    # Stockfish-sized first-layer weights (pairs of -128 / 127): AVX2 takes its non-saturating form
    rng = np.random.default_rng(1)
    sf_bilinear = groups["SF 15.1 shape, random"]["bilinear"]
    w0 = rng.choice(np.array([-128, -127, 127, 100, -90, 0], np.int8), size=sf_bilinear.layer_weights[0].shape)
    groups["SF 15.1 shape, random"]["bilinear, fc_0 weights +-128"] = dataclasses.replace(
        sf_bilinear, layer_weights=(w0, *sf_bilinear.layer_weights[1:]))
    if study is not None:
        groups["study networks (seed 1, long)"] = {
            v: nnue_infer.load(study / "runs" / f"long-{v}-s1" / "network.safetensors") for v in VARIANTS}
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=3298)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--study", type=Path, default=None, help="activation study output directory")
    args = parser.parse_args()
    fens = list(positions()[: args.positions])
    numba.set_num_threads(1)
    groups = networks(args.study)
    evaluators = {(g, v): nnue_infer.Evaluator(net) for g, nets in groups.items() for v, net in nets.items()}
    for ev in evaluators.values():  # compile / load the kernels, page in the weights
        ev.evaluate_batch(fens)
    best = dict.fromkeys(evaluators, float("inf"))
    for _ in range(args.repeat):
        for key, ev in evaluators.items():
            t = time.process_time()
            ev.evaluate_batch(fens)
            best[key] = min(best[key], (time.process_time() - t) / len(fens))
    print(f"# {machine()}\n# SIMD path {simd.ISA_NAMES[simd.ISA]}; {len(fens)} dev-corpus FENs, evaluate_batch on one "
          f"Numba thread, process CPU time, best of {args.repeat}, networks interleaved; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for g, nets in groups.items():
        print(f"\n## {g}")
        print(f"{'activation':30s} {'fc_0 path':>14s} {'us/position':>12s} {'positions/s':>12s} {'vs pairwise':>12s}")
        for v in nets:
            t = best[g, v]
            fc0 = FC0_NAMES.get(int(evaluators[g, v]._params[K.P_FC0_SIMD]), "?")
            print(f"{v:30s} {fc0:>14s} {t * 1e6:12.2f} {1 / t:12,.0f} {best[g, 'pairwise'] / t:11.2f}x")


if __name__ == "__main__":
    main()

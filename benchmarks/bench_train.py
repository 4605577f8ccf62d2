"""Training speed: the reference PyTorch trainer against the fast trainer, positions per second
per core, side by side in one run.

Run:  python benchmarks/bench_train.py [--width 256] [--activation pairwise] [--seconds 5] [--rounds 3]

Network: the activation study's shape, the bundled default network's
(:func:`nnue_infer.training.train.default_architecture`: Chess768 with 4 mirrored king buckets, 2 x
``--width`` feature transformer + 8 PSQT, 8 layer stacks of 16 -> 32 -> 1) with ``--activation``.  Positions: the dev corpus's 3,298 FENs
(``shared/data``), drawn at random into batches; the labels are seeded random values (the speed
does not depend on them).  One PyTorch and one Numba thread; every configuration takes its turn
in each of ``--rounds`` rounds of ``--seconds`` of process CPU time (so load on a shared machine
hits all alike), after one untimed step that compiles or loads the kernels.  A step is the whole
optimiser step: batch gather, forward, loss, backward, Adam, weight clipping.

Configurations:

* ``reference b1024``: :class:`nnue_infer.training.model.FloatModel` with its generic PyTorch path and
  batch 1,024, as the first activation study trained (``research/activation_study.py``);
* ``reference b16384``: the same model with the fast trainer's batch size;
* ``fast b16384``: :mod:`nnue_infer.training.fast` (Numba sparse first layer, bucket-sorted batch).

Prints positions per second (median and range over the rounds) and the ratio of medians to
``reference b1024``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import chess
import numba
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import machine, positions, print_rates  # noqa: E402

from nnue_infer.features import board_bitboards  # noqa: E402
from nnue_infer.quantisation import SCHEMES  # noqa: E402
from nnue_infer.training.model import FloatModel, prepare_features, win_probability_mse  # noqa: E402
from nnue_infer.training.train import default_architecture  # noqa: E402
from nnue_infer.training import fast  # noqa: E402


def _data(fens):
    bb = np.zeros((len(fens), 8), np.int64)
    stm = np.zeros(len(fens), np.uint8)
    for i, fen in enumerate(fens):
        board = chess.Board(fen)
        board_bitboards(board, bb[i])
        stm[i] = board.turn == chess.BLACK
    return {"bitboards": bb, "stm": stm}


def reference_stepper(arch, feats, buckets, values, batch):
    model = FloatModel(arch, 1, fused=False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    f_all, b_all, v_all = torch.from_numpy(feats), torch.from_numpy(buckets), torch.from_numpy(values)
    g = torch.Generator().manual_seed(1)

    def step():
        idx = torch.randint(0, len(values), (batch,), generator=g)
        loss = win_probability_mse(model(f_all[idx].long(), b_all[idx]), v_all[idx], arch, 361.0, 600.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        model.clip_weights()

    return step


def fast_stepper(arch, feats, buckets, values, batch):
    model = fast.FastModel(arch, 1)
    opt = fast.make_optimizer(model, 1e-3)
    rng = np.random.default_rng(1)

    def step():
        idx = rng.integers(0, len(values), batch)
        fast.train_step(model, opt, fast.sort_by_bucket(feats[idx], buckets[idx], values[idx], arch.output_buckets),
                        361.0, 600.0, 1e-3)

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--activation", default="pairwise")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", metavar="FILE", type=common.output_file,
                    help="also write the figures to FILE for benchmarks/manual.py")
    a = ap.parse_args()
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    arch = dataclasses.replace(default_architecture(a.width), ft_activation=a.activation,
                               ft_shift=SCHEMES["stockfish"].shift_for(a.activation))
    feats, buckets = prepare_features(_data(positions()), arch)
    values = np.random.default_rng(0).normal(0, 400, len(buckets)).astype(np.float32)
    configs = {"reference b1024": (reference_stepper, 1024), "reference b16384": (reference_stepper, 16384),
               "fast b16384": (fast_stepper, 16384)}
    steppers = {name: (make(arch, feats, buckets, values, batch), batch) for name, (make, batch) in configs.items()}
    for step, _ in steppers.values():
        step()
    rates = {name: [] for name in steppers}
    for _ in range(a.rounds):
        for name, (step, batch) in steppers.items():
            t0 = time.process_time()
            n = 0
            while time.process_time() - t0 < a.seconds:
                step()
                n += batch
            rates[name].append(n / (time.process_time() - t0))
    print(f"# bench_train: {arch.ft_activation} 2 x {a.width}, {len(values)} dev positions, "
          f"{a.rounds} rounds x {a.seconds:g} s process CPU, 1 PyTorch + 1 Numba thread")
    print(f"# {machine()}; PyTorch {torch.__version__}; load average {os.getloadavg()[0]:.1f}")
    print_rates(rates, "reference b1024", "trainer", "positions/s")
    if a.json:
        import statistics

        base = statistics.median(rates["reference b1024"])
        common.write_json(a.json, "training", [
            common.row(f"trainer {name}, optimiser steps", f"{statistics.median(r):,.0f} positions/s",
                       "" if name == "reference b1024" else f"reference b1024: {base:,.0f} positions/s",
                       "" if name == "reference b1024" else f"{statistics.median(r) / base:.1f}x",
                       ">= 100,000/s (issue 25)" if name.startswith("fast") else "",
                       met=statistics.median(r) >= 100_000 if name.startswith("fast") else None)
            for name, r in rates.items()],
            f"{arch.ft_activation} 2 x {a.width}, {len(values)} dev positions, median of {a.rounds} rounds x "
            f"{a.seconds:g} s process CPU, 1 PyTorch + 1 Numba thread; PyTorch {torch.__version__}")


if __name__ == "__main__":
    main()

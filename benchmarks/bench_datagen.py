"""Training-position generation: the python-chess generator against the compiled walk, positions
per CPU second, side by side in one run.

Run:  python benchmarks/bench_datagen.py [--positions 20000] [--rounds 3]

Settings: the activation study v2's (``GenerationSettings(children=3)``, the dev games outside the
25 % hold-out as perturbation starts, Stockfish 15.1's network as teacher).  Configurations:

* ``python-chess``: ``datagen_baseline.generate`` (the generator before the compiled walk:
  python-chess per move, one ``Evaluator.evaluate`` per position);
* ``compiled``: :func:`nnue_infer.training.datagen.generate` (compiled walk, labels in batches).

One Numba thread.  Each round times every configuration (process CPU time, labels included) on a
new seed, ``--positions`` for the baseline and 10x as many for the compiled walk, after an untimed
call that compiles or loads the kernels.  Prints positions per CPU second (median and range), the
ratio to ``python-chess``, and the make-up of both generators' output at ``--positions`` on ``--rounds``
seeds each (the same data definition should give the same shares up to sampling noise; duplicates
are counted as each generator meets them: the compiled walk also counts those in the unused tail of
its last round of episodes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datagen_baseline
from common import data_dir, machine, print_rates

import nnue_infer
from nnue_infer.training import datagen


def make_up(data: dict) -> dict:
    """Shares of the things the data definition fixes, from a generator's arrays."""
    bb = data["bitboards"].view(np.uint64)
    pieces = np.bitwise_count(bb[:, 6] | bb[:, 7])
    n = len(data["value"])
    return {"perturbation share": float((data["source"] == 0).mean()),
            "black to move": float(data["stm"].mean()),
            "in check": float(np.asarray(data["check"]).mean()),
            "castling rights": float((data["castling"] != 0).mean()),
            "legal en passant": float((data["ep_square"] >= 0).mean()),
            "pieces (mean)": float(pieces.mean()),
            "|value| median cp": float(np.median(np.abs(data["value"])) * 100 / 361),
            "duplicates per kept": data["skipped"]["duplicate"] / n,
            "filtered per kept": data["skipped"]["balance_filter"] / n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--positions", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    numba.set_num_threads(1)
    d = data_dir()
    if d is None:
        raise SystemExit("bench_datagen: the shared corpus (games-dev.jsonl) is not on this machine")
    games = datagen.read_games(d / "games-dev.jsonl")
    teacher = nnue_infer.stockfish_15_1_network()
    settings = datagen.GenerationSettings(children=3)

    def compiled(n, seed):
        out = datagen.generate(n, seed, teacher, games, settings=settings, progress=False)
        meta = json.loads(str(out["meta"]))
        check = np.zeros(n, bool)
        check[:meta["in_check"]] = True  # only the share is used
        return {**out, "check": check, "skipped": meta["skipped"]}

    configs = {"python-chess": (lambda n, seed: datagen_baseline.generate(n, seed, teacher, games, settings), 1),
               "compiled": (compiled, 10)}
    for fn, _ in configs.values():
        fn(500, 0)  # compile / load kernels, read caches
    rates = {name: [] for name in configs}
    same_n = {name: [] for name in configs}
    for r in range(a.rounds):
        for name, (fn, scale) in configs.items():
            n = a.positions * scale
            t0 = time.process_time()
            data = fn(n, 100 + r)
            rates[name].append(n / (time.process_time() - t0))
            same_n[name].append(make_up(data if scale == 1 else fn(a.positions, 100 + r)))
    print(f"# bench_datagen: children=3, {len(games)} dev games, teacher Stockfish 15.1, {a.rounds} rounds")
    print(f"# {machine()}; load average {os.getloadavg()[0]:.1f}")
    print_rates(rates, "python-chess", "generator", "positions per CPU s")
    print(f"{f'make-up ({a.positions} x {a.rounds} seeds)':<26} " + " ".join(f"{name:>13}" for name in same_n))
    for key in same_n["compiled"][0]:
        print(f"{key:<26} " + " ".join(f"{statistics.mean(s[key] for s in rounds):>13.3f}" for rounds in same_n.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

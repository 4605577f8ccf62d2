"""Training-position generation: the python-chess generator against the compiled walk, the
teacher's self-play and engine games, positions per CPU second, side by side in one run.

Run:  python benchmarks/bench_datagen.py [--positions 20000] [--rounds 3] [--nodes 400] [--json FILE]

Settings: the activation study v2's (``GenerationSettings(children=3)``, the dev games outside the
25 % hold-out as perturbation starts, Stockfish 15.1's network as teacher).  Configurations:

* ``python-chess``: ``datagen_baseline.generate`` (the generator before the compiled walk:
  python-chess per move, one ``Evaluator.evaluate`` per position);
* ``compiled``: :func:`nnue_infer.training.datagen.generate` (compiled walk, labels in batches);
* ``selfplay``: :func:`nnue_infer.training.selfplay.generate` (one-ply softmax games of the teacher,
  40 % from dev-game positions, 20 % from random endgames: the activation study v3's settings);
* ``search-N``: :func:`nnue_infer.training.searchplay.generate` (games of the compiled search at
  ``--nodes`` N nodes per move, labelled by the teacher; ``--search-share`` of ``--positions``).

One Numba thread.  Each round times every configuration (process CPU time, labels included) on a
new seed, ``--positions`` for the baseline, 10x as many for the compiled walk and self-play and
``--search-share`` x as many for the engine games, after an untimed call that compiles or loads the
kernels.  ``--json`` also writes the raw rates.  Prints positions per CPU second (median and range), the
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
import common
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
    ap.add_argument("--nodes", type=int, default=400, help="nodes per move of the engine games")
    ap.add_argument("--search-share", type=float, default=0.1,
                    help="positions of the engine games per round, as a share of --positions")
    ap.add_argument("--json", metavar="FILE", type=common.output_file,
                    help="also write the figures and raw rates to FILE for benchmarks/manual.py")
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

    from nnue_infer.training import searchplay, selfplay

    sp_settings = selfplay.SelfPlaySettings(start_fraction=0.4, endgame_fraction=0.2)
    search_settings = searchplay.SearchPlaySettings(nodes=a.nodes)
    configs = {"python-chess": (lambda n, seed: datagen_baseline.generate(n, seed, teacher, games, settings), 1),
               "compiled": (compiled, 10),
               "selfplay": (lambda n, seed: selfplay.generate(n, seed, teacher, None, sp_settings, progress=False,
                                                              games=games), 10),
               f"search-{a.nodes}": (lambda n, seed: searchplay.generate(n, seed, teacher, games=games,
                                                                         settings=search_settings, progress=False),
                                     a.search_share)}
    for fn, _ in configs.values():
        fn(500, 0)  # compile / load kernels, read caches
    rates = {name: [] for name in configs}
    same_n = {name: [] for name in configs}
    for r in range(a.rounds):
        for name, (fn, scale) in configs.items():
            n = max(1, round(a.positions * scale))
            t0 = time.process_time()
            data = fn(n, 100 + r)
            rates[name].append(n / (time.process_time() - t0))
            if name in ("python-chess", "compiled"):
                same_n[name].append(make_up(data if scale == 1 else fn(a.positions, 100 + r)))
    same_n = {k: v for k, v in same_n.items() if v}
    if a.json:
        base = statistics.median(rates["python-chess"])
        common.write_json(a.json, "training", [
            common.row(f"training-data generation, {name} (labels included), per CPU second",
                       f"{statistics.median(r):,.0f} positions/s",
                       "" if name == "python-chess" else f"python-chess generator: {base:,.0f} positions/s",
                       "" if name == "python-chess" else f"{statistics.median(r) / base:.1f}x")
            for name, r in rates.items()],
            f"children=3, {len(games)} dev games, teacher Stockfish 15.1, {a.positions} positions a round (scaled per "
            f"generator: {', '.join(f'{k} x{s:g}' for k, (_, s) in configs.items())}), median of {a.rounds} rounds, "
            "process CPU time, 1 Numba thread", argv,
            raw={"positions_per_cpu_second": rates, "scales": {k: s for k, (_, s) in configs.items()}})
    print(f"# bench_datagen: children=3, {len(games)} dev games, teacher Stockfish 15.1, {a.rounds} rounds")
    print(f"# {machine()}; load average {os.getloadavg()[0]:.1f}")
    print_rates(rates, "python-chess", "generator", "positions per CPU s")
    print(f"{f'make-up ({a.positions} x {a.rounds} seeds)':<26} " + " ".join(f"{name:>13}" for name in same_n))
    for key in same_n["compiled"][0]:
        print(f"{key:<26} " + " ".join(f"{statistics.mean(s[key] for s in rounds):>13.3f}" for rounds in same_n.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Playing strength with ``nnue_infer.search.match``: two runs, raw games kept in benchmarks/results/.

Run:  python benchmarks/bench_strength.py nets   [--nodes 25000] [--pairs 100] [--seed 1]
      python benchmarks/bench_strength.py levels [--tc 10+0.1] [--levels 1800,2200,2500,2850] [--pairs 8]
      python benchmarks/bench_strength.py candidate --net FILE --against default|stockfish [--nodes 2000]
                                                    [--pairs 400] [--sprt] [--seed 38] [--label NAME]

* ``nets``: the bundled default network against Stockfish 15.1's network, both searched by nnue-infer's own
  search at fixed nodes (the field's first check of a network: bullet users test at 25,000 nodes) from generated
  openings (8 random plies kept within 100 cp by the default network; ``--seed``).  Gives the default network's
  Elo with its 95 % interval (pentanomial).
* ``levels``: nnue-infer's search with Stockfish 15.1's network against Debian's Stockfish 15.1 with
  ``UCI_LimitStrength`` at several ``UCI_Elo`` levels at a clock (default 10+0.1), from the same kind of
  openings.  Each level gives an Elo difference; one rating on the UCI_Elo scale is fitted across levels by
  maximum likelihood (each game's expected score ``1 / (1 + 10 ** ((level - R) / 400))``, draws half a point),
  with a 95 % interval from the fit's Fisher information.  Stockfish anchors UCI_Elo to CCRL ratings at 60+0.6
  (src/search.cpp, struct Skill); at 10+0.1 the scale is only approximate.

* ``candidate``: a network file (e.g. a new default network) against the bundled default network or Stockfish
  15.1's network, both searched by nnue-infer's search at fixed nodes (default 2,000, activation study v3's Elo
  stage) from openings of 8 random plies kept within 100 cp by Stockfish 15.1's network (a judge neither side
  is); ``--sprt``: stopped at the decision of an SPRT of elo0 0 against elo1 10 (alpha = beta = 0.05,
  normalized Elo, fishtest's GSPRT), else ``--pairs`` pairs.

Each run writes ``strength-<run>-<label>.pgn`` and ``.json`` (the match result) and prints the machine's load
average before and after: the games share the machine's cores with whatever else runs, and clock games are
affected by it (both engines alike, in proportion to their CPU use).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

from nnue_infer.search.match import (  # noqa: E402
    Adjudication,
    Limits,
    PlayerSpec,
    TimeControl,
    generate_openings,
    play_match,
    write_json,
)

STOCKFISH = "/usr/games/stockfish"
RESULTS = ROOT / "results"
#: fastchess-like adjudication, to keep long dead games short: resign at 10 pawns for 3 moves, draw within
#: 0.1 pawn for 8 moves from move 40, a draw at 200 moves.
RULES = Adjudication(resign_moves=3, resign_score=1000, draw_moves=8, draw_score=10, draw_after=40, max_moves=200)


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _run(label: str, specs, pairs: int, seed: int, concurrency: int, sprt=None, opening_network=None) -> dict:
    openings = generate_openings(pairs, seed=seed, network=opening_network)
    pgn, js = RESULTS / f"strength-{label}.pgn", RESULTS / f"strength-{label}.json"
    print(f"[{label}] {specs[0].label} vs {specs[1].label}: {2 * pairs} games; load average {_load()}", flush=True)
    start = time.time()
    result = play_match(specs, games=2 * pairs, openings=openings, pgn=pgn, adjudication=RULES, sprt=sprt,
                        concurrency=concurrency, progress=sys.stderr.isatty(),
                        on_pair=lambda _pair, r: write_json(r, js))
    write_json(result, js)
    print(result.summary(), flush=True)
    print(f"[{label}] {time.time() - start:.0f} s wall; load average {_load()}; {pgn} {js}", flush=True)
    return result.to_dict()


def fit_rating(levels: list[float], points: list[float], games: list[int]) -> tuple[float, float]:
    """The maximum-likelihood rating ``R`` on the levels' scale of a player who scored ``points`` in ``games``
    against opponents rated ``levels``, and half its 95 % interval (Fisher information); the score of each game
    is taken as ``1 / (1 + 10 ** ((level - R) / 400))``."""
    from scipy.optimize import brentq

    k = math.log(10) / 400

    def grad(r: float) -> float:
        return sum(p - n / (1 + 10 ** ((lv - r) / 400)) for lv, p, n in zip(levels, points, games))

    lo, hi = min(levels) - 1500, max(levels) + 1500
    if grad(lo) <= 0:
        return lo, math.inf
    if grad(hi) >= 0:
        return hi, math.inf
    r = brentq(grad, lo, hi)
    info = sum(n * k * k * e * (1 - e) for lv, n in zip(levels, games) for e in [1 / (1 + 10 ** ((lv - r) / 400))])
    return r, 1.96 / math.sqrt(info)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", choices=["nets", "levels", "candidate"])
    parser.add_argument("--net", default=None, help="candidate: the network file")
    parser.add_argument("--against", default="default", help="candidate: default, stockfish or a file")
    parser.add_argument("--sprt", action="store_true", help="candidate: stop at the SPRT's decision (0, 10 Elo)")
    parser.add_argument("--label", default=None, help="candidate: the results' file label")
    parser.add_argument("--nodes", type=int, default=None, help="default: 25,000 (nets), 2,000 (candidate)")
    parser.add_argument("--tc", default="10+0.1")
    parser.add_argument("--levels", default="1800,2200,2500,2850")
    parser.add_argument("--pairs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None, help="openings; default: 1 (nets, levels), 38 (candidate)")
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    if args.run == "candidate":
        from nnue_infer.search.statistics import SPRT

        if not args.net:
            parser.error("candidate needs --net FILE")
        nodes, seed = args.nodes or 2000, 38 if args.seed is None else args.seed
        name = Path(args.net).stem
        specs = [PlayerSpec(Limits(nodes=nodes), network=args.net, name=name),
                 PlayerSpec(Limits(nodes=nodes), network=args.against, name=Path(args.against).stem)]
        label = args.label or f"{name}-vs-{Path(args.against).stem}-{nodes}n"
        _run(label, specs, args.pairs or 400, seed, args.concurrency,
             SPRT(0.0, 10.0, 0.05, 0.05) if args.sprt else None, opening_network="stockfish")
        return
    nodes, seed = args.nodes or 25000, 1 if args.seed is None else args.seed
    if args.run == "nets":
        pairs = args.pairs or 100
        specs = [PlayerSpec(Limits(nodes=nodes), network="default", name="default"),
                 PlayerSpec(Limits(nodes=nodes), network="stockfish", name="stockfish-15.1-net")]
        _run(f"nets-{nodes}n", specs, pairs, seed, args.concurrency)
        return
    pairs = args.pairs or 8
    tc = TimeControl.parse(args.tc)
    levels, points, games = [], [], []
    for level in (int(x) for x in args.levels.split(",")):
        specs = [PlayerSpec(Limits(tc=tc), network="stockfish", name="nnue-infer sf15.1-net"),
                 PlayerSpec(Limits(tc=tc), uci=STOCKFISH, name=f"Stockfish 15.1 UCI_Elo={level}",
                            options={"UCI_LimitStrength": "true", "UCI_Elo": str(level)})]
        d = _run(f"levels-{tc}-{level}", specs, pairs, seed, args.concurrency)
        levels.append(level)
        points.append(d["wins"] + d["draws"] / 2)
        games.append(d["games"])
        r, err = fit_rating(levels, points, games)
        summary = {"levels": levels, "points": points, "games": games, "rating": r, "rating_error95": err,
                   "tc": str(tc)}
        (RESULTS / f"strength-levels-{tc}-fit.json").write_text(json.dumps(summary, indent=2) + "\n")
        print(f"fit over {levels}: {r:.0f} +- {err:.0f} on the UCI_Elo scale at {tc}", flush=True)


if __name__ == "__main__":
    main()

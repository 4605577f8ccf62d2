"""Stockfish 19's (and 18's) threat-input nets against Stockfish 15.1's net and the live engine,
as ratios measured in one run.

Run:  python benchmarks/bench_sf19.py [--positions 1000] [--games 20] [--repeat 3] [--engine 200]

Per net (``sf15.1``, ``sf18``, ``sf19``; from the cache, ``nnue-infer fetch SPEC`` gets them):

* ``evaluate``: ``Evaluator.evaluate(board)``, a full refresh, mean microseconds per position
  over the dev positions;
* ``push+eval``: ``push(move)`` (validated) + ``evaluate()`` through the dev games, per ply: the
  incremental path a search or a game replay uses;
* ``game/ply``: ``evaluate_game`` per ply (the same incremental updates in one kernel call,
  no Python per move);
* ``batch``: ``evaluate_batch`` over the dev positions, positions per second on Numba's threads.

Within each round every net runs each measurement in turn (load on a shared machine hits them
alike); a figure is the best of ``--repeat`` rounds, and ``x sf15.1`` is the ratio to Stockfish
15.1's net (> 1 slower; for batch, < 1 fewer positions/s).  Last, the live engine (npm
``stockfish@19.0.0`` under Node.js, ``tests/node_engines.py``): ``position fen`` + ``eval`` +
``isready`` per position, the way to get Stockfish 19's number without this library, as a
ratio to ``evaluate`` of the same net.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import chess
import numba

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # node_engines: the live engines

import common  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.errors import NetworkNotFoundError  # noqa: E402
from nnue_infer.resources import known_network  # noqa: E402

SPECS = ("sf15.1", "sf18", "sf19")
ENGINES = {"sf18": "18", "sf19": "19"}


def _rounds(evaluators, boards, games, repeat):
    """Best-of-``repeat`` figures per net: evaluate us, push+eval us, game us/ply, batch s."""
    plies = sum(len(m) for _, m in games)
    best = {spec: [float("inf")] * 4 for spec in evaluators}
    for _ in range(repeat):
        for spec, ev in evaluators.items():
            t = time.perf_counter()
            for b in boards:
                ev.evaluate(b)
            single = (time.perf_counter() - t) / len(boards) * 1e6
            t = time.perf_counter()
            for start, moves in games:
                ev.set_position(start)
                for m in moves:
                    ev.push(m)
                    ev.evaluate()
            push = (time.perf_counter() - t) / plies * 1e6
            t = time.perf_counter()
            for start, moves in games:
                ev.evaluate_game(start, moves, validate=False)
            game = (time.perf_counter() - t) / plies * 1e6
            t = time.perf_counter()
            ev.evaluate_batch(boards)
            batch = time.perf_counter() - t
            best[spec] = [min(a, b) for a, b in zip(best[spec], (single, push, game, batch))]
    return best


def _engine_cost(spec: str, fens: list[str]) -> float | None:
    """Mean microseconds of one ``position fen`` + ``eval`` round trip of the live engine, or None."""
    from node_engines import NodeEngine

    try:
        sf = NodeEngine(ENGINES[spec])
    except (FileNotFoundError, KeyError) as exc:
        print(f"no live engine for {spec}: {exc}")
        return None
    try:
        sf.eval_lines(fens[0])
        t = time.perf_counter()
        for fen in fens:
            sf.eval_lines(fen)
        return (time.perf_counter() - t) / len(fens) * 1e6
    finally:
        sf.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engine", type=int, default=200, help="positions sent to each live engine (0: none)")
    parser.add_argument("--json", metavar="FILE", type=common.output_file,
                        help="also write the figures to FILE for benchmarks/manual.py")
    args = parser.parse_args()
    records = []
    boards = [chess.Board(f) for f in common.positions()][: args.positions]
    games = list(common.games())[: args.games]
    evaluators = {}
    for spec in SPECS:
        try:
            evaluators[spec] = nnue_infer.Evaluator(known_network(spec))
        except NetworkNotFoundError as exc:
            print(f"skipped {spec}: {exc}")
    if "sf15.1" not in evaluators:
        raise SystemExit("Stockfish 15.1's net is needed as the baseline")
    _rounds(evaluators, boards[:50], games[:2], 1)  # compile / load every kernel first
    best = _rounds(evaluators, boards, games, args.repeat)
    plies = sum(len(m) for _, m in games)
    print(f"{len(boards)} positions, {len(games)} games ({plies} plies), best of {args.repeat} rounds; "
          f"{common.machine()}")
    base = best["sf15.1"]
    head = ["net", "evaluate us", "x sf15.1", "push+eval us", "x sf15.1", "game us/ply", "x sf15.1", "batch pos/s",
            "x sf15.1"]
    print("".join(f"{h:>13}" for h in head))
    for spec, (single, push, game, batch) in best.items():
        rate, base_rate = len(boards) / batch, len(boards) / base[3]
        cells = [spec, f"{single:.2f}", f"{single / base[0]:.2f}", f"{push:.2f}", f"{push / base[1]:.2f}",
                 f"{game:.2f}", f"{game / base[2]:.2f}", f"{rate:,.0f}", f"{rate / base_rate:.2f}"]
        print("".join(f"{c:>13}" for c in cells))
        if spec != "sf15.1":
            bound = {"evaluate(board)": "<= 2.5x", "push(move) + evaluate()": "<= 2x"} if spec == "sf19" else {}
            for label, ours, theirs, unit in (("evaluate(board)", single, base[0], "us"),
                                              ("push(move) + evaluate()", push, base[1], "us"),
                                              ("evaluate_game, per ply", game, base[2], "us")):
                records.append(common.row(f"{spec} net: {label}", f"{ours:.2f} {unit}", f"sf15.1 net: {theirs:.2f} {unit}",
                                          f"{ours / theirs:.2f}x", bound.get(label, ""),
                                          met=ours / theirs <= float(bound[label][3:-1]) if label in bound else None))
            records.append(common.row(f"{spec} net: evaluate_batch (wall clock, {numba.get_num_threads()} threads)",
                                      f"{rate:,.0f} positions/s", f"sf15.1 net: {base_rate:,.0f} positions/s",
                                      f"{rate / base_rate:.2f}x"))
    if args.engine:
        fens = [b.fen() for b in boards[: args.engine]]
        for spec in ENGINES:
            if spec not in best:
                continue
            cost = _engine_cost(spec, fens)
            if cost is not None:
                print(f"live engine {spec} (node, eval round trip): {cost:,.0f} us per position = "
                      f"{cost / best[spec][0]:.0f}x nnue-infer's evaluate, {cost / best[spec][1]:.0f}x push+eval")
                records.append(common.row(f"{spec} net: evaluate(board)", f"{best[spec][0]:.2f} us",
                                          f"Stockfish {ENGINES[spec]} (npm, under node) position fen + eval: {cost:,.0f} us",
                                          f"{cost / best[spec][0]:.0f}x faster"))
    if args.json:
        common.write_json(args.json, "big-nets", records,
                          f"{len(boards)} dev positions, {len(games)} dev games ({plies} plies), best of {args.repeat} "
                          "rounds, wall clock, the nets taking turns in each round")


if __name__ == "__main__":
    main()

"""Which training data moves the default network's held-out error: the table of weights/README.md.

    python research/default_network_data.py --out research/default-network-data.json \\
        NAME=RUN_DIR [NAME=RUN_DIR ...]

Each RUN_DIR is an ``nnue-infer train`` output directory (``network.safetensors``, ``summary.json``
with ``config`` and ``accuracy``); a NAME may also be given as NAME=FILE.safetensors (a network
without a run, e.g. the shipped one).  For every network, the mean absolute error against Stockfish
15.1's network (centipawns, positions with |teacher| <= 1000 cp, as
:func:`nnue_infer.training.distil.agreement`) on the dev corpus (``$NNUE_INFER_SHARED/data/positions-dev.jsonl``):
all 3,298 positions, the 1,248 not derived from training data (held-out games and suites, hold-out
fraction 0.25) and, among those, by source (held-out human games, held-out Stockfish self-play games,
test suites) and by piece count.  Writes the JSON file and prints a Markdown table; with
``--card``, also the model card's accuracy table of the last network (:func:`agreement` figures:
MAE, correlation, sign agreement, for the whole corpus and its parts).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import chess
import numpy as np

from nnue_infer import Evaluator, load
from nnue_infer.training.datagen import is_held_out
from nnue_infer.training.distil import MAE_WINDOW_CP, agreement

GROUPS = ("all", "held_out", "human", "selfplay", "suite", "pieces<=8", "pieces9-20", "pieces>20")


def corpus(path: Path):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    boards = [chess.Board(r["fen"], chess960=bool(r.get("chess960"))) for r in rows]
    teacher = np.array([r["raw"]["value"] for r in rows], np.float64) * 100 / 361
    held = np.array([r.get("game_id") is None or is_held_out(r["game_id"], 0.25) for r in rows])
    kind = np.array(["suite" if r.get("game_id") is None else "human" if r["game_id"].startswith("h-") else "selfplay"
                     for r in rows])
    pieces = np.array([r["piece_count"] for r in rows])
    masks = {"all": np.ones(len(rows), bool), "held_out": held, "human": held & (kind == "human"),
             "selfplay": held & (kind == "selfplay"), "suite": held & (kind == "suite"),
             "pieces<=8": held & (pieces <= 8), "pieces9-20": held & (pieces > 8) & (pieces <= 20),
             "pieces>20": held & (pieces > 20)}
    masks["used_human"] = ~held & (kind == "human")
    masks["used_selfplay"] = ~held & (kind == "selfplay")
    masks["check"] = held & np.array([r["in_check"] for r in rows])
    return boards, teacher, masks


CARD_ROWS = (("**all dev positions**", "all"),
             ("**not derived from training data** (held-out games + test suites)", "held_out"),
             ("- positions of games used as starts, human", "used_human"),
             ("- positions of games used as starts, Stockfish self-play", "used_selfplay"),
             ("- held-out human games", "human"), ("- held-out Stockfish self-play games", "selfplay"),
             ("- test-suite positions (WAC, perft, endgame suites...)", "suite"),
             ("- held out, side to move in check", "check"), ("- held out, at most 8 pieces", "pieces<=8"))


def card_table(student, teacher, masks) -> None:
    print("| positions | n | MAE, \\|SF\\| <= 1000 cp | correlation | sign agreement, \\|SF\\| >= 100 cp |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, key in CARD_ROWS:
        a = agreement(student[masks[key]], teacher[masks[key]])
        print(f"| {label} | {a['positions']:,} | {a['mae_cp']:.1f} cp | {a['correlation']:.3f} | "
              f"{100 * a['sign_agreement']:.1f} % ({a['sign_positions']:,}) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="NAME=RUN_DIR or NAME=NETWORK_FILE")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--card", action="store_true", help="also print the model card's accuracy table of the last network")
    args = ap.parse_args()
    shared = Path(os.environ.get("NNUE_INFER_SHARED", "../shared"))
    boards, teacher, masks = corpus(shared / "data" / "positions-dev.jsonl")
    window = np.abs(teacher) <= MAE_WINDOW_CP
    results = {}
    for spec in args.runs:
        name, path = spec.split("=", 1)
        path = Path(path)
        net_path = path / "network.safetensors" if path.is_dir() else path
        net = load(net_path)
        student = Evaluator(net).evaluate_batch(boards).astype(np.float64) * 100 / net.architecture.units_per_pawn
        card = student
        err = np.abs(student - teacher)
        rec = {"network": str(net_path), "bytes": net_path.stat().st_size}
        rec["mae_cp"] = {g: float(err[masks[g] & window].mean()) for g in GROUPS}
        rec["positions"] = {g: int((masks[g] & window).sum()) for g in GROUPS}
        summary = path / "summary.json"
        if path.is_dir() and summary.exists():
            s = json.loads(summary.read_text())
            rec.update({k: s.get(k) for k in ("data", "positions", "config", "train_seconds", "final")})
        results[name] = rec
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print("| run | " + " | ".join(GROUPS) + " |")
    print("| --- |" + " ---: |" * len(GROUPS))
    for name, rec in results.items():
        print(f"| {name} | " + " | ".join(f"{rec['mae_cp'][g]:.1f}" for g in GROUPS) + " |")
    first = next(iter(results.values()))
    print("| positions | " + " | ".join(str(first["positions"][g]) for g in GROUPS) + " |")
    if args.card:
        print()
        card_table(card, teacher, masks)


if __name__ == "__main__":
    main()

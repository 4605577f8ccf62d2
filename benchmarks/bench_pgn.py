"""PGN file -> values, end to end on one core: the fast path (nnue_infer.io.pgn) against python-chess's.

Both paths read the same PGN file (the dev games, repeated, exported by python-chess) and write
CSV rows (game, ply, UCI move, FEN, value, cp, cp_white; the fast path, ``nnue-infer eval --pgn``'s
``score_pgn``, also the tags, SAN, in_check and outcome) to memory, with one Numba thread and one parser thread.  The python-chess path is the
command line's before the fast path: ``chess.pgn.read_game`` per game, ``evaluate_game`` (which
checks every move's legality again), then ``Board.push`` / ``Board.fen()`` for the FEN column.
Values are checked equal.  Run: ``python benchmarks/bench_pgn.py [--copies 4]``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import tempfile
import time

import chess
import chess.pgn
import numba
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
from common import data_dir  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.io import pgn  # noqa: E402


def centipawns(values: np.ndarray, black: np.ndarray, per_pawn: int) -> tuple[np.ndarray, np.ndarray]:
    """(cp, cp_white): tdiv(100 * value, per_pawn), side to move and White."""
    v = np.asarray(values, np.int64)
    cp = np.sign(v) * (np.abs(100 * v) // per_pawn)
    return cp, np.where(black, -cp, cp)


def write_pgn(path: str, copies: int) -> None:
    """The dev games (``copies`` times) as PGN with their headers, as python-chess exports them."""
    with open(data_dir() / "games-dev.jsonl", encoding="utf-8") as f:
        games = [json.loads(line) for line in f]
    with open(path, "w", encoding="utf-8") as out:
        for _ in range(copies):
            for g in games:
                game = chess.pgn.Game.from_board(chess.Board(g["start_fen"]))
                for key in ("Event", "Site", "Date", "White", "Black"):
                    if isinstance(g["meta"].get(key), str):
                        game.headers[key] = g["meta"][key]
                game.headers["Result"] = g["result"]
                game.add_line([chess.Move.from_uci(m) for m in g["moves"]])
                print(game, file=out, end="\n\n")


def python_chess_path(path: str, ev) -> np.ndarray:
    """The command line's PGN path before nnue_infer.io.pgn; returns the values."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    values_all = []
    with open(path, encoding="utf-8-sig") as f:
        number = 0
        while (game := chess.pgn.read_game(f)) is not None:
            number += 1
            board = game.board()
            moves = list(game.mainline_moves())
            values = ev.evaluate_game(board, moves)
            fens, black = [board.fen()], [board.turn == chess.BLACK]
            for move in moves:
                board.push(move)
                fens.append(board.fen())
                black.append(board.turn == chess.BLACK)
            cp, cp_white = centipawns(values, np.array(black, np.int64), 361)
            ucis = [""] + [m.uci() for m in moves]
            writer.writerows(zip([number] * len(fens), range(len(fens)), ucis, fens, values.tolist(), cp.tolist(),
                                 cp_white.tolist()))
            values_all.append(values)
    return np.concatenate(values_all)


def fast_path(path: str, ev) -> np.ndarray:
    """What ``nnue-infer eval --pgn`` runs now: nnue_infer.io.score.score_pgn (Rust parser + notation kernel +
    batch evaluation) and nnue_infer.io.output's CSV writer."""
    from nnue_infer.io.output import TableWriter
    from nnue_infer.io.score import score_pgn

    sink = io.BytesIO()
    writer = TableWriter(sink, "csv")
    values_all = []
    with open(path, encoding="utf-8-sig") as f:
        for table, _ in score_pgn(ev, f, source=path):
            writer.write(table)
            values_all.append(np.ma.getdata(table["value"]))
    return np.concatenate(values_all).astype(np.int32)


def parse_only(path: str) -> int:
    return sum(len(b) for b in pgn.read_pgn(path, threads=1))


def timed(fn, *args, repeat: int = 1):
    """Best wall-clock and CPU (this process) seconds over ``repeat`` runs, and the result."""
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        result = fn(*args)
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return (wall, cpu), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=4, help="times the 264 dev games are repeated (default 4)")
    parser.add_argument("--net", default="stockfish", help="network (default: stockfish, Stockfish 15.1's)")
    parser.add_argument("--json", metavar="FILE", type=common.output_file,
                        help="also write the figures to FILE for benchmarks/manual.py")
    args = parser.parse_args()
    numba.set_num_threads(1)
    ev = nnue_infer.Evaluator(nnue_infer.network_from_spec(args.net))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "games.pgn")
        write_pgn(path, args.copies)
        small = os.path.join(tmp, "warm.pgn")
        write_pgn(small, 1)
        fast_path(small, ev)  # compile / load the kernels once
        t_fast, v_fast = timed(fast_path, path, ev, repeat=3)
        t_parse, n = timed(parse_only, path, repeat=3)
        t_slow, v_slow = timed(python_chess_path, path, ev)
    assert np.array_equal(v_fast, v_slow), "the two paths disagree"
    load = os.getloadavg()
    print(f"PGN -> values + CSV, {n:,} positions ({args.copies} x the 264 dev games), 1 Numba thread, "
          f"1 parser thread; load average {load[0]:.2f} on {os.cpu_count()} cores")
    print("positions/s                                               wall clock   per CPU second")
    for label, (wall, cpu) in (("python-chess path (read_game, evaluate_game, Board.fen)", t_slow),
                               ("fast path (eval --pgn: score_pgn + output)", t_fast),
                               ("fast path, reading only (parse + FEN/SAN/UCI/check)", t_parse)):
        print(f"  {label:<56} {n / wall:>10,.0f}   {n / cpu:>12,.0f}")
    print(f"fast path / python-chess path: {t_slow[0] / t_fast[0]:.1f}x wall clock, "
          f"{t_slow[1] / t_fast[1]:.1f}x CPU time; values identical: yes")
    if args.json:
        slow = f"python-chess path (read_game, evaluate_game, Board.fen): {n / t_slow[1]:,.0f} positions/s"
        common.write_json(args.json, "files", [
            common.row("PGN -> values + CSV, fast path (eval --pgn), per CPU second", f"{n / t_fast[1]:,.0f} positions/s",
                       slow, f"{t_slow[1] / t_fast[1]:.1f}x"),
            common.row("PGN reading only (parse + FEN/SAN/UCI/check), per CPU second", f"{n / t_parse[1]:,.0f} positions/s",
                       slow, f"{t_slow[1] / t_parse[1]:.1f}x"),
        ], f"{n:,} positions ({args.copies} x the 264 dev games), 1 Numba thread, 1 parser thread, network {args.net}")


if __name__ == "__main__":
    main()

"""Incremental evaluation, piece by piece, next to python-chess's own ``Board.push``.

pytest-benchmark (``python -m pytest benchmarks/bench_incremental.py --benchmark-enable -n 0``)
times single operations at a fixed position (push, evaluate and pop of one move, so the
state is the same every round).  Run as a script, it walks the dev games ply by ply and
prints medians of every operation and the overhead beyond ``Board.push``, then the per-move
path against the C floor of an incremental evaluation (``--limits DIR``: a copy of
``shared/limits`` built with ``make``; its ``bench eval_incremental`` runs in the same run, thread
CPU time): ``push(m, validate=False)`` + ``evaluate()`` + ``pop()`` beyond python-chess's own
``push`` + ``pop``, taken apart (the evaluator's wrappers, the compiled call alone, the compiled
call between python-chess's push and pop) and as a ratio to the C floor::

    python benchmarks/bench_incremental.py [--rounds N] [--limits /tmp/limits]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import chess
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

import nnue_infer  # noqa: E402

#: A middlegame position with a quiet move, a capture and a king move (no castling rights left).
FEN = "r1bq1rk1/pppp1ppp/2n2n2/2b1p3/2B1P3/3P1N2/PPP2PPP/RNBQ1RK1 w - - 2 6"
MOVES = {"quiet": "c1g5", "capture": "f3e5", "king": "g1h1"}


@pytest.fixture(scope="module")
def ev() -> nnue_infer.Evaluator:
    ev = nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network())
    ev.set_position(chess.Board(FEN))
    ev.evaluate()
    return ev


def test_board_push_pop_python_chess(benchmark):
    """The floor: python-chess's ``Board.push`` + ``Board.pop`` of a quiet move."""
    board = chess.Board(FEN)
    move = chess.Move.from_uci(MOVES["quiet"])

    def run():
        board.push(move)
        board.pop()

    benchmark(run)


@pytest.mark.parametrize("kind", sorted(MOVES))
@pytest.mark.parametrize("validate", [True, False], ids=["validated", "unvalidated"])
def test_push_evaluate_pop(benchmark, ev, kind, validate):
    """``push(move)`` + ``evaluate()`` + ``pop()``: the parent stays evaluated, so every round is
    one incremental update (king move: a refresh through the warm refresh cache)."""
    move = chess.Move.from_uci(MOVES[kind])

    def run():
        ev.push(move, validate=validate)
        ev.evaluate()
        ev.pop()

    benchmark(run)


def test_evaluate_current_position(benchmark, ev):
    """``evaluate()`` of an already evaluated position: the layer stack and the call overhead only."""
    benchmark(ev.evaluate)


def test_is_legal_python_chess(benchmark):
    """python-chess's ``Board.is_legal``, which ``push`` calls unless ``validate=False``."""
    board = chess.Board(FEN)
    move = chess.Move.from_uci(MOVES["quiet"])
    benchmark(lambda: board.is_legal(move))


# -- script: walk the dev games ---------------------------------------------------------------

def walk(ev: nnue_infer.Evaluator, games, validate: bool, every: int = 1) -> dict[str, list[int]]:
    """Per-operation times (ns) along every game: Board.push, push, evaluate, pop by move kind."""
    clock = time.perf_counter_ns
    t: dict[str, list[int]] = {k: [] for k in ("board_push", "push", "push_king", "eval", "eval_king", "pop")}
    for start, moves in games:
        ev.set_position(start)
        ev.evaluate()
        board = start.copy()
        for i, move in enumerate(moves):
            king = board.piece_type_at(move.from_square) == chess.KING
            t0 = clock()
            board.push(move)
            t1 = clock()
            ev.push(move, validate=validate)
            t2 = clock()
            if i % every == every - 1:
                ev.evaluate()
                t3 = clock()
                t["eval_king" if king else "eval"].append(t3 - t2)
            t["board_push"].append(t1 - t0)
            t["push_king" if king else "push"].append(t2 - t1)
        for _ in moves:
            t0 = clock()
            ev.pop()
            t["pop"].append(clock() - t0)
    return t


def per_call_ns(fn, number: int = 5000) -> float:
    """Thread CPU nanoseconds per call of ``fn`` over ``number`` calls."""
    t = time.thread_time_ns()
    for _ in range(number):
        fn()
    return (time.thread_time_ns() - t) / number


def per_move_path(rounds: int = 15) -> dict:
    """The per-move path at :data:`FEN` with a quiet move, each figure the best of ``rounds`` interleaved
    rounds (ns, thread CPU time): python-chess's push + pop, the Evaluator's push + evaluate + pop and its
    parts (wrappers of push and pop; evaluate without its in-use token; the compiled entry alone, hot; the
    compiled entry between python-chess's push and pop, as the path calls it)."""
    from nnue_infer import evaluator as E

    ev = nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network())
    ev.set_position(chess.Board(FEN))
    ev.evaluate()
    move = chess.Move.from_uci(MOVES["quiet"])
    board = ev._board
    ev.push(move, validate=False)
    ev.evaluate()
    ply, entry, address = len(board.move_stack), E._ENTRIES[ev._ply_entry], ev._address
    oc = board.occupied_co
    position = (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings, oc[1], oc[0],
                board.turn)
    ev.pop()

    def chess_only():
        board.push(move)
        board.pop()

    def wrappers():
        ev.push(move, validate=False)
        ev.pop()

    def untokened():
        ev.push(move, validate=False)
        ev._evaluate_current()
        ev.pop()

    def path():
        ev.push(move, validate=False)
        ev.evaluate()
        ev.pop()

    def entry_hot():  # trusted = ply: the incremental update from the parent's pair, every call
        entry(address, ply, ply, position)

    def entry_between():
        board.push(move)
        entry(address, ply, ply, position)
        board.pop()

    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, fn in (("chess", chess_only), ("wrappers", wrappers), ("untokened", untokened), ("path", path),
                         ("entry_between", entry_between)):
            times.setdefault(name, []).append(per_call_ns(fn))
        ev.push(move, validate=False)
        ev.evaluate()
        times.setdefault("entry_hot", []).append(per_call_ns(entry_hot))
        ev.pop()
    return {name: min(values) for name, values in times.items()} | {"isa": ev.isa}


def c_floor(limits: str) -> dict[str, float]:
    """Median thread-CPU ns of the C floor's ``eval_incremental`` ``big hot`` (Stockfish 15.1's shapes) by
    implementation (scalar, avx2, avx512 ...), from ``LIMITS/bench``."""
    out = subprocess.run([os.path.join(limits, "bench"), "eval_incremental"], capture_output=True, text=True,
                         check=True, timeout=1800, env=dict(os.environ, CPUCLOCK="1", ROUNDS="5")).stdout
    floors = {}
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == "R" and f[1] == "eval_incremental" and f[2] in ("big hot", "big warm(hot parent, 1 kbucket)"):
            floors[f"{f[3]} {f[2].split()[1].split('(')[0]}"] = float(f[4])
    return floors


def print_per_move_path(limits: str | None) -> None:
    t = per_move_path()
    overhead = t["path"] - t["chess"]
    print(f"\nper-move path at a middlegame quiet move (thread CPU ns, best of 15 interleaved rounds; the "
          f"evaluator's path: {t['isa']}):")
    print(f"  python-chess push + pop                         {t['chess']:8.0f}")
    print(f"  push(validate=False) + evaluate() + pop         {t['path']:8.0f}")
    print(f"  overhead beyond python-chess                    {overhead:8.0f}  (target <= 1200)")
    print(f"    push and pop wrappers (in-use token incl.)    {t['wrappers'] - t['chess']:8.0f}")
    print(f"    evaluate() without its token                  {t['untokened'] - t['wrappers']:8.0f}")
    print(f"    evaluate()'s in-use token                     {t['path'] - t['untokened']:8.0f}")
    print(f"  compiled entry alone, hot                       {t['entry_hot']:8.0f}")
    print(f"  compiled entry between python-chess push, pop  {t['entry_between'] - t['chess']:8.0f}")
    if limits:
        for name, ns in sorted(c_floor(limits).items()):
            print(f"  C floor {name:<28s}          {ns:8.0f}  overhead / floor {overhead / ns:5.1f}x, "
                  f"compiled entry hot / floor {t['entry_hot'] / ns:5.1f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="passes over the games (default 2)")
    parser.add_argument("--limits", help="a built copy of shared/limits, for the C floor of an incremental evaluation")
    parser.add_argument("--path-only", action="store_true", help="only the per-move path against the C floor")
    args = parser.parse_args(argv)
    if args.path_only:
        print(f"machine: {common.machine()}")
        print_per_move_path(args.limits)
        return 0
    games = [(b, list(m)) for b, m in common.games()]
    ev = nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network())
    walk(ev, games[:5], True)  # compile / load the kernels, warm the refresh cache
    med = lambda xs: statistics.median(xs) / 1000  # noqa: E731  (us)
    print(f"machine: {common.machine()}")
    print(f"{len(games)} games, {sum(len(m) for _, m in games)} plies, {args.rounds} rounds; medians in us\n")
    print(f"{'':36s}{'validated push':>16s}{'validate=False':>16s}")
    rows: dict[str, list[str]] = {}
    for validate in (True, False):
        t = {k: [] for k in ("board_push", "push", "push_king", "eval", "eval_king", "pop")}
        for _ in range(args.rounds):
            for k, v in walk(ev, games, validate).items():
                t[k] += v
        bp = med(t["board_push"])
        figures = {
            "python-chess Board.push": bp,
            "push(move), non-king": med(t["push"]),
            "push(move), king": med(t["push_king"]),
            "evaluate() after a non-king move": med(t["eval"]),
            "evaluate() after a king move": med(t["eval_king"]),
            "push+evaluate beyond Board.push, non-king": med(t["push"]) + med(t["eval"]) - bp,
            "push+evaluate beyond Board.push, king": med(t["push_king"]) + med(t["eval_king"]) - bp,
            "pop()": med(t["pop"]),
        }
        for name, value in figures.items():
            rows.setdefault(name, []).append(f"{value:16.2f}")
    for name, cells in rows.items():
        print(f"{name:36s}{''.join(cells)}" if len(name) <= 36 else f"{name}\n{'':36s}{''.join(cells)}")
    lazy = walk(ev, games, False, every=8)
    print(f"\nevaluate() every 8th ply (7 pushes pending, validate=False): {med(lazy['eval']):.2f} us")
    plies = sum(len(m) + 1 for _, m in games)
    for validate in (True, False):
        t0 = time.perf_counter()
        for start, moves in games:
            ev.evaluate_game(start, moves, validate=validate)
        dt = time.perf_counter() - t0
        print(f"evaluate_game over all games, validate={validate}: {plies / dt:,.0f} plies/s")
    print_per_move_path(args.limits)
    return 0


if __name__ == "__main__":
    sys.exit(main())

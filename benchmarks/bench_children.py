"""Every child of a position: ``Evaluator.evaluate_moves`` per child against C's incremental evaluation
(``shared/limits``) and against the Python loop it replaces (issue 22).

One command builds the C reference kernels as ``bench_limits.py`` does and alternates ROUNDS
times: one C process (its ``eval_incremental big hot`` case: one accumulator update of a quiet
move plus the layer stack of Stockfish 15.1's shapes, the best implementation, hot caches: issue
22's floor; and ``big cold(4096 pos)``, the same over 4,096 positions whose weight rows are not
in the caches, for what a child of a new position costs C) and this process's measurements, per
network, over the same positions (dev corpus, every ``--step``-th):

* ``evaluate_moves``: ``ev.evaluate_moves(board)`` for each position (compiled legal moves, one
  incremental update per child, a refresh-cache refresh per king move), per child;
* ``kernel``: the same compiled call without the Python wrapper (the Evaluator's compiled entry
  point on prepared arguments), per child;
* ``loop``: ``for m in board.legal_moves: ev.push(m, validate=False); ev.evaluate(); ev.pop()``
  on the position set with ``set_position``, per child (python-chess's move generation included);
* ``batch``: ``evaluate_children_batch`` on one thread over all the positions (boards), per child;
* ``hot``: ``ev.evaluate_moves(board)`` ``REPEAT`` times in a row per position, per child (the
  parent's and the children's weight rows in the caches, as in C's hot figure);
* ``game walk``: ``ev.evaluate_moves()`` on the followed position before each move of dev games
  (``games-dev.jsonl``, every ``--games-step``-th), less the same walk with ``push`` alone, per
  child: the analysis / search use, where the parent is one incremental update from the position
  before and the children of consecutive positions share most weight rows.

The C process of each round also times ``eval_incremental big warm(hot parent, 1 kbucket)`` (a
quiet move of a hot parent, the rows from one king bucket per perspective in L2/L3: what one child
of this job costs C) and ``eval_scratch big`` hot / warm(1 kbucket) / cold(4096 pos) (a parent
from scratch).  Their sum per child, ``eval_scratch / (children a position) + eval_incremental
warm``, is C's floor for the children job (king-move children counted as quiet moves, no move
generation), printed for each parent scenario with its ratio to C hot (the 3x target of issue 22
cannot be met where that ratio exceeds 3) and evaluate_moves' ratio to it; and the warm floor with
the king-move children (their share of this position set) counted as C's refresh of one
perspective (``refresh_1p big1024+psqt warm(1 kbucket)``) instead of its update
(``update_1p big1024 quiet warm(1 kbucket)``).

Once after the rounds, C's cost of weight rows from memory: one random 2 KB row of the 46 MB
matrix (``memory`` case; the rows a child of a new position brings in are such rows).

A breakdown for the first network splits the compiled call's time per child (thread CPU): legal
moves and ``play`` alone (a compiled loop); the compiled call on given moves (standard-chess
positions), less the same calls with none given: the children whose move is not a king move, those
whose is (a refresh through the refresh cache), and one child evaluated again and again (hot
caches, as C's figure); and the parent with the call's own cost, per position.

A second table times ``evaluate(fen)`` (the compiled FEN parser, then the full-refresh kernel)
against ``evaluate(board)`` for the same positions (issue 22 item 4: at most 1.5x), and the
python-chess reading it replaced (``evaluate(chess.Board(fen))``), per position.

Everything is thread CPU time, one Numba thread, in one run; a cell is the median over rounds.
The C floor has Stockfish 15.1's shapes only: the ratio to C is given for that network.

    python benchmarks/bench_children.py                 # ROUNDS=3, sf15.1 sf19 default
    python benchmarks/bench_children.py --nets sf15.1 --rounds 5 --step 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import chess
import numba
import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from bench_limits import build_c, shared_dir  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer import children  # noqa: E402
from nnue_infer.kernels.chess.movegen import MAX_MOVES, legal_moves, play  # noqa: E402

C_CASE = "eval_incremental\tbig hot"
C_COLD = "eval_incremental\tbig cold(4096 pos)"
#: C doing this job's children: a hot parent, the children's weight rows from one king bucket per
#: perspective (2 x 1.4 MB, in L2/L3), 4,096 children.
C_WARM = "eval_incremental\tbig warm(hot parent, 1 kbucket)"
#: The parent of the job from scratch (both perspectives refreshed, 30 rows each, and evaluated):
#: the same position again (hot), 4,096 positions sharing one king bucket per perspective (warm),
#: 4,096 positions in random king buckets (cold).
C_PARENTS = {"hot": "eval_scratch\tbig hot", "warm": "eval_scratch\tbig warm(1 kbucket)",
             "cold": "eval_scratch\tbig cold(4096 pos)"}
#: A king-move child costs C one perspective's refresh instead of its update (rows of one king bucket).
C_REFRESH = "refresh_1p\tbig1024+psqt warm(1 kbucket)"
C_UPDATE = "update_1p\tbig1024 quiet warm(1 kbucket)"
C_ROUND = (C_CASE, C_COLD, C_WARM, *C_PARENTS.values(), C_REFRESH, C_UPDATE)
#: What a position's weight rows cost C from memory (run once, after the rounds): one 2 KB row
#: (an accumulator row of Stockfish 15.1's net) from the 46 MB matrix, and a parent from scratch
#: (both perspectives refreshed, 30 rows each, and evaluated) over 4,096 positions.
C_ROW = "memory\trandom 2KB row of 46MB matrix, independent"
#: The networks with the C floors' shapes (Stockfish 15.1's).
C_NETS = ("sf15.1", "stockfish")
#: Calls per position of the ``hot`` measurement.
REPEAT = 8


def run_c(bench: Path, cases: tuple[str, ...] = C_ROUND) -> dict[str, tuple[float, str]]:
    """One C process (2 interleaved rounds, thread CPU time): per case the best implementation's
    median (ns) and its name."""
    import subprocess

    env = dict(os.environ, ROUNDS="2", CPUCLOCK="1")
    pattern = "|".join(c.replace("\t", "/") + "/" for c in cases)
    out = subprocess.run([str(bench), pattern], env=env, capture_output=True, text=True, check=True).stdout
    best = {}
    for line in out.splitlines():
        f = line.split("\t")
        case = f"{f[1]}\t{f[2]}" if f[0] == "R" else None
        if case in cases and f[3] != "novec" and (case not in best or float(f[4]) < best[case][0]):
            best[case] = (float(f[4]), f[3])
    assert len(best) == len(cases), out
    return best


@njit
def moves_and_play(bitboards, stm, castling, ep):
    """Legal moves and ``play`` of every child of every position; returns the number of children."""
    moves = np.empty(MAX_MOVES, np.uint16)
    child = np.empty(8, np.int64)
    count = 0
    for i in range(bitboards.shape[0]):
        n = legal_moves(bitboards[i], stm[i], castling[i], ep[i], False, moves)
        for k in range(n):
            play(bitboards[i], stm[i], np.int64(moves[k]), ep[i], child)
        count += n
    return count


def breakdown(net: Net) -> dict[str, float]:
    """Per child ns of the compiled call on given moves (standard-chess positions), each less the
    same calls with no move given (the parents and the calls' own cost): the children whose move is
    not a king move, those whose is, and the first move given as many times as the position has
    children (the same child again and again: hot caches, as C's figure)."""
    rows = [(p, b) for p, b in zip(net.prepared, net.boards) if not b.chess960]
    ev = net.ev
    kernel, address, ply = ev._entry_point(ev._children_entry), ev._address, len(ev._board.move_stack) + 1
    io = children.io_buffer()

    def given(select):
        out = []
        for (position, castling, ep, c960), b in rows:
            moves = list(b.legal_moves)
            chosen = select(b, moves)
            out.append((position, castling, ep, c960, children.move_codes(chosen), len(chosen)))
        return out

    def king(b: chess.Board, m: chess.Move) -> bool:
        return b.piece_type_at(m.from_square) == chess.KING

    sets = {"none": given(lambda b, ms: []),
            "non-king children": given(lambda b, ms: [m for m in ms if not king(b, m)]),
            "king-move children": given(lambda b, ms: [m for m in ms if king(b, m)]),
            "one child repeated (hot)": given(lambda b, ms: ms[:1] * len(ms))}

    def run(args):
        t = time.thread_time_ns()
        for position, castling, ep, c960, moves, n in args:
            io.moves[:n] = moves
            kernel(address, ply, 0, position, castling, ep, c960, n, False, io.address)
        return time.thread_time_ns() - t

    out = {name: run(args) for name, args in sets.items()}
    base = out.pop("none")
    result = {}
    bitboards = np.array([p[0][:8] for p, _ in rows], np.uint64).view(np.int64)
    stm = np.array([0 if p[0][8] else 1 for p, _ in rows], np.int64)
    castling = np.array([p[1] for p, _ in rows], np.uint64).view(np.int64)
    ep = np.array([p[2] for p, _ in rows], np.int64)
    moves_and_play(bitboards, stm, castling, ep)
    t = time.thread_time_ns()
    n = moves_and_play(bitboards, stm, castling, ep)
    result["moves and play"] = (time.thread_time_ns() - t) / n
    for name, args in sets.items():
        if name != "none":
            result[name] = (out[name] - base) / max(1, sum(a[5] for a in args))
    result["parent and call (per position)"] = base / len(rows)
    return result


def thread_ns(fn) -> int:
    t = time.thread_time_ns()
    fn()
    return time.thread_time_ns() - t


class Net:
    """The measurements of one network over the position set."""

    def __init__(self, spec: str, boards: list[chess.Board], games: list[tuple[chess.Board, list[chess.Move]]]) -> None:
        self.spec = spec
        self.ev = nnue_infer.Evaluator(spec)
        self.boards = boards
        self.games = games
        self.game_children = 0
        for start, moves in games:
            b = start.copy()
            for m in moves:
                self.game_children += b.legal_moves.count()
                b.push(m)
        self.fens = [b.fen() for b in boards]
        self.children = sum(b.legal_moves.count() for b in boards)
        ev = self.ev
        self.prepared = []
        for b in boards:
            occ = b.occupied_co
            self.prepared.append(((b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings, occ[1], occ[0], b.turn),
                                  b.clean_castling_rights(), b.ep_square or 0, b.chess960))
        self.io = children.io_buffer()
        ev.evaluate_moves(boards[0])  # compile / load

    def evaluate_moves(self) -> None:
        evaluate_moves = self.ev.evaluate_moves
        for b in self.boards:
            evaluate_moves(b)

    def kernel(self) -> None:
        ev = self.ev
        kernel, address, ply = ev._entry_point(ev._children_entry), ev._address, len(ev._board.move_stack) + 1
        io = self.io.address
        for position, castling, ep, c960 in self.prepared:
            kernel(address, ply, 0, position, castling, ep, c960, -1, False, io)

    def loop(self) -> None:
        ev = self.ev
        push, evaluate, pop = ev.push, ev.evaluate, ev.pop
        for b in self.boards:
            ev.set_position(b)
            for move in b.legal_moves:
                push(move, validate=False)
                evaluate()
                pop()

    def batch(self) -> None:
        self.ev.evaluate_children_batch(self.boards)

    def hot(self) -> None:
        evaluate_moves = self.ev.evaluate_moves
        for b in self.boards:
            for _ in range(REPEAT):
                evaluate_moves(b)

    def game_walk(self) -> None:
        ev = self.ev
        evaluate_moves, push = ev.evaluate_moves, ev.push
        for start, moves in self.games:
            ev.set_position(start)
            for m in moves:
                evaluate_moves()
                push(m, validate=False)

    def game_pushes(self) -> None:
        ev = self.ev
        push = ev.push
        for start, moves in self.games:
            ev.set_position(start)
            for m in moves:
                push(m, validate=False)

    def fen_string(self) -> None:
        evaluate = self.ev.evaluate
        for fen in self.fens:
            evaluate(fen)

    def board(self) -> None:
        evaluate = self.ev.evaluate
        for b in self.boards:
            evaluate(b)

    def python_chess_fen(self) -> None:
        evaluate = self.ev.evaluate
        for fen in self.fens:
            evaluate(chess.Board(fen))

    def measure(self) -> dict[str, float]:
        out = {name: thread_ns(getattr(self, name)) / self.children
               for name in ("evaluate_moves", "kernel", "loop", "batch")}
        out["hot"] = thread_ns(self.hot) / (REPEAT * self.children)
        out["game"] = (thread_ns(self.game_walk) - thread_ns(self.game_pushes)) / self.game_children
        out.update({name: thread_ns(getattr(self, name)) / len(self.boards)
                    for name in ("fen_string", "board", "python_chess_fen")})
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "3")))
    ap.add_argument("--nets", nargs="+", default=["sf15.1", "sf19", "default"])
    ap.add_argument("--step", type=int, default=20, help="every STEP-th dev position (3,298 in all)")
    ap.add_argument("--games-step", type=int, default=16, help="every STEP-th dev game (264 in all) for the game walk")
    ap.add_argument("--limits", type=Path, default=shared_dir() / "limits", help="the shared/limits directory")
    ap.add_argument("--json", metavar="FILE", type=common.output_file,
                    help="also write the figures to FILE for benchmarks/manual.py")
    args = ap.parse_args(argv)
    numba.set_num_threads(1)
    with open(shared_dir() / "data" / "positions-dev.jsonl") as f:
        rows = [json.loads(line) for line in f if line.strip()][::args.step]
    boards = [chess.Board(r["fen"], chess960=r["chess960"]) for r in rows]
    boards = [b for b in boards if b.legal_moves.count()]
    with open(shared_dir() / "data" / "games-dev.jsonl") as f:
        game_rows = [json.loads(line) for line in f if line.strip()][::args.games_step]
    games = [(chess.Board(g["start_fen"]), [chess.Move.from_uci(u) for u in g["moves"]])
             for g in game_rows]
    with tempfile.TemporaryDirectory(prefix="nnue-limits-") as tmp:
        print(f"building the C floors from {args.limits} in {tmp} ...", file=sys.stderr)
        bench = build_c(args.limits, Path(tmp))
        nets = [Net(spec, boards, games) for spec in args.nets]
        for net in nets:
            net.measure()  # warm up
        c_rounds, py_rounds = [], []
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
            c_rounds.append(run_c(bench))
            py_rounds.append({net.spec: net.measure() for net in nets})
            py_rounds[-1]["breakdown"] = breakdown(nets[0])
        memory = run_c(bench, (C_ROW,))
    c_ns = statistics.median(r[C_CASE][0] for r in c_rounds)
    c_cold = statistics.median(r[C_COLD][0] for r in c_rounds)
    print(f"nnue-infer {nnue_infer.__version__}, every child of {len(boards)} dev positions "
          f"({nets[0].children} children; game walk: {len(games)} dev games, {nets[0].game_children} children): "
          f"median of {args.rounds} rounds, thread CPU time, 1 thread; "
          f"C {C_CASE.replace(chr(9), ' ')} [{c_rounds[-1][C_CASE][1]}] {c_ns:.0f} ns, "
          f"{C_COLD.replace(chr(9), ' ')} [{c_rounds[-1][C_COLD][1]}] {c_cold:.0f} ns, "
          f"{C_WARM.replace(chr(9), ' ')} [{c_rounds[-1][C_WARM][1]}] "
          f"{statistics.median(r[C_WARM][0] for r in c_rounds):.0f} ns; load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"C from memory (once): {C_ROW.replace(chr(9), ' ')} [{memory[C_ROW][1]}] {memory[C_ROW][0]:.0f} ns")
    print()
    c_warm = statistics.median(r[C_WARM][0] for r in c_rounds)
    parents = {k: statistics.median(r[case][0] for r in c_rounds) for k, case in C_PARENTS.items()}
    per_position = nets[0].children / len(boards)
    floors = {k: v / per_position + c_warm for k, v in parents.items()}
    c_nets = [net.spec for net in nets if net.spec in C_NETS]
    first = statistics.median(r[c_nets[0]]["evaluate_moves"] for r in py_rounds) if c_nets else None
    print(f"C floor for the children job (C doing what evaluate_moves does, per child): the parent from scratch "
          f"(C eval_scratch big, {per_position:.1f} children a position here) / children a position + one child "
          f"({C_WARM.replace(chr(9), ' ')} [{c_rounds[-1][C_WARM][1]}]: {c_warm:.0f} ns, a quiet move of a hot "
          "parent, rows from one king bucket in L2/L3; king-move children counted as quiet moves, no move "
          "generation); medians of the same rounds:")
    print()
    king_moves = sum(b.piece_type_at(m.from_square) == chess.KING for b in boards for m in b.legal_moves)
    king_share = king_moves / nets[0].children
    extra = statistics.median(r[C_REFRESH][0] - r[C_UPDATE][0] for r in c_rounds)
    print(f"| parent scenario | C eval_scratch ns | floor ns/child | floor / C hot | "
          f"{c_nets[0] if c_nets else 'sf15.1'} evaluate_moves / floor |")
    print("|---|---|---|---|---|")
    for k, case in C_PARENTS.items():
        print(f"| {k} [{c_rounds[-1][case][1]}] | {parents[k]:,.0f} | {parents[k]:,.0f} / {per_position:.1f} + "
              f"{c_warm:.0f} = {floors[k]:,.0f} | {floors[k] / c_ns:.2f}x | {f'{first / floors[k]:.2f}x' if first else '(not measured)'} |")
    king_floor = floors["warm"] + king_share * extra
    print(f"| warm, king-move children ({king_share:.1%}) as a refresh ({C_REFRESH.replace(chr(9), ' ')} less "
          f"{C_UPDATE.replace(chr(9), ' ')}: {extra:.0f} ns) | {parents['warm']:,.0f} | {floors['warm']:,.0f} + "
          f"{king_share:.3f} x {extra:.0f} = {king_floor:,.0f} | {king_floor / c_ns:.2f}x | "
          f"{f'{first / king_floor:.2f}x' if first else '(not measured)'} |")
    print()
    print("| network | evaluate_moves ns/child | kernel ns/child | batch (1 thread) ns/child | "
          f"push/evaluate/pop loop ns/child | evaluate_moves / C hot | evaluate_moves / C cold | "
          f"evaluate_moves / C children-job floor (warm parent) | "
          f"loop / evaluate_moves | hot ({REPEAT} calls a position) ns/child | hot / C hot | "
          f"game walk ns/child | game walk / C hot |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    records = []
    c_hot = f"C {C_CASE.replace(chr(9), ' ')} [{c_rounds[-1][C_CASE][1]}]: {c_ns:.0f} ns"
    for net in nets:
        cell = {k: statistics.median(r[net.spec][k] for r in py_rounds) for k in py_rounds[0][net.spec]}
        c = net.spec in C_NETS
        ns = cell["evaluate_moves"]
        records += [
            common.row(f"{net.spec}: evaluate_moves(board), per child", f"{ns:,.0f} ns", c_hot if c else "",
                       f"{ns / c_ns:.2f}x" if c else "", "<= 3x C hot (issue 22)" if c else "",
                       met=ns / c_ns <= 3 if c else None),
            common.row(f"{net.spec}: evaluate_moves, per child, against C's floor for the children job (warm parent)",
                       f"{ns:,.0f} ns", f"C floor: {floors['warm']:,.0f} ns" if c else "",
                       f"{ns / floors['warm']:.2f}x" if c else ""),
            common.row(f"{net.spec}: push/evaluate/pop loop in Python, per child", f"{cell['loop']:,.0f} ns",
                       f"evaluate_moves: {ns:,.0f} ns", f"{cell['loop'] / ns:.1f}x"),
            common.row(f"{net.spec}: evaluate_children_batch (1 thread), per child", f"{cell['batch']:,.0f} ns",
                       c_hot if c else "", f"{cell['batch'] / c_ns:.2f}x" if c else ""),
            common.row(f"{net.spec}: game walk (evaluate_moves before each move), per child", f"{cell['game']:,.0f} ns",
                       c_hot if c else "", f"{cell['game'] / c_ns:.2f}x" if c else ""),
        ]
        to_c = f"{cell['evaluate_moves'] / c_ns:.2f}x" if c else "(no C floor)"
        to_cold = f"{cell['evaluate_moves'] / c_cold:.2f}x" if c else "(no C floor)"
        to_floor = f"{cell['evaluate_moves'] / floors['warm']:.2f}x" if c else "(no C floor)"
        hot = f"{cell['hot'] / c_ns:.2f}x" if c else "(no C floor)"
        game = f"{cell['game'] / c_ns:.2f}x" if c else "(no C floor)"
        print(f"| {net.spec} | {cell['evaluate_moves']:,.0f} | {cell['kernel']:,.0f} | {cell['batch']:,.0f} | "
              f"{cell['loop']:,.0f} | {to_c} | {to_cold} | {to_floor} | {cell['loop'] / cell['evaluate_moves']:.1f}x | "
              f"{cell['hot']:,.0f} | {hot} | {cell['game']:,.0f} | {game} |")
    print()
    print(f"Breakdown on {nets[0].spec} (compiled loops, ns; per child unless said):")
    print()
    print("| part | ns | / C |")
    print("|---|---|---|")
    for part in py_rounds[0]["breakdown"]:
        ns = statistics.median(r["breakdown"][part] for r in py_rounds)
        print(f"| {part} | {ns:,.0f} | {ns / c_ns:.1f}x |")
    print()
    print("| network | evaluate(fen) ns | evaluate(board) ns | fen / board | evaluate(chess.Board(fen)) ns |")
    print("|---|---|---|---|---|")
    for net in nets:
        cell = {k: statistics.median(r[net.spec][k] for r in py_rounds) for k in py_rounds[0][net.spec]}
        print(f"| {net.spec} | {cell['fen_string']:,.0f} | {cell['board']:,.0f} | "
              f"{cell['fen_string'] / cell['board']:.2f}x | {cell['python_chess_fen']:,.0f} |")
    if args.json:
        common.write_json(args.json, "children", records,
                          f"{len(boards)} dev positions ({nets[0].children} children), {len(games)} dev games; "
                          f"median of {args.rounds} rounds, thread CPU time, 1 thread", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

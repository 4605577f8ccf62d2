"""A chess engine over any network nnue-infer loads: iterative deepening driven from Python, one
compiled call per iteration (:mod:`nnue_infer.kernels.search.alphabeta`), the evaluation exact
through the accumulator stack of an :class:`~nnue_infer.evaluator.Evaluator`.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import chess
import numpy as np

from ..errors import PositionError
from ..evaluator import Evaluator
from ..features.board import check_position
from ..kernels.nnue import forward as K
from ..kernels.chess.movegen import MAX_MOVES
from ..kernels.search import alphabeta as A
from ..kernels.search.tt import MATE, MATE_BOUND, MAX_PLY, SLOT_WORDS, hashfull, table_slots
from ..kernels.search.zobrist import position_keys
from ..trace import to_centipawns

#: The depth of a search given no limit (and not ``infinite``).
DEFAULT_DEPTH = 8
#: The deepest iteration.
MAX_DEPTH = MAX_PLY - 8
#: Clock management: the share of the remaining time (after the move overhead) a move may use at
#: most (the hard limit, enforced by a timer), the share after which no new iteration starts (the
#: soft limit, at most), and the moves to go assumed without ``movestogo``.
HARD_SHARE = 0.3
SOFT_SHARE = 0.1
INCREMENT_SHARE = 0.5
DEFAULT_MOVES_TO_GO = 30
#: The longest time limit in seconds (a year): longer ones (a GUI's "infinite" clock of 10**20 ms) are
#: cut to it, as the timer thread and the kernel's cycle-counter deadline cannot hold them.
LONGEST_LIMIT = 365 * 24 * 3600.0


@dataclass(frozen=True)
class SearchResult:
    """The outcome of :meth:`Engine.search`.

    Attributes
    ----------
    move : chess.Move or None
        The best move (legal on the board searched), None when the side to move has no legal move.
    score_cp : int or None
        Centipawns from the side to move's point of view (the network's units per pawn, 361 for
        Stockfish 15.1), None when the score is a mate.
    mate : int or None
        Moves to mate: > 0 the side to move mates, < 0 it is mated, 0 it is checkmated now.
    pv : list of chess.Move
        The principal variation, legal from the board.
    depth, seldepth : int
        The depth of the last completed iteration; the deepest ply reached.
    nodes : int
        Positions reached by a move (Stockfish's count), all iterations.
    time : float
        Seconds of wall time.
    hashfull : int
        Permille of the transposition table used by this search (UCI's ``hashfull``).
    """

    move: chess.Move | None
    score_cp: int | None
    mate: int | None
    pv: list = field(default_factory=list)
    depth: int = 0
    seldepth: int = 0
    nodes: int = 0
    time: float = 0.0
    hashfull: int = 0


@dataclass(frozen=True)
class SearchInfo(SearchResult):
    """A :class:`SearchResult` after one completed iteration, with the speed (``nps``, nodes per
    second) and ``multipv`` (always 1)."""

    nps: int = 0
    multipv: int = 1


class Engine:
    """Alpha-beta search with any network nnue-infer loads.

    Parameters
    ----------
    network : Network or str or os.PathLike, optional
        A network or any spec ``--net`` takes (:func:`nnue_infer.resources.network_from_spec`);
        None: the bundled default network.
    hash_mb : float, keyword only
        Size of the transposition table in MiB (rounded down to a power-of-two number of 16-byte
        slots, at least 1024).
    chess960 : bool, keyword only
        Search every board as Chess960 (castling written king-takes-rook); a board with
        ``chess960`` set is searched so anyway.
    debug : bool, keyword only
        Compare every evaluation of the search with a full refresh of the same position
        (:class:`AssertionError` on a difference, after the search).  Slow; for tests.

    Notes
    -----
    One search at a time per engine (:class:`RuntimeError` otherwise); :meth:`stop` may be called
    from any thread.  A node-limited search is deterministic: the same board and limits on a fresh
    engine (or after :meth:`new_game`) give the same move, node count and principal variation.
    """

    def __init__(self, network=None, *, hash_mb: float = 16, chess960: bool = False, debug: bool = False) -> None:
        self._lock = threading.Lock()
        self._stop = np.zeros(1, np.int64)
        self._running = False
        self.debug = bool(debug)
        #: Count the CPU cycles of the evaluations (:attr:`evaluation_cycles`; benchmarks/bench_search.py).
        self.profile = False
        self.chess960 = bool(chess960)
        self._positions = np.zeros((MAX_PLY + 2, A.POS_COLUMNS), np.int64)
        self._moves = np.zeros((MAX_PLY + 1, MAX_MOVES), np.uint16)
        self._scores = np.zeros((MAX_PLY + 1, MAX_MOVES), np.int32)
        self._killers = np.zeros((MAX_PLY + 2, 2), np.int32)
        self._history = np.zeros((2, 64, 64), np.int32)
        self._pv = np.zeros((MAX_PLY + 2, MAX_PLY + 2), np.int32)
        self._info = np.zeros(A.INFO_SIZE, np.int64)
        self._generation = 0
        self._tt = np.zeros((1024, 2), np.int64)
        self.network = network
        self.hash_mb = hash_mb

    # -- settings ------------------------------------------------------------------
    @property
    def network(self):
        """The network (assign a Network or any spec ``--net`` takes; the search's caches are cleared)."""
        return self._evaluator.network

    @network.setter
    def network(self, network) -> None:
        evaluator = Evaluator(network)
        if evaluator._pairs < evaluator._stack_base + MAX_PLY + 2:  # one stack ply per search ply
            evaluator._allocate(evaluator._stack_base + MAX_PLY + 2)
        kernels = A.kernels(K.config_of_cfg(evaluator._cfg))
        with self._exclusive():
            self._evaluator = evaluator
            self._kernels = kernels
            self._clear()
        # Compile the search kernels now (or load them from the cache: about a second), not in the
        # first search, whose clock would pay for it
        self.search(chess.Board(), depth=1)
        _cycles_per_second()
        with self._exclusive():
            self._clear()

    @property
    def hash_mb(self) -> float:
        """Size of the transposition table in MiB (assigning resizes and clears it)."""
        return self._hash_mb

    @hash_mb.setter
    def hash_mb(self, hash_mb: float) -> None:
        if isinstance(hash_mb, bool) or not isinstance(hash_mb, (int, float)) or not math.isfinite(hash_mb) \
                or hash_mb <= 0:
            raise ValueError(f"hash_mb: expected a positive number of MiB, got {hash_mb!r}")
        check_hash_mb(hash_mb)
        tt = np.zeros((table_slots(hash_mb), 2), np.int64)
        with self._exclusive():
            self._tt = tt
            self._hash_mb = hash_mb

    def new_game(self) -> None:
        """Clear the transposition table, killer moves and history (a new game follows)."""
        with self._exclusive():
            self._clear()

    def _clear(self) -> None:
        self._tt[:] = 0
        self._killers[:] = 0
        self._history[:] = 0
        self._generation = 0

    @property
    def evaluations(self) -> int:
        """Evaluations of the network in the last search."""
        return int(self._info[A.I_EVALS])

    @property
    def evaluation_cycles(self) -> int:
        """CPU cycles spent in the evaluations of the last search (counted when :attr:`profile` is set)."""
        return int(self._info[A.I_EVAL_CYCLES])

    @property
    def searching(self) -> bool:
        """Whether a search is running (from the moment :meth:`stop` would stop it)."""
        return self._running

    def stop(self) -> None:
        """Stop the running search (thread-safe): it returns promptly with its best move so far.
        No effect when no search runs."""
        if self._running:
            self._stop[0] = 1

    class _Busy:
        def __init__(self, engine):
            self.engine = engine

        def __enter__(self):
            if not self.engine._lock.acquire(blocking=False):
                raise RuntimeError("this Engine is searching: one search at a time (stop() it first)")

        def __exit__(self, *exc):
            self.engine._lock.release()

    def _exclusive(self):
        return Engine._Busy(self)

    # -- search ----------------------------------------------------------------------
    def search(self, board: chess.Board, *, depth: int | None = None, nodes: int | None = None,
               movetime: float | None = None, wtime: float | None = None, btime: float | None = None,
               winc: float | None = None, binc: float | None = None, movestogo: int | None = None,
               infinite: bool = False, move_overhead: float = 0.01,
               info: Callable[[SearchInfo], None] | None = None) -> SearchResult:
        """Search ``board`` (not modified; its move stack gives the repetition history).

        Parameters
        ----------
        board : chess.Board
            The position (standard chess or Chess960).
        depth, nodes : int, optional
            Stop after the iteration of this depth / at this many nodes (a node-limited search is
            deterministic).
        movetime : float, optional
            Seconds for this move.
        wtime, btime, winc, binc : float, optional
            The clock (seconds): remaining time and increment of each side; the side to move's are used.
        movestogo : int, optional
            Moves until the next time control (default: a sudden-death estimate of 30).
        infinite : bool
            Search until :meth:`stop` (or the depth / nodes given).
        move_overhead : float
            Seconds kept aside per move for communication (the clock limits only).
        info : callable, optional
            Called with a :class:`SearchInfo` after each completed iteration, and once more at the end
            when the move played is not the last reported one (a stopped iteration found a better move).

        With no limit at all (and not ``infinite``), the search goes to depth :data:`DEFAULT_DEPTH`.

        Returns
        -------
        SearchResult

        Raises
        ------
        TypeError, ValueError
            ``board`` is not a ``chess.Board`` of standard chess or Chess960, ``depth`` or ``nodes`` is
            not a positive integer, ``movestogo`` is negative, or a time is not a non-negative number.
        PositionError
            The position is not valid (the side not to move in check, missing kings, ...) or cannot be
            represented by the network.
        AssertionError
            In debug mode, an evaluation of the search differed from a full refresh.
        RuntimeError
            Another search of this engine is running.
        """
        start = time.perf_counter()
        if not isinstance(board, chess.Board) or board.uci_variant not in ("chess", None):
            raise TypeError(f"board: expected a chess.Board of standard chess or Chess960, got {type(board).__name__}")
        for name, limit, least in (("depth", depth, 1), ("nodes", nodes, 1), ("movestogo", movestogo, 0)):
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < least):
                raise ValueError(f"{name}: expected an integer of at least {least}, got {limit!r}")
        for name, limit in (("movetime", movetime), ("wtime", wtime), ("btime", btime), ("winc", winc),
                            ("binc", binc), ("move_overhead", move_overhead)):
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float, np.floating))
                                      or not math.isfinite(limit) or limit < 0) and not (
                    name in ("wtime", "btime") and isinstance(limit, (int, float)) and math.isfinite(limit)):
                raise ValueError(f"{name}: expected a non-negative number of seconds, got {limit!r}")
        check_position(board)  # kings, pawns on the back rank, piece count: the wording of the CLI
        if board.status() & chess.STATUS_OPPOSITE_CHECK:
            raise PositionError(f"the side not to move is in check in {board.fen()} (its king could be captured)")
        history = self._game_keys(board)
        board = board.copy(stack=False)
        if self.chess960:
            board.chess960 = True
        legal = list(board.legal_moves)
        with self._exclusive():
            if not legal:
                mate = 0 if board.is_check() else None
                return SearchResult(None, None if mate is not None else 0, mate, [], 0, 0, 0,
                                    time.perf_counter() - start, 0)
            return self._search(board, history, legal, start, depth, nodes, movetime, wtime, btime, winc, binc, movestogo,
                                infinite, move_overhead, info)

    def _limits(self, board, depth, movetime, wtime, btime, winc, binc, movestogo, infinite, overhead):
        """(max depth, soft seconds or None, hard seconds or None)."""
        clock = wtime if board.turn == chess.WHITE else btime
        inc = (winc if board.turn == chess.WHITE else binc) or 0.0
        soft = hard = None
        if movetime is not None:
            hard = soft = max(0.001, movetime - overhead)
        if clock is not None:
            # A share of what is left (after the overhead) plus half the increment, never more than a tenth
            # of what is left: as the clock runs low a move costs less than the increment brings, and the
            # clock settles where a tenth of it pays for a move (80 ms at 1+0.01 for a 2 ms move)
            available = max(0.001, clock - overhead)
            mtg = min(max(movestogo or DEFAULT_MOVES_TO_GO, 1), 50)
            s = min(available / mtg + INCREMENT_SHARE * inc, SOFT_SHARE * available)
            h = min(available * HARD_SHARE, 3 * s)
            soft = s if soft is None else min(soft, s)
            hard = h if hard is None else min(hard, h)
        if depth is None:
            depth = MAX_DEPTH if (infinite or hard is not None) else None
        if hard is not None:
            soft, hard = min(soft, LONGEST_LIMIT), min(hard, LONGEST_LIMIT)
        return depth, soft, hard

    def _search(self, board, history, legal, start, depth, nodes, movetime, wtime, btime, winc, binc, movestogo, infinite,
                move_overhead, info_callback) -> SearchResult:
        max_depth, soft, hard = self._limits(board, depth, movetime, wtime, btime, winc, binc, movestogo, infinite,
                                             move_overhead)
        if max_depth is None:
            max_depth = MAX_DEPTH if nodes is not None else DEFAULT_DEPTH
        max_depth = max(1, min(int(max_depth), MAX_DEPTH))
        keys = np.zeros(len(history) + MAX_PLY + 2, np.int64)
        keys[:len(history)] = history
        self._set_root(board, history[-1])
        info = self._info
        info[:] = 0
        info[A.I_NODE_LIMIT] = nodes if nodes else 0
        info[A.I_HISTORY] = len(history) - 1
        info[A.I_DEBUG] = int(self.debug)
        info[A.I_PROFILE] = int(self.profile)
        info[A.I_CHESS960] = int(board.chess960)
        self._generation = (self._generation + 1) & 63
        info[A.I_GENERATION] = self._generation
        ctx = np.zeros(A.CONTEXT_SIZE, np.int64)
        ctx[A.C_ARENA] = self._evaluator._address
        for slot, array in ((A.C_POSITIONS, self._positions), (A.C_MOVES, self._moves), (A.C_SCORES, self._scores),
                            (A.C_TT, self._tt), (A.C_KILLERS, self._killers), (A.C_HISTORY, self._history),
                            (A.C_PV, self._pv), (A.C_KEYS, keys), (A.C_INFO, info), (A.C_STOP, self._stop)):
            ctx[slot] = array.ctypes.data
        ctx[A.C_TT_SLOTS] = self._tt.shape[0]
        ctx[A.C_KEYS_LEN] = keys.shape[0]
        self._killers[:] = 0
        search_root, evaluate = A.search_root, self._kernels.evaluate
        self._stop[0] = 0
        self._running = True
        timer = None
        rate = _cycles_per_second()

        def arm_clock():
            # The hard limit holds from the second iteration on: the first always completes (a few dozen
            # nodes), so that a clock run low never plays a move no search has looked at
            nonlocal timer
            if hard is not None and rate > 0:  # the kernel also watches the cycle counter: no thread to wake
                info[A.I_DEADLINE] = A.read_cycles() + int(max(0.0, hard - (time.perf_counter() - start)) * rate)
            if hard is not None:
                timer = threading.Timer(max(0.0, hard - (time.perf_counter() - start)), self.stop)
                timer.daemon = True
                timer.start()

        best = None  # (move code, score, pv codes, depth)
        reported = None  # the best of the last info callback
        seldepth = 0
        try:
            previous_score = 0
            for d in range(1, max_depth + 1):
                info[A.I_SELDEPTH] = 0
                alpha, beta = -A.INFINITE, A.INFINITE
                delta = 60
                if d >= 5 and abs(previous_score) < MATE_BOUND:
                    alpha, beta = previous_score - delta, previous_score + delta
                while True:
                    score = int(search_root(ctx.ctypes.data, d, alpha, beta, evaluate))
                    if info[A.I_STOPPED]:
                        break
                    if score <= alpha:
                        alpha = max(score - delta, -A.INFINITE)
                    elif score >= beta:
                        beta = min(score + delta, A.INFINITE)
                    else:
                        break
                    delta *= 2
                    if delta > 1000:
                        alpha, beta = -A.INFINITE, A.INFINITE
                seldepth = max(seldepth, int(info[A.I_SELDEPTH]))
                if info[A.I_STOPPED]:
                    # The stopped iteration's best root move replaces the completed one only when its score
                    # is exact (inside the window of the interrupted root search: the move raised alpha and
                    # finished its full-window search) and above the completed iteration's score; its
                    # score, principal variation and the completed depth are then reported together.
                    partial, partial_score = int(info[A.I_BEST_MOVE]), int(info[A.I_BEST_SCORE])
                    if partial and best is None:
                        best = (partial, partial_score if alpha < partial_score < beta else 0, [partial], 0)
                    elif partial and partial != best[0] and alpha < partial_score < beta and partial_score > best[1]:
                        line = [int(m) for m in self._pv[0, 1:1 + self._pv[0, 0]]]
                        best = (partial, partial_score, line if line and line[0] == partial else [partial], best[3])
                    break
                line = [int(m) for m in self._pv[0, 1:1 + self._pv[0, 0]]]
                if not line:
                    line = [int(info[A.I_BEST_MOVE])]
                best = (line[0], score, line, d)
                if d == 1:
                    arm_clock()
                previous_score = score
                info[A.I_PREVIOUS_BEST] = line[0]
                if info_callback is not None:
                    elapsed = time.perf_counter() - start
                    result = self._result(board, best, seldepth, elapsed)
                    info_callback(SearchInfo(**result.__dict__, nps=int(result.nodes / max(elapsed, 1e-9))))
                    reported = best
                if soft is not None and time.perf_counter() - start > 0.6 * soft and not infinite:
                    break
                if nodes and info[A.I_NODES] >= nodes:
                    break
        finally:
            if timer is not None:
                timer.cancel()
            self._running = False
            self._stop[0] = 0
        if self.debug and info[A.I_MISMATCHES]:
            raise AssertionError(
                f"debug: {int(info[A.I_MISMATCHES])} evaluations of the search differ from a full refresh; the first "
                f"at ply {int(info[A.I_MISMATCH_PLY])}: stack {int(info[A.I_MISMATCH_STACK])}, fresh "
                f"{int(info[A.I_MISMATCH_FRESH])} (root {board.fen()})")
        if best is None:  # stopped before any move was searched: the first legal move
            best = (self._code(legal[0], board), 0, [self._code(legal[0], board)], 0)
        result = self._result(board, best, seldepth, time.perf_counter() - start)
        if info_callback is not None and best is not reported:  # the last info reports the move played
            info_callback(SearchInfo(**result.__dict__, nps=int(result.nodes / max(result.time, 1e-9))))
        return result

    @staticmethod
    def _code(move: chess.Move, board: chess.Board) -> int:
        return move.from_square | move.to_square << 6 | (move.promotion or 0) << 12

    def _result(self, board, best, seldepth, elapsed) -> SearchResult:
        code, score, line, depth = best
        moves = []
        b = board.copy(stack=False)
        for c in line:
            move = chess.Move(c & 63, (c >> 6) & 63, (c >> 12) or None)
            if not b.is_legal(move):
                break
            moves.append(move)
            b.push(move)
        if not moves or moves[0] != chess.Move(code & 63, (code >> 6) & 63, (code >> 12) or None):
            move = chess.Move(code & 63, (code >> 6) & 63, (code >> 12) or None)
            moves = [move] if board.is_legal(move) else []
        if not moves:  # never expected: the kernels play legal moves only
            raise RuntimeError(f"search produced no legal move in {board.fen()}")
        mate = None
        score_cp = None
        if abs(score) >= MATE_BOUND:
            plies = MATE - abs(score)
            mate = (plies + 1) // 2 if score > 0 else -(plies // 2)
        else:
            score_cp = to_centipawns(score, self._evaluator.network.architecture.units_per_pawn)
        return SearchResult(moves[0], score_cp, mate, moves, depth, max(seldepth, depth),
                            int(self._info[A.I_NODES]), elapsed, int(hashfull(self._tt, self._generation)))

    @staticmethod
    def _game_keys(board: chess.Board) -> np.ndarray:
        """Zobrist keys (int64[k + 1]) of the positions since the last irreversible move, the root's last.

        The earlier positions are read from python-chess's undo stack (``Board._stack``, one state
        per move of ``move_stack``) when it has one, else by taking the moves back on a copy."""
        k = min(board.halfmove_clock, len(board.move_stack))
        states = getattr(board, "_stack", None)
        rows = []
        if k and isinstance(states, list) and len(states) == len(board.move_stack) and all(
                hasattr(s, "restore") for s in states[-k:]):
            # Each state restored on a scratch board, so that its castling rights are cleaned as the
            # root's are (rights python-chess ignores, as a king off its square, would else differ)
            scratch = board.copy(stack=False)
            for s in states[-k:]:
                s.restore(scratch)
                rows.append(_row(scratch))
        elif k:
            b = board.copy()
            for _ in range(k):
                b.pop()
                rows.append(_row(b))
            rows.reverse()
        rows.append(_row(board))
        table = np.array(rows, np.uint64).view(np.int64).reshape(len(rows), 11)
        keys = np.empty(len(rows), np.int64)
        position_keys(table, keys)
        return keys

    def _set_root(self, board: chess.Board, key: int) -> None:
        row = self._positions[0]
        bbs = (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
               board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK])
        row[:8] = np.array(bbs, np.uint64).view(np.int64)
        row[A.P_STM] = 0 if board.turn == chess.WHITE else 1
        row[A.P_CASTLING] = np.array(board.clean_castling_rights(), np.uint64).view(np.int64)
        row[A.P_EP] = board.ep_square or 0
        row[A.P_RULE50] = board.halfmove_clock
        row[A.P_KEY] = key
        row[A.P_CHECKERS] = np.array(board.checkers_mask(), np.uint64).view(np.int64)
        row[A.P_EVAL] = A.NO_EVAL
        row[A.P_MOVE] = -1


def check_hash_mb(hash_mb: float) -> None:
    """Refuse a transposition table of ``hash_mb`` MiB that cannot fit in this machine's memory.

    Parameters
    ----------
    hash_mb : float
        The requested size in MiB (the table holds :func:`table_slots` slots of ``SLOT_WORDS`` int64).

    Raises
    ------
    ValueError
        The table would be larger than the physical memory (``os.sysconf`` ``SC_PHYS_PAGES`` times
        ``SC_PAGE_SIZE``; not checked where these are unknown).  Nothing is allocated.
    """
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return
    need = table_slots(hash_mb) * SLOT_WORDS * 8
    if physical > 0 and need > physical:
        raise ValueError(f"hash_mb: a table of {hash_mb} MiB ({need / 2**30:.1f} GiB) does not fit in this "
                         f"machine's {physical / 2**30:.1f} GiB of memory")


def _row(board: chess.Board) -> tuple:
    """A position as a row of ``zobrist.position_keys``."""
    return (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
            board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK], 0 if board.turn else 1,
            board.clean_castling_rights(), board.ep_square or 0)


@functools.cache
def _cycles_per_second() -> float:
    """The rate of the search kernels' cycle counter (``alphabeta.cycles``), measured once per process
    over 20 ms; 0 where the counter does not run (the timer thread alone then ends a timed search)."""
    c0, t0 = A.read_cycles(), time.perf_counter()
    time.sleep(0.02)
    c1, t1 = A.read_cycles(), time.perf_counter()
    rate = (c1 - c0) / (t1 - t0)
    return rate if rate > 1e6 else 0.0

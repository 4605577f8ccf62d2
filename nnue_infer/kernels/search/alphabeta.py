"""Principal-variation alpha-beta search over the accumulator stack: one call per iteration of
iterative deepening, no Python per node.

The search works on a *context*: an int64 array (:data:`CONTEXT_SIZE`) holding the addresses of its
buffers (see ``C_*``), passed by address so that the recursive calls take integers only (an array
argument costs reference counting on every call).  The buffers are made and kept alive by
:class:`nnue_infer.search.engine.Engine`:

* ``arena``: an evaluator's arena header (:mod:`nnue_infer.kernels.nnue.arena`) with a stack of at
  least ``MAX_PLY + 1`` plies; the position at search ply ``p`` is written to stack ply ``p`` and
  evaluated lazily from its nearest computed ancestor (``forward.evaluate_stack`` with
  ``trusted = p``: the plies below ``p`` hold the current line, their "computed" flags cleared
  when each was written);
* ``positions`` int64[MAX_PLY + 2, POS_COLUMNS]: the line being searched (``P_*`` columns);
* ``moves`` uint16[MAX_PLY + 1, MAX_MOVES] and ``scores`` int32[MAX_PLY + 1, MAX_MOVES]: the
  legal moves of each ply and their ordering scores;
* ``tt`` int64[slots, 2]: the transposition table (:mod:`.tt`);
* ``killers`` int32[MAX_PLY + 2, 2], ``history`` int32[2, 64, 64] (side, from, to);
* ``pv`` int32[MAX_PLY + 2, MAX_PLY + 2]: row ``p`` is the principal variation from ply ``p``
  (its length in column 0, the moves after it);
* ``keys`` int64[history + MAX_PLY + 2]: the Zobrist keys of the game's positions since its last
  irreversible move (the root's at index ``history - 1``... see ``C_HISTORY``), then the line's;
* ``info`` int64[INFO_SIZE]: counters and results (``I_*``); ``stop`` int64[1]: set non-zero by
  another thread to stop the search (read every 256 nodes; the kernels release the GIL).

Scores are Stockfish's internal units (the network's value, side to move's point of view), mate
in ``n`` plies ``MATE - n``.  Nodes are counted as Stockfish counts them: every position reached by
a move (or a null move) in the main or quiescence search.

Sources: the chessprogramming wiki ("Principal Variation Search", "Quiescence Search", "Null Move
Pruning", "Late Move Reductions", "Killer Heuristic", "History Heuristic", "Mate Distance
Pruning", "Reverse Futility Pruning", "Check Extensions", "Repetitions", "Fifty-move Rule");
Stockfish 15.1 ``search.cpp`` for the counting of nodes and the order of the checks; the rules of
chess (FIDE Laws, 9.2, 9.3, 9.6) for draws.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ..nnue import forward
from ..nnue.accumulator import STATE_FLAG
from ..nnue.arena import config_views, header_arrays, header_at, scratch_views
from ..chess.attacks import SQUARE_BB
from ..nnue.dense import SCRATCH_FEATURES, scratch_layout
from ..chess.bitboard import (BB_BISHOPS, BB_KINGS, BB_KNIGHTS, BB_PAWNS, BB_QUEENS, BB_ROOKS, BB_WHITE, king_square,
                        popcount)
from ..chess.movegen import MAX_MOVES, RANKS, attackers, legal_moves, play, pseudo_moves, slider_blockers, to_chess960
from ..simd import address_pointer
from .ordering import SEE_VALUES, captured_type, see_ge
from .tt import (BOUND_EXACT, BOUND_LOWER, BOUND_UPPER, MATE, MATE_BOUND, MAX_PLY, entry_bound, entry_depth,
                 entry_move, entry_score, probe, score_from_tt, score_to_tt, store)
from .zobrist import position_key

#: Scores: beyond any value; a draw.
INFINITE = MATE + 1
DRAW = 0
#: Columns of the ``positions`` buffer: the eight bitboards, side to move (0 White), cleaned
#: castling rights, en passant square (0 none), halfmove clock, Zobrist key, checkers (the side
#: to move's king's attackers), static evaluation (``NO_EVAL`` until computed), the move that led
#: here (-1: none at the root, 0: a null move).
(P_STM, P_CASTLING, P_EP, P_RULE50, P_KEY, P_CHECKERS, P_EVAL, P_MOVE) = range(8, 16)
POS_COLUMNS = 16
NO_EVAL = -(1 << 40)
#: Context entries (addresses of the buffers, their sizes).
(C_ARENA, C_POSITIONS, C_MOVES, C_SCORES, C_TT, C_TT_SLOTS, C_KILLERS, C_HISTORY, C_PV, C_KEYS, C_KEYS_LEN, C_INFO,
 C_STOP) = range(13)
CONTEXT_SIZE = 16
#: ``info`` entries.  ``I_NODES``: nodes so far (all iterations); ``I_NODE_LIMIT``: stop at this
#: many (0: none); ``I_SELDEPTH``: the deepest ply reached; ``I_HISTORY``: how many keys of
#: ``keys`` are the game's before the root (the root's key is ``keys[I_HISTORY]``);
#: ``I_DEBUG``: compare every evaluation with a full refresh; ``I_MISMATCHES``: how many
#: differed (the first at ``I_MISMATCH_PLY``, with the two values); ``I_CHESS960``;
#: ``I_STOPPED``: the iteration was stopped (its result is partial); ``I_GENERATION``: the
#: transposition table's search generation; ``I_ROOT_DEPTH``; ``I_BEST_MOVE`` /
#: ``I_BEST_SCORE``: the root's best move so far in this iteration (0 / -INFINITE before the
#: first move's score); ``I_PREVIOUS_BEST``: searched first at the root; ``I_EVALS``:
#: evaluations; with ``I_PROFILE`` set, ``I_EVAL_CYCLES`` counts the CPU cycles spent in them;
#: ``I_DEADLINE``: stop when the cycle counter (:func:`cycles`) passes this value (0: no deadline).
(I_NODES, I_NODE_LIMIT, I_SELDEPTH, I_HISTORY, I_DEBUG, I_MISMATCHES, I_MISMATCH_PLY, I_MISMATCH_STACK,
 I_MISMATCH_FRESH, I_CHESS960, I_STOPPED, I_GENERATION, I_ROOT_DEPTH, I_BEST_MOVE, I_BEST_SCORE, I_PREVIOUS_BEST,
 I_EVALS, I_ROOT_MOVES, I_PROFILE, I_EVAL_CYCLES, I_DEADLINE) = range(21)
INFO_SIZE = 32
#: Ordering scores.
ORDER_HASH = 1 << 30
ORDER_GOOD_CAPTURE = 1 << 28
ORDER_KILLER = 1 << 27
ORDER_BAD_CAPTURE = -(1 << 28)
ORDER_UNDER_PROMOTION = -(1 << 29)
HISTORY_MAX = 16384
#: Late-move reductions: ``LMR[min(depth, 63), min(move number, 63)]`` plies.
LMR = np.zeros((64, 64), np.int64)
for _d in range(1, 64):
    for _m in range(1, 64):
        LMR[_d, _m] = int(0.75 + np.log(_d) * np.log(_m) / 2.25)
#: Reverse futility margin per ply of depth, internal units.
FUTILITY_MARGIN = 90
LOW_63 = np.int64(0x7FFFFFFFFFFFFFFF)


def cycles() -> int:
    """The CPU's cycle counter (LLVM's ``readcyclecounter``: x86 ``rdtsc``, ARM's virtual counter;
    0 where there is none), for the search's profile (``I_PROFILE``).  Plain Python: 0."""
    return 0


@intrinsic
def _cycles(typingctx):
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])

    return types.int64(), codegen


@overload(cycles, inline="always")
def _cycles_overload():
    return lambda: _cycles()


@njit(cache=True, forceinline=True)
def context_views(ctx):
    """The buffers of context ``ctx`` (an address), as views (no reference counts)."""
    c = carray(address_pointer(ctx, np.int64), (CONTEXT_SIZE,))
    positions = carray(address_pointer(c[C_POSITIONS], np.int64), (MAX_PLY + 2, POS_COLUMNS))
    moves = carray(address_pointer(c[C_MOVES], np.uint16), (MAX_PLY + 1, MAX_MOVES))
    scores = carray(address_pointer(c[C_SCORES], np.int32), (MAX_PLY + 1, MAX_MOVES))
    tt = carray(address_pointer(c[C_TT], np.int64), (c[C_TT_SLOTS], 2))
    killers = carray(address_pointer(c[C_KILLERS], np.int32), (MAX_PLY + 2, 2))
    history = carray(address_pointer(c[C_HISTORY], np.int32), (2, 64, 64))
    pv = carray(address_pointer(c[C_PV], np.int32), (MAX_PLY + 2, MAX_PLY + 2))
    keys = carray(address_pointer(c[C_KEYS], np.int64), (c[C_KEYS_LEN],))
    info = carray(address_pointer(c[C_INFO], np.int64), (INFO_SIZE,))
    stop = carray(address_pointer(c[C_STOP], np.int64), (1,))
    return c[C_ARENA], positions, moves, scores, tt, killers, history, pv, keys, info, stop


@njit(cache=True)
def set_stack_position(arena, ply, bitboards):
    """Write ``bitboards`` to stack ply ``ply`` of the arena and clear its "computed" flags."""
    h = header_at(arena)
    params = config_views(h)[0]
    state = header_arrays(h)[9]
    pair = params[forward.P_CACHE_PAIRS] + 3 + ply
    white = state[pair, 0]
    black = state[pair, 1]
    for i in range(8):
        white[i] = bitboards[i]
    # Through row views: ``state[pair, 0, STATE_FLAG] = 0`` on this carray was dropped by the
    # compiler in a function that reads nothing back (Numba 0.61 / LLVM; checked by
    # tests/kernels/test_search_moves.py)
    white[STATE_FLAG] = 0
    black[STATE_FLAG] = 0


@njit(cache=True)
def make_move(positions, ply, code, arena):
    """The position after move ``code`` (legal, from ``legal_moves``) at ``ply`` into row
    ``ply + 1`` (as python-chess's ``Board.push``: castling rights, en passant square, halfmove
    clock), its key and checkers, and into stack ply ``ply + 1``."""
    parent = positions[ply]
    child = positions[ply + 1]
    stm = parent[P_STM]
    ep = parent[P_EP]
    frm = code & 63
    to = (code >> 6) & 63
    moved_pawn = (parent[BB_PAWNS] & SQUARE_BB[frm]) != 0
    moved_king = (parent[BB_KINGS] & SQUARE_BB[frm]) != 0
    capture = (parent[BB_WHITE + 1 - stm] & SQUARE_BB[to]) != 0
    play(parent[:8], stm, np.int64(code), ep, child[:8])
    wide = to_chess960(parent[:8], np.int64(code))  # castling as king takes rook: the rook's square
    rook_to = (wide >> 6) & 63
    castling = parent[P_CASTLING] & ~SQUARE_BB[frm] & ~SQUARE_BB[to] & ~SQUARE_BB[rook_to]
    if moved_king:
        castling &= ~(np.int64(0xFF) if stm == 0 else np.int64(0xFF) << np.int64(56))
    child[P_CASTLING] = castling
    new_ep = 0
    if moved_pawn and (to - frm == 16 or frm - to == 16):
        new_ep = (frm + to) // 2
    child[P_EP] = new_ep
    child[P_RULE50] = 0 if moved_pawn or capture else parent[P_RULE50] + 1
    child[P_STM] = 1 - stm
    child[P_KEY] = position_key(child[:8], 1 - stm, castling, new_ep)
    occupied = child[BB_WHITE] | child[BB_WHITE + 1]
    child[P_CHECKERS] = attackers(child[:8], stm, king_square(child[:8], 1 - stm), occupied)
    child[P_EVAL] = NO_EVAL
    child[P_MOVE] = code
    set_stack_position(arena, ply + 1, child[:8])


@njit(cache=True)
def make_null_move(positions, ply, arena):
    """The position after a null move (the side to move passes) into row ``ply + 1``."""
    parent = positions[ply]
    child = positions[ply + 1]
    for i in range(POS_COLUMNS):
        child[i] = parent[i]
    child[P_STM] = 1 - parent[P_STM]
    child[P_EP] = 0
    child[P_RULE50] = parent[P_RULE50] + 1
    child[P_KEY] = position_key(child[:8], child[P_STM], child[P_CASTLING], 0)
    child[P_CHECKERS] = 0
    child[P_EVAL] = NO_EVAL
    child[P_MOVE] = 0
    set_stack_position(arena, ply + 1, child[:8])


@njit(cache=True)
def insufficient_material(bitboards):
    """No checkmate is possible by any sequence of legal moves: kings alone, a king and one minor
    piece against a king, or kings and bishops all on squares of one colour (FIDE Laws 9.6.2;
    python-chess's ``is_insufficient_material`` for these cases)."""
    if bitboards[BB_PAWNS] | bitboards[BB_ROOKS] | bitboards[BB_QUEENS]:
        return False
    minors = bitboards[BB_KNIGHTS] | bitboards[BB_BISHOPS]
    if popcount(minors) <= 1:
        return True
    if bitboards[BB_KNIGHTS]:
        return False
    dark = np.int64(0xAA55AA55AA55AA55)
    return (bitboards[BB_BISHOPS] & dark) == 0 or (bitboards[BB_BISHOPS] & ~dark) == 0


@njit(cache=True)
def is_repetition(positions, keys, history, ply):
    """Whether the position at ``ply`` occurred before (on the line or in the game since the last
    irreversible move, at most its halfmove clock plies back): a draw for the search."""
    key = positions[ply, P_KEY]
    back = min(positions[ply, P_RULE50], history + ply)
    at = history + ply
    for i in range(4, back + 1, 2):
        if keys[at - i] == key:
            return True
    return False


@njit(cache=True)
def non_pawn_material(bitboards, stm):
    """Whether side ``stm`` has a piece other than pawns and its king (null moves are unsafe without)."""
    return ((bitboards[BB_KNIGHTS] | bitboards[BB_BISHOPS] | bitboards[BB_ROOKS] | bitboards[BB_QUEENS])
            & bitboards[BB_WHITE + stm]) != 0


@njit(cache=True)
def score_moves(positions, ply, moves, scores, n, hash_move, killers, history, captures_only):
    """Ordering scores of the ``n`` moves at ``ply``; with ``captures_only`` the quiet moves and
    under-promotions are dropped (and the losing captures, when not in check).  Returns the number
    of moves kept."""
    pos = positions[ply]
    stm = pos[P_STM]
    ep = pos[P_EP]
    k = 0
    for i in range(n):
        code = np.int64(moves[ply, i])
        promotion = code >> 12
        victim = captured_type(pos[:8], stm, code, ep)
        if code == hash_move:
            s = ORDER_HASH
        elif victim >= 0 or promotion == 5:
            attacker = 0
            frm = code & 63
            for t in range(6):
                if pos[t] & SQUARE_BB[frm]:
                    attacker = t
            value = SEE_VALUES[victim] if victim >= 0 else 0
            mvv_lva = 16 * value // 100 * 8 - attacker + (800 if promotion == 5 else 0)
            s = ORDER_GOOD_CAPTURE + mvv_lva if see_ge(pos[:8], stm, code, ep, 0) else ORDER_BAD_CAPTURE + mvv_lva
            if captures_only and s < 0 and pos[P_CHECKERS] == 0:
                continue
        elif promotion != 0:
            if captures_only and pos[P_CHECKERS] == 0:
                continue
            s = ORDER_UNDER_PROMOTION
        else:
            if captures_only and pos[P_CHECKERS] == 0:
                continue
            if code == killers[ply, 0]:
                s = ORDER_KILLER
            elif code == killers[ply, 1]:
                s = ORDER_KILLER - 1
            else:
                s = history[stm, code & 63, (code >> 6) & 63]
        moves[ply, k] = code
        scores[ply, k] = s
        k += 1
    return k


@njit(cache=True)
def capture_moves(pos, out):
    """The legal captures and promotions (and pawn pushes to the last rank) of a position not in
    check into ``out`` (python-chess's pseudo-legal generation restricted to those target squares,
    each kept when safe); returns their number."""
    bitboards = pos[:8]
    stm = pos[P_STM]
    ep = pos[P_EP]
    occupied = bitboards[BB_WHITE] | bitboards[BB_WHITE + 1]
    king = king_square(bitboards, stm)
    blockers = slider_blockers(bitboards, stm, king, occupied)
    them = bitboards[BB_WHITE + 1 - stm]
    pawns = bitboards[BB_PAWNS]
    n = pseudo_moves(bitboards, stm, king, blockers, np.int64(0), ep, False, ~pawns, them, out, 0)
    targets = them | (RANKS[7] if stm == 0 else RANKS[0])
    if ep != 0:
        targets |= SQUARE_BB[ep]
    return pseudo_moves(bitboards, stm, king, blockers, np.int64(0), ep, False, pawns, targets, out, n)


@njit(cache=True, forceinline=True)
def pick_move(moves, scores, ply, i, n):
    """Bring the best-scored of moves ``i .. n - 1`` to place ``i`` (selection sort, one step) and return it."""
    best = i
    for j in range(i + 1, n):
        if scores[ply, j] > scores[ply, best]:
            best = j
    if best != i:
        m = moves[ply, i]
        moves[ply, i] = moves[ply, best]
        moves[ply, best] = m
        s = scores[ply, i]
        scores[ply, i] = scores[ply, best]
        scores[ply, best] = s
    return np.int64(moves[ply, i])


@njit(cache=True, forceinline=True)
def update_history(history, stm, code, bonus):
    """History gravity: the entry moves towards +-HISTORY_MAX by ``bonus``, less as it nears it."""
    frm = code & 63
    to = (code >> 6) & 63
    h = history[stm, frm, to]
    history[stm, frm, to] = h + bonus - h * abs(bonus) // HISTORY_MAX


@njit(cache=True, forceinline=True)
def is_quiet(pos, code):
    """Neither a capture nor a promotion."""
    return (code >> 12) == 0 and captured_type(pos[:8], pos[P_STM], code, pos[P_EP]) < 0


@njit(cache=True, forceinline=True)
def should_stop(info, stop):
    """Whether the search must stop: the node limit reached, or ``stop`` set or the deadline passed
    (both read every 256 nodes)."""
    if info[I_STOPPED] != 0:
        return True
    nodes = info[I_NODES]
    if (info[I_NODE_LIMIT] > 0 and nodes >= info[I_NODE_LIMIT]) or ((nodes & 255) == 0 and (
            stop[0] != 0 or (info[I_DEADLINE] != 0 and cycles() > info[I_DEADLINE]))):
        info[I_STOPPED] = 1
        return True
    return False


@njit(cache=True, forceinline=True)
def enter_node(pv, info, stop, ply):
    """A node at ``ply`` begins: its principal variation emptied, the selective depth raised; returns
    whether the search must stop (:func:`should_stop`)."""
    pv[ply, 0] = 0
    if should_stop(info, stop):
        return True
    if ply > info[I_SELDEPTH]:
        info[I_SELDEPTH] = ply
    return False


@njit(cache=True, forceinline=True)
def update_pv(pv, ply, code):
    """Principal variation at ``ply``: ``code`` then the child's."""
    child = pv[ply + 1]
    row = pv[ply]
    n = child[0]
    row[1] = code
    for i in range(n):
        row[2 + i] = child[1 + i]
    row[0] = n + 1


class Kernels(NamedTuple):
    """The search's evaluation of one ``forward.Config`` (see :func:`kernels`)."""

    evaluate: object


#: The evaluation's signature: ``(ctx, ply) -> value`` (a C function: the search takes it as an argument).
EVALUATE_SIGNATURE = types.int64(types.int64, types.int64)


@functools.cache
def kernels(config: forward.Config) -> Kernels:
    """The evaluation of the search specialised for ``config`` (its fields are compile-time constants, as in
    :func:`forward.kernels <nnue_infer.kernels.nnue.forward.kernels>`): a C function
    ``evaluate(ctx, ply) -> value`` (:data:`EVALUATE_SIGNATURE`) that :func:`search_root` takes as an
    argument, so the search itself compiles once for every network and each network compiles only
    its evaluation.  ``evaluate`` gives the network's value of the position at ``ply`` of the context
    (lazily updated from the nearest computed ancestor of the accumulator stack, clamped inside the
    mate scores, kept in ``positions[ply, P_EVAL]``); with ``info[I_DEBUG]`` it is compared with a full
    refresh of the same position (differences counted in ``info``).
    """
    made = forward.stages(config)
    value, update, refresh = made.value, made.update, made.refresh

    @cfunc(EVALUATE_SIGNATURE, cache=True, nogil=True)
    def evaluate(ctx, ply):
        """The network's value of the position at ``ply`` (lazy update from the nearest computed
        ancestor); with ``info[I_DEBUG]``, compared with a full refresh of the same position."""
        arena, positions, moves, scores, tt, killers, history, pv, keys, info, stop = context_views(ctx)
        pos = positions[ply]
        if pos[P_EVAL] != NO_EVAL:
            return pos[P_EVAL]
        profile = info[I_PROFILE] != 0
        if profile:
            started = cycles()
        h = header_at(arena)
        a = header_arrays(h)
        params, slot_table, king_buckets, layers = config_views(h)
        added, removed, rel, idx = scratch_views(h, params, layers)
        state = a[9]
        v = forward.evaluate_stack(ply, pos[P_STM], ply, params, slot_table, king_buckets, layers, a[0], a[1], a[2],
                                   a[3], a[4], a[5], a[7], a[8], state, a[10], added, removed, rel, idx, update, value)
        info[I_EVALS] += 1
        if profile:
            info[I_EVAL_CYCLES] += cycles() - started
        if info[I_DEBUG] != 0:
            work = params[forward.P_CACHE_PAIRS] + 1
            for i in range(8):
                state[work, 0, i] = pos[i]
            lists = h[40] + 2 * scratch_layout(layers)[3]
            feats = carray(address_pointer(lists, np.int32), (2, params[forward.P_MAX_PIECES]))
            counts = carray(address_pointer(lists + 4 * (SCRATCH_FEATURES // 2), np.int64), (2,))
            fresh = forward.evaluate_fresh(pos[P_STM], params, slot_table, king_buckets, layers, a[0], a[1], a[2], a[3],
                                           a[4], a[5], a[7], a[8], state, a[10], feats, counts, rel, idx, refresh,
                                           value)
            if fresh != v:
                if info[I_MISMATCHES] == 0:
                    info[I_MISMATCH_PLY] = ply
                    info[I_MISMATCH_STACK] = v
                    info[I_MISMATCH_FRESH] = fresh
                    info[I_STOPPED] = 1  # the line to the first difference stays in ``positions``
                info[I_MISMATCHES] += 1
        if v == forward.INVALID_POSITION:
            v = 0
        v = min(max(v, -MATE_BOUND + 1), MATE_BOUND - 1)
        pos[P_EVAL] = v
        return v

    return Kernels(evaluate)


@njit(cache=True, nogil=True)
def quiescence(ctx, ply, alpha, beta, evaluate):
    """Quiescence search at ``ply``: stand pat, then captures and promotions (every evasion in check)."""
    arena, positions, moves, scores, tt, killers, history, pv, keys, info, stop = context_views(ctx)
    if enter_node(pv, info, stop, ply):
        return np.int64(0)
    pos = positions[ply]
    in_check = pos[P_CHECKERS] != 0
    if insufficient_material(pos[:8]) or (pos[P_RULE50] >= 100 and not in_check):
        return np.int64(DRAW)
    if ply >= MAX_PLY:
        return np.int64(0) if in_check else evaluate(ctx, ply)
    key = pos[P_KEY]
    entry = probe(tt, key)
    hash_move = np.int64(-1)
    if entry != 0:
        hash_move = entry_move(entry)
        s = score_from_tt(entry_score(entry), ply)
        bound = entry_bound(entry)
        if beta - alpha == 1 and ((bound == BOUND_LOWER and s >= beta) or (bound == BOUND_UPPER and s <= alpha)
                                  or bound == BOUND_EXACT):
            return s
    best = -INFINITE
    if not in_check:
        stand = evaluate(ctx, ply)
        if stand >= beta:
            return stand
        best = stand
        if stand > alpha:
            alpha = stand
    if in_check:
        n = legal_moves(pos[:8], pos[P_STM], pos[P_CASTLING], pos[P_EP], info[I_CHESS960] != 0, moves[ply])
        if n == 0:
            return np.int64(-MATE + ply)
    else:
        n = capture_moves(pos, moves[ply])
    n = score_moves(positions, ply, moves, scores, n, hash_move, killers, history, True)
    best_move = np.int64(0)
    original_alpha = alpha
    for i in range(n):
        code = pick_move(moves, scores, ply, i, n)
        make_move(positions, ply, code, arena)
        info[I_NODES] += 1
        score = -quiescence(ctx, ply + 1, -beta, -alpha, evaluate)
        if info[I_STOPPED] != 0:
            return np.int64(0)
        if score > best:
            best = score
            if score > alpha:
                best_move = code
                update_pv(pv, ply, code)
                if score >= beta:
                    break
                alpha = score
    if in_check and best == -INFINITE:
        best = -MATE + ply  # only reached when every evasion was dropped: none is
    bound = BOUND_LOWER if best >= beta else (BOUND_EXACT if best > original_alpha else BOUND_UPPER)
    static = pos[P_EVAL] if pos[P_EVAL] != NO_EVAL else 0
    store(tt, key, best_move, score_to_tt(best, ply), static, 0, bound, info[I_GENERATION])
    return best

@njit(cache=True, nogil=True)
def search(ctx, ply, depth, alpha, beta, cut_node, null_ok, evaluate):
    """Principal variation search at ``ply`` to ``depth`` plies in ``(alpha, beta)``; ``cut_node`` and
    ``null_ok`` are 0 or 1 (an expected cut node; a null move allowed)."""
    arena, positions, moves, scores, tt, killers, history, pv, keys, info, stop = context_views(ctx)
    if depth <= 0:
        return quiescence(ctx, ply, alpha, beta, evaluate)
    if enter_node(pv, info, stop, ply):
        return np.int64(0)
    pos = positions[ply]
    pv_node = beta - alpha > 1
    in_check = pos[P_CHECKERS] != 0
    root = ply == 0
    if not root:
        if insufficient_material(pos[:8]) or is_repetition(positions, keys, info[I_HISTORY], ply):
            return np.int64(DRAW)
        if pos[P_RULE50] >= 100:
            if not in_check:
                return np.int64(DRAW)
            if legal_moves(pos[:8], pos[P_STM], pos[P_CASTLING], pos[P_EP], info[I_CHESS960] != 0,
                           moves[ply]) > 0:
                return np.int64(DRAW)
            return np.int64(-MATE + ply)
        if ply >= MAX_PLY:
            return np.int64(0) if in_check else evaluate(ctx, ply)
        # mate distance pruning: no line from here can be shorter than a mate already found
        alpha = max(alpha, -MATE + ply)
        beta = min(beta, MATE - ply - 1)
        if alpha >= beta:
            return alpha
    key = pos[P_KEY]
    entry = probe(tt, key)
    hash_move = np.int64(-1)
    if root:
        hash_move = info[I_PREVIOUS_BEST] if info[I_PREVIOUS_BEST] != 0 else -1
    if entry != 0:
        if not root:
            hash_move = entry_move(entry)
        s = score_from_tt(entry_score(entry), ply)
        bound = entry_bound(entry)
        if not pv_node and entry_depth(entry) >= depth and (
                (bound == BOUND_LOWER and s >= beta) or (bound == BOUND_UPPER and s <= alpha)
                or bound == BOUND_EXACT):
            return s
    if in_check:
        static = np.int64(-INFINITE)
    else:
        static = evaluate(ctx, ply)
        if not pv_node and abs(beta) < MATE_BOUND:
            # reverse futility pruning: far above beta at low depth
            if depth <= 6 and static - FUTILITY_MARGIN * depth >= beta:
                return static
            # null move pruning: even passing keeps the score above beta
            if (null_ok != 0 and depth >= 3 and static >= beta and non_pawn_material(pos[:8], pos[P_STM])
                    and ply + 1 < MAX_PLY):
                r = 3 + depth // 4 + min(3, (static - beta) // 200)
                make_null_move(positions, ply, arena)
                info[I_NODES] += 1
                keys[info[I_HISTORY] + ply + 1] = positions[ply + 1, P_KEY]
                s = -search(ctx, ply + 1, depth - 1 - r, -beta, -beta + 1, np.int64(1 - cut_node), np.int64(0), evaluate)
                if info[I_STOPPED] != 0:
                    return np.int64(0)
                if s >= beta:
                    return beta if s >= MATE_BOUND else s
    n = legal_moves(pos[:8], pos[P_STM], pos[P_CASTLING], pos[P_EP], info[I_CHESS960] != 0, moves[ply])
    if n == 0:
        return np.int64(-MATE + ply) if in_check else np.int64(DRAW)
    if root:
        info[I_ROOT_MOVES] = n
    n = score_moves(positions, ply, moves, scores, n, hash_move, killers, history, False)
    if in_check and ply < 2 * info[I_ROOT_DEPTH]:
        depth += 1  # check extension
    best = np.int64(-INFINITE)
    best_move = np.int64(0)
    original_alpha = alpha
    searched = 0
    quiets_tried = 0
    for i in range(n):
        code = pick_move(moves, scores, ply, i, n)
        quiet = is_quiet(pos, code)
        if (not root and not in_check and quiet and best > -MATE_BOUND and not pv_node and depth <= 3
                and quiets_tried >= 3 + 2 * depth * depth):
            continue  # late move pruning
        make_move(positions, ply, code, arena)
        info[I_NODES] += 1
        keys[info[I_HISTORY] + ply + 1] = positions[ply + 1, P_KEY]
        gives_check = positions[ply + 1, P_CHECKERS] != 0
        new_depth = depth - 1
        if searched == 0:
            score = -search(ctx, ply + 1, new_depth, -beta, -alpha, np.int64(0 if pv_node else 1 - cut_node), np.int64(1), evaluate)
        else:
            r = 0
            if depth >= 3 and quiet and not in_check and not gives_check and searched >= (3 if pv_node else 1):
                r = LMR[min(depth, 63), min(searched, 63)]
                if pv_node:
                    r -= 1
                if cut_node != 0:
                    r += 1
                if scores[ply, i] >= ORDER_KILLER - 1:
                    r -= 1
                r = max(0, min(r, new_depth - 1))
            score = -search(ctx, ply + 1, new_depth - r, -alpha - 1, -alpha, np.int64(1), np.int64(1), evaluate)
            if score > alpha and r > 0:
                score = -search(ctx, ply + 1, new_depth, -alpha - 1, -alpha, np.int64(1 - cut_node), np.int64(1), evaluate)
            if score > alpha and score < beta and pv_node:
                score = -search(ctx, ply + 1, new_depth, -beta, -alpha, np.int64(0), np.int64(1), evaluate)
        if info[I_STOPPED] != 0:
            return np.int64(0)
        searched += 1
        if quiet:
            quiets_tried += 1
        if score > best:
            best = score
            if root:
                info[I_BEST_MOVE] = code
                info[I_BEST_SCORE] = score
            if score > alpha:
                best_move = code
                update_pv(pv, ply, code)
                if score >= beta:
                    if quiet:
                        if killers[ply, 0] != code:
                            killers[ply, 1] = killers[ply, 0]
                            killers[ply, 0] = code
                        bonus = min(depth * depth, 400)
                        update_history(history, pos[P_STM], code, bonus)
                        for j in range(i):  # the quiet moves tried before fail low
                            other = np.int64(moves[ply, j])
                            if is_quiet(pos, other):
                                update_history(history, pos[P_STM], other, -bonus)
                    break
                alpha = score
    bound = BOUND_LOWER if best >= beta else (BOUND_EXACT if best > original_alpha else BOUND_UPPER)
    store(tt, key, best_move, score_to_tt(best, ply), static if not in_check else 0, depth, bound,
          info[I_GENERATION])
    return best

@njit(cache=True, nogil=True)
def search_root(ctx, depth, alpha, beta, evaluate):
    """One iteration of iterative deepening: a principal variation search of the root (row 0 of
    ``positions``) to ``depth`` plies inside the window ``(alpha, beta)`` on the context at address
    ``ctx`` (module docstring), evaluating with ``evaluate`` (:func:`kernels`).  Returns the score
    (internal units, the root's side to move's view; meaningless when ``info[I_STOPPED]`` is set).
    The root's principal variation is ``pv[0]``, its best move so far ``info[I_BEST_MOVE]``.
    Releases the GIL."""
    arena, positions, moves, scores, tt, killers, history, pv, keys, info, stop = context_views(ctx)
    info[I_STOPPED] = 0
    info[I_ROOT_DEPTH] = depth
    info[I_BEST_MOVE] = 0
    info[I_BEST_SCORE] = -INFINITE
    set_stack_position(arena, 0, positions[0, :8])
    positions[0, P_EVAL] = NO_EVAL
    return search(ctx, np.int64(0), np.int64(depth), np.int64(alpha), np.int64(beta), np.int64(0), np.int64(0), evaluate)


@njit(cache=True)
def read_cycles():
    """The cycle counter now (:func:`cycles`), callable from Python (benchmarks/bench_search.py)."""
    return cycles()

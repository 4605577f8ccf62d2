"""The compiled walk of :mod:`nnue_infer.training.datagen`: its episodes, playout policy and
de-duplication on bitboards, with python-chess's rules through the compiled legal move generator
(:mod:`nnue_infer.kernels.chess.movegen`).

A *state* is what the move generator reads (``bitboards`` int64[8]: pawns, knights, bishops, rooks,
queens, kings, White's pieces, Black's pieces, a1 = bit 0; side to move 0 White; castling rights as
python-chess's ``Board.clean_castling_rights()`` bitboard; en passant square as ``Board.ep_square``,
0 for none) plus the halfmove clock.  :func:`step` makes the state after a legal move exactly as
``Board.push`` does (castling rights lost by king and rook moves and captures on the rooks' squares,
the en passant square after every double pawn push, the clock reset by pawn moves and captures).

Random numbers come from SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014; constants as in its reference code): one uint64[1] state per stream, so a
seed gives the same walk on every machine.

Positions are de-duplicated on (piece placement, side to move) by a 128-bit hash (two independent
64-bit FNV-style mixes of the eight bitboards and the side to move) in an open-addressing table;
two distinct positions are taken for one with probability below n^2 / 2^129 (1e-24 for 1e7 positions).

The cached machine code contains the move generator's kernels, so it is stamped like them with the
contents of every file of ``nnue_infer/kernels`` (:mod:`nnue_infer.kernels.cache`) plus this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..kernels.chess.attacks import SQUARE_BB
from ..kernels.cache import register
from ..kernels.chess.bitboard import BB_KINGS, BB_PAWNS, BB_WHITE, king_square, popcount
from ..kernels.chess.attacks import attackers
from ..kernels.chess.movegen import MAX_MOVES, legal_moves, play

register(__file__)  # cached like the kernels, stamped with them and this file

#: Episode kinds (and the ``source`` codes of datagen's file format).
PERTURBATION, PLAYOUT = 0, 1
#: Crude piece values (pawns) of the playout policy, by piece type index 0..5 (pawn .. king).
VALUES = np.array([1.0, 3.0, 3.0, 5.0, 9.0, 0.0])
#: The standard starting position's bitboards (int64[8]) and castling rights (rooks on a1, h1, a8, h8).
START = np.array([0x00FF00000000FF00, 0x4200000000000042, 0x2400000000000024, 0x8100000000000081,
                  0x0800000000000008, 0x1000000000000010, 0x000000000000FFFF, 0xFFFF000000000000], np.uint64).view(np.int64)
START_CASTLING = int(START[3])
#: Counter slots of :func:`walk`.
C_EPISODES, C_DUPLICATE, C_RECORDS = range(3)


@njit(cache=True, inline="always")
def next_u64(rng):
    """The next SplitMix64 output of the stream ``rng`` (uint64[1], advanced)."""
    rng[0] += np.uint64(0x9E3779B97F4A7C15)
    z = rng[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def uniform(rng):
    """A float in [0, 1) with 53 random bits."""
    return float(next_u64(rng) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always")
def below(rng, n):
    """An integer in 0 .. n - 1 (n >= 1), uniform up to a bias below n / 2^53."""
    return min(int(uniform(rng) * n), n - 1)


@njit(cache=True, inline="always")
def key_hash(bitboards, stm):
    """Two 64-bit hashes (uint64, uint64; never both 0) of the piece placement and side to move."""
    h1 = np.uint64(0xCBF29CE484222325)
    h2 = np.uint64(0x84222325CBF29CE4)
    for k in range(8):
        x = np.uint64(bitboards[k])
        h1 = (h1 ^ x) * np.uint64(0x100000001B3)
        h1 ^= h1 >> np.uint64(29)
        h2 = (h2 ^ (x * np.uint64(0x9E3779B97F4A7C15))) * np.uint64(0xBF58476D1CE4E5B9)
        h2 ^= h2 >> np.uint64(31)
    h1 = (h1 ^ np.uint64(stm)) * np.uint64(0x100000001B3)
    h2 = (h2 ^ np.uint64(stm + 7)) * np.uint64(0x94D049BB133111EB)
    h2 ^= h2 >> np.uint64(29)
    return h1, h2 | np.uint64(1)


@njit(cache=True, inline="always")
def insert_hash(table, h1, h2):
    """Add the key (h1, h2) to ``table`` (uint64[capacity, 2], capacity a power of two, rows (0, 0)
    empty, at most half full: the caller grows it); ``True`` if it was not there."""
    mask = table.shape[0] - 1
    i = np.int64(h1 & np.uint64(mask))
    while True:
        if table[i, 1] == 0:
            table[i, 0] = h1
            table[i, 1] = h2
            return True
        if table[i, 0] == h1 and table[i, 1] == h2:
            return False
        i = (i + 1) & mask


@njit(cache=True)
def insert(table, bitboards, stm):
    """:func:`insert_hash` of a position's :func:`key_hash`."""
    h1, h2 = key_hash(bitboards, stm)
    return insert_hash(table, h1, h2)


@njit(cache=True)
def insert_all(table, bitboards, stm):
    """:func:`insert` every row (``bitboards`` int64[n, 8], ``stm`` uint8[n]); returns how many were new."""
    new = 0
    for i in range(bitboards.shape[0]):
        new += insert(table, bitboards[i], stm[i])
    return new


@njit(cache=True)
def rehash(old, new):
    """Every key of table ``old`` into the (larger, empty) table ``new``."""
    for i in range(old.shape[0]):
        if old[i, 1] != 0:
            insert_hash(new, old[i, 0], old[i, 1])


@njit(cache=True)
def step(bitboards, stm, castling, ep, halfmove, code, out):
    """The state after the legal move ``code`` (``Board.push``): bitboards into ``out`` int64[8];
    returns (castling, ep, halfmove) of the new state (the side to move flips)."""
    frm = code & 63
    to = (code >> 6) & 63
    pawn = (bitboards[BB_PAWNS] & SQUARE_BB[frm]) != 0
    capture = (bitboards[BB_WHITE + 1 - stm] & SQUARE_BB[to]) != 0 or (pawn and to == ep and (to - frm) % 8 != 0)
    play(bitboards, stm, code, ep, out)
    castling &= ~SQUARE_BB[frm] & ~SQUARE_BB[to]
    if bitboards[BB_KINGS] & SQUARE_BB[frm]:
        castling &= ~(np.int64(0xFF) if stm == 0 else SQUARE_BB[56] | SQUARE_BB[57] | SQUARE_BB[58] | SQUARE_BB[59]
                      | SQUARE_BB[60] | SQUARE_BB[61] | SQUARE_BB[62] | SQUARE_BB[63])
    new_ep = (frm + to) // 2 if pawn and (to - frm == 16 or frm - to == 16) else 0
    return castling, new_ep, 0 if pawn or capture else halfmove + 1


@njit(cache=True)
def has_legal_ep(bitboards, ep, moves, n):
    """Whether a legal move among ``moves[:n]`` is an en passant capture onto ``ep`` (``Board.has_legal_en_passant``)."""
    if ep == 0:
        return False
    for i in range(n):
        frm = moves[i] & 63
        if (moves[i] >> 6) & 63 == ep and bitboards[BB_PAWNS] & SQUARE_BB[frm] and (ep - frm) % 8 != 0:
            return True
    return False


@njit(cache=True)
def insufficient_material(bitboards):
    """python-chess's ``Board.is_insufficient_material()``: neither side can mate by material alone."""
    pawns, knights, bishops, rooks, queens, kings = (bitboards[0], bitboards[1], bitboards[2], bitboards[3],
                                                     bitboards[4], bitboards[5])
    if pawns | rooks | queens:
        return False
    dark = np.int64(-0x55AA55AA55AA55AB)  # 0xAA55AA55AA55AA55 as int64: a1, c1, ... (dark squares)
    for colour in range(2):
        own = bitboards[BB_WHITE + colour]
        other = bitboards[BB_WHITE + 1 - colour]
        if own & knights:
            insufficient = popcount(own) <= 2 and (other & ~kings & ~queens) == 0
        elif own & bishops:
            insufficient = ((bishops & dark) == 0 or (bishops & ~dark) == 0) and knights == 0
        else:
            insufficient = True
        if not insufficient:
            return False
    return True


@njit(cache=True)
def policy(bitboards, stm, ep, moves, n, greedy, rng):
    """Index into ``moves[:n]`` (n >= 1) of the playout policy's move (datagen's module docstring):
    with probability ``greedy`` the best crude material score, else a uniformly random move."""
    if uniform(rng) >= greedy:
        return below(rng, n)
    them = 1 - stm
    occupied = bitboards[BB_WHITE] | bitboards[BB_WHITE + 1]
    best, best_score = 0, -1e9
    for i in range(n):
        frm = moves[i] & 63
        to = (moves[i] >> 6) & 63
        promotion = moves[i] >> 12
        mover = 0
        captured = -1
        for k in range(6):
            if bitboards[k] & SQUARE_BB[frm]:
                mover = k
            if bitboards[k] & SQUARE_BB[to]:
                captured = k
        if captured >= 0:
            score = VALUES[captured]
        else:
            score = 1.0 if mover == 0 and to == ep and (to - frm) % 8 != 0 else 0.0
        value = VALUES[mover]
        if promotion:
            score += VALUES[promotion - 1] - 1
            value = VALUES[promotion - 1]
        if attackers(bitboards, them, to, occupied):
            score -= value
        if attackers(bitboards, them, frm, occupied):
            score += 0.5 * VALUES[mover]
        score += 0.5 * uniform(rng)
        if score > best_score:
            best, best_score = i, score
    return best


@njit(cache=True)
def record(table, bitboards, stm, castling, ep, legal_ep, source, out_bb, out_stm, out_castling, out_ep, out_source,
           out_check, counters):
    """Write a state to the output rows at ``counters[C_RECORDS]`` unless its key is in ``table``."""
    if not insert(table, bitboards, stm):
        counters[C_DUPLICATE] += 1
        return
    r = counters[C_RECORDS]
    for k in range(8):
        out_bb[r, k] = bitboards[k]
    out_stm[r] = stm
    bits = 0
    if castling & SQUARE_BB[7]:
        bits |= 1
    if castling & SQUARE_BB[0]:
        bits |= 2
    if castling & SQUARE_BB[63]:
        bits |= 4
    if castling & SQUARE_BB[56]:
        bits |= 8
    out_castling[r] = bits
    out_ep[r] = ep if legal_ep else -1
    out_source[r] = source
    king = king_square(bitboards, stm)
    out_check[r] = attackers(bitboards, 1 - stm, king, bitboards[BB_WHITE] | bitboards[BB_WHITE + 1]) != 0
    counters[C_RECORDS] = r + 1


@njit(cache=True)
def visit(table, bitboards, stm, castling, ep, moves, n, children, source, rng, out_bb, out_stm, out_castling, out_ep,
          out_source, out_check, counters):
    """Record a visited state (its legal moves ``moves[:n]`` known) and up to ``children`` of its children
    (distinct random legal moves, not walked further)."""
    record(table, bitboards, stm, castling, ep, has_legal_ep(bitboards, ep, moves, n), source, out_bb, out_stm,
           out_castling, out_ep, out_source, out_check, counters)
    if children == 0 or n == 0:
        return
    pool = moves[:n].copy()
    child = np.empty(8, np.int64)
    child_moves = np.empty(MAX_MOVES, np.uint16)
    for j in range(min(children, n)):
        pick = j + below(rng, n - j)
        pool[j], pool[pick] = pool[pick], pool[j]
        c_castling, c_ep, _ = step(bitboards, stm, castling, ep, 0, np.int64(pool[j]), child)
        legal_ep = False
        if c_ep:
            legal_ep = has_legal_ep(child, c_ep, child_moves,
                                    legal_moves(child, 1 - stm, c_castling, c_ep, False, child_moves))
        record(table, child, 1 - stm, c_castling, c_ep, legal_ep, source, out_bb, out_stm, out_castling, out_ep,
               out_source, out_check, counters)


@njit(cache=True)
def walk(kind, target, max_episodes, starts, start_stm, start_castling, start_ep, max_walk, opening_plies,
         max_game_plies, greedy, children, rng, table, out_bb, out_stm, out_castling, out_ep, out_source, out_check, counters):
    """Play whole episodes of ``kind`` (:data:`PERTURBATION` from a random row of ``starts``
    int64[S, 8] / ``start_stm`` uint8[S] / ``start_castling`` int64[S] / ``start_ep`` int64[S], or
    :data:`PLAYOUT` from the standard position) until ``counters[C_RECORDS]`` reaches ``target`` or
    ``counters[C_EPISODES]`` reaches ``max_episodes``;
    new positions go to the ``out_*`` rows (room for ``target`` plus one episode:
    ``(max(max_walk, max_game_plies) + 1) * (children + 1)`` rows), keys into ``table``.

    ``counters`` int64[3]: episodes, duplicates skipped, records written (``out_check``: 1 where the
    side to move is in check).
    """
    board = np.empty(8, np.int64)
    nxt = np.empty(8, np.int64)
    moves = np.empty(MAX_MOVES, np.uint16)
    while counters[C_RECORDS] < target and counters[C_EPISODES] < max_episodes:
        counters[C_EPISODES] += 1
        if kind == PERTURBATION:  # visit the start, a random move, then policy moves, visiting each
            s = below(rng, starts.shape[0])
            board[:] = starts[s]
            stm, castling, ep = int(start_stm[s]), start_castling[s], start_ep[s]
            random_moves, first_visit = 1, 0
            last = 1 + below(rng, max_walk)
        else:  # random opening moves, then policy moves until the game ends, visiting from the opening's end
            board[:] = START
            stm, castling, ep = 0, np.int64(START_CASTLING), 0
            random_moves = first_visit = 2 + below(rng, opening_plies - 1)
            last = max_game_plies
        halfmove = ply = 0
        n = legal_moves(board, stm, castling, ep, False, moves)
        while True:
            if ply >= first_visit or n == 0:
                visit(table, board, stm, castling, ep, moves, n, children, kind, rng, out_bb, out_stm, out_castling,
                      out_ep, out_source, out_check, counters)
            if n == 0 or ply >= last or (kind == PLAYOUT and ply >= random_moves and (
                    halfmove >= 100 or insufficient_material(board))):
                break
            i = below(rng, n) if ply < random_moves else policy(board, stm, ep, moves, n, greedy, rng)
            castling, ep, halfmove = step(board, stm, castling, ep, halfmove, np.int64(moves[i]), nxt)
            board[:] = nxt
            stm = 1 - stm
            ply += 1
            n = legal_moves(board, stm, castling, ep, False, moves)


@njit(cache=True)
def expand(bitboards, stm, castling, ep, halfmove, offsets, c_bb, c_stm, c_castling, c_ep, c_halfmove, c_legal_ep):
    """Every legal child of every state of a batch (the self-play generator's move choice).

    Row g of ``bitboards`` int64[G, 8] / ``stm`` uint8[G] / ``castling`` int64[G] / ``ep`` int64[G] /
    ``halfmove`` int64[G] is a state; its children go to rows ``offsets[g] .. offsets[g + 1] - 1``
    (``offsets`` int64[G + 1]) of ``c_bb`` int64[M, 8], ``c_stm`` uint8[M], ``c_castling`` int64[M],
    ``c_ep`` int64[M], ``c_halfmove`` int64[M] and ``c_legal_ep`` uint8[M] (1 where the child has a
    legal en passant capture), in ``Board.legal_moves`` order; M >= G * MAX_MOVES.  Returns the
    number of children written.
    """
    moves = np.empty(MAX_MOVES, np.uint16)
    child_moves = np.empty(MAX_MOVES, np.uint16)
    r = 0
    for g in range(bitboards.shape[0]):
        offsets[g] = r
        n = legal_moves(bitboards[g], int(stm[g]), castling[g], ep[g], False, moves)
        for i in range(n):
            c_castling[r], c_ep[r], c_halfmove[r] = step(bitboards[g], int(stm[g]), castling[g], ep[g], halfmove[g],
                                                         np.int64(moves[i]), c_bb[r])
            c_stm[r] = 1 - stm[g]
            legal = False
            if c_ep[r]:
                legal = has_legal_ep(c_bb[r], c_ep[r], child_moves,
                                     legal_moves(c_bb[r], 1 - int(stm[g]), c_castling[r], c_ep[r], False, child_moves))
            c_legal_ep[r] = legal
            r += 1
    offsets[bitboards.shape[0]] = r
    return r


@njit(cache=True)
def choose(values, offsets, temperature, rng, picks):
    """One child per state of :func:`expand` by a softmax policy of the teacher's values.

    ``values`` float64[M]: each child's value from its own side to move's point of view (so the mover
    prefers low values; rows it must never pick are +inf); ``temperature`` float64[G] (same units, > 0);
    child j of state g is drawn with probability proportional to ``exp(-values[j] / temperature[g])``.
    ``picks`` int64[G] receives the chosen row, or -1 for a state without children.
    """
    for g in range(offsets.shape[0] - 1):
        lo, hi = offsets[g], offsets[g + 1]
        best = np.inf
        for j in range(lo, hi):
            best = min(best, values[j])
        if hi == lo or best == np.inf:
            picks[g] = -1
            continue
        total = 0.0
        for j in range(lo, hi):
            total += np.exp(-(values[j] - best) / temperature[g])
        u = uniform(rng) * total
        picks[g] = hi - 1
        acc = 0.0
        for j in range(lo, hi):
            acc += np.exp(-(values[j] - best) / temperature[g])
            if acc > u:
                picks[g] = j
                break


@njit(cache=True)
def insert_rows(table, bitboards, stm, rows, new):
    """:func:`insert` the positions ``rows`` (int64[k]) of ``bitboards`` int64[M, 8] / ``stm`` uint8[M];
    ``new`` uint8[k] receives 1 where the key was not in ``table`` yet."""
    for i in range(rows.shape[0]):
        new[i] = insert(table, bitboards[rows[i]], stm[rows[i]])


@njit(cache=True)
def sample_children(offsets, picks, children, rng, out):
    """Up to ``children`` distinct random rows of each state's children other than its pick (a partial
    Fisher-Yates shuffle per state); writes them to ``out`` int64[>= G * children] and returns how many."""
    k = 0
    pool = np.empty(MAX_MOVES, np.int64)
    for g in range(offsets.shape[0] - 1):
        lo, hi = offsets[g], offsets[g + 1]
        m = 0
        for j in range(lo, hi):
            if j != picks[g]:
                pool[m] = j
                m += 1
        for j in range(min(children, m)):
            pick = j + below(rng, m - j)
            pool[j], pool[pick] = pool[pick], pool[j]
            out[k] = pool[j]
            k += 1
    return k

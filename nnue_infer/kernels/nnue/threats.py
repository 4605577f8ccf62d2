"""Threat (FullThreats) and pawn-pair (PP_3Wide) feature kernels, from bitboards.

Both sets describe **relations between two pieces** on the current board.  A position's
relations form one list of int64 *entries*, independent of the perspective:

* threat ``((from * 64 + to) << 8) | (attacker << 4) | attacked``: the piece on ``from``
  attacks the piece on ``to`` (pawn captures, knight jumps, slider lines stopping at the first
  occupied square; kings neither attack nor are attacked, but block lines), and the pair of
  piece types is a FullThreats feature (:data:`THREAT_SLOT`);
* pawn pair ``(1 << 20) | ((a * 64 + b) << 8) | (colour_a * 6 << 4) | colour_b * 6``: pawns on
  squares ``a < b`` whose files differ by at most one (PP_3Wide).

Piece codes are ``colour * 6 + type`` (colour 0 White, 1 Black; type 0..5 = P, N, B, R, Q, K).
Entries come out in ascending order, so the change between two positions is a merge of two
sorted lists (:func:`sorted_difference`): exactly the multiset difference Stockfish builds move
by move (``DirtyThreats``, ``DirtyPawnPairs``), whatever the move (castling, Chess960, e.p.,
promotions, null moves, several plies at once).  Each entry becomes a feature index per
perspective with :func:`relation_index` (or none: of two pieces of the same type attacking
each other only one direction is a feature, and which one depends on the perspective).

Indices of one perspective P with own king on K (orientation ``o = (7 if file(K) >= 4) ^ (56
if P is Black)``, so the own king lands on files a-d: the opposite of HalfKAv2_hm's mirror):

* threat: ``OFFSET[A', f'] + (c(D) * H[type A] + slot) * S[type A] + |PATTERN[A', f'] below t'|``
  with ``f' = from ^ o``, ``t' = to ^ o``, ``A'`` the attacker as own (0..5) or their (6..11)
  piece, ``c(D)`` 0 for an own attacked piece and 1 for theirs, ``PATTERN`` the empty-board
  attack set of ``A'`` on the oriented board (own pawns capture upwards, theirs downwards);
* pawn pair: ``pair_offset + hi * (hi - 1) / 2 + lo`` over the pawn ids ``48 * c + (s ^ o) - 8``.

Source: Stockfish 19, ``nnue/features/full_threats.{h,cpp}``, ``nnue/features/pp_3wide.{h,cpp}``;
``shared/reference/stockfish-19-nnue.md`` sections 4, 5 and 11.2-11.3.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..chess.attacks import KNIGHT_ATTACKS, SQUARE_BB, line_attacks, piece_attacks
from ..chess.bitboard import BB_BLACK, BB_KINGS, BB_PAWNS, BB_WHITE, lowest_square, popcount, without_lowest

#: Number of FullThreats features per perspective (Stockfish 19, and Stockfish 18's variant).
NUM_THREAT_FEATURES = 59_808
NUM_THREAT_FEATURES_SF18 = 79_856
#: Number of PP_3Wide features per perspective.
NUM_PAIR_FEATURES = 4_560
#: Most relation entries one position can have: at most 8 attacked pieces for each of 32
#: pieces, plus at most 120 pawn pairs.
MAX_RELATIONS = 384
#: Marks a pawn-pair entry (above every threat entry).
PAIR_FLAG = 1 << 20

#: Threat-set variants (the ``threats`` argument of the kernels; 0 means no threat features).
THREATS_SF19 = 1  #: Stockfish 19's FullThreats (59,808): kings neither attack nor are attacked.
THREATS_SF18 = 2  #: Stockfish 18's ``Full_Threats(Friend)`` (79,856): kings do both, pawns threaten pawns.

#: Slot of (attacker type, attacked type) in the attacker's target block, -1 if no feature, per
#: variant (row 0 Stockfish 19, row 1 Stockfish 18).  Stockfish 19: pawns threaten knights and
#: rooks only, bishops and rooks not queens, kings nothing and nobody kings.  Stockfish 18: pawns
#: threaten pawns, knights and rooks; bishops and rooks everything but queens; kings pawns to rooks.
THREAT_SLOT = np.array([
    [[-1, 0, -1, 1, -1, -1],
     [0, 1, 2, 3, 4, -1],
     [0, 1, 2, 3, -1, -1],
     [0, 1, 2, 3, -1, -1],
     [0, 1, 2, 3, 4, -1],
     [-1, -1, -1, -1, -1, -1]],
    [[0, 1, -1, 2, -1, -1],
     [0, 1, 2, 3, 4, 5],
     [0, 1, 2, 3, -1, 4],
     [0, 1, 2, 3, -1, 4],
     [0, 1, 2, 3, 4, 5],
     [0, 1, 2, 3, -1, -1]],
], np.int64)
#: Slots per attacker type (``H``, own targets; as many again for their targets), per variant.
THREAT_SLOTS = (THREAT_SLOT >= 0).sum(axis=2).astype(np.int64)


def _empty_board_attacks() -> np.ndarray:
    """int64[12, 64]: :func:`~nnue_infer.kernels.chess.attacks.piece_attacks` of White's (0..5) and
    Black's (6..11) P..K from each square of the empty board, computed in plain Python (the
    kernels' Python source: importing this module compiles nothing)."""
    from ..chess.attacks import KING_ATTACKS, PAWN_ATTACKS

    lines = getattr(line_attacks, "py_func", line_attacks)
    out = np.zeros((12, 64), np.int64)
    for s in range(64):
        for side in range(2):
            out[6 * side, s] = PAWN_ATTACKS[side, s]
            out[6 * side + 1, s] = KNIGHT_ATTACKS[s]
            out[6 * side + 2, s] = lines(s, np.int64(0), 4, 8)
            out[6 * side + 3, s] = lines(s, np.int64(0), 0, 4)
            out[6 * side + 4, s] = lines(s, np.int64(0), 0, 8)
            out[6 * side + 5, s] = KING_ATTACKS[s]
    return out


#: Empty-board attacks of White's (0..5) and Black's (6..11) P..K from each square, int64[12, 64].
EMPTY_ATTACKS = _empty_board_attacks()


def _oriented_patterns() -> np.ndarray:
    """int64[12, 64]: empty-board attacks of own (0..5) and their (6..11) P..K on the oriented board."""
    out = EMPTY_ATTACKS.copy()
    out[[0, 6], :8] = 0  # pawns never stand on ranks 1 and 8; those squares contribute nothing
    out[[0, 6], 56:] = 0
    return out


def _bits(b: int) -> int:
    return bin(int(b) & (2**64 - 1)).count("1")


#: Empty-board attack sets on the oriented board, int64[12, 64] (rows own P..K, their P..K).
THREAT_PATTERN = _oriented_patterns()
#: ``S``: squares attacked from all squares of the empty board, per attacker type (pawn 84, knight
#: 336, bishop 560, rook 896, queen 1456, king 420).
THREAT_STRIDE = np.array([sum(_bits(b) for b in THREAT_PATTERN[t]) for t in range(6)], np.int64)


def _offsets(variant: int) -> np.ndarray:
    """int64[12, 64]: ``BASE[A'] + F(A', s)``, F = attacks from the oriented squares below s."""
    out = np.zeros((12, 64), np.int64)
    base = 0
    for a in range(12):
        t = a % 6
        counts = [_bits(b) for b in THREAT_PATTERN[a]]
        for s in range(64):
            out[a, s] = base + sum(counts[:s])
        base += 2 * THREAT_SLOTS[variant, t] * THREAT_STRIDE[t]
    assert base == (NUM_THREAT_FEATURES, NUM_THREAT_FEATURES_SF18)[variant]
    return out


#: ``BASE[A'] + F(A', f')`` of the index formula, int64[variant, 12, 64].
THREAT_OFFSET = np.stack([_offsets(0), _offsets(1)])
#: Squares below each square (``(1 << s) - 1``), int64[64].
BELOW = np.array([(1 << s) - 1 for s in range(64)], np.uint64).view(np.int64)


@njit(cache=True, inline="always")
def relation_orientation(king_sq, perspective):
    """Square XOR mask of threat and pair indices: the own king lands on files a-d, Black flips ranks."""
    o = 56 * perspective
    if (king_sq & 7) >= 4:
        o ^= 7
    return o


@njit(cache=True, inline="always")
def piece_code(bitboards, s):
    """Piece code (``colour * 6 + type``) on square ``s`` of ``bitboards``, -1 if empty."""
    bit = SQUARE_BB[s]
    colour = 0 if bitboards[BB_WHITE] & bit else 6
    for pt in range(BB_KINGS + 1):
        if bitboards[pt] & bit:
            return colour + pt
    return -1


@njit(cache=True)  # not inlined: it would be copied into every update path (slow compiles)
def relation_list(bitboards, threats, pairs, near, out):
    """Write the position's relation entries (see the module docstring) that involve the squares
    ``near`` to ``out``, ascending; ``near = -1`` (every square) lists them all.

    An entry is listed when its attacker stands on a ``near`` square, or its attacker's attack
    set reaches one (a slider whose line a ``near`` square blocks or continues: all its entries;
    a pawn, knight or king: its entries whose attacked square is ``near``), or, for a pawn pair,
    when one of its pawns stands on a ``near`` square.  With ``near`` = the squares whose content
    differs between two positions, every entry that is in one position's list but not the
    other's is listed, and the entries listed in both are the same: so the sorted difference
    of the two short lists is the whole change (Stockfish's ``DirtyThreats`` from the changed
    squares; shared/reference/stockfish-19-nnue.md section 11.2).  The rule is symmetric: a
    slider away from ``near`` reaches a ``near`` square in one position iff it does in the other,
    because the occupancy differs only on ``near`` squares.

    Parameters
    ----------
    bitboards : int64[8]
        Pawns, knights, bishops, rooks, queens, kings, white, black (validated: one king each).
    threats : int
        0 no threats, ``THREATS_SF19`` or ``THREATS_SF18`` (which pairs of pieces count).
    pairs : int
        1 to list PP_3Wide relations, 0 not to.
    near : int64
        Bitboard of the squares of interest (-1: all).
    out : int64[>= MAX_RELATIONS]
        Output.

    Returns
    -------
    int
        Number of entries written.
    """
    n = 0
    occupied = bitboards[BB_WHITE] | bitboards[BB_BLACK]
    if threats:
        v = threats - 1
        targets = occupied & ~bitboards[BB_KINGS] if threats == THREATS_SF19 else occupied
        rest = targets
        while rest:
            f = lowest_square(rest)
            rest = without_lowest(rest)
            a = piece_code(bitboards, f)
            at = a % 6
            if near & SQUARE_BB[f]:
                att = piece_attacks(at, a // 6, f, occupied) & targets
            elif EMPTY_ATTACKS[a, f] & near == 0:
                continue
            elif 2 <= at <= 4:  # a slider: its whole line may have changed
                att = piece_attacks(at, a // 6, f, occupied)
                if att & near == 0:
                    continue
                att &= targets
            else:
                att = EMPTY_ATTACKS[a, f] & near & targets
            while att:
                t = lowest_square(att)
                att = without_lowest(att)
                d = piece_code(bitboards, t)
                if THREAT_SLOT[v, at, d % 6] >= 0:
                    out[n] = ((f * 64 + t) << 8) | (a << 4) | d
                    n += 1
    if pairs:
        pawns = bitboards[BB_PAWNS]
        white = bitboards[BB_WHITE]
        rest = pawns
        while rest:
            a = lowest_square(rest)
            rest = without_lowest(rest)
            later = rest if near & SQUARE_BB[a] else rest & near
            ca = 0 if white & SQUARE_BB[a] else 6
            fa = a & 7
            while later:
                b = lowest_square(later)
                later = without_lowest(later)
                if abs((b & 7) - fa) <= 1:
                    cb = 0 if white & SQUARE_BB[b] else 6
                    out[n] = PAIR_FLAG | ((a * 64 + b) << 8) | (ca << 4) | cb
                    n += 1
    return n


@njit(cache=True, inline="always")
def relation_changes(old, new, threats, pairs, before, after, added, removed):
    """The relation entries that appear (``added``) and disappear (``removed``) from piece set
    ``old`` to ``new`` (int64[8] each): the sorted difference of their relation lists near the
    changed squares (:func:`relation_list`; ``before``/``after`` int64[>= MAX_RELATIONS] scratch).
    Returns ``(n_added, n_removed)``."""
    near = np.int64(0)
    for i in range(8):
        near |= old[i] ^ new[i]
    if near == 0:
        return 0, 0
    n_old = relation_list(old, threats, pairs, near, before)
    n_new = relation_list(new, threats, pairs, near, after)
    return sorted_difference(before, n_old, after, n_new, added, removed)


@njit(cache=True, inline="always")
def relation_index(entry, perspective, orient, threats, pair_offset):
    """Feature index of a relation ``entry`` for ``perspective`` (0 White, 1 Black) with
    orientation ``orient`` (:func:`relation_orientation`), or -1 if it is no feature there.

    ``threats`` is the threat variant (as in :func:`relation_list`).  Threat indices are 0 ..
    59,807 (79,855 for Stockfish 18's); pair indices start at ``pair_offset`` (59,808 when
    both sets are used: one index space, as Stockfish 19 stores the rows).  Of two pieces of
    the same type attacking each other, only the direction with ``f' > t'`` counts (pawns of
    one colour never attack each other both ways).
    """
    a = (entry >> 4) & 15
    d = entry & 15
    f = ((entry >> 14) & 63) ^ orient
    t = ((entry >> 8) & 63) ^ orient
    if entry & PAIR_FLAG:
        ida = 48 * (a // 6 != perspective) + f - 8
        idb = 48 * (d // 6 != perspective) + t - 8
        hi = max(ida, idb)
        lo = min(ida, idb)
        return pair_offset + hi * (hi - 1) // 2 + lo
    at = a % 6
    dt = d % 6
    if at == dt and f < t and (at != 0 or a != d):  # same type: only the direction with f' > t' counts
        return -1
    v = threats - 1
    own_attacker = a // 6 == perspective
    ap = at + 6 * (1 - own_attacker)
    block = 1 - (d // 6 == perspective)
    return (THREAT_OFFSET[v, ap, f] + (block * THREAT_SLOTS[v, at] + THREAT_SLOT[v, at, dt]) * THREAT_STRIDE[at]
            + popcount(THREAT_PATTERN[ap, f] & BELOW[t]))


@njit(cache=True, inline="always")
def relation_indices(entries, n, perspective, orient, threats, pair_offset, out):
    """Feature indices (int32 ``out``) of the first ``n`` relation ``entries``; returns how many
    (entries that are no feature for this perspective are skipped)."""
    k = 0
    for i in range(n):
        idx = relation_index(entries[i], perspective, orient, threats, pair_offset)
        if idx >= 0:
            out[k] = idx
            k += 1
    return k


@njit(cache=True, inline="always")
def sorted_difference(old, n_old, new, n_new, added, removed):
    """Entries of ``new`` not in ``old`` (to ``added``) and of ``old`` not in ``new`` (to
    ``removed``); both int64 lists ascending.  Returns ``(n_added, n_removed)``."""
    i = 0
    j = 0
    na = 0
    nr = 0
    while i < n_old and j < n_new:
        x = old[i]
        y = new[j]
        if x == y:
            i += 1
            j += 1
        elif x < y:
            removed[nr] = x
            nr += 1
            i += 1
        else:
            added[na] = y
            na += 1
            j += 1
    while i < n_old:
        removed[nr] = old[i]
        nr += 1
        i += 1
    while j < n_new:
        added[na] = new[j]
        na += 1
        j += 1
    return na, nr


@njit(cache=True)
def active_relation_features(bitboards, threats, pairs, pair_offset, out, counts):
    """Active threat / pawn-pair feature indices of both perspectives (in the relation list's
    order, not sorted); ``threats``, ``pairs`` as in :func:`relation_list`, ``out`` int32[2, >=
    MAX_RELATIONS], ``counts`` int64[2].
    For tests and :mod:`nnue_infer.features`; the evaluation kernels use the pieces directly."""
    entries = np.empty(MAX_RELATIONS, np.int64)
    n = relation_list(bitboards, threats, pairs, np.int64(-1), entries)
    for p in range(2):
        kings = bitboards[BB_KINGS] & bitboards[BB_WHITE + p]
        orient = relation_orientation(lowest_square(kings), p)
        counts[p] = relation_indices(entries, n, p, orient, threats, pair_offset, out[p])


@njit(cache=True)
def active_relation_features_batch(bitboards, threats, pairs, out, counts):
    """:func:`~nnue_infer.kernels.nnue.threats.active_relation_features` of many positions.

    ``bitboards`` int64[n, 8]; ``out`` int32[n, 2, >= MAX_RELATIONS] receives each position's
    indices (White's perspective, then Black's; the relation list's order, entries past the
    count left as they were); ``counts`` int64[n, 2].  The caller guarantees one king per side.
    """
    for i in range(bitboards.shape[0]):
        active_relation_features(bitboards[i], threats, pairs, np.int64(0), out[i], counts[i])

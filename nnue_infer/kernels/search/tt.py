"""The transposition table: one int64 key and one packed int64 entry per slot, the slot chosen by
the key's low bits (a power-of-two number of slots), depth-preferred replacement with aging.

An entry packs the move (16 bits, :mod:`nnue_infer.kernels.chess.movegen` code), the score and the static
evaluation (16 bits each, offset by 32768), the depth (8 bits, offset by :data:`DEPTH_OFFSET`), the
bound (2 bits) and the search's generation (6 bits).  Mate scores are stored relative to the
entry's position (distance to mate from there) and made relative to the root again when read
(:func:`score_to_tt`, :func:`score_from_tt`), as every engine does.

Source: the chessprogramming wiki, "Transposition Table" and "Mate scores"; Stockfish 15.1
``tt.cpp`` (the replacement rule: a new key, a deeper or exact entry, or an older search's entry).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Bounds of a stored score.
BOUND_NONE, BOUND_UPPER, BOUND_LOWER, BOUND_EXACT = 0, 1, 2, 3
#: Added to a depth before packing it (quiescence entries have depth 0 or less).
DEPTH_OFFSET = 64
#: int64 words of one slot (key, entry).
SLOT_WORDS = 2
#: Scores with an absolute value at or above this are mate scores (``search`` keeps the same).
MATE = 32000
MAX_PLY = 128
MATE_BOUND = MATE - 2 * MAX_PLY


def table_slots(hash_mb: float) -> int:
    """The number of slots of a table of at most ``hash_mb`` MiB (a power of two, at least 1024)."""
    slots = max(1024, int(hash_mb * 2**20) // (8 * SLOT_WORDS))
    return 1 << (slots.bit_length() - 1)


@njit(cache=True, forceinline=True)
def score_to_tt(score, ply):
    """A score at ``ply`` from the root as stored: a mate counted from the entry's position."""
    if score >= MATE_BOUND:
        return score + ply
    if score <= -MATE_BOUND:
        return score - ply
    return score


@njit(cache=True, forceinline=True)
def score_from_tt(score, ply):
    """A stored score as seen at ``ply`` from the root (the inverse of :func:`score_to_tt`)."""
    if score >= MATE_BOUND:
        return score - ply
    if score <= -MATE_BOUND:
        return score + ply
    return score


@njit(cache=True, forceinline=True)
def probe(tt, key):
    """The packed entry of ``key`` in ``tt`` (int64[slots, 2]), 0 when it holds another position."""
    slot = key & (tt.shape[0] - 1)
    if tt[slot, 0] == key:
        return tt[slot, 1]
    return np.int64(0)


@njit(cache=True, forceinline=True)
def entry_move(entry):
    return entry & 0xFFFF


@njit(cache=True, forceinline=True)
def entry_score(entry):
    return ((entry >> 16) & 0xFFFF) - 32768


@njit(cache=True, forceinline=True)
def entry_eval(entry):
    return ((entry >> 32) & 0xFFFF) - 32768


@njit(cache=True, forceinline=True)
def entry_depth(entry):
    return ((entry >> 48) & 0xFF) - DEPTH_OFFSET


@njit(cache=True, forceinline=True)
def entry_bound(entry):
    return (entry >> 56) & 3


@njit(cache=True, forceinline=True)
def entry_generation(entry):
    return (entry >> 58) & 63


@njit(cache=True)
def store(tt, key, move, score, static_eval, depth, bound, generation):
    """Store an entry for ``key`` unless the slot holds a deeper entry of the same search for
    another position (or of this position, with no exact bound and more than 3 plies deeper).
    ``score`` as :func:`score_to_tt` gives it; a move of 0 keeps the slot's move for the same key."""
    slot = key & (tt.shape[0] - 1)
    old = tt[slot, 1]
    same = tt[slot, 0] == key
    if old != 0 and entry_generation(old) == generation and bound != BOUND_EXACT:
        if entry_depth(old) > depth + (3 if same else 0):
            return
    if move == 0 and same:
        move = entry_move(old)
    depth = min(max(depth, -DEPTH_OFFSET), 255 - DEPTH_OFFSET)
    tt[slot, 0] = key
    tt[slot, 1] = (np.int64(move) | (np.int64(score + 32768) << 16) | (np.int64(static_eval + 32768) << 32)
                   | (np.int64(depth + DEPTH_OFFSET) << 48) | (np.int64(bound) << 56) | (np.int64(generation) << 58))


@njit(cache=True)
def hashfull(tt, generation):
    """Permille of the first 1000 slots holding an entry of the search ``generation`` (UCI's ``hashfull``)."""
    n = min(1000, tt.shape[0])
    used = 0
    for i in range(n):
        if tt[i, 1] != 0 and entry_generation(tt[i, 1]) == generation:
            used += 1
    return used * 1000 // n

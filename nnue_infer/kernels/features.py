"""King-bucketed piece-square feature indices (HalfKAv2_hm, Chess768 and kin), from bitboards.

One mechanism covers every feature set of the form

    index = (square ^ orientation) + 64 * slot + 64 * num_slots * king_bucket

where, per perspective P with own king square K:

* ``orientation`` is 56 for Black (rank flip) XOR 7 when mirroring applies: ``mirror`` 1
  mirrors when K is on files a-d (the own king always lands on files e-h, HalfKAv2_hm),
  ``mirror`` 2 when K is on files e-h (it lands on files a-d, bullet's mirrored buckets);
* ``slot`` comes from ``slot_table[own_or_their, piece_type]``;
* ``king_bucket`` is ``king_buckets[K ^ orientation]``.

Source: Stockfish 15.1, ``nnue/features/half_ka_v2_hm.{h,cpp}`` (HalfKAv2_hm); bullet,
``inputs`` (``Chess768``: own pieces 0-5, theirs 6-11; ``ChessBucketsMirrored``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Index of each bitboard in the ``bitboards`` argument (python-chess order of piece types).
BB_PAWNS, BB_KNIGHTS, BB_BISHOPS, BB_ROOKS, BB_QUEENS, BB_KINGS, BB_WHITE, BB_BLACK = range(8)


@njit(cache=True)
def orientation(king_square: int, perspective: int, mirror: int) -> int:
    """Square XOR mask for ``perspective`` (0 White, 1 Black) whose own king is on ``king_square``.

    ``mirror``: 0 never, 1 when the king is on files a-d, 2 when it is on files e-h.
    """
    o = 56 * perspective
    left = (king_square & 7) < 4
    if (mirror == 1 and left) or (mirror == 2 and not left):
        o ^= 7
    return o


@njit(cache=True)
def king_square(bitboards, perspective):
    """Square (0..63, a1 = 0) of ``perspective``'s king; -1 if there is none."""
    kings = bitboards[BB_KINGS] & bitboards[BB_WHITE + perspective]
    for sq in range(64):
        if (kings >> sq) & 1:
            return sq
    return -1


@njit(cache=True)
def feature_index(square, piece_type, own, orient, bucket_base, slot_table):
    """Feature index of one piece (``piece_type`` 0..5 = P..K, ``own`` 1 if it has the perspective's colour)."""
    return (square ^ orient) + 64 * slot_table[1 - own, piece_type] + bucket_base


@njit(cache=True)
def active_features(bitboards, slot_table, king_buckets, mirror, num_slots, out, counts):
    """Write the active feature indices of both perspectives.

    Parameters
    ----------
    bitboards : int64[8]
        Pawns, knights, bishops, rooks, queens, kings, white, black (python-chess
        bitboards viewed as int64; a1 = bit 0).
    slot_table : int32[2, 6]
        Slot of own (row 0) and their (row 1) pieces by piece type P, N, B, R, Q, K.
    king_buckets : int32[64]
        King bucket of the own king's oriented square.
    mirror : int
        0 no mirroring, 1 mirror files so the own king stands on files e-h, 2 on files a-d.
    num_slots : int
        Slots per king bucket (11 for HalfKAv2_hm, 12 for Chess768).
    out : int32[2, >= 32]
        Output: feature indices, row 0 White's perspective, row 1 Black's.
    counts : int64[2]
        Output: number of features written per row.

    The caller guarantees exactly one king per side and at most ``out.shape[1]`` pieces.
    """
    occupied = bitboards[BB_WHITE] | bitboards[BB_BLACK]
    for p in range(2):
        ksq = king_square(bitboards, p)
        orient = orientation(ksq, p, mirror)
        base = 64 * num_slots * king_buckets[ksq ^ orient]
        own_bb = bitboards[BB_WHITE + p]
        n = 0
        for sq in range(64):
            if (occupied >> sq) & 1:
                pt = 0
                while not (bitboards[pt] >> sq) & 1:
                    pt += 1
                own = (own_bb >> sq) & 1
                out[p, n] = feature_index(sq, pt, own, orient, base, slot_table)
                n += 1
        counts[p] = n

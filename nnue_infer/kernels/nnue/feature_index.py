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

from ..chess.bitboard import BB_BLACK, BB_WHITE, king_square, lowest_square, popcount, without_lowest


@njit(cache=True, inline="always")
def orientation(king_square: int, perspective: int, mirror: int) -> int:
    """Square XOR mask for ``perspective`` (0 White, 1 Black) whose own king is on ``king_square``.

    ``mirror``: 0 never, 1 when the king is on files a-d, 2 when it is on files e-h.
    """
    o = 56 * perspective
    left = (king_square & 7) < 4
    if (mirror == 1 and left) or (mirror == 2 and not left):
        o ^= 7
    return o


@njit(cache=True, inline="always")
def king_frame(king_sq, perspective, king_buckets, mirror, num_slots):
    """Orientation, feature base and refresh-cache key of a perspective whose own king is on ``king_sq``.

    Returns ``(orient, base, key)``: every feature index of the perspective is
    ``(square ^ orient) + 64 * slot + base``; ``key = 2 * king_bucket + mirrored`` names the
    refresh-cache entry whose accumulators share this frame (same bucket, same mirroring).
    """
    orient = orientation(king_sq, perspective, mirror)
    bucket = king_buckets[king_sq ^ orient]
    return orient, 64 * num_slots * bucket, 2 * bucket + ((orient & 7) != 0)


@njit(cache=True, inline="always")
def count_changes(old, new):
    """Number of (piece, square) pairs that differ between two piece sets (int64[8] bitboards each)."""
    n = 0
    for c in range(2):
        old_c = old[BB_WHITE + c]
        new_c = new[BB_WHITE + c]
        for pt in range(6):
            diff = (old[pt] & old_c) ^ (new[pt] & new_c)
            if diff != 0:  # usually 0: one move changes at most 4 of the 12 piece sets
                n += popcount(diff)
    return n


@njit(cache=True, forceinline=True)
def changed_features(old, new, perspective, orient, base, slot_table, added, removed):
    """Feature indices that leave (``removed``) and enter (``added``) between piece sets ``old`` and ``new``.

    Both piece sets are seen from ``perspective`` in one king frame (``orient``, ``base`` from
    :func:`king_frame`), so this is valid only when that perspective's king frame is the same
    for both.  Every kind of move (castling in Chess960, en passant, promotions, null moves,
    several plies at once) reduces to this difference of bitboards.

    Parameters
    ----------
    old, new : int64[8]
        Bitboards as in :func:`active_features`.
    added, removed : int32[>= 32]
        Outputs.

    Returns
    -------
    (int, int)
        Number of indices written to ``added`` and to ``removed``.
    """
    n_added = 0
    n_removed = 0
    for c in range(2):  # c = 0: the perspective's own pieces, 1: theirs
        colour = perspective ^ c
        old_c = old[BB_WHITE + colour]
        new_c = new[BB_WHITE + colour]
        for pt in range(6):
            o = old[pt] & old_c
            n = new[pt] & new_c
            offset = 64 * slot_table[c, pt] + base
            gone = o & ~n
            while gone:
                removed[n_removed] = (lowest_square(gone) ^ orient) + offset
                n_removed += 1
                gone = without_lowest(gone)
            came = n & ~o
            while came:
                added[n_added] = (lowest_square(came) ^ orient) + offset
                n_added += 1
                came = without_lowest(came)
    return n_added, n_removed


@njit(cache=True, inline="always")
def feature_index(square, piece_type, own, orient, bucket_base, slot_table):
    """Feature index of one piece (``piece_type`` 0..5 = P..K, ``own`` 1 if it has the perspective's colour)."""
    return (square ^ orient) + 64 * slot_table[1 - own, piece_type] + bucket_base


@njit(cache=True, forceinline=True)
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
    Indices come in ascending square order (the training path sums float features in this order).
    One pass over the occupied squares serves both perspectives.
    """
    white_p, black_p = np.int64(0), np.int64(1)  # not int literals: one compiled signature per callee
    white_king = king_square(bitboards, white_p)
    black_king = king_square(bitboards, black_p)
    orient_w = orientation(white_king, white_p, mirror)
    orient_b = orientation(black_king, black_p, mirror)
    base_w = 64 * num_slots * king_buckets[white_king ^ orient_w]
    base_b = 64 * num_slots * king_buckets[black_king ^ orient_b]
    white = bitboards[BB_WHITE]
    occupied = white | bitboards[BB_BLACK]
    n = 0
    while occupied:
        sq = lowest_square(occupied)
        occupied = without_lowest(occupied)
        pt = 0
        while not (bitboards[pt] >> sq) & 1:
            pt += 1
        is_white = (white >> sq) & 1
        out[0, n] = feature_index(sq, pt, is_white, orient_w, base_w, slot_table)
        out[1, n] = feature_index(sq, pt, 1 - is_white, orient_b, base_b, slot_table)
        n += 1
    counts[0] = n
    counts[1] = n


@njit(cache=True)
def active_features_batch(bitboards, stm, slot_table, king_buckets, mirror, num_slots, pad, out, counts):
    """Active feature indices of many positions, side to move's perspective first (for training).

    Parameters
    ----------
    bitboards : int64[n, 8]
        Per position, the bitboards of :func:`active_features`.
    stm : uint8[n]
        Side to move: 0 White, 1 Black.
    slot_table, king_buckets, mirror, num_slots
        As in :func:`active_features`.
    pad : int
        Value written to unused entries (e.g. the number of features, an embedding's padding row).
    out : int16 or int32 [n, 2, 32]
        Output: row 0 the side to move's features, row 1 the other side's, then ``pad``.
    counts : int64[n]
        Output: number of pieces of each position (kings included).

    The caller guarantees exactly one king per side and at most 32 pieces per position.
    """
    tmp = np.empty((2, 32), np.int32)
    c = np.empty(2, np.int64)
    for i in range(bitboards.shape[0]):
        active_features(bitboards[i], slot_table, king_buckets, mirror, num_slots, tmp, c)
        for p in range(2):
            src = p ^ stm[i]
            for j in range(32):
                out[i, p, j] = tmp[src, j] if j < c[src] else pad
        counts[i] = c[0]

"""Bitboards of a position and their basic operations: the layout every chess kernel reads.

A position is ``bitboards`` int64[8]: pawns, knights, bishops, rooks, queens, kings (by piece
type, python-chess order), then White's and Black's pieces; bit ``s`` is square ``s`` (a1 = 0,
h8 = 63), h8 being the sign bit.  :func:`check_bitboards` says whether such a position can be
represented by a king-bucketed feature set (one king a side, no pawn on a back rank, ...).

Source: python-chess (``chess.BB_*``, square numbering), Stockfish 15.1 ``bitboard.h``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Index of each bitboard in the ``bitboards`` argument (python-chess order of piece types).
BB_PAWNS, BB_KNIGHTS, BB_BISHOPS, BB_ROOKS, BB_QUEENS, BB_KINGS, BB_WHITE, BB_BLACK = range(8)
#: Ranks 1 and 8, where no pawn may stand.
BACK_RANKS = 0xFF000000000000FF - (1 << 64)
#: Every square but h8 (bit 63, the sign bit of an int64 bitboard).
LOW_63 = 0x7FFFFFFFFFFFFFFF


@njit(cache=True, inline="always")
def popcount(b):
    """Number of set bits of an int64 bitboard (SWAR on the low 63 bits, plus the sign bit;
    no step overflows, so it also runs as plain Python/NumPy with ``NUMBA_DISABLE_JIT``)."""
    n = 0
    if b < 0:
        n = 1
        b &= LOW_63
    b = b - ((b >> 1) & 0x5555555555555555)
    b = (b & 0x3333333333333333) + ((b >> 2) & 0x3333333333333333)
    b = (b + (b >> 4)) & 0x0F0F0F0F0F0F0F0F
    b += b >> 8
    b += b >> 16
    b += b >> 32
    return n + (b & 0x7F)


@njit(cache=True, inline="always")
def lowest_square(b):
    """Square of the lowest set bit of a non-zero int64 bitboard (a1 = 0, h8 = 63)."""
    low = b & LOW_63
    if low == 0:
        return 63
    return popcount((low & -low) - 1)


@njit(cache=True, inline="always")
def without_lowest(b):
    """``b`` without its lowest set bit (``b & (b - 1)``, written so that nothing overflows)."""
    if b & LOW_63 == 0:
        return 0
    return b & (b - 1)


@njit(cache=True, inline="always")
def king_square(bitboards, perspective):
    """Square (0..63, a1 = 0) of ``perspective``'s king; -1 if there is none."""
    kings = bitboards[BB_KINGS] & bitboards[BB_WHITE + perspective]
    if kings == 0:
        return -1
    return lowest_square(kings)


#: Results of :func:`check_bitboards` (0: representable).
(POS_OK, POS_WHITE_KINGS, POS_BLACK_KINGS, POS_TOO_MANY_PIECES, POS_BACK_RANK_PAWN, POS_INCONSISTENT) = range(6)


@njit(cache=True, forceinline=True)
def check_bitboards(bitboards, max_pieces):
    """Whether a king-bucketed feature set can represent the position in ``bitboards``.

    ``bitboards`` is int64[8] (pawns, knights, bishops, rooks, queens, kings, white, black).
    Returns ``POS_OK`` or the first problem: bitboards that contradict each other (a square
    with two piece types or both colours, or a piece without colour), a side without exactly
    one king, more than ``max_pieces`` pieces, a pawn on the first or last rank.  The same
    rules as :func:`nnue_infer.features.check_position`.
    """
    pieces = np.int64(0)
    overlap = np.int64(0)
    for k in range(BB_KINGS + 1):
        overlap |= pieces & bitboards[k]
        pieces |= bitboards[k]
    white = bitboards[BB_WHITE]
    black = bitboards[BB_BLACK]
    if overlap != 0 or (white & black) != 0 or pieces != (white | black):
        return POS_INCONSISTENT
    kings = bitboards[BB_KINGS]
    if popcount(kings & white) != 1:
        return POS_WHITE_KINGS
    if popcount(kings & black) != 1:
        return POS_BLACK_KINGS
    if popcount(pieces) > max_pieces:
        return POS_TOO_MANY_PIECES
    if (bitboards[BB_PAWNS] & BACK_RANKS) != 0:
        return POS_BACK_RANK_PAWN
    return POS_OK




@njit(cache=True)
def check_bitboards_batch(bitboards, max_pieces, codes):
    """:func:`~nnue_infer.kernels.chess.bitboard.check_bitboards` of every row of ``bitboards``
    int64[n, 8] into ``codes`` int8[n]."""
    for i in range(bitboards.shape[0]):
        codes[i] = check_bitboards(bitboards[i], max_pieces)

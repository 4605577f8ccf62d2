"""Zobrist keys of chess positions, equal to python-chess's ``chess.polyglot.zobrist_hash``.

The 781 random numbers are Polyglot's (``chess.polyglot.POLYGLOT_RANDOM_ARRAY``): 768 for a piece
on a square (index ``64 * (2 * (piece_type - 1) + white) + square``), four castling flags (White
king side, White queen side, Black king side, Black queen side), eight en passant files and the
side to move (White).  As Polyglot and python-chess, the en passant file counts only when a pawn
of the side to move stands beside the pawn that just moved (whether the capture is legal does
not matter), and a side has a castling right on a side of its king when a rook of the cleaned
rights (``Board.clean_castling_rights()``) stands there on its back rank (python-chess's
``has_kingside_castling_rights``, which also covers Chess960).

Source: the Polyglot book format (http://hgm.nubati.net/book_format.html); python-chess 1.11
``chess/polyglot.py`` (``ZobristHasher``).
"""

from __future__ import annotations

import chess.polyglot
import numpy as np
from numba import njit

from ..chess.attacks import SQUARE_BB
from ..chess.bitboard import BB_KINGS, BB_PAWNS, BB_WHITE, lowest_square, without_lowest

#: Polyglot's 781 random numbers as int64 (the same bits).
KEYS = np.array(chess.polyglot.POLYGLOT_RANDOM_ARRAY[:781], np.uint64).view(np.int64)
#: Offsets into :data:`KEYS`.
CASTLING_KEYS, EP_KEYS, TURN_KEY = 768, 772, 780
#: Files a and h as bitboards (for the en passant neighbours).
FILE_A = np.int64(0x0101010101010101)
FILE_H = np.int64(FILE_A << np.int64(7))


@njit(cache=True)
def castling_key(bitboards, castling):
    """The castling part of the key: ``castling`` is ``Board.clean_castling_rights()`` (int64 bitboard)."""
    key = np.int64(0)
    for colour in range(2):
        back = np.int64(0xFF) if colour == 0 else np.int64(0xFF) << np.int64(56)
        king = bitboards[BB_KINGS] & bitboards[BB_WHITE + colour] & back
        if king == 0:
            continue
        k = lowest_square(king)
        rooks = castling & back
        king_side = False
        queen_side = False
        while rooks:
            r = lowest_square(rooks)
            rooks = without_lowest(rooks)
            if r > k:
                king_side = True
            elif r < k:
                queen_side = True
        if king_side:
            key ^= KEYS[CASTLING_KEYS + 2 * colour]
        if queen_side:
            key ^= KEYS[CASTLING_KEYS + 2 * colour + 1]
    return key


@njit(cache=True)
def ep_key(bitboards, stm, ep):
    """The en passant part of the key (``ep``: ``Board.ep_square``, 0 for none; ``stm`` 0 White)."""
    if ep == 0:
        return np.int64(0)
    below = ep - 8 if stm == 0 else ep + 8
    if below < 0 or below > 63:
        return np.int64(0)
    b = SQUARE_BB[below]
    beside = ((b & ~FILE_A) >> np.int64(1)) | ((b & ~FILE_H) << np.int64(1))  # never the sign bit: ranks 4 and 5
    if beside & bitboards[BB_PAWNS] & bitboards[BB_WHITE + stm]:
        return KEYS[EP_KEYS + (ep & 7)]
    return np.int64(0)


@njit(cache=True)
def piece_key(piece_type, white, square):
    """Key of one piece (``piece_type`` 0..5 = pawn .. king, ``white`` 1 or 0) on ``square``."""
    return KEYS[64 * (2 * piece_type + white) + square]


@njit(cache=True)
def position_key(bitboards, stm, castling, ep):
    """The Zobrist key (int64, the bits of ``chess.polyglot.zobrist_hash``) of a position.

    Parameters
    ----------
    bitboards : int64[8]
        :mod:`nnue_infer.kernels.chess.bitboard` layout (pawns .. kings, White's, Black's pieces).
    stm : int
        Side to move, 0 White, 1 Black.
    castling : int
        ``Board.clean_castling_rights()`` as an int64 bitboard.
    ep : int
        ``Board.ep_square``, 0 for none.
    """
    key = np.int64(0)
    for t in range(BB_PAWNS, BB_KINGS + 1):
        for colour in range(2):
            b = bitboards[t] & bitboards[BB_WHITE + colour]
            while b:
                key ^= piece_key(t, 1 - colour, lowest_square(b))
                b = without_lowest(b)
    key ^= castling_key(bitboards, castling)
    key ^= ep_key(bitboards, stm, ep)
    if stm == 0:
        key ^= KEYS[TURN_KEY]
    return key


@njit(cache=True)
def position_keys(rows, out):
    """:func:`position_key` of each row of ``rows`` int64[n, 11] (eight bitboards, side to move,
    castling rights, en passant square) into ``out`` int64[n]."""
    for i in range(rows.shape[0]):
        out[i] = position_key(rows[i, :8], rows[i, 8], rows[i, 9], rows[i, 10])

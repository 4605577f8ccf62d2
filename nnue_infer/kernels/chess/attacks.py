"""Attack sets from bitboards: pawn captures, knight and king steps, slider lines stopping at blockers.

Squares are a1 = 0 ... h8 = 63; bitboards are int64 (bit 63 = h8 is the sign bit, so every
shift uses the :data:`SQUARE_BB` table instead of ``1 << s``).  Slider attacks walk each line
until the first occupied square, which is included (no x-rays).

:func:`attackers` is the one answer to "which pieces of a side attack this square" (python-chess's
``Board.attackers_mask``); :data:`ROOK_RAYS` / :data:`BISHOP_RAYS` are the one table of a square's
lines on an empty board.

Source: the rules of chess; Stockfish ``src/bitboard.h`` (``attacks_bb``, ``pawn_attacks_bb``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .bitboard import BB_BISHOPS, BB_KINGS, BB_KNIGHTS, BB_PAWNS, BB_QUEENS, BB_ROOKS, BB_WHITE


def _square_bb() -> np.ndarray:
    out = np.zeros(64, np.uint64)
    for s in range(64):
        out[s] = np.uint64(1) << np.uint64(s)
    return out.view(np.int64)


def _leaper_table(steps: list[tuple[int, int]]) -> np.ndarray:
    out = np.zeros(64, np.uint64)
    for s in range(64):
        for df, dr in steps:
            f, r = s % 8 + df, s // 8 + dr
            if 0 <= f < 8 and 0 <= r < 8:
                out[s] |= np.uint64(1) << np.uint64(8 * r + f)
    return out.view(np.int64)


#: One bit per square, int64[64].
SQUARE_BB = _square_bb()
#: Knight attacks by square, int64[64].
KNIGHT_ATTACKS = _leaper_table([(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)])
#: King steps by square, int64[64].
KING_ATTACKS = _leaper_table([(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)])
#: Pawn capture squares by colour (0 White: one rank up, 1 Black: one rank down) and square, int64[2, 64].
PAWN_ATTACKS = np.stack([_leaper_table([(-1, 1), (1, 1)]), _leaper_table([(-1, -1), (1, -1)])])
#: Line directions (file step, rank step): the first four are the rook's, the last four the bishop's.
DIRECTIONS = np.array([(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1)], np.int64)


@njit(cache=True, inline="always")
def line_attacks(sq, occupied, first, last):
    """Squares attacked from ``sq`` along directions ``first .. last - 1`` of :data:`DIRECTIONS`
    (0..4 rook, 4..8 bishop, 0..8 queen), each line stopping at (and including) the first
    occupied square of ``occupied`` (int64 bitboard)."""
    att = np.int64(0)
    f0 = sq & 7
    r0 = sq >> 3
    for d in range(first, last):
        df = DIRECTIONS[d, 0]
        dr = DIRECTIONS[d, 1]
        f = f0 + df
        r = r0 + dr
        while 0 <= f < 8 and 0 <= r < 8:
            bit = SQUARE_BB[8 * r + f]
            att |= bit
            if occupied & bit:
                break
            f += df
            r += dr
    return att


@njit(cache=True, inline="always")
def piece_attacks(piece_type, colour, sq, occupied):
    """Squares a piece attacks (``piece_type`` 0..5 = P, N, B, R, Q, K; ``colour`` 0 White, 1 Black)
    on a board with ``occupied`` squares."""
    if piece_type == 0:
        return PAWN_ATTACKS[colour, sq]
    if piece_type == 1:
        return KNIGHT_ATTACKS[sq]
    if piece_type == 2:
        return line_attacks(sq, occupied, 4, 8)
    if piece_type == 3:
        return line_attacks(sq, occupied, 0, 4)
    if piece_type == 4:
        return line_attacks(sq, occupied, 0, 8)
    return KING_ATTACKS[sq]


@njit(cache=True, inline="always")
def piece_reach(bitboards, sq, occupied):
    """Squares attacked by the piece standing on ``sq`` (0 if none) of a position's ``bitboards``
    (int64[8], :mod:`nnue_infer.kernels.chess.bitboard` layout: pawns .. kings by type, then White's
    and Black's pieces), with ``occupied`` squares blocking the sliders: :func:`piece_attacks`
    of whatever piece is there."""
    bit = SQUARE_BB[sq]
    colour = 0 if bitboards[BB_WHITE] & bit else 1
    for piece_type in range(BB_PAWNS, BB_KINGS + 1):
        if bitboards[piece_type] & bit:
            return piece_attacks(piece_type, colour, sq, occupied)
    return np.int64(0)


def _empty_board_lines(first: int, last: int) -> np.ndarray:
    walk = getattr(line_attacks, "py_func", line_attacks)  # the Python function (a plain one under NUMBA_DISABLE_JIT)
    return np.array([walk(sq, np.int64(0), first, last) for sq in range(64)], np.int64)


#: Squares on a rook's / a bishop's lines through each square of an empty board (edge to edge), int64[64] each:
#: a slider off them cannot attack the square, nor a piece off both be pinned to a king there (no line walked to
#: know).  Their union is the queen's.
ROOK_RAYS, BISHOP_RAYS = _empty_board_lines(0, 4), _empty_board_lines(4, 8)


@njit(cache=True, inline="always")
def slider_attackers(bitboards, colour, sq, occupied):
    """Bishops, rooks and queens of ``colour`` (0 White, 1 Black) attacking square ``sq`` when ``occupied``
    (int64 bitboard) squares block the lines; ``bitboards`` int64[8] (:mod:`~nnue_infer.kernels.chess.bitboard`
    layout).  A line is walked only when a slider of the side stands on it (:data:`ROOK_RAYS`, :data:`BISHOP_RAYS`)."""
    them = bitboards[BB_WHITE + colour]
    found = np.int64(0)
    diagonal = (bitboards[BB_BISHOPS] | bitboards[BB_QUEENS]) & them & BISHOP_RAYS[sq]
    if diagonal:
        found |= line_attacks(sq, occupied, 4, 8) & diagonal
    straight = (bitboards[BB_ROOKS] | bitboards[BB_QUEENS]) & them & ROOK_RAYS[sq]
    if straight:
        found |= line_attacks(sq, occupied, 0, 4) & straight
    return found


@njit(cache=True)
def attackers(bitboards, colour, sq, occupied):
    """Pieces of ``colour`` (0 White, 1 Black) attacking square ``sq`` (0..63) when ``occupied`` (int64 bitboard)
    squares block the sliders: an int64 bitboard (python-chess's ``Board.attackers_mask(colour, sq)``, with
    the occupancy given).  ``bitboards`` int64[8] (:mod:`~nnue_infer.kernels.chess.bitboard` layout); the
    pieces themselves come from ``bitboards``, so a piece lifted off ``occupied`` still attacks."""
    them = bitboards[BB_WHITE + colour]
    found = PAWN_ATTACKS[1 - colour, sq] & bitboards[BB_PAWNS] & them
    found |= KNIGHT_ATTACKS[sq] & bitboards[BB_KNIGHTS] & them
    found |= KING_ATTACKS[sq] & bitboards[BB_KINGS] & them
    return found | slider_attackers(bitboards, colour, sq, occupied)

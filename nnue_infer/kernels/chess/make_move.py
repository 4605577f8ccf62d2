"""Moves of Stockfish's training data made on bitboards: the tools' ``CompressedMove`` (type in bits 14-15,
from square in bits 8-13, to square in bits 2-7, promoted piece in bits 0-1; castling is king takes own rook),
``Position::doMove`` with its castling-rights and en passant rules (an en passant square is kept only when a
capture is legal, ``Position::isEpPossible``), and each row's flags (in check, capture).

Source: Stockfish's ``tools`` branch, ``src/extra/nnue_data_binpack_format.h`` (chess::Position::doMove,
isEpPossible, CompressedMove).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .attacks import BISHOP_RAYS, PAWN_ATTACKS, ROOK_RAYS, SQUARE_BB, slider_attackers
from .bitboard import BB_KINGS, BB_PAWNS, BB_WHITE, lowest_square, without_lowest
from .notation import king_attacked


#: Move types of the ``move`` column (bits 14-15).
NORMAL, PROMOTION, CASTLE, EN_PASSANT = range(4)

#: Castling-right bits of the ``castling`` column.
WHITE_OO, WHITE_OOO, BLACK_OO, BLACK_OOO = 1, 2, 4, 8


def _preserved() -> np.ndarray:
    out = np.full(64, 15, np.int64)
    out[4], out[60] = 15 & ~3, 15 & ~12  # e1, e8
    out[7], out[0], out[63], out[56] = 15 & ~1, 15 & ~2, 15 & ~4, 15 & ~8  # h1, a1, h8, a8
    return out


#: Castling rights kept when a move touches each square, int64[64].
PRESERVED = _preserved()


@njit(cache=True, inline="always")
def type_at(bb, sq):
    """Piece type (0 pawn .. 5 king) on ``sq``, -1 if empty."""
    bit = SQUARE_BB[sq]
    for t in range(6):
        if bb[t] & bit:
            return t
    return -1


@njit(cache=True, inline="always")
def pawn_targets(bb, stm, frm, ep):
    """Destinations of the pawn on ``frm``: captures (incl. ``ep``), single and double pushes."""
    ours = bb[BB_WHITE + stm]
    occ = ours | bb[BB_WHITE + 1 - stm]
    targets = bb[BB_WHITE + 1 - stm]
    if ep >= 0:
        targets |= SQUARE_BB[ep]
    dest = PAWN_ATTACKS[stm, frm] & targets
    step = 8 if stm == 0 else -8
    fwd = frm + step
    if 0 <= fwd < 64 and not occ & SQUARE_BB[fwd]:
        dest |= SQUARE_BB[fwd]
        fwd2 = fwd + step
        if (frm >> 3) == (1 if stm == 0 else 6) and not occ & SQUARE_BB[fwd2]:
            dest |= SQUARE_BB[fwd2]
    return dest


@njit(cache=True)
def ep_possible(bb, ep, stm):
    """The tools' ``Position::isEpPossible``: can ``stm`` capture en passant on ``ep`` without
    leaving its king to a slider?  (Squares off the en passant rank count as impossible.)"""
    if (ep >> 3) != (5 if stm == 0 else 2):
        return False
    ours = bb[BB_WHITE + stm]
    attackers = PAWN_ATTACKS[1 - stm, ep] & bb[BB_PAWNS] & ours
    if attackers == 0:
        return False
    occ = bb[BB_WHITE] | bb[BB_WHITE + 1]
    fwd = 8 if stm == 0 else -8
    if occ & SQUARE_BB[ep] or occ & SQUARE_BB[ep + fwd]:
        return False
    if not (bb[BB_PAWNS] & bb[BB_WHITE + 1 - stm] & SQUARE_BB[ep - fwd]):
        return False
    kings = bb[BB_KINGS] & ours
    if kings == 0:
        return False
    ksq = lowest_square(kings)
    theirs = bb[BB_WHITE + 1 - stm]
    if ((bb[2] | bb[3] | bb[4]) & theirs & (ROOK_RAYS[ksq] | BISHOP_RAYS[ksq])) == 0:
        return True
    while attackers:
        sq = lowest_square(attackers)
        attackers = without_lowest(attackers)
        captured = (ep & 7) | (sq & 56)
        o = ((occ ^ SQUARE_BB[sq]) | SQUARE_BB[ep]) ^ SQUARE_BB[captured]
        if slider_attackers(bb, 1 - stm, ksq, o) == 0:
            return True
    return False


@njit(cache=True, inline="always")
def clear_square(bb, sq):
    """Remove whatever stands on ``sq``."""
    keep = ~SQUARE_BB[sq]
    for k in range(8):
        bb[k] &= keep


@njit(cache=True)
def do_move(bb, stm, castling, ep, rule50, move):
    """Play ``move`` for ``stm`` on ``bb`` (in place): the tools' ``Position::doMove``.

    Returns ``(castling, ep, rule50, ok)``; ``ok`` is False (board unchanged) when no piece
    stands on the from-square.  The side to move flips in the caller.
    """
    mtype = move >> 14
    frm = (move >> 8) & 63
    to = (move >> 2) & 63
    pt = type_at(bb, frm)
    if pt < 0:
        return castling, ep, rule50, False
    colour = 0 if bb[BB_WHITE] & SQUARE_BB[frm] else 1
    rule50 = (rule50 + 1) & 255
    if mtype != CASTLE and (pt == BB_PAWNS or type_at(bb, to) >= 0):
        rule50 = 0
    castling &= PRESERVED[frm] & PRESERVED[to]
    new_ep = -1
    if pt == BB_PAWNS and (to ^ frm) == 16:
        new_ep = (to + frm) >> 1
    t = SQUARE_BB[to]
    if mtype == CASTLE:
        long_side = (to & 7) != 7
        king_to = (2 if long_side else 6) + 56 * colour
        rook_to = (3 if long_side else 5) + 56 * colour
        clear_square(bb, frm)
        clear_square(bb, to)
        bb[BB_KINGS] |= SQUARE_BB[king_to]
        bb[3] |= SQUARE_BB[rook_to]
        bb[BB_WHITE + colour] |= SQUARE_BB[king_to] | SQUARE_BB[rook_to]
    else:
        if mtype == EN_PASSANT:
            clear_square(bb, (to & 7) | (frm & 56))
        clear_square(bb, to)
        clear_square(bb, frm)
        bb[(1 + (move & 3)) if mtype == PROMOTION else pt] |= t
        bb[BB_WHITE + colour] |= t
    stm = 1 - stm
    if new_ep >= 0 and not ep_possible(bb, new_ep, stm):
        new_ep = -1
    return castling, new_ep, rule50, True


@njit(cache=True, parallel=True)
def row_flags(bitboards, stm, move, in_check, capture):
    """Per row: is the side to move in check, and does its move capture (a rival piece on the
    to-square, castling excluded: the tools' ``TrainingDataEntry::isCapturingMove``, so en passant
    does not count)."""
    for i in prange(stm.shape[0]):
        s = np.int64(stm[i])
        in_check[i] = king_attacked(bitboards[i], s)
        m = np.int64(move[i])
        capture[i] = (m >> 14) != CASTLE and (bitboards[i, BB_WHITE + 1 - s] & SQUARE_BB[(m >> 2) & 63]) != 0

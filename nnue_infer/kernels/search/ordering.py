"""Move ordering: static exchange evaluation (SEE) and the capture order (most valuable victim,
least valuable attacker).

Source: the chessprogramming wiki, "Static Exchange Evaluation" (the swap algorithm, x-rays
through the pieces already exchanged; pins are ignored) and "MVV-LVA".
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..chess.attacks import KING_ATTACKS, KNIGHT_ATTACKS, PAWN_ATTACKS, SQUARE_BB, line_attacks
from ..chess.bitboard import BB_BISHOPS, BB_KINGS, BB_KNIGHTS, BB_PAWNS, BB_QUEENS, BB_ROOKS, BB_WHITE, lowest_square

#: Piece values for SEE and MVV-LVA by type (pawn .. king), in centipawns.
SEE_VALUES = np.array([100, 300, 300, 500, 900, 20000], np.int64)


@njit(cache=True, forceinline=True)
def piece_type_at(bitboards, sq):
    """Type index (0 pawn .. 5 king) of the piece on ``sq``, -1 for an empty square."""
    bit = SQUARE_BB[sq]
    for t in range(BB_PAWNS, BB_KINGS + 1):
        if bitboards[t] & bit:
            return t
    return -1


@njit(cache=True, forceinline=True)
def is_en_passant(bitboards, frm, to, ep):
    """Whether the move ``frm``-``to`` is an en passant capture (a pawn moving diagonally to ``ep``)."""
    if ep == 0 or to != ep or not (bitboards[BB_PAWNS] & SQUARE_BB[frm]):
        return False
    diff = to - frm
    return diff == 7 or diff == 9 or diff == -7 or diff == -9


@njit(cache=True, forceinline=True)
def captured_type(bitboards, stm, code, ep):
    """Type of the piece the move ``code`` of side ``stm`` captures (0..4), -1 for none (castling
    king-takes-rook is no capture)."""
    frm = code & 63
    to = (code >> 6) & 63
    if bitboards[BB_WHITE + 1 - stm] & SQUARE_BB[to]:
        return piece_type_at(bitboards, to)
    if is_en_passant(bitboards, frm, to, ep):
        return 0
    return -1


@njit(cache=True)
def all_attackers(bitboards, sq, occupied):
    """Pieces of both colours attacking ``sq`` with ``occupied`` squares blocking the sliders
    (pieces not in ``occupied`` are removed by the caller)."""
    queens = bitboards[BB_QUEENS]
    return ((KING_ATTACKS[sq] & bitboards[BB_KINGS]) | (KNIGHT_ATTACKS[sq] & bitboards[BB_KNIGHTS])
            | (line_attacks(sq, occupied, 0, 4) & (bitboards[BB_ROOKS] | queens))
            | (line_attacks(sq, occupied, 4, 8) & (bitboards[BB_BISHOPS] | queens))
            | (PAWN_ATTACKS[1, sq] & bitboards[BB_PAWNS] & bitboards[BB_WHITE])
            | (PAWN_ATTACKS[0, sq] & bitboards[BB_PAWNS] & bitboards[BB_WHITE + 1])) & occupied


@njit(cache=True)
def see_ge(bitboards, stm, code, ep, threshold):
    """Whether the static exchange evaluation of the move ``code`` of side ``stm`` is at least
    ``threshold`` (centipawns of :data:`SEE_VALUES`): both sides capture on the target square with
    their least valuable piece for as long as it pays (Stockfish 15.1 ``Position::see_ge``: the
    swap run as a parity game, without a gain list; castling counts 0)."""
    frm = code & 63
    to = (code >> 6) & 63
    promotion = code >> 12
    if bitboards[BB_WHITE + stm] & SQUARE_BB[to]:  # castling (king takes rook)
        return 0 >= threshold
    occupied = bitboards[BB_WHITE] | bitboards[BB_WHITE + 1]
    victim = captured_type(bitboards, stm, code, ep)
    swap = (SEE_VALUES[victim] if victim >= 0 else 0) - threshold
    mover = piece_type_at(bitboards, frm)
    if promotion:
        swap += SEE_VALUES[promotion - 1] - SEE_VALUES[0]
        mover = promotion - 1
    if swap < 0:
        return False
    swap = SEE_VALUES[mover] - swap
    if swap <= 0:
        return True
    if victim == 0 and not (occupied & SQUARE_BB[to]):  # en passant: the captured pawn leaves its square
        occupied &= ~SQUARE_BB[to - 8 if stm == 0 else to + 8]
    occupied = (occupied & ~SQUARE_BB[frm]) | SQUARE_BB[to]
    side = stm
    result = 1
    while True:
        side = 1 - side
        attackers = all_attackers(bitboards, to, occupied)
        mine = attackers & bitboards[BB_WHITE + side]
        if mine == 0:
            break
        result ^= 1
        kind = BB_KINGS
        for t in range(BB_PAWNS, BB_KINGS):
            if mine & bitboards[t]:
                kind = t
                break
        if kind == BB_KINGS:  # the king captures last, and only when the square is not defended
            return (result ^ (1 if attackers & bitboards[BB_WHITE + 1 - side] else 0)) != 0
        swap = SEE_VALUES[kind] - swap
        if swap < result:
            break
        occupied &= ~SQUARE_BB[lowest_square(mine & bitboards[kind])]
    return result != 0

"""Legal moves of a position from bitboards, in python-chess's ``Board.legal_moves`` order.

A position is what :mod:`nnue_infer.kernels.chess.bitboard` reads (``bitboards`` int64[8]: pawns,
knights, bishops, rooks, queens, kings, White's pieces, Black's pieces; a1 = bit 0) plus the
side to move (0 White, 1 Black), the castling rights as python-chess's
``Board.clean_castling_rights()`` (a bitboard of the rooks that may castle), the en passant
square as python-chess's ``Board.ep_square`` (0 for none: a1 is never one) and whether the
board is Chess960 (castling moves are then written king-takes-rook).  The caller guarantees
exactly one king per side and no promoted king (python-chess's ``Board.promoted``).

Moves are 16-bit codes: ``from | to << 6 | promotion << 12`` with python-chess's squares and
piece types (promotion 2..5 = knight .. queen, 0 for none); castling is ``e1g1`` in standard
chess and king-takes-rook in Chess960, as python-chess writes it.

The generator follows python-chess 1.11's ``Board.generate_legal_moves`` step by step (pieces
from the highest square down, castling, pawn captures, pushes, double pushes, en passant; in
check the king's evasions first, then captures and blocks of a single checker; each candidate
kept when ``Board._is_safe``), so the order is python-chess's, including its reading of odd
positions (an en passant square that no double push made).  :func:`play` makes the position
after a move as ``Board.push`` does.

Source: python-chess 1.11 ``chess/__init__.py`` (``generate_legal_moves``, ``_generate_evasions``,
``generate_pseudo_legal_moves``, ``generate_castling_moves``, ``_is_safe``, ``_ep_skewered``,
``pin_mask``, ``_slider_blockers``, ``push``, ``_to_chess960`` / ``_from_chess960``); the rules of chess.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .attacks import KING_ATTACKS, KNIGHT_ATTACKS, PAWN_ATTACKS, SQUARE_BB, attackers, line_attacks as _line_attacks
from .bitboard import (BB_BISHOPS, BB_KINGS, BB_KNIGHTS, BB_PAWNS, BB_QUEENS, BB_ROOKS, BB_WHITE, king_square,
                       lowest_square, popcount, without_lowest)

#: The size of a move buffer: the most legal moves of any position the kernels accept (one king a side,
#: at most 32 pieces, any material), not only of chess positions (218): the side to move has at most 30
#: other pieces, each with at most 27 moves (a queen's), and the king 8 plus 2 castlings: 820, rounded
#: up.  (256 held every legal game's position, but "BQQQQQBk/Q5RB/Q6Q/Q6Q/Q6Q/Q6Q/Q6Q/KQQQQQQQ w" has 271.)
MAX_MOVES = 1024
#: Every square.
ALL = -1
#: Move kinds for :func:`is_safe`.
NORMAL, CASTLING, EN_PASSANT = range(3)
#: Squares of python-chess's castling notation (e1, g1, c1, h1, a1 and rank 8's).
E1, C1, G1, A1, H1 = 4, 2, 6, 0, 7


def _line_tables() -> tuple[np.ndarray, np.ndarray]:
    """``RAYS[a, b]``: the whole line (edge to edge) through squares ``a`` and ``b`` if they share a
    rank, file or diagonal, else 0 (python-chess's ``ray``); ``BETWEEN[a, b]``: the squares strictly
    between them on it (``between``).  Both int64[64, 64]."""
    rays = np.zeros((64, 64), np.uint64)
    between = np.zeros((64, 64), np.uint64)
    for a in range(64):
        fa, ra = a % 8, a // 8
        for df, dr in ((1, 0), (0, 1), (1, 1), (1, -1), (-1, 0), (0, -1), (-1, -1), (-1, 1)):
            line = np.uint64(1) << np.uint64(a)
            for sign in (1, -1):
                f, r = fa + sign * df, ra + sign * dr
                while 0 <= f < 8 and 0 <= r < 8:
                    line |= np.uint64(1) << np.uint64(8 * r + f)
                    f, r = f + sign * df, r + sign * dr
            f, r = fa + df, ra + dr
            inner = np.uint64(0)
            while 0 <= f < 8 and 0 <= r < 8:
                b = 8 * r + f
                rays[a, b] = line
                between[a, b] = inner
                inner |= np.uint64(1) << np.uint64(b)
                f, r = f + df, r + dr
    return rays.view(np.int64), between.view(np.int64)


#: int64[64, 64] each, see :func:`_line_tables`.
RAYS, BETWEEN = _line_tables()
#: Ranks as bitboards, int64[8].
RANKS = (np.uint64(0xFF) << (np.arange(8, dtype=np.uint64) * np.uint64(8))).view(np.int64)


@njit(cache=True)
def line_attacks(sq, occupied, first, last):
    """:func:`~nnue_infer.kernels.chess.attacks.line_attacks` as one compiled function (called, not inlined:
    the generator uses it in many places, and each inlined copy costs compile time)."""
    return _line_attacks(sq, occupied, first, last)


@njit(cache=True, inline="always")
def highest_square(b):
    """Square of the highest set bit of a non-zero int64 bitboard (python-chess's ``msb``)."""
    if b < 0:
        return 63
    b |= b >> 1
    b |= b >> 2
    b |= b >> 4
    b |= b >> 8
    b |= b >> 16
    b |= b >> 32
    return popcount(b) - 1


@njit(cache=True)
def slider_blockers(bitboards, stm, king, occupied):
    """The side to move's pieces that alone stand between its king and a rival slider (``_slider_blockers``)."""
    queens = bitboards[BB_QUEENS]
    snipers = ((line_attacks(king, np.int64(0), 0, 4) & (bitboards[BB_ROOKS] | queens))
               | (line_attacks(king, np.int64(0), 4, 8) & (bitboards[BB_BISHOPS] | queens))) & bitboards[BB_WHITE + 1 - stm]
    blockers = np.int64(0)
    while snipers:
        b = BETWEEN[king, lowest_square(snipers)] & occupied
        snipers = without_lowest(snipers)
        if b != 0 and without_lowest(b) == 0:
            blockers |= b
    return blockers & bitboards[BB_WHITE + stm]


@njit(cache=True)
def pin_mask(bitboards, stm, king, sq, occupied):
    """The line a piece of the side to move on ``sq`` is pinned along, or every square (``pin_mask``)."""
    sq_bb = SQUARE_BB[sq]
    queens = bitboards[BB_QUEENS]
    rooks = bitboards[BB_ROOKS] | queens
    for first, last, sliders in ((2, 4, rooks), (0, 2, rooks), (4, 8, bitboards[BB_BISHOPS] | queens)):
        rays = line_attacks(king, np.int64(0), first, last)  # file, rank, diagonals on an empty board
        if rays & sq_bb:
            snipers = rays & sliders & bitboards[BB_WHITE + 1 - stm]
            while snipers:
                sniper = highest_square(snipers)
                snipers &= ~SQUARE_BB[sniper]
                if BETWEEN[sniper, king] & (occupied | sq_bb) == sq_bb:
                    return RAYS[king, sniper]
            break
    return np.int64(ALL)


@njit(cache=True)
def ep_skewered(bitboards, stm, king, capturer, ep, occupied):
    """Whether an en passant capture by ``capturer`` would open a rank or diagonal onto the king (``_ep_skewered``)."""
    last_double = ep - 8 if stm == 0 else ep + 8
    occupancy = (occupied & ~SQUARE_BB[last_double] & ~SQUARE_BB[capturer]) | SQUARE_BB[ep]
    them = bitboards[BB_WHITE + 1 - stm]
    queens = bitboards[BB_QUEENS]
    if line_attacks(king, occupancy, 0, 2) & them & (bitboards[BB_ROOKS] | queens):
        return True
    return (line_attacks(king, occupancy, 4, 8) & them & (bitboards[BB_BISHOPS] | queens)) != 0


@njit(cache=True)
def is_safe(bitboards, stm, king, blockers, frm, to, kind, ep, occupied):
    """Whether a pseudo-legal move leaves the king safe (python-chess's ``_is_safe``)."""
    if frm == king:
        return kind == CASTLING or attackers(bitboards, 1 - stm, to, occupied) == 0
    if kind == EN_PASSANT:
        return (pin_mask(bitboards, stm, king, frm, occupied) & SQUARE_BB[to]) != 0 and not ep_skewered(
            bitboards, stm, king, frm, ep, occupied)
    return (blockers & SQUARE_BB[frm]) == 0 or (RAYS[frm, to] & SQUARE_BB[king]) != 0


@njit(cache=True, inline="always")
def put(out, n, frm, to, promotion):
    """Write one move code at ``out[n]``; returns ``n + 1``."""
    out[n] = frm | (to << 6) | (promotion << 12)
    return n + 1


@njit(cache=True, inline="always")
def put_safe(bitboards, stm, king, blockers, frm, to, kind, ep, occupied, out, n):
    """:func:`put` the move if :func:`is_safe`; returns the new count.  Inlined: most moves are
    of a piece that is neither the king nor a blocker, safe without the call to :func:`is_safe`."""
    if (frm != king and kind == NORMAL and (blockers & SQUARE_BB[frm]) == 0) or is_safe(
            bitboards, stm, king, blockers, frm, to, kind, ep, occupied):
        return put(out, n, frm, to, 0)
    return n


@njit(cache=True)
def put_pawn(bitboards, stm, king, blockers, frm, to, ep, occupied, out, n):
    """A safe pawn move, as four promotions (queen, rook, bishop, knight) onto the first or last rank."""
    if (blockers & SQUARE_BB[frm]) != 0 and not is_safe(bitboards, stm, king, blockers, frm, to, NORMAL, ep,
                                                          occupied):
        return n
    if to < 8 or to >= 56:
        for promotion in range(5, 1, -1):
            n = put(out, n, frm, to, promotion)
        return n
    return put(out, n, frm, to, 0)


@njit(cache=True)
def pseudo_ep(bitboards, stm, king, blockers, ep, from_mask, to_mask, occupied, out, n):
    """Safe en passant captures onto ``ep`` (``generate_pseudo_legal_ep``)."""
    if ep == 0 or (SQUARE_BB[ep] & to_mask) == 0 or (SQUARE_BB[ep] & occupied) != 0:
        return n
    capturers = (bitboards[BB_PAWNS] & bitboards[BB_WHITE + stm] & from_mask & PAWN_ATTACKS[1 - stm, ep]
                 & RANKS[4 if stm == 0 else 3])
    while capturers:
        frm = highest_square(capturers)
        capturers &= ~SQUARE_BB[frm]
        n = put_safe(bitboards, stm, king, blockers, frm, ep, EN_PASSANT, ep, occupied, out, n)
    return n


@njit(cache=True)
def attacked_for_king(bitboards, stm, path, occupied):
    """Whether a rival piece attacks any square of ``path`` with ``occupied`` blocking (``_attacked_for_king``)."""
    while path:
        if attackers(bitboards, 1 - stm, lowest_square(path), occupied) != 0:
            return True
        path = without_lowest(path)
    return False


@njit(cache=True)
def castling_moves(bitboards, stm, castling, chess960, occupied, out, n):
    """Castling moves (``generate_castling_moves``; always safe), written as python-chess does."""
    backrank = RANKS[0] if stm == 0 else RANKS[7]
    king_bb = bitboards[BB_WHITE + stm] & bitboards[BB_KINGS] & backrank
    if king_bb == 0:
        return n
    king = lowest_square(king_bb)
    king_bb = SQUARE_BB[king]
    base = 0 if stm == 0 else 56
    candidates = castling & backrank
    while candidates:
        candidate = highest_square(candidates)
        candidates &= ~SQUARE_BB[candidate]
        rook = SQUARE_BB[candidate]
        a_side = candidate < king
        king_to = base + (2 if a_side else 6)
        rook_to = base + (3 if a_side else 5)
        king_path = BETWEEN[king, king_to]
        rook_path = BETWEEN[candidate, rook_to]
        if ((occupied ^ king_bb ^ rook) & (king_path | rook_path | SQUARE_BB[king_to] | SQUARE_BB[rook_to])) != 0:
            continue
        if attacked_for_king(bitboards, stm, king_path | king_bb, occupied ^ king_bb):
            continue
        if attacked_for_king(bitboards, stm, SQUARE_BB[king_to],
                             occupied ^ king_bb ^ rook ^ SQUARE_BB[rook_to]):
            continue
        to = candidate
        if not chess960 and king == base + E1 and (bitboards[BB_KINGS] & SQUARE_BB[king]) != 0:
            if candidate == base + H1:
                to = base + G1
            elif candidate == base + A1:
                to = base + C1
        n = put(out, n, king, to, 0)
    return n


@njit(cache=True)
def pseudo_moves(bitboards, stm, king, blockers, castling, ep, chess960, from_mask, to_mask, out, n):
    """Safe moves among python-chess's pseudo-legal ones from ``from_mask`` to ``to_mask``
    (``generate_pseudo_legal_moves`` filtered by ``_is_safe``), appended at ``out[n]``; returns the count."""
    us = bitboards[BB_WHITE + stm]
    them = bitboards[BB_WHITE + 1 - stm]
    occupied = us | them
    pieces = us & ~bitboards[BB_PAWNS] & from_mask
    while pieces:
        frm = highest_square(pieces)
        pieces &= ~SQUARE_BB[frm]
        bit = SQUARE_BB[frm]
        if bitboards[BB_KNIGHTS] & bit:
            targets = KNIGHT_ATTACKS[frm]
        elif bitboards[BB_KINGS] & bit:
            targets = KING_ATTACKS[frm]
        else:
            targets = np.int64(0)
            if (bitboards[BB_BISHOPS] | bitboards[BB_QUEENS]) & bit:
                targets = line_attacks(frm, occupied, 4, 8)
            if (bitboards[BB_ROOKS] | bitboards[BB_QUEENS]) & bit:
                targets |= line_attacks(frm, occupied, 0, 4)
        targets &= ~us & to_mask
        while targets:
            to = highest_square(targets)
            targets &= ~SQUARE_BB[to]
            n = put_safe(bitboards, stm, king, blockers, frm, to, NORMAL, ep, occupied, out, n)
    if from_mask & bitboards[BB_KINGS]:
        n = castling_moves(bitboards, stm, castling, chess960, occupied, out, n)
    pawns = bitboards[BB_PAWNS] & us & from_mask
    if pawns == 0:
        return n
    capturers = pawns
    while capturers:
        frm = highest_square(capturers)
        capturers &= ~SQUARE_BB[frm]
        targets = PAWN_ATTACKS[stm, frm] & them & to_mask
        while targets:
            to = highest_square(targets)
            targets &= ~SQUARE_BB[to]
            n = put_pawn(bitboards, stm, king, blockers, frm, to, ep, occupied, out, n)
    if stm == 0:
        single = (pawns << 8) & ~occupied
        double = (single << 8) & ~occupied & (RANKS[2] | RANKS[3])
        step = -8
    else:
        single = (pawns >> 8) & ~occupied & ~RANKS[7]  # (arithmetic shift: no pawn stands on h8)
        double = (single >> 8) & ~occupied & (RANKS[5] | RANKS[4])
        step = 8
    single &= to_mask
    double &= to_mask
    while single:
        to = highest_square(single)
        single &= ~SQUARE_BB[to]
        n = put_pawn(bitboards, stm, king, blockers, to + step, to, ep, occupied, out, n)
    while double:
        to = highest_square(double)
        double &= ~SQUARE_BB[to]
        n = put_safe(bitboards, stm, king, blockers, to + 2 * step, to, NORMAL, ep, occupied, out, n)
    if ep != 0:
        n = pseudo_ep(bitboards, stm, king, blockers, ep, from_mask, to_mask, occupied, out, n)
    return n


@njit(cache=True)
def legal_moves(bitboards, stm, castling, ep, chess960, out):
    """Write the legal moves of a position to ``out`` (uint16[>= MAX_MOVES]) in ``Board.legal_moves`` order.

    Parameters
    ----------
    bitboards : int64[8]
        The position (see the module docstring): exactly one king per side.
    stm : int
        Side to move, 0 White, 1 Black.
    castling : int
        ``Board.clean_castling_rights()`` as an int64 bitboard.
    ep : int
        ``Board.ep_square``, 0 for none.
    chess960 : bool
        ``Board.chess960``: castling as king-takes-rook.
    out : uint16[>= MAX_MOVES]
        Output: move codes (see the module docstring).

    Returns
    -------
    int
        The number of legal moves.
    """
    occupied = bitboards[BB_WHITE] | bitboards[BB_WHITE + 1]
    king = king_square(bitboards, stm)
    blockers = slider_blockers(bitboards, stm, king, occupied)
    checkers = attackers(bitboards, 1 - stm, king, occupied)
    if checkers == 0:
        return pseudo_moves(bitboards, stm, king, blockers, castling, ep, chess960, ALL, ALL, out, 0)
    sliders = checkers & (bitboards[BB_BISHOPS] | bitboards[BB_ROOKS] | bitboards[BB_QUEENS])
    attacked = np.int64(0)
    while sliders:
        checker = lowest_square(sliders)
        sliders = without_lowest(sliders)
        attacked |= RAYS[king, checker] & ~SQUARE_BB[checker]
    targets = KING_ATTACKS[king] & ~bitboards[BB_WHITE + stm] & ~attacked
    n = 0
    while targets:
        to = highest_square(targets)
        targets &= ~SQUARE_BB[to]
        n = put_safe(bitboards, stm, king, blockers, king, to, NORMAL, ep, occupied, out, n)
    checker = highest_square(checkers)
    if SQUARE_BB[checker] == checkers:
        target = BETWEEN[king, checker] | checkers
        n = pseudo_moves(bitboards, stm, king, blockers, castling, ep, chess960, ~bitboards[BB_KINGS], target, out, n)
        if ep != 0 and (SQUARE_BB[ep] & target) == 0:
            if (ep - 8 if stm == 0 else ep + 8) == checker:
                n = pseudo_ep(bitboards, stm, king, blockers, ep, ALL, ALL, occupied, out, n)
    return n


@njit(cache=True, inline="always")
def remove_at(bitboards, sq):
    """Clear square ``sq`` in every bitboard; returns the piece type index (0..5) that stood there, -1 if none."""
    bit = SQUARE_BB[sq]
    kind = -1
    for k in range(6):
        if bitboards[k] & bit:
            kind = k
    for k in range(8):
        bitboards[k] &= ~bit
    return kind


@njit(cache=True, inline="always")
def put_piece(bitboards, sq, kind, colour):
    """Put a piece (type index 0..5, colour 0 White) on an empty square."""
    bitboards[kind] |= SQUARE_BB[sq]
    bitboards[BB_WHITE + colour] |= SQUARE_BB[sq]


@njit(cache=True, inline="always")
def to_chess960(bitboards, code):
    """Castling written king-to-target (``e1g1``) as king-takes-rook (``e1h1``), other moves unchanged
    (python-chess's ``_to_chess960``)."""
    frm = code & 63
    to = (code >> 6) & 63
    kings = bitboards[BB_KINGS]
    rooks = bitboards[BB_ROOKS]
    for base in (0, 56):
        if frm == base + E1 and kings & SQUARE_BB[base + E1]:
            if to == base + G1 and not rooks & SQUARE_BB[base + G1]:
                return frm | ((base + H1) << 6)
            if to == base + C1 and not rooks & SQUARE_BB[base + C1]:
                return frm | ((base + A1) << 6)
    return code


@njit(cache=True)
def play(bitboards, stm, code, ep, out):
    """The bitboards after a pseudo-legal move ``code`` (as python-chess's ``Board.push``) into ``out`` int64[8].

    ``stm`` (0 White) is the mover, ``ep`` the en passant square before the move (0 for none).
    """
    for k in range(8):
        out[k] = bitboards[k]
    code = to_chess960(bitboards, code)
    frm = code & 63
    to = (code >> 6) & 63
    promotion = code >> 12
    kind = remove_at(out, frm)
    if kind == 0:
        diff = to - frm
        if to == ep and (diff == 7 or diff == 9 or diff == -7 or diff == -9) and not (
                (out[BB_WHITE] | out[BB_WHITE + 1]) & SQUARE_BB[to]):
            remove_at(out, ep - 8 if stm == 0 else ep + 8)
    if promotion:
        kind = promotion - 1
    if kind == 5 and out[BB_WHITE + stm] & SQUARE_BB[to]:  # castling: the king takes its own rook
        remove_at(out, to)
        base = 0 if stm == 0 else 56
        a_side = (to & 7) < (frm & 7)
        put_piece(out, base + (2 if a_side else 6), 5, stm)
        put_piece(out, base + (3 if a_side else 5), 3, stm)
    else:
        remove_at(out, to)
        put_piece(out, to, kind, stm)

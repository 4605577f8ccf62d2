"""Check, and a sound filter for "neither checkmate nor stalemate", from bitboards in bulk.

Stockfish prints no NNUE evaluation when the side to move is in check, and a network's number
for a finished game means nothing; the file mode flags such rows.  Only attack arithmetic
runs here (:mod:`nnue_infer.kernels.attacks`): rows this filter cannot clear get their legal
moves counted by :func:`legal_move_counts` (python-chess's rules, compiled in
:mod:`nnue_infer.kernels.movegen`), or, where castling could matter, go to python-chess's
``Board.is_checkmate`` / ``is_stalemate`` (:func:`nnue_infer.io.score.outcome_code`).

The filter is sound (it never clears a mate or a stalemate).  A position is cleared when

* the king has a step to a square that holds no own piece and that no enemy piece attacks
  with the king lifted off the board (so a slider sees through the king's square): that step
  is legal; or
* the side to move is not in check and some piece other than the king that stands on no line
  (rank, file, diagonal) through its own king has a move: a pawn push to an empty square, a
  pawn capture of an enemy piece, or a knight/slider move to a square without an own piece.
  Such a piece cannot be pinned, so, not in check, its move is legal (e.p. captures and
  castling are left to python-chess); or
* the side to move is in check by one piece, and such an unpinnable piece can capture the
  checker or step onto a square between it and the king.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .attacks import KING_ATTACKS, KNIGHT_ATTACKS, PAWN_ATTACKS, SQUARE_BB, line_attacks, piece_reach
from .features import BB_BISHOPS, BB_KINGS, BB_KNIGHTS, BB_PAWNS, BB_QUEENS, BB_ROOKS, BB_WHITE, lowest_square, \
    without_lowest
from .movegen import MAX_MOVES, legal_moves

#: ``status`` results: in check or not, and whether the filter cleared the position.
NOT_CLEARED, CLEARED = 0, 1
#: Every square (``targets`` of :func:`_free_piece_reaches` asking for any move).
ALL_SQUARES = -1


@njit(cache=True)
def attackers(bitboards, sq, by, occupied):
    """Pieces of side ``by`` (0 White, 1 Black) attacking square ``sq`` with ``occupied`` squares (int64)."""
    them = bitboards[BB_WHITE + by]
    diagonal = (bitboards[BB_BISHOPS] | bitboards[BB_QUEENS]) & them
    straight = (bitboards[BB_ROOKS] | bitboards[BB_QUEENS]) & them
    found = PAWN_ATTACKS[1 - by, sq] & bitboards[BB_PAWNS] & them
    found |= KNIGHT_ATTACKS[sq] & bitboards[BB_KNIGHTS] & them
    found |= KING_ATTACKS[sq] & bitboards[BB_KINGS] & them
    if diagonal:
        found |= line_attacks(sq, occupied, 4, 8) & diagonal
    if straight:
        found |= line_attacks(sq, occupied, 0, 4) & straight
    return found


@njit(cache=True)
def _free_piece_reaches(bitboards, stm, king, occupied, targets):
    """Whether a piece of ``stm`` off every line through its king (hence unpinnable) can move onto
    a square of ``targets`` (enemy pieces to capture, empty squares to step on; -1: any move)."""
    own = bitboards[BB_WHITE + stm]
    enemy = bitboards[BB_WHITE + 1 - stm]
    free = own & ~line_attacks(king, 0, 0, 8) & ~bitboards[BB_KINGS]
    pawns = free & bitboards[BB_PAWNS]
    while pawns:
        sq = lowest_square(pawns)
        pawns = without_lowest(pawns)
        if PAWN_ATTACKS[stm, sq] & enemy & targets:
            return True
        one = sq + 8 if stm == 0 else sq - 8
        if (occupied & SQUARE_BB[one]) == 0:
            if SQUARE_BB[one] & targets:
                return True
            two = one + 8 if stm == 0 else one - 8
            if (sq >> 3) == (1 if stm == 0 else 6) and (occupied & SQUARE_BB[two]) == 0 and SQUARE_BB[two] & targets:
                return True
    others = free & ~bitboards[BB_PAWNS]
    while others:
        sq = lowest_square(others)
        others = without_lowest(others)
        if piece_reach(bitboards, sq, occupied) & targets & ~own:
            return True
    return False


@njit(cache=True)
def _between(king, checker, occupied):
    """The (empty) squares strictly between ``king`` and a slider ``checker`` on one line; 0 if none."""
    for d in range(8):
        ray = line_attacks(king, occupied, d, d + 1)
        if ray & SQUARE_BB[checker]:
            return ray & ~SQUARE_BB[checker]
    return 0


@njit(cache=True)
def position_status(bitboards, stm):
    """``(in_check, cleared)`` of one position with one king per side (``bitboards`` int64[8], ``stm`` 0/1).

    ``cleared`` is :data:`CLEARED` when the filter proves the position is neither checkmate nor
    stalemate, else :data:`NOT_CLEARED` (python-chess decides).
    """
    own = bitboards[BB_WHITE + stm]
    occupied = bitboards[BB_WHITE] | bitboards[BB_WHITE + 1]
    king = lowest_square(bitboards[BB_KINGS] & own)
    check = attackers(bitboards, king, 1 - stm, occupied) != 0
    lifted = occupied & ~SQUARE_BB[king]
    steps = KING_ATTACKS[king] & ~own
    while steps:
        to = lowest_square(steps)
        steps = without_lowest(steps)
        if attackers(bitboards, to, 1 - stm, lifted) == 0:
            return check, CLEARED
    if not check:
        if _free_piece_reaches(bitboards, stm, king, occupied, ALL_SQUARES):
            return check, CLEARED
        return check, NOT_CLEARED
    checkers = attackers(bitboards, king, 1 - stm, occupied)
    if without_lowest(checkers) == 0:  # one checker: capture it or block its line with an unpinnable piece
        checker = lowest_square(checkers)
        if _free_piece_reaches(bitboards, stm, king, occupied, checkers | _between(king, checker, occupied)):
            return check, CLEARED
    return check, NOT_CLEARED


@njit(parallel=True, cache=True)
def status_batch(bitboards, stm, valid, in_check, cleared):
    """:func:`position_status` of ``n`` positions (``bitboards`` int64[n, 8], ``stm`` uint8[n]) on all cores.

    Rows with ``valid[i]`` false (unparsed or unrepresentable) get ``in_check`` false and
    ``cleared`` :data:`NOT_CLEARED`.  Fills ``in_check`` bool[n] and ``cleared`` uint8[n].
    """
    n = bitboards.shape[0]
    n_chunks = max(1, min(n, 64))
    for c in prange(n_chunks):
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            if valid[i]:
                in_check[i], cleared[i] = position_status(bitboards[i], stm[i])
            else:
                in_check[i], cleared[i] = False, NOT_CLEARED



@njit(cache=True)
def _field(buf, start, end, k):
    """Byte range ``(first, last)`` of the ``k``-th (0-based) white-space separated field of ``buf[start:end]``,
    ``(-1, -1)`` when the text has fewer fields."""
    pos = start
    field = 0
    while True:
        while pos < end and (buf[pos] == 32 or 9 <= buf[pos] <= 13):
            pos += 1
        if pos >= end:
            return -1, -1
        first = pos
        while pos < end and not (buf[pos] == 32 or 9 <= buf[pos] <= 13):
            pos += 1
        if field == k:
            return first, pos
        field += 1


@njit(cache=True)
def legal_move_counts(buf, offsets, rows, bitboards, stm, in_check, counts):
    """Legal moves of the positions ``rows`` (int64[m]) of parsed FENs (``buf`` / ``offsets`` as
    :func:`nnue_infer.kernels.fen.parse_fens` reads them, ``bitboards`` int64[n, 8], ``stm`` uint8[n],
    ``in_check`` bool[n]), for the checkmate / stalemate verdict of the rows :func:`status_batch` did not clear.

    Fills ``counts`` int64[m]: the number of legal moves (:func:`nnue_infer.kernels.movegen.legal_moves`
    with the FEN's en passant square), or -1 when castling could matter (not in check and a
    castling field other than ``-``): the caller asks python-chess then.  Each row must hold
    exactly one king per side (rows the network evaluated do).
    """
    moves = np.empty(MAX_MOVES, np.uint16)
    for j in range(rows.shape[0]):
        i = rows[j]
        start, end = offsets[i], offsets[i + 1]
        if not in_check[i]:
            first, last = _field(buf, start, end, 2)
            if first >= 0 and not (last - first == 1 and buf[first] == 45):  # '-'
                counts[j] = -1
                continue
        ep = 0
        first, last = _field(buf, start, end, 3)
        if first >= 0 and last - first == 2:  # parse_fen checked the square's form
            ep = (buf[first] - 97) + 8 * (buf[first + 1] - 49)
        counts[j] = legal_moves(bitboards[i], stm[i], 0, ep, False, moves)

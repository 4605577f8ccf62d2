"""Check, and a sound filter for "neither checkmate nor stalemate", from bitboards in bulk.

Stockfish prints no NNUE evaluation when the side to move is in check, and a network's number
for a finished game means nothing; the file mode flags such rows.  Only attack arithmetic
runs here (:mod:`nnue_infer.kernels.chess.attacks`): rows this filter cannot clear get their legal
moves counted (python-chess's rules, compiled in :mod:`nnue_infer.kernels.chess.movegen`), or, where
castling could matter, go to python-chess's ``Board.is_checkmate`` / ``is_stalemate``
(:func:`nnue_infer.io.score.outcome_code`).  :func:`parse_fens_status` does it all in the pass
that parses the FENs (one walk over the rows, the bitboards still in cache).

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

from .attacks import (BISHOP_RAYS, KING_ATTACKS, KNIGHT_ATTACKS, PAWN_ATTACKS, ROOK_RAYS, SQUARE_BB, attackers,
                      line_attacks, piece_reach)
from .bitboard import BB_KINGS, BB_KNIGHTS, BB_PAWNS, BB_WHITE, POS_OK, check_bitboards, lowest_square, without_lowest
from .fen import FEN_OK, parse_fen
from .movegen import MAX_MOVES, legal_moves

#: ``status`` results: in check or not, and whether the filter cleared the position.
NOT_CLEARED, CLEARED = 0, 1
#: :func:`parse_fens_status`' ``outcome`` codes (``nnue_infer.io.score.OUTCOMES`` by index); ``OUTCOME_ASK``:
#: castling could matter, python-chess decides.
OUTCOME_NONE, OUTCOME_CHECKMATE, OUTCOME_STALEMATE, OUTCOME_ASK = 0, 1, 2, -1
#: Every square (``targets`` of :func:`_free_piece_reaches` asking for any move).
ALL_SQUARES = -1


@njit(cache=True)
def _free_piece_reaches(bitboards, stm, king, occupied, targets):
    """Whether a piece of ``stm`` off every line through its king (hence unpinnable) can move onto
    a square of ``targets`` (enemy pieces to capture, empty squares to step on; -1: any move)."""
    own = bitboards[BB_WHITE + stm]
    enemy = bitboards[BB_WHITE + 1 - stm]
    free = own & ~(ROOK_RAYS[king] | BISHOP_RAYS[king]) & ~bitboards[BB_KINGS]
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
    knights = free & bitboards[BB_KNIGHTS]
    while knights:  # a table lookup each, before the sliders' lines are walked
        sq = lowest_square(knights)
        knights = without_lowest(knights)
        if KNIGHT_ATTACKS[sq] & targets & ~own:
            return True
    others = free & ~bitboards[BB_PAWNS] & ~bitboards[BB_KNIGHTS]
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
    checkers = attackers(bitboards, 1 - stm, king, occupied)
    check = checkers != 0
    # the cheapest proof first (each rule alone proves a legal move, so their order changes no result): not in
    # check, an unpinnable pawn or knight that moves is found with a few table lookups (most positions)
    if not check and _free_piece_reaches(bitboards, stm, king, occupied, ALL_SQUARES):
        return check, CLEARED
    lifted = occupied & ~SQUARE_BB[king]
    steps = KING_ATTACKS[king] & ~own
    while steps:
        to = lowest_square(steps)
        steps = without_lowest(steps)
        if attackers(bitboards, 1 - stm, to, lifted) == 0:
            return check, CLEARED
    if check and without_lowest(checkers) == 0:  # one checker: capture it or block its line with an unpinnable piece
        checker = lowest_square(checkers)
        if _free_piece_reaches(bitboards, stm, king, occupied, checkers | _between(king, checker, occupied)):
            return check, CLEARED
    return check, NOT_CLEARED


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
def _outcome(buf, start, end, bitboards, stm, in_check, moves):
    """The outcome code of a position the filter did not clear (``buf[start:end]`` its FEN, parsed into
    ``bitboards`` int64[8] with side to move ``stm``; exactly one king per side): its legal moves counted
    with the FEN's en passant square (``moves`` uint16[MAX_MOVES] scratch), or :data:`OUTCOME_ASK` when
    castling could matter (not in check, a castling field other than ``-``)."""
    if not in_check:
        first, last = _field(buf, start, end, 2)
        if first >= 0 and not (last - first == 1 and buf[first] == 45):  # '-'
            return OUTCOME_ASK
    ep = 0
    first, last = _field(buf, start, end, 3)
    if first >= 0 and last - first == 2:  # parse_fen checked the square's form
        ep = (buf[first] - 97) + 8 * (buf[first + 1] - 49)
    if legal_moves(bitboards, np.int64(stm), np.int64(0), np.int64(ep), np.bool_(False), moves) > 0:
        return OUTCOME_NONE
    return OUTCOME_CHECKMATE if in_check else OUTCOME_STALEMATE


@njit(parallel=True, cache=True)
def parse_fens_status(buf, offsets, max_pieces, bitboards, stm, codes, problem_offsets, in_check, outcome):
    """Parse ``n`` FENs and flag each position, in one parallel pass (``buf`` uint8 / ``offsets`` int64[n + 1]
    as :func:`nnue_infer.kernels.chess.fen.parse_fens` reads them).

    Fills what :func:`~nnue_infer.kernels.chess.fen.parse_fens` fills (``bitboards`` int64[n, 8], ``stm`` uint8[n],
    ``codes`` int32[n], ``problem_offsets`` int64[n]) and, for a row that parses and that a feature set of
    ``max_pieces`` (int64) can represent (:func:`~nnue_infer.kernels.chess.bitboard.check_bitboards`),
    ``in_check`` bool[n] (:func:`position_status`) and ``outcome`` int8[n]: :data:`OUTCOME_NONE` where the
    filter clears it, else from its legal moves (:func:`_outcome`: :data:`OUTCOME_CHECKMATE`,
    :data:`OUTCOME_STALEMATE`, or :data:`OUTCOME_ASK`).  Other rows get ``in_check`` false and
    :data:`OUTCOME_NONE`.
    """
    n = offsets.shape[0] - 1
    n_chunks = max(1, min(n, 64))
    for c in prange(n_chunks):
        moves = np.empty(MAX_MOVES, np.uint16)
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            start, end = offsets[i], offsets[i + 1]
            code, where, side = parse_fen(buf, start, end, bitboards[i])
            codes[i] = code
            stm[i] = side
            problem_offsets[i] = where - start if where >= 0 else -1
            in_check[i] = False
            outcome[i] = OUTCOME_NONE
            if code != FEN_OK:
                bitboards[i, :] = 0
                continue
            if check_bitboards(bitboards[i], max_pieces) != POS_OK:
                continue
            check, cleared = position_status(bitboards[i], side)
            in_check[i] = check
            if cleared == NOT_CLEARED:
                outcome[i] = _outcome(buf, start, end, bitboards[i], side, check, moves)

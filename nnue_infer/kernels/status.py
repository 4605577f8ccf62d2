"""Whether a position is check, checkmate or stalemate, for many positions at once.

Stockfish prints no NNUE evaluation when the side to move is in check, and a network's
number for a checkmate or a stalemate means nothing: these kernels flag such rows.  The
rules are python-chess's (``Board.is_check``, ``is_checkmate``, ``is_stalemate``) for
standard chess: a move is legal when it leaves the mover's king unattacked; en passant needs
the e.p. square empty and the opponent's pawn behind it.  Castling is never generated:
castling is legal only when the king's first step is, so it never is the only legal move in
standard chess (in Chess960 a king that does not move while castling is the exception).

Positions are mailboxes ``int8[64]`` (0 empty, 1..6 pawn..king as python-chess, plus 8 for
Black), squares a1 = 0 .. h8 = 63.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .features import BB_BLACK, BB_KINGS, BB_WHITE, POS_OK, check_bitboards, lowest_square, without_lowest
from .fen import FEN_OK, is_space, parse_fen

#: Outcome codes (``status_*`` ``outcome`` arrays); labels in :data:`OUTCOMES`.
NONE, CHECKMATE, STALEMATE, UNKNOWN = 0, 1, 2, 3
OUTCOMES = ("none", "checkmate", "stalemate", "unknown")

PAWN, KNIGHT, BISHOP, ROOK, QUEEN, KING = 1, 2, 3, 4, 5, 6
BLACK_BIT = 8

_KNIGHT = np.array([[1, 2], [2, 1], [2, -1], [1, -2], [-1, -2], [-2, -1], [-2, 1], [-1, 2]], np.int64)
_KING = np.array([[1, 0], [1, 1], [0, 1], [-1, 1], [-1, 0], [-1, -1], [0, -1], [1, -1]], np.int64)
# Rays: the first four are orthogonal (rook, queen), the last four diagonal (bishop, queen).
_RAYS = np.array([[1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, 1], [-1, -1], [1, -1]], np.int64)


@njit(cache=True)
def fill_mailbox(bitboards, board):
    """``board`` int8[64] from ``bitboards`` int64[8] (pawns .. kings, white, black)."""
    board[:] = 0
    for kind in range(6):
        b = bitboards[kind]
        while b != 0:
            sq = lowest_square(b)
            board[sq] = kind + 1 + (BLACK_BIT if (bitboards[BB_BLACK] >> sq) & 1 else 0)
            b = without_lowest(b)


@njit(cache=True)
def attacked(board, sq, by_black):
    """Whether square ``sq`` is attacked by a piece of the side ``by_black`` (0 White, 1 Black)."""
    colour = BLACK_BIT if by_black else 0
    f, r = sq % 8, sq // 8
    # pawns: a White pawn attacks upwards, so it stands one rank below
    pr = r - 1 if not by_black else r + 1
    if 0 <= pr < 8:
        for df in (-1, 1):
            pf = f + df
            if 0 <= pf < 8 and board[pr * 8 + pf] == PAWN + colour:
                return True
    for k in range(8):
        nf, nr = f + _KNIGHT[k, 0], r + _KNIGHT[k, 1]
        if 0 <= nf < 8 and 0 <= nr < 8 and board[nr * 8 + nf] == KNIGHT + colour:
            return True
        nf, nr = f + _KING[k, 0], r + _KING[k, 1]
        if 0 <= nf < 8 and 0 <= nr < 8 and board[nr * 8 + nf] == KING + colour:
            return True
    for k in range(8):
        slider = ROOK if k < 4 else BISHOP
        df, dr = _RAYS[k, 0], _RAYS[k, 1]
        nf, nr = f + df, r + dr
        while 0 <= nf < 8 and 0 <= nr < 8:
            p = board[nr * 8 + nf]
            if p != 0:
                if p == slider + colour or p == QUEEN + colour:
                    return True
                break
            nf += df
            nr += dr
    return False


@njit(cache=True)
def _legal(board, frm, to, ep_victim, king_sq, black):
    """Whether moving ``board[frm]`` to ``to`` (capturing on ``ep_victim`` if >= 0) leaves the mover's
    king (on ``king_sq`` before the move) unattacked; ``board`` is restored."""
    moved, captured = board[frm], board[to]
    victim = 0
    if ep_victim >= 0:
        victim = board[ep_victim]
        board[ep_victim] = 0
    board[to] = moved
    board[frm] = 0
    ok = not attacked(board, to if frm == king_sq else king_sq, 1 - black)
    board[frm] = moved
    board[to] = captured
    if ep_victim >= 0:
        board[ep_victim] = victim
    return ok


@njit(cache=True)
def has_legal_move(board, black, ep_square):
    """Whether the side ``black`` (0 White, 1 Black) has a legal move (castling aside, see the module)."""
    colour = BLACK_BIT if black else 0
    king_sq = -1
    for sq in range(64):
        if board[sq] == KING + colour:
            king_sq = sq
    for frm in range(64):
        p = board[frm]
        if p == 0 or (p & BLACK_BIT) != colour:
            continue
        kind = p & 7
        f, r = frm % 8, frm // 8
        if kind == PAWN:
            dr = -1 if black else 1
            nr = r + dr
            if 0 <= nr < 8:
                to = nr * 8 + f
                if board[to] == 0:
                    if _legal(board, frm, to, -1, king_sq, black):
                        return True
                    start = 6 if black else 1
                    to2 = (r + 2 * dr) * 8 + f
                    if r == start and board[to2] == 0 and _legal(board, frm, to2, -1, king_sq, black):
                        return True
                for df in (-1, 1):
                    nf = f + df
                    if not 0 <= nf < 8:
                        continue
                    to = nr * 8 + nf
                    q = board[to]
                    if q != 0 and (q & BLACK_BIT) != colour and _legal(board, frm, to, -1, king_sq, black):
                        return True
                    if q == 0 and to == ep_square:
                        victim = to - 8 * dr
                        if board[victim] == PAWN + (BLACK_BIT - colour) and _legal(board, frm, to, victim, king_sq,
                                                                                   black):
                            return True
            continue
        if kind == KNIGHT or kind == KING:
            for k in range(8):
                if kind == KNIGHT:
                    nf, nr = f + _KNIGHT[k, 0], r + _KNIGHT[k, 1]
                else:
                    nf, nr = f + _KING[k, 0], r + _KING[k, 1]
                if 0 <= nf < 8 and 0 <= nr < 8:
                    q = board[nr * 8 + nf]
                    if (q == 0 or (q & BLACK_BIT) != colour) and _legal(board, frm, nr * 8 + nf, -1, king_sq, black):
                        return True
            continue
        first = 4 if kind == BISHOP else 0
        last = 4 if kind == ROOK else 8
        for k in range(first, last):
            df, dr = _RAYS[k, 0], _RAYS[k, 1]
            nf, nr = f + df, r + dr
            while 0 <= nf < 8 and 0 <= nr < 8:
                q = board[nr * 8 + nf]
                if q != 0 and (q & BLACK_BIT) == colour:
                    break
                if _legal(board, frm, nr * 8 + nf, -1, king_sq, black):
                    return True
                if q != 0:
                    break
                nf += df
                nr += dr
    return False


@njit(cache=True)
def position_status(bitboards, black, ep_square, board):
    """``(in_check, outcome)`` of one representable position (``board``: int8[64] scratch).

    ``ep_square`` is the FEN's e.p. square (0..63) or -1.
    """
    fill_mailbox(bitboards, board)
    kings = bitboards[BB_KINGS] & bitboards[BB_WHITE + black]
    check = attacked(board, lowest_square(kings), 1 - black)
    if has_legal_move(board, black, ep_square):
        return check, NONE
    return check, CHECKMATE if check else STALEMATE


@njit(cache=True)
def en_passant_square(buf, start, end):
    """The e.p. square (0..63) named by the fourth field of the FEN ``buf[start:end]``, else -1."""
    field = 0
    pos = start
    while pos < end:
        while pos < end and is_space(buf[pos]):
            pos += 1
        if pos >= end:
            break
        f_start = pos
        while pos < end and not is_space(buf[pos]):
            pos += 1
        if field == 3:
            if pos - f_start == 2 and 97 <= buf[f_start] <= 104 and 49 <= buf[f_start + 1] <= 56:
                return (buf[f_start + 1] - 49) * 8 + buf[f_start] - 97
            return -1
        field += 1
    return -1


@njit(parallel=True, cache=True)
def status_fens(buf, offsets, max_pieces, in_check, outcome):
    """Check and outcome of ``n`` FENs (``buf`` / ``offsets`` as for ``kernels.batch.evaluate_fens``).

    Fills ``in_check`` (bool[n]) and ``outcome`` (int8[n], ``NONE`` / ``CHECKMATE`` /
    ``STALEMATE``; ``UNKNOWN`` with ``in_check`` false for a row that does not parse or
    cannot be represented).
    """
    n = offsets.shape[0] - 1
    n_chunks = max(1, min(n, 64))
    for c in prange(n_chunks):
        bitboards = np.empty(8, np.int64)
        board = np.empty(64, np.int8)
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            code, _, stm = parse_fen(buf, offsets[i], offsets[i + 1], bitboards)
            if code != FEN_OK or check_bitboards(bitboards, max_pieces) != POS_OK:
                in_check[i] = False
                outcome[i] = UNKNOWN
                continue
            check, result = position_status(bitboards, stm, en_passant_square(buf, offsets[i], offsets[i + 1]),
                                            board)
            in_check[i] = check
            outcome[i] = result


@njit(parallel=True, cache=True)
def status_bitboards(bitboards, stm, ep_squares, in_check, outcome):
    """As :func:`status_fens` for int64[n, 8] ``bitboards``, uint8[n] ``stm`` (1 Black) and
    int64[n] ``ep_squares`` (-1 none) of representable positions."""
    n = bitboards.shape[0]
    n_chunks = max(1, min(n, 64))
    for c in prange(n_chunks):
        board = np.empty(64, np.int8)
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            check, result = position_status(bitboards[i], np.int64(stm[i]), ep_squares[i], board)
            in_check[i] = check
            outcome[i] = result

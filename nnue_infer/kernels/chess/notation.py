"""Game records as arrays: piece-code boards -> bitboards, FEN, SAN, UCI and check flags.

A parsed game arrives as one board per position (``uint8[64]`` piece codes, a1 = 0,
h8 = 63: 0 empty, 1-6 White pawn, knight, bishop, rook, queen, king, 7-12 the same for
Black) with the side to move, castling rights and the *pseudo-legal* en passant file
(set after every double pawn push), plus the move that led to each position.  The kernel
:func:`describe_games` writes, per position, the bitboards the evaluation kernels read,
whether the side to move is in check, and the FEN, SAN and UCI strings exactly as
python-chess writes them (``Board.fen()``, ``Board.san(move)``, ``Move.uci()``; standard
chess, not Chess960): the en passant square only when a legal en passant capture exists,
SAN disambiguation among legal moves only, ``+`` / ``#`` suffixes.

It decides no rule of its own: the moves were validated by the parser, which also says
whether a game ends in checkmate or stalemate.  What it needs beyond formatting is attack
arithmetic on bitboards (:mod:`nnue_infer.kernels.chess.attacks`): is the side to move in check,
would a rival piece that also reaches the target square leave its king attacked (then it does
not count for SAN disambiguation), is an en passant capture possible without exposing the king.

Strings go into one ``uint8`` buffer per column, each followed by a newline, with int32
offsets (row ``i`` is ``buf[offsets[i]:offsets[i + 1] - 1]``), so a column becomes Python
strings with one decode and one split.

Source of the notation: the PGN standard (sections 8.2.3 SAN, 16.1 FEN) and python-chess 1.11
``Board.fen`` / ``Board._algebraic_without_suffix`` (disambiguation by file first, by rank
when another candidate shares the file).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .attacks import SQUARE_BB, attackers, piece_attacks
from .bitboard import BB_BLACK, BB_WHITE, king_square, lowest_square, without_lowest

#: Piece codes of the boards (White; Black adds ``BLACK_OFFSET``).
EMPTY, PAWN, KNIGHT, BISHOP, ROOK, QUEEN, KING = range(7)
BLACK_OFFSET = 6
#: Longest string written per row: FEN (64 squares can take at most 71 characters of
#: placement, plus side, castling, en passant and counters), SAN (``Qa1xb2#``, ``exd8=Q#``), UCI,
#: each with its newline.
FEN_WIDTH, SAN_WIDTH, UCI_WIDTH = 100, 9, 6

#: FEN letters of the piece codes 1..12.
_LETTERS = (32, 80, 78, 66, 82, 81, 75, 112, 110, 98, 114, 113, 107)


@njit(cache=True, inline="always")
def piece_letter(code):
    """ASCII letter of a piece code (1..12), FEN case: upper for White."""
    return _LETTERS[code]


@njit(cache=True)
def king_attacked(bitboards, colour):
    """Whether ``colour``'s king (0 White, 1 Black) is attacked; False when it has no king."""
    k = king_square(bitboards, colour)
    return k >= 0 and attackers(bitboards, 1 - colour, k, bitboards[BB_WHITE] | bitboards[BB_BLACK]) != 0


@njit(cache=True)
def safe_after(bitboards, frm, to, captured_sq, colour, tmp):
    """Whether ``colour``'s king is not attacked after its piece moves ``frm`` -> ``to`` (capturing what
    stands there, and the pawn on ``captured_sq`` when >= 0: en passant).  ``tmp`` is int64[8] scratch."""
    tmp[:] = bitboards
    keep = ~SQUARE_BB[to]
    if captured_sq >= 0:
        keep &= ~SQUARE_BB[captured_sq]
    moving = -1
    for k in range(8):
        if k < 6 and tmp[k] & SQUARE_BB[frm]:
            moving = k
        tmp[k] &= keep & ~SQUARE_BB[frm]
    tmp[moving] |= SQUARE_BB[to]
    tmp[BB_WHITE + colour] |= SQUARE_BB[to]
    return not king_attacked(tmp, colour)


@njit(cache=True, inline="always")
def put_square(out, pos, sq):
    """Write the name of square ``sq`` (``a1`` .. ``h8``) at ``out[pos]``; returns the next position."""
    out[pos] = 97 + (sq & 7)
    out[pos + 1] = 49 + (sq >> 3)
    return pos + 2


@njit(cache=True)
def put_uint(out, pos, value):
    """Write a non-negative integer in decimal; returns the next position."""
    if value == 0:
        out[pos] = 48
        return pos + 1
    n = 0
    v = value
    while v > 0:
        n += 1
        v //= 10
    for k in range(n - 1, -1, -1):
        out[pos + k] = 48 + value % 10
        value //= 10
    return pos + n


@njit(cache=True)
def legal_ep_square(board, bitboards, stm, ep_file, tmp):
    """The en passant target square if the side to move (0 White) has a legal en passant capture, else -1.

    ``board`` uint8[64] and ``bitboards`` int64[8] are the position; ``ep_file`` the file of the
    pawn that just made a double push (-1 if none).
    """
    if ep_file < 0:
        return -1
    target = (5 if stm == 0 else 2) * 8 + ep_file
    captured = target - 8 if stm == 0 else target + 8
    pawn = PAWN + BLACK_OFFSET * stm
    for df in (-1, 1):
        f = ep_file + df
        if 0 <= f < 8:
            frm = (captured & ~7) + f
            if board[frm] == pawn and board[target] == EMPTY and safe_after(bitboards, frm, target, captured, stm,
                                                                              tmp):
                return target
    return -1


@njit(cache=True)
def write_fen(board, stm, castling, ep_sq, halfmove, fullmove, out, pos):
    """Write the FEN of a position as python-chess's ``Board.fen()``; returns the next position.

    ``castling`` is bool[4] (White O-O, White O-O-O, Black O-O, Black O-O-O), ``ep_sq`` a
    legal en passant square or -1.
    """
    for r in range(7, -1, -1):
        empty = 0
        for f in range(8):
            p = board[r * 8 + f]
            if p == EMPTY:
                empty += 1
                continue
            if empty:
                out[pos] = 48 + empty
                pos += 1
                empty = 0
            out[pos] = piece_letter(p)
            pos += 1
        if empty:
            out[pos] = 48 + empty
            pos += 1
        if r:
            out[pos] = 47  # '/'
            pos += 1
    out[pos] = 32
    out[pos + 1] = 119 if stm == 0 else 98  # w / b
    out[pos + 2] = 32
    pos += 3
    if castling[0] or castling[1] or castling[2] or castling[3]:
        for k in range(4):
            if castling[k]:
                out[pos] = (75, 81, 107, 113)[k]  # K Q k q
                pos += 1
    else:
        out[pos] = 45
        pos += 1
    out[pos] = 32
    pos += 1
    if ep_sq >= 0:
        pos = put_square(out, pos, ep_sq)
    else:
        out[pos] = 45
        pos += 1
    out[pos] = 32
    pos = put_uint(out, pos + 1, halfmove)
    out[pos] = 32
    return put_uint(out, pos + 1, fullmove)


@njit(cache=True)
def write_san(board, bitboards, frm, to, promo, check, mate, tmp, out, pos):
    """Write the SAN of the move ``frm`` -> ``to`` (``promo``: promotion piece 2..5 or -1) played on the
    position ``board`` uint8[64] / ``bitboards`` int64[8], as python-chess's ``Board.san``; ``check`` /
    ``mate``: the position after it.  Returns the next position."""
    p = board[frm]
    colour = 1 if p > BLACK_OFFSET else 0
    kind = p - BLACK_OFFSET * colour
    if kind == KING and abs((to & 7) - (frm & 7)) == 2:
        out[pos] = 79
        out[pos + 1] = 45
        out[pos + 2] = 79
        pos += 3
        if (to & 7) < (frm & 7):
            out[pos] = 45
            out[pos + 1] = 79
            pos += 2
    else:
        capture = board[to] != EMPTY or (kind == PAWN and (to & 7) != (frm & 7))
        if kind == PAWN:
            if capture:
                out[pos] = 97 + (frm & 7)
                pos += 1
        else:
            out[pos] = piece_letter(kind)
            pos += 1
            if kind != KING:
                # the same kind of piece that could also move to `to` legally: attacks are symmetric for N, B, R, Q
                occupied = bitboards[BB_WHITE] | bitboards[BB_BLACK]
                rivals = (piece_attacks(kind - 1, colour, to, occupied) & bitboards[kind - 1]
                          & bitboards[BB_WHITE + colour] & ~SQUARE_BB[frm])
                others = False
                same_rank = False
                same_file = False
                while rivals != 0:
                    s = lowest_square(rivals)
                    rivals = without_lowest(rivals)
                    if safe_after(bitboards, s, np.int64(to), -1, colour, tmp):  # int64, as legal_ep_square's call
                        others = True
                        same_rank |= (s >> 3) == (frm >> 3)
                        same_file |= (s & 7) == (frm & 7)
                if others:
                    if same_rank or not same_file:
                        out[pos] = 97 + (frm & 7)
                        pos += 1
                    if same_file:
                        out[pos] = 49 + (frm >> 3)
                        pos += 1
        if capture:
            out[pos] = 120  # x
            pos += 1
        pos = put_square(out, pos, to)
        if promo > 0:
            out[pos] = 61  # =
            out[pos + 1] = piece_letter(promo)
            pos += 2
    if mate:
        out[pos] = 35  # '#'
        pos += 1
    elif check:
        out[pos] = 43  # '+'
        pos += 1
    return pos


@njit(cache=True)
def write_uci(frm, to, promo, out, pos):
    """Write a move in UCI (``e2e4``, ``e7e8q``); returns the next position."""
    pos = put_square(out, pos, frm)
    pos = put_square(out, pos, to)
    if promo > 0:
        out[pos] = piece_letter(promo + BLACK_OFFSET)  # lower case
        pos += 1
    return pos


@njit(cache=True)
def describe_games(boards, white_to_move, castling, ep_file, move_from, move_to, move_promo, game_offsets,
                   start_halfmove, start_fullmove, final_mate, bitboards, stm, in_check, fen_buf, fen_offsets,
                   san_buf, san_offsets, uci_buf, uci_offsets):
    """Describe every position of a batch of games (see the module docstring).

    Parameters
    ----------
    boards : uint8[n, 64]
        Piece codes per position, a1 = 0.
    white_to_move : bool[n]
    castling : bool[n, 4]
        White O-O, White O-O-O, Black O-O, Black O-O-O rights.
    ep_file : int8[n]
        File of a pawn that just advanced two squares (pseudo-legal en passant), -1 if none.
    move_from, move_to, move_promo : int16[n]
        The move that led to the position (promotion piece 2..5 or -1); ignored at a game's
        first position.
    game_offsets : int64[g + 1]
        Game ``j`` is positions ``game_offsets[j]`` .. ``game_offsets[j + 1] - 1``.
    start_halfmove, start_fullmove : int64[g]
        Counters of each game's first position (from its FEN, else 0 and 1).
    final_mate : bool[g]
        Whether each game's last position is checkmate (the last SAN then ends with ``#``).
    bitboards : int64[n, 8]
        Output: pawns, knights, bishops, rooks, queens, kings, white, black (a1 = bit 0).
    stm : int64[n]
        Output: side to move, 0 White, 1 Black.
    in_check : bool[n]
        Output: the side to move is in check.
    fen_buf, san_buf, uci_buf : uint8[n * FEN_WIDTH], uint8[n * SAN_WIDTH], uint8[n * UCI_WIDTH]
        Output: the strings, each followed by a newline (empty SAN / UCI at a game's first position).
    fen_offsets, san_offsets, uci_offsets : int32[n + 1]
        Output: string ``i`` of a column is ``buf[offsets[i]:offsets[i + 1] - 1]``.
    """
    n = boards.shape[0]
    tmp = np.empty(8, np.int64)
    for i in range(n):
        for k in range(8):
            bitboards[i, k] = 0
        b = boards[i]
        for sq in range(64):
            p = b[sq]
            if p != EMPTY:
                colour = 1 if p > BLACK_OFFSET else 0
                bitboards[i, p - BLACK_OFFSET * colour - 1] |= SQUARE_BB[sq]
                bitboards[i, BB_WHITE + colour] |= SQUARE_BB[sq]
        stm[i] = 0 if white_to_move[i] else 1
        in_check[i] = king_attacked(bitboards[i], stm[i])
    fpos = 0
    spos = 0
    upos = 0
    fen_offsets[0] = 0
    san_offsets[0] = 0
    uci_offsets[0] = 0
    for g in range(game_offsets.shape[0] - 1):
        lo = game_offsets[g]
        hi = game_offsets[g + 1]
        halfmove = start_halfmove[g]
        fullmove = start_fullmove[g]
        for i in range(lo, hi):
            if i > lo:
                before = boards[i - 1]
                frm = move_from[i]
                to = move_to[i]
                if before[frm] == PAWN or before[frm] == PAWN + BLACK_OFFSET or before[to] != EMPTY:
                    halfmove = 0
                else:
                    halfmove += 1
                if stm[i - 1] == 1:
                    fullmove += 1
                spos = write_san(before, bitboards[i - 1], frm, to, move_promo[i], in_check[i],
                                 final_mate[g] and i == hi - 1, tmp, san_buf, spos)
                upos = write_uci(frm, to, move_promo[i], uci_buf, upos)
            ep = legal_ep_square(boards[i], bitboards[i], stm[i], ep_file[i], tmp)
            fpos = write_fen(boards[i], stm[i], castling[i], ep, halfmove, fullmove, fen_buf, fpos)
            fen_buf[fpos] = 10  # a newline after each string
            san_buf[spos] = 10
            uci_buf[upos] = 10
            fpos += 1
            spos += 1
            upos += 1
            fen_offsets[i + 1] = fpos
            san_offsets[i + 1] = spos
            uci_offsets[i + 1] = upos

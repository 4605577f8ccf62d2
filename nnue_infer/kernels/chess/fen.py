"""FEN parsing for batches: ASCII bytes of many FENs -> bitboards and side to move.

The FENs are concatenated into one ``uint8`` buffer; row ``i`` is
``buf[offsets[i]:offsets[i + 1]]`` (a trailing separator such as ``"\\n"`` counts as
white space).  Each row is checked with python-chess's rules for ``chess.Board(fen)``
(``BaseBoard._set_board_fen`` and ``Board.set_fen``, python-chess 1.11): placement of
8 ranks of 8 squares with no two digits in a row (``~`` after a piece is allowed and
ignored), then the optional fields side to move (``w``/``b``, default White), castling
(``-`` or up to two of ``KQA-H`` then up to two of ``kqa-h``), en passant (``-`` or a
square name), half-move clock and full-move number (non-negative integers), and nothing
more.  Problems are reported per row as a code and a byte offset, never raised here.
Only ASCII is accepted: rows this parser refuses get a second reading by python-chess in
:func:`nnue_infer.batch.evaluate_rows` (Unicode white space, digits and letters it reads).

Source of the format: the FEN standard (PGN specification, section 16.1) and
python-chess ``chess/__init__.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .bitboard import BB_BISHOPS, BB_BLACK, BB_KINGS, BB_KNIGHTS, BB_PAWNS, BB_QUEENS, BB_ROOKS, BB_WHITE

#: Per-row result codes of :func:`parse_fen` (0: valid).
(FEN_OK, FEN_EMPTY, FEN_BAD_CHARACTER, FEN_TWO_DIGITS, FEN_BAD_TILDE, FEN_RANK_LENGTH, FEN_RANK_COUNT,
 FEN_SIDE_TO_MOVE, FEN_CASTLING, FEN_EN_PASSANT, FEN_HALFMOVE, FEN_FULLMOVE, FEN_EXTRA_FIELDS) = range(13)


@njit(cache=True)
def is_space(c):
    """True for the bytes Python's ``str.split()`` treats as white space in ASCII text."""
    return c == 32 or 9 <= c <= 13 or 28 <= c <= 31


@njit(cache=True)
def piece_bitboard(c):
    """Bitboard index (``BB_PAWNS`` .. ``BB_KINGS``) of the ASCII piece letter ``c`` (either case), -1 if none."""
    lower = c | 32
    if lower == 112:  # p
        return BB_PAWNS
    if lower == 110:  # n
        return BB_KNIGHTS
    if lower == 98:  # b
        return BB_BISHOPS
    if lower == 114:  # r
        return BB_ROOKS
    if lower == 113:  # q
        return BB_QUEENS
    if lower == 107:  # k
        return BB_KINGS
    return -1


@njit(cache=True)
def parse_placement(buf, start, end, bitboards):
    """Parse the placement field ``buf[start:end]`` into ``bitboards`` (int64[8], cleared first).

    Returns ``(code, offset)``: ``FEN_OK`` and -1, or the problem and its absolute byte offset.
    """
    for k in range(8):
        bitboards[k] = 0
    rank = 7
    file = 0
    previous_digit = False
    previous_piece = False
    for pos in range(start, end):
        c = buf[pos]
        if c == 47:  # '/'
            if file != 8:
                return FEN_RANK_LENGTH, pos
            if rank == 0:
                return FEN_RANK_COUNT, pos
            rank -= 1
            file = 0
            previous_digit = False
            previous_piece = False
        elif 49 <= c <= 56:  # '1'..'8'
            if previous_digit:
                return FEN_TWO_DIGITS, pos
            file += c - 48
            if file > 8:
                return FEN_RANK_LENGTH, pos
            previous_digit = True
            previous_piece = False
        elif c == 126:  # '~': promoted-piece marker, accepted after a piece and ignored
            if not previous_piece:
                return FEN_BAD_TILDE, pos
            previous_digit = False
            previous_piece = False
        else:
            kind = piece_bitboard(c)
            if kind < 0:
                return FEN_BAD_CHARACTER, pos
            if file >= 8:
                return FEN_RANK_LENGTH, pos
            bit = np.int64(1) << (8 * rank + file)
            bitboards[kind] |= bit
            if c < 97:  # upper case: White
                bitboards[BB_WHITE] |= bit
            else:
                bitboards[BB_BLACK] |= bit
            file += 1
            previous_digit = False
            previous_piece = True
    if file != 8:
        return FEN_RANK_LENGTH, end
    if rank != 0:
        return FEN_RANK_COUNT, end
    return FEN_OK, -1


@njit(cache=True)
def valid_castling(buf, start, end):
    """``-``, or up to two of ``KQABCDEFGH`` followed by up to two of ``kqabcdefgh``."""
    n = end - start
    if n == 1 and buf[start] == 45:  # '-'
        return True
    pos = start
    upper = 0
    while pos < end and upper < 2 and (buf[pos] == 75 or buf[pos] == 81 or 65 <= buf[pos] <= 72):
        pos += 1
        upper += 1
    lower = 0
    while pos < end and lower < 2 and (buf[pos] == 107 or buf[pos] == 113 or 97 <= buf[pos] <= 104):
        pos += 1
        lower += 1
    return pos == end


@njit(cache=True)
def valid_counter(buf, start, end):
    """A non-negative integer as Python's ``int()`` reads ASCII text: optional sign, then digits
    with single underscores between digits (``-0`` is zero)."""
    negative = buf[start] == 45  # '-'
    if buf[start] == 43 or negative:  # '+'
        start += 1
    if end <= start:
        return False
    zero = True
    previous_digit = False
    for pos in range(start, end):
        c = buf[pos]
        if c == 95:  # '_' between two digits
            if not previous_digit or pos + 1 >= end:
                return False
            previous_digit = False
        elif 48 <= c <= 57:
            zero = zero and c == 48
            previous_digit = True
        else:
            return False
    return previous_digit and (zero or not negative)


@njit(cache=True)
def parse_fen(buf, start, end, bitboards):
    """Parse one FEN ``buf[start:end]`` into ``bitboards`` (int64[8]).

    Returns ``(code, offset, side_to_move)``: a ``FEN_*`` code, the absolute byte offset of
    the problem (-1 when valid) and 0 for White, 1 for Black to move.
    """
    field = 0
    stm = 0
    pos = start
    while True:
        while pos < end and is_space(buf[pos]):
            pos += 1
        if pos >= end:
            break
        f_start = pos
        while pos < end and not is_space(buf[pos]):
            pos += 1
        if field == 0:
            code, where = parse_placement(buf, f_start, pos, bitboards)
            if code != FEN_OK:
                return code, where, 0
        elif field == 1:
            if pos - f_start != 1 or (buf[f_start] != 119 and buf[f_start] != 98):  # 'w', 'b'
                return FEN_SIDE_TO_MOVE, f_start, 0
            stm = 1 if buf[f_start] == 98 else 0
        elif field == 2:
            if not valid_castling(buf, f_start, pos):
                return FEN_CASTLING, f_start, 0
        elif field == 3:
            if not (pos - f_start == 1 and buf[f_start] == 45) and not (
                pos - f_start == 2 and 97 <= buf[f_start] <= 104 and 49 <= buf[f_start + 1] <= 56
            ):
                return FEN_EN_PASSANT, f_start, 0
        elif field == 4:
            if not valid_counter(buf, f_start, pos):
                return FEN_HALFMOVE, f_start, 0
        elif field == 5:
            if not valid_counter(buf, f_start, pos):
                return FEN_FULLMOVE, f_start, 0
        else:
            return FEN_EXTRA_FIELDS, f_start, 0
        field += 1
    if field == 0:
        return FEN_EMPTY, start, 0
    return FEN_OK, -1, stm


@njit(parallel=True, cache=True)
def parse_fens(buf, offsets, bitboards, stm, codes, problem_offsets):
    """:func:`parse_fen` on ``n`` rows in parallel (``buf`` / ``offsets`` int64[n + 1] as in the module docstring).

    Fills ``bitboards`` int64[n, 8] (zeros for a row that does not parse), ``stm`` uint8[n],
    ``codes`` int32[n] (``FEN_*``) and ``problem_offsets`` int64[n] (offset of the problem
    within the row, -1 when valid).
    """
    n = offsets.shape[0] - 1
    n_chunks = max(1, min(n, 64))
    for c in prange(n_chunks):
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            code, where, side = parse_fen(buf, offsets[i], offsets[i + 1], bitboards[i])
            codes[i] = code
            stm[i] = side
            problem_offsets[i] = where - offsets[i] if where >= 0 else -1
            if code != FEN_OK:
                bitboards[i, :] = 0


@njit(cache=True, inline="always")
def fen_fields(buf, bitboards):
    """Parse one FEN, the whole of ``buf`` (``bytes``), into ``bitboards`` (int64[8]).

    Returns ``(fields, stm)``: the number of white-space separated fields (-1 when
    :func:`parse_fen` refuses the text) and the side to move (0 White, 1 Black).  Used by
    ``kernels.nnue.arena``'s ``evaluate_fen`` (the string path of ``Evaluator.evaluate``).
    """
    # copied into a uint8 array, the batch path's buffer type (``positions.fen_buffer``), so the parser
    # compiles one signature for both callers (a FEN is ~60 bytes: the copy costs tens of ns)
    text = np.empty(len(buf), np.uint8)
    for pos in range(len(buf)):
        text[pos] = buf[pos]
    code, _, stm = parse_fen(text, np.int64(0), len(text), bitboards)  # int64, not Literal[int](0)
    if code != FEN_OK:
        return -1, stm
    fields = 0
    previous_space = True
    for pos in range(len(text)):
        space = is_space(text[pos])
        if previous_space and not space:
            fields += 1
        previous_space = space
    return fields, stm

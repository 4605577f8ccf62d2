"""Splitting EPD/FEN text: lines -> the FEN fields and the EPD operations of each position.

An EPD line is ``placement side castling en-passant`` followed by operations
(``opcode operand ...;``); a FEN line has the half-move clock and full-move number instead.
Source: the PGN standard, section 16.2 (EPD) and 16.1 (FEN).  The kernels work on the file's
bytes (``uint8``) and record byte ranges; nothing is decoded.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..chess.fen import is_space

#: ``fields`` value of a line whose fifth field is a number but which has no sixth (a FEN
#: missing its full-move number).
HALFMOVE_WITHOUT_FULLMOVE = 5

#: :func:`split_lines` result problems (``problem[0]``): none, a line longer than ``max_line``
#: bytes, a NUL byte (binary data, not text).
LINE_OK, LINE_TOO_LONG, LINE_BINARY = 0, 1, 2

#: Per-position problems of :func:`split_operations` (0: none).
(OP_OK, OP_BAD_OPCODE, OP_UNTERMINATED, OP_REPEATED) = range(4)

#: Longest EPD opcode (PGN standard 16.2.4: up to 15 characters).
MAX_OPCODE = 15


@njit(cache=True)
def count_lines(buf):
    """Lines in ``buf`` (a last line without ``\\n`` counts)."""
    n = 0
    for c in buf:
        if c == 10:
            n += 1
    if buf.shape[0] and buf[buf.shape[0] - 1] != 10:
        n += 1
    return n


@njit(cache=True)
def _is_number(buf, start, end):
    for k in range(start, end):
        if not 48 <= buf[k] <= 57:
            return False
    return end > start


#: Byte classes of :func:`split_lines`' scan: other, white space (``fen.is_space`` but the newline), newline, NUL.
OTHER, SPACE, NEWLINE, NUL = 0, 1, 2, 3


def _byte_classes() -> np.ndarray:
    table = np.full(256, OTHER, np.uint8)
    for c in [*range(9, 14), *range(28, 33)]:  # kernels.chess.fen.is_space
        table[c] = SPACE
    table[10], table[0] = NEWLINE, NUL
    return table


#: The class (:data:`OTHER` ...) of each byte value, uint8[256]: one lookup a byte in :func:`split_lines`.
BYTE_CLASS = _byte_classes()


@njit(cache=True)
def split_lines(buf, max_line, line_numbers, line_starts, fen_starts, fen_ends, fields, ops_starts, ops_ends,
                problem):
    """Find each position line's FEN and operations; returns the number of positions.

    Blank lines and lines whose first character (after white space) is ``#`` are skipped.
    Per position ``i`` (arrays of at least :func:`count_lines` rows): ``line_numbers[i]``
    (1-based), where its line starts (``line_starts[i]``, a byte offset), the FEN
    ``buf[fen_starts[i]:fen_ends[i]]`` (its first four fields, or six when the fifth and
    sixth are numbers), ``fields[i]`` (1-4, 6, or :data:`HALFMOVE_WITHOUT_FULLMOVE`) and the
    operations ``buf[ops_starts[i]:ops_ends[i]]`` (stripped; empty when none).  White space is
    ``kernels.chess.fen.is_space``'s.

    Stops at the first line longer than ``max_line`` bytes or holding a NUL byte:
    ``problem`` (int64[3]) is set to (:data:`LINE_TOO_LONG` or :data:`LINE_BINARY`, its
    1-based line number, the 1-based byte column of the NUL), else (:data:`LINE_OK`, 0, 0);
    the positions before that line are returned.

    One pass over each line: its first six fields are found as the bytes go by (a table lookup
    a byte, :data:`BYTE_CLASS`), the rest is only searched for its end (0.53 ms for 10,000 FEN lines
    where finding the line's end first and splitting its fields after took 1.0 ms).
    """
    n = 0
    line = 0
    pos = 0
    size = buf.shape[0]
    problem[0], problem[1], problem[2] = LINE_OK, 0, 0
    starts = np.zeros(6, np.int64)  # token boundaries of a line's first six fields (one allocation per call)
    ends = np.zeros(6, np.int64)
    while pos < size:
        line += 1
        first = pos
        p = pos
        kind = NEWLINE
        while p < size:  # leading white space
            kind = BYTE_CLASS[buf[p]]
            if kind != SPACE:
                break
            p += 1
        count = 0
        if p < size and kind == OTHER and buf[p] != 35:  # a position ('#': a comment line)
            while count < 6:
                starts[count] = p
                kind = NEWLINE
                while p < size:
                    kind = BYTE_CLASS[buf[p]]
                    if kind != OTHER:
                        break
                    p += 1
                ends[count] = p
                count += 1
                if kind != SPACE:  # the line's end, or a NUL
                    break
                while p < size:
                    kind = BYTE_CLASS[buf[p]]
                    if kind != SPACE:
                        break
                    p += 1
                if kind != OTHER:
                    break
        while p < size and buf[p] != 10 and buf[p] != 0:  # the rest of the line
            p += 1
        if p < size and buf[p] == 0:
            problem[0], problem[1], problem[2] = LINE_BINARY, line, p - first + 1
            return n
        if p - first > max_line:
            problem[0], problem[1] = LINE_TOO_LONG, line
            return n
        if count:
            end = p
            while end > ends[count - 1] and BYTE_CLASS[buf[end - 1]] == SPACE:
                end -= 1
            k = min(count, 4)
            if count >= 5 and _is_number(buf, starts[4], ends[4]):
                if count == 6 and _is_number(buf, starts[5], ends[5]):
                    k = 6
                else:
                    k = HALFMOVE_WITHOUT_FULLMOVE
            line_numbers[n] = line
            line_starts[n] = first
            fen_starts[n] = starts[0]
            fen_ends[n] = ends[k - 1]
            fields[n] = k
            o = fen_ends[n]
            while o < end and BYTE_CLASS[buf[o]] == SPACE:
                o += 1
            ops_starts[n] = o
            ops_ends[n] = end
            n += 1
        pos = p + 1
    return n


@njit(cache=True)
def _is_letter(c):
    return 65 <= (c & ~32) <= 90


@njit(cache=True)
def _unescape(buf, start, end):
    """Rewrite the string body ``buf[start:end]`` in place with ``\\"`` -> ``"`` and ``\\\\`` -> ``\\``
    (PGN standard 7); returns its new end."""
    out = start
    k = start
    while k < end:
        c = buf[k]
        if c == 92 and k + 1 < end and (buf[k + 1] == 34 or buf[k + 1] == 92):
            c = buf[k + 1]
            k += 1
        buf[out] = c
        out += 1
        k += 1
    return out


@njit(cache=True)
def split_operations(buf, ops_starts, ops_ends, rows, opcode_starts, opcode_ends, operand_starts, operand_ends,
                     opcode_hashes, problems, problem_at):
    """Split each position's EPD operations into opcode and operand; returns the number of operations.

    Grammar (PGN standard 16.2.4): an operation is an opcode (a letter, then letters, digits
    or ``_``, at most :data:`MAX_OPCODE` characters), white space, operands, ``;`` (the last
    operation of a line may lack it).  Operands are text up to the ``;``; a string operand is
    in double quotes, ``\\"`` and ``\\\\`` inside standing for ``"`` and ``\\`` (PGN strings).

    With ``problems`` of length 0 it only counts (and checks nothing).  Else operation ``j``
    belongs to position ``rows[j]``; its opcode is ``buf[opcode_starts[j]:opcode_ends[j]]``
    (hashed, FNV-1a 64, into ``opcode_hashes[j]``), its operand
    ``buf[operand_starts[j]:operand_ends[j]]`` (stripped; an operand that is one string is
    unquoted and unescaped in place, so ``buf`` must be writeable), and each position's first
    problem goes to ``problems[i]`` (``OP_*``) and ``problem_at[i]`` (its byte offset in
    ``buf``): an opcode that is not a name, a string without its closing quote, an opcode
    given twice.  Operations after a problem are still split (the caller drops the row).
    """
    count_only = problems.shape[0] == 0  # (rows may be empty on the second pass too: no operations)
    m = 0
    for i in range(ops_starts.shape[0]):
        if not count_only:
            problems[i], problem_at[i] = OP_OK, -1
        first_op = m
        p, end = ops_starts[i], ops_ends[i]
        while p < end:
            while p < end and (is_space(buf[p]) or buf[p] == 59):
                p += 1
            if p >= end:
                break
            o_start = p
            h = 0xCBF29CE484222325 - (1 << 64)
            while p < end and not is_space(buf[p]) and buf[p] != 59:
                h = (h ^ buf[p]) * 0x100000001B3
                p += 1
            o_end = p
            while p < end and is_space(buf[p]):
                p += 1
            a_start = p
            quoted = False
            string_start = -1
            while p < end:
                c = buf[p]
                if quoted:
                    if c == 92 and p + 1 < end and (buf[p + 1] == 34 or buf[p + 1] == 92):
                        p += 1
                    elif c == 34:
                        quoted = False
                elif c == 59:
                    break
                elif c == 34:
                    quoted = True
                    string_start = p
                p += 1
            a_end = p
            while a_end > a_start and is_space(buf[a_end - 1]):
                a_end -= 1
            if not count_only:
                if problems[i] == OP_OK:
                    valid = o_end - o_start <= MAX_OPCODE and _is_letter(buf[o_start])
                    for k in range(o_start + 1, o_end):
                        c = buf[k]
                        if not (_is_letter(c) or 48 <= c <= 57 or c == 95):
                            valid = False
                    if not valid:
                        problems[i], problem_at[i] = OP_BAD_OPCODE, o_start
                    elif quoted:
                        problems[i], problem_at[i] = OP_UNTERMINATED, string_start
                    else:
                        for j in range(first_op, m):
                            if opcode_hashes[j] == h:
                                problems[i], problem_at[i] = OP_REPEATED, o_start
                if a_end - a_start >= 2 and buf[a_start] == 34 and buf[a_end - 1] == 34:
                    # one string? its closing quote is the last character
                    k = a_start + 1
                    while k < a_end - 1 and buf[k] != 34:
                        k += 2 if buf[k] == 92 and (buf[k + 1] == 34 or buf[k + 1] == 92) else 1
                    if k == a_end - 1:
                        a_start += 1
                        a_end = _unescape(buf, a_start, a_end - 1)
                rows[m] = i
                opcode_starts[m] = o_start
                opcode_ends[m] = o_end
                operand_starts[m] = a_start
                operand_ends[m] = a_end
                opcode_hashes[m] = h
            m += 1
            p += 1  # the ';'
    return m


@njit(cache=True)
def pack_rows(buf, starts, ends, out, offsets):
    """Copy ``buf[starts[i]:ends[i]]`` + ``\\n`` for every ``i`` into ``out``, row ``i`` at
    ``out[offsets[i]:offsets[i + 1]]`` (``offsets`` int64[n + 1] is filled; ``out`` needs
    ``sum(ends - starts) + n`` bytes): the layout of ``kernels.nnue.batch.evaluate_fens``."""
    pos = 0
    for i in range(starts.shape[0]):
        offsets[i] = pos
        for k in range(starts[i], ends[i]):
            out[pos] = buf[k]
            pos += 1
        out[pos] = 10
        pos += 1
    offsets[starts.shape[0]] = pos


"""Splitting EPD/FEN text: lines -> the FEN fields and the EPD operations of each position.

An EPD line is ``placement side castling en-passant`` followed by operations
(``opcode operand ...;``); a FEN line has the half-move clock and full-move number instead.
Source: the PGN standard, section 16.2 (EPD) and 16.1 (FEN).  The kernels work on the file's
bytes (``uint8``) and record byte ranges; nothing is decoded.
"""

from __future__ import annotations

from numba import njit

from .fen import is_space

#: ``fields`` value of a line whose fifth field is a number but which has no sixth (a FEN
#: missing its full-move number).
HALFMOVE_WITHOUT_FULLMOVE = 5


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


@njit(cache=True)
def split_lines(buf, line_numbers, fen_starts, fen_ends, fields, ops_starts, ops_ends):
    """Find each position line's FEN and operations; returns the number of positions.

    Blank lines and lines whose first character (after white space) is ``#`` are skipped.
    Per position ``i`` (arrays of at least :func:`count_lines` rows): ``line_numbers[i]``
    (1-based), the FEN ``buf[fen_starts[i]:fen_ends[i]]`` (its first four fields, or six when
    the fifth and sixth are numbers), ``fields[i]`` (1-4, 6, or
    :data:`HALFMOVE_WITHOUT_FULLMOVE`) and the operations ``buf[ops_starts[i]:ops_ends[i]]``
    (stripped; empty when none).
    """
    n = 0
    line = 0
    pos = 0
    size = buf.shape[0]
    while pos < size:
        line += 1
        end = pos
        while end < size and buf[end] != 10:
            end += 1
        next_pos = end + 1
        while end > pos and is_space(buf[end - 1]):
            end -= 1
        while pos < end and is_space(buf[pos]):
            pos += 1
        if pos < end and buf[pos] != 35:  # '#'
            # token boundaries of the first six fields
            starts = [0] * 6
            ends = [0] * 6
            count = 0
            p = pos
            while count < 6 and p < end:
                starts[count] = p
                while p < end and not is_space(buf[p]):
                    p += 1
                ends[count] = p
                count += 1
                while p < end and is_space(buf[p]):
                    p += 1
            k = min(count, 4)
            if count >= 5 and _is_number(buf, starts[4], ends[4]):
                if count == 6 and _is_number(buf, starts[5], ends[5]):
                    k = 6
                else:
                    k = HALFMOVE_WITHOUT_FULLMOVE
            line_numbers[n] = line
            fen_starts[n] = pos
            fen_ends[n] = ends[min(k, 6) - 1]
            fields[n] = k
            o = fen_ends[n]
            while o < end and is_space(buf[o]):
                o += 1
            ops_starts[n] = o
            ops_ends[n] = end
            n += 1
        pos = next_pos
    return n


@njit(cache=True)
def split_operations(buf, ops_starts, ops_ends, rows, opcode_starts, opcode_ends, operand_starts, operand_ends,
                     opcode_hashes):
    """Split each position's operations into opcode and operand; returns the number of operations.

    With ``rows`` of length 0 it only counts.  Operation ``j`` belongs to position
    ``rows[j]``; its opcode is ``buf[opcode_starts[j]:opcode_ends[j]]`` (hashed, FNV-1a 64,
    into ``opcode_hashes[j]``) and its operand the text up to the ``;`` outside double
    quotes (stripped; one quoted string loses its quotes).  The last operation may lack its ``;``.
    """
    count_only = rows.shape[0] == 0
    m = 0
    for i in range(ops_starts.shape[0]):
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
            while p < end and (quoted or buf[p] != 59):
                if buf[p] == 34:
                    quoted = not quoted
                p += 1
            a_end = p
            while a_end > a_start and is_space(buf[a_end - 1]):
                a_end -= 1
            if a_end - a_start >= 2 and buf[a_start] == 34 and buf[a_end - 1] == 34:
                inner = True
                for k in range(a_start + 1, a_end - 1):
                    if buf[k] == 34:
                        inner = False
                if inner:
                    a_start += 1
                    a_end -= 1
            if not count_only:
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
    ``sum(ends - starts) + n`` bytes): the layout of ``kernels.batch.evaluate_fens``."""
    pos = 0
    for i in range(starts.shape[0]):
        offsets[i] = pos
        for k in range(starts[i], ends[i]):
            out[pos] = buf[k]
            pos += 1
        out[pos] = 10
        pos += 1
    offsets[starts.shape[0]] = pos


"""The ``.plain`` format: text records (``fen``, ``move``, ``score``, ``ply``, ``result``, ``e``) parsed and
written as Stockfish's tools do (FEN and UCI text as ``Position::fen`` / ``trySet``, ``uci::moveToUci``).

Source: Stockfish's ``tools`` branch, ``src/tools/convert.cpp`` and ``src/extra/nnue_data_binpack_format.h``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..chess.attacks import SQUARE_BB, attackers
from ..chess.bitboard import BB_KINGS, BB_PAWNS, BB_ROOKS, BB_WHITE, lowest_square, popcount, without_lowest
from ..chess.make_move import CASTLE, EN_PASSANT, PROMOTION, ep_possible, type_at
from ..chess.notation import put_square, put_uint, write_fen
from .records import (E_FEN, E_FULLMOVE, E_MISSING, E_MOVE_TEXT, E_NUMBER, E_PLY_RANGE, E_RESULT_RANGE, E_SCORE_RANGE,
                      MAX_FULLMOVE, OK)


#: Bytes reserved per row by the ``.plain`` writer (the longest record is about 150 bytes).
PLAIN_SLOT = 192


@njit(cache=True, inline="always")
def write_move_uci(move, stm, out, pos):
    """Write ``move`` as the tools' ``moveToUci`` (castling as the king's destination); returns the position."""
    mtype = move >> 14
    frm = (move >> 8) & 63
    to = (move >> 2) & 63
    pos = put_square(out, pos, frm)
    if mtype == CASTLE:
        return put_square(out, pos, ((6 if (to & 7) == 7 else 2) + 56 * stm))
    pos = put_square(out, pos, to)
    if mtype == PROMOTION:
        out[pos] = (110, 98, 114, 113)[move & 3]  # n b r q
        pos += 1
    return pos


@njit(cache=True, inline="always")
def put_int(out, pos, value):
    """Write a signed integer in decimal; returns the next position."""
    if value < 0:
        out[pos] = 45
        return put_uint(out, pos + 1, -value)
    return put_uint(out, pos, value)


@njit(cache=True, inline="always")
def put_text(out, pos, text):
    for k in range(len(text)):
        out[pos + k] = text[k]
    return pos + len(text)


@njit(cache=True)
def write_row_fen(bitboards, i, stm, castling, ep, rule50, fullmove, board, flags, out, pos):
    """Write row ``i``'s FEN as the tools' ``Position::fen`` (``board`` uint8[64], ``flags``
    bool[4] scratch); returns the next position."""
    for sq in range(64):
        board[sq] = 0
    white = bitboards[i, BB_WHITE]
    for t in range(6):  # each piece's squares (a later type over an earlier one, as a square-by-square scan)
        b = bitboards[i, t]
        while b:
            sq = lowest_square(b)
            board[sq] = 1 + t + (0 if white & SQUARE_BB[sq] else 6)
            b = without_lowest(b)
    for k in range(4):
        flags[k] = (castling >> k) & 1
    return write_fen(board, stm, flags, ep, rule50, fullmove, out, pos)


_FEN = np.frombuffer(b"fen ", np.uint8).copy()

_MOVE = np.frombuffer(b"\nmove ", np.uint8).copy()

_SCORE = np.frombuffer(b"\nscore ", np.uint8).copy()

_PLY = np.frombuffer(b"\nply ", np.uint8).copy()

_RESULT = np.frombuffer(b"\nresult ", np.uint8).copy()

_END = np.frombuffer(b"\ne\n", np.uint8).copy()


@njit(cache=True, parallel=True)
def write_plain_runs(bitboards, stm, castling, ep, rule50, fullmove, move, score, ply, result, runs, out, ends):
    """Write the rows' ``.plain`` records (the tools' ``emitPlainEntry``) run by run, in parallel: the rows
    ``runs[r] .. runs[r + 1]`` one after another from ``out[runs[r] * PLAIN_SLOT]`` (:data:`PLAIN_SLOT` bytes
    a row are room enough); ``ends[r]`` gets the end of run ``r``'s text."""
    for r in prange(runs.shape[0] - 1):
        board = np.empty(64, np.uint8)
        flags = np.empty(4, np.bool_)
        pos = runs[r] * PLAIN_SLOT
        for i in range(runs[r], runs[r + 1]):
            pos = put_text(out, pos, _FEN)
            s = np.int64(stm[i])
            pos = write_row_fen(bitboards, np.int64(i), s, np.int64(castling[i]), np.int64(ep[i]),
                                np.int64(rule50[i]), np.int64(fullmove[i]), board, flags, out, pos)
            pos = put_text(out, pos, _MOVE)
            pos = write_move_uci(np.int64(move[i]), s, out, pos)
            pos = put_text(out, pos, _SCORE)
            pos = put_int(out, pos, np.int64(score[i]))
            pos = put_text(out, pos, _PLY)
            pos = put_uint(out, pos, np.int64(ply[i]))
            pos = put_text(out, pos, _RESULT)
            pos = put_int(out, pos, np.int64(result[i]))
            pos = put_text(out, pos, _END)
        ends[r] = pos


@njit(cache=True, parallel=True)
def compact_slots(slots, slot, lengths, starts, out):
    """Copy ``lengths[i]`` bytes of slot ``i`` (``slot`` bytes each) to ``out[starts[i]:]``."""
    for i in prange(lengths.shape[0]):
        b = i * slot
        s = starts[i]
        for k in range(lengths[i]):
            out[s + k] = slots[b + k]


@njit(cache=True, parallel=True)
def write_fens(bitboards, stm, castling, ep, rule50, fullmove, out, lengths):
    """Each row's FEN (tools' form) in a 100-byte slot of ``out``; ``lengths[i]`` its length."""
    for i in prange(stm.shape[0]):
        board = np.empty(64, np.uint8)
        flags = np.empty(4, np.bool_)
        end = write_row_fen(bitboards, np.int64(i), np.int64(stm[i]), np.int64(castling[i]), np.int64(ep[i]),
                            np.int64(rule50[i]), np.int64(fullmove[i]), board, flags, out, i * 100)
        lengths[i] = end - i * 100


@njit(cache=True, parallel=True)
def write_ucis(stm, move, out, lengths):
    """Each row's move in UCI (tools' form) in a 5-byte slot of ``out``; ``lengths[i]`` its length."""
    for i in prange(stm.shape[0]):
        lengths[i] = write_move_uci(np.int64(move[i]), np.int64(stm[i]), out, i * 5) - i * 5


@njit(cache=True)
def find_records(buf, starts, ends):
    """Split ``.plain`` text into records, each ending with a line whose first word is ``e``.

    ``starts`` / ``ends`` (int64, room for ``buf.size // 2 + 1``) get each record's byte range
    (``ends`` just past its ``e`` line).  Returns ``(records, tail)``: ``tail`` is where the
    unfinished text after the last record starts.
    """
    n = 0
    start = 0
    i = 0
    size = buf.shape[0]
    while i < size:
        j = i
        while j < size and buf[j] != 10:
            j += 1
        if j >= size:
            break
        k = i
        while k < j and (buf[k] == 32 or buf[k] == 9 or buf[k] == 13):
            k += 1
        if k < j and buf[k] == 101:
            e = k + 1
            if e == j or buf[e] == 32 or buf[e] == 9 or buf[e] == 13:
                starts[n] = start
                ends[n] = j + 1
                n += 1
                start = j + 1
        i = j + 1
    return n, start


@njit(cache=True, inline="always")
def parse_int(buf, start, end):
    """The decimal integer ``buf[start:end]`` (after blanks, optional sign, within int32, nothing
    after the digits); returns ``(value, ok)``."""
    i = start
    while i < end and (buf[i] == 32 or buf[i] == 9):
        i += 1
    negative = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        negative = buf[i] == 45
        i += 1
    v = 0
    digits = 0
    while i < end and 48 <= buf[i] <= 57:
        v = v * 10 + (buf[i] - 48)
        digits += 1
        i += 1
        if v > 2147483648:
            return 0, False
    if digits == 0 or i < end or (not negative and v > 2147483647):
        return 0, False
    return (-v if negative else v), True


@njit(cache=True)
def parse_fen_tools(buf, start, end, bb):
    """The tools' ``Position::trySet`` on ``buf[start:end]``: placement (one king per side, no
    pawn on ranks 1 and 8), side, castling (``-`` or distinct ``KQkq``), en passant (``-`` or a
    square; dropped unless a capture is possible), optional rule-50 counter and full-move number.

    A full-move number outside 1 .. 32,768 is refused (:data:`E_FULLMOVE`) where the tools wrap it: the
    formats keep the game ply ``2 * (fullmove - 1) + stm`` in 16 bits, so 0 read back as 32,768 and
    40,000 as 7,232.

    Returns ``(stm, castling, ep, rule50, fullmove, problem, problem_offset)``: ``problem`` an ``E_*``
    code (``OK`` when good) and ``problem_offset`` the byte at fault (-1 when good).
    """
    for k in range(8):
        bb[k] = 0
    f = 0
    r = 7
    last_skip = False
    i = start
    while i < end and buf[i] != 32:
        c = buf[i]
        if 49 <= c <= 56:
            if last_skip:
                return 0, 0, -1, 0, 0, E_FEN, i
            last_skip = True
            f += c - 48
            if f > 8:
                return 0, 0, -1, 0, 0, E_FEN, i
        elif c == 47:
            last_skip = False
            if f != 8 or r == 0:
                return 0, 0, -1, 0, 0, E_FEN, i
            f = 0
            r -= 1
        else:
            t = -1
            lower = c | 32
            for k in range(6):
                if lower == (112, 110, 98, 114, 113, 107)[k]:
                    t = k
            if t < 0 or f > 7:
                return 0, 0, -1, 0, 0, E_FEN, i
            last_skip = False
            bit = SQUARE_BB[8 * r + f]
            bb[t] |= bit
            bb[BB_WHITE + (0 if c < 97 else 1)] |= bit
            f += 1
        i += 1
    if f != 8 or r != 0:
        return 0, 0, -1, 0, 0, E_FEN, i
    if popcount(bb[BB_KINGS] & bb[BB_WHITE]) != 1 or popcount(bb[BB_KINGS] & bb[BB_WHITE + 1]) != 1:
        return 0, 0, -1, 0, 0, E_FEN, start
    if bb[BB_PAWNS] & (0xFF | (0xFF << 56)):
        return 0, 0, -1, 0, 0, E_FEN, start
    # side to move
    i += 1
    if i + 1 > end or not (buf[i] == 119 or buf[i] == 98) or (i + 1 < end and buf[i + 1] != 32):
        return 0, 0, -1, 0, 0, E_FEN, i
    stm = 0 if buf[i] == 119 else 1
    ksq = lowest_square(bb[BB_KINGS] & bb[BB_WHITE + 1 - stm])
    occ = bb[BB_WHITE] | bb[BB_WHITE + 1]
    if attackers(bb, stm, ksq, occ) != 0:
        return 0, 0, -1, 0, 0, E_FEN, i  # the side not to move is in check
    i += 2
    # castling
    castling = 0
    if i < end and buf[i] == 45:
        i += 1
    else:
        while i < end and buf[i] != 32:
            c = buf[i]
            bit = 1 if c == 75 else (2 if c == 81 else (4 if c == 107 else (8 if c == 113 else 0)))
            if bit == 0 or castling & bit:
                return 0, 0, -1, 0, 0, E_FEN, i
            castling |= bit
            i += 1
    if i >= end or buf[i] != 32:
        return 0, 0, -1, 0, 0, E_FEN, i
    i += 1
    # en passant
    ep = -1
    if i < end and buf[i] == 45 and (i + 1 == end or buf[i + 1] == 32):
        i += 1
    elif i + 1 < end and 97 <= buf[i] <= 104 and 49 <= buf[i + 1] <= 56 and (i + 2 == end or buf[i + 2] == 32):
        ep = (buf[i] - 97) + 8 * (buf[i + 1] - 49)
        i += 2
    else:
        return 0, 0, -1, 0, 0, E_FEN, i
    rule50 = 0
    ply = 0
    for field in range(2):  # optional half-move clock and full-move number
        if i >= end:
            break
        i += 1
        j = i
        while j < end and buf[j] != 32:
            j += 1
        if j > i:
            v, ok = parse_int(buf, i, j)
            if not ok:
                return 0, 0, -1, 0, 0, E_FEN, i
            if field == 0:
                rule50 = v & 255
            elif not 1 <= v <= MAX_FULLMOVE:
                return 0, 0, -1, 0, 0, E_FULLMOVE, i
            else:
                ply = 2 * (v - 1) + stm
        i = j
    if ep >= 0 and not ep_possible(bb, ep, stm):
        ep = -1
    return stm, castling, ep, rule50, ply // 2 + 1, OK, -1


_KEYS = (b"fen", b"move", b"score", b"ply", b"result")

KEY_BYTES = np.frombuffer(b"".join(_KEYS), np.uint8).copy()

KEY_STARTS = np.cumsum([0] + [len(k) for k in _KEYS]).astype(np.int64)


@njit(cache=True)
def record_key(buf, start, end):
    """Index of the ``.plain`` key ``buf[start:end]`` in fen, move, score, ply, result; -1 if other."""
    for k in range(5):
        a = KEY_STARTS[k]
        n = KEY_STARTS[k + 1] - a
        if end - start == n:
            same = True
            for j in range(n):
                if buf[start + j] != KEY_BYTES[a + j]:
                    same = False
                    break
            if same:
                return k
    return -1


@njit(cache=True, parallel=True)
def parse_plain(buf, starts, ends, o_bb, o_stm, o_castling, o_ep, o_rule50, o_fullmove, o_move, o_score, o_ply,
                o_result, problems, offsets):
    """Parse ``.plain`` records ``buf[starts[i]:ends[i]]`` (lines ``fen``, ``move``, ``score``,
    ``ply``, ``result``, ended by ``e``; other keys ignored, as the tools do) into rows.
    ``problems[i]`` gets an ``E_*`` code and ``offsets[i]`` the byte offset at fault."""
    for i in prange(starts.shape[0]):
        bb = np.zeros(8, np.int64)
        problems[i] = OK
        offsets[i] = -1
        seen = 0
        stm = 0
        castling = 0
        ep = -1
        move_start = -1
        move_end = -1
        p = starts[i]
        end = ends[i]
        bad = OK
        bad_at = -1
        while p < end and bad == OK:
            q = p
            while q < end and buf[q] != 10:
                q += 1
            k = p
            while k < q and (buf[k] == 32 or buf[k] == 9):
                k += 1
            ks = k
            while k < q and buf[k] != 32 and buf[k] != 9 and buf[k] != 13:
                k += 1
            ke = k
            while k < q and (buf[k] == 32 or buf[k] == 9):
                k += 1
            vs = k
            ve = q
            while ve > vs and (buf[ve - 1] == 13 or buf[ve - 1] == 32 or buf[ve - 1] == 9):
                ve -= 1
            field = record_key(buf, ks, ke)
            if field == 0:
                stm, castling, ep, rule50, fullmove, problem, at = parse_fen_tools(buf, vs, ve, bb)
                if problem != OK:
                    bad = problem
                    bad_at = at
                    break
                o_rule50[i] = rule50
                o_fullmove[i] = fullmove
            elif field == 1:
                move_start = vs
                move_end = ve
            elif field > 1:
                v, ok = parse_int(buf, vs, ve)
                if not ok:
                    bad = E_NUMBER
                elif field == 2 and not -32768 <= v <= 32767:
                    bad = E_SCORE_RANGE
                elif field == 3 and not 0 <= v <= 65535:
                    bad = E_PLY_RANGE
                elif field == 4 and not -1 <= v <= 1:
                    bad = E_RESULT_RANGE
                if bad != OK:
                    bad_at = ks  # the line, so that the message shows the field
                    break
                if field == 2:
                    o_score[i] = v
                elif field == 3:
                    o_ply[i] = v
                else:
                    o_result[i] = v
            if field >= 0:
                seen |= 1 << field
            p = q + 1
        if bad == OK and seen != 31:
            bad = E_MISSING
            bad_at = starts[i]
        if bad == OK:
            n = move_end - move_start
            s = move_start
            ok = (n == 4 or n == 5) and 97 <= buf[s] <= 104 and 49 <= buf[s + 1] <= 56 and 97 <= buf[s + 2] <= 104 \
                and 49 <= buf[s + 3] <= 56
            promo = -1
            if ok and n == 5:
                c = buf[s + 4] | 32
                promo = 0 if c == 110 else (1 if c == 98 else (2 if c == 114 else (3 if c == 113 else -1)))
                ok = promo >= 0
            if not ok:
                bad = E_MOVE_TEXT
                bad_at = s
            else:
                frm = (buf[s] - 97) + 8 * (buf[s + 1] - 49)
                to = (buf[s + 2] - 97) + 8 * (buf[s + 3] - 49)
                pt = type_at(bb, frm)
                own_rook = (bb[BB_ROOKS] & bb[BB_WHITE + stm] & SQUARE_BB[to]) != 0
                if promo >= 0:
                    move = (PROMOTION << 14) | (frm << 8) | (to << 2) | promo
                elif pt == BB_KINGS and (own_rook or abs((frm & 7) - (to & 7)) > 1):
                    # King to its castling square (e1g1) or onto its own rook (e1h1, Chess960 style).
                    rook = to if own_rook else (7 if (to & 7) > (frm & 7) else 0) + 56 * stm
                    move = (CASTLE << 14) | ((4 + 56 * stm) << 8) | (rook << 2)
                elif pt == BB_PAWNS and to == ep:
                    move = (EN_PASSANT << 14) | (frm << 8) | (to << 2)
                else:
                    move = (frm << 8) | (to << 2)
                o_move[i] = 0 if frm == to else move
        if bad != OK:
            problems[i] = bad
            offsets[i] = bad_at
            continue
        for k in range(8):
            o_bb[i, k] = bb[k]
        o_stm[i] = stm
        o_castling[i] = castling
        o_ep[i] = ep

"""The ``.bin`` format: 40-byte records (nodchip's ``PackedSfenValue``: a Huffman-coded board, the move,
score, ply and result), read and written as Stockfish's tools do.

Source: Stockfish's ``tools`` branch, ``src/extra/nnue_data_binpack_format.h`` (nodchip::SfenPacker,
PackedSfenValue).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..chess.attacks import SQUARE_BB
from ..chess.bitboard import BB_KINGS, BB_WHITE, lowest_square, popcount
from ..chess.make_move import CASTLE, EN_PASSANT, NORMAL, PROMOTION, ep_possible
from .records import E_BIN_CODE, E_BIN_OVERFLOW, E_KINGS, OK, wrap16


#: Bytes of a ``.bin`` record (nodchip ``PackedSfenValue``).
BIN_RECORD = 40

#: Huffman codes of the ``.bin`` board (piece type 0..4 -> code, 4 bits; an empty square is one 0 bit).
BIN_CODES = np.array([1, 3, 5, 7, 9], np.int64)


@njit(cache=True)
def read_bin_bits(buf, p, cursor, count):
    """``count`` bits of the 32-byte ``.bin`` board at ``buf[p]`` from bit ``cursor``, least
    significant first (nodchip ``BitStream``); -1 past 256 bits."""
    if cursor + count > 256:
        return -1
    v = 0
    for k in range(count):
        c = cursor + k
        v |= ((np.int64(buf[p + (c >> 3)]) >> (c & 7)) & 1) << k
    return v


@njit(cache=True, parallel=True)
def decode_bin(buf, o_bb, o_stm, o_castling, o_ep, o_rule50, o_fullmove, o_move, o_score, o_ply, o_result,
               problems):
    """Decode 40-byte ``.bin`` records (nodchip ``PackedSfenValue``: Huffman board, score, move,
    game ply, result) into rows; ``problems[i]`` gets an ``E_*`` code (0 when the record is good)."""
    n = o_stm.shape[0]
    for i in prange(n):
        p = i * BIN_RECORD
        bb = np.zeros(8, np.int64)
        problems[i] = OK
        stm = read_bin_bits(buf, p, 0, 1)
        wk = read_bin_bits(buf, p, 1, 6)
        bk = read_bin_bits(buf, p, 7, 6)
        if wk == bk:
            problems[i] = E_KINGS
            continue
        bb[BB_KINGS] = SQUARE_BB[wk] | SQUARE_BB[bk]
        bb[BB_WHITE] = SQUARE_BB[wk]
        bb[BB_WHITE + 1] = SQUARE_BB[bk]
        cursor = 13
        bad = False
        for r in range(7, -1, -1):
            for f in range(8):
                sq = 8 * r + f
                if sq == wk or sq == bk:
                    continue
                b = read_bin_bits(buf, p, cursor, 1)
                if b < 0:
                    bad = True
                    break
                cursor += 1
                if b == 0:
                    continue
                code = 1 | (read_bin_bits(buf, p, cursor, 3) << 1)
                cursor += 3
                colour = read_bin_bits(buf, p, cursor, 1)
                cursor += 1
                if code < 0 or colour < 0 or (code - 1) // 2 > 4 or code > 9:
                    bad = True
                    break
                bb[(code - 1) // 2] |= SQUARE_BB[sq]
                bb[BB_WHITE + colour] |= SQUARE_BB[sq]
            if bad:
                break
        if bad:
            problems[i] = E_BIN_CODE
            continue
        cr = read_bin_bits(buf, p, cursor, 4)
        castling = cr  # K, Q, k, q in stream order are the column's bits 0..3
        cursor += 4
        ep = -1
        if read_bin_bits(buf, p, cursor, 1) == 1:
            ep = read_bin_bits(buf, p, cursor + 1, 6)
            cursor += 6
            if not ep_possible(bb, ep, stm):
                ep = -1
        cursor += 1
        rule50 = read_bin_bits(buf, p, cursor, 6)
        fullmove = read_bin_bits(buf, p, cursor + 6, 8) | (read_bin_bits(buf, p, cursor + 14, 8) << 8)
        rule50 |= read_bin_bits(buf, p, cursor + 22, 1) << 6
        if rule50 < 0 or fullmove < 0:
            problems[i] = E_BIN_CODE
            continue
        ply_pos = (2 * (fullmove - 1) + stm) & 0xFFFF
        raw = np.int64(buf[p + 34]) | (np.int64(buf[p + 35]) << 8)
        flag = raw >> 14
        mtype = (PROMOTION if flag == 1 else (EN_PASSANT if flag == 2 else (CASTLE if flag == 3 else NORMAL)))
        frm = (raw >> 6) & 63
        to = raw & 63
        move = (mtype << 14) | (frm << 8) | (to << 2) | ((raw >> 12) & 3 if mtype == PROMOTION else 0)
        if frm == to:
            move = 0  # the tools' CompressedMove of from == to is the null move
        for k in range(8):
            o_bb[i, k] = bb[k]
        o_stm[i] = stm
        o_castling[i] = castling
        o_ep[i] = ep
        o_rule50[i] = rule50
        o_fullmove[i] = ply_pos // 2 + 1
        o_move[i] = move
        o_score[i] = wrap16(np.int64(buf[p + 32]) | (np.int64(buf[p + 33]) << 8))
        o_ply[i] = np.int64(buf[p + 36]) | (np.int64(buf[p + 37]) << 8)
        g = np.int64(buf[p + 38])
        o_result[i] = g - 256 if g >= 128 else g


@njit(cache=True, inline="always")
def write_bin_bits(out, p, cursor, value, count):
    """Write ``count`` bits of ``value`` least significant first; returns the cursor (may pass 256)."""
    for k in range(count):
        c = cursor + k
        if c < 256 and (value >> k) & 1:
            out[p + (c >> 3)] |= 1 << (c & 7)
    return cursor + count


@njit(cache=True, parallel=True)
def encode_bin(bitboards, stm, castling, ep, rule50, fullmove, move, score, ply, result, out, problems):
    """Encode rows as 40-byte ``.bin`` records into ``out`` (uint8[n * 40], zeroed): nodchip
    ``SfenPacker::pack`` and ``trainingDataEntryToPackedSfenValue``; ``problems[i]`` as in
    :func:`decode_bin`."""
    n = stm.shape[0]
    for i in prange(n):
        p = i * BIN_RECORD
        problems[i] = OK
        s = np.int64(stm[i])
        wkb = bitboards[i, BB_KINGS] & bitboards[i, BB_WHITE]
        bkb = bitboards[i, BB_KINGS] & bitboards[i, BB_WHITE + 1]
        if popcount(wkb) != 1 or popcount(bkb) != 1:
            problems[i] = E_KINGS
            continue
        c = write_bin_bits(out, p, 0, s, 1)
        c = write_bin_bits(out, p, c, lowest_square(wkb), 6)
        c = write_bin_bits(out, p, c, lowest_square(bkb), 6)
        for r in range(7, -1, -1):
            for f in range(8):
                sq = 8 * r + f
                bit = SQUARE_BB[sq]
                t = -1
                for k in range(6):
                    if bitboards[i, k] & bit:
                        t = k
                if t == BB_KINGS:
                    continue
                if t < 0:
                    c = write_bin_bits(out, p, c, 0, 1)
                    continue
                c = write_bin_bits(out, p, c, BIN_CODES[t], 4)
                c = write_bin_bits(out, p, c, 0 if bitboards[i, BB_WHITE] & bit else 1, 1)
        cr = np.int64(castling[i])
        c = write_bin_bits(out, p, c, cr, 4)  # bit order K, Q, k, q is the column's
        e = np.int64(ep[i])
        if e < 0:
            c = write_bin_bits(out, p, c, 0, 1)
        else:
            c = write_bin_bits(out, p, c, 1, 1)
            c = write_bin_bits(out, p, c, e, 6)
        r50 = np.int64(rule50[i])
        fm = np.int64(fullmove[i])
        c = write_bin_bits(out, p, c, r50, 6)
        c = write_bin_bits(out, p, c, fm, 8)
        c = write_bin_bits(out, p, c, fm >> 8, 8)
        c = write_bin_bits(out, p, c, r50 >> 6, 1)
        if c > 256:
            problems[i] = E_BIN_OVERFLOW
            continue
        sc = np.int64(score[i]) & 0xFFFF
        out[p + 32] = sc & 255
        out[p + 33] = sc >> 8
        m = np.int64(move[i])
        mtype = m >> 14
        flag = 1 if mtype == PROMOTION else (2 if mtype == EN_PASSANT else (3 if mtype == CASTLE else 0))
        raw = (flag << 14) | ((m & 3 if mtype == PROMOTION else 0) << 12) | (((m >> 8) & 63) << 6) | ((m >> 2) & 63)
        if m == 0:
            raw = 0
        out[p + 34] = raw & 255
        out[p + 35] = raw >> 8
        pl = np.int64(ply[i])
        out[p + 36] = pl & 255
        out[p + 37] = pl >> 8
        out[p + 38] = np.int64(result[i]) & 255
        out[p + 39] = 255

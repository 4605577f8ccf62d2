"""The ``.binpack`` format: blocks of chains, each a packed first position then its moves and scores
(``PackedMoveScoreList``: move indices among the legal moves, score deltas in a variable-length code), read and
written byte for byte as Stockfish's tools do, blocks closed at the same sizes.

Source: Stockfish's ``tools`` branch, ``src/extra/nnue_data_binpack_format.h`` (binpack::PackedMoveScoreList,
CompressedTrainingDataEntryReader / Writer, chess::Position::compress / decompress).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..chess.attacks import KING_ATTACKS, SQUARE_BB, piece_attacks
from ..chess.bitboard import BB_KINGS, BB_PAWNS, BB_WHITE, lowest_square, popcount, without_lowest
from ..chess.make_move import (BLACK_OO, BLACK_OOO, CASTLE, EN_PASSANT, NORMAL, PROMOTION, WHITE_OO, WHITE_OOO,
                               do_move, pawn_targets, type_at)
from .records import (E_CASTLE, E_KINGS, E_MOVE_INDEX, E_NIBBLE, E_NULL_MOVE, E_OCCUPANCY, E_PIECE_INDEX, E_SCORE_VLE,
                      E_TRUNCATED, OK, store_row, to_signed, to_unsigned, wrap16)


#: Bytes of a chain's first entry (24 position + 2 move + 2 score + 2 ply/result + 2 rule-50) and
#: of the ply count that follows it.
ENTRY_BYTES, CHAIN_HEAD_BYTES = 32, 34

#: Block size at which the tools' writer closes a block (checked before each new chain), and the
#: largest block the tools' reader accepts.
BLOCK_TARGET, BLOCK_LIMIT = 1 << 20, 100 << 20

#: Longest chain the ply count (uint16) can describe: the writer starts a new chain after it.
MAX_CHAIN_PLIES = 65535


def _before() -> np.ndarray:
    return np.array([(1 << s) - 1 for s in range(64)], np.uint64).view(np.int64)


#: Squares below each square (``a1 .. sq - 1``), int64[64].
BEFORE = _before()


@njit(cache=True, inline="always")
def used_bits(count):
    """Bits needed for an index below ``count`` (0 for a count of 0 or 1): ``usedBitsSafe``."""
    n = 0
    v = count - 1
    while v > 0:
        n += 1
        v >>= 1
    return n


@njit(cache=True, inline="always")
def nth_square(b, n):
    """Square of the ``n``-th (from 0, lowest first) set bit of bitboard ``b``."""
    for _ in range(n):
        b = without_lowest(b)
    return lowest_square(b)


@njit(cache=True, inline="always")
def read_bits(buf, cursor, count, end):
    """``count`` (0..8) bits at bit ``cursor`` of ``buf``, most significant first; -1 past byte ``end``."""
    if count == 0:
        return 0
    last = (cursor + count - 1) >> 3
    if last >= end:
        return -1
    first = cursor >> 3
    w = np.int64(buf[first]) << 8
    if first + 1 < end:
        w |= buf[first + 1]
    return (w >> (16 - (cursor & 7) - count)) & ((1 << count) - 1)


@njit(cache=True, inline="always")
def write_bits(out, cursor, value, count):
    """Append ``count`` bits of ``value`` at bit ``cursor`` (bytes past it are zero); returns the cursor."""
    for k in range(count - 1, -1, -1):
        if (value >> k) & 1:
            out[cursor >> 3] |= 128 >> (cursor & 7)
        cursor += 1
    return cursor


@njit(cache=True, inline="always")
def read_index(buf, cursor, end, count):
    """An index below ``count`` in ``used_bits(count)`` bits at bit ``cursor``; returns
    ``(index, cursor, problem)`` (:data:`E_TRUNCATED` past byte ``end``, :data:`E_MOVE_INDEX` if
    the index is not below ``count``)."""
    bits = used_bits(count)
    v = read_bits(buf, cursor, bits, end)
    if v < 0:
        return 0, cursor, E_TRUNCATED
    if v >= count:
        return 0, cursor + bits, E_MOVE_INDEX
    return v, cursor + bits, OK


@njit(cache=True)
def decode_ply(buf, cursor, end, bb, stm, castling, ep):
    """Decode one ply's move from the movetext at bit ``cursor``; returns ``(move, cursor, problem)``."""
    ours = bb[BB_WHITE + stm]
    occ = ours | bb[BB_WHITE + 1 - stm]
    pid, cursor, problem = read_index(buf, cursor, end, popcount(ours))
    if problem:
        return 0, cursor, E_PIECE_INDEX if problem == E_MOVE_INDEX else problem
    frm = nth_square(ours, pid)
    pt = type_at(bb, frm)
    if pt == BB_PAWNS:
        dest = pawn_targets(bb, stm, frm, ep)
        promoting = (frm >> 3) == (6 if stm == 0 else 1)
        mid, cursor, problem = read_index(buf, cursor, end, popcount(dest) * (4 if promoting else 1))
        if problem:
            return 0, cursor, problem
        if promoting:
            to = nth_square(dest, mid >> 2)
            return (PROMOTION << 14) | (frm << 8) | (to << 2) | (mid & 3), cursor, OK
        to = nth_square(dest, mid)
        kind = EN_PASSANT if to == ep else NORMAL
        return (kind << 14) | (frm << 8) | (to << 2), cursor, OK
    if pt == BB_KINGS:
        att = KING_ATTACKS[frm] & ~ours
        acount = popcount(att)
        mid, cursor, problem = read_index(buf, cursor, end, acount + popcount(castling & (3 if stm == 0 else 12)))
        if problem:
            return 0, cursor, problem
        if mid >= acount:
            long_side = mid == acount and (castling & (WHITE_OOO if stm == 0 else BLACK_OOO)) != 0
            king_from = 4 + 56 * stm
            rook_from = (0 if long_side else 7) + 56 * stm
            if frm != king_from or not (bb[3] & ours & SQUARE_BB[rook_from]):
                return 0, cursor, E_CASTLE
            return (CASTLE << 14) | (king_from << 8) | (rook_from << 2), cursor, OK
        return (frm << 8) | (nth_square(att, mid) << 2), cursor, OK
    att = piece_attacks(pt, stm, frm, occ) & ~ours
    mid, cursor, problem = read_index(buf, cursor, end, popcount(att))
    if problem:
        return 0, cursor, problem
    return (frm << 8) | (nth_square(att, mid) << 2), cursor, OK


@njit(cache=True)
def decode_entry(buf, p, bb):
    """Unpack the 32-byte chain head at ``buf[p]`` into ``bb`` (cleared first).

    Returns ``(stm, castling, ep, rule50, move, score, ply, result, problem)``.
    """
    for k in range(8):
        bb[k] = 0
    occ = np.int64(0)
    for k in range(8):
        occ = (occ << 8) | buf[p + k]
    stm = 0
    castling = 0
    ep = -1
    if popcount(occ) > 32:
        return 0, 0, -1, 0, 0, 0, 0, 0, E_OCCUPANCY
    rest = occ
    i = 0
    while rest:
        sq = lowest_square(rest)
        rest = without_lowest(rest)
        byte = np.int64(buf[p + 8 + (i >> 1)])
        nib = (byte >> 4) if i & 1 else (byte & 15)
        i += 1
        bit = SQUARE_BB[sq]
        if nib < 12:
            bb[nib >> 1] |= bit
            bb[BB_WHITE + (nib & 1)] |= bit
        elif nib == 12:
            if (sq >> 3) == 3:
                bb[BB_PAWNS] |= bit
                bb[BB_WHITE] |= bit
                ep = sq - 8
            elif (sq >> 3) == 4:
                bb[BB_PAWNS] |= bit
                bb[BB_WHITE + 1] |= bit
                ep = sq + 8
            else:
                return 0, 0, -1, 0, 0, 0, 0, 0, E_NIBBLE
        elif nib == 13 or nib == 14:
            colour = nib - 13
            if sq == 56 * colour:
                castling |= WHITE_OOO << (2 * colour)
            elif sq == 56 * colour + 7:
                castling |= WHITE_OO << (2 * colour)
            else:
                return 0, 0, -1, 0, 0, 0, 0, 0, E_NIBBLE
            bb[3] |= bit
            bb[BB_WHITE + colour] |= bit
        else:
            bb[BB_KINGS] |= bit
            bb[BB_WHITE + 1] |= bit
            stm = 1
    if popcount(bb[BB_KINGS] & bb[BB_WHITE]) != 1 or popcount(bb[BB_KINGS] & bb[BB_WHITE + 1]) != 1:
        return 0, 0, -1, 0, 0, 0, 0, 0, E_KINGS
    move = (np.int64(buf[p + 24]) << 8) | buf[p + 25]
    score = to_signed((np.int64(buf[p + 26]) << 8) | buf[p + 27])
    pr = (np.int64(buf[p + 28]) << 8) | buf[p + 29]
    rule50 = buf[p + 31]
    return stm, castling, ep, rule50, move, score, pr & 0x3FFF, to_signed(pr >> 14), OK


@njit(cache=True)
def decode_block(buf, start, end, row0, capacity, o_bb, o_stm, o_castling, o_ep, o_rule50, o_fullmove, o_move,
                 o_score, o_ply, o_result, o_chain):
    """Decode the chains of one block's payload ``buf[start:end]`` into rows ``row0 ..``.

    Each row's ``chain`` is the chain's index within the block.  Returns
    ``(rows, chains, problem, offset)``: ``problem`` is 0, an ``E_*`` code with the byte offset
    of the chain or movetext byte at fault, or -1 when more than ``capacity`` rows were needed.
    """
    bb = np.zeros(8, np.int64)
    rows = 0
    chains = 0
    p = start
    while p < end:
        if end - p < CHAIN_HEAD_BYTES:
            return rows, chains, E_TRUNCATED, p
        stm, castling, ep, rule50, move, score, ply, result, problem = decode_entry(buf, p, bb)
        if problem:
            return rows, chains, problem, p
        plies = (np.int64(buf[p + 32]) << 8) | buf[p + 33]
        if rows + plies + 1 > capacity:
            return rows, chains, -1, p
        if plies and move == 0:
            return rows, chains, E_NULL_MOVE, p + 24
        r = row0 + rows
        store_row(r, bb, stm, castling, ep, rule50, ply // 2 + 1, move, score, ply, result, chains, o_bb, o_stm,
                  o_castling, o_ep, o_rule50, o_fullmove, o_move, o_score, o_ply, o_result, o_chain)
        rows += 1
        cursor = (p + CHAIN_HEAD_BYTES) * 8
        last = wrap16(-score)
        for _ in range(plies):
            castling, ep, rule50, ok = do_move(bb, stm, castling, ep, rule50, move)
            if not ok:
                return rows, chains, E_MOVE_INDEX, cursor >> 3
            stm = 1 - stm
            ply = (ply + 1) & 0xFFFF
            result = wrap16(-result)
            at = cursor >> 3
            move, cursor, problem = decode_ply(buf, cursor, end, bb, stm, castling, ep)
            if problem:
                return rows, chains, problem, at
            v = 0
            shift = 0
            while True:
                block = read_bits(buf, cursor, 5, end)
                if block < 0:
                    return rows, chains, E_TRUNCATED, cursor >> 3
                cursor += 5
                v |= (block & 15) << shift
                if not block >> 4:
                    break
                shift += 4
                if shift >= 16:
                    return rows, chains, E_SCORE_VLE, cursor >> 3
            score = wrap16(last + to_signed(v & 0xFFFF))
            last = wrap16(-score)
            r = row0 + rows
            store_row(r, bb, stm, castling, ep, rule50, ply // 2 + 1, move, score, ply, result, chains, o_bb,
                      o_stm, o_castling, o_ep, o_rule50, o_fullmove, o_move, o_score, o_ply, o_result, o_chain)
            rows += 1
        p = (cursor + 7) >> 3
        chains += 1
    return rows, chains, OK, -1


@njit(cache=True, parallel=True)
def decode_blocks(buf, starts, ends, row0, capacity, o_bb, o_stm, o_castling, o_ep, o_rule50, o_fullmove, o_move,
                  o_score, o_ply, o_result, o_chain, rows, chains, problems, offsets):
    """:func:`decode_block` for each block ``buf[starts[b]:ends[b]]`` in parallel, block ``b``'s rows
    from ``row0[b]`` (at most ``capacity[b]``); per-block results into ``rows``, ``chains``,
    ``problems`` and ``offsets`` (int64[blocks] each)."""
    for b in prange(starts.shape[0]):
        n, c, problem, offset = decode_block(buf, starts[b], ends[b], row0[b], capacity[b], o_bb, o_stm, o_castling,
                                             o_ep, o_rule50, o_fullmove, o_move, o_score, o_ply, o_result, o_chain)
        rows[b] = n
        chains[b] = c
        problems[b] = problem
        offsets[b] = offset


@njit(cache=True)
def same_position(bb, stm, castling, ep, bitboards, i, stm_i, castling_i, ep_i):
    """Whether the position (``bb``, ...) equals row ``i``'s (pieces, side, castling, en passant)."""
    if stm != stm_i or castling != castling_i or ep != ep_i:
        return False
    for k in range(8):
        if bb[k] != bitboards[i, k]:
            return False
    return True


@njit(cache=True, parallel=True)
def continuations(bitboards, stm, castling, ep, rule50, move, ply, result, cont):
    """``cont[i]`` = row ``i`` continues row ``i - 1``'s game: the tools' ``isContinuation``
    (results opposite, ply + 1, and row ``i - 1``'s move leads to row ``i``'s position).
    ``cont[0]`` is False."""
    n = bitboards.shape[0]
    for i in prange(n):
        if i == 0:
            cont[i] = False
            continue
        j = i - 1
        if np.int64(result[j]) != -np.int64(result[i]) or np.int64(ply[j]) + 1 != np.int64(ply[i]):
            cont[i] = False
            continue
        bb = bitboards[j].copy()
        c, e, _, ok = do_move(bb, np.int64(stm[j]), np.int64(castling[j]), np.int64(ep[j]), np.int64(rule50[j]),
                              np.int64(move[j]))
        cont[i] = ok and same_position(bb, 1 - np.int64(stm[j]), c, e, bitboards, np.int64(i), np.int64(stm[i]),
                                       np.int64(castling[i]), np.int64(ep[i]))


@njit(cache=True)
def limit_chains(cont):
    """Start a new chain after :data:`MAX_CHAIN_PLIES` continuations (the ply count is a uint16)."""
    run = 0
    for i in range(cont.shape[0]):
        if cont[i]:
            run += 1
            if run > MAX_CHAIN_PLIES:
                cont[i] = False
                run = 0
        else:
            run = 0


@njit(cache=True)
def encode_move_index(bb, stm, castling, ep, move):
    """The tools' ``addMoveScore`` indices: ``(piece_id, piece_bits, move_id, move_bits)``, or a
    negative ``move_bits`` if the move is not among the piece's encodable moves."""
    ours = bb[BB_WHITE + stm]
    occ = ours | bb[BB_WHITE + 1 - stm]
    mtype = move >> 14
    frm = (move >> 8) & 63
    to = (move >> 2) & 63
    if not ours & SQUARE_BB[frm]:
        return 0, 0, 0, -1
    pid = popcount(ours & BEFORE[frm])
    pbits = used_bits(popcount(ours))
    pt = type_at(bb, frm)
    if pt == BB_PAWNS:
        dest = pawn_targets(bb, stm, frm, ep)
        if not dest & SQUARE_BB[to]:
            return 0, 0, 0, -1
        mid = popcount(dest & BEFORE[to])
        count = popcount(dest)
        promoting = (frm >> 3) == (6 if stm == 0 else 1)
        if promoting != (mtype == PROMOTION) or (mtype == EN_PASSANT) != (to == ep):
            return 0, 0, 0, -1
        if promoting:
            return pid, pbits, mid * 4 + (move & 3), used_bits(count * 4)
        return pid, pbits, mid, used_bits(count)
    if mtype == PROMOTION or mtype == EN_PASSANT:
        return 0, 0, 0, -1
    if pt == BB_KINGS:
        att = KING_ATTACKS[frm] & ~ours
        acount = popcount(att)
        total = acount + popcount(castling & (3 if stm == 0 else 12))
        if mtype == CASTLE:
            short = (to & 7) == 7
            right = (WHITE_OO if short else WHITE_OOO) << (2 * stm)
            if not castling & right or frm != 4 + 56 * stm or to != (7 if short else 0) + 56 * stm:
                return 0, 0, 0, -1
            mid = acount - 1
            if castling & (WHITE_OOO << (2 * stm)):
                mid += 1
            if short:
                mid += 1
            return pid, pbits, mid, used_bits(total)
        if not att & SQUARE_BB[to]:
            return 0, 0, 0, -1
        return pid, pbits, popcount(att & BEFORE[to]), used_bits(total)
    if mtype == CASTLE:
        return 0, 0, 0, -1
    att = piece_attacks(pt, stm, frm, occ) & ~ours
    if not att & SQUARE_BB[to]:
        return 0, 0, 0, -1
    return pid, pbits, popcount(att & BEFORE[to]), used_bits(popcount(att))


@njit(cache=True)
def encode_chains(bitboards, stm, castling, ep, rule50, move, score, ply, result, cont, out, chain_ends):
    """Encode rows as binpack chains (chain head, ply count, movetext) into ``out`` (uint8, zeroed,
    at least ``34 * chains + 4 * rows`` bytes).

    A chain starts at each row whose ``cont`` is False; ``chain_ends[c]`` gets the end offset of
    chain ``c``.  Returns ``(bytes, chains, bad_row)``: ``bad_row`` is -1, or the first row whose
    move cannot be encoded.
    """
    n = bitboards.shape[0]
    bb = np.zeros(8, np.int64)
    p = 0
    head = 0
    cursor = 0
    plies = 0
    last = 0
    chains = 0
    for i in range(n):
        if not cont[i]:
            if i > 0:
                out[head + 32] = plies >> 8
                out[head + 33] = plies & 255
                p = (cursor + 7) >> 3
                chain_ends[chains] = p
                chains += 1
            head = p
            occ = bitboards[i, BB_WHITE] | bitboards[i, BB_WHITE + 1]
            for k in range(8):
                out[p + k] = (occ >> (56 - 8 * k)) & 255
            rest = occ
            j = 0
            s = np.int64(stm[i])
            e = np.int64(ep[i])
            cr = np.int64(castling[i])
            while rest:
                sq = lowest_square(rest)
                rest = without_lowest(rest)
                bit = SQUARE_BB[sq]
                colour = 0 if bitboards[i, BB_WHITE] & bit else 1
                pt = 0
                for t in range(6):
                    if bitboards[i, t] & bit:
                        pt = t
                nib = 2 * pt + colour
                if pt == BB_PAWNS and e >= 0 and (sq & 7) == (e & 7) and (sq >> 3) == (3 if s == 1 else 4):
                    nib = 12
                elif pt == 3 and colour == 0 and ((sq == 0 and cr & WHITE_OOO) or (sq == 7 and cr & WHITE_OO)):
                    nib = 13
                elif pt == 3 and colour == 1 and ((sq == 56 and cr & BLACK_OOO) or (sq == 63 and cr & BLACK_OO)):
                    nib = 14
                elif pt == BB_KINGS:
                    nib = 10 if colour == 0 else (11 if s == 0 else 15)
                out[p + 8 + (j >> 1)] |= nib << (4 * (j & 1))
                j += 1
            m = np.int64(move[i])
            out[p + 24] = m >> 8
            out[p + 25] = m & 255
            u = to_unsigned(np.int64(score[i]))
            out[p + 26] = u >> 8
            out[p + 27] = u & 255
            pr = (np.int64(ply[i]) | (to_unsigned(np.int64(result[i])) << 14)) & 0xFFFF
            out[p + 28] = pr >> 8
            out[p + 29] = pr & 255
            out[p + 30] = 0
            out[p + 31] = rule50[i]
            p += CHAIN_HEAD_BYTES
            cursor = p * 8
            plies = 0
            last = wrap16(-np.int64(score[i]))
            continue
        for k in range(8):
            bb[k] = bitboards[i, k]
        pid, pbits, mid, mbits = encode_move_index(bb, np.int64(stm[i]), np.int64(castling[i]), np.int64(ep[i]),
                                                   np.int64(move[i]))
        if mbits < 0:
            return p, chains, i
        cursor = write_bits(out, cursor, pid, pbits)
        cursor = write_bits(out, cursor, mid, mbits)
        sc = np.int64(score[i])
        v = to_unsigned(wrap16(sc - last))
        while True:
            block = (v & 15) | (16 if v > 15 else 0)
            cursor = write_bits(out, cursor, block, 5)
            v >>= 4
            if v == 0:
                break
        last = wrap16(-sc)
        plies += 1
    if n > 0:
        out[head + 32] = plies >> 8
        out[head + 33] = plies & 255
        p = (cursor + 7) >> 3
        chain_ends[chains] = p
        chains += 1
    return p, chains, -1


@njit(cache=True)
def block_cuts(chain_ends, pending, target, cuts):
    """Where the tools' writer closes blocks: before a chain, if the open block (``pending`` bytes
    carried over plus the chains since the last cut) holds at least ``target`` bytes.  ``cuts``
    gets chain indices; returns their count."""
    k = 0
    size = pending
    for c in range(chain_ends.shape[0]):
        if size >= target:
            cuts[k] = c
            k += 1
            size = 0
        size += chain_ends[c] - (chain_ends[c - 1] if c > 0 else 0)
    return k

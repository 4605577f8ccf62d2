"""Stockfish training data as arrays: ``.binpack`` chains, 40-byte ``.bin`` records, ``.plain`` text.

A training position is held in columns (one row per position; see
:class:`nnue_infer.io.training_data.TrainingData`):

* ``bitboards`` int64[n, 8] in the :mod:`nnue_infer.kernels.chess.bitboard` layout (pawns .. kings,
  then White's and Black's pieces), ``stm`` uint8 (0 White), ``castling`` uint8 (1 White O-O,
  2 White O-O-O, 4 Black O-O, 8 Black O-O-O), ``ep`` int8 (en passant square, -1 none: set only
  when a capture is possible, as the tools do), ``rule50`` uint8, ``fullmove`` uint16;
* ``move`` uint16 in the tools' ``CompressedMove`` layout: type (0 normal, 1 promotion, 2
  castling, 3 en passant) in bits 14-15, from square in bits 8-13, to square in bits 2-7, promoted
  piece (0 knight .. 3 queen) in bits 0-1; castling is king takes own rook (``e1h1``);
* ``score`` int16 (internal units, side to move), ``ply`` uint16, ``result`` int16 (side to move:
  1 win, 0 draw, -1 loss).

Every rule here follows Stockfish's ``tools`` branch, ``src/extra/nnue_data_binpack_format.h``
(chess::Position::doMove / compress / decompress, binpack::PackedMoveScoreList and its reader,
nodchip::SfenPacker, uci::uciToMove / moveToUci, Position::fen / trySet) and
``src/tools/convert.cpp``: the same integer widths and wraps (int16 scores, uint16 plies, uint8
rule-50 counter), the same en passant rule (kept only when a capture is legal) and the same block
boundaries, so files written here are byte-identical to the tools'.  Where the tools would
read undefined memory on damaged input, these kernels return an error code and the byte offset.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..chess.attacks import KING_ATTACKS, KNIGHT_ATTACKS, PAWN_ATTACKS, SQUARE_BB, line_attacks, piece_attacks
from ..chess.bitboard import BB_KINGS, BB_PAWNS, BB_ROOKS, BB_WHITE, lowest_square, popcount, without_lowest
from ..chess.notation import king_attacked, put_square, put_uint, write_fen

#: Move types of the ``move`` column (bits 14-15).
NORMAL, PROMOTION, CASTLE, EN_PASSANT = range(4)
#: Castling-right bits of the ``castling`` column.
WHITE_OO, WHITE_OOO, BLACK_OO, BLACK_OOO = 1, 2, 4, 8
#: Bytes of a chain's first entry (24 position + 2 move + 2 score + 2 ply/result + 2 rule-50) and
#: of the ply count that follows it.
ENTRY_BYTES, CHAIN_HEAD_BYTES = 32, 34
#: Block size at which the tools' writer closes a block (checked before each new chain), and the
#: largest block the tools' reader accepts.
BLOCK_TARGET, BLOCK_LIMIT = 1 << 20, 100 << 20
#: Bytes of a ``.bin`` record (nodchip ``PackedSfenValue``).
BIN_RECORD = 40
#: Longest chain the ply count (uint16) can describe: the writer starts a new chain after it.
MAX_CHAIN_PLIES = 65535
#: Bytes reserved per row by the ``.plain`` writer (the longest record is about 150 bytes).
PLAIN_SLOT = 192

#: Problem codes of the kernels (0: none); :data:`PROBLEMS` words them.
(OK, E_TRUNCATED, E_OCCUPANCY, E_NIBBLE, E_KINGS, E_PIECE_INDEX, E_MOVE_INDEX, E_SCORE_VLE, E_CASTLE,
 E_NULL_MOVE, E_BIN_CODE, E_BIN_OVERFLOW, E_UNENCODABLE, E_FEN, E_MOVE_TEXT, E_NUMBER, E_MISSING,
 E_PAWN_RANK, E_SCORE_RANGE, E_PLY_RANGE, E_RESULT_RANGE, E_FULLMOVE) = range(22)
PROBLEMS = (
    "no problem",
    "truncated: the data ends inside a chain",
    "more than 32 occupied squares in a packed position",
    "packed position: a castling-rook or en passant nibble on an impossible square",
    "a position without exactly one king per side",
    "movetext: piece index beyond the side to move's piece count",
    "movetext: move index beyond the piece's move count",
    "movetext: score delta longer than 16 bits",
    "castling without the king and rook on their start squares",
    "null move",
    ".bin record: bad piece code in the packed board",
    "position does not fit a .bin record (more than 256 bits)",
    "move cannot be encoded (not a pseudo-legal move of the side to move)",
    "bad FEN",
    "bad UCI move",
    "bad integer",
    "record lacks one of fen, move, score, ply, result",
    "pawn on the first or last rank",
    "score outside -32768 .. 32767",
    "ply outside 0 .. 65535",
    "result outside -1 .. 1",
    "full-move number outside 1 .. 32768 (the formats keep the game ply in 16 bits)",
)
#: Largest full-move number the formats keep (the game ply ``2 * (fullmove - 1) + stm`` in 16 bits).
MAX_FULLMOVE = 1 << 15


def _rays() -> np.ndarray:
    out = np.zeros(64, np.uint64)
    for s in range(64):
        for df, dr in ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1)):
            f, r = s % 8 + df, s // 8 + dr
            while 0 <= f < 8 and 0 <= r < 8:
                out[s] |= np.uint64(1) << np.uint64(8 * r + f)
                f, r = f + df, r + dr
    return out.view(np.int64)


def _before() -> np.ndarray:
    return np.array([(1 << s) - 1 for s in range(64)], np.uint64).view(np.int64)


def _preserved() -> np.ndarray:
    out = np.full(64, 15, np.int64)
    out[4], out[60] = 15 & ~3, 15 & ~12  # e1, e8
    out[7], out[0], out[63], out[56] = 15 & ~1, 15 & ~2, 15 & ~4, 15 & ~8  # h1, a1, h8, a8
    return out


#: Queen lines from each square to the board's edge, int64[64].
QUEEN_RAYS = _rays()
#: Squares below each square (``a1 .. sq - 1``), int64[64].
BEFORE = _before()
#: Castling rights kept when a move touches each square, int64[64].
PRESERVED = _preserved()
#: Huffman codes of the ``.bin`` board (piece type 0..4 -> code, 4 bits; an empty square is one 0 bit).
BIN_CODES = np.array([1, 3, 5, 7, 9], np.int64)
#: FEN letters by tools piece ordinal (2 * type + colour).
FEN_LETTERS = np.array([ord(c) for c in "PpNnBbRrQqKk"], np.uint8)


@njit(cache=True, inline="always")
def wrap16(v):
    """``v`` as an int16 (two's complement wrap), returned as int64."""
    v &= 0xFFFF
    return v - 65536 if v >= 32768 else v


@njit(cache=True, inline="always")
def to_unsigned(a):
    """The tools' ``signedToUnsigned``: int16 -> zig-zag uint16 (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    r = a & 0xFFFF
    if r & 0x8000:
        r ^= 0x7FFF
    return ((r << 1) | (r >> 15)) & 0xFFFF


@njit(cache=True, inline="always")
def to_signed(r):
    """The tools' ``unsignedToSigned``: the inverse of :func:`to_unsigned`."""
    r = ((r << 15) | (r >> 1)) & 0xFFFF
    if r & 0x8000:
        r ^= 0x7FFF
    return wrap16(r)


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
def type_at(bb, sq):
    """Piece type (0 pawn .. 5 king) on ``sq``, -1 if empty."""
    bit = SQUARE_BB[sq]
    for t in range(6):
        if bb[t] & bit:
            return t
    return -1


@njit(cache=True, inline="always")
def pawn_targets(bb, stm, frm, ep):
    """Destinations of the pawn on ``frm``: captures (incl. ``ep``), single and double pushes."""
    ours = bb[BB_WHITE + stm]
    occ = ours | bb[BB_WHITE + 1 - stm]
    targets = bb[BB_WHITE + 1 - stm]
    if ep >= 0:
        targets |= SQUARE_BB[ep]
    dest = PAWN_ATTACKS[stm, frm] & targets
    step = 8 if stm == 0 else -8
    fwd = frm + step
    if 0 <= fwd < 64 and not occ & SQUARE_BB[fwd]:
        dest |= SQUARE_BB[fwd]
        fwd2 = fwd + step
        if (frm >> 3) == (1 if stm == 0 else 6) and not occ & SQUARE_BB[fwd2]:
            dest |= SQUARE_BB[fwd2]
    return dest


@njit(cache=True, inline="always")
def slider_check(ksq, bb, them, occ):
    """Whether ``them``'s bishops, rooks or queens attack ``ksq`` through ``occ``."""
    theirs = bb[BB_WHITE + them]
    rq = (bb[3] | bb[4]) & theirs
    bq = (bb[2] | bb[4]) & theirs
    return (line_attacks(ksq, occ, 0, 4) & rq) != 0 or (line_attacks(ksq, occ, 4, 8) & bq) != 0


@njit(cache=True)
def ep_possible(bb, ep, stm):
    """The tools' ``Position::isEpPossible``: can ``stm`` capture en passant on ``ep`` without
    leaving its king to a slider?  (Squares off the en passant rank count as impossible.)"""
    if (ep >> 3) != (5 if stm == 0 else 2):
        return False
    ours = bb[BB_WHITE + stm]
    attackers = PAWN_ATTACKS[1 - stm, ep] & bb[BB_PAWNS] & ours
    if attackers == 0:
        return False
    occ = bb[BB_WHITE] | bb[BB_WHITE + 1]
    fwd = 8 if stm == 0 else -8
    if occ & SQUARE_BB[ep] or occ & SQUARE_BB[ep + fwd]:
        return False
    if not (bb[BB_PAWNS] & bb[BB_WHITE + 1 - stm] & SQUARE_BB[ep - fwd]):
        return False
    kings = bb[BB_KINGS] & ours
    if kings == 0:
        return False
    ksq = lowest_square(kings)
    theirs = bb[BB_WHITE + 1 - stm]
    if ((bb[2] | bb[3] | bb[4]) & theirs & QUEEN_RAYS[ksq]) == 0:
        return True
    while attackers:
        sq = lowest_square(attackers)
        attackers = without_lowest(attackers)
        captured = (ep & 7) | (sq & 56)
        o = ((occ ^ SQUARE_BB[sq]) | SQUARE_BB[ep]) ^ SQUARE_BB[captured]
        if not slider_check(ksq, bb, 1 - stm, o):
            return True
    return False


@njit(cache=True, inline="always")
def clear_square(bb, sq):
    """Remove whatever stands on ``sq``."""
    keep = ~SQUARE_BB[sq]
    for k in range(8):
        bb[k] &= keep


@njit(cache=True)
def do_move(bb, stm, castling, ep, rule50, move):
    """Play ``move`` for ``stm`` on ``bb`` (in place): the tools' ``Position::doMove``.

    Returns ``(castling, ep, rule50, ok)``; ``ok`` is False (board unchanged) when no piece
    stands on the from-square.  The side to move flips in the caller.
    """
    mtype = move >> 14
    frm = (move >> 8) & 63
    to = (move >> 2) & 63
    pt = type_at(bb, frm)
    if pt < 0:
        return castling, ep, rule50, False
    colour = 0 if bb[BB_WHITE] & SQUARE_BB[frm] else 1
    rule50 = (rule50 + 1) & 255
    if mtype != CASTLE and (pt == BB_PAWNS or type_at(bb, to) >= 0):
        rule50 = 0
    castling &= PRESERVED[frm] & PRESERVED[to]
    new_ep = -1
    if pt == BB_PAWNS and (to ^ frm) == 16:
        new_ep = (to + frm) >> 1
    t = SQUARE_BB[to]
    if mtype == CASTLE:
        long_side = (to & 7) != 7
        king_to = (2 if long_side else 6) + 56 * colour
        rook_to = (3 if long_side else 5) + 56 * colour
        clear_square(bb, frm)
        clear_square(bb, to)
        bb[BB_KINGS] |= SQUARE_BB[king_to]
        bb[3] |= SQUARE_BB[rook_to]
        bb[BB_WHITE + colour] |= SQUARE_BB[king_to] | SQUARE_BB[rook_to]
    else:
        if mtype == EN_PASSANT:
            clear_square(bb, (to & 7) | (frm & 56))
        clear_square(bb, to)
        clear_square(bb, frm)
        bb[(1 + (move & 3)) if mtype == PROMOTION else pt] |= t
        bb[BB_WHITE + colour] |= t
    stm = 1 - stm
    if new_ep >= 0 and not ep_possible(bb, new_ep, stm):
        new_ep = -1
    return castling, new_ep, rule50, True


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


@njit(cache=True, inline="always")
def store_row(r, bb, stm, castling, ep, rule50, fullmove, move, score, ply, result, chain, o_bb, o_stm, o_castling,
              o_ep, o_rule50, o_fullmove, o_move, o_score, o_ply, o_result, o_chain):
    for k in range(8):
        o_bb[r, k] = bb[k]
    o_stm[r] = stm
    o_castling[r] = castling
    o_ep[r] = ep
    o_rule50[r] = rule50
    o_fullmove[r] = fullmove
    o_move[r] = move
    o_score[r] = score
    o_ply[r] = ply
    o_result[r] = result
    o_chain[r] = chain


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
    them = bb[BB_WHITE + stm]
    occ = bb[BB_WHITE] | bb[BB_WHITE + 1]
    if (slider_check(ksq, bb, stm, occ) or KNIGHT_ATTACKS[ksq] & bb[1] & them or KING_ATTACKS[ksq] & bb[5] & them
            or PAWN_ATTACKS[1 - stm, ksq] & bb[0] & them):
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


@njit(cache=True, parallel=True)
def row_flags(bitboards, stm, move, in_check, capture):
    """Per row: is the side to move in check, and does its move capture (a rival piece on the
    to-square, castling excluded: the tools' ``TrainingDataEntry::isCapturingMove``, so en passant
    does not count)."""
    for i in prange(stm.shape[0]):
        s = np.int64(stm[i])
        in_check[i] = king_attacked(bitboards[i], s)
        m = np.int64(move[i])
        capture[i] = (m >> 14) != CASTLE and (bitboards[i, BB_WHITE + 1 - s] & SQUARE_BB[(m >> 2) & 63]) != 0

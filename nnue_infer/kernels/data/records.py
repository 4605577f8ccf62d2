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

This module holds what the three formats share (the problem codes, the score conversions, a row's store);
:mod:`.binpack`, :mod:`.bin` and :mod:`.plain` each hold one format, and the moves are made by
:mod:`nnue_infer.kernels.chess.make_move`.
"""

from __future__ import annotations

import numpy as np
from numba import njit


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

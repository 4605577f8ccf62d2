"""Perft: the number of leaf positions of the legal move tree to a fixed depth, per root move.

The move generator's correctness check used across the field (the Chess Programming Wiki's "Perft"
and "Perft Results" pages; Stockfish's ``go perft N``): every legal move sequence of ``depth``
plies is counted once.  Positions, moves and their order are those of
:mod:`nnue_infer.kernels.chess.movegen` (python-chess's rules); a child position is made as
python-chess's ``Board.push`` makes it (:func:`child_state`).  The last ply is counted in bulk: a
position one ply above the leaves adds its number of legal moves without making them.

The walk is iterative (one stack frame per ply in arrays, no recursion) and releases the GIL, so
a caller's other threads (a UCI engine reading ``stop``) run while it counts; ``stop[0] != 0``
set by another thread abandons it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .attacks import SQUARE_BB
from .bitboard import BB_KINGS, BB_PAWNS
from .movegen import MAX_MOVES, legal_moves, play

#: The castling rights a king move of White (index 0) or Black loses: its whole back rank.
BACK_RANK = np.array([0xFF, 0xFF << 56], np.uint64).view(np.int64)
#: :func:`perft`'s return value when ``stop`` was set before it finished.
STOPPED = -1


@njit(cache=True, inline="always")
def child_state(bitboards, stm, castling, ep, code, out):
    """The position after the legal move ``code`` of the side ``stm`` (0 White): its bitboards into ``out``
    int64[8], and the castling rights and en passant square of the child (python-chess's ``Board.push``:
    rights lost on the squares a move leaves or enters and on a king move; the en passant square set by
    every double pawn push, 0 otherwise)."""
    frm = code & 63
    to = (code >> 6) & 63
    play(bitboards, stm, code, ep, out)
    castling &= ~(SQUARE_BB[frm] | SQUARE_BB[to])
    if bitboards[BB_KINGS] & SQUARE_BB[frm]:
        castling &= ~BACK_RANK[stm]
    child_ep = 0
    if bitboards[BB_PAWNS] & SQUARE_BB[frm] and (to - frm == 16 or frm - to == 16):
        child_ep = (frm + to) >> 1
    return castling, child_ep


@njit(cache=True, nogil=True)
def perft(bitboards, stm, castling, ep, chess960, depth, root_moves, root_counts, stop):
    """Leaf counts per root move of the legal move tree ``depth`` plies deep.

    Parameters
    ----------
    bitboards, stm, castling, ep, chess960
        The root position, as :func:`~nnue_infer.kernels.chess.movegen.legal_moves` takes it (int64[8], the
        side to move 0 White, python-chess's clean castling rights and en passant square, the Chess960 flag).
    depth : int
        Plies, at least 1.
    root_moves : uint16[>= MAX_MOVES]
        Output: the root's legal move codes in ``Board.legal_moves`` order.
    root_counts : int64[>= MAX_MOVES]
        Output: ``root_counts[i]`` leaves below ``root_moves[i]`` (1 at depth 1).
    stop : uint8[1]
        Another thread sets ``stop[0]`` to a non-zero value to abandon the count.

    Returns
    -------
    int
        The number of root moves, or :data:`STOPPED` (the counts then incomplete).
    """
    n_root = legal_moves(bitboards, stm, castling, ep, chess960, root_moves)
    boards = np.empty((depth + 1, 8), np.int64)
    rights = np.empty(depth + 1, np.int64)
    eps = np.empty(depth + 1, np.int64)
    moves = np.empty((depth + 1, MAX_MOVES), np.uint16)
    count = np.zeros(depth + 1, np.int64)
    index = np.zeros(depth + 1, np.int64)
    for i in range(n_root):
        root_counts[i] = 1
        if depth == 1:
            continue
        if stop[0]:
            return STOPPED
        rights[1], eps[1] = child_state(bitboards, stm, castling, ep, root_moves[i], boards[1])
        count[1] = legal_moves(boards[1], 1 - stm, rights[1], eps[1], chess960, moves[1])
        if depth == 2:
            root_counts[i] = count[1]
            continue
        leaves = 0
        index[1] = 0
        ply = 1  # boards[ply] is the position after ply moves; its side to move is stm ^ (ply & 1)
        while ply >= 1:
            if index[ply] == count[ply]:
                ply -= 1
                continue
            if stop[0]:
                return STOPPED
            code = moves[ply, index[ply]]
            index[ply] += 1
            side = stm ^ (ply & 1)
            rights[ply + 1], eps[ply + 1] = child_state(boards[ply], side, rights[ply], eps[ply], code,
                                                        boards[ply + 1])
            n = legal_moves(boards[ply + 1], 1 - side, rights[ply + 1], eps[ply + 1], chess960, moves[ply + 1])
            if ply + 1 == depth - 1:  # one ply above the leaves: its moves are counted, not made
                leaves += n
            else:
                ply += 1
                count[ply] = n
                index[ply] = 0
        root_counts[i] = leaves
    return n_root

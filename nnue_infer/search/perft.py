"""Perft from a python-chess board: leaf counts per root move through the compiled move generator
(:mod:`nnue_infer.kernels.chess.perft`), and the ``move: count`` / ``Nodes searched: N`` text that
Stockfish's ``go perft N`` prints (shared by ``nnue-infer perft`` and the UCI engine)."""

from __future__ import annotations

import chess
import numpy as np

from ..errors import NnueError, PositionError
from ..features.board import board_bitboards, check_position, check_variant

#: The deepest perft accepted (its buffers are a few KiB a ply; depth 10 of the start position is
#: already 7e13 leaves).
MAX_DEPTH = 64


class PerftStopped(NnueError):
    """A perft was abandoned through its ``stop`` flag before it finished."""


def check_perft_position(board: chess.Board) -> None:
    """Check that the compiled move generator takes ``board``: standard chess or Chess960, one king a side, at
    most 32 pieces, no pawn on the first or last rank (:func:`~nnue_infer.features.board.check_position`), no
    king marked promoted (python-chess's rules then differ).

    Raises
    ------
    PositionError
        Naming the problem (and the squares).
    """
    check_variant(board)
    check_position(board)
    if board.promoted & board.kings:
        squares = ", ".join(chess.SQUARE_NAMES[s] for s in chess.scan_forward(board.promoted & board.kings))
        raise PositionError(f"a king marked promoted ({squares}): python-chess's move rules then differ")


def perft(board: chess.Board, depth: int, *, stop: np.ndarray | None = None) -> dict[chess.Move, int]:
    """The number of leaf positions ``depth`` plies below each legal move of ``board``.

    Parameters
    ----------
    board : chess.Board
        The root position (standard chess or Chess960, ``board.chess960``); not modified.
    depth : int
        Plies, 1 .. :data:`MAX_DEPTH`.
    stop : uint8[1], optional
        A flag another thread may set (``stop[0] = 1``) to abandon the count; the compiled walk
        releases the GIL.

    Returns
    -------
    dict[chess.Move, int]
        Leaves per root move, in ``board.legal_moves`` order (moves as python-chess writes them:
        Chess960 castling as king-takes-rook); ``sum(...values())`` is the perft number.  Empty when
        the side to move has no legal move.

    Raises
    ------
    ValueError
        ``depth`` is not an int in 1 .. :data:`MAX_DEPTH`.
    PositionError
        The position has no king or more than one for a side, more than 32 pieces, a pawn on the first
        or last rank, a king marked promoted, or is a variant board.
    PerftStopped
        ``stop`` was set before the count finished.
    """
    from ..kernels.chess.perft import STOPPED, perft as count
    from ..kernels.chess.movegen import MAX_MOVES

    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"perft depth must be an integer from 1 to {MAX_DEPTH}, got {depth!r}")
    check_perft_position(board)
    bitboards = board_bitboards(board)
    castling = board.clean_castling_rights()
    moves = np.empty(MAX_MOVES, np.uint16)
    counts = np.empty(MAX_MOVES, np.int64)
    flag = np.zeros(1, np.uint8) if stop is None else stop
    n = count(bitboards, 0 if board.turn else 1, castling - (1 << 64) if castling >> 63 else castling,
              board.ep_square or 0, board.chess960, int(depth), moves, counts, flag)
    if n == STOPPED:
        raise PerftStopped(f"perft {depth} stopped before it finished")
    return {chess.Move(c & 63, (c >> 6) & 63, (c >> 12) or None): k
            for c, k in zip(moves[:n].tolist(), counts[:n].tolist())}


def perft_text(board: chess.Board, counts: dict[chess.Move, int]) -> str:
    """Stockfish's ``go perft`` report of ``counts`` (:func:`perft` of ``board``): one ``move: count`` line per
    root move (UCI notation of ``board``: Chess960 castling as king-takes-rook), a blank line, then
    ``Nodes searched: N`` and a blank line, as Debian's Stockfish 15.1 prints them for ``go perft N``."""
    lines = [f"{board.uci(move)}: {n}" for move, n in counts.items()]
    return "\n".join(lines + ["", f"Nodes searched: {sum(counts.values())}", ""])

"""From a python-chess ``Board`` to validated bitboards, the input of every feature kernel.

Every feature set reads the same 8 bitboards (pawns, knights, bishops, rooks, queens, kings,
white, black) and accepts the same positions: one king per side, at most 32 pieces, no pawn
on the first or last rank (Stockfish's ``Position::set`` refuses the others, and its feature
lists are sized for 32 pieces).
"""

from __future__ import annotations

import chess
import numpy as np

from ..errors import PositionError

#: Most pieces any supported feature set accepts (Stockfish: ``MaxActiveDimensions``).
MAX_PIECES = 32
_BACK_RANKS = chess.BB_RANK_1 | chess.BB_RANK_8


def check_variant(board: chess.Board) -> None:
    """Refuse a python-chess variant board (``chess.variant.*``: atomic, crazyhouse, racing kings, ...).

    Their rules change what a position means (pockets, checks counted, exploded pieces), so
    no network evaluates them; standard chess and Chess960 (``chess.Board(chess960=True)``)
    pass.

    Raises
    ------
    PositionError
        ``board.uci_variant`` is not ``"chess"`` (the message names the variant and the class).
    """
    if board.uci_variant != "chess":
        raise PositionError(f"chess variant {board.uci_variant!r} ({type(board).__name__}) is not supported: "
                            "nnue-infer evaluates standard chess and Chess960 boards only")


def check_position(board: chess.Board) -> None:
    """Check that ``board`` can be represented by the feature sets.

    Raises
    ------
    PositionError
        A side has no king or more than one, there are more than 32 pieces, a pawn
        stands on the first or last rank, or the board's bitboards contradict each other (a
        square with two piece types, both colours, or a type without a colour; only a board
        whose internals were modified directly) (the message names the squares).
    """
    black, white = board.occupied_co
    pieces = board.pawns
    overlap = pieces & board.knights
    pieces |= board.knights
    overlap |= pieces & board.bishops
    pieces |= board.bishops
    overlap |= pieces & board.rooks
    pieces |= board.rooks
    overlap |= pieces & board.queens
    pieces |= board.queens
    overlap |= pieces & board.kings
    pieces |= board.kings
    if overlap or white & black or pieces != white | black:
        bad = overlap | (white & black) | (pieces ^ (white | black))
        squares = ", ".join(chess.SQUARE_NAMES[s] for s in chess.scan_forward(bad))
        raise PositionError(f"inconsistent board: squares {squares} have two piece types, both colours or a type "
                            "without a colour")
    for color, name in ((chess.WHITE, "White"), (chess.BLACK, "Black")):
        kings = board.kings & board.occupied_co[color]
        n = chess.popcount(kings)
        if n != 1:
            where = ", ".join(chess.SQUARE_NAMES[s] for s in chess.scan_forward(kings)) or "none"
            raise PositionError(f"{name} must have exactly one king, found {n} ({where})")
    n = chess.popcount(pieces)
    if n > MAX_PIECES:
        raise PositionError(f"{n} pieces on the board; the network accepts at most {MAX_PIECES}")
    bad = board.pawns & _BACK_RANKS
    if bad:
        squares = ", ".join(chess.SQUARE_NAMES[s] for s in chess.scan_forward(bad))
        raise PositionError(f"pawn on the first or last rank: {squares}")


def board_bitboards(board: chess.Board, out: np.ndarray | None = None) -> np.ndarray:
    """Validated bitboards of ``board`` for the feature kernels.

    Returns int64[8]: pawns, knights, bishops, rooks, queens, kings, white, black
    (python-chess's uint64 bitboards reinterpreted as int64).  Raises
    :class:`PositionError` as :func:`check_position` does.
    """
    check_position(board)
    if out is None:
        out = np.empty(8, np.int64)
    u = out.view(np.uint64)
    u[0] = board.pawns
    u[1] = board.knights
    u[2] = board.bishops
    u[3] = board.rooks
    u[4] = board.queens
    u[5] = board.kings
    u[6] = board.occupied_co[chess.WHITE]
    u[7] = board.occupied_co[chess.BLACK]
    return out

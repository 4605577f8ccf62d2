"""Every child of a position in one compiled call (the work behind :meth:`Evaluator.evaluate_moves
<nnue_infer.evaluator.Evaluator.evaluate_moves>` and :meth:`~nnue_infer.evaluator.Evaluator.evaluate_children_batch`).

Legal moves are generated from bitboards in compiled code in python-chess's ``board.legal_moves``
order (:mod:`nnue_infer.kernels.movegen`) and each child is evaluated with one incremental update
from its parent's accumulator (:mod:`nnue_infer.kernels.children`).  Moves travel as 16-bit codes,
``from_square | to_square << 6 | promotion << 12`` (python-chess squares a1 = 0 .. h8 = 63 and
piece types, promotion 2..5 = knight .. queen, 0 for none; castling as python-chess writes it:
``e1g1`` in standard chess, king-takes-rook in Chess960): :func:`move_codes` and :func:`decode_moves`
convert.
"""

from __future__ import annotations

from collections.abc import Iterable

import chess
import numpy as np

from .errors import IllegalMoveError, clip, quote


def move_code(move: chess.Move) -> int:
    """The 16-bit code of a ``chess.Move`` (see the module docstring)."""
    return move.from_square | move.to_square << 6 | (move.promotion or 0) << 12


def decode_moves(codes: np.ndarray) -> list[chess.Move]:
    """``chess.Move`` objects of 16-bit move codes (uint16[n])."""
    return [chess.Move(c & 63, (c >> 6) & 63, (c >> 12) or None) for c in codes.tolist()]


def uci_moves(codes: np.ndarray) -> list[str]:
    """UCI strings (``e2e4``, ``e7e8q``) of 16-bit move codes."""
    return [m.uci() for m in decode_moves(codes)]


def move_codes(moves: Iterable[chess.Move | str]) -> np.ndarray:
    """uint16[n] codes of ``moves`` (``chess.Move`` or UCI strings); legality is checked later, by the kernel.

    Raises
    ------
    IllegalMoveError
        ``moves[i]`` is malformed UCI, a null move (no child position to evaluate) or a drop.
    TypeError
        ``moves`` is a single move or string, or ``moves[i]`` is neither a move nor a string.
    """
    if isinstance(moves, (str, chess.Move)):
        raise TypeError(f"moves must be a sequence of moves, got a single {type(moves).__name__} "
                        f"({moves!r:.40}); wrap it in a list")
    moves = list(moves)
    codes = np.empty(len(moves), np.uint16)
    for i, move in enumerate(moves):
        if isinstance(move, str):
            try:
                move = chess.Move.from_uci(move)
            except ValueError as exc:
                raise IllegalMoveError(f"moves[{i}] ({quote(moves[i])}): {clip(str(exc))}") from None
        elif not isinstance(move, chess.Move):
            raise TypeError(f"moves[{i}]: expected a chess.Move or a UCI string, got {type(move).__name__}")
        if not move:
            raise IllegalMoveError(f"moves[{i}] is a null move: evaluate_moves evaluates the positions after "
                                   "moves; for the position with the other side to move use push(chess.Move.null()) "
                                   "and evaluate()")
        if move.drop:
            raise IllegalMoveError(f"moves[{i}] ({move.uci()}) is a drop, not a chess move")
        codes[i] = move_code(move)
    return codes

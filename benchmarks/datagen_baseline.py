"""The position generator as it was before the compiled walk (nnue-infer up to commit 1b51f22):
python-chess plays every move (``Board.generate_legal_moves``, ``push``) and the teacher labels one
position at a time (``Evaluator.evaluate``).  Same episodes, playout policy, de-duplication and
balance filter as :func:`nnue_infer.training.datagen.generate` (its module docstring), one
``random.Random(seed)``; kept as the "before" of ``bench_datagen.py``.
"""

from __future__ import annotations

import math
import random

import chess
import numpy as np

from nnue_infer import Evaluator
from nnue_infer.training.datagen import GenerationSettings, game_positions, position_key

#: Crude piece values (pawns) of the playout policy, by python-chess piece type.
VALUES = (0, 1, 3, 3, 5, 9, 0)


def policy_move(board: chess.Board, rng: random.Random, greedy: float) -> chess.Move | None:
    """The playout policy's move (``None`` if there is none)."""
    moves = list(board.generate_legal_moves())
    if not moves:
        return None
    if rng.random() >= greedy:
        return moves[rng.randrange(len(moves))]
    them = not board.turn
    best, best_score = moves[0], -1e9
    for move in moves:
        mover = board.piece_type_at(move.from_square)
        captured = board.piece_type_at(move.to_square)
        score = VALUES[captured] if captured else (1.0 if board.is_en_passant(move) else 0.0)
        value = VALUES[mover]
        if move.promotion:
            score += VALUES[move.promotion] - 1
            value = VALUES[move.promotion]
        if board.is_attacked_by(them, move.to_square):
            score -= value
        if board.is_attacked_by(them, move.from_square):
            score += 0.5 * VALUES[mover]
        score += 0.5 * rng.random()
        if score > best_score:
            best, best_score = move, score
    return best


def generate(n: int, seed: int, teacher, games: list[dict] | None, settings: GenerationSettings
             ) -> dict[str, np.ndarray]:
    """``n`` distinct labelled positions: ``bitboards`` int64[n, 8], ``stm``, ``castling`` (K Q k q
    bits), ``ep_square``, ``value`` (teacher, side to move), ``source``, ``check``; plus ``skipped``."""
    s = settings
    rng = random.Random(seed)
    ev = Evaluator(teacher)
    starts = game_positions(games, s.holdout_fraction) if games else []
    frac = s.perturbation_fraction if starts else 0.0
    rows: list[tuple] = []
    seen: set = set()
    counts = [0, 0]
    skipped = {"duplicate": 0, "balance_filter": 0}
    keep_below, keep_decay = s.keep_below_cp * 361 / 100, s.keep_decay_cp * 361 / 100

    def add(board: chess.Board, src: int) -> None:
        if len(rows) >= n:
            return
        key = position_key(board)
        if key in seen:
            skipped["duplicate"] += 1
            return
        seen.add(key)
        value = ev.evaluate(board)
        excess = abs(value) - keep_below
        if excess > 0 and rng.random() >= math.exp(-excess / keep_decay):
            skipped["balance_filter"] += 1
            return
        cr = board.clean_castling_rights()
        ep = board.ep_square if board.ep_square is not None and board.has_legal_en_passant() else -1
        rows.append((key[:8], 1 - key[8], bool(cr & chess.BB_H1) | bool(cr & chess.BB_A1) << 1
                     | bool(cr & chess.BB_H8) << 2 | bool(cr & chess.BB_A8) << 3, ep, value, src, board.is_check()))
        counts[src] += 1

    def visit(board: chess.Board, src: int) -> None:
        add(board, src)
        if s.children:
            moves = list(board.generate_legal_moves())
            for move in rng.sample(moves, min(s.children, len(moves))):
                board.push(move)
                add(board, src)
                board.pop()

    while len(rows) < n:
        if frac > 0 and (not rows or counts[0] < frac * len(rows)):
            board = starts[rng.randrange(len(starts))].copy()
            visit(board, 0)
            for step in range(rng.randint(1, s.max_walk)):
                moves = list(board.generate_legal_moves())
                if not moves:
                    break
                board.push(moves[rng.randrange(len(moves))] if step == 0 else policy_move(board, rng, s.greedy))
                visit(board, 0)
        else:
            board = chess.Board()
            for _ in range(rng.randint(2, s.opening_plies)):
                moves = list(board.generate_legal_moves())
                if not moves:
                    break
                board.push(moves[rng.randrange(len(moves))])
            visit(board, 1)
            while (board.ply() < s.max_game_plies and board.halfmove_clock < 100
                   and not board.is_insufficient_material() and len(rows) < n):
                move = policy_move(board, rng, s.greedy)
                if move is None:
                    break
                board.push(move)
                visit(board, 1)
    cols = list(zip(*rows))
    return {"bitboards": np.array(cols[0], np.uint64).view(np.int64), "stm": np.array(cols[1], np.uint8),
            "castling": np.array(cols[2], np.uint8), "ep_square": np.array(cols[3], np.int8),
            "value": np.array(cols[4], np.int32), "source": np.array(cols[5], np.uint8),
            "check": np.array(cols[6], bool), "skipped": skipped}

"""How well a (student) network reproduces a teacher's evaluation: the figures of a model card.

Used for the bundled default network against Stockfish 15.1's network on the dev corpus
(``shared/data/positions-dev.jsonl``, whose ``raw.value`` is Stockfish 15.1's exact NNUE value),
and by ``nnue-infer train --eval-positions``.  Needs no PyTorch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import chess
import numpy as np

#: The accuracy targets of the bundled default network (issue 5): mean absolute error over
#: positions with |teacher| <= MAE_WINDOW_CP, sign agreement over |teacher| >= SIGN_MIN_CP.
MAE_WINDOW_CP = 1000.0
SIGN_MIN_CP = 100.0
TARGET_MAE_CP = 50.0
TARGET_SIGN_AGREEMENT = 0.95


def agreement(student_cp: np.ndarray, teacher_cp: np.ndarray) -> dict[str, float]:
    """Agreement figures of two evaluations of the same positions (centipawns, same point of view).

    Returns
    -------
    dict
        ``positions``; ``mae_cp`` (mean |student - teacher| over |teacher| <= 1000 cp) and
        ``mae_positions``; ``correlation`` (Pearson, same subset); ``sign_agreement`` (share with
        equal sign where |teacher| >= 100 cp) and ``sign_positions``; ``mae_all_cp`` (all positions).
    """
    s = np.asarray(student_cp, np.float64)
    t = np.asarray(teacher_cp, np.float64)
    if s.shape != t.shape:
        raise ValueError(f"student_cp has shape {s.shape}, teacher_cp {t.shape}")
    window = np.abs(t) <= MAE_WINDOW_CP
    decided = np.abs(t) >= SIGN_MIN_CP
    nan = float("nan")
    return {
        "positions": int(len(t)),
        "mae_cp": float(np.abs(s - t)[window].mean()) if window.any() else nan,
        "mae_positions": int(window.sum()),
        "correlation": float(np.corrcoef(s[window], t[window])[0, 1]) if window.sum() > 1 else nan,
        "sign_agreement": float((np.sign(s[decided]) == np.sign(t[decided])).mean()) if decided.any() else nan,
        "sign_positions": int(decided.sum()),
        "mae_all_cp": float(np.abs(s - t).mean()) if len(t) else nan,
    }


@dataclass(frozen=True)
class CorpusPosition:
    """One evaluation-corpus row: the board, the teacher's value and where it came from."""

    board: chess.Board
    teacher_value: int
    game_id: str | None


def read_corpus(path: str | os.PathLike[str]) -> list[CorpusPosition]:
    """Rows of a JSONL corpus with ``fen``, ``raw.value`` (teacher, internal units, side to move),
    optional ``game_id`` and ``chess960`` (the dev corpus format of ``shared/data``).

    Raises ``ValueError`` naming the line for a malformed row.
    """
    from ..inputs import numbered_lines

    rows = []
    for label, lineno, line in numbered_lines(path):
        try:
            d = json.loads(line)
            board = chess.Board(d["fen"], chess960=bool(d.get("chess960", False)))
            rows.append(CorpusPosition(board, int(d["raw"]["value"]), d.get("game_id")))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{label}: line {lineno}: not a corpus row with fen and raw.value ({exc})") from exc
    return rows


def corpus_accuracy(network, corpus: list[CorpusPosition], teacher_units_per_pawn: float = 361.0,
                    holdout_fraction: float | None = None) -> dict[str, dict[str, float]]:
    """:func:`agreement` of ``network`` with the corpus's teacher values.

    Parameters
    ----------
    network : Network
        The student (quantised) network; its ``architecture.units_per_pawn`` converts to cp.
    corpus : list of CorpusPosition
        From :func:`read_corpus`.
    teacher_units_per_pawn : float
        361 for Stockfish 15.1.
    holdout_fraction : float, optional
        Also report the positions not derived from training data: rows without a game, or whose
        game is held out by :func:`nnue_infer.training.datagen.is_held_out` with this fraction.

    Returns
    -------
    dict
        ``{"all": figures}`` and, with ``holdout_fraction``, ``"held_out"``; see :func:`agreement`.
    """
    from .datagen import is_held_out
    from ..evaluator import Evaluator

    values = Evaluator(network).evaluate_batch([r.board for r in corpus]).astype(np.float64)
    student = values * 100.0 / network.architecture.units_per_pawn
    teacher = np.array([r.teacher_value for r in corpus], np.float64) * 100.0 / teacher_units_per_pawn
    out = {"all": agreement(student, teacher)}
    if holdout_fraction is not None:
        mask = np.array([r.game_id is None or is_held_out(r.game_id, holdout_fraction) for r in corpus])
        out["held_out"] = agreement(student[mask], teacher[mask])
    return out

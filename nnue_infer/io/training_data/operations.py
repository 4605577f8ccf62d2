"""Operations on training data: each row's flags (:func:`flags`), :func:`select` (the filters of ``nnue-infer
data filter``), :func:`rescore` (a network's scores blended in) and :class:`Summary` (``nnue-infer data info``).
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from ...errors import TrainingDataError
from ...kernels.chess import make_move as KMM
from ...kernels.threads import PARALLEL_LOCK
from .data import TrainingData


def flags(data: TrainingData) -> tuple[np.ndarray, np.ndarray]:
    """bool[n] arrays ``(in_check, capture)``: the side to move is in check; the move captures a
    piece standing on its to-square (the tools' ``isCapturingMove``: castling and en passant are
    not captures)."""
    in_check, capture = np.empty(len(data), np.bool_), np.empty(len(data), np.bool_)
    with PARALLEL_LOCK:
        KMM.row_flags(data.bitboards, data.stm, data.move, in_check, capture)
    return in_check, capture


def select(data: TrainingData, *, skip_in_check: bool = False, skip_captures: bool = False, min_ply: int = 0,
           max_abs_score: int | None = None) -> np.ndarray:
    """bool[n] mask of the rows kept by the usual training filters (all off by default).

    Parameters
    ----------
    skip_in_check, skip_captures : bool
        Drop positions whose side to move is in check / whose move captures (see :func:`flags`).
    min_ply : int
        Drop positions with ``ply`` below this.
    max_abs_score : int, optional
        Drop positions with ``|score|`` above this (internal units).
    """
    keep = data.ply >= min_ply
    if skip_in_check or skip_captures:
        in_check, capture = flags(data)
        if skip_in_check:
            keep &= ~in_check
        if skip_captures:
            keep &= ~capture
    if max_abs_score is not None:
        keep &= np.abs(data.score.astype(np.int32)) <= max_abs_score
    return keep


def rescore(data: TrainingData, evaluator, *, blend: float = 1.0, label: str = "<data>",
            first_row: int = 0) -> TrainingData:
    """``data`` with each score replaced by ``evaluator``'s evaluation of the position.

    Parameters
    ----------
    data : TrainingData
        Rows to rescore.
    evaluator : nnue_infer.Evaluator
        Evaluates the bitboards on all cores (:meth:`~nnue_infer.Evaluator.evaluate_bitboards`,
        the values :func:`nnue_infer.evaluate_batch` gives: internal units, side to move).
    blend : float
        Weight of the new evaluation: the score becomes
        ``rint(blend * evaluation + (1 - blend) * old score)`` (1: the evaluation alone, exact).
        Results outside int16 are clamped to -32768 .. 32767.
    label, first_row : str, int
        How errors name the data and its first row.

    Raises
    ------
    TrainingDataError
        A position the network cannot evaluate (no king, more than 32 pieces, ...): names the row
        and the FEN.
    """
    from ...batch import position_problem  # (the evaluation's modules: loaded by the commands that evaluate)

    if not 0.0 <= blend <= 1.0:
        raise ValueError(f"blend must be between 0 and 1, got {blend}")
    values, codes = evaluator.evaluate_bitboards(data.bitboards, data.stm)
    bad = np.flatnonzero(codes)
    if bad.size:
        i = int(bad[0])
        raise TrainingDataError(f"{label}: row {first_row + i}: {position_problem(int(codes[i]))}: "
                                f"{data[i:i + 1].fens()[0]}")
    new = values.astype(np.float64) if blend != 1.0 else values.astype(np.int64)
    if blend != 1.0:
        new = np.rint(blend * new + (1.0 - blend) * data.score.astype(np.float64))
    score = np.clip(new, -32768, 32767).astype(np.int16)
    return TrainingData._trusted({**{f.name: getattr(data, f.name) for f in fields(data)}, "score": score})


#: Edges of :func:`summary`'s score histogram (internal units; the outer bins are open).
SCORE_BINS = (-32768, -2000, -1000, -500, -250, -100, -50, 0, 1, 51, 101, 251, 501, 1001, 2001, 32768)


class Summary:
    """Running counts for ``nnue-infer data info``: add chunks with :meth:`add`, read :meth:`as_dict`."""

    def __init__(self) -> None:
        self.positions = 0
        self.chains = 0
        self.results = np.zeros(3, np.int64)
        self.in_check = 0
        self.captures = 0
        self.histogram = np.zeros(len(SCORE_BINS) - 1, np.int64)
        self.ply_min: int | None = None
        self.ply_max: int | None = None
        self.score_sum = 0
        self._last_chain: int | None = None

    def add(self, data: TrainingData) -> None:
        """Count ``data``'s rows (chunks of one file in order)."""
        if len(data) == 0:
            return
        self.positions += len(data)
        starts = np.count_nonzero(np.diff(data.chain)) + (1 if data.chain[0] != self._last_chain else 0)
        self.chains += int(starts)
        self._last_chain = int(data.chain[-1])
        self.results += np.bincount(data.result.astype(np.int64) + 1, minlength=3)  # results are -1 .. 1
        in_check, capture = flags(data)
        self.in_check += int(in_check.sum())
        self.captures += int(capture.sum())
        self.histogram += np.histogram(data.score, bins=np.array(SCORE_BINS))[0]
        lo, hi = int(data.ply.min()), int(data.ply.max())
        self.ply_min = lo if self.ply_min is None else min(self.ply_min, lo)
        self.ply_max = hi if self.ply_max is None else max(self.ply_max, hi)
        self.score_sum += int(data.score.astype(np.int64).sum())

    def as_dict(self) -> dict:
        """The counts as plain Python values (JSON-ready)."""
        labels = [f"{SCORE_BINS[k]}..{SCORE_BINS[k + 1] - 1}" for k in range(len(SCORE_BINS) - 1)]
        return {"positions": self.positions, "chains": self.chains,
                "results": {"loss": int(self.results[0]), "draw": int(self.results[1]), "win": int(self.results[2])},
                "in_check": self.in_check, "captures": self.captures,
                "ply": {"min": self.ply_min, "max": self.ply_max},
                "score": {"mean": self.score_sum / self.positions if self.positions else None,
                          "histogram": dict(zip(labels, self.histogram.tolist()))}}

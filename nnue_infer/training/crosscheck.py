"""Float vs quantised evaluation over many positions: the numbers behind ``nnue-infer crosscheck``.

Both evaluations are converted to centipawns with the architecture's ``units_per_pawn``
(unrounded, side to move's point of view) before differences are taken.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import NetworkFormatError, PositionError, quote
from ..evaluator import Evaluator
from ..float_network import FloatNetwork, forward_float
from ..network import Network


@dataclass(frozen=True)
class CrosscheckResult:
    """Errors of a quantised network against its float reference.

    Attributes
    ----------
    fens : list of str
        Positions evaluated (those the feature set cannot represent are in ``skipped``).
    float_cp, quantised_cp : float64[n]
        Evaluations in centipawns, side to move's point of view.
    skipped : list of (str, str)
        (FEN, reason) of positions that were not evaluated.
    """

    fens: list[str]
    float_cp: np.ndarray
    quantised_cp: np.ndarray
    skipped: list[tuple[str, str]]

    @property
    def error_cp(self) -> np.ndarray:
        """quantised - float, centipawns, float64[n]."""
        return self.quantised_cp - self.float_cp

    def summary(self) -> dict[str, float]:
        """n, mean/max absolute error, RMSE, bias, percentiles of |error| (cp) and Pearson correlation."""
        e = self.error_cp
        a = np.abs(e)
        n = len(e)
        corr = float(np.corrcoef(self.float_cp, self.quantised_cp)[0, 1]) if n > 1 and np.std(self.float_cp) > 0 else float("nan")
        return {
            "positions": n,
            "skipped": len(self.skipped),
            "mae_cp": float(a.mean()) if n else float("nan"),
            "max_abs_cp": float(a.max()) if n else float("nan"),
            "rmse_cp": float(np.sqrt((e * e).mean())) if n else float("nan"),
            "bias_cp": float(e.mean()) if n else float("nan"),
            "p50_abs_cp": float(np.percentile(a, 50)) if n else float("nan"),
            "p90_abs_cp": float(np.percentile(a, 90)) if n else float("nan"),
            "p99_abs_cp": float(np.percentile(a, 99)) if n else float("nan"),
            "correlation": corr,
        }

    def worst(self, k: int = 10) -> list[tuple[str, float, float, float]]:
        """The ``k`` positions with the largest |error|: (FEN, float cp, quantised cp, error cp)."""
        order = np.argsort(-np.abs(self.error_cp), kind="stable")[:k]
        return [(self.fens[i], float(self.float_cp[i]), float(self.quantised_cp[i]), float(self.error_cp[i])) for i in order]

    def histogram(self, bins: int = 10) -> list[tuple[float, float, int]]:
        """Error distribution: (low, high, count) per bin over [min, max] of the error (cp)."""
        counts, edges = np.histogram(self.error_cp, bins=bins)
        return [(float(edges[i]), float(edges[i + 1]), int(c)) for i, c in enumerate(counts)]


def crosscheck(float_network: FloatNetwork, network: Network, fens: list[str], progress: bool = False) -> CrosscheckResult:
    """Evaluate ``fens`` with :func:`forward_float` and the quantised :class:`Evaluator`.

    Raises
    ------
    NetworkFormatError
        The two networks describe different functions (feature set, widths, activations,
        layers or output units differ).
    """
    fa, qa = float_network.architecture, network.architecture
    for name in ("feature_set", "ft_width", "ft_activation", "psqt_buckets", "output_buckets", "layers", "skip_index",
                 "king_buckets", "mirror", "output_units", "units_per_pawn"):
        if getattr(fa, name) != getattr(qa, name):
            raise NetworkFormatError(f"float and quantised networks differ in architecture field {name!r}: "
                                     f"{getattr(fa, name)!r} vs {getattr(qa, name)!r}")
    ev = Evaluator(network)
    per_pawn = qa.units_per_pawn
    kept, fl, qu, skipped = [], [], [], []
    it = fens
    if progress:
        from tqdm import tqdm

        it = tqdm(fens, unit="pos", desc="crosscheck")
    for fen in it:
        try:
            f = forward_float(float_network, fen)
            q = ev.evaluate(fen)
        except (PositionError, ValueError) as exc:
            skipped.append((fen, str(exc)))
            continue
        kept.append(fen)
        fl.append(f * 100.0 / per_pawn)
        qu.append(q * 100.0 / per_pawn)
    return CrosscheckResult(kept, np.array(fl, np.float64), np.array(qu, np.float64), skipped)


def plot_histogram(result: CrosscheckResult, path: str | os.PathLike[str], title: str = "") -> None:
    """Write a PNG histogram of the errors (quantised - float, centipawns) with matplotlib (the ``plot`` extra)."""
    from .plotting import pyplot

    plt = pyplot()

    s = result.summary()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.hist(result.error_cp, bins=60, color="#4477aa")
    ax.set_xlabel("quantised - float (centipawns, side to move)")
    ax.set_ylabel("positions")
    ax.set_title(title or f"{s['positions']} positions: MAE {s['mae_cp']:.2f} cp, max {s['max_abs_cp']:.2f} cp, "
                 f"r = {s['correlation']:.5f}", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.fspath(path), format="png")
    plt.close(fig)


def read_positions(path: str | os.PathLike[str], where: list[str] | None = None) -> list[str]:
    """FENs from a file: JSON lines with a ``fen`` field (the dev corpus) or EPD/FEN lines ('#' comments).

    ``path`` may be ``-`` (stdin), a pipe, or gzip/zstd-compressed (:func:`nnue_infer.inputs.open_input`).
    ``where``, when given, receives ``"file:line"`` of each FEN returned (for messages naming the line).
    """
    import json

    from ..inputs import numbered_lines

    fens = []
    for label, lineno, line in numbered_lines(path):  # bad bytes: that line's FEN is skipped
        if line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                fen = json.loads(line)["fen"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{label}:{lineno}: JSON line without a 'fen' field ({exc})") from exc
            if not isinstance(fen, str):
                raise ValueError(f"{label}:{lineno}: 'fen' must be a string, got {quote(fen)}")
            fens.append(fen)
            if where is not None:
                where.append(f"{label}:{lineno}")
            continue
        if where is not None:
            where.append(f"{label}:{lineno}")
        fields = line.split()
        if len(fields) >= 6 and fields[4].isdigit() and fields[5].isdigit():
            fens.append(" ".join(fields[:6]))
        else:
            fens.append(" ".join(fields[:4]))
    return fens

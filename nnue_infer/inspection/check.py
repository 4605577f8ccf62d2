"""Is a network safe and well quantised: worst-case accumulator ranges, weights at the quantisation
limits, sparsity and dead neurons on data, and a float network's quantisation error.

* **Overflow.** Stockfish adds feature rows into an int16 accumulator (PSQT: int32) and wraps
  silently; a network whose worst case leaves the type evaluates wrongly on some positions
  (Stockfish issue 5282). The worst case of a neuron is its bias plus the largest (or smallest)
  weights over the most features that can be active at once, per input family: a piece-square set
  (HalfKAv2_hm, Chess768) at most 32 pieces, one per square, one king bucket per perspective
  (:func:`nnue_infer.quantisation.worst_active_sum`); Stockfish 18/19's threat and pawn-pair sets at most
  :data:`MAX_ACTIVE_INT8` rows each (their ``MaxActiveDimensions``).
* **Clipping.** The share of each tensor's integers at its type's limits (a quantiser that saturated
  them; nnue-pytorch issues 442/448).
* **Data.** On positions: feature-transformer output neurons never non-zero (dead), the share of
  zero bytes and of all-zero 4-byte chunks (what a sparse first layer skips), the accumulators'
  observed range against the worst case.
* **Float networks.** The quantised network's error against the float one (MAE, R², the error's
  1/2/3-sigma bands, the worst positions; nnue-pytorch's cross_check reports these), through
  :func:`nnue_infer.training.crosscheck.crosscheck`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..features import architecture_features, int8_layout
from ..float_network import FloatNetwork
from ..network import Network
from ..quantisation import worst_active_sum
from .permutation import BATCH_POSITIONS, half_width, zero_chunks
from .positions import Positions

#: Most active rows of each int8 feature set per perspective: Stockfish 18/19's FullThreats and
#: PP_3Wide ``MaxActiveDimensions`` (``nnue/features/full_threats.h``, ``pawn_pairs.h``).
MAX_ACTIVE_INT8 = 128
#: Share of positions within 1, 2 and 3 standard deviations of a normal distribution: the error
#: bands report the |error| below which these shares of positions lie.
SIGMA_SHARES = (0.682689492, 0.954499736, 0.997300204)
#: Neurons listed by name in the text report (all are in the JSON).
LISTED = 20


def _top_sum(w: np.ndarray, k: int) -> np.ndarray:
    """Per column, the sum of the ``k`` largest entries of non-negative ``w`` [R, C] (int64[C])."""
    if w.shape[0] == 0:
        return np.zeros(w.shape[1], np.int64)
    k = min(k, w.shape[0])
    return (-np.partition(-w, k - 1, axis=0)[:k]).astype(np.int64).sum(axis=0)


def worst_case(network: Network, psqt: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest value each accumulator neuron (or, with ``psqt``, each PSQT bucket) can
    reach over all positions the feature sets can encode: int64[L1] (int64[P]) each.

    bias (none for PSQT) + the most negative / most positive sum over the piece-square rows of one
    king bucket (32 pieces, one per square) + over :data:`MAX_ACTIVE_INT8` rows of each int8 set.
    """
    arch = network.architecture
    fs = architecture_features(arch)
    rows = network.psqt_weights if psqt else network.ft_weights
    rows8 = network.int8_psqt_weights if psqt else network.int8_weights
    wide = np.int64 if psqt else np.int32
    w = rows.astype(wide)
    high = worst_active_sum(np.maximum(w, 0), fs.num_slots).astype(np.int64)
    low = -worst_active_sum(np.maximum(-w, 0), fs.num_slots).astype(np.int64)
    del w
    layout = int8_layout(arch.int8_feature_sets)
    for start, stop in ((0, layout.pair_offset), (layout.pair_offset, layout.num_features)):
        if stop > start:
            part = rows8[start:stop].astype(wide)
            high += _top_sum(np.maximum(part, 0), MAX_ACTIVE_INT8)
            low -= _top_sum(np.maximum(-part, 0), MAX_ACTIVE_INT8)
    if not psqt:
        bias = network.ft_biases.astype(np.int64)
        high, low = high + bias, low + bias
    return low, high


def limit_shares(network: Network) -> list[dict[str, Any]]:
    """Per integer tensor: its dtype's limits and how many of its values sit at them.

    Returns a list of ``{"tensor", "dtype", "limits": [lo, hi], "at_limit", "values", "share"}``;
    int8 dense weights count -128, -127 and 127 (quantisers clip to ±127), others their dtype's
    minimum and maximum.
    """
    tensors = [("ft.biases", network.ft_biases), ("ft.weights", network.ft_weights),
               ("ft.psqt_weights", network.psqt_weights)]
    if network.int8_weights.size:
        tensors += [("ft.int8_weights", network.int8_weights), ("ft.int8_psqt_weights", network.int8_psqt_weights)]
    for i, (w, b) in enumerate(zip(network.layer_weights, network.layer_biases)):
        if w.dtype.kind == "f":
            continue
        tensors += [(f"layers.{i}.weights", w), (f"layers.{i}.biases", b)]
    out = []
    for name, arr in tensors:
        info = np.iinfo(arr.dtype)
        lo, hi = (-127, 127) if arr.dtype == np.int8 else (info.min, info.max)
        at = int(np.count_nonzero((arr <= lo) | (arr >= hi)))
        out.append({"tensor": name, "dtype": str(arr.dtype), "limits": [int(lo), int(hi)], "at_limit": at,
                    "values": int(arr.size), "share": at / arr.size if arr.size else 0.0})
    return out


def data_statistics(network: Network, positions: Positions) -> dict[str, Any]:
    """Sparsity and dead neurons of the feature-transformer output on ``positions``.

    Returns ``{"positions", "zero_byte_share", "zero_chunk_share", "dead_neurons" (output neurons of a
    half, never non-zero in either half), "accumulator_observed": [min, max]}``; raises as
    :meth:`nnue_infer.Evaluator.activations_bitboards`.
    """
    from ..evaluator import Evaluator

    ev = Evaluator(network)
    H = half_width(network)
    live = np.zeros(H, bool)
    zero_bytes = n_zero_chunks = chunks = 0
    lo, hi = np.iinfo(np.int16).max, np.iinfo(np.int16).min
    for start in range(0, len(positions), BATCH_POSITIONS):
        rows = slice(start, start + BATCH_POSITIONS)
        acts = ev.activations_bitboards(positions.bitboards[rows], positions.stm[rows])
        out = acts.ft_output
        n, F = out.shape
        nz = out != 0
        live |= nz.reshape(-1, H).any(axis=0)
        zero_bytes += int(n * F - np.count_nonzero(nz))
        z, c = zero_chunks(out)
        n_zero_chunks, chunks = n_zero_chunks + z, chunks + c
        lo, hi = min(lo, int(acts.accumulator.min())), max(hi, int(acts.accumulator.max()))
    n = len(positions)
    F = network.architecture.ft_output_width
    return {"positions": n, "zero_byte_share": zero_bytes / (n * F), "zero_chunk_share": n_zero_chunks / chunks,
            "dead_neurons": np.flatnonzero(~live).tolist(), "accumulator_observed": [lo, hi]}


def float_error(float_network: FloatNetwork, network: Network, positions: Positions, worst: int = 10) -> dict[str, Any]:
    """The quantised network's error against its float network on ``positions`` (centipawns, side to
    move): :func:`nnue_infer.training.crosscheck.crosscheck`'s summary plus R² (the float values as
    truth), the 1/2/3-sigma bands (|error| below which 68.3 / 95.4 / 99.7 % of positions lie) and the
    ``worst`` positions."""
    from ..training.crosscheck import crosscheck

    result = crosscheck(float_network, network, list(positions.fens))
    summary = result.summary()
    e, f = result.error_cp, result.float_cp
    total = float(((f - f.mean()) ** 2).sum()) if len(f) else 0.0
    summary["r2"] = 1.0 - float((e * e).sum()) / total if total > 0 else float("nan")
    a = np.abs(e)
    summary["sigma_bands_cp"] = [float(np.quantile(a, s)) if len(a) else float("nan") for s in SIGMA_SHARES]
    summary["worst"] = [{"fen": fen, "float_cp": fl, "quantised_cp": q, "error_cp": err}
                        for fen, fl, q, err in result.worst(worst)]
    return summary


@dataclass
class CheckReport:
    """What :func:`check` found (``to_dict`` for JSON, ``str`` for people).

    Attributes
    ----------
    summary : str
        The network's ``repr``.
    accumulator_low, accumulator_high : int64[L1]
        Worst-case range of each accumulator neuron (:func:`worst_case`).
    psqt_low, psqt_high : int64[P]
        Worst-case range of each PSQT bucket.
    limits : list of dict
        :func:`limit_shares`.
    data : dict, optional
        :func:`data_statistics` (with positions).
    float_error : dict, optional
        :func:`float_error` (for a float network, with positions).
    quantised_from_float : bool
        The network checked is the default quantisation of a float network.
    """

    summary: str
    accumulator_low: np.ndarray
    accumulator_high: np.ndarray
    psqt_low: np.ndarray
    psqt_high: np.ndarray
    limits: list[dict[str, Any]]
    data: dict[str, Any] | None = None
    float_error: dict[str, Any] | None = None
    quantised_from_float: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def int16_overflow(self) -> list[int]:
        """Accumulator neurons whose worst case leaves int16 (-32768..32767)."""
        bad = (self.accumulator_high > np.iinfo(np.int16).max) | (self.accumulator_low < np.iinfo(np.int16).min)
        return np.flatnonzero(bad).tolist()

    @property
    def psqt_overflow(self) -> list[int]:
        """PSQT buckets whose worst case, or the worst stm - opp difference, leaves int32."""
        i32 = np.iinfo(np.int32)
        diff = self.psqt_high - self.psqt_low
        bad = (self.psqt_high > i32.max) | (self.psqt_low < i32.min) | (diff > i32.max)
        return np.flatnonzero(bad).tolist()

    @property
    def safe(self) -> bool:
        """No int16 accumulator or int32 PSQT overflow is possible."""
        return not self.int16_overflow and not self.psqt_overflow

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of everything found."""
        lo, hi = self.accumulator_low, self.accumulator_high
        return {
            "network": self.summary,
            "quantised_from_float": self.quantised_from_float,
            "safe": self.safe,
            "accumulator": {"worst_low": int(lo.min()), "worst_high": int(hi.max()),
                            "headroom": int(min(32767 - hi.max(), lo.min() + 32768)),
                            "int16_overflow_neurons": self.int16_overflow,
                            "low": lo.tolist(), "high": hi.tolist()},
            "psqt": {"low": self.psqt_low.tolist(), "high": self.psqt_high.tolist(),
                     "int32_overflow_buckets": self.psqt_overflow},
            "limits": self.limits,
            "data": self.data,
            "float_error": self.float_error,
            "notes": self.notes,
        }

    def __str__(self) -> str:
        lo, hi = self.accumulator_low, self.accumulator_high
        lines = [f"network: {self.summary}" + (" (the float network quantised with the stockfish scheme)"
                                              if self.quantised_from_float else "")]
        j_hi, j_lo = int(np.argmax(hi)), int(np.argmin(lo))
        lines.append(f"accumulator worst case: {int(lo.min())} (neuron {j_lo}) .. {int(hi.max())} (neuron {j_hi}); "
                     f"int16 is -32768..32767")
        bad = self.int16_overflow
        if bad:
            names = ", ".join(f"{j} ({int(lo[j])}..{int(hi[j])})" for j in bad[:LISTED])
            more = f" and {len(bad) - LISTED} more" if len(bad) > LISTED else ""
            lines.append(f"  INT16 OVERFLOW POSSIBLE in {len(bad)} neuron(s): {names}{more}")
            lines.append("  (the worst case is an upper bound: the largest rows of a family need not be active together)")
        else:
            lines.append(f"  no int16 overflow possible (headroom {int(min(32767 - hi.max(), lo.min() + 32768))})")
        if self.psqt_high.size:
            lines.append(f"PSQT worst case: {int(self.psqt_low.min())} .. {int(self.psqt_high.max())}; int32")
            if self.psqt_overflow:
                lines.append(f"  INT32 OVERFLOW POSSIBLE in PSQT bucket(s) {self.psqt_overflow}")
            else:
                lines.append("  no int32 overflow possible (stm - opp difference included)")
        lines.append("values at the quantisation limits:")
        for t in self.limits:
            lines.append(f"  {t['tensor']:<22} {t['dtype']:<6} [{t['limits'][0]}, {t['limits'][1]}]: "
                         f"{t['at_limit']} of {t['values']} ({100 * t['share']:.3f} %)")
        if self.data is not None:
            d = self.data
            dead = d["dead_neurons"]
            lines.append(f"on {d['positions']} positions: zero bytes {100 * d['zero_byte_share']:.1f} %, all-zero 4-byte "
                         f"chunks {100 * d['zero_chunk_share']:.1f} % of the feature-transformer output")
            lines.append(f"  accumulator observed {d['accumulator_observed'][0]} .. {d['accumulator_observed'][1]}")
            names = ", ".join(map(str, dead[:LISTED])) + (f" and {len(dead) - LISTED} more" if len(dead) > LISTED else "")
            lines.append(f"  dead output neurons (never non-zero): {len(dead)}" + (f": {names}" if dead else ""))
        if self.float_error is not None:
            f = self.float_error
            b = f["sigma_bands_cp"]
            lines.append(f"quantised vs float on {f['positions']} positions: MAE {f['mae_cp']:.2f} cp, R2 {f['r2']:.5f}, "
                         f"max {f['max_abs_cp']:.2f} cp, bias {f['bias_cp']:+.2f} cp")
            lines.append(f"  |error| bands: 1 sigma (68.3 %) {b[0]:.2f} cp, 2 sigma (95.4 %) {b[1]:.2f} cp, "
                         f"3 sigma (99.7 %) {b[2]:.2f} cp")
            for w in f["worst"][:5]:
                lines.append(f"  worst: {w['error_cp']:+.2f} cp (float {w['float_cp']:.2f}, quantised "
                             f"{w['quantised_cp']:.2f}) {w['fen']}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def check(network: Network | FloatNetwork, positions: Positions | None = None) -> CheckReport:
    """Check a network's ranges, clipping and (with positions) sparsity and float error.

    Parameters
    ----------
    network : Network or FloatNetwork
        A quantised network, or a float network: then it is quantised with the default scheme
        (:func:`nnue_infer.quantisation.quantise`, parameters saturated) and that network is checked,
        and with positions compared with the float one.
    positions : Positions, optional
        Positions for the data statistics (:func:`nnue_infer.inspection.positions.read_positions`).

    Returns
    -------
    CheckReport

    Raises
    ------
    ValueError
        A position the network cannot evaluate (named).
    QuantisationRangeError
        A float network whose quantisation cannot be represented (QA, shift).
    """
    float_net = None
    if isinstance(network, FloatNetwork):
        from ..quantisation import quantise_with_report

        float_net = network
        network, qreport = quantise_with_report(float_net)
        notes = [f"quantisation clipped {c}" for c in qreport.clipped] + list(qreport.overflow_risks)
    else:
        notes = []
    low, high = worst_case(network)
    plow, phigh = worst_case(network, psqt=True)
    report = CheckReport(repr(network), low, high, plow, phigh, limit_shares(network),
                         quantised_from_float=float_net is not None, notes=notes)
    if positions is not None:
        report.data = data_statistics(network, positions)
        if float_net is not None:
            report.float_error = float_error(float_net, network, positions)
    return report


def plot(report: CheckReport, path: str | os.PathLike[str]) -> None:
    """A PNG of the worst-case accumulator range of every neuron against int16's limits (matplotlib,
    the ``plot`` extra), with the float error's histogram beside it for a float network."""
    from ..training.plotting import pyplot

    plt = pyplot()
    panels = 2 if report.float_error is not None else 1
    fig, axes = plt.subplots(1, panels, figsize=(7 * panels, 4), dpi=100, squeeze=False)
    ax = axes[0, 0]
    x = np.arange(report.accumulator_high.size)
    ax.fill_between(x, report.accumulator_low, report.accumulator_high, color="#4477aa", step="mid", lw=0)
    for limit in (32767, -32768):
        ax.axhline(limit, color="#cc3311", lw=1)
    ax.set_xlabel("accumulator neuron")
    ax.set_ylabel("worst-case value")
    ax.set_title(f"{report.summary}\nworst case per neuron; red: int16 limits", fontsize=8)
    if panels == 2:
        ax = axes[0, 1]
        f = report.float_error
        ax.set_title(f"quantised - float: MAE {f['mae_cp']:.2f} cp, R2 {f['r2']:.5f}", fontsize=8)
        ax.bar(range(3), f["sigma_bands_cp"], color="#4477aa", tick_label=["1 sigma", "2 sigma", "3 sigma"])
        ax.set_ylabel("|error| band (cp)")
    fig.tight_layout()
    fig.savefig(os.fspath(path), format="png")
    plt.close(fig)

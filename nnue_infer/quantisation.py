"""Quantisation: float networks to integer :class:`~nnue_infer.network.Network` s and back.

Scales (integer per float 1.0), all derived from the activation bounds of the float
semantics in :mod:`nnue_infer.float_network`:

====================================  =========================================  ========
tensor                                scale                                      type
====================================  =========================================  ========
feature-transformer weights, biases   QA (``ft_clamp``: the accumulator's 1.0)   int16
feature-transformer output            ``S_ft = QA**degree / 2**ft_shift``        uint8/int8 values
hidden activation (ClippedReLU 1.0)   127                                        uint8
first dense layer weights             ``127 * 2**wsb / S_ft``                    int8
later hidden dense layer weights      ``2**wsb`` (QB; 64 for wsb = 6)            int8
hidden dense biases                   ``127 * 2**wsb`` (input scale x weight)    int32
output layer weights                  ``output_units * output_scale / 127``      int8
output layer bias, PSQT weights       ``output_units * output_scale``            int32
forward skip                          ``num / den = output_units * output_scale / (127 * 2**wsb)``
====================================  =========================================  ========

Float32 hidden layers (``HiddenLayer(precision="float32")``) keep their float values; the
integer layer feeding the first of them has its output ``z`` converted as ``z / (127 * 2**wsb)``.

(``wsb`` = ``weight_scale_bits``; the first dense layer's input scale is ``S_ft`` instead of 127
when the layer stack reads the feature transformer; Stockfish 15.1: QA = 127, shift 7, so
``S_ft = 126.0078125`` and the first layer's weight scale is 64.5 ...)

Rounding is to nearest (ties to even, ``numpy.rint``); values beyond the integer type
saturate and every clipped tensor is reported (:class:`ClipRecord`).  Schemes whose worst
case can overflow int16 (accumulator) or int32 (PSQT, dense sums, final sum) are refused with
:class:`~nnue_infer.errors.QuantisationRangeError` naming the layer and the excess.

Source: nnue-pytorch ``serialize.py``/``model.py`` (scales: ``nnue2score``, ``weight_scale_hidden``,
``weight_scale_out``, ``quantized_one``), Stockfish 15.1 ``nnue/`` (integer pipeline).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field

import numpy as np

from .errors import QuantisationRangeError, QuantisationWarning
from .float_network import FloatNetwork, gate_table_value, network_tensors
from .network import FT_ACTIVATIONS, HIDDEN_ONE, Architecture, Network, check_finite

INT32_MAX = 2**31 - 1
INT16_MAX = 2**15 - 1
#: Most active features per perspective (32 pieces, kings included).
MAX_ACTIVE = 32


@dataclass(frozen=True)
class QuantisationScheme:
    """Integer scales of a quantised network.

    Attributes
    ----------
    qa : int
        QA: the accumulator integer of the float 1.0 (127 Stockfish, 255 bullet-style).
    ft_shift : int, optional
        Right shift after the feature-transformer activation; ``None`` picks the smallest shift
        keeping outputs <= 127 (so uint8 x int8 pairs cannot saturate an int16 SIMD lane:
        2 * 127 * 127 = 32258): 7 for pairwise with QA = 127, 9 for QA = 255, 1 for crelu with 255.
    weight_scale_bits : int
        log2 QB: hidden weights are quantised with QB = 2**weight_scale_bits (6: QB = 64).
    output_scale : int
        Divisor from (psqt + positional) to internal units (16 in Stockfish 15.1).
    """

    qa: int = 127
    ft_shift: int | None = None
    weight_scale_bits: int = 6
    output_scale: int = 16

    def __post_init__(self) -> None:
        bounds = {"qa": (1, None), "ft_shift": (0, 62), "weight_scale_bits": (0, 30), "output_scale": (1, 2**31 - 1)}
        for name, (lo, hi) in bounds.items():
            value = getattr(self, name)
            if name == "ft_shift" and value is None:
                continue
            if (not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < lo
                    or (hi is not None and value > hi)):
                raise QuantisationRangeError(f"scheme field {name!r}: must be an integer in {lo}..{hi or ''}, "
                                             f"got {value!r}")

    def shift_for(self, ft_activation: str) -> int:
        """The feature-transformer shift for ``ft_activation`` (explicit or the smallest keeping <= 127)."""
        if self.ft_shift is not None:
            return self.ft_shift
        top = self.qa ** FT_ACTIVATIONS[ft_activation].degree
        shift = 0
        while top >> shift > 127:
            shift += 1
        return shift


#: Named schemes: Stockfish 15.1's (QA = 127, shift 7 for pairwise, QB = 64, OutputScale 16) and
#: the common QA = 255 / QB = 64 scheme (shift 9 for pairwise).
SCHEMES = {
    "stockfish": QuantisationScheme(127, None, 6, 16),
    "qa255-qb64": QuantisationScheme(255, None, 6, 16),
}


@dataclass(frozen=True)
class ClipRecord:
    """Parameters of one tensor that did not fit their integer type and were saturated.

    Attributes
    ----------
    tensor : str
        Canonical tensor name (``ft.weights``, ``layers.0.weights``, ...).
    count : int
        Number of clipped parameters.
    worst : float
        The float value that was furthest out of range.
    limit : float
        Largest float magnitude the integer type holds at this tensor's scale.
    """

    tensor: str
    count: int
    worst: float
    limit: float

    def __str__(self) -> str:
        return f"{self.tensor}: {self.count} clipped, worst {self.worst:+.6g} (representable +-{self.limit:.6g})"


@dataclass
class QuantisationReport:
    """What :func:`quantise_with_report` did: the scheme, clipped tensors, and notes.

    ``overflow_risks`` lists worst cases that exceed Stockfish's own int32 arithmetic in places
    where Stockfish 15.1's network exceeds it too (the forward skip's ``z * 9600``) and that are
    therefore reported, not refused.
    """

    architecture: Architecture
    clipped: list[ClipRecord] = field(default_factory=list)
    overflow_risks: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"quantised with QA={self.architecture.ft_clamp}, shift {self.architecture.ft_shift}, "
                 f"QB=2**{self.architecture.weight_scale_bits}, output scale {self.architecture.output_scale}"]
        lines += [f"  clipped {c}" for c in self.clipped] or ["  no parameter clipped"]
        lines += [f"  note: {r}" for r in self.overflow_risks]
        return "\n".join(lines)


def tensor_scales(arch: Architecture) -> dict[str, float]:
    """Integer per float 1.0 of every tensor of ``arch`` (canonical names, see the module table)."""
    final = float(arch.output_units * arch.output_scale)
    hidden_out = float(HIDDEN_ONE * 2**arch.weight_scale_bits)
    scales = {"ft.biases": float(arch.ft_clamp), "ft.weights": float(arch.ft_clamp), "ft.psqt_weights": final,
              "ft.table": float(arch.ft_clamp)}
    for i, layer in enumerate(arch.layers):
        if layer.is_float:  # float32 layers keep their float values
            scales[f"layers.{i}.weights"] = scales[f"layers.{i}.biases"] = 1.0
            continue
        s_in = arch.ft_scale if i == 0 else float(HIDDEN_ONE)
        s_out = final if layer.activation == "none" else hidden_out
        scales[f"layers.{i}.weights"] = s_out / s_in
        scales[f"layers.{i}.biases"] = s_out
    return scales


def _dtypes(arch: Architecture) -> dict[str, type]:
    out: dict[str, type] = {"ft.biases": np.int16, "ft.weights": np.int16, "ft.psqt_weights": np.int32,
                            "ft.table": np.int16}
    for i, layer in enumerate(arch.layers):
        out[f"layers.{i}.weights"] = np.float32 if layer.is_float else np.int8
        out[f"layers.{i}.biases"] = np.float32 if layer.is_float else np.int32
    return out


def quantised_architecture(arch: Architecture, scheme: QuantisationScheme) -> Architecture:
    """``arch`` with the scheme's integer fields (QA, shift, QB, output scale, skip scale).

    Raises
    ------
    QuantisationRangeError
        QA does not fit int16, or the activation's outputs exceed the first dense layer's
        input type (uint8 / int8) with this shift; the message says by how much.
    """
    act = FT_ACTIVATIONS[arch.ft_activation]
    shift = scheme.shift_for(arch.ft_activation)
    if not 0 < scheme.qa <= INT16_MAX:
        raise QuantisationRangeError(f"feature transformer: QA={scheme.qa} does not fit the int16 accumulator "
                                     f"(max {INT16_MAX}, over by {scheme.qa - INT16_MAX})")
    top = scheme.qa**act.degree >> shift
    if top > act.max_output:
        raise QuantisationRangeError(
            f"feature transformer activation {arch.ft_activation!r}: QA={scheme.qa}, shift {shift} gives outputs up to "
            f"{top}, exceeding the {'int8' if act.signed else 'uint8'} input of layers[0] ({act.max_output}) by "
            f"{top - act.max_output}"
        )
    hidden_out = HIDDEN_ONE * 2**scheme.weight_scale_bits
    return dataclasses.replace(
        arch, ft_clamp=scheme.qa, ft_shift=shift, weight_scale_bits=scheme.weight_scale_bits,
        output_scale=scheme.output_scale,
        skip_numerator=arch.output_units * scheme.output_scale if arch.skip_index >= 0 else 0,
        skip_denominator=hidden_out if arch.skip_index >= 0 else 1,
    )


def quantise_with_report(network: FloatNetwork, scheme: QuantisationScheme = SCHEMES["stockfish"],
                         clip: str = "saturate") -> tuple[Network, QuantisationReport]:
    """Quantise ``network`` with ``scheme``; returns the integer network and a report.

    Parameters
    ----------
    network : FloatNetwork
        The float network (its architecture's integer fields are replaced).
    scheme : QuantisationScheme
        Integer scales; see :data:`SCHEMES`.
    clip : {"saturate", "error"}
        What to do with parameters beyond their integer type: saturate them (and list them in
        the report) or raise :class:`QuantisationRangeError` listing them.

    Raises
    ------
    QuantisationRangeError
        The scheme can overflow: QA or the activation output range (see
        :func:`quantised_architecture`), the int16 accumulator, the int32 PSQT accumulator, a
        dense layer's int32 sum or the final int32 sum on the worst case over positions (at
        most 32 pieces, one per square); the message names the layer and the excess.  Also for
        clipped parameters when ``clip="error"``.
    NetworkFormatError
        A tensor holds NaN or infinity (written into the arrays after the network was built);
        the message names the tensor and the first bad index.
    """
    if clip not in ("saturate", "error"):
        raise ValueError(f"clip must be 'saturate' or 'error', got {clip!r}")
    arch = quantised_architecture(network.architecture, scheme)
    scales = tensor_scales(arch)
    dtypes = _dtypes(arch)
    report = QuantisationReport(arch)
    ints: dict[str, np.ndarray] = {}
    for name, arr in network_tensors(network).items():
        check_finite(name, arr)  # also values written into the arrays after construction
        if dtypes[name] is np.float32:
            ints[name] = arr.astype(np.float32)
            continue
        if name == "ft.table":  # the gate resampled at every integer accumulator value -QA..QA
            arr = table_samples(arr, arch.ft_clamp)
        info = np.iinfo(dtypes[name])
        q = np.rint(arr.astype(np.float64) * scales[name])
        over = (q > info.max) | (q < info.min)
        if over.any():
            vals = arr[over]
            worst = float(vals[np.argmax(np.abs(vals))])
            report.clipped.append(ClipRecord(name, int(over.sum()), worst, info.max / scales[name]))
            q = np.clip(q, info.min, info.max)
        ints[name] = q.astype(dtypes[name])
    if report.clipped and clip == "error":
        raise QuantisationRangeError("parameters out of range: " + "; ".join(str(c) for c in report.clipped))
    n = len(arch.layers)
    qnet = Network(
        architecture=arch,
        ft_biases=ints["ft.biases"], ft_weights=ints["ft.weights"], psqt_weights=ints["ft.psqt_weights"],
        layer_weights=tuple(ints[f"layers.{i}.weights"] for i in range(n)),
        layer_biases=tuple(ints[f"layers.{i}.biases"] for i in range(n)),
        description=network.description, ft_table=ints.get("ft.table"),
    )
    report.overflow_risks.extend(check_ranges(qnet))
    return qnet, report


def table_samples(table: np.ndarray, qa: int) -> np.ndarray:
    """A float ``lut_glu`` gate table (K samples over [-1, 1]) evaluated at every accumulator
    integer -QA..QA: float64[2 * QA + 1], to be rounded at scale QA."""
    return gate_table_value(table, np.arange(-qa, qa + 1, dtype=np.float64) / qa)


def quantise(network: FloatNetwork, scheme: QuantisationScheme = SCHEMES["stockfish"]) -> Network:
    """Quantise ``network`` with ``scheme``; see :func:`quantise_with_report`.

    Parameters beyond their integer type saturate, never silently: a
    :class:`~nnue_infer.errors.QuantisationWarning` names each clipped tensor (use
    ``quantise_with_report(..., clip="error")`` to refuse them instead).
    """
    net, report = quantise_with_report(network, scheme)
    if report.clipped:
        warnings.warn("quantise saturated parameters: " + "; ".join(map(str, report.clipped)), QuantisationWarning,
                      stacklevel=2)
    return net


def dequantise(network: Network) -> FloatNetwork:
    """The float network a quantised ``network`` stands for: every integer divided by its scale.

    ``quantise(dequantise(q), scheme)`` reproduces every integer of ``q`` when ``scheme`` has
    ``q``'s QA, shift, QB and output scale (and no integer exceeds 2**23, float32's exact range).
    """
    arch = network.architecture
    scales = tensor_scales(arch)
    f = {name: (arr.astype(np.float64) / scales[name]).astype(np.float32) for name, arr in network_tensors(network).items()}
    return FloatNetwork.from_tensors(arch, f, network.description)


def worst_active_sum(absw: np.ndarray, num_slots: int) -> np.ndarray:
    """Per column, the largest sum of ``MAX_ACTIVE`` rows of ``absw`` [F, C] that one position can activate
    (``absw`` non-negative: absolute values, or one sign's part; int64[C]).

    Rows are ``square + 64 * slot + 64 * num_slots * king_bucket``; a position has one king
    bucket per perspective and at most one piece per square, so the bound is, per king bucket,
    the sum of the 32 largest per-square maxima over slots.
    """
    F, Cn = absw.shape
    per_square = absw.reshape(F // (64 * num_slots), num_slots, 64, Cn).max(axis=1)
    k = min(MAX_ACTIVE, 64)
    top = -np.partition(-per_square, k - 1, axis=1)[:, :k]
    return top.sum(axis=1).max(axis=0)


def check_ranges(network: Network) -> list[str]:
    """Refuse integer parameters whose worst case overflows; returns the reported-only risks.

    Checks, over every position a feature set can encode (<= 32 pieces, one per square):
    the int16 accumulator (|bias| + worst active rows), the int32 PSQT accumulator and the
    stm - opp difference, each dense layer's int32 sum (|bias| + sum |w| * max input), and the
    final int32 ``psqt + positional``.  The forward skip's ``z * num`` (computed in wrapping int32
    as Stockfish does) is only reported: Stockfish 15.1's own network exceeds it 5.7-fold on the
    worst case, which real positions never reach.

    Raises
    ------
    QuantisationRangeError
        Naming the layer, the worst-case value, the limit and the excess.
    """
    from .features import architecture_features

    arch = network.architecture
    fs = architecture_features(arch)
    risks: list[str] = []
    acc = np.abs(network.ft_biases.astype(np.int64)) + worst_active_sum(np.abs(network.ft_weights.astype(np.int32)), fs.num_slots)
    j = int(np.argmax(acc))
    if acc[j] > INT16_MAX:
        raise QuantisationRangeError(
            f"feature transformer: worst-case accumulator |bias| + {MAX_ACTIVE} largest active weights = {int(acc[j])} "
            f"in column {j} exceeds int16 max {INT16_MAX} by {int(acc[j]) - INT16_MAX}"
        )
    psqt_bound = 0
    if arch.psqt_buckets:
        p = worst_active_sum(np.abs(network.psqt_weights.astype(np.int64)), fs.num_slots)
        psqt_bound = int(p.max())
        if 2 * psqt_bound > INT32_MAX:
            raise QuantisationRangeError(
                f"PSQT: worst-case stm - opp accumulator difference {2 * psqt_bound} exceeds int32 max {INT32_MAX} "
                f"by {2 * psqt_bound - INT32_MAX}"
            )
    act = arch.ft
    max_in = arch.ft_clamp**act.degree >> arch.ft_shift
    positional = 0
    for i, (layer, w, b) in enumerate(zip(arch.layers, network.layer_weights, network.layer_biases)):
        if layer.is_float:  # float arithmetic; the output is saturated to int32
            break
        bound = np.abs(b.astype(np.int64)) + np.abs(w.astype(np.int64)).sum(axis=2) * max_in
        worst = int(bound.max())
        if worst > INT32_MAX:
            raise QuantisationRangeError(
                f"layers[{i}]: worst-case int32 sum |bias| + sum |w| * {max_in} = {worst} exceeds {INT32_MAX} "
                f"by {worst - INT32_MAX}"
            )
        if i == 0 and arch.skip_index >= 0:
            z = int(bound[:, arch.skip_index].max())
            skip = z * arch.skip_numerator
            if skip > INT32_MAX:
                risks.append(f"forward skip: worst case |z| * {arch.skip_numerator} = {skip} exceeds int32 "
                             f"({skip / INT32_MAX:.1f}x); Stockfish wraps there too")
            positional += z * arch.skip_numerator // arch.skip_denominator
        if layer.activation == "none":
            positional += worst
        max_in = HIDDEN_ONE
    total = psqt_bound + positional
    if total > INT32_MAX:
        raise QuantisationRangeError(f"output: worst-case psqt + positional = {total} exceeds int32 max {INT32_MAX} "
                                     f"by {total - INT32_MAX}")
    return risks


class ErrorBound:
    """Per-position bound on ``|quantised - float|`` (internal units) for a quantised network.

    Derivation (float units, first order).  The integer pipeline differs from the float one by
    (a) rounding of the parameters and (b) the floors of its shifts and truncating divisions.
    (a) is modelled as independent zero-mean errors with each tensor's measured mean square
    ``s2 = mean((dequantised - float)**2)`` (``1 / (12 * scale**2)`` without clipping); (b) as
    ``-q/2 + U(-q/2, q/2)`` for a floor of step ``q``: a known mean (bias) plus a uniform part.
    Every stage carries per element a bound ``B`` on the absolute mean error and a variance ``V``:

    * accumulator: ``B = 0``, ``V = n_active * s2(ft.weights) + s2(ft.biases)``;
    * feature-transformer activation: ``V = g_a**2 V + g_b**2 V + q**2/12`` and ``B = q/2`` with
      ``q = 1/S_ft`` wherever the integer output can be non-zero (0 where a clamp is certain),
      ``g`` the largest slope of the float function within ``k`` standard deviations of the float
      accumulator (``pairwise``: ``g_a = clamp(b)``, ``screlu``: ``2 clamp(a)``, ...);
    * dense layer: ``V = W**2 @ V + s2(W) * sum(x**2) + s2(b)``; ``B = |W @ B|`` after the
      feature transformer (all its floor means have the same sign), ``|W| @ B`` later; hidden
      activations multiply by their local slope (ClippedReLU 1, SqrClippedReLU ``2 |z| 127/128``)
      and add ``q = 1/127`` (their shift's floor) to B (q/2) and V (q**2/12);
    * the forward skip, the PSQT and the final divisions add one integer unit each to B.

    The bound is ``output_units * (B_y + B_skip + k * (sigma_y + sigma_skip + sigma_psqt)) + 1``
    internal units, ``k`` standard deviations (default 6: a normal error exceeds it with
    probability 2e-9).  Per activation it grows with the slope and with the number of non-zero
    outputs, each carrying a floor error: ``crelu``/``screlu`` (all L1 outputs of both
    perspectives, slopes 1 / 2) > ``bilinear``/``glu`` (L1/2 outputs, never exactly zero for
    bilinear) > ``pairwise`` (zero wherever a clamp at 0 is certain) > ``pairwise_screlu``
    (small slope near 0).  The smooth gates ``hswish_glu`` (gate slope |x + 1/2| <= 3/2) and
    ``lut_glu`` (slope of the table's steepest segment) are never exactly zero either; ``lut_glu``
    adds the rounding of its table entries (variance ``s2(ft.table) * clamp(b)**2``).

    Parameters
    ----------
    float_network : FloatNetwork
        The reference.
    network : Network
        ``quantise(float_network, scheme)`` (same architecture apart from the integer fields).
    sigmas : float
        ``k`` above.
    """

    def __init__(self, float_network: FloatNetwork, network: Network, sigmas: float = 6.0) -> None:
        self.float_network = float_network
        self.network = network
        self.sigmas = sigmas
        arch = network.architecture
        scales = tensor_scales(arch)
        ref = network_tensors(float_network)
        self.s2 = {}
        for name, q in network_tensors(network).items():
            r = table_samples(ref[name], arch.ft_clamp) if name == "ft.table" else ref[name].astype(np.float64)
            d = q.astype(np.float64) / scales[name] - r
            self.s2[name] = float(np.mean(d * d)) if d.size else 0.0

    def _ft(self, a: np.ndarray, V: float) -> tuple[np.ndarray, np.ndarray]:
        """(B, V) of one perspective's feature-transformer output from its float accumulator ``a``."""
        arch = self.network.architecture
        name = arch.ft_activation
        m = self.sigmas * np.sqrt(V)
        q = 1.0 / arch.ft_scale

        def reach(x, lo):  # the neighbourhood meets the linear region (lo, 1)
            return ((x + m > lo) & (x - m < 1)).astype(np.float64)

        def cmax(x, lo):  # largest |clamp| in the neighbourhood
            return np.maximum(np.abs(np.clip(x - m, lo, 1)), np.abs(np.clip(x + m, lo, 1)))

        if name in ("crelu", "screlu"):
            g = reach(a, 0) * (1.0 if name == "crelu" else 2 * cmax(a, 0))
            live = a + m > 0
        elif name in ("hswish_glu", "lut_glu"):
            h = a.shape[0] // 2
            x, y = a[:h], a[h:]
            cx, cy = cmax(x, -1.0), cmax(y, -1.0)
            if name == "hswish_glu":  # gate h(x) = x (x + 1) / 2: |h| <= cx (cx + 1) / 2, |h'| <= cx + 1/2
                gate, slope = cx * (cx + 1) / 2, cx + 0.5
                V_gate = 0.0
            else:  # gate t: |t| <= max |table|, |t'| <= the table's steepest segment; entries rounded at QA
                t = self.float_network.ft_table.astype(np.float64)
                gate = np.full_like(cx, np.abs(t).max())
                slope = np.abs(np.diff(t)).max() * (t.size - 1) / 2
                V_gate = self.s2["ft.table"]
            gx, gy = reach(x, -1.0) * slope * cy, reach(y, -1.0) * gate
            V_out = (gx * gx + gy * gy) * V + V_gate * cy * cy + q * q / 12
            return np.full_like(cx, q / 2), V_out
        else:
            h = a.shape[0] // 2
            x, y = a[:h], a[h:]
            lo_x = -1.0 if name == "bilinear" else 0.0
            lo_y = -1.0 if name in ("glu", "bilinear") else 0.0
            cx, cy = cmax(x, lo_x), cmax(y, lo_y)
            if name == "pairwise_screlu":
                gx, gy = reach(x, 0) * 2 * cx * cy * cy, reach(y, 0) * 2 * cy * cx * cx
            else:
                gx, gy = reach(x, lo_x) * cy, reach(y, lo_y) * cx
            g = np.sqrt(gx * gx + gy * gy)
            live = ((x + m > 0) | (lo_x < 0)) & ((y + m > 0) | (lo_y < 0))
        return np.where(live, q / 2, 0.0), g * g * V + np.where(live, q * q / 12, 0.0)

    def __call__(self, board) -> float:
        """The bound for ``board`` (``chess.Board`` or FEN), internal units."""
        from .float_network import forward_float_trace

        arch = self.network.architecture
        k = self.sigmas
        fe = forward_float_trace(self.float_network, board)
        stm_f, opp_f = fe.features
        parts = [self._ft(fe.accumulators[p], len(f) * self.s2["ft.weights"] + self.s2["ft.biases"])
                 for p, f in enumerate((stm_f, opp_f))]
        B = np.concatenate([parts[0][0], parts[1][0]])
        V = np.concatenate([parts[0][1], parts[1][1]])
        B_skip = V_skip = 0.0
        qh = 1.0 / HIDDEN_ONE
        for i, layer in enumerate(arch.layers):
            n_in = fe.inputs[i].shape[0]
            Bx, Vx = np.zeros(n_in), np.zeros(n_in)
            Bx[: B.shape[0]], Vx[: V.shape[0]] = B, V
            W = self.float_network.layer_weights[i][fe.bucket].astype(np.float64)
            x = np.abs(fe.inputs[i]) + Bx + k * np.sqrt(Vx)
            Bz = np.abs(W @ Bx) if i == 0 else np.abs(W) @ Bx
            Vz = (W * W) @ Vx + self.s2[f"layers.{i}.weights"] * float(x @ x) + self.s2[f"layers.{i}.biases"]
            z = fe.outputs[i]
            if i == 0 and arch.skip_index >= 0:
                B_skip, V_skip = float(Bz[arch.skip_index]), float(Vz[arch.skip_index])
            if layer.activation == "none":
                B_y, V_y = float(Bz[0]), float(Vz[0])
                if layer.is_float:  # rounded to an integer positional
                    B_y += 0.5 / (arch.output_units * arch.output_scale)
                break
            n = layer.n_activated
            z, Bz, Vz = z[:n], Bz[:n], Vz[:n]
            m = Bz + k * np.sqrt(Vz)
            # activations computed on integers floor after their shift; float ones do not
            q = qh if not (layer.is_float or arch.layers[i + 1].is_float) else 0.0
            live = z + m > 0
            crelu_g = (live & (z - m < 1)).astype(np.float64)
            crelu = (np.where(live, crelu_g * Bz + q / 2, 0.0), crelu_g**2 * Vz + np.where(live, q * q / 12, 0.0))
            sqr_g = np.where(np.abs(z) - m < 1 / np.sqrt(127 / 128), 2 * (np.abs(z) + m) * 127 / 128, 0.0)
            sqr = (sqr_g * Bz + q / 2, sqr_g**2 * Vz + q * q / 12)
            if layer.activation == "crelu":
                B, V = crelu
            elif layer.activation == "sqr_crelu":
                B, V = sqr
            elif layer.activation == "relu":
                g = live.astype(np.float64)
                B, V = g * Bz, g * Vz
            elif layer.activation == "screlu":
                g = crelu_g * 2 * np.minimum(np.maximum(z, 0) + m, 1)
                B, V = g * Bz, g * g * Vz
            else:
                B, V = np.concatenate([sqr[0], crelu[0]]), np.concatenate([sqr[1], crelu[1]])
        unit = 1.0 / (arch.output_units * arch.output_scale)
        V_psqt = (len(stm_f) + len(opp_f)) * self.s2["ft.psqt_weights"] / 4 if arch.psqt_buckets else 0.0
        B_total = B_y + B_skip + (unit if arch.skip_index >= 0 else 0.0) + (unit if arch.psqt_buckets else 0.0)
        sigma = np.sqrt(V_y) + np.sqrt(V_skip) + np.sqrt(V_psqt)
        return float(arch.output_units * (B_total + k * sigma) + 1.0)

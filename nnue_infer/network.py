"""Network description and containers of quantised parameters.

A :class:`Network` is an :class:`Architecture` (a declarative, JSON-serialisable
description) plus integer arrays in their logical layout.  It validates shape,
dtype and contiguity once and derives the flat compute layout the kernels use.
Stockfish 15.1's network is one instance: :func:`stockfish_15_1_architecture`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from . import constants as C
from .errors import NetworkFormatError
from .kernels.nnue import activation as A
from .kernels import simd
from .kernels.nnue.activation import ACT_CRELU, ACT_NONE, ACT_SQR_CRELU, ACT_SQR_CRELU_AND_CRELU
from .kernels.nnue.dense import COL_ROWS, COL_SHIFT, COL_X_IN, COL_X_OUT, LAYER_TABLE_COLUMNS

#: Hidden-layer activation names and their kernel codes (integer layers).
HIDDEN_ACTIVATIONS = {
    "none": ACT_NONE,
    "crelu": ACT_CRELU,
    "sqr_crelu": ACT_SQR_CRELU,
    "sqr_crelu+crelu": ACT_SQR_CRELU_AND_CRELU,
}
#: Activations of float32 layers and their kernel codes: the integer ones computed in float,
#: plus ``relu`` (max(z, 0)) and ``screlu`` (clamp(z, 0, 1)**2), which only exist in float.
FLOAT_ACTIVATIONS = {
    **{name: A.ACT_FLOAT + code for name, code in HIDDEN_ACTIVATIONS.items()},
    "relu": A.ACT_F_RELU,
    "screlu": A.ACT_F_SCRELU,
}
#: Precisions of dense layers: int8 weights / int32 biases, or float32 for both.
LAYER_PRECISIONS = ("int8", "float32")
#: Integer value of a hidden activation's 1.0 (ClippedReLU's upper bound, Stockfish 15.1).
HIDDEN_ONE = 127


@dataclass(frozen=True)
class FtActivation:
    """How a feature-transformer activation maps accumulators to the first dense layer's input.

    Attributes
    ----------
    code : int
        Kernel code (``kernels.nnue.activation.FT_*``).
    paired : bool
        Multiplies the two halves of each perspective's accumulator (output L1/2 per
        perspective) instead of acting element-wise (output L1 per perspective).
    degree : int
        Degree of the integer product before the shift: the output is at most
        ``QA**degree >> shift`` in magnitude and 1.0 in float maps to ``QA**degree / 2**shift``.
    signed : bool
        Output may be negative (stored as int8 values, otherwise uint8 values).
    lipschitz : float
        Largest slope of the float function on its domain (used by error bounds).
    """

    code: int
    paired: bool
    degree: int
    signed: bool
    lipschitz: float

    @property
    def max_output(self) -> int:
        """Largest output magnitude the first dense layer's input type holds (127 or 255)."""
        return 127 if self.signed else 255


#: Feature-transformer activations: float definitions (a, b = the two halves, 1.0 = QA)
#:
#: * ``crelu``           clamp(a, 0, 1)                          (element-wise)
#: * ``screlu``          clamp(a, 0, 1)**2                       (element-wise)
#: * ``pairwise``        clamp(a, 0, 1) * clamp(b, 0, 1)         (Stockfish, Viridithas)
#: * ``pairwise_screlu`` clamp(a, 0, 1)**2 * clamp(b, 0, 1)**2
#: * ``glu``             clamp(a, 0, 1) * clamp(b, -1, 1)        (gate activated, value only bounded)
#: * ``bilinear``        clamp(a, -1, 1) * clamp(b, -1, 1)       (neither activated)
#: * ``hswish_glu``      h(x) * clamp(b, -1, 1), x = clamp(a, -1, 1), h(x) = x (x + 1) / 2
#:                       = hard-swish(3x) / 3: a smooth gate (SwiGLU's NNUE form), exact in integers
#: * ``lut_glu``         t(clamp(a, -1, 1)) * clamp(b, -1, 1), t the piecewise-linear function
#:                       through the network's gate table (``ft_table``; GEGLU/SwiGLU by table)
FT_ACTIVATIONS = {
    "crelu": FtActivation(A.FT_CRELU, False, 1, False, 1.0),
    "screlu": FtActivation(A.FT_SCRELU, False, 2, False, 2.0),
    "pairwise": FtActivation(A.FT_PAIRWISE, True, 2, False, 2.0),
    "pairwise_screlu": FtActivation(A.FT_PAIRWISE_SCRELU, True, 4, False, 4.0),
    "glu": FtActivation(A.FT_GLU, True, 2, True, 2.0),
    "bilinear": FtActivation(A.FT_BILINEAR, True, 2, True, 2.0),
    "hswish_glu": FtActivation(A.FT_HSWISH_GLU, True, 3, True, 1.5),
    "lut_glu": FtActivation(A.FT_LUT_GLU, True, 2, True, 2.0),
}
#: Activations whose gate is a table stored with the network (``ft_table``).
TABLE_ACTIVATIONS = ("lut_glu",)
#: Samples of the default gate table of a float ``lut_glu`` network (uniform over [-1, 1]).
DEFAULT_TABLE_SAMPLES = 257


def default_gate_table(samples: int = DEFAULT_TABLE_SAMPLES) -> np.ndarray:
    """The default ``lut_glu`` gate: SiLU with slope 4, ``t(u) = u * sigmoid(4 u)``, sampled at
    ``samples`` points uniform over u in [-1, 1]; float32[samples], values in [-0.07, 0.99].

    Within the clamp it is a smoothed ReLU (GELU and SiLU have this shape); any function with
    |t| <= 1 can be stored instead.
    """
    u = np.linspace(-1.0, 1.0, samples)
    return (u / (1.0 + np.exp(-4.0 * u))).astype(np.float32)
#: Feature sets known to :mod:`nnue_infer.features`.
FEATURE_SETS = ("HalfKAv2_hm", "Chess768")
#: Forward-skip modes (see ``Architecture.skip_mode``).
SKIP_MODES = ("separate", "output")
#: Rules turning (psqt, positional) into the value (see ``Architecture.value_division``).
VALUE_DIVISIONS = ("sum", "each")
#: Storage of feature-transformer arrays in ``.nnue`` files (see ``Architecture.ft_compression``).
FT_COMPRESSIONS = ("none", "leb128")
#: Stockfish versions whose ``eval`` text :class:`~nnue_infer.trace.Trace` renders.
STOCKFISH_VERSIONS = ("15.1", "16", "17.1", "18", "19")
#: Horizontal mirroring modes: none, own king moved to files e-h (HalfKAv2_hm), or to files a-d
#: (bullet's ``ChessBucketsMirrored``).
MIRROR_MODES = {"none": 0, "e-h": 1, "a-d": 2}


def block_layout(w: np.ndarray) -> np.ndarray:
    """int8 ``[buckets, n_out, n_in]`` dense weights in the kernels' block layout
    ``[buckets, ceil(n_in / 4), n_out, 4]`` (a copy): each 4-byte input block's weights for all
    outputs are contiguous, as ``vpdpbusd``/``vpmaddubsw`` read them (``kernels.nnue.dense.affine``).
    Hidden layers' inputs are padded to 32 already; a first layer whose input width is not a
    multiple of 4 (small ``ft_width``) gets zero weight columns up to one."""
    B, n_out, n_in = w.shape
    padded = (n_in + 3) // 4 * 4
    if padded != n_in:
        w = np.concatenate([w, np.zeros((B, n_out, padded - n_in), w.dtype)], axis=2)
    return np.ascontiguousarray(w.reshape(B, n_out, padded // 4, 4).transpose(0, 2, 1, 3))


def _offset_biases(b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """int32 ``[buckets, n_out]`` biases ``b`` of a layer whose int8 inputs x arrive as the bytes
    x + 128: ``wrap32(b - 128 * W.sum(inputs))`` (``w`` int8 ``[buckets, n_out, n_in]``), so the
    int32 sums are unchanged (see ``Network.compute_layout``)."""
    shifted = b.astype(np.int64) - 128 * w.astype(np.int64).sum(axis=2)
    return ((shifted + 2**31) % 2**32 - 2**31).astype(np.int32)


def _pad32(n: int) -> int:
    """Round up to a multiple of 32 (Stockfish pads dense-layer inputs so)."""
    return (n + 31) // 32 * 32


@dataclass(frozen=True)
class HiddenLayer:
    """One dense layer of a layer stack.

    Attributes
    ----------
    outputs : int
        Number of int32 outputs of the affine transform.
    activation : str
        ``"crelu"`` (ClippedReLU), ``"sqr_crelu"`` (SqrClippedReLU), ``"sqr_crelu+crelu"``
        (both, concatenated: Stockfish 15.1's fc_0) or ``"none"`` (output layer).
    activated : int
        How many of the first outputs go through the activation (the rest, e.g. the
        forward-skip neuron, are used raw).  Defaults to all outputs.
    precision : str
        ``"int8"`` (int8 weights, int32 biases; the default) or ``"float32"`` (a float hidden
        layer: float32 parameters, float64 arithmetic; may also use ``"relu"`` and
        ``"screlu"``).  The first layer is int8; float layers follow the integer ones, and the
        integer layer feeding the first float layer applies its activation in float.
    shift : int, optional
        Right shift of this layer's int32 sums in its activation: ClippedReLU is
        ``clamp(z >> shift, 0, 127)``, SqrClippedReLU ``min(127, z*z >> (2*shift + 7))``.
        ``None``: the architecture's ``weight_scale_bits`` (6).  Stockfish 19's fc_0 uses 7.
    concat_inputs : bool
        The layer reads the concatenation of the activations of *all* earlier dense layers
        (each block padded to a multiple of 32), not only the previous layer's: Stockfish 19's
        fc_2 reads [fc_0 sqr, fc_0 clipped, fc_1 sqr, fc_1 clipped] (128 inputs).
    """

    outputs: int
    activation: str
    activated: int | None = None
    precision: str = "int8"
    shift: int | None = None
    concat_inputs: bool = False

    @property
    def is_float(self) -> bool:
        """Whether the layer's parameters are float32."""
        return self.precision == "float32"

    @property
    def n_activated(self) -> int:
        """Outputs that go through the activation."""
        return self.outputs if self.activated is None else self.activated

    @property
    def activated_width(self) -> int:
        """Width of the activation's uint8 output (before padding)."""
        n = self.n_activated
        return 2 * n if self.activation == "sqr_crelu+crelu" else n


@dataclass(frozen=True)
class Architecture:
    """Declarative description of a pairwise-NNUE-family network (float or quantised).

    Attributes
    ----------
    feature_set : str
        Input feature set: ``"HalfKAv2_hm"`` (Stockfish; 32 king buckets x 11 slots x 64) or
        ``"Chess768"`` (12 piece slots x 64 squares, own pieces in slots 0-5, theirs 6-11,
        squares flipped vertically for Black; optionally king-bucketed and mirrored).
    ft_width : int
        Accumulator width L1 per perspective.
    ft_activation : str
        Feature-transformer activation, one of :data:`FT_ACTIVATIONS` (``crelu``, ``screlu``,
        ``pairwise``, ``pairwise_screlu``, ``glu``, ``bilinear``).
    ft_clamp : int
        QA: the integer that stands for the float 1.0 in the accumulator (127 in Stockfish 15.1).
    ft_shift : int
        Right shift applied to the activation's integer product (7 in Stockfish 15.1); the
        output is ``act_int(acc) >> ft_shift`` with 1.0 = ``QA**degree / 2**ft_shift``.
    psqt_buckets : int
        Number of PSQT outputs of the feature transformer (0 for none, else output_buckets).
    output_buckets : int
        Number of layer stacks; bucket = (pieces - 1) // (32 // output_buckets), pieces
        counted with both kings.
    layers : tuple of HiddenLayer
        Dense layers of each layer stack, the last one with a single output.
    skip_index : int
        Raw output of the first dense layer added to the result (forward skip), -1 for none.
    skip_numerator, skip_denominator : int
        Integer scale of the forward skip: tdiv(wrap32(z * num), den).  The quantiser sets
        ``num / den = output_units * output_scale / (127 * 2**weight_scale_bits)``.
    weight_scale_bits : int
        Right shift of dense sums before ClippedReLU (6 in Stockfish 15.1); hidden weights are
        quantised with QB = 2**weight_scale_bits.
    output_scale : int
        Divisor from (psqt + positional) to internal units (16 in Stockfish 15.1).
    king_buckets : tuple of int, optional
        64 entries: king bucket of the perspective's own king by its oriented square (a1 = 0,
        after the rank flip for Black and the mirror).  ``None``: the feature set's default
        (HalfKAv2_hm's fixed table; a single bucket for Chess768).  Only Chess768 accepts a table.
    mirror : str, optional
        ``"none"``, ``"e-h"`` (mirror files so the own king is on files e-h, HalfKAv2_hm) or
        ``"a-d"`` (own king on files a-d, bullet's ``ChessBucketsMirrored``).  ``None``: the
        feature set's default (``"e-h"`` for HalfKAv2_hm, ``"none"`` for Chess768).
    output_units : int
        Internal units per 1.0 of the float network's output (600 for Stockfish 15.1, which is
        nnue-pytorch's ``nnue2score``; bullet's ``SCALE``, e.g. 400, for bullet networks).
    units_per_pawn : int
        Internal units per pawn, for centipawn conversion (361 for Stockfish 15.1, 100 for
        networks whose output is already in centipawns).
    skip_subtract_index : int
        With ``skip_index``: the skip is ``z[skip_index] - z[skip_subtract_index]`` (Stockfish
        19: z[30] - z[31]); -1 (default) for ``z[skip_index]`` alone.
    skip_mode : str
        ``"separate"`` (Stockfish 15.1-18): positional = output + tdiv(wrap32(skip * num), den),
        the skip scaled alone in 32-bit arithmetic.  ``"output"`` (Stockfish 19): positional =
        tdiv((output + skip) * num, den), the sum scaled with a 64-bit product.
    value_division : str
        How the value follows from the bucket's PSQT and positional terms: ``"sum"``
        (Stockfish 15.1 and 16: tdiv(psqt + positional, output_scale)) or ``"each"`` (17.1 and
        later: tdiv(psqt, output_scale) + tdiv(positional, output_scale)).
    file_version : int
        Stockfish ``.nnue`` header version the network is written with: ``0x7AF32F20``
        (Stockfish 12-18) or ``0x6A448AFA`` (Stockfish 19).  Only the ``.nnue`` writer reads it.
    ft_compression : str
        Storage of the feature transformer's int16/int32 arrays in ``.nnue``: ``"none"`` (raw,
        Stockfish 15.1) or ``"leb128"`` (signed LEB128 blocks, Stockfish 16 and later).
    stockfish_version : str
        The Stockfish version whose ``eval`` text and pawn normalisation
        :meth:`nnue_infer.trace.Trace.format_stockfish` follows: ``"15.1"``, ``"16"``,
        ``"17.1"``, ``"18"`` or ``"19"`` (see :mod:`nnue_infer.normalisation`).
    int8_feature_sets : tuple of str
        Feature sets with int8 rows summed into the same accumulator, in their index order
        (``Network.int8_weights``): ``()`` (default), ``("FullThreats", "PP_3Wide")``
        (Stockfish 19), ``("FullThreats18",)`` (Stockfish 18), or any of these with or
        without PP_3Wide (see :mod:`nnue_infer.features`).  Only with ``feature_set="HalfKAv2_hm"`` (the refresh
        cache's king frames then fix the threat orientation).

    Source: Stockfish 15.1, ``nnue/nnue_architecture.h``; nnue-pytorch ``model.py``
    (float semantics); bullet ``inputs`` (Chess768, king buckets, mirroring).
    """

    feature_set: str
    ft_width: int
    ft_activation: str
    ft_clamp: int
    ft_shift: int
    psqt_buckets: int
    output_buckets: int
    layers: tuple[HiddenLayer, ...]
    skip_index: int = -1
    skip_numerator: int = 0
    skip_denominator: int = 1
    weight_scale_bits: int = C.WEIGHT_SCALE_BITS
    output_scale: int = C.OUTPUT_SCALE
    king_buckets: tuple[int, ...] | None = None
    mirror: str | None = None
    output_units: int = C.SF_OUTPUT_UNITS
    units_per_pawn: int = C.NORMALIZE_TO_PAWN_VALUE
    skip_subtract_index: int = -1
    skip_mode: str = "separate"
    value_division: str = "sum"
    file_version: int = C.SF_FILE_VERSION
    ft_compression: str = "none"
    stockfish_version: str = "15.1"
    int8_feature_sets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> NetworkFormatError:
            return NetworkFormatError(f"architecture field {name!r}: {why}")

        # Integer fields go into int64 kernel parameters: a float would be truncated silently.
        ints = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.type == "int"]
        if not isinstance(self.layers, (tuple, list)) or not all(isinstance(layer, HiddenLayer) for layer in self.layers):
            raise bad("layers", f"must be a tuple of HiddenLayer, got {self.layers!r}")
        object.__setattr__(self, "layers", tuple(self.layers))
        for i, layer in enumerate(self.layers):
            ints += [(f"layers[{i}].outputs", layer.outputs)]
            ints += [(f"layers[{i}].activated", layer.activated)] if layer.activated is not None else []
            ints += [(f"layers[{i}].shift", layer.shift)] if layer.shift is not None else []
        for name, value in ints:
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not -2**31 < value < 2**31:
                raise bad(name, f"must be an integer of magnitude below 2**31, got {value!r}")
        for f in dataclasses.fields(self):
            if f.type == "int":
                object.__setattr__(self, f.name, int(getattr(self, f.name)))
        if self.feature_set not in FEATURE_SETS:
            raise bad("feature_set", f"unknown feature set {self.feature_set!r}, known: {FEATURE_SETS}")
        if not isinstance(self.int8_feature_sets, (tuple, list)):
            raise bad("int8_feature_sets", f"must be a tuple of names, got {self.int8_feature_sets!r}")
        object.__setattr__(self, "int8_feature_sets", tuple(self.int8_feature_sets))
        if self.int8_feature_sets:
            from .features import int8_layout

            try:
                int8_layout(self.int8_feature_sets)
            except ValueError as exc:
                raise bad("int8_feature_sets", str(exc)) from None
            if self.feature_set != "HalfKAv2_hm":
                raise bad("int8_feature_sets", f"int8 feature sets need feature_set 'HalfKAv2_hm', got {self.feature_set!r}")
        if self.ft_activation not in FT_ACTIVATIONS:
            raise bad("ft_activation", f"unknown activation {self.ft_activation!r}, known: {tuple(FT_ACTIVATIONS)}")
        if self.ft_width <= 0 or self.ft_width % 2:
            raise bad("ft_width", f"must be a positive even number, got {self.ft_width}")
        if self.king_buckets is not None:
            if self.feature_set != "Chess768":
                raise bad("king_buckets", f"{self.feature_set} has a fixed king-bucket table; leave it None")
            kb = tuple(self.king_buckets)
            if len(kb) != 64 or any(not isinstance(k, int) or k < 0 for k in kb):
                raise bad("king_buckets", "must be 64 non-negative integers (one per oriented king square)")
            used = sorted(set(kb))
            if used != list(range(len(used))):
                raise bad("king_buckets", f"buckets must be numbered 0..n-1 without gaps, got {used}")
            object.__setattr__(self, "king_buckets", kb)
        if self.mirror is not None:
            if self.mirror not in MIRROR_MODES:
                raise bad("mirror", f"unknown mode {self.mirror!r}, known: {tuple(MIRROR_MODES)}")
            if self.feature_set == "HalfKAv2_hm" and self.mirror != "e-h":
                raise bad("mirror", "HalfKAv2_hm always mirrors to files e-h; leave it None")
        if not 0 < self.ft_clamp <= 32767:
            raise bad("ft_clamp", f"QA must be in 1..32767 (int16 accumulator), got {self.ft_clamp}")
        if not 0 <= self.ft_shift < 63:
            raise bad("ft_shift", f"must be in 0..62, got {self.ft_shift}")
        act = self.ft
        top = self.ft_clamp**act.degree >> self.ft_shift
        if top > act.max_output:
            raise bad("ft_shift", f"{self.ft_activation} with QA={self.ft_clamp} and shift {self.ft_shift} gives "
                      f"outputs up to {top}, above {act.max_output} ({'int8' if act.signed else 'uint8'}) by "
                      f"{top - act.max_output}")
        if not self.layers:
            raise bad("layers", "at least one dense layer is needed")
        for i, layer in enumerate(self.layers):
            if layer.precision not in LAYER_PRECISIONS:
                raise bad(f"layers[{i}].precision", f"unknown precision {layer.precision!r}, known: {LAYER_PRECISIONS}")
            if layer.is_float and i == 0:
                raise bad("layers[0].precision", "the first dense layer reads the feature transformer: it must be int8")
            if i > 0 and self.layers[i - 1].is_float and not layer.is_float:
                raise bad(f"layers[{i}].precision", "an int8 layer cannot follow a float32 layer")
            known = FLOAT_ACTIVATIONS if layer.is_float else HIDDEN_ACTIVATIONS
            if layer.activation not in known:
                raise bad(f"layers[{i}].activation", f"unknown activation {layer.activation!r} for a "
                          f"{layer.precision} layer, known: {tuple(known)}")
            if layer.outputs <= 0:
                raise bad(f"layers[{i}].outputs", f"must be positive, got {layer.outputs}")
            if not 0 < layer.n_activated <= layer.outputs:
                raise bad(f"layers[{i}].activated", f"must be in 1..{layer.outputs}")
            if layer.shift is not None and not 0 <= layer.shift < 31:
                raise bad(f"layers[{i}].shift", f"must be in 0..30, got {layer.shift}")
            if not isinstance(layer.concat_inputs, bool):
                raise bad(f"layers[{i}].concat_inputs", f"must be true or false, got {layer.concat_inputs!r}")
            if layer.concat_inputs and (i < 2 or layer.is_float or any(l.is_float for l in self.layers[:i])):
                raise bad(f"layers[{i}].concat_inputs", "only an int8 layer after at least two int8 layers can read "
                          "the concatenation of all earlier activations")
            last = i == len(self.layers) - 1
            if last != (layer.activation == "none"):
                raise bad(f"layers[{i}].activation", "only the last layer (and it alone) has activation 'none'")
        if self.layers[-1].outputs != 1:
            raise bad("layers[-1].outputs", "the output layer must have exactly one output")
        if self.output_buckets <= 0 or 32 % self.output_buckets:
            raise bad("output_buckets", f"must divide 32, got {self.output_buckets}")
        if self.psqt_buckets not in (0, self.output_buckets):
            raise bad("psqt_buckets", f"must be 0 or output_buckets ({self.output_buckets})")
        if self.skip_mode not in SKIP_MODES:
            raise bad("skip_mode", f"unknown mode {self.skip_mode!r}, known: {SKIP_MODES}")
        if self.value_division not in VALUE_DIVISIONS:
            raise bad("value_division", f"unknown rule {self.value_division!r}, known: {VALUE_DIVISIONS}")
        if self.ft_compression not in FT_COMPRESSIONS:
            raise bad("ft_compression", f"unknown storage {self.ft_compression!r}, known: {FT_COMPRESSIONS}")
        if self.stockfish_version not in STOCKFISH_VERSIONS:
            raise bad("stockfish_version", f"unknown version {self.stockfish_version!r}, known: {STOCKFISH_VERSIONS}")
        # Stockfish 15.1 activates all outputs of fc_0 but the skip neuron; Stockfish 19 activates all.
        separate = self.skip_mode == "separate"
        if not -1 <= self.skip_index < self.layers[0].outputs or (
            separate and self.skip_index >= 0 and self.skip_index < self.layers[0].n_activated
        ):
            raise bad("skip_index", "must be -1 or a non-activated output of the first layer"
                      + ("" if separate else " (any output with skip_mode 'output')"))
        if not -1 <= self.skip_subtract_index < self.layers[0].outputs or (
            self.skip_subtract_index >= 0 and (self.skip_index < 0 or self.skip_subtract_index == self.skip_index)
        ):
            raise bad("skip_subtract_index", "must be -1 or an output of the first layer other than skip_index "
                      "(and skip_index must be set)")
        if self.skip_index >= 0 and len(self.layers) < 2:
            raise bad("skip_index", "a forward skip needs at least two dense layers")
        if self.skip_denominator <= 0:
            raise bad("skip_denominator", "must be positive")
        for name in ("weight_scale_bits",):
            if not 0 <= getattr(self, name) < 31:
                raise bad(name, f"must be in 0..30, got {getattr(self, name)}")
        for name in ("output_scale", "output_units", "units_per_pawn"):
            if getattr(self, name) <= 0:
                raise bad(name, f"must be positive, got {getattr(self, name)}")

    @property
    def ft(self) -> FtActivation:
        """The feature-transformer activation's properties."""
        return FT_ACTIVATIONS[self.ft_activation]

    @property
    def ft_scale(self) -> float:
        """Integer value of the float 1.0 at the feature transformer's output: QA**degree / 2**shift."""
        return self.ft_clamp**self.ft.degree / 2**self.ft_shift

    @property
    def first_layer_max_byte(self) -> int:
        """Largest byte of the first dense layer's input as the kernels store it: the
        activation's largest output ``QA**degree >> shift``, plus 128 for signed activations
        (their int8 outputs are stored as x + 128, ``kernels.simd.SIGNED_INPUT_OFFSET``)."""
        top = self.ft_clamp**self.ft.degree >> self.ft_shift
        return top + 128 if self.ft.signed else top

    # -- derived dimensions -------------------------------------------------
    @property
    def ft_output_width(self) -> int:
        """Width of the transformed features (both perspectives), the first dense layer's input."""
        return self.ft_width if self.ft.paired else 2 * self.ft_width

    def layer_inputs(self) -> list[int]:
        """Padded input width of each dense layer (file and compute layout)."""
        widths = [self.ft_output_width]
        for i, layer in enumerate(self.layers[1:], 1):
            if layer.concat_inputs:
                widths.append(sum(_pad32(l.activated_width) for l in self.layers[:i]))
            else:
                widths.append(_pad32(self.layers[i - 1].activated_width))
        return widths

    def layer_shift(self, i: int) -> int:
        """Activation shift of dense layer ``i`` (its ``shift``, else ``weight_scale_bits``)."""
        s = self.layers[i].shift
        return self.weight_scale_bits if s is None else s

    def bucket_of(self, piece_count: int) -> int:
        """Layer stack / PSQT bucket for ``piece_count`` pieces (kings included)."""
        return (piece_count - 1) // (32 // self.output_buckets)

    def to_json(self) -> str:
        """JSON text of this description (round-trips through :meth:`from_json`)."""
        data = dataclasses.asdict(self)
        if not data["int8_feature_sets"]:  # files of networks without int8 sets stay as they were
            del data["int8_feature_sets"]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Architecture:
        """Build from a dict as produced by ``dataclasses.asdict``; unknown or missing fields raise."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise NetworkFormatError(f"architecture: unknown field(s) {sorted(unknown)}")
        try:
            layers = tuple(HiddenLayer(**layer) for layer in data["layers"])
            for i, layer in enumerate(layers):
                if not isinstance(layer.outputs, int) or not isinstance(layer.activated, (int, type(None))):
                    raise NetworkFormatError(f"architecture field 'layers[{i}]': outputs/activated must be integers")
            kb = data.get("king_buckets")
            extra = {"int8_feature_sets": tuple(data["int8_feature_sets"])} if "int8_feature_sets" in data else {}
            return cls(**{**data, "layers": layers, "king_buckets": None if kb is None else tuple(kb), **extra})
        except (KeyError, TypeError, AttributeError) as exc:
            raise NetworkFormatError(f"architecture: {exc}") from exc

    @classmethod
    def from_json(cls, text: str) -> Architecture:
        """Inverse of :meth:`to_json`; :class:`NetworkFormatError` for bad JSON or fields."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise NetworkFormatError(f"architecture: invalid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise NetworkFormatError("architecture: JSON must be an object")
        return cls.from_dict(data)


def stockfish_15_1_architecture(ft_width: int = C.SF_L1) -> Architecture:
    """The architecture of Stockfish 15.1's network (``nn-ad9b42354671.nnue``: ft_width 1024).

    HalfKAv2_hm -> 2 x ft_width int16 (+8 PSQT) -> pairwise -> 8 layer stacks of
    ft_width -> 16 (15 activated as [SqrClippedReLU | ClippedReLU], 1 forward skip)
    -> 32 ClippedReLU -> 1.  Source: Stockfish 15.1, ``nnue/nnue_architecture.h``.
    """
    return Architecture(
        feature_set="HalfKAv2_hm",
        ft_width=ft_width,
        ft_activation="pairwise",
        ft_clamp=C.FT_CLAMP,
        ft_shift=C.FT_SHIFT,
        psqt_buckets=C.SF_BUCKETS,
        output_buckets=C.SF_BUCKETS,
        layers=(
            HiddenLayer(C.SF_L2 + 1, "sqr_crelu+crelu", activated=C.SF_L2),
            HiddenLayer(C.SF_L3, "crelu"),
            HiddenLayer(1, "none"),
        ),
        skip_index=C.SF_L2,
        skip_numerator=C.SF_SKIP_NUMERATOR,
        skip_denominator=C.SF_SKIP_DENOMINATOR,
    )


def check_finite(name: str, arr: np.ndarray) -> None:
    """Raise :class:`NetworkFormatError` naming tensor ``name`` if the float array ``arr`` holds NaN
    or infinity (count, first index and value); integer arrays always pass."""
    if arr.dtype.kind != "f":
        return
    bad = ~np.isfinite(arr)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise NetworkFormatError(f"tensor {name!r}: {int(bad.sum())} value(s) NaN or infinity, the first "
                                 f"{arr[first]} at index {list(first)}")


def _check_array(name: str, arr: np.ndarray, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    if not isinstance(arr, np.ndarray):
        raise NetworkFormatError(f"tensor {name!r}: expected a numpy array, got {type(arr).__name__}")
    if arr.dtype != np.dtype(dtype):
        raise NetworkFormatError(f"tensor {name!r}: dtype {arr.dtype}, expected {np.dtype(dtype)}")
    if arr.shape != shape:
        raise NetworkFormatError(f"tensor {name!r}: shape {arr.shape}, expected {shape}")
    if not (arr.flags.c_contiguous and arr.flags.writeable and arr.flags.aligned):
        arr = np.array(arr, order="C", copy=True)  # one Numba signature: writeable, aligned, C
    return arr


@dataclass(frozen=True, eq=False)
class Network:
    """A quantised network: architecture plus integer parameters.

    Attributes
    ----------
    architecture : Architecture
        What the arrays mean.
    ft_biases : int16[L1]
        Feature-transformer biases.
    ft_weights : int16[num_features, L1]
        Feature-transformer weights, one row per feature index.
    psqt_weights : int32[num_features, psqt_buckets]
        PSQT weights (no bias).
    layer_weights : tuple of int8[output_buckets, outputs, padded inputs]
        Dense weights per layer, row = output neuron (Stockfish's file layout); float32 for
        layers with ``precision="float32"``.
    layer_biases : tuple of int32[output_buckets, outputs]
        Dense biases per layer (float32 for float layers).
    description : str
        Free text stored with the network (Stockfish's description string).
    ft_table : int16[2 * QA + 1], optional
        Gate table of ``lut_glu`` (``T[i]`` = gate((i - QA) / QA) at scale QA, |T| <= QA);
        ``None`` for every other activation.
    int8_weights : int8[num_int8_features, L1]
        Rows of the int8 feature sets (``architecture.int8_feature_sets``, one index space:
        Stockfish 19's 59,808 threat rows then 4,560 pawn-pair rows); kept int8 in memory and
        sign-extended when added.  ``None`` (default) for ``int8[0, L1]``.
    int8_psqt_weights : int32[num_int8_features, psqt_buckets]
        Their PSQT rows; ``None`` for ``int32[0, P]``.

    Raises
    ------
    NetworkFormatError
        A tensor's dtype or shape does not match the architecture, or a float32 layer holds
        NaN or infinity (the message names the tensor).
    """

    architecture: Architecture
    ft_biases: np.ndarray
    ft_weights: np.ndarray
    psqt_weights: np.ndarray
    layer_weights: tuple[np.ndarray, ...]
    layer_biases: tuple[np.ndarray, ...]
    description: str = ""
    ft_table: np.ndarray | None = None
    int8_weights: np.ndarray | None = None
    int8_psqt_weights: np.ndarray | None = None

    def __post_init__(self) -> None:
        from .features import architecture_features, int8_layout

        arch = self.architecture
        nf = architecture_features(arch).num_features
        L1 = arch.ft_width
        # 64-byte aligned (simd.ALIGNMENT): the accumulator kernels stream the rows with 32-byte loads
        fix = lambda name, *a: object.__setattr__(self, name, simd.aligned(_check_array(name, getattr(self, name), *a)))  # noqa: E731
        fix("ft_biases", np.int16, (L1,))
        fix("ft_weights", np.int16, (nf, L1))
        fix("psqt_weights", np.int32, (nf, arch.psqt_buckets))
        if arch.ft_activation in TABLE_ACTIVATIONS:
            if self.ft_table is None:
                raise NetworkFormatError(f"tensor 'ft.table': missing; {arch.ft_activation} needs its gate table")
            fix("ft_table", np.int16, (2 * arch.ft_clamp + 1,))
            worst = int(np.abs(self.ft_table.astype(np.int64)).max())
            if worst > arch.ft_clamp:
                raise NetworkFormatError(f"tensor 'ft.table': entry {worst} exceeds QA={arch.ft_clamp} by "
                                         f"{worst - arch.ft_clamp} (the gate must stay within [-1, 1])")
        elif self.ft_table is not None:
            raise NetworkFormatError(f"tensor 'ft.table': {arch.ft_activation} has no gate table")
        n8 = int8_layout(arch.int8_feature_sets).num_features
        if self.int8_weights is None and n8 == 0:
            object.__setattr__(self, "int8_weights", np.zeros((0, L1), np.int8))
        if self.int8_psqt_weights is None and n8 == 0:
            object.__setattr__(self, "int8_psqt_weights", np.zeros((0, arch.psqt_buckets), np.int32))
        fix("int8_weights", np.int8, (n8, L1))
        fix("int8_psqt_weights", np.int32, (n8, arch.psqt_buckets))
        if len(self.layer_weights) != len(arch.layers) or len(self.layer_biases) != len(arch.layers):
            raise NetworkFormatError(
                f"layers: architecture has {len(arch.layers)} dense layers, got "
                f"{len(self.layer_weights)} weight and {len(self.layer_biases)} bias tensors"
            )
        weights, biases = [], []
        for i, (layer, n_in) in enumerate(zip(arch.layers, arch.layer_inputs())):
            B = arch.output_buckets
            wt, bt = (np.float32, np.float32) if layer.is_float else (np.int8, np.int32)
            weights.append(_check_array(f"layers[{i}].weights", self.layer_weights[i], wt, (B, layer.outputs, n_in)))
            biases.append(_check_array(f"layers[{i}].biases", self.layer_biases[i], bt, (B, layer.outputs)))
            if layer.is_float:  # NaN would make every value 0 (saturated to int32), silently
                check_finite(f"layers.{i}.weights", weights[-1])
                check_finite(f"layers.{i}.biases", biases[-1])
        object.__setattr__(self, "layer_weights", tuple(weights))
        object.__setattr__(self, "layer_biases", tuple(biases))

    def __repr__(self) -> str:
        a = self.architecture
        inputs = "+".join((*a.int8_feature_sets, a.feature_set))
        return (
            f"<Network {inputs} -> {a.ft_width}x2 {a.ft_activation} -> "
            f"{'/'.join(str(l.outputs) for l in a.layers)} x{a.output_buckets} buckets>"
        )

    @cached_property
    def first_layer_pair_sum(self) -> int:
        """Largest ``|w[o, 2j]| + |w[o, 2j + 1]|`` of the first dense layer's int8 weights over
        buckets, outputs o and input pairs j (0..256): the pairs of products AVX2's
        ``vpmaddubsw`` adds in int16 (``kernels.simd.first_layer_isa``)."""
        w = np.abs(self.layer_weights[0].astype(np.int32))
        if w.shape[2] % 2:
            w = np.concatenate([w, np.zeros((*w.shape[:2], 1), np.int32)], axis=2)
        return int((w[..., 0::2] + w[..., 1::2]).max(initial=0))

    @cached_property
    def first_layer_quad_sum(self) -> int:
        """Largest sum of |weights| over the four products that ``kernels.simd.dot4x2_avx2`` adds
        in one int16 lane: inputs 2k, 2k + 1 of blocks 2m and 2m + 1 (8m + 2k, 8m + 2k + 1,
        8m + 4 + 2k, 8m + 5 + 2k), over buckets, outputs, m and k (``kernels.simd.first_layer_isa``)."""
        w = np.abs(self.layer_weights[0].astype(np.int32))
        pad = -w.shape[2] % 8
        if pad:
            w = np.concatenate([w, np.zeros((*w.shape[:2], pad), np.int32)], axis=2)
        B, n_out, n_in = w.shape
        return int(w.reshape(B, n_out, n_in // 8, 2, 2, 2).sum(axis=(3, 5)).max(initial=0))

    @cached_property
    def compute_layout(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat dense parameters for :func:`nnue_infer.kernels.nnue.dense.propagate_layer_stack`.

        Returns ``(weights int8[total], biases int32[total], layers int64[n_layers, LAYER_TABLE_COLUMNS])``
        (columns ``kernels.nnue.dense.COL_*``); integer weights are permuted, once, from the file's
        ``[bucket][output][input]`` to the SIMD block layout ``[bucket][input / 4][output][4]``
        (:func:`block_layout`); the first layer's are also kept row-major (``[bucket][output][input]``,
        inputs padded as the blocks, at ``COL_ROWS``: the ``vnni512`` path reads them, one load per
        ``vpdpbusd``).  Activations go to offset 0 of the kernel's uint8 buffer,
        unless a layer reads the concatenation of all earlier activations: then each layer's
        activation has its own block (offsets padded to 32) and every layer reads its input block.
        Float32 layers are appended to ``biases`` as bit patterns (weights ``[bucket][out][in]``,
        then biases), with activation codes ``>= ACT_FLOAT``.  A ``lut_glu`` gate table comes
        first in ``biases`` (offset 0, where ``kernels.nnue.activation.ft_activate`` reads it).

        Signed activations' outputs x reach the first layer as the bytes x + 128
        (``kernels.nnue.activation.ft_transform``), so that layer's biases are stored as
        ``wrap32(b - 128 * sum_j W[o, j])``: ``b' + W (x + 128) == b + W x`` in wrapping int32,
        exactly, on every path (``vpdpbusd`` and ``vpmaddubsw`` multiply unsigned bytes).
        """
        arch = self.architecture
        table = np.zeros((len(arch.layers), LAYER_TABLE_COLUMNS), np.int64)
        concat = any(layer.concat_inputs for layer in arch.layers)
        x_out = [0] * len(arch.layers)
        if concat:
            for i in range(1, len(arch.layers)):
                x_out[i] = x_out[i - 1] + _pad32(arch.layers[i - 1].activated_width)
        for i, layer in enumerate(arch.layers):
            table[i, COL_SHIFT] = arch.layer_shift(i)
            table[i, COL_X_OUT] = x_out[i]
            table[i, COL_X_IN] = 0 if i == 0 or layer.concat_inputs else x_out[i - 1]
        w_parts, b_parts = [], []
        w_off = b_off = 0
        if self.ft_table is not None:
            b_parts.append(self.ft_table.astype(np.int32))
            b_off = self.ft_table.size
        for i, (layer, w, b) in enumerate(zip(arch.layers, self.layer_weights, self.layer_biases)):
            if layer.is_float:
                continue
            blocks = block_layout(w)
            if i == 0 and arch.ft.signed:
                b = _offset_biases(b, w)
            B, n_blocks, n_out, _ = blocks.shape
            n_in = 4 * n_blocks
            table[i, :8] = (n_in, n_out, HIDDEN_ACTIVATIONS[layer.activation], layer.n_activated,
                            w_off, n_out * n_in, b_off, n_out)
            w_parts.append(blocks.reshape(-1))
            b_parts.append(b.reshape(-1))
            w_off += blocks.size
            b_off += b.size
            table[i, COL_ROWS] = -1
            if i == 0:  # a row-major copy too (inputs padded as the blocks): dense.affine_rows_zmm
                rows = np.zeros((B, n_out, n_in), np.int8)
                rows[:, :, :w.shape[2]] = w
                table[i, COL_ROWS] = w_off
                w_parts.append(rows.reshape(-1))
                w_off += rows.size
        for i, (layer, w, b) in enumerate(zip(arch.layers, self.layer_weights, self.layer_biases)):
            if not layer.is_float:
                continue
            B, n_out, n_in = w.shape
            table[i, :8] = (n_in, n_out, FLOAT_ACTIVATIONS[layer.activation], layer.n_activated,
                            b_off, n_out * n_in, b_off + w.size, n_out)
            table[i, COL_ROWS] = -1
            b_parts.append(w.reshape(-1).view(np.int32))
            b_parts.append(b.reshape(-1).view(np.int32))
            b_off += w.size + b.size
        return np.concatenate(w_parts), np.concatenate(b_parts).astype(np.int32), table


def network_digest(network: Network) -> str:
    """SHA-256 (hex) of a network's architecture and every parameter array (the dataclass fields, not
    the layouts cached from them): its identity where results are recorded, a dataset's manifest
    (``io.distributed``) and a training-data file's teacher (``training.datagen``)."""
    h = hashlib.sha256(repr(network.architecture).encode())
    for f in dataclasses.fields(network):
        value = getattr(network, f.name)
        for arr in value if isinstance(value, tuple) else (value,):
            if isinstance(arr, np.ndarray):
                h.update(f.name.encode() + str(arr.dtype).encode() + str(arr.shape).encode())
                h.update(np.ascontiguousarray(arr).data)
    return h.hexdigest()

"""Float networks: the trainer's view of an :class:`~nnue_infer.network.Architecture`, and the
numpy forward pass that is the ground truth for the quantised kernels.

Float semantics (every tensor is float32; computations run in float64)
-----------------------------------------------------------------------
Let ``F`` be the active features of a perspective (:mod:`nnue_infer.features`) and ``B`` the
output bucket ``(pieces - 1) // (32 // output_buckets)``.

1. **Accumulator** (per perspective, ``[L1]``): ``acc = ft_biases + sum(ft_weights[F])``.
   Unit: the feature-transformer activation's clamp point; 1.0 is the integer QA
   (``ft_clamp``) in the quantised network.
2. **Feature-transformer activation**: for the side to move's accumulator first, then the
   other side's, with ``a = acc[:L1/2]`` and ``b = acc[L1/2:]`` for the paired activations::

       crelu            clamp(acc, 0, 1)                 -> L1 values per perspective
       screlu           clamp(acc, 0, 1)**2              -> L1
       pairwise         clamp(a, 0, 1) * clamp(b, 0, 1)  -> L1/2
       pairwise_screlu  clamp(a, 0, 1)**2 * clamp(b, 0, 1)**2
       glu              clamp(a, 0, 1) * clamp(b, -1, 1)
       bilinear         clamp(a, -1, 1) * clamp(b, -1, 1)
       hswish_glu       x (x + 1) / 2 * clamp(b, -1, 1),  x = clamp(a, -1, 1)  (hard-swish(3x)/3 gate)
       lut_glu          t(clamp(a, -1, 1)) * clamp(b, -1, 1),  t = piecewise-linear through
                        ``ft_table`` (K samples uniform over [-1, 1], |t| <= 1)

   Output in [0, 1] (or [-1, 1] for the signed glu, bilinear, hswish_glu, lut_glu); 1.0 is
   ``QA**degree / 2**ft_shift`` in the quantised network (``Architecture.ft_scale``;
   126.0078125 for Stockfish 15.1).
3. **Dense layers** of bucket ``B``: ``z = layer_weights[i][B] @ x + layer_biases[i][B]``
   (x zero-padded to the layer's padded input width).  Hidden activations on the first
   ``activated`` outputs, 1.0 being the integer 127 of ClippedReLU::

       crelu            clamp(z, 0, 1)
       sqr_crelu        min(z**2 * 127/128, 1)     (Stockfish's SqrClippedReLU: z**2 >> (2*6 + 7))
       sqr_crelu+crelu  [sqr_crelu(z), crelu(z)]
       relu             max(z, 0)                  (float32 layers only)
       screlu           clamp(z, 0, 1)**2          (float32 layers only)

   The output layer (activation ``none``) gives one float ``y``.
4. **Forward skip** (``skip_index >= 0``): ``y += z0[skip_index]`` (the first layer's raw output).
5. **PSQT**: ``psqt = (sum(psqt_weights[F_stm])[B] - sum(psqt_weights[F_opp])[B]) / 2``, in the
   same unit as ``y``.
6. **Value** in internal units, side to move's point of view:
   ``(psqt + y) * output_units`` (600 for Stockfish 15.1: nnue-pytorch's ``nnue2score``).
   Centipawns: ``value * 100 / units_per_pawn``.

The quantised network computes the same function with integers (see
:mod:`nnue_infer.quantisation` for the scales) up to rounding of weights and truncating shifts.

Source: nnue-pytorch ``model.py`` (float forward pass, 127/128 of the squared ClippedReLU,
``nnue2score``), Stockfish 15.1 ``nnue/nnue_architecture.h``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import chess
import numpy as np

from .errors import NetworkFormatError
from .network import TABLE_ACTIVATIONS, Architecture, _check_array, check_finite


@dataclass(frozen=True, eq=False)
class FloatNetwork:
    """A float network: architecture plus float32 parameters with :class:`Network`'s shapes.

    Attributes
    ----------
    architecture : Architecture
        What the arrays mean; its quantisation fields (``ft_clamp``, ``ft_shift``,
        ``weight_scale_bits``, ``output_scale``, skip numerator/denominator) are ignored by
        :func:`forward_float` and replaced by :func:`nnue_infer.quantisation.quantise`.
    ft_biases : float32[L1]
        Feature-transformer biases (unit: 1.0 = the activation's clamp point).
    ft_weights : float32[num_features, L1]
        Feature-transformer weights, one row per feature index.
    psqt_weights : float32[num_features, psqt_buckets]
        PSQT weights, unit of the output ``y`` (``output_units`` internal units).
    layer_weights : tuple of float32[output_buckets, outputs, padded inputs]
        Dense weights per layer (row = output neuron); columns beyond a layer's real inputs
        multiply inputs that are always zero.
    layer_biases : tuple of float32[output_buckets, outputs]
        Dense biases per layer (unit: 1.0 = the activation's clamp point; output layer: ``y``).
    description : str
        Free text.
    ft_table : float32[K], optional
        Gate of ``lut_glu``: its values at K (odd, >= 3) points uniform over [-1, 1], each
        within [-1, 1]; ``None`` for every other activation.

    Raises
    ------
    NetworkFormatError
        A tensor's dtype or shape does not match the architecture (the message names it).
    """

    architecture: Architecture
    ft_biases: np.ndarray
    ft_weights: np.ndarray
    psqt_weights: np.ndarray
    layer_weights: tuple[np.ndarray, ...]
    layer_biases: tuple[np.ndarray, ...]
    description: str = ""
    ft_table: np.ndarray | None = None

    def __post_init__(self) -> None:
        from .features import architecture_features

        arch = self.architecture
        if not isinstance(arch, Architecture):
            raise NetworkFormatError(f"architecture: expected an Architecture, got {type(arch).__name__}")
        if arch.int8_feature_sets:
            raise NetworkFormatError(f"architecture field 'int8_feature_sets': {list(arch.int8_feature_sets)} exist "
                                     "only in quantised networks (no float version)")
        nf = architecture_features(arch).num_features
        L1 = arch.ft_width
        for name, shape in (("ft_biases", (L1,)), ("ft_weights", (nf, L1)), ("psqt_weights", (nf, arch.psqt_buckets))):
            object.__setattr__(self, name, _check_array(name, getattr(self, name), np.float32, shape))
        if len(self.layer_weights) != len(arch.layers) or len(self.layer_biases) != len(arch.layers):
            raise NetworkFormatError(
                f"layers: architecture has {len(arch.layers)} dense layers, got "
                f"{len(self.layer_weights)} weight and {len(self.layer_biases)} bias tensors"
            )
        weights, biases = [], []
        B = arch.output_buckets
        for i, (layer, n_in) in enumerate(zip(arch.layers, arch.layer_inputs())):
            weights.append(_check_array(f"layers[{i}].weights", self.layer_weights[i], np.float32, (B, layer.outputs, n_in)))
            biases.append(_check_array(f"layers[{i}].biases", self.layer_biases[i], np.float32, (B, layer.outputs)))
        object.__setattr__(self, "layer_weights", tuple(weights))
        object.__setattr__(self, "layer_biases", tuple(biases))
        if arch.ft_activation in TABLE_ACTIVATIONS:
            t = self.ft_table
            if t is None:
                raise NetworkFormatError(f"tensor 'ft.table': missing; {arch.ft_activation} needs its gate table")
            if not isinstance(t, np.ndarray) or t.ndim != 1 or t.size < 3 or t.size % 2 == 0:
                raise NetworkFormatError(f"tensor 'ft.table': must be a 1-D array of an odd number (>= 3) of samples, "
                                         f"got shape {getattr(t, 'shape', None)}")
            t = _check_array("ft_table", t, np.float32, t.shape)
            if np.all(np.isfinite(t)) and np.abs(t).max() > 1.0:
                raise NetworkFormatError(f"tensor 'ft.table': value {float(np.abs(t).max())} outside [-1, 1]")
            object.__setattr__(self, "ft_table", t)
        elif self.ft_table is not None:
            raise NetworkFormatError(f"tensor 'ft.table': {arch.ft_activation} has no gate table")
        for name, arr in self.tensors().items():
            check_finite(name, arr)

    def __repr__(self) -> str:
        a = self.architecture
        return (
            f"<FloatNetwork {a.feature_set} -> {a.ft_width}x2 {a.ft_activation} -> "
            f"{'/'.join(str(l.outputs) for l in a.layers)} x{a.output_buckets} buckets>"
        )

    def tensors(self) -> dict[str, np.ndarray]:
        """Every tensor by its canonical name (``ft.biases``, ``layers.0.weights``, ...)."""
        return network_tensors(self)

    @classmethod
    def from_tensors(cls, architecture: Architecture, tensors: dict[str, np.ndarray], description: str = "") -> FloatNetwork:
        """Build from canonical tensor names (see :func:`network_tensors`); names the missing tensor."""
        return cls(architecture, description=description, **_from_tensors(architecture, tensors))

    @classmethod
    def random(cls, architecture: Architecture, seed: int = 0, ft_std: float = 0.1, first_gain: float = 4.0,
               psqt_std: float = 0.02) -> FloatNetwork:
        """A randomly initialised network with realistic scales (for tests and benchmarks).

        Feature-transformer weights ~ N(0, ft_std), biases ~ U(0, 0.5) so a fair share of the
        accumulator sits inside the clamp; dense weights ~ U(+-1/sqrt(inputs)), times
        ``first_gain`` in the first layer (its inputs are sparse and in [0, 1]: the gain lets
        them reach the hidden clamps, as in trained networks), biases ~ N(0, 0.02); PSQT
        weights ~ N(0, psqt_std).  The feature transformer, not the biases or the PSQT, then
        carries most of the evaluation.  Deterministic for a given ``seed``.
        """
        from .features import architecture_features

        from .network import default_gate_table

        rng = np.random.default_rng(seed)
        nf = architecture_features(architecture).num_features
        L1 = architecture.ft_width
        B = architecture.output_buckets
        f32 = np.float32
        layer_w, layer_b = [], []
        real_inputs = [architecture.ft_output_width] + [l.activated_width for l in architecture.layers[:-1]]
        for i, (layer, n_in, n_real) in enumerate(zip(architecture.layers, architecture.layer_inputs(), real_inputs)):
            w = np.zeros((B, layer.outputs, n_in), f32)
            bound = (first_gain if i == 0 else 1.0) / np.sqrt(n_real)
            w[:, :, :n_real] = rng.uniform(-bound, bound, (B, layer.outputs, n_real))
            layer_w.append(w)
            layer_b.append(rng.normal(0.0, 0.02, (B, layer.outputs)).astype(f32))
        return cls(
            architecture,
            ft_biases=rng.uniform(0.0, 0.5, L1).astype(f32),
            ft_weights=rng.normal(0.0, ft_std, (nf, L1)).astype(f32),
            psqt_weights=rng.normal(0.0, psqt_std, (nf, architecture.psqt_buckets)).astype(f32),
            layer_weights=tuple(layer_w),
            layer_biases=tuple(layer_b),
            description=f"random (seed {seed})",
            ft_table=default_gate_table() if architecture.ft_activation in TABLE_ACTIVATIONS else None,
        )


def network_tensors(network) -> dict[str, np.ndarray]:  # Network or FloatNetwork
    """Canonical names of a (float or quantised) network's tensors, in storage order.

    ``ft.biases`` [L1], ``ft.weights`` [F, L1], ``ft.psqt_weights`` [F, P], for networks with
    int8 feature sets ``ft.int8_weights`` [F8, L1] and ``ft.int8_psqt_weights`` [F8, P], then per dense
    layer i ``layers.{i}.weights`` [buckets, outputs, padded inputs] and ``layers.{i}.biases``
    [buckets, outputs]; ``ft.table`` (the ``lut_glu`` gate table) last, when the network has one.
    """
    out = {"ft.biases": network.ft_biases, "ft.weights": network.ft_weights, "ft.psqt_weights": network.psqt_weights}
    if network.architecture.int8_feature_sets:
        out["ft.int8_weights"] = network.int8_weights
        out["ft.int8_psqt_weights"] = network.int8_psqt_weights
    for i, (w, b) in enumerate(zip(network.layer_weights, network.layer_biases)):
        out[f"layers.{i}.weights"] = w
        out[f"layers.{i}.biases"] = b
    if network.ft_table is not None:
        out["ft.table"] = network.ft_table
    return out


def _from_tensors(arch: Architecture, tensors: dict[str, np.ndarray]) -> dict:
    names = ["ft.biases", "ft.weights", "ft.psqt_weights"]
    int8 = ["ft.int8_weights", "ft.int8_psqt_weights"] if arch.int8_feature_sets else []
    names += int8
    for i in range(len(arch.layers)):
        names += [f"layers.{i}.weights", f"layers.{i}.biases"]
    if arch.ft_activation in TABLE_ACTIVATIONS:
        names.append("ft.table")
    missing = [n for n in names if n not in tensors]
    if missing:
        raise NetworkFormatError(f"missing tensor(s) {missing}")
    extra = sorted(set(tensors) - set(names))
    if extra:
        raise NetworkFormatError(f"unexpected tensor(s) {extra} for an architecture with {len(arch.layers)} dense layers")
    n = len(arch.layers)
    return {
        "ft_biases": tensors["ft.biases"],
        "ft_weights": tensors["ft.weights"],
        "psqt_weights": tensors["ft.psqt_weights"],
        "layer_weights": tuple(tensors[f"layers.{i}.weights"] for i in range(n)),
        "layer_biases": tuple(tensors[f"layers.{i}.biases"] for i in range(n)),
        "ft_table": tensors.get("ft.table"),
        **({"int8_weights": tensors["ft.int8_weights"], "int8_psqt_weights": tensors["ft.int8_psqt_weights"]}
           if int8 else {}),
    }


#: Gain of the squared ClippedReLU in float: Stockfish computes z**2 >> (2 * WeightScaleBits + 7)
#: at scale 127 * 2**WeightScaleBits, i.e. 127 * z**2 * 127/128 (nnue-pytorch: ``* (127 / 128)``).
SQR_CRELU_GAIN = 127.0 / 128.0


def gate_table_value(table: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The ``lut_glu`` gate t(x): piecewise-linear through ``table`` (K samples uniform over
    [-1, 1]) at ``x`` clamped to [-1, 1]; float64 like ``x``."""
    k = table.shape[0]
    return np.interp(np.clip(x, -1.0, 1.0), np.linspace(-1.0, 1.0, k), table.astype(np.float64))


def ft_activation_float(name: str, acc_stm: np.ndarray, acc_opp: np.ndarray, table: np.ndarray | None = None) -> np.ndarray:
    """The float feature-transformer activation ``name`` of both perspectives (side to move first).

    ``acc_*`` float64[L1]; returns float64[L1] (paired activations) or float64[2 * L1].
    ``table`` float32[K]: the gate table of ``lut_glu`` (required for it, ignored otherwise).
    """
    out = []
    for acc in (acc_stm, acc_opp):
        h = acc.shape[0] // 2
        a, b = acc[:h], acc[h:]
        if name == "crelu":
            out.append(np.clip(acc, 0.0, 1.0))
        elif name == "screlu":
            out.append(np.clip(acc, 0.0, 1.0) ** 2)
        elif name == "pairwise":
            out.append(np.clip(a, 0.0, 1.0) * np.clip(b, 0.0, 1.0))
        elif name == "pairwise_screlu":
            out.append(np.clip(a, 0.0, 1.0) ** 2 * np.clip(b, 0.0, 1.0) ** 2)
        elif name == "glu":
            out.append(np.clip(a, 0.0, 1.0) * np.clip(b, -1.0, 1.0))
        elif name == "bilinear":
            out.append(np.clip(a, -1.0, 1.0) * np.clip(b, -1.0, 1.0))
        elif name == "hswish_glu":
            x = np.clip(a, -1.0, 1.0)
            out.append(x * (x + 1.0) / 2.0 * np.clip(b, -1.0, 1.0))
        elif name == "lut_glu":
            if table is None:
                raise ValueError("lut_glu needs its gate table")
            out.append(gate_table_value(table, a) * np.clip(b, -1.0, 1.0))
        else:
            raise ValueError(f"unknown feature-transformer activation {name!r}")
    return np.concatenate(out)


def hidden_activation_float(name: str, z: np.ndarray) -> np.ndarray:
    """Float hidden-layer activation ``name`` of ``z``: ``crelu``, ``sqr_crelu``, ``sqr_crelu+crelu``,
    and for float32 layers ``relu`` (max(z, 0)) and ``screlu`` (clamp(z, 0, 1)**2)."""
    if name == "crelu":
        return np.clip(z, 0.0, 1.0)
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "screlu":
        return np.clip(z, 0.0, 1.0) ** 2
    if name == "sqr_crelu":
        return np.minimum(z * z * SQR_CRELU_GAIN, 1.0)
    if name == "sqr_crelu+crelu":
        return np.concatenate([np.minimum(z * z * SQR_CRELU_GAIN, 1.0), np.clip(z, 0.0, 1.0)])
    raise ValueError(f"unknown hidden activation {name!r}")


@dataclass(frozen=True)
class FloatEval:
    """Result of :func:`forward_float_trace`: float64 numbers, side to move's point of view.

    Attributes
    ----------
    bucket : int
        Output bucket used.
    psqt : float
        PSQT term in output units (1.0 = ``output_units`` internal units).
    positional : float
        Layer-stack output ``y`` including the forward skip, output units.
    value : float
        ``(psqt + positional) * output_units``: internal units.
    features : tuple of (list of int, list of int)
        Active features of the side to move and of the other side.
    accumulators : float64[2, L1]
        Accumulators, side to move first.
    inputs : tuple of float64[padded inputs]
        Input of each dense layer (the first is the feature-transformer output).
    outputs : tuple of float64[outputs]
        Affine output ``z`` of each dense layer (before its activation).
    """

    bucket: int
    psqt: float
    positional: float
    value: float
    features: tuple[list[int], list[int]] = field(default=([], []), repr=False)
    accumulators: np.ndarray | None = field(default=None, repr=False)
    inputs: tuple[np.ndarray, ...] = field(default=(), repr=False)
    outputs: tuple[np.ndarray, ...] = field(default=(), repr=False)


def forward_float_trace(network: FloatNetwork, board: chess.Board | str) -> FloatEval:
    """:func:`forward_float` with the PSQT and positional parts (see the module docstring)."""
    from .features import architecture_features
    from .positions import board_from_fen

    if isinstance(board, str):
        board = board_from_fen(board, strict=True, hint="api")  # the rule of evaluate() and the command line
    arch = network.architecture
    white, black = architecture_features(arch).active(board)  # raises PositionError
    stm_f, opp_f = (white, black) if board.turn == chess.WHITE else (black, white)
    w = network.ft_weights
    acc_stm = network.ft_biases.astype(np.float64) + w[stm_f].astype(np.float64).sum(0)
    acc_opp = network.ft_biases.astype(np.float64) + w[opp_f].astype(np.float64).sum(0)
    bucket = arch.bucket_of(len(white))
    psqt = 0.0
    if arch.psqt_buckets:
        p = network.psqt_weights.astype(np.float64)
        psqt = (p[stm_f].sum(0)[bucket] - p[opp_f].sum(0)[bucket]) / 2.0
    x = ft_activation_float(arch.ft_activation, acc_stm, acc_opp, network.ft_table)
    skip = 0.0
    y = 0.0
    widths = arch.layer_inputs()
    inputs, outputs = [], []
    for i, layer in enumerate(arch.layers):
        W = network.layer_weights[i][bucket].astype(np.float64)
        padded = np.zeros(widths[i])
        padded[: x.shape[0]] = x
        z = W @ padded + network.layer_biases[i][bucket]
        inputs.append(padded)
        outputs.append(z)
        if i == 0 and arch.skip_index >= 0:
            skip = float(z[arch.skip_index])
        if layer.activation == "none":
            y = float(z[0])
            break
        x = hidden_activation_float(layer.activation, z[: layer.n_activated])
    positional = y + skip
    return FloatEval(bucket, float(psqt), positional, (float(psqt) + positional) * arch.output_units,
                     (stm_f, opp_f), np.stack([acc_stm, acc_opp]), tuple(inputs), tuple(outputs))


def forward_float(network: FloatNetwork, board: chess.Board | str) -> float:
    """Evaluate ``board`` with the float network in numpy (float64 arithmetic).

    Returns
    -------
    float
        Internal units from the side to move's point of view, unrounded: the quantised
        network's :meth:`~nnue_infer.Evaluator.evaluate` approximates it.

    Raises
    ------
    PositionError
        The position cannot be represented by the feature set (kings, > 32 pieces, pawns on
        the first or last rank); ``ValueError`` for a bad FEN.
    """
    return forward_float_trace(network, board).value

"""The PyTorch model of the distillation trainer and its loss (needs the ``train`` extra: PyTorch).

Model
-----
The PyTorch model computes exactly the float semantics of :mod:`nnue_infer.float_network`
(accumulator, feature-transformer activation, per-bucket dense layers, forward skip, PSQT,
value = (psqt + y) * ``output_units`` internal units from the side to move's point of view),
so :func:`model_to_float_network` hands over a :class:`~nnue_infer.float_network.FloatNetwork`
that :func:`~nnue_infer.quantisation.quantise` turns into an integer network.  Inputs are sparse:
each perspective's (at most 32) active feature indices go through ``embedding_bag`` sums, so
the feature transformer costs O(pieces x width) per position whatever the number of features.
The dense layers run per output bucket on the positions of that bucket (the batch is sorted
by bucket), so each position pays for one layer stack only.  After every optimiser step the dense weights are
clamped to what their integer type holds at the quantisation scale (int8 / scale), so
quantisation never saturates.

:class:`nnue_infer.training.fast.FastModel` has this model's parameters, forward function and
gradients, with the first layer in Numba kernels (several times faster); the trainer uses it.

Loss
----
Mean squared error in win-probability space: ``(sigmoid(cp_student / S) - sigmoid(cp_teacher / S))**2``
with centipawns ``cp = 100 * value / units_per_pawn`` (361 internal units per pawn for Stockfish
15.1) and the scale ``S = 400`` cp by default (``TrainConfig.sigmoid_scale_cp``), i.e. a 400 cp
advantage maps to a win probability of sigmoid(1) = 0.73.  It weighs errors on balanced
positions more than on decided ones.

Source: nnue-pytorch ``model.py`` (sparse feature transformer, bucketed layer stacks, weight
clipping to the quantisable range, sigmoid-scaled loss), Stockfish 15.1 ``nnue/``.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import TrainingError
from ..network import Architecture

try:
    import torch
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("nnue_infer.training.model needs PyTorch: pip install 'nnue-infer[train]'") from _exc


#: Crude piece values (pawns) that initialise the PSQT weights, by piece type P, N, B, R, Q, K.
_PSQT_INIT_PAWNS = (1.0, 3.0, 3.2, 5.0, 9.0, 0.0)


def prepare_features(data: dict, arch: Architecture) -> tuple[np.ndarray, np.ndarray]:
    """Feature indices of every position of a positions file for ``arch``'s feature set.

    Returns
    -------
    features : int16 or int32 [n, 2, 32]
        Side to move's active features, then the other side's; unused entries hold the number
        of features (the embedding's padding row).  int16 when the indices fit.
    buckets : int64[n]
        Output bucket of each position.

    Raises
    ------
    TrainingError
        A position has not exactly one king per side or more than 32 pieces (names the row).
    """
    from ..features import architecture_features
    from ..kernels.nnue.feature_index import active_features_batch

    bb = np.ascontiguousarray(data["bitboards"], dtype=np.int64)
    stm = np.ascontiguousarray(data["stm"], dtype=np.uint8)
    u = bb.view(np.uint64)
    occupied = u[:, 6] | u[:, 7]
    for name, mask in (("white king", u[:, 5] & u[:, 6]), ("black king", u[:, 5] & u[:, 7]), ("pieces", occupied)):
        n = _popcount(mask)
        bad = np.flatnonzero(n > 32) if name == "pieces" else np.flatnonzero(n != 1)
        if bad.size:
            raise TrainingError(f"positions: row {int(bad[0])}: {name} count {int(n[bad[0]])} is not representable")
    fs = architecture_features(arch)
    nf = fs.num_features
    out = np.empty((len(bb), 2, 32), np.int16 if nf < 2**15 else np.int32)
    counts = np.empty(len(bb), np.int64)
    active_features_batch(bb, stm, fs.slot_table, fs.king_buckets, fs.mirror, fs.num_slots, nf, out, counts)
    buckets = (counts - 1) // (32 // arch.output_buckets)
    return out, buckets


def _popcount(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x).astype(np.int64)
    x = x.astype(np.uint64)
    n = np.zeros(x.shape, np.int64)
    for shift in range(0, 64, 8):
        n += np.unpackbits(((x >> np.uint64(shift)) & np.uint64(255)).astype(np.uint8)[..., None], axis=-1).sum(-1)
    return n


class _FeatureSum(torch.autograd.Function):
    """Sum of the weight rows of each position's active features
    (:func:`nnue_infer.training.sparse_sums.sum_rows`, backward ``scatter_add_rows``)."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, indices: torch.Tensor, pad: int) -> torch.Tensor:
        from .sparse_sums import sum_rows

        ctx.save_for_backward(indices)
        ctx.pad = pad
        ctx.weight_shape = tuple(weight.shape)
        out = np.empty((indices.shape[0], weight.shape[1]), np.float32)
        sum_rows(indices.numpy(), pad, np.ascontiguousarray(weight.detach().numpy()), out)
        return torch.from_numpy(out)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        from .sparse_sums import scatter_add_rows

        (indices,) = ctx.saved_tensors
        out = np.zeros(ctx.weight_shape, np.float32)
        scatter_add_rows(indices.numpy(), ctx.pad, np.ascontiguousarray(grad.numpy(), dtype=np.float32), out)
        return torch.from_numpy(out), None, None


class _PairwiseFeatureTransformer(torch.autograd.Function):
    """Accumulators plus the pairwise activation in one pass
    (:func:`nnue_infer.training.sparse_sums.pairwise_ft_forward` / ``pairwise_ft_backward``)."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, bias: torch.Tensor, indices: torch.Tensor, pad: int) -> torch.Tensor:
        from .sparse_sums import pairwise_ft_forward

        m = indices.shape[0]
        acc = np.empty((m, weight.shape[1]), np.float32)
        out = np.empty((m, weight.shape[1] // 2), np.float32)
        pairwise_ft_forward(indices.numpy(), pad, weight.detach().numpy(), bias.detach().numpy(), acc, out)
        ctx.save_for_backward(indices)
        ctx.acc, ctx.pad, ctx.weight_shape = acc, pad, tuple(weight.shape)
        return torch.from_numpy(out)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        from .sparse_sums import pairwise_ft_backward

        (indices,) = ctx.saved_tensors
        gw = np.zeros(ctx.weight_shape, np.float32)
        gb = np.zeros(ctx.weight_shape[1], np.float32)
        pairwise_ft_backward(indices.numpy(), ctx.pad, ctx.acc, np.ascontiguousarray(grad.numpy(), dtype=np.float32), gw, gb)
        return torch.from_numpy(gw), torch.from_numpy(gb), None, None


class FloatModel(torch.nn.Module):
    """The float semantics of :mod:`nnue_infer.float_network` as a PyTorch module.

    Parameters live in the :class:`FloatNetwork` layout, except that dense weights hold only
    the real (unpadded) inputs and the feature transformer has one extra all-zero padding row.
    ``fused`` selects the compiled accumulator + pairwise kernels (pairwise activation only);
    otherwise generic PyTorch operations compute the activation.
    """

    def __init__(self, arch: Architecture, seed: int = 1, fused: bool = True) -> None:
        super().__init__()
        self.fused = fused
        from ..features import architecture_features

        fs = architecture_features(arch)
        self.arch = arch
        self.num_features = nf = fs.num_features
        L1 = arch.ft_width
        B = arch.output_buckets
        g = torch.Generator().manual_seed(seed)
        ft = torch.randn(nf + 1, L1, generator=g) * (0.5 / math.sqrt(32))
        ft[nf] = 0
        self.ft_weights = torch.nn.Parameter(ft)
        self.ft_biases = torch.nn.Parameter(0.5 + 0.05 * torch.randn(L1, generator=g))
        P = max(arch.psqt_buckets, 1)
        psqt = torch.zeros(nf + 1, P)
        one_pawn = arch.units_per_pawn / arch.output_units  # output units per pawn
        for own in (0, 1):
            for pt, value in enumerate(_PSQT_INIT_PAWNS):
                slot = int(fs.slot_table[own, pt])
                for kb in range(nf // (64 * fs.num_slots)):
                    start = 64 * slot + 64 * fs.num_slots * kb
                    psqt[start:start + 64] = (1 if own == 0 else -1) * value * one_pawn
        self.psqt_weights = torch.nn.Parameter(psqt, requires_grad=arch.psqt_buckets > 0)
        self.layer_weights = torch.nn.ParameterList()
        self.layer_biases = torch.nn.ParameterList()
        n_in = arch.ft_output_width
        for layer in arch.layers:
            bound = 1.0 / math.sqrt(n_in)
            w = (torch.rand(B, layer.outputs, n_in, generator=g) * 2 - 1) * bound
            if layer.activation == "none":
                w *= 0.1  # start near the PSQT (material) estimate
            self.layer_weights.append(torch.nn.Parameter(w))
            self.layer_biases.append(torch.nn.Parameter(torch.zeros(B, layer.outputs)))
            n_in = layer.activated_width
        self._limits = _weight_limits(arch)
        if arch.ft_activation == "lut_glu":  # the gate table: fixed, stored with the network
            from ..network import default_gate_table

            self.register_buffer("ft_table", torch.from_numpy(default_gate_table()))
        else:
            self.ft_table = None

    def _ft_act(self, acc: torch.Tensor) -> torch.Tensor:
        name = self.arch.ft_activation
        h = acc.shape[1] // 2
        a, b = acc[:, :h], acc[:, h:]
        if name == "crelu":
            return acc.clamp(0, 1)
        if name == "screlu":
            return acc.clamp(0, 1) ** 2
        if name == "pairwise":
            return a.clamp(0, 1) * b.clamp(0, 1)
        if name == "pairwise_screlu":
            return a.clamp(0, 1) ** 2 * b.clamp(0, 1) ** 2
        if name == "glu":
            return a.clamp(0, 1) * b.clamp(-1, 1)
        if name == "bilinear":
            return a.clamp(-1, 1) * b.clamp(-1, 1)
        if name == "hswish_glu":
            x = a.clamp(-1, 1)
            return x * (x + 1) * 0.5 * b.clamp(-1, 1)
        if name == "lut_glu":  # piecewise-linear through the table (float_network.gate_table_value)
            t = self.ft_table
            u = (a.clamp(-1, 1) + 1) * (0.5 * (t.shape[0] - 1))
            i0 = u.detach().floor().clamp(max=t.shape[0] - 2)
            frac = u - i0
            i0 = i0.long()
            return (t[i0] + (t[i0 + 1] - t[i0]) * frac) * b.clamp(-1, 1)
        raise TrainingError(f"unknown feature-transformer activation {name!r}")

    @staticmethod
    def _hidden_act(name: str, z: torch.Tensor) -> torch.Tensor:
        sqr = lambda t: (t * t * (127.0 / 128.0)).clamp(max=1.0)  # noqa: E731
        if name == "crelu":
            return z.clamp(0, 1)
        if name == "sqr_crelu":
            return sqr(z)
        if name == "sqr_crelu+crelu":
            return torch.cat([sqr(z), z.clamp(0, 1)], dim=1)
        raise TrainingError(f"unknown hidden activation {name!r}")

    def forward(self, features: torch.Tensor, buckets: torch.Tensor) -> torch.Tensor:
        """Values in internal units, side to move's point of view.

        ``features`` int64[N, 2, 32] (as :func:`prepare_features`), ``buckets`` int64[N];
        returns float32[N].
        """
        arch = self.arch
        nf = self.num_features
        N = features.shape[0]
        f_stm, f_opp = features[:, 0].contiguous(), features[:, 1].contiguous()
        if arch.ft_activation == "pairwise" and self.fused:  # fused fast path
            x = _PairwiseFeatureTransformer.apply(self.ft_weights, self.ft_biases, features.reshape(2 * N, -1), nf)
            x = x.reshape(N, -1)
        else:
            acc_stm = _FeatureSum.apply(self.ft_weights, f_stm, nf) + self.ft_biases
            acc_opp = _FeatureSum.apply(self.ft_weights, f_opp, nf) + self.ft_biases
            x = torch.cat([self._ft_act(acc_stm), self._ft_act(acc_opp)], dim=1)
        rows = torch.arange(N)
        psqt = torch.zeros(N)
        if arch.psqt_buckets:
            p_stm = _FeatureSum.apply(self.psqt_weights, f_stm, nf)
            p_opp = _FeatureSum.apply(self.psqt_weights, f_opp, nf)
            psqt = (p_stm[rows, buckets] - p_opp[rows, buckets]) / 2
        # Dense layers per bucket: sort positions by bucket, one matrix product per bucket.
        order = torch.argsort(buckets, stable=True)
        counts = torch.bincount(buckets, minlength=arch.output_buckets).tolist()
        y, skip = self.layer_stacks(x[order], counts)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(N)
        y, skip = y[inverse], skip[inverse]
        return (psqt + y + skip) * arch.output_units

    def layer_stacks(self, x: torch.Tensor, counts: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The dense layers on first-layer inputs ``x`` float32[N, W] sorted by output bucket
        (``counts[k]`` positions of bucket k, in order): one matrix product per bucket and layer.
        Returns (output, forward skip), float32[N] each, in float units."""
        arch = self.arch
        skip = torch.zeros(x.shape[0])
        y = torch.zeros(x.shape[0])
        for i, layer in enumerate(arch.layers):
            ws, bs = self.layer_weights[i].unbind(0), self.layer_biases[i].unbind(0)
            z = torch.cat([torch.addmm(bs[k], xk, ws[k].T) for k, xk in enumerate(torch.split(x, counts)) if counts[k]])
            if i == 0 and arch.skip_index >= 0:
                skip = z[:, arch.skip_index]
            if layer.activation == "none":
                y = z[:, 0]
                break
            x = self._hidden_act(layer.activation, z[:, : layer.n_activated])
        return y, skip

    @torch.no_grad()
    def clip_weights(self) -> None:
        """Clamp dense weights to the range their int8 type holds after quantisation."""
        for w, limit in zip(self.layer_weights, self._limits):
            w.clamp_(-limit, limit)


def _weight_limits(arch: Architecture) -> list[float]:
    """Largest float magnitude of each dense layer's weights that quantises without saturating."""
    from ..quantisation import SCHEMES, quantised_architecture, tensor_scales

    scales = tensor_scales(quantised_architecture(arch, SCHEMES["stockfish"]))
    return [127.0 / scales[f"layers.{i}.weights"] for i in range(len(arch.layers))]


def model_to_float_network(model: FloatModel, description: str = ""):
    """The :class:`~nnue_infer.float_network.FloatNetwork` of ``model`` (dense weights zero-padded)."""
    from ..float_network import FloatNetwork

    arch = model.arch
    nf = model.num_features
    t = lambda p: p.detach().cpu().numpy().astype(np.float32)  # noqa: E731
    weights = []
    for w, n_in in zip(model.layer_weights, arch.layer_inputs()):
        arr = np.zeros((w.shape[0], w.shape[1], n_in), np.float32)
        arr[:, :, : w.shape[2]] = t(w)
        weights.append(arr)
    psqt = t(model.psqt_weights)[:nf] if arch.psqt_buckets else np.zeros((nf, 0), np.float32)
    return FloatNetwork(arch, ft_biases=t(model.ft_biases), ft_weights=np.ascontiguousarray(t(model.ft_weights)[:nf]),
                        psqt_weights=np.ascontiguousarray(psqt), layer_weights=tuple(weights),
                        layer_biases=tuple(t(b) for b in model.layer_biases), description=description,
                        ft_table=None if model.ft_table is None else t(model.ft_table))


def win_probability_mse(pred: torch.Tensor, target: torch.Tensor, arch: Architecture, teacher_units_per_pawn: float,
          scale_cp: float) -> torch.Tensor:
    """The loss: mean of ``(sigmoid(cp_pred / S) - sigmoid(cp_target / S)) ** 2`` over the batch.

    ``pred`` float32[n] (internal units of ``arch``), ``target`` float32[n] (the teacher's
    internal units, ``teacher_units_per_pawn`` a pawn), ``scale_cp`` = ``S`` in centipawns.
    """
    p = torch.sigmoid(pred * (100.0 / arch.units_per_pawn / scale_cp))
    q = torch.sigmoid(target * (100.0 / teacher_units_per_pawn / scale_cp))
    return ((p - q) ** 2).mean()

"""The fast trainer: :class:`nnue_infer.training.model.FloatModel`'s float semantics with the sparse
first layer in Numba kernels (:mod:`nnue_infer.training.sparse_ft`) and the batch pre-sorted
by output bucket, for 100,000+ positions per second per core on a 2 x 256 network.

What is the same as :class:`~nnue_infer.training.model.FloatModel`: the parameters (this model *is*
one, same initialisation for a seed, same ``state_dict``, so
:func:`~nnue_infer.training.model.model_to_float_network` and the quantisation are unchanged), the
forward function (accumulator, activation, PSQT, per-bucket dense layers, forward skip) and
its gradients (tests/training/test_fast.py compares them with the reference model's on a batch,
for every activation).  What differs is only how the work is done:

* the feature transformer, its activation and the PSQT sum run in one Numba pass forward and
  one backward, touching only the (at most 32) active rows per perspective, instead of
  ``embedding_bag`` sums, slices, concatenations and a dozen element-wise operations whose
  backward passes allocate and fill tensors as large as the batch's accumulators;
* a batch arrives sorted by output bucket (:func:`sort_by_bucket`; the loss is a mean, so
  the order of its positions does not matter), so the dense layers run on contiguous slices
  with no gather or inverse permutation;
* large batches (16,384 by default) and Adam's fused CPU kernel make PyTorch's per-operation
  overhead small.

Needs the ``train`` extra (PyTorch).
"""

from __future__ import annotations

import numpy as np
import torch

from .model import FloatModel, win_probability_mse

from .sparse_ft import factor_parameters, ft_backward, ft_forward


class _SparseFirstLayer(torch.autograd.Function):
    """Feature transformer + activation + PSQT term of a bucket-sorted batch (Numba kernels)."""

    @staticmethod
    def forward(ctx, ft_weights, ft_biases, psqt_weights, model, indices, buckets):
        n = indices.shape[0]
        L1 = ft_weights.shape[1]
        width = L1 // 2 if model.paired else L1
        acc = np.empty((n, 2, L1), np.float32)
        x = np.empty((n, 2 * width), np.float32)
        psqt = np.empty(n, np.float32)
        ft_forward(indices, model.num_features, ft_weights.detach().numpy(), ft_biases.detach().numpy(),
                   psqt_weights.detach().numpy(), buckets, model.factors, model.paired, model.gate_table, acc, x, psqt)
        ctx.model, ctx.indices, ctx.buckets, ctx.acc = model, indices, buckets, acc
        return torch.from_numpy(x), torch.from_numpy(psqt)

    @staticmethod
    def backward(ctx, grad_x, grad_psqt):
        model = ctx.model
        gw, gb, gp = model.ft_gradient_buffers()
        ft_backward(ctx.indices, model.num_features, ctx.acc, np.ascontiguousarray(grad_x.numpy(), dtype=np.float32),
                    np.ascontiguousarray(grad_psqt.numpy(), dtype=np.float32), ctx.buckets, model.factors,
                    model.paired, model.gate_table, np.empty(ctx.acc.shape[2], np.float32), gw, gb, gp)
        return torch.from_numpy(gw), torch.from_numpy(gb), torch.from_numpy(gp), None, None, None


class FastModel(FloatModel):
    """:class:`~nnue_infer.training.model.FloatModel` with the fast forward pass :meth:`forward_sorted`.

    Parameters
    ----------
    arch : Architecture
        Any architecture :class:`~nnue_infer.training.model.FloatModel` trains.
    seed : int
        Initialisation seed (the same parameters as ``FloatModel(arch, seed)``).
    """

    def __init__(self, arch, seed: int = 1) -> None:
        super().__init__(arch, seed, fused=False)
        self.paired = arch.ft.paired
        self.factors = factor_parameters(arch.ft.code)
        self.gate_table = (np.ascontiguousarray(self.ft_table.numpy(), dtype=np.float32) if self.ft_table is not None
                           else np.zeros(0, np.float32))

    def ft_gradient_buffers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fresh zeroed gradient arrays for the feature transformer's weights, biases and PSQT weights
        (new arrays each step: PyTorch keeps the previous step's as ``.grad`` until it is reset)."""
        return (np.zeros(tuple(self.ft_weights.shape), np.float32), np.zeros(tuple(self.ft_biases.shape), np.float32),
                np.zeros(tuple(self.psqt_weights.shape), np.float32))

    def forward(self, features, buckets) -> torch.Tensor:
        """:meth:`FloatModel.forward`'s interface (any order; ``features`` int[N, 2, 32], ``buckets``
        int64[N], tensors or arrays) through :meth:`forward_sorted`; returns float32[N] in the given order."""
        f = np.asarray(features, np.int32)
        b = np.asarray(buckets, np.int64)
        order = np.argsort(b, kind="stable")
        sorted_values = self.forward_sorted(np.ascontiguousarray(f[order]), np.ascontiguousarray(b[order]),
                                            np.bincount(b, minlength=self.arch.output_buckets).tolist())
        inverse = torch.empty(len(order), dtype=torch.int64)
        inverse[torch.from_numpy(order)] = torch.arange(len(order))
        return sorted_values[inverse]

    def forward_sorted(self, indices: np.ndarray, buckets: np.ndarray, counts: list[int]) -> torch.Tensor:
        """Values (internal units, side to move) of a batch sorted by output bucket.

        Parameters
        ----------
        indices : int32[n, 2, 32]
            Active features (:func:`nnue_infer.training.model.prepare_features`), C-contiguous.
        buckets : int64[n]
            Output buckets, non-decreasing.
        counts : list of int
            Positions per bucket (``len == arch.output_buckets``, sum n).

        Returns
        -------
        torch.Tensor
            float32[n], in the batch's (sorted) order.
        """
        # Without PSQT, psqt_weights is one frozen zero column: the term is 0 and gets no gradient.
        x, psqt = _SparseFirstLayer.apply(self.ft_weights, self.ft_biases, self.psqt_weights, self, indices, buckets)
        y, skip = self.layer_stacks(x, counts)
        return (psqt + y + skip) * self.arch.output_units


def sort_by_bucket(features: np.ndarray, buckets: np.ndarray, values: np.ndarray, num_buckets: int):
    """A batch reordered by output bucket, as :meth:`FastModel.forward_sorted` takes it.

    Parameters
    ----------
    features : int16 or int32 [n, 2, 32]
    buckets : int64[n]
    values : float32[n]
        Teacher values.
    num_buckets : int

    Returns
    -------
    tuple
        (int32[n, 2, 32] features, int64[n] buckets, torch float32[n] values, list of per-bucket counts).
    """
    order = np.argsort(buckets, kind="stable")
    b = np.ascontiguousarray(buckets[order])
    counts = np.bincount(b, minlength=num_buckets).tolist()
    return (np.ascontiguousarray(features[order], dtype=np.int32), b,
            torch.from_numpy(np.ascontiguousarray(values[order], dtype=np.float32)), counts)


def make_optimizer(model: FloatModel, lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam as :class:`nnue_infer.training.train.Trainer` sets it up (weight decay on the dense layers only),
    with PyTorch's fused CPU kernel."""
    dense = list(model.layer_weights) + list(model.layer_biases)
    return torch.optim.Adam([
        {"params": [model.ft_weights, model.ft_biases, model.psqt_weights], "weight_decay": 0.0},
        {"params": dense, "weight_decay": weight_decay},
    ], lr=lr, fused=True)


def train_step(model: FastModel, optimizer, batch, teacher_units_per_pawn: float, sigmoid_scale_cp: float,
               lr: float) -> float:
    """One optimiser step on a bucket-sorted batch (:func:`sort_by_bucket`): loss, backward, Adam,
    weight clipping.  Returns the batch's loss (raises ``FloatingPointError`` when it is not finite)."""
    features, buckets, values, counts = batch
    for group in optimizer.param_groups:
        group["lr"] = lr
    pred = model.forward_sorted(features, buckets, counts)
    loss = win_probability_mse(pred, values, model.arch, teacher_units_per_pawn, sigmoid_scale_cp)
    value = float(loss.detach())
    if not np.isfinite(value):
        raise FloatingPointError(f"loss became {value}; lower the learning rate")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    model.clip_weights()
    return value


@torch.no_grad()
def predict(model: FastModel, features: np.ndarray, buckets: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """Float model values (internal units, side to move) of positions in their given order.

    ``features`` int16/int32[n, 2, 32], ``buckets`` int64[n]; returns float32[n].
    """
    return np.concatenate([model(features[s:s + chunk], buckets[s:s + chunk]).numpy()
                           for s in range(0, len(buckets), chunk)] or [np.zeros(0, np.float32)])

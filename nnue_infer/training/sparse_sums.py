"""Sparse feature sums for training: the gradient of an embedding-bag sum, on the CPU.

A perspective's accumulator is the sum of the weight rows of its active features; the
gradient of that sum scatters each position's output gradient back onto those rows.
PyTorch's generic ``embedding_bag`` backward sorts the indices first and is several times
slower than this direct loop for the short bags (at most 32 features) of chess positions.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from nnue_infer.kernels.cache import register

register(__file__)  # cached like the kernels, stamped with them and this file


@njit(cache=True)
def sum_rows(indices, pad, weights, out):
    """``out[i] = sum(weights[indices[i, j]])`` over the entries before the first ``pad`` of row i.

    ``indices`` int64[n, k], ``weights`` float32[rows, width], ``out`` float32[n, width] (written).
    """
    n, k = indices.shape
    width = weights.shape[1]
    for i in range(n):
        for c in range(width):
            out[i, c] = 0.0
        for j in range(k):
            f = indices[i, j]
            if f == pad:
                break
            for c in range(width):
                out[i, c] += weights[f, c]


@njit(cache=True)
def scatter_add_rows(indices, pad, grad, out):
    """``out[indices[i, j]] += grad[i]`` for every entry before the first ``pad`` of row i.

    Parameters
    ----------
    indices : int64[n, k]
        Feature indices per position; a row's unused tail holds ``pad``.
    pad : int
        Padding index (never written).
    grad : float32[n, width]
        Gradient of each position's sum.
    out : float32[rows, width]
        Accumulated in place (the caller zeroes it).
    """
    n, k = indices.shape
    width = grad.shape[1]
    for i in range(n):
        for j in range(k):
            f = indices[i, j]
            if f == pad:
                break
            for c in range(width):
                out[f, c] += grad[i, c]


@njit(cache=True, parallel=True)
def pairwise_ft_forward(indices, pad, weights, biases, acc, out):
    """Float feature transformer with the pairwise activation, for a batch of perspectives.

    ``acc[r] = biases + sum(weights[indices[r, j]])`` over the entries before the first ``pad``,
    then ``out[r, c] = clamp(acc[r, c], 0, 1) * clamp(acc[r, h + c], 0, 1)`` with ``h = L1 / 2``
    (:mod:`nnue_infer.float_network`'s ``pairwise``).

    Parameters
    ----------
    indices : int64[m, k]
        Active features of m perspectives (padding at the end of each row).
    pad : int
        Padding index.
    weights : float32[rows, L1]
        Feature-transformer weights.
    biases : float32[L1]
        Feature-transformer biases.
    acc : float32[m, L1]
        Output: the accumulators (kept for the backward pass).
    out : float32[m, L1 / 2]
        Output: the activation.
    """
    m, k = indices.shape
    width = weights.shape[1]
    h = width // 2
    for r in prange(m):
        for c in range(width):
            acc[r, c] = biases[c]
        for j in range(k):
            f = indices[r, j]
            if f == pad:
                break
            for c in range(width):
                acc[r, c] += weights[f, c]
        for c in range(h):
            a = min(max(acc[r, c], np.float32(0.0)), np.float32(1.0))
            b = min(max(acc[r, h + c], np.float32(0.0)), np.float32(1.0))
            out[r, c] = a * b


@njit(cache=True, parallel=True)
def pairwise_ft_backward(indices, pad, acc, grad_out, grad_weights, grad_biases):
    """Gradients of :func:`pairwise_ft_forward` with respect to weights and biases.

    The clamp passes the gradient where ``0 <= acc <= 1`` (PyTorch's ``clamp`` convention).
    Threads split the columns, so no two threads write the same element.

    Parameters
    ----------
    indices : int64[m, k]
        As in the forward pass.
    pad : int
        Padding index.
    acc : float32[m, L1]
        Accumulators saved by the forward pass.
    grad_out : float32[m, L1 / 2]
        Gradient of the activation's output.
    grad_weights : float32[rows, L1]
        Accumulated in place (the caller zeroes it).
    grad_biases : float32[L1]
        Accumulated in place (the caller zeroes it).
    """
    m, k = indices.shape
    h = acc.shape[1] // 2
    block = 16
    n_blocks = (h + block - 1) // block
    for blk in prange(n_blocks):
        lo = blk * block
        hi = min(lo + block, h)
        da = np.empty(block, np.float32)
        db = np.empty(block, np.float32)
        for r in range(m):
            for c in range(lo, hi):
                a = acc[r, c]
                b = acc[r, h + c]
                g = grad_out[r, c]
                ca = min(max(a, np.float32(0.0)), np.float32(1.0))
                cb = min(max(b, np.float32(0.0)), np.float32(1.0))
                da[c - lo] = g * cb if 0.0 <= a <= 1.0 else np.float32(0.0)
                db[c - lo] = g * ca if 0.0 <= b <= 1.0 else np.float32(0.0)
                grad_biases[c] += da[c - lo]
                grad_biases[h + c] += db[c - lo]
            for j in range(k):
                f = indices[r, j]
                if f == pad:
                    break
                for c in range(lo, hi):
                    grad_weights[f, c] += da[c - lo]
                    grad_weights[f, h + c] += db[c - lo]

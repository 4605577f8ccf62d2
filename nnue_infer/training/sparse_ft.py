"""Numba kernels of the fast trainer's sparse first layer: feature transformer, its activation
and the PSQT sum, forward and backward, for a batch of positions (float32, one thread).

A position has at most 32 active features per perspective, so the accumulator of a
perspective is a sum of at most 32 rows of the feature-transformer weights and its gradient
touches only those rows.  These kernels do, in one pass over the batch, what
:class:`nnue_infer.training.model.FloatModel` does with two ``embedding_bag``-style sums per table, a
concatenation and a dozen element-wise PyTorch operations: the accumulators, every
feature-transformer activation of :data:`nnue_infer.network.FT_ACTIVATIONS` (same float
definitions, same gradient conventions as PyTorch: a clamp passes the gradient where
``lo <= x <= hi``), and the PSQT term ``(psqt[stm, bucket] - psqt[opp, bucket]) / 2``.

Layouts (``n`` positions, ``K`` feature slots, ``L1`` accumulator width, ``W`` = output width
per perspective: ``L1 / 2`` for paired activations, ``L1`` otherwise):

* ``indices`` int32[n, 2, K]: side to move's active features, then the other side's; a row's
  unused tail holds ``pad`` (the number of features);
* ``acc`` float32[n, 2, L1]: accumulators (forward output, kept for the backward pass);
* ``x`` float32[n, 2 * W]: activation, side to move's half first (the first dense layer's input);
* ``psqt_out`` float32[n]: the PSQT term in the model's float units.

Source of the definitions: :mod:`nnue_infer.float_network`, :mod:`nnue_infer.network`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from nnue_infer.kernels.nnue.activation import (FT_BILINEAR, FT_CRELU, FT_GLU, FT_HSWISH_GLU, FT_LUT_GLU, FT_PAIRWISE,
                                           FT_PAIRWISE_SCRELU, FT_SCRELU)
from nnue_infer.kernels.cache import register

register(__file__)  # cached like the kernels (its kernels fold their FT_* constants), stamped with them and this file

_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)


def factor_parameters(code: int) -> np.ndarray:
    """float32[6]: ``lo, q, r`` of the first factor, then of the second, of activation ``code``.

    Every factor is ``f(x) = c * (q * c + r)`` with ``c = clamp(x, lo, 1)`` (slope
    ``2 q c + r`` where ``lo <= x <= 1``, else 0): ``q, r = 0, 1`` is the clamp itself,
    ``1, 0`` its square, ``0.5, 0.5`` hard-swish's ``c (c + 1) / 2``.  An element-wise
    activation is its first factor; ``lut_glu``'s first factor is the table (its ``lo`` is -1).
    """
    clamp, square, hswish = (0.0, 1.0), (1.0, 0.0), (0.5, 0.5)
    table = {
        FT_CRELU: ((0.0, *clamp), (0.0, *clamp)),
        FT_SCRELU: ((0.0, *square), (0.0, *square)),
        FT_PAIRWISE: ((0.0, *clamp), (0.0, *clamp)),
        FT_PAIRWISE_SCRELU: ((0.0, *square), (0.0, *square)),
        FT_GLU: ((0.0, *clamp), (-1.0, *clamp)),
        FT_BILINEAR: ((-1.0, *clamp), (-1.0, *clamp)),
        FT_HSWISH_GLU: ((-1.0, *hswish), (-1.0, *clamp)),
        FT_LUT_GLU: ((-1.0, *clamp), (-1.0, *clamp)),
    }
    if code not in table:
        raise ValueError(f"unknown feature-transformer activation code {code}")
    return np.array(table[code][0] + table[code][1], np.float32)


@njit(cache=True, inline="always")
def _factor(x, lo, q, r):
    c = min(max(x, lo), _ONE)
    return c * (q * c + r)


@njit(cache=True, inline="always")
def _slope(x, lo, q, r):
    c = min(max(x, lo), _ONE)
    return 2 * q * c + r if lo <= x <= _ONE else _ZERO


@njit(cache=True, inline="always")
def _lut(x, table, t_scale):
    """Piecewise-linear gate through ``table`` at clamp(x, -1, 1), and its slope (0 outside [-1, 1])."""
    c = min(max(x, -_ONE), _ONE)
    u = (c + _ONE) * t_scale
    i0 = min(np.int64(np.floor(u)), table.shape[0] - 2)
    step = table[i0 + 1] - table[i0]
    return table[i0] + step * (u - np.float32(i0)), (step * t_scale if -_ONE <= x <= _ONE else _ZERO)


@njit(cache=True)
def ft_forward(indices, pad, weights, biases, psqt_weights, buckets, params, paired, table, acc, x, psqt_out):
    """Accumulators, activation and PSQT term of a batch (layouts in the module docstring).

    Parameters
    ----------
    indices : int32[n, 2, K]
    pad : int
        Padding index (rows at or after the first ``pad`` of a perspective are ignored).
    weights : float32[rows, L1]
        Feature-transformer weights.
    biases : float32[L1]
    psqt_weights : float32[rows, P]
        PSQT weights: P = the number of output buckets, or one all-zero column when the network has
        no PSQT (then bucket 0 is read).
    buckets : int64[n]
        Output (= PSQT) bucket of each position.
    params : float32[6]
        The activation's factors (:func:`factor_parameters`).
    paired : bool
        Paired activation (output ``L1 / 2`` per perspective) or element-wise.
    table : float32[T]
        Gate table of ``lut_glu`` (its first factor), or an empty array for every other activation.
    acc : float32[n, 2, L1]
        Output: accumulators.
    x : float32[n, 2 * W]
        Output: activation.
    psqt_out : float32[n]
        Output: ``(psqt[stm features, bucket] - psqt[other, bucket]) / 2``.
    """
    n, _, k = indices.shape
    width = weights.shape[1]
    half = width // 2
    w_out = half if paired else width
    lo_a, q_a, r_a, lo_b, q_b, r_b = params[0], params[1], params[2], params[3], params[4], params[5]
    use_table = table.shape[0] > 0
    t_scale = _HALF * np.float32(table.shape[0] - 1)
    last = psqt_weights.shape[1] - 1
    for r in range(n):
        bucket = min(buckets[r], last)
        p_sum = _ZERO
        for p in range(2):
            a = acc[r, p]
            a[:] = biases
            for j in range(k):
                f = indices[r, p, j]
                if f == pad:
                    break
                w = weights[f]
                for c in range(width):
                    a[c] += w[c]
                p_sum += psqt_weights[f, bucket] if p == 0 else -psqt_weights[f, bucket]
            out = x[r, p * w_out:(p + 1) * w_out]
            if not paired:
                for c in range(width):
                    out[c] = _factor(a[c], lo_a, q_a, r_a)
            elif use_table:
                for c in range(half):
                    out[c] = _lut(a[c], table, t_scale)[0] * _factor(a[half + c], lo_b, q_b, r_b)
            else:
                for c in range(half):
                    out[c] = _factor(a[c], lo_a, q_a, r_a) * _factor(a[half + c], lo_b, q_b, r_b)
        psqt_out[r] = p_sum * _HALF


@njit(cache=True)
def ft_backward(indices, pad, acc, grad_x, grad_psqt_out, buckets, params, paired, table, scratch, grad_weights,
                grad_biases, grad_psqt):
    """Gradients of :func:`ft_forward` with respect to the weights, biases and PSQT weights.

    Parameters
    ----------
    indices, pad, buckets, params, paired, table : as in :func:`ft_forward`
    acc : float32[n, 2, L1]
        Accumulators saved by the forward pass.
    grad_x : float32[n, 2 * W]
        Gradient of the activation.
    grad_psqt_out : float32[n]
        Gradient of the PSQT term.
    scratch : float32[L1]
        Work buffer.
    grad_weights : float32[rows, L1]
        Accumulated in place (the caller zeroes it).
    grad_biases : float32[L1]
        Accumulated in place.
    grad_psqt : float32[rows, P]
        Accumulated in place.
    """
    n, _, k = indices.shape
    width = acc.shape[2]
    half = width // 2
    w_out = half if paired else width
    lo_a, q_a, r_a, lo_b, q_b, r_b = params[0], params[1], params[2], params[3], params[4], params[5]
    use_table = table.shape[0] > 0
    t_scale = _HALF * np.float32(table.shape[0] - 1)
    d = scratch
    last = grad_psqt.shape[1] - 1
    for r in range(n):
        bucket = min(buckets[r], last)
        gp = grad_psqt_out[r] * _HALF
        for p in range(2):
            a = acc[r, p]
            g = grad_x[r, p * w_out:(p + 1) * w_out]
            if not paired:
                for c in range(width):
                    d[c] = g[c] * _slope(a[c], lo_a, q_a, r_a)
            elif use_table:
                for c in range(half):
                    gate, gate_slope = _lut(a[c], table, t_scale)
                    d[c] = g[c] * _factor(a[half + c], lo_b, q_b, r_b) * gate_slope
                    d[half + c] = g[c] * gate * _slope(a[half + c], lo_b, q_b, r_b)
            else:
                for c in range(half):
                    d[c] = g[c] * _factor(a[half + c], lo_b, q_b, r_b) * _slope(a[c], lo_a, q_a, r_a)
                    d[half + c] = g[c] * _factor(a[c], lo_a, q_a, r_a) * _slope(a[half + c], lo_b, q_b, r_b)
            for c in range(width):
                grad_biases[c] += d[c]
            sign = gp if p == 0 else -gp
            for j in range(k):
                f = indices[r, p, j]
                if f == pad:
                    break
                gw = grad_weights[f]
                for c in range(width):
                    gw[c] += d[c]
                grad_psqt[f, bucket] += sign

"""Activation kernels: the feature transformer's pairwise multiplication and the
hidden layers' ClippedReLU / SqrClippedReLU.

Source: Stockfish 15.1, ``nnue/nnue_feature_transformer.h`` (``transform``),
``nnue/layers/clipped_relu.h``, ``nnue/layers/sqr_clipped_relu.h``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Hidden-layer activation codes used in the layer table (see ``dense.propagate_layer_stack``).
ACT_NONE = 0  #: output layer: raw int32
ACT_CRELU = 1  #: ClippedReLU: clamp(z >> shift, 0, 127)
ACT_SQR_CRELU = 2  #: SqrClippedReLU: min(127, z*z >> (2*shift + 7))
ACT_SQR_CRELU_AND_CRELU = 3  #: [SqrClippedReLU(z), ClippedReLU(z)] concatenated (Stockfish 15.1 fc_0)


@njit(cache=True)
def pairwise_clamp_mul(acc, stm, clamp_max, shift, out):
    """Pairwise multiplication of both perspectives' accumulators.

    For half h = 0 (side to move ``stm``) and h = 1 (the other side) and
    j < L/2: ``out[h*L/2 + j] = (clamp(A[j], 0, QA) * clamp(A[j + L/2], 0, QA)) >> shift``.

    Parameters
    ----------
    acc : int16[2, L]
        Accumulators, row 0 White's perspective, row 1 Black's.
    stm : int
        Side to move, 0 White, 1 Black; its half comes first.
    clamp_max : int
        QA (127 for Stockfish 15.1).
    shift : int
        Right shift of the product (7 for Stockfish 15.1), so outputs are 0..(QA*QA >> shift).
    out : uint8[L]
        Output.
    """
    half = acc.shape[1] // 2
    for h in range(2):
        row = acc[stm ^ h]
        base = h * half
        for j in range(half):
            a = min(max(row[j], 0), clamp_max)
            b = min(max(row[j + half], 0), clamp_max)
            out[base + j] = (a * b) >> shift


@njit(cache=True)
def clipped_relu(z, n, shift, out, offset):
    """ClippedReLU: ``out[offset + i] = clamp(z[i] >> shift, 0, 127)`` for i < n (z int32, out uint8)."""
    for i in range(n):
        out[offset + i] = min(max(z[i] >> shift, 0), 127)


@njit(cache=True)
def sqr_clipped_relu(z, n, shift, out, offset):
    """SqrClippedReLU: ``out[offset + i] = min(127, (z[i]**2 in 64 bits) >> (2*shift + 7))``.

    The square is taken in int64: it overflows int32 once ``|z| > 46340``.
    """
    for i in range(n):
        v = np.int64(z[i])
        out[offset + i] = min((v * v) >> (2 * shift + 7), 127)


@njit(cache=True)
def activate(z, n_act, code, shift, out):
    """Apply hidden-layer activation ``code`` to ``z[:n_act]`` into the uint8 buffer ``out``.

    Returns the number of outputs written (``2 * n_act`` for the concatenated form).
    """
    if code == ACT_CRELU:
        clipped_relu(z, n_act, shift, out, 0)
        return n_act
    if code == ACT_SQR_CRELU:
        sqr_clipped_relu(z, n_act, shift, out, 0)
        return n_act
    sqr_clipped_relu(z, n_act, shift, out, 0)
    clipped_relu(z, n_act, shift, out, n_act)
    return 2 * n_act

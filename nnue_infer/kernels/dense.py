"""Dense-layer kernels: int8 x uint8 -> int32 affine transforms and the whole layer stack.

Source: Stockfish 15.1, ``nnue/layers/affine_transform.h`` and ``nnue/nnue_architecture.h``
(``propagate``: fc_0 -> [SqrClippedReLU | ClippedReLU] -> fc_1 -> ClippedReLU -> fc_2, plus
the forward skip from fc_0's last output).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .activation import ACT_F_NONE, ACT_FLOAT, ACT_NONE, activate, activate_float

#: Columns of the ``layers`` table given to :func:`propagate_layer_stack`.
COL_IN, COL_OUT, COL_ACT, COL_N_ACT, COL_W_OFFSET, COL_W_STRIDE, COL_B_OFFSET, COL_B_STRIDE = range(8)
LAYER_TABLE_COLUMNS = 8


@njit(cache=True)
def tdiv(a, b):
    """C integer division: truncates toward zero (-7 / 2 == -3), unlike Python's ``//``."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@njit(cache=True)
def wrap_int32(x):
    """Wrap an integer to the signed 32-bit range, as C's int32 arithmetic does."""
    return ((x + 2147483648) & 0xFFFFFFFF) - 2147483648


@njit(cache=True)
def affine_int16_input(x, n_in, weights, w_offset, biases, b_offset, n_out, z):
    """``z = biases + W @ x`` for the feature transformer's int16 output (uint8 or int8 values).

    W is int8 row-major ``[n_out, n_in]`` at ``w_offset`` of the flat ``weights``; z is int32
    (sums wrap as C's int32 does).  A plain dot product per output: it vectorises (VNNI /
    AVX-512 / AVX2 / NEON), and on Stockfish 15.1's first layer (1024 -> 16) it is about four
    times faster than visiting only the non-zero inputs, whatever their number.
    """
    for i in range(n_out):
        row = weights[w_offset + i * n_in:w_offset + (i + 1) * n_in]
        s = np.int32(0)
        for j in range(n_in):
            s += np.int32(x[j]) * np.int32(row[j])
        z[i] = s + biases[b_offset + i]


@njit(cache=True)
def affine_dense(x, n_in, weights, w_offset, biases, b_offset, n_out, z):
    """``z = biases + W @ x`` with W stored row-major ``[n_out, n_in]`` (int8), x uint8, z int32 (wrapping sums)."""
    for i in range(n_out):
        s = np.int32(biases[b_offset + i])
        row = weights[w_offset + i * n_in:w_offset + (i + 1) * n_in]
        for j in range(n_in):
            s += np.int32(x[j]) * np.int32(row[j])
        z[i] = s


@njit(cache=True)
def affine_float(x, n_in, params, w_off, b_off, n_out, z):
    """``z = b + W @ x`` in float64 with float32 parameters: W row-major ``[n_out, n_in]`` at
    ``params[w_off]``, b at ``params[b_off]``; ``x``, ``z`` float64."""
    for i in range(n_out):
        s = np.float64(params[b_off + i])
        row = w_off + i * n_in
        for j in range(n_in):
            s += np.float64(params[row + j]) * x[j]
        z[i] = s


@njit(cache=True)
def propagate_layer_stack(ft_out, bucket, weights, biases, layers, shift, skip_index, skip_num, skip_den, float_out):
    """Run one layer stack (output bucket) on the transformed features.

    Parameters
    ----------
    ft_out : int16[n_in of layer 0]
        Feature-transformer output (values in uint8 or int8 range), side to move's half first.
    bucket : int
        Layer stack to use.
    weights : int8[total]
        All integer dense weights, flat, row-major ``[n_out, n_in]`` per layer and bucket.
    biases : int32[total]
        All integer dense biases, flat, followed by the float32 weights and biases of the
        float layers (their bit patterns; the kernel reads them through a float32 view).
    layers : int64[n_layers, 8]
        Per layer: padded inputs, outputs, activation code, number of outputs activated,
        weight offset and per-bucket stride, bias offset and per-bucket stride (float layers:
        offsets into ``biases`` viewed as float32; their codes are ``>= ACT_FLOAT``).  The last
        layer has activation ``ACT_NONE`` (or ``ACT_F_NONE``) and one output.  Integer layers
        come first; the integer layer before the first float layer applies its activation in
        float to ``z / (127 << shift)``.
    shift : int
        WeightScaleBits (6 for Stockfish 15.1).
    skip_index, skip_num, skip_den : int
        Forward skip: layer 0's raw output ``skip_index`` (-1 for none) contributes
        ``tdiv(wrap32(z * skip_num), skip_den)`` to the result.
    float_out : int
        For a float output layer: ``positional = round(y * float_out)`` (``output_units *
        output_scale``), saturated to int32.

    Returns
    -------
    int
        The layer stack's output ("positional" in Stockfish's trace), int32 range, in
        internal units times OutputScale.
    """
    n_layers = layers.shape[0]
    width = 1  # scratch for the hidden layers only (layer 0 reads ft_out)
    float_width = 1
    for l in range(n_layers):
        width = max(width, layers[l, 1], layers[l, 0] if l > 0 else 0)
    for l in range(n_layers):
        if layers[l, 2] >= ACT_FLOAT:
            float_width = 2 * width
    z = np.empty(width, np.int32)
    x = np.zeros(width, np.uint8)
    zf = np.empty(float_width, np.float64)  # zeroing 2 x 1024 float64 per call cost ~230 ns
    xf = np.zeros(float_width, np.float64)
    fparams = biases.view(np.float32)
    to_float = 1.0 / (127 << shift)
    skip = 0
    out = 0
    for l in range(n_layers):
        n_in = layers[l, 0]
        n_out = layers[l, 1]
        w_off = layers[l, 4] + bucket * layers[l, 5]
        b_off = layers[l, 6] + bucket * layers[l, 7]
        code = layers[l, 2]
        last = l + 1 == n_layers
        if code >= ACT_FLOAT:
            affine_float(xf, n_in, fparams, w_off, b_off, n_out, zf)
            if code == ACT_F_NONE:
                y = np.floor(zf[0] * float_out + 0.5)
                out = np.int64(min(max(y, -2147483648.0), 2147483647.0))
                break
            written = activate_float(zf, layers[l, 3], code, xf)
            for i in range(written, layers[l + 1, 0]):
                xf[i] = 0.0
            continue
        if l == 0:
            affine_int16_input(ft_out, n_in, weights, w_off, biases, b_off, n_out, z)
            if skip_index >= 0:
                skip = tdiv(wrap_int32(np.int64(z[skip_index]) * skip_num), skip_den)
        else:
            affine_dense(x, n_in, weights, w_off, biases, b_off, n_out, z)
        if code == ACT_NONE:
            out = np.int64(z[0])
            break
        if not last and layers[l + 1, 2] >= ACT_FLOAT:  # integer -> float boundary
            for i in range(n_out):
                zf[i] = z[i] * to_float
            written = activate_float(zf, layers[l, 3], code + ACT_FLOAT, xf)
            for i in range(written, layers[l + 1, 0]):
                xf[i] = 0.0
            continue
        written = activate(z, layers[l, 3], code, shift, x)
        next_in = layers[l + 1, 0]
        for i in range(written, next_in):
            x[i] = 0
    return wrap_int32(out + skip)


@njit(cache=True)
def psqt_term(psqt_acc, stm, bucket):
    """PSQT contribution: ``tdiv(psqt[stm][bucket] - psqt[opp][bucket], 2)`` (int32[2, P] input)."""
    if psqt_acc.shape[1] == 0:
        return 0
    return tdiv(np.int64(psqt_acc[stm, bucket]) - psqt_acc[1 - stm, bucket], np.int64(2))

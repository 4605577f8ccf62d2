"""Dense-layer kernels: int8 x uint8 -> int32 affine transforms and the whole layer stack.

The layer stack is general; Stockfish's are instances of its layer table and skip arguments:

* Stockfish 15.1-18: fc_0 -> [SqrClippedReLU | ClippedReLU] of 15 outputs (shift 6) -> fc_1
  -> ClippedReLU -> fc_2; skip = tdiv(wrap32(z[15] * 9600), 8128) added to fc_2's output
  (``SKIP_SEPARATE``).
* Stockfish 19: fc_0 (32) -> both activations of all 32 (shift 7) -> fc_1 (64 -> 32) -> both
  activations (shift 6) -> fc_2 over the concatenation of all four blocks (128); skip
  z[30] - z[31] added to fc_2's output and the sum scaled: tdiv((o + skip) * 9600, 16384)
  with a 64-bit product (``SKIP_OUTPUT``).

Source: Stockfish sf_15.1 .. sf_18 ``nnue/nnue_architecture.h`` (``propagate``),
``nnue/layers/affine_transform.h``; ``shared/reference/stockfish-19-nnue.md`` section 8.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .activation import ACT_F_NONE, ACT_FLOAT, ACT_NONE, activate, activate_float

#: Columns of the ``layers`` table given to :func:`propagate_layer_stack`: padded inputs, outputs,
#: activation code, outputs activated, weight offset and per-bucket stride, bias offset and
#: stride, the activation's shift, where in the uint8 activation buffer the layer reads its
#: input and where it writes its activation.
(COL_IN, COL_OUT, COL_ACT, COL_N_ACT, COL_W_OFFSET, COL_W_STRIDE, COL_B_OFFSET, COL_B_STRIDE,
 COL_SHIFT, COL_X_IN, COL_X_OUT) = range(11)
LAYER_TABLE_COLUMNS = 11

#: Forward-skip modes (``Architecture.skip_mode``): the skip scaled alone with a wrapping 32-bit
#: product and added to the output (Stockfish 15.1-18), or added to the output before the
#: whole sum is scaled with a 64-bit product (Stockfish 19).
SKIP_SEPARATE = 0
SKIP_OUTPUT = 1


@njit(cache=True, inline="always")
def tdiv(a, b):
    """C integer division: truncates toward zero (-7 / 2 == -3), unlike Python's ``//``."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@njit(cache=True, inline="always")
def wrap_int32(x):
    """Wrap an integer to the signed 32-bit range, as C's int32 arithmetic does."""
    return ((x + 2147483648) & 0xFFFFFFFF) - 2147483648


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


#: int32 feature indices at the end of the scratch buffer (two lists of 64, for incremental updates).
SCRATCH_FEATURES = 128


@njit(cache=True, inline="always")
def scratch_layout(layers):
    """Offsets (in int16 entries) of the regions of the int16 scratch buffer for ``layers``.

    Returns ``(z, x, feats, end)``.  The transformed features (``layers[0, 0]`` entries) start
    at 0; ``z`` is the hidden layers' int32 sums and ``x`` their uint8 inputs (each as wide as
    the widest hidden layer), ``feats`` ``SCRATCH_FEATURES`` int32 feature indices; ``end`` is
    the buffer's size.  Regions start on 32-byte boundaries.  One caller-provided buffer
    instead of allocations inside the kernels (each cost ~40 ns per call).
    """
    width = 1
    for l in range(1, layers.shape[0]):
        width = max(width, layers[l, 0] + layers[l, 9])
    for l in range(layers.shape[0]):
        width = max(width, layers[l, 1])
    width = (width + 15) // 16 * 16
    z = (layers[0, 0] + 15) // 16 * 16
    x = z + 2 * width
    feats = x + width
    return z, x, feats, feats + 2 * SCRATCH_FEATURES


@njit(cache=True)
def scratch_size(layers):
    """Entries of the int16 scratch buffer the kernels need for the layer stack ``layers``."""
    return scratch_layout(layers)[3]


@njit(cache=True)
def propagate_float_tail(z, n, first, bucket, biases, layers, shift, float_out):
    """The float32 layers ``first..`` of a layer stack, from the raw int32 sums ``z[:n]`` of
    the integer layer ``first - 1`` (activated in float on ``z / (127 << shift)``).

    Returns the output ``round(y * float_out)`` saturated to int32; see :func:`propagate_layer_stack`.
    """
    width = n
    for l in range(first, layers.shape[0]):
        width = max(width, layers[l, 0], layers[l, 1])
    zf = np.empty(2 * width, np.float64)
    xf = np.empty(2 * width, np.float64)
    fparams = biases.view(np.float32)
    to_float = 1.0 / (127 << shift)
    for i in range(n):
        zf[i] = z[i] * to_float
    code = layers[first - 1, 2] + ACT_FLOAT
    n_act = layers[first - 1, 3]
    for l in range(first, layers.shape[0]):
        written = activate_float(zf, n_act, code, xf)
        for i in range(written, layers[l, 0]):
            xf[i] = 0.0
        w_off = layers[l, 4] + bucket * layers[l, 5]
        b_off = layers[l, 6] + bucket * layers[l, 7]
        affine_float(xf, layers[l, 0], fparams, w_off, b_off, layers[l, 1], zf)
        code = layers[l, 2]
        n_act = layers[l, 3]
        if code == ACT_F_NONE:
            break
    y = np.floor(zf[0] * float_out + 0.5)
    return np.int64(min(max(y, -2147483648.0), 2147483647.0))


@njit(cache=True, inline="always")
def propagate_layer_stack(scratch, bucket, weights, biases, layers, shift, skip_index, skip_sub, skip_mode, skip_num,
                          skip_den, float_out):
    """Run one layer stack (output bucket) on the transformed features.

    Parameters
    ----------
    scratch : int16[>= scratch_size(layers)]
        The feature-transformer output (values in uint8 or int8 range, side to move's half
        first) in its first ``layers[0, 0]`` entries; the rest is scratch (see :func:`scratch_layout`).
    bucket : int
        Layer stack to use.
    weights : int8[total]
        All integer dense weights, flat, row-major ``[n_out, n_in]`` per layer and bucket.
    biases : int32[total]
        All integer dense biases, flat, followed by the float32 weights and biases of the
        float layers (their bit patterns; the kernel reads them through a float32 view).
    layers : int64[n_layers, LAYER_TABLE_COLUMNS]
        Per layer (``COL_*``): padded inputs, outputs, activation code, number of outputs
        activated, weight offset and per-bucket stride, bias offset and per-bucket stride (float
        layers: offsets into ``biases`` viewed as float32; their codes are ``>= ACT_FLOAT``),
        activation shift, and the offsets in the uint8 activation buffer where the layer reads
        its input and writes its activation (all 0 unless a layer reads the concatenation of
        all earlier activations).  The last
        layer has activation ``ACT_NONE`` (or ``ACT_F_NONE``) and one output.  Integer layers
        come first; the integer layer before the first float layer applies its activation in
        float to ``z / (127 << shift)``.
    shift : int
        WeightScaleBits (6 for Stockfish 15.1): the scale of float layers' inputs.
    skip_index, skip_sub, skip_mode, skip_num, skip_den : int
        Forward skip from layer 0's raw outputs: ``s = z[skip_index] - z[skip_sub]`` (``skip_sub``
        -1: ``z[skip_index]`` alone; ``skip_index`` -1: no skip).  ``SKIP_SEPARATE``: the result
        is ``output + tdiv(wrap32(s * skip_num), skip_den)``; ``SKIP_OUTPUT``: it is
        ``tdiv((output + s) * skip_num, skip_den)`` in 64-bit arithmetic (then wrapped to int32).
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
    oz, ox, ofeats, _ = scratch_layout(layers)
    z = scratch[oz:ox].view(np.int32)
    x = scratch[ox:ofeats].view(np.uint8)  # every input a layer reads was written just before
    skip = np.int64(0)
    out = np.int64(0)
    for l in range(n_layers):
        n_in = layers[l, 0]
        n_out = layers[l, 1]
        w_off = layers[l, 4] + bucket * layers[l, 5]
        b_off = layers[l, 6] + bucket * layers[l, 7]
        code = layers[l, 2]
        if l == 0:
            affine_int16_input(scratch, n_in, weights, w_off, biases, b_off, n_out, z)
            if skip_index >= 0:
                skip = np.int64(z[skip_index])
                if skip_sub >= 0:
                    skip -= z[skip_sub]
        else:
            x_in = layers[l, 9]
            affine_dense(x[x_in:x_in + n_in], n_in, weights, w_off, biases, b_off, n_out, z)
        if code == ACT_NONE:
            out = np.int64(z[0])
            break
        if layers[l + 1, 2] >= ACT_FLOAT:  # integer -> float boundary: the rest in float
            out = propagate_float_tail(z, n_out, l + 1, bucket, biases, layers, shift, float_out)
            break
        x_out = layers[l, 10]
        written = activate(z, layers[l, 3], code, layers[l, 8], x[x_out:])
        for i in range(x_out + written, x_out + (written + 31) // 32 * 32):
            x[i] = 0
    if skip_index < 0:
        return wrap_int32(out)
    if skip_mode == SKIP_OUTPUT:
        return wrap_int32(tdiv((out + skip) * skip_num, skip_den))
    return wrap_int32(out + tdiv(wrap_int32(skip * skip_num), skip_den))


@njit(cache=True, inline="always")
def psqt_term(psqt_acc, stm, bucket):
    """PSQT contribution: ``tdiv(wrap32(psqt[stm][bucket] - psqt[opp][bucket]), 2)`` (int32[2, P] input).

    The difference wraps as Stockfish's int32 subtraction does (``FeatureTransformer::transform``),
    so the result lies in [-2**30, 2**30].
    """
    if psqt_acc.shape[1] == 0:
        return 0
    return tdiv(wrap_int32(np.int64(psqt_acc[stm, bucket]) - psqt_acc[1 - stm, bucket]), np.int64(2))

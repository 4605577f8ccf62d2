"""Dense-layer kernels: int8 x uint8 -> int32 affine transforms and the whole layer stack.

The layer stack is general; Stockfish's are instances of its layer table and skip arguments:

* Stockfish 15.1-18: fc_0 -> [SqrClippedReLU | ClippedReLU] of 15 outputs (shift 6) -> fc_1
  -> ClippedReLU -> fc_2; skip = tdiv(wrap32(z[15] * 9600), 8128) added to fc_2's output
  (``SKIP_SEPARATE``).
* Stockfish 19: fc_0 (32) -> both activations of all 32 (shift 7) -> fc_1 (64 -> 32) -> both
  activations (shift 6) -> fc_2 over the concatenation of all four blocks (128); skip
  z[30] - z[31] added to fc_2's output and the sum scaled: tdiv((o + skip) * 9600, 16384)
  with a 64-bit product (``SKIP_OUTPUT``).

Integer layers run in Stockfish's SIMD form (:func:`affine`): weights in a 4-byte block layout
(permuted once at load, ``network.block_layout``), each input block broadcast against a register
of output columns with the instructions ``kernels.simd`` chooses; every path gives the numbers
of the plain loops (:func:`affine_portable`).  On the ``vnni512`` path the first layer reads a
row-major copy of its weights instead (:func:`affine_rows_zmm`), and on every SIMD path a
one-output layer is one vector dot product (``simd.dot_u8i8x32``).

Source: Stockfish sf_15.1 .. sf_18 ``nnue/nnue_architecture.h`` (``propagate``),
``nnue/layers/affine_transform.h``; ``shared/reference/stockfish-19-nnue.md`` section 8.
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit

from .. import simd
from ..refcount import last_use
# bare names, not ``simd.X``: Numba prunes a branch on a global (or a constant argument of a
# specialised entry kernel, see ``forward.kernels``) compared with a global before typing it
from ..simd import (FC0_AVX2_PAIRED, FC0_AVX2_WIDE, ISA_AVX2, ISA_AVXVNNI, ISA_PORTABLE, ISA_VNNI512, TARGET_AVX2,
                   TARGET_VNNI256, TARGET_VNNI512)
from .activation import ACT_F_NONE, ACT_FLOAT, ACT_NONE, activate, activate_float, activate_lanes

#: Columns of the ``layers`` table given to :func:`propagate_layer_stack`: padded inputs, outputs,
#: activation code, outputs activated, weight offset and per-bucket stride, bias offset and
#: stride, the activation's shift, where in the uint8 activation buffer the layer reads its
#: input and where it writes its activation, and the offset of a second copy of the weights in
#: row-major layout (``[bucket][output][input]``, same per-bucket stride; -1 for none: only the
#: first integer layer has one, for :func:`affine_rows_zmm`).
(COL_IN, COL_OUT, COL_ACT, COL_N_ACT, COL_W_OFFSET, COL_W_STRIDE, COL_B_OFFSET, COL_B_STRIDE,
 COL_SHIFT, COL_X_IN, COL_X_OUT, COL_ROWS) = range(12)
LAYER_TABLE_COLUMNS = 12

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


@njit(cache=True, forceinline=True)
def affine_portable(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off):
    """``z[z_off:] = biases + W @ x[x_off:]`` in plain loops, W in the block layout (see :func:`affine`).

    ``x`` uint8, ``z`` int32 (sums wrap as C's int32 does).  One output (both layouts
    coincide): a plain dot product, which LLVM vectorises.  Offsets must be >= 0: indices are
    cast to uint64, so Numba emits no negative-index wraparound (which keeps LLVM from
    vectorising a loop over ``x[x_off + j]``).
    """
    if n_out == 1:
        s = np.int32(0)
        for j in range(n_in):
            s += np.int32(x[np.uint64(x_off + j)]) * np.int32(weights[np.uint64(w_off + j)])
        z[z_off] = s + biases[b_off]
        return
    for i in range(n_out):
        z[np.uint64(z_off + i)] = biases[np.uint64(b_off + i)]
    for blk in range(n_in // 4):
        xi = np.uint64(x_off + 4 * blk)
        x0 = np.int32(x[xi])
        x1 = np.int32(x[xi + np.uint64(1)])
        x2 = np.int32(x[xi + np.uint64(2)])
        x3 = np.int32(x[xi + np.uint64(3)])
        row = w_off + blk * n_out * 4
        for i in range(n_out):
            w = np.uint64(row + 4 * i)
            z[np.uint64(z_off + i)] += ((x0 * weights[w] + x1 * weights[w + np.uint64(1)])
                                        + (x2 * weights[w + np.uint64(2)] + x3 * weights[w + np.uint64(3)]))


@njit(cache=True, forceinline=True)
def affine_zmm(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off):
    """:func:`affine` with 16 outputs per AVX-512 register (``n_out % 16 == 0``): ``vpdpbusd``
    of each 4-byte input block, broadcast, against 64 weight bytes; four accumulators per
    group of outputs hide the instruction's latency."""
    nb = n_in // 4
    for g in range(0, n_out, 16):
        a0 = simd.load_i32x16(biases, b_off + g)
        a1 = simd.zero_i32x16()
        a2 = simd.zero_i32x16()
        a3 = simd.zero_i32x16()
        w = w_off + 4 * g
        step = 4 * n_out
        blk = 0
        while blk + 4 <= nb:
            a0 = simd.dot4_vnni512(a0, x, x_off + 4 * blk, weights, w)
            a1 = simd.dot4_vnni512(a1, x, x_off + 4 * blk + 4, weights, w + step)
            a2 = simd.dot4_vnni512(a2, x, x_off + 4 * blk + 8, weights, w + 2 * step)
            a3 = simd.dot4_vnni512(a3, x, x_off + 4 * blk + 12, weights, w + 3 * step)
            w += 4 * step
            blk += 4
        while blk < nb:
            a0 = simd.dot4_vnni512(a0, x, x_off + 4 * blk, weights, w)
            w += step
            blk += 1
        simd.store_i32x16(z, z_off + g, simd.add_i32x16(simd.add_i32x16(a0, a1), simd.add_i32x16(a2, a3)))


@njit(cache=True, forceinline=True)
def affine_rows_zmm(x, x_off, n_in, weights, r_off, biases, b_off, n_out, z, z_off):
    """:func:`affine` from the row-major copy of the weights (``W[o, j]`` at ``r_off + o * n_in +
    j``, ``COL_ROWS``) for ``n_out % 16 == 0`` and ``n_in % 64 == 0``: per group of 16 outputs, 16
    accumulators of 16 lanes; each 64-byte input chunk is loaded once and multiplied lane by lane
    with the 16 rows' 64 bytes there (``simd.dot64_vnni512``), then each accumulator's lanes are
    summed (``simd.hsum16_i32x16``).  One load per ``vpdpbusd`` instead of two (the block layout
    broadcasts each 4-byte block from memory): Stockfish 15.1's fc_0 (1024 -> 16), AVX-512 VNNI,
    half the time of :func:`affine_zmm`.  Same int32 sums (they wrap; any order gives the same bits)."""
    for g in range(0, n_out, 16):
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = simd.zero_i32x16()
        a8 = a9 = a10 = a11 = a12 = a13 = a14 = a15 = simd.zero_i32x16()
        w = r_off + g * n_in
        for j in range(0, n_in, 64):
            xi = x_off + j
            r = w + j
            a0 = simd.dot64_vnni512(a0, x, xi, weights, r)
            a1 = simd.dot64_vnni512(a1, x, xi, weights, r + n_in)
            a2 = simd.dot64_vnni512(a2, x, xi, weights, r + 2 * n_in)
            a3 = simd.dot64_vnni512(a3, x, xi, weights, r + 3 * n_in)
            a4 = simd.dot64_vnni512(a4, x, xi, weights, r + 4 * n_in)
            a5 = simd.dot64_vnni512(a5, x, xi, weights, r + 5 * n_in)
            a6 = simd.dot64_vnni512(a6, x, xi, weights, r + 6 * n_in)
            a7 = simd.dot64_vnni512(a7, x, xi, weights, r + 7 * n_in)
            a8 = simd.dot64_vnni512(a8, x, xi, weights, r + 8 * n_in)
            a9 = simd.dot64_vnni512(a9, x, xi, weights, r + 9 * n_in)
            a10 = simd.dot64_vnni512(a10, x, xi, weights, r + 10 * n_in)
            a11 = simd.dot64_vnni512(a11, x, xi, weights, r + 11 * n_in)
            a12 = simd.dot64_vnni512(a12, x, xi, weights, r + 12 * n_in)
            a13 = simd.dot64_vnni512(a13, x, xi, weights, r + 13 * n_in)
            a14 = simd.dot64_vnni512(a14, x, xi, weights, r + 14 * n_in)
            a15 = simd.dot64_vnni512(a15, x, xi, weights, r + 15 * n_in)
        sums = simd.hsum16_i32x16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)
        simd.store_i32x16(z, z_off + g, simd.add_i32x16(sums, simd.load_i32x16(biases, b_off + g)))
    last_use((x, weights, biases, z))  # no reference-count pairs per call (see kernels.refcount)


@njit(cache=True, inline="always")
def dot4_ymm(acc, x, xi, weights, wi, isa):
    """One 4-byte input block into 8 int32 lanes: ``vpdpbusd ymm`` (AVX-VNNI, AVX-512 VNNI),
    AVX2's ``vpmaddubsw`` + ``vpmaddwd``, or its non-saturating two-multiply form
    (``simd.FC0_AVX2_WIDE``).  ``isa`` is loop-invariant where this is called: LLVM moves the
    choice out of the loops."""
    if isa == FC0_AVX2_WIDE:
        return simd.dot4_avx2_wide(acc, x, xi, weights, wi)
    if TARGET_VNNI256 and isa != ISA_AVX2:
        return simd.dot4_avxvnni(acc, x, xi, weights, wi)
    return simd.dot4_avx2(acc, x, xi, weights, wi)


@njit(cache=True, forceinline=True)
def affine_ymm(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off, isa):
    """:func:`affine` with 8 outputs per 256-bit register (``n_out % 8 == 0``): 16 outputs (two
    registers, two accumulators each) per pass over the input blocks, so each broadcast input
    block serves both; ``isa`` picks the instruction (:func:`dot4_ymm`; ``ISA_AVX2`` only where
    ``vpmaddubsw`` cannot saturate, see ``simd.first_layer_isa``)."""
    nb = n_in // 4
    step = 4 * n_out
    g = 0
    while g + 16 <= n_out:
        a0 = simd.load_i32x8(biases, b_off + g)
        b0 = simd.load_i32x8(biases, b_off + g + 8)
        a1 = simd.zero_i32x8()
        b1 = simd.zero_i32x8()
        w = w_off + 4 * g
        blk = 0
        while blk + 2 <= nb:
            a0 = dot4_ymm(a0, x, x_off + 4 * blk, weights, w, isa)
            b0 = dot4_ymm(b0, x, x_off + 4 * blk, weights, w + 32, isa)
            a1 = dot4_ymm(a1, x, x_off + 4 * blk + 4, weights, w + step, isa)
            b1 = dot4_ymm(b1, x, x_off + 4 * blk + 4, weights, w + step + 32, isa)
            w += 2 * step
            blk += 2
        if blk < nb:
            a0 = dot4_ymm(a0, x, x_off + 4 * blk, weights, w, isa)
            b0 = dot4_ymm(b0, x, x_off + 4 * blk, weights, w + 32, isa)
        simd.store_i32x8(z, z_off + g, simd.add_i32x8(a0, a1))
        simd.store_i32x8(z, z_off + g + 8, simd.add_i32x8(b0, b1))
        g += 16
    if g < n_out:  # 8 outputs left
        a0 = simd.load_i32x8(biases, b_off + g)
        a1 = simd.zero_i32x8()
        w = w_off + 4 * g
        blk = 0
        while blk + 2 <= nb:
            a0 = dot4_ymm(a0, x, x_off + 4 * blk, weights, w, isa)
            a1 = dot4_ymm(a1, x, x_off + 4 * blk + 4, weights, w + step, isa)
            w += 2 * step
            blk += 2
        if blk < nb:
            a0 = dot4_ymm(a0, x, x_off + 4 * blk, weights, w, isa)
        simd.store_i32x8(z, z_off + g, simd.add_i32x8(a0, a1))


@njit(cache=True, forceinline=True)
def affine_ymm_paired(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off):
    """:func:`affine_ymm` with two input blocks per ``vpmaddwd`` (``simd.dot4x2_avx2``: blocks
    2m and 2m + 1 added in int16), for ``simd.FC0_AVX2_PAIRED``, which ``simd.first_layer_isa``
    chooses only where those int16 sums cannot overflow; an odd last block alone."""
    nb = n_in // 4
    step = 4 * n_out
    g = 0
    while g < n_out:  # 16 outputs per pass (two registers), then 8
        two = g + 16 <= n_out
        a0 = simd.load_i32x8(biases, b_off + g)
        b0 = simd.load_i32x8(biases, b_off + g + 8) if two else simd.zero_i32x8()
        a1 = simd.zero_i32x8()
        b1 = simd.zero_i32x8()
        w = w_off + 4 * g
        blk = 0
        while blk + 4 <= nb:
            xi = x_off + 4 * blk
            a0 = simd.dot4x2_avx2(a0, x, xi, xi + 4, weights, w, w + step)
            a1 = simd.dot4x2_avx2(a1, x, xi + 8, xi + 12, weights, w + 2 * step, w + 3 * step)
            if two:
                b0 = simd.dot4x2_avx2(b0, x, xi, xi + 4, weights, w + 32, w + step + 32)
                b1 = simd.dot4x2_avx2(b1, x, xi + 8, xi + 12, weights, w + 2 * step + 32, w + 3 * step + 32)
            w += 4 * step
            blk += 4
        if blk + 2 <= nb:
            xi = x_off + 4 * blk
            a0 = simd.dot4x2_avx2(a0, x, xi, xi + 4, weights, w, w + step)
            if two:
                b0 = simd.dot4x2_avx2(b0, x, xi, xi + 4, weights, w + 32, w + step + 32)
            w += 2 * step
            blk += 2
        if blk < nb:
            a0 = simd.dot4_avx2(a0, x, x_off + 4 * blk, weights, w)
            if two:
                b0 = simd.dot4_avx2(b0, x, x_off + 4 * blk, weights, w + 32)
        simd.store_i32x8(z, z_off + g, simd.add_i32x8(a0, a1))
        if two:
            simd.store_i32x8(z, z_off + g + 8, simd.add_i32x8(b0, b1))
        g += 16 if two else 8


@njit(cache=True, inline="always")
def affine(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off, isa):
    """``z[z_off:z_off + n_out] = biases + W @ x[x_off:x_off + n_in]``: an int8 dense layer on 8-bit
    inputs, int32 outputs (wrapping sums).  Offsets instead of slices: a slice is a new array,
    whose reference count costs atomic operations on every call.

    Parameters
    ----------
    x : uint8[>= x_off + n_in]
        Inputs from ``x_off``; ``n_in % 4 == 0`` (layers' inputs are padded to 32).  Signed (int8) inputs are
        given as their bytes offset by 128 (x + 128) with biases lowered by 128 * (the column
        sums of W), which gives the same int32 sums (``Network.compute_layout``).
    weights : int8[total]
        W in Stockfish's SIMD **block layout** at ``w_off``: ``[n_in / 4][n_out][4]``, i.e.
        ``W[o, 4*b + k]`` at ``w_off + (b * n_out + o) * 4 + k`` (the file's row-major
        ``[n_out][n_in]`` is permuted once, by ``network.block_layout``).  For ``n_out == 1``
        both layouts coincide.
    biases : int32[total]
        At ``b_off``.
    z : int32[>= z_off + n_out]
        Output, from ``z_off``.
    isa : int
        ``simd.ISA_*``, ``simd.FC0_AVX2_WIDE`` or ``simd.FC0_AVX2_PAIRED``: the instructions to use (``ISA_AVX2`` only
        where ``vpmaddubsw`` cannot saturate: ``simd.first_layer_isa``); layers whose width does
        not fill a register, paths the target CPU lacks (``simd.TARGET_*``: never another
        path's instructions) and ``ISA_PORTABLE`` use plain loops.  Every choice gives the
        same numbers.

    Source: Stockfish 15.1, ``nnue/layers/affine_transform.h`` (the block layout and the
    broadcast-and-multiply form, no per-output horizontal sums).
    """
    if TARGET_VNNI512 and isa == ISA_VNNI512 and n_out % 16 == 0:
        affine_zmm(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off)
    elif TARGET_AVX2 and isa == FC0_AVX2_PAIRED and n_out % 8 == 0:
        affine_ymm_paired(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off)
    elif ((TARGET_VNNI256 and (isa == ISA_VNNI512 or isa == ISA_AVXVNNI))
          or (TARGET_AVX2 and (isa == ISA_AVX2 or isa == FC0_AVX2_WIDE))) and n_out % 8 == 0:
        affine_ymm(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off, np.int64(isa))
    else:
        affine_portable(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off)
    last_use((x, weights, biases, z))


@njit(cache=True, inline="always")
def first_layer(x, x_off, n_in, weights, w_off, rows_off, biases, b_off, n_out, z, z_off, fc0_isa):
    """The first layer as :func:`propagate_layer_stack` runs it: :func:`affine_rows_zmm` from the
    row-major copy at ``rows_off`` (-1: none) on the ``vnni512`` path when ``n_out % 16 == 0`` and
    ``n_in % 64 == 0``, else :func:`affine` from the block layout at ``w_off`` with ``fc0_isa``."""
    if TARGET_VNNI512 and fc0_isa == ISA_VNNI512 and rows_off >= 0 and n_out % 16 == 0 and n_in % 64 == 0:
        affine_rows_zmm(x, x_off, n_in, weights, rows_off, biases, b_off, n_out, z, z_off)
    else:
        affine(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off, fc0_isa)


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

    Returns ``(ft_bytes, z, x, feats, end)``.  The feature transformer's int16 output
    (``layers[0, 0]`` entries) starts at 0; ``ft_bytes`` holds the same values as the bytes
    the first layer reads (:func:`ft_input`); ``z`` is the hidden layers' int32 sums and ``x``
    their uint8 activations (as wide as the widest hidden layer's input block end, ``COL_X_IN``
    + inputs, or output), ``feats`` ``SCRATCH_FEATURES`` int32 feature indices; ``end`` is the
    buffer's size.  Regions start on 32-byte boundaries.  One caller-provided buffer instead of
    allocations inside the kernels (each cost ~40 ns per call).
    """
    width = 1
    for l in range(1, layers.shape[0]):
        width = max(width, layers[l, COL_IN] + layers[l, COL_X_IN])
    for l in range(layers.shape[0]):
        width = max(width, layers[l, COL_OUT])
    width = (width + 15) // 16 * 16
    n0 = (layers[0, COL_IN] + 15) // 16 * 16
    ft_bytes = n0
    z = ft_bytes + n0 // 2 + 16
    x = z + 2 * width
    feats = x + width
    return ft_bytes, z, x, feats, feats + 2 * SCRATCH_FEATURES


@njit(cache=True, inline="always")
def ft_input(scratch, layers):
    """The first layer's input bytes in ``scratch``: uint8[layers[0, 0]] (signed transformed
    features as x + 128, see ``kernels.nnue.activation.ft_transform``)."""
    start = scratch_layout(layers)[0]
    return scratch[start:].view(np.uint8)[:layers[0, COL_IN]]


def scratch_size(layers: np.ndarray) -> int:
    """Entries of the int16 scratch buffer the kernels need for the layer stack ``layers``
    (:func:`scratch_layout` run as Python: nothing to compile for a number Python needs)."""
    return int(getattr(scratch_layout, "py_func", scratch_layout)(layers)[4])


@njit(cache=True)
def propagate_float_tail(z, z_off, n, first, bucket, biases, layers, shift, float_out):
    """The float32 layers ``first..`` of a layer stack, from the raw int32 sums ``z[z_off:z_off + n]`` of
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
        zf[i] = z[z_off + i] * to_float
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
                          skip_den, float_out, isa, fc0_isa, float_tail):
    """Run one layer stack (output bucket) on the transformed features.

    Parameters
    ----------
    scratch : int16[>= scratch_size(layers)], an even number of entries (viewed as int32 too)
        The feature-transformer output (side to move's half first) as the uint8 bytes of
        :func:`ft_input` (int8 outputs offset by 128, ``simd.SIGNED_INPUT_OFFSET``), zero-padded
        to ``layers[0, 0]``; the rest is scratch (see :func:`scratch_layout`).
    bucket : int
        Layer stack to use.
    weights : int8[total]
        All integer dense weights, flat, in the block layout of :func:`affine` per layer and bucket.
    biases : int32[total]
        All integer dense biases, flat, followed by the float32 weights and biases of the
        float layers (their bit patterns; the kernel reads them through a float32 view).
    layers : int64[n_layers, LAYER_TABLE_COLUMNS]
        Per layer (``COL_*``): padded inputs, outputs, activation code, number of outputs
        activated, weight offset and per-bucket stride, bias offset and per-bucket stride (float
        layers: offsets into ``biases`` viewed as float32; their codes are ``>= ACT_FLOAT``),
        activation shift, and the offsets in the uint8 activation buffer where the layer reads
        its input and writes its activation (all 0 unless a layer reads the concatenation of
        all earlier activations), and the offset of the row-major copy of the weights (-1 for
        none; the first layer's is read by :func:`affine_rows_zmm` on the ``vnni512`` path).  The last
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
    isa, fc0_isa : int
        ``simd.ISA_*`` for the hidden layers (whose inputs are at most 127) and for the first
        layer (``simd.first_layer_isa`` of the input bytes' range and the weights).
    float_tail : bool
        Whether ``layers`` may hold float layers (:func:`propagate_float_tail`); ``False`` (a
        compile-time constant of a specialised kernel, ``forward.kernels``) leaves that kernel out.

    Returns
    -------
    int
        The layer stack's output ("positional" in Stockfish's trace), int32 range, in
        internal units times OutputScale.
    """
    n_layers = layers.shape[0]
    ft_bytes, oz, ox, _, _ = scratch_layout(layers)
    # two views of the whole buffer, addressed by offsets (a slice or ``view`` would be one more
    # reference-counted array; ``view`` divides by the item size at run time)
    n16 = scratch.shape[0]
    b8 = carray(simd.data_pointer(scratch, np.uint8), (2 * n16,))  # fc_0's input at 2 * ft_bytes, activations at 2 * ox
    z = carray(simd.data_pointer(scratch, np.int32), (n16 >> 1,))  # the int32 sums at oz // 2 (oz: a multiple of 16)
    zo = oz // 2
    xo = 2 * ox
    skip = np.int64(0)
    out = np.int64(0)
    for l in range(n_layers):
        n_in = layers[l, 0]
        n_out = layers[l, 1]
        w_off = layers[l, 4] + bucket * layers[l, 5]
        b_off = layers[l, 6] + bucket * layers[l, 7]
        code = layers[l, 2]
        if l == 0:
            rows = layers[l, COL_ROWS]
            first_layer(b8, 2 * ft_bytes, n_in, weights, w_off, rows + bucket * layers[l, 5] if rows >= 0 else rows,
                        biases, b_off, n_out, z, zo, fc0_isa)
            if skip_index >= 0:
                skip = np.int64(z[zo + skip_index])
                if skip_sub >= 0:
                    skip -= z[zo + skip_sub]
        elif n_out == 1 and isa != ISA_PORTABLE and n_in % 32 == 0:  # the output layer: one vector dot product
            total = np.int32(biases[b_off])
            for j in range(0, n_in, 32):
                total += simd.dot_u8i8x32(b8, xo + layers[l, 9] + j, weights, w_off + j)
            z[zo] = total
        else:
            affine(b8, xo + layers[l, 9], n_in, weights, w_off, biases, b_off, n_out, z, zo, isa)
        if code == ACT_NONE:
            out = np.int64(z[zo])
            break
        if float_tail and layers[l + 1, 2] >= ACT_FLOAT:  # integer -> float boundary: the rest in float
            out = propagate_float_tail(z, zo, n_out, l + 1, bucket, biases, layers, shift, float_out)
            break
        x_out = xo + layers[l, 10]
        if isa == ISA_PORTABLE:
            written = activate(z, zo, layers[l, 3], code, layers[l, 8], b8, x_out)
        else:
            written = activate_lanes(z, zo, layers[l, 3], code, layers[l, 8], b8, x_out)
        for i in range(x_out + written, x_out + (written + 31) // 32 * 32):
            b8[np.uint64(i)] = 0
    if skip_index < 0:
        result = wrap_int32(out)
    elif skip_mode == SKIP_OUTPUT:
        result = wrap_int32(tdiv((out + skip) * skip_num, skip_den))
    else:
        result = wrap_int32(out + tdiv(wrap_int32(skip * skip_num), skip_den))
    last_use((scratch, weights, biases, layers, b8, z))  # no reference-count pairs per call (see kernels.refcount)
    return result


@njit(cache=True, inline="always")
def psqt_term(psqt_acc, stm, bucket):
    """PSQT contribution: ``tdiv(wrap32(psqt[stm][bucket] - psqt[opp][bucket]), 2)`` (int32[2, P] input).

    The difference wraps as Stockfish's int32 subtraction does (``FeatureTransformer::transform``),
    so the result lies in [-2**30, 2**30].
    """
    if psqt_acc.shape[1] == 0:
        return 0
    return tdiv(wrap_int32(np.int64(psqt_acc[stm, bucket]) - psqt_acc[1 - stm, bucket]), np.int64(2))

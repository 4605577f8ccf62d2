"""Activation kernels: the feature transformer's activations (pairwise multiplication and its
gated-unit family, element-wise clamps) and the hidden layers' ClippedReLU / SqrClippedReLU.

Every feature-transformer activation reads int16 accumulators, clamps them to [0, QA] (or
[-QA, QA] for a branch that is only bounded), multiplies and shifts right by ``shift``
(arithmetic: floor).  The float 1.0 is the integer QA in the accumulator and
``QA**degree / 2**shift`` at the output.  Per activation (a, b = the two halves of a
perspective's accumulator; the shift is the smallest keeping outputs within 127):

===============  ==================================  ===========  ==============  ================  ===============
activation       integer output                      product      QA=127: shift,  QA=255: shift,    product fits
                                                     range        output range    output range
===============  ==================================  ===========  ==============  ================  ===============
crelu            clamp(a,0,QA) >> s                  0..QA        0: 0..127       1: 0..127         int16
screlu           clamp(a,0,QA)**2 >> s               0..QA**2     7: 0..126       9: 0..127         int32 (<= 2**30)
pairwise         clamp(a,0,QA)*clamp(b,0,QA) >> s    0..QA**2     7: 0..126       9: 0..127         int32 (<= 2**30)
pairwise_screlu  clamp(a,0,QA)**2*clamp(b,0,QA)**2   0..QA**4     21: 0..124      25: 0..126        int64 (<= 2**60)
glu              clamp(a,0,QA)*clamp(b,-QA,QA) >> s  +-QA**2      7: -127..126    9: -128..127      int32 (<= 2**30)
bilinear         clamp(a,-QA,QA)*clamp(b,-QA,QA)>>s  +-QA**2      7: -127..126    9: -128..127      int32 (<= 2**30)
hswish_glu       x*(x+QA)*clamp(b,-QA,QA) >> (s+1),  +-2*QA**3    14: -126..125   17: -127..126     int64 (<= 2**47)
                 x = clamp(a,-QA,QA)
lut_glu          T[clamp(a,-QA,QA)+QA]*clamp(b,...)  +-QA**2      7: -127..126    9: -128..127      int32 (<= 2**30)
                 >> s, T int16[2*QA+1], |T| <= QA
===============  ==================================  ===========  ==============  ================  ===============

Why nothing overflows: QA <= 32767 (int16), so a degree-2 product is at most 32767**2 < 2**30
and is formed in int32 (Numba widens to int64 anyway); the degree-3 product of ``hswish_glu``
(|x*(x+QA)| <= 2*QA**2, times |b| <= QA: at most 2*32767**3 < 2**47) and the degree-4 product
are formed in int64 explicitly.  ``lut_glu``'s table entries are checked to lie in [-QA, QA]
when the :class:`~nnue_infer.network.Network` is built, so its product is bounded like
``bilinear``'s.  The output magnitude ``QA**degree >> shift`` is checked when the
:class:`~nnue_infer.network.Architecture` is built to fit the first dense layer's input type
(uint8 for the non-negative activations, int8 for ``glu``/``bilinear``; the floor of a negative
product can reach one below ``-(QA**degree >> shift)``, e.g. -128, still int8), and is stored
in an int16 buffer shared by all activations (one compiled signature).  The first dense layer
reads bytes: int8 outputs x as x + 128 (:func:`ft_transform`), with its biases lowered to
match (``Network.compute_layout``), so every SIMD path multiplies unsigned bytes; its int32
sums wrap as Stockfish's do.

Source: Stockfish 15.1, ``nnue/nnue_feature_transformer.h`` (``transform``),
``nnue/layers/clipped_relu.h``, ``nnue/layers/sqr_clipped_relu.h``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import simd
from ..refcount import last_use
from ..simd import ISA_PORTABLE  # a bare global: branches on it are pruned in specialised kernels

#: Hidden-layer activation codes used in the layer table (see ``dense.propagate_layer_stack``).
ACT_NONE = 0  #: output layer: raw int32
ACT_CRELU = 1  #: ClippedReLU: clamp(z >> shift, 0, 127)
ACT_SQR_CRELU = 2  #: SqrClippedReLU: min(127, z*z >> (2*shift + 7))
ACT_SQR_CRELU_AND_CRELU = 3  #: [SqrClippedReLU(z), ClippedReLU(z)] concatenated (Stockfish 15.1 fc_0)
#: Activations computed in floating point (float hidden layers, and the integer layer that feeds
#: one): the integer code + ``ACT_FLOAT``, plus ReLU and squared ClippedReLU, which have no
#: bounded integer form.  Float definitions: ``nnue_infer.float_network.hidden_activation_float``.
ACT_FLOAT = 16
ACT_F_NONE = ACT_FLOAT + ACT_NONE  #: float output layer
ACT_F_CRELU = ACT_FLOAT + ACT_CRELU  #: clamp(z, 0, 1)
ACT_F_SQR_CRELU = ACT_FLOAT + ACT_SQR_CRELU  #: min(z*z * 127/128, 1)
ACT_F_SQR_CRELU_AND_CRELU = ACT_FLOAT + ACT_SQR_CRELU_AND_CRELU  #: both, concatenated
ACT_F_RELU = ACT_FLOAT + 4  #: max(z, 0)
ACT_F_SCRELU = ACT_FLOAT + 5  #: clamp(z, 0, 1)**2


#: Feature-transformer activation codes (see ``network.FT_ACTIVATIONS`` for the float definitions).
FT_PAIRWISE = 0  #: clamp(a, 0, QA) * clamp(b, 0, QA) >> shift  (Stockfish 15.1; code 0 by design)
FT_CRELU = 1  #: clamp(a, 0, QA) >> shift
FT_SCRELU = 2  #: clamp(a, 0, QA)**2 >> shift
FT_PAIRWISE_SCRELU = 3  #: clamp(a, 0, QA)**2 * clamp(b, 0, QA)**2 >> shift  (int64 product)
FT_GLU = 4  #: clamp(a, 0, QA) * clamp(b, -QA, QA) >> shift  (signed)
FT_BILINEAR = 5  #: clamp(a, -QA, QA) * clamp(b, -QA, QA) >> shift  (signed)
FT_HSWISH_GLU = 6  #: x * (x + QA) * clamp(b, -QA, QA) >> (shift + 1), x = clamp(a, -QA, QA)  (signed, int64)
FT_LUT_GLU = 7  #: T[clamp(a, -QA, QA) + QA] * clamp(b, -QA, QA) >> shift, T the network's table  (signed)


@njit(cache=True, forceinline=True)
def ft_activate(acc, stm, code, clamp_max, shift, table, out):
    """Feature-transformer activation ``code`` (``FT_*``) of both accumulators into ``out``.

    Parameters
    ----------
    acc : int16[2, L1]
        Accumulators, row 0 White's perspective, row 1 Black's.
    stm : int
        Side to move, 0 White, 1 Black; its half of ``out`` comes first.
    code : int
        ``FT_*``.
    clamp_max : int
        QA (127 for Stockfish 15.1).
    shift : int
        Right shift of the product, arithmetic (floors negative products).
    table : int32[>= 2 * QA + 1]
        ``lut_glu``'s gate table T at its start (the network's flat biases array, see
        ``Network.compute_layout``); the other activations ignore it.
    out : int16[L1] (the paired activations) or int16[2 * L1] (``crelu``, ``screlu``)
        Output: uint8-range values for the unsigned activations, int8-range for the signed ones.

    With a = A[j], b = A[j + L1/2] of perspective A = acc[stm ^ h], the paired activations write
    ``out[h * L1/2 + j]``:

    * ``pairwise``, ``glu``, ``bilinear``: ``(clamp(a, lo_a, QA) * clamp(b, lo_b, QA)) >> shift``
      with (lo_a, lo_b) = (0, 0), (0, -QA), (-QA, -QA); |product| <= QA**2 <= 2**30.
    * ``pairwise_screlu``: ``(clamp(a, 0, QA)**2 * clamp(b, 0, QA)**2) >> shift``, formed in int64
      (at most QA**4 <= 2**60).
    * ``hswish_glu``: ``(x * (x + QA) * clamp(b, -QA, QA)) >> (shift + 1)``, x = clamp(a, -QA, QA).
      The gate ``x * (x + QA) / 2`` is QA**2 times hard-swish(3u)/3 at u = x / QA (exact in
      integers: (x + QA) is hard-swish's ReLU6(3u + 3) / 6 scaled by 2 QA on [-1, 1]); it lies in
      [-QA**2/8, QA**2].  The product (|x * (x + QA)| <= 2 QA**2, times |b| <= QA, at most
      2 * 32767**3 < 2**47) is formed in int64; the one extra shift halves it, so the output is
      at most ``QA**3 >> shift`` in magnitude (floor: one more below zero), 1.0 = QA**3 / 2**shift.
    * ``lut_glu``: ``(T[clamp(a, -QA, QA) + QA] * clamp(b, -QA, QA)) >> shift``: any bounded gate
      function for one gather (``T[i]`` = gate((i - QA) / QA) * QA rounded); ``Network`` checks
      |T| <= QA, so |product| <= QA**2 < 2**30.

    ``crelu`` / ``screlu`` write ``out[h * L1 + j] = clamp(A[j], 0, QA)**(1 or 2) >> shift``
    (the square at most QA**2 <= 2**30).

    Products are formed in int64 (``np.int64`` of each clamped operand: what Numba infers anyway,
    and what keeps plain Python under ``NUMBA_DISABLE_JIT`` from wrapping NumPy int16 scalars).

    One flat body (no inlined helpers) ending in :func:`~nnue_infer.kernels.refcount.last_use`:
    :func:`ft_transform` inlines it in its non-SIMD branch, and helpers inlined there kept
    reference-count pairs alive on ft_transform's SIMD path.
    """
    width = acc.shape[1]
    half = width // 2
    if code == FT_CRELU or code == FT_SCRELU:
        for h in range(2):
            r = stm ^ h
            for j in range(width):
                a = np.int64(min(max(acc[r, j], 0), clamp_max))
                if code == FT_SCRELU:
                    a = a * a
                out[h * width + j] = a >> shift
    elif code == FT_PAIRWISE_SCRELU:
        for h in range(2):
            r = stm ^ h
            for j in range(half):
                a = np.int64(min(max(acc[r, j], 0), clamp_max))
                b = np.int64(min(max(acc[r, j + half], 0), clamp_max))
                out[h * half + j] = (a * a * b * b) >> shift
    elif code == FT_HSWISH_GLU:
        for h in range(2):
            r = stm ^ h
            for j in range(half):
                x = np.int64(min(max(acc[r, j], -clamp_max), clamp_max))
                b = np.int64(min(max(acc[r, j + half], -clamp_max), clamp_max))
                out[h * half + j] = (x * (x + clamp_max) * b) >> (shift + 1)
    elif code == FT_LUT_GLU:
        for h in range(2):
            r = stm ^ h
            for j in range(half):
                g = np.int64(table[min(max(acc[r, j], -clamp_max), clamp_max) + clamp_max])
                b = np.int64(min(max(acc[r, j + half], -clamp_max), clamp_max))
                out[h * half + j] = (g * b) >> shift
    else:  # pairwise, glu, bilinear
        lo_a = -clamp_max if code == FT_BILINEAR else 0
        lo_b = 0 if code == FT_PAIRWISE else -clamp_max
        for h in range(2):
            r = stm ^ h
            for j in range(half):
                a = np.int64(min(max(acc[r, j], lo_a), clamp_max))
                b = np.int64(min(max(acc[r, j + half], lo_b), clamp_max))
                out[h * half + j] = (a * b) >> shift
    last_use((acc, table, out))


@njit(cache=True, inline="always")
def signed_output(code):
    """Whether feature-transformer activation ``code`` has negative outputs (int8, not uint8)."""
    return code == FT_GLU or code == FT_BILINEAR or code == FT_HSWISH_GLU or code == FT_LUT_GLU


@njit(cache=True, forceinline=True)
def ft_transform(acc, stm, code, clamp_max, shift, isa, table, scratch, out):
    """Feature-transformer activation ``code`` of both accumulators into the bytes ``out``
    (uint8[n]: the first layer's input, zero beyond the activation's width).  Signed outputs
    (``glu``, ``bilinear``, ``hswish_glu``, ``lut_glu``) are stored as x + 128
    (``simd.SIGNED_INPUT_OFFSET``), so the first layer always reads unsigned bytes: its
    biases are lowered by 128 * (its weights' column sums) to match (``Network.compute_layout``).

    ``acc`` int16[2, L1]; ``scratch`` int16[>= 2 * L1]; ``table`` as in :func:`ft_activate`.
    The SIMD paths (``isa`` not ``ISA_PORTABLE``, ``L1 % 64 == 0``) write bytes directly in
    16-bit lanes, 32 outputs per step: ``pairwise`` with ``QA <= 255`` (products below 2**16;
    ``simd.pairwise_u8x32``; run-time QA and shift cost nothing there: (127, 7) and (255, 9) as
    compile-time constants measured the same, 44 ns for Stockfish 15.1's 2 x 1024 lanes, AVX2),
    ``glu`` / ``bilinear`` with ``QA <= 181`` and ``shift <= 15`` (|product| < 2**15;
    ``simd.gated_u8x32``).  The others go through :func:`ft_activate`'s int16 output in
    ``scratch`` and are narrowed.  The Architecture checks that every output fits its byte.

    One flat body ending in :func:`~nnue_infer.kernels.refcount.last_use` (inlined helpers in two
    branches kept 4-5 reference-count pairs per call: a loop over this kernel, Stockfish 15.1's
    pairwise, 61 ns with them, 46 ns without; the C floor 46 ns).
    """
    width = acc.shape[1]
    half = width // 2
    if isa != ISA_PORTABLE and code == FT_PAIRWISE and clamp_max <= 255 and width % 64 == 0:
        for h in range(2):
            row = (stm ^ h) * width
            for j in range(0, half, 32):
                simd.pairwise_u8x32(acc, row + j, row + half + j, clamp_max, shift, out, h * half + j)
        written = width
    elif (isa != ISA_PORTABLE and (code == FT_GLU or code == FT_BILINEAR) and clamp_max <= 181 and shift <= 15
          and width % 64 == 0):
        lo_a = 0 if code == FT_GLU else -clamp_max
        for h in range(2):
            row = (stm ^ h) * width
            for j in range(0, half, 32):
                simd.gated_u8x32(acc, row + j, row + half + j, lo_a, -clamp_max, clamp_max, shift, out, h * half + j)
        written = width
    else:
        ft_activate(acc, stm, code, clamp_max, shift, table, scratch)
        written = 2 * width if code == FT_CRELU or code == FT_SCRELU else width
        offset = simd.SIGNED_INPUT_OFFSET if signed_output(code) else 0
        for i in range(written):
            out[i] = (scratch[i] + offset) & 0xFF
    for i in range(written, out.shape[0]):
        out[i] = 0
    last_use((acc, table, scratch, out))


@njit(cache=True, inline="always")
def clipped_relu(z, z_off, n, shift, out, offset):
    """ClippedReLU: ``out[offset + i] = clamp(z[z_off + i] >> shift, 0, 127)`` for i < n (z int32, out uint8)."""
    for i in range(n):
        out[np.uint64(offset + i)] = min(max(z[np.uint64(z_off + i)] >> shift, 0), 127)


@njit(cache=True, inline="always")
def sqr_clipped_relu(z, z_off, n, shift, out, offset):
    """SqrClippedReLU: ``out[offset + i] = min(127, (z[z_off + i]**2 in 64 bits) >> (2*shift + 7))``.

    The square is taken in int64: it overflows int32 once ``|z| > 46340``.
    """
    for i in range(n):
        v = np.int64(z[np.uint64(z_off + i)])
        out[np.uint64(offset + i)] = min((v * v) >> (2 * shift + 7), 127)


@njit(cache=True, forceinline=True)
def activate_lanes(z, z_off, n_act, code, shift, out, out_off):
    """:func:`activate` 8 lanes at a time (``simd.clipped_relu_u8x8``, ``simd.sqr_clipped_relu_u8x8``).

    Reads ``z`` up to ``z_off + ceil8(n_act)`` and writes up to 7 bytes past each activation's
    end (the concatenated form's second half overwrites the first's); the caller's buffers
    have that room and it zeroes the bytes after the last output (``dense.propagate_layer_stack``).
    """
    if code != ACT_CRELU:
        for i in range(0, n_act, 8):
            simd.sqr_clipped_relu_u8x8(z, z_off + i, shift, out, out_off + i)
    if code != ACT_SQR_CRELU:
        start = out_off if code == ACT_CRELU else out_off + n_act
        for i in range(0, n_act, 8):
            simd.clipped_relu_u8x8(z, z_off + i, shift, out, start + i)
    last_use((z, out))
    return n_act if code != ACT_SQR_CRELU_AND_CRELU else 2 * n_act


@njit(cache=True, forceinline=True)
def activate(z, z_off, n_act, code, shift, out, out_off):
    """Apply hidden-layer activation ``code`` to ``z[z_off:z_off + n_act]`` (int32) into the uint8
    buffer ``out`` from ``out_off`` on (offsets >= 0, used as uint64 indices: no wraparound code).

    Returns the number of outputs written (``2 * n_act`` for the concatenated form).
    """
    if code == ACT_CRELU:
        clipped_relu(z, z_off, n_act, shift, out, out_off)
        return n_act
    if code == ACT_SQR_CRELU:
        sqr_clipped_relu(z, z_off, n_act, shift, out, out_off)
        return n_act
    sqr_clipped_relu(z, z_off, n_act, shift, out, out_off)
    clipped_relu(z, z_off, n_act, shift, out, out_off + n_act)
    return 2 * n_act


@njit(cache=True)
def activate_float(z, n_act, code, out):
    """Float hidden activation ``code`` (``ACT_F_*``) of ``z[:n_act]`` (float64) into ``out`` (float64).

    Returns the number of outputs written (``2 * n_act`` for the concatenated form).
    """
    gain = 127.0 / 128.0
    if code == ACT_F_SQR_CRELU_AND_CRELU:
        for i in range(n_act):
            v = z[i]
            out[i] = min(v * v * gain, 1.0)
            out[n_act + i] = min(max(v, 0.0), 1.0)
        return 2 * n_act
    for i in range(n_act):
        v = z[i]
        if code == ACT_F_CRELU:
            out[i] = min(max(v, 0.0), 1.0)
        elif code == ACT_F_SQR_CRELU:
            out[i] = min(v * v * gain, 1.0)
        elif code == ACT_F_RELU:
            out[i] = max(v, 0.0)
        else:  # ACT_F_SCRELU
            c = min(max(v, 0.0), 1.0)
            out[i] = c * c
    return n_act

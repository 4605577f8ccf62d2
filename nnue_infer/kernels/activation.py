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

from . import simd
from .refcount import last_use

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


@njit(cache=True, inline="always")
def pairwise_clamp_mul(acc, stm, lo_a, lo_b, clamp_max, shift, out):
    """Pairwise multiplication of both perspectives' accumulators.

    For half h = 0 (side to move ``stm``) and h = 1 (the other side) and j < L/2:
    ``out[h*L/2 + j] = (clamp(A[j], lo_a, QA) * clamp(A[j + L/2], lo_b, QA)) >> shift``
    (arithmetic shift: floors negative products).

    Parameters
    ----------
    acc : int16[2, L]
        Accumulators, row 0 White's perspective, row 1 Black's.
    stm : int
        Side to move, 0 White, 1 Black; its half comes first.
    lo_a, lo_b : int
        Lower clamps of the first and second half: 0 (activated) or -QA (only bounded).
        ``pairwise`` uses (0, 0), ``glu`` (0, -QA), ``bilinear`` (-QA, -QA).
    clamp_max : int
        QA (127 for Stockfish 15.1); |product| <= QA**2 <= 2**30 fits int32.
    shift : int
        Right shift of the product (7 for Stockfish 15.1), so outputs are 0..(QA*QA >> shift).
    out : int16[L]
        Output, values in uint8 range (``pairwise``) or int8 range (``glu``, ``bilinear``).
    """
    half = acc.shape[1] // 2
    for h in range(2):
        row = acc[stm ^ h]
        base = h * half
        for j in range(half):
            a = min(max(row[j], lo_a), clamp_max)
            b = min(max(row[j + half], lo_b), clamp_max)
            out[base + j] = (a * b) >> shift


@njit(cache=True, inline="always")
def pairwise_sqr_clamp_mul(acc, stm, clamp_max, shift, out):
    """``pairwise_screlu``: ``out[h*L/2 + j] = (clamp(a, 0, QA)**2 * clamp(b, 0, QA)**2) >> shift``.

    Same layout as :func:`pairwise_clamp_mul`.  The product (at most QA**4 <= 2**60) is
    formed in int64, so it cannot overflow; the shift brings it into uint8 range.
    """
    half = acc.shape[1] // 2
    for h in range(2):
        row = acc[stm ^ h]
        base = h * half
        for j in range(half):
            a = np.int64(min(max(row[j], 0), clamp_max))
            b = np.int64(min(max(row[j + half], 0), clamp_max))
            out[base + j] = (a * a * b * b) >> shift


@njit(cache=True, inline="always")
def clamp_ft(acc, stm, clamp_max, square, shift, out):
    """Element-wise ``crelu`` (``square`` false) or ``screlu`` (``square`` true).

    ``out[h*L + j] = clamp(A[j], 0, QA)**(1 or 2) >> shift`` for both perspectives (side to
    move first): ``acc`` int16[2, L], ``out`` int16[2L].  The square is at most
    QA**2 <= 2**30 (int32 range).
    """
    width = acc.shape[1]
    for h in range(2):
        row = acc[stm ^ h]
        base = h * width
        for j in range(width):
            a = min(max(row[j], 0), clamp_max)
            if square:
                a = a * a
            out[base + j] = a >> shift


@njit(cache=True, inline="always")
def hswish_gate_mul(acc, stm, clamp_max, shift, out):
    """``hswish_glu``: ``out[h*L/2 + j] = (x * (x + QA) * clamp(b, -QA, QA)) >> (shift + 1)``, x = clamp(a, -QA, QA).

    The gate ``x * (x + QA) / 2`` is QA**2 times hard-swish(3u)/3 at u = x / QA (exact in
    integers: (x + QA) is hard-swish's ReLU6(3u + 3) / 6 scaled by 2 QA on [-1, 1]); it lies in
    [-QA**2/8, QA**2].  The product (|x * (x + QA)| <= 2 QA**2, times |b| <= QA, at most
    2 * 32767**3 < 2**47) is formed in int64; the one extra shift halves it, so the output is
    at most ``QA**3 >> shift`` in magnitude (floor: one more below zero) and 1.0 = QA**3 / 2**shift.
    Layout as :func:`pairwise_clamp_mul`.
    """
    half = acc.shape[1] // 2
    for h in range(2):
        row = acc[stm ^ h]
        base = h * half
        for j in range(half):
            x = np.int64(min(max(row[j], -clamp_max), clamp_max))
            b = np.int64(min(max(row[j + half], -clamp_max), clamp_max))
            out[base + j] = (x * (x + clamp_max) * b) >> (shift + 1)


@njit(cache=True, inline="always")
def lut_gate_mul(acc, stm, clamp_max, shift, table, out):
    """``lut_glu``: ``out[h*L/2 + j] = (T[clamp(a, -QA, QA) + QA] * clamp(b, -QA, QA)) >> shift``.

    ``table`` holds the gate's quantised values ``T`` (int32 entries; at least ``2 * QA + 1``,
    ``T[i]`` = gate((i - QA) / QA) * QA rounded, read from index 0), any bounded function for one
    gather.  ``Network`` checks |T| <= QA, so |product| <= QA**2 < 2**30 and the output is within
    ``QA**2 >> shift`` (int8 range with the quantiser's shift).  Layout as :func:`pairwise_clamp_mul`.
    """
    half = acc.shape[1] // 2
    for h in range(2):
        row = acc[stm ^ h]
        base = h * half
        for j in range(half):
            g = table[min(max(row[j], -clamp_max), clamp_max) + clamp_max]
            b = min(max(row[j + half], -clamp_max), clamp_max)
            out[base + j] = (g * b) >> shift


@njit(cache=True, inline="always")
def ft_activate(acc, stm, code, clamp_max, shift, table, out):
    """Feature-transformer activation ``code`` (``FT_*``) of both accumulators into ``out``.

    ``acc`` int16[2, L1]; ``out`` int16[L1] for the paired activations, int16[2 * L1] for
    ``crelu``/``screlu``; side to move's half first.  ``table`` int32[>= 2 * QA + 1]: the gate
    table of ``lut_glu`` at its start (the network's flat biases array, see
    ``Network.compute_layout``); the other activations ignore it.
    """
    if code == FT_LUT_GLU:
        lut_gate_mul(acc, stm, clamp_max, shift, table, out)
    elif code == FT_HSWISH_GLU:
        hswish_gate_mul(acc, stm, clamp_max, shift, out)
    elif code == FT_PAIRWISE:
        pairwise_clamp_mul(acc, stm, np.int64(0), np.int64(0), clamp_max, shift, out)
    elif code == FT_GLU:
        pairwise_clamp_mul(acc, stm, np.int64(0), -clamp_max, clamp_max, shift, out)
    elif code == FT_BILINEAR:
        pairwise_clamp_mul(acc, stm, -clamp_max, -clamp_max, clamp_max, shift, out)
    elif code == FT_PAIRWISE_SCRELU:
        pairwise_sqr_clamp_mul(acc, stm, clamp_max, shift, out)
    else:
        clamp_ft(acc, stm, clamp_max, code == FT_SCRELU, shift, out)


@njit(cache=True, inline="always")
def pairwise_bytes(acc, stm, clamp_max, shift, out):
    """``pairwise`` (:func:`pairwise_clamp_mul` with lower clamps 0) straight to bytes, in
    16-bit SIMD lanes, 32 outputs per step (``simd.pairwise_u8x32``): ``acc`` int16[2, L1],
    ``out`` uint8[>= L1].

    Needs ``clamp_max <= 255`` (products below 2**16), ``L1 % 64 == 0`` and results within
    255 (checked by the Architecture); the caller checks the first two.  Run-time ``clamp_max``
    and ``shift`` cost nothing here: with (127, 7) and (255, 9) as compile-time constants (a
    value branch) the loop measured the same (Stockfish 15.1's 2 x 1024 lanes: 43.8, 43.7 and
    44.3 ns for a run-time (127, 8); AVX2, thread CPU), so there is one loop.
    """
    width = acc.shape[1]
    half = width // 2
    for h in range(2):
        row = (stm ^ h) * width
        for j in range(0, half, 32):
            simd.pairwise_u8x32(acc, row + j, row + half + j, clamp_max, shift, out, h * half + j)


@njit(cache=True, inline="always")
def signed_output(code):
    """Whether feature-transformer activation ``code`` has negative outputs (int8, not uint8)."""
    return code == FT_GLU or code == FT_BILINEAR or code == FT_HSWISH_GLU or code == FT_LUT_GLU


@njit(cache=True, inline="always")
def gated_bytes(acc, stm, lo_a, clamp_max, shift, out):
    """``glu`` (``lo_a`` 0) or ``bilinear`` (``lo_a`` -QA) as :func:`pairwise_clamp_mul` with
    ``lo_b`` = -QA, straight to bytes offset by 128 in 16-bit SIMD lanes: ``out`` uint8[L1]
    holds x + 128 (``simd.SIGNED_INPUT_OFFSET``).

    Needs ``clamp_max <= 181`` (|product| < 2**15), ``shift <= 15`` and ``L1 % 64 == 0``
    (the caller checks them); the Architecture checks that outputs fit int8.
    """
    width = acc.shape[1]
    half = width // 2
    for h in range(2):
        row = (stm ^ h) * width  # flat index into the C-contiguous acc (no reshape: one array less)
        for j in range(0, half, 32):
            simd.gated_u8x32(acc, row + j, row + half + j, lo_a, -clamp_max, clamp_max, shift, out, h * half + j)


@njit(cache=True, inline="always")
def ft_transform(acc, stm, code, clamp_max, shift, isa, table, scratch, out):
    """Feature-transformer activation ``code`` of both accumulators into the bytes ``out``
    (uint8[n]: the first layer's input, zero beyond the activation's width).  Signed outputs
    (``glu``, ``bilinear``, ``hswish_glu``, ``lut_glu``) are stored as x + 128
    (``simd.SIGNED_INPUT_OFFSET``), so the first layer always reads unsigned bytes: its
    biases are lowered by 128 * (its weights' column sums) to match (``Network.compute_layout``).

    The SIMD paths (``isa`` not ``ISA_PORTABLE``) write ``pairwise``, ``glu`` and ``bilinear``
    bytes directly in 16-bit lanes; the others go through :func:`ft_activate`'s int16 output
    in ``scratch`` and are narrowed (``table``: ``lut_glu``'s gate table, as there).
    """
    width = acc.shape[1]
    if isa != simd.ISA_PORTABLE and code == FT_PAIRWISE and clamp_max <= 255 and width % 64 == 0:
        pairwise_bytes(acc, stm, clamp_max, shift, out)
        written = width
    elif (isa != simd.ISA_PORTABLE and (code == FT_GLU or code == FT_BILINEAR) and clamp_max <= 181 and shift <= 15
          and width % 64 == 0):
        gated_bytes(acc, stm, 0 if code == FT_GLU else -clamp_max, clamp_max, shift, out)
        written = width
    else:
        ft_activate(acc, stm, code, clamp_max, shift, table, scratch)
        written = 2 * width if code == FT_CRELU or code == FT_SCRELU else width
        offset = simd.SIGNED_INPUT_OFFSET if signed_output(code) else 0
        for i in range(written):
            out[i] = (scratch[i] + offset) & 0xFF
    for i in range(written, out.shape[0]):
        out[i] = 0


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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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

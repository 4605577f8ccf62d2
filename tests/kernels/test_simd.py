"""The SIMD intrinsics of ``nnue_infer.kernels.simd`` against NumPy, bit for bit.

Each dot-product intrinsic is checked whether or not this CPU has its instruction: where it
lacks it, the intrinsic's generic-IR emulation runs (the same arithmetic, including
``vpmaddubsw``'s int16 saturation), so the definitions are checked on every machine.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from nnue_infer.kernels import simd as S


@njit(cache=True)
def dense_vnni512(x, w, n_in, n_out, z):
    for g in range(0, n_out, 16):
        a = S.zero_i32x16()
        for blk in range(n_in // 4):
            a = S.dot4_vnni512(a, x, 4 * blk, w, (blk * n_out + g) * 4)
        S.store_i32x16(z, g, a)


@njit(cache=True)
def dense_ymm(x, w, n_in, n_out, z, vnni):
    for g in range(0, n_out, 8):
        a = S.zero_i32x8()
        for blk in range(n_in // 4):
            if vnni:
                a = S.dot4_avxvnni(a, x, 4 * blk, w, (blk * n_out + g) * 4)
            else:
                a = S.dot4_avx2(a, x, 4 * blk, w, (blk * n_out + g) * 4)
        S.store_i32x8(z, g, a)


@njit(cache=True)
def dense_wide(x, w, n_in, n_out, z):
    for g in range(0, n_out, 8):
        a = S.zero_i32x8()
        for blk in range(n_in // 4):
            a = S.dot4_avx2_wide(a, x, 4 * blk, w, (blk * n_out + g) * 4)
        S.store_i32x8(z, g, a)


@njit(cache=True)
def gated(acc, out, lo_a, clamp_max, shift):
    half = acc.shape[0] // 2
    for j in range(0, half, 32):
        S.gated_u8x32(acc, j, j + half, lo_a, -clamp_max, clamp_max, shift, out, j)


@njit(cache=True)
def pairwise(acc, out, clamp_max, shift):
    half = acc.shape[0] // 2
    for j in range(0, half, 32):
        S.pairwise_u8x32(acc, j, j + half, clamp_max, shift, out, j)


@njit(cache=True)
def dense_rows_vnni512(x, w, n_in, n_out, z):
    """16 outputs at a time from row-major weights: dot64_vnni512 per 64-byte chunk, hsum16_i32x16."""
    for g in range(0, n_out, 16):
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = a10 = a11 = a12 = a13 = a14 = a15 = S.zero_i32x16()
        for j in range(0, n_in, 64):
            r = g * n_in + j
            a0 = S.dot64_vnni512(a0, x, j, w, r)
            a1 = S.dot64_vnni512(a1, x, j, w, r + n_in)
            a2 = S.dot64_vnni512(a2, x, j, w, r + 2 * n_in)
            a3 = S.dot64_vnni512(a3, x, j, w, r + 3 * n_in)
            a4 = S.dot64_vnni512(a4, x, j, w, r + 4 * n_in)
            a5 = S.dot64_vnni512(a5, x, j, w, r + 5 * n_in)
            a6 = S.dot64_vnni512(a6, x, j, w, r + 6 * n_in)
            a7 = S.dot64_vnni512(a7, x, j, w, r + 7 * n_in)
            a8 = S.dot64_vnni512(a8, x, j, w, r + 8 * n_in)
            a9 = S.dot64_vnni512(a9, x, j, w, r + 9 * n_in)
            a10 = S.dot64_vnni512(a10, x, j, w, r + 10 * n_in)
            a11 = S.dot64_vnni512(a11, x, j, w, r + 11 * n_in)
            a12 = S.dot64_vnni512(a12, x, j, w, r + 12 * n_in)
            a13 = S.dot64_vnni512(a13, x, j, w, r + 13 * n_in)
            a14 = S.dot64_vnni512(a14, x, j, w, r + 14 * n_in)
            a15 = S.dot64_vnni512(a15, x, j, w, r + 15 * n_in)
        S.store_i32x16(z, g, S.hsum16_i32x16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15))


@njit(cache=True)
def dots32(x, w, out):
    for i in range(out.shape[0]):
        out[i] = S.dot_u8i8x32(x, 32 * i, w, 32 * i)


@njit(cache=True)
def add_sub_rows(a, b, out):
    for j in range(0, a.shape[0], 64):
        S.store_i16x64(out, j, S.sub_i16x64(S.add_i16x64(S.load_i16x64(a, j), S.load_i16x64(b, j)),
                                            S.load_i16x64(b, j + 128)))


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(11)


def blocked(W):
    n_out, n_in = W.shape
    return np.ascontiguousarray(W.reshape(n_out, n_in // 4, 4).transpose(1, 0, 2)).reshape(-1)


@pytest.mark.parametrize("top", [127, 255])
def test_dot4_intrinsics_equal_numpy(rng, top):
    n_in, n_out = 64, 32
    for _ in range(5):
        x = rng.integers(0, top + 1, n_in).astype(np.uint8)
        W = rng.integers(-128, 128, (n_out, n_in)).astype(np.int8)
        want = W.astype(np.int64) @ x.astype(np.int64)
        z = np.zeros(n_out, np.int32)
        dense_vnni512(x, blocked(W), n_in, n_out, z)
        np.testing.assert_array_equal(z, want)
        dense_ymm(x, blocked(W), n_in, n_out, z, True)
        np.testing.assert_array_equal(z, want)
        dense_wide(x, blocked(W), n_in, n_out, z)
        np.testing.assert_array_equal(z, want)
        if top == 127:  # vpmaddubsw is exact there
            dense_ymm(x, blocked(W), n_in, n_out, z, False)
            np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize("n_in, n_out", [(64, 16), (1024, 16), (128, 32)])
def test_row_major_dot64_and_lane_sums_equal_numpy(rng, n_in, n_out):
    """dot64_vnni512 (lane by lane, VNNI emulated where the CPU lacks it) and hsum16_i32x16 (each
    vector's lane sum into its own output lane) give W x for bytes up to 255 and int8 weights at
    their extremes, the int32 sums wrapping."""
    for extreme in (False, True):
        x = rng.integers(0, 256, n_in).astype(np.uint8)
        if extreme:
            x[:] = 255
            W = rng.choice(np.array([-128, 127], np.int8), size=(n_out, n_in))
        else:
            W = rng.integers(-128, 128, (n_out, n_in)).astype(np.int8)
        z = np.zeros(n_out, np.int32)
        dense_rows_vnni512(x, np.ascontiguousarray(W).reshape(-1), n_in, n_out, z)
        want = (W.astype(np.int64) @ x.astype(np.int64) + 2**31) % 2**32 - 2**31
        np.testing.assert_array_equal(z, want)


def test_dot_u8i8x32_equals_numpy(rng):
    x = rng.integers(0, 256, 32 * 6).astype(np.uint8)
    w = rng.integers(-128, 128, 32 * 6).astype(np.int8)
    x[:32], w[:32] = 255, -128  # the extremes
    out = np.empty(6, np.int32)
    dots32(x, w, out)
    np.testing.assert_array_equal(out, (x.astype(np.int64) * w).reshape(6, 32).sum(axis=1))


def test_signed_inputs_offset_through_every_dot4(rng):
    """int8 inputs x (with -128 and 127) as the bytes x + 128, extreme weights, and biases lowered by
    128 * column sums: every dot product (VNNI emulated where the CPU lacks it, AVX2's wide form;
    plain vpmaddubsw only with weights whose pairs cannot saturate) gives wrap32(b + W x)."""
    n_in, n_out = 128, 32
    for extreme in (True, False):
        x = rng.integers(-128, 128, n_in).astype(np.int8)
        x[:8] = (-128, -128, 127, 127, -128, 127, 127, -128)
        pool = np.array([-128, 127, -127, 1, 0], np.int8) if extreme else np.arange(-64, 65, dtype=np.int8)
        W = rng.choice(pool, size=(n_out, n_in))
        b = rng.integers(-(2**31), 2**31, n_out, dtype=np.int64)
        b[:2] = (2**31 - 1, -(2**31))
        wrap = lambda v: (v + 2**31) % 2**32 - 2**31  # noqa: E731
        want = wrap(b + W.astype(np.int64) @ x.astype(np.int64))
        u = (x.astype(np.int16) + 128).astype(np.uint8)
        b_offset = wrap(b - 128 * W.astype(np.int64).sum(axis=1))
        z = np.zeros(n_out, np.int32)
        for dot in ("vnni512", "avxvnni", "wide") + (() if extreme else ("avx2",)):
            {"vnni512": lambda: dense_vnni512(u, blocked(W), n_in, n_out, z),
             "avxvnni": lambda: dense_ymm(u, blocked(W), n_in, n_out, z, True),
             "avx2": lambda: dense_ymm(u, blocked(W), n_in, n_out, z, False),
             "wide": lambda: dense_wide(u, blocked(W), n_in, n_out, z)}[dot]()
            np.testing.assert_array_equal(wrap(z.astype(np.int64) + b_offset), want, err_msg=dot)


def test_maddubs_saturates_like_the_instruction():
    """Two products of 255 * 127 sum to 64770: vpmaddubsw saturates to 32767 (then vpmaddwd adds pairs)."""
    x = np.full(32, 255, np.uint8)
    W = np.full((8, 32), 127, np.int8)
    z = np.zeros(8, np.int32)
    dense_ymm(x, blocked(W), 32, 8, z, False)
    assert (z == 16 * 32767).all()
    W[:] = -128
    dense_ymm(x, blocked(W), 32, 8, z, False)
    assert (z == 16 * -32768).all()


@pytest.mark.parametrize("clamp_max, shift", [(127, 7), (255, 9), (255, 8), (100, 6)])
def test_pairwise_u8x32_equals_numpy(rng, clamp_max, shift):
    acc = rng.integers(-40000 // 2, 40000 // 2, 128).astype(np.int16)
    out = np.zeros(64, np.uint8)
    pairwise(acc, out, clamp_max, shift)
    a = np.clip(acc[:64].astype(np.int64), 0, clamp_max)
    b = np.clip(acc[64:].astype(np.int64), 0, clamp_max)
    np.testing.assert_array_equal(out, ((a * b) >> shift) & 0xFF)


@pytest.mark.parametrize("clamp_max, shift", [(127, 7), (181, 8), (100, 7), (3, 0), (127, 15)])
@pytest.mark.parametrize("lo_a", ["zero", "symmetric"])
def test_gated_u8x32_equals_numpy(rng, clamp_max, shift, lo_a):
    """glu (lower clamp 0) and bilinear (-QA) products, floor-shifted, as bytes offset by 128; int16 edges."""
    lo = 0 if lo_a == "zero" else -clamp_max
    acc = rng.integers(-32768, 32768, 256).astype(np.int16)
    acc[:8] = (-32768, 32767, clamp_max, -clamp_max, 0, -1, clamp_max + 1, -clamp_max - 1)
    acc[128:136] = (-32768, -32768, -clamp_max, -clamp_max, 5, 1, 32767, 32767)
    out = np.zeros(128, np.uint8)
    gated(acc, out, lo, clamp_max, shift)
    a = np.clip(acc[:128].astype(np.int64), lo, clamp_max)
    b = np.clip(acc[128:].astype(np.int64), -clamp_max, clamp_max)
    want = (a * b) >> shift
    assert want.min() >= -128 and want.max() <= 127
    np.testing.assert_array_equal(out.astype(np.int64) - 128, want)


@njit(cache=True)
def dense_paired(x, w, n_in, n_out, z):
    for g in range(0, n_out, 8):
        a = S.zero_i32x8()
        for blk in range(0, n_in // 4, 2):
            a = S.dot4x2_avx2(a, x, 4 * blk, 4 * blk + 4, w, (blk * n_out + g) * 4, ((blk + 1) * n_out + g) * 4)
        S.store_i32x8(z, g, a)


def test_dot4x2_adds_two_blocks_in_int16(rng):
    """Two blocks' vpmaddubsw added in int16, then one vpmaddwd: exact while every int16 sum of four
    products fits (inputs to 126, |weights| summing to at most 260 per four), as Stockfish 15.1's fc_0;
    beyond that the int16 sum wraps (which is why first_layer_isa checks the weights)."""
    n_in, n_out = 64, 16
    x = rng.integers(0, 127, n_in).astype(np.uint8)
    x[:8] = 126
    W = rng.integers(-65, 66, (n_out, n_in)).astype(np.int8)
    z = np.zeros(n_out, np.int32)
    dense_paired(x, blocked(W), n_in, n_out, z)
    np.testing.assert_array_equal(z, W.astype(np.int64) @ x.astype(np.int64))
    W[:] = 127  # four products of 126 * 127 = 64,008: the int16 sum wraps
    dense_paired(np.full(n_in, 126, np.uint8), blocked(W), n_in, n_out, z)
    assert (z != n_in * 126 * 127).all()


def test_int16_vectors_wrap(rng):
    a = rng.integers(-32768, 32768, 128).astype(np.int16)
    b = rng.integers(-32768, 32768, 256).astype(np.int16)
    out = np.zeros(128, np.int16)
    add_sub_rows(a, b, out)
    want = a.astype(np.int64) + b[:128] - b[128:]
    np.testing.assert_array_equal(out, ((want + 32768) % 65536 - 32768).astype(np.int16))

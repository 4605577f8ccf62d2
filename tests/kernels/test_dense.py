"""Dense kernels (affine, tdiv, wrap_int32, psqt_term, the whole layer stack) against the reference."""

from __future__ import annotations

import math

import chess
import numpy as np
import pytest

import reference as R
from nnue_infer.kernels import simd
from nnue_infer.kernels.nnue.dense import (
    COL_ROWS,
    COL_W_STRIDE,
    affine,
    affine_rows_zmm,
    ft_input,
    propagate_layer_stack,
    psqt_term,
    scratch_size,
    tdiv,
    wrap_int32,
)
from nnue_infer.network import block_layout

ISA = simd.ISA  # the path under test (NNUE_INFER_SIMD; see test_simd_paths.py)
FC0 = simd.first_layer_isa(ISA, 126, 182, 227)  # Stockfish 15.1's fc_0: bytes to 126, its pair and quad sums

SKIP = (15, -1, 0, 9600, 8128)  # skip index, subtracted index, SKIP_SEPARATE, numerator, denominator


def with_scratch(x, layers):
    """The layer stack's int16 scratch buffer with the transformed features ``x`` as its input bytes."""
    scratch = np.zeros(scratch_size(layers), np.int16)
    ft_input(scratch, layers)[:len(x)] = x
    return scratch


def blocked(w, n_out, n_in):
    """Flat row-major int8 weights of consecutive ``[n_out, n_in]`` layers in the kernels' block layout."""
    return block_layout(w.reshape(-1, n_out, n_in)).reshape(-1)


def test_tdiv_truncates_toward_zero():
    values = [0, 1, 2, 3, 7, 15, 16, 17, 31, 32, 127, 128, 360, 361, 409, 1665 * 9600, 2**31 - 1, 2**40 + 3]
    for a in values + [-v for v in values]:
        for b in (1, 2, 3, 16, 127, 361, 8128, -2, -16):
            assert tdiv(a, b) == R.tdiv(a, b) == (abs(a) // abs(b)) * (1 if (a >= 0) == (b > 0) else -1)
            if abs(a) < 2**50:
                assert tdiv(a, b) == math.trunc(a / b)
    assert tdiv(-7, 2) == -3 and -7 // 2 == -4
    assert tdiv(-409, 2) == -204  # spec 4
    assert tdiv(-834, 16) == -52  # spec 8, after 1.e4


def test_wrap_int32():
    for x in (0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32, 2**32 + 5, 334_556 * 9600,
              -334_556 * 9600, 223_696 * 9600, 223_697 * 9600, 2**62, -(2**62)):
        assert wrap_int32(x) == R.wrap32(x) == int(np.array(x & 0xFFFFFFFF, np.uint64).astype(np.uint32).view(np.int32))
    assert wrap_int32(223_697 * 9600) < 0  # first |z15| that overflows the skip product


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(5)


@pytest.mark.parametrize("isa", [simd.ISA_PORTABLE, ISA])
def test_affine_random(rng, isa):
    """Every width class (16 per zmm, 8 per ymm, plain loops) on inputs up to 127, and the
    8-bit inputs up to 255 where the path allows them (not AVX2's saturating vpmaddubsw)."""
    for n_in, n_out in ((32, 32), (32, 1), (1024, 16), (64, 8), (36, 24), (1024, 32), (32, 15)):
        w = rng.integers(-128, 128, size=3 * n_in * n_out, dtype=np.int8)
        b = rng.integers(-(2**20), 2**20, size=3 * n_out, dtype=np.int32)
        wb = blocked(w, n_out, n_in)
        for top in (127, 255):
            if top > 127 and isa == simd.ISA_AVX2:
                continue
            x = rng.integers(0, top + 1, size=n_in, dtype=np.uint8)
            x[rng.random(n_in) < 0.5] = 0
            z = np.empty(n_out, np.int32)
            for k in range(3):
                affine(x, 0, n_in, wb, k * n_in * n_out, b, k * n_out, n_out, z, 0, isa)
                W = w[k * n_in * n_out : (k + 1) * n_in * n_out].reshape(n_out, n_in).astype(np.int64)
                np.testing.assert_array_equal(z, b[k * n_out : (k + 1) * n_out] + W @ x.astype(np.int64))


#: Every first-layer path code; paths the target CPU lacks run the plain loops (never another path's instructions).
FC0_PATHS = [simd.ISA_PORTABLE, simd.ISA_AVX2, simd.ISA_AVXVNNI, simd.ISA_VNNI512, simd.FC0_AVX2_WIDE,
             simd.FC0_AVX2_PAIRED]


def signed_case(rng, n_in, n_out, extreme):
    """int8 inputs (with -128 and 127), weights (within +-64, or mostly -128 / 127) and int32
    biases (with both edges); returns them with the bytes x + 128 and the offset biases."""
    x = rng.integers(-128, 128, n_in).astype(np.int8)
    x[:4] = (-128, 127, -128, 127)
    x[4:8] = (-128, -128, 127, 127)
    if extreme:
        W = rng.choice(np.array([-128, 127, -127, 0], np.int8), size=(n_out, n_in))
    else:
        W = rng.integers(-64, 65, (n_out, n_in)).astype(np.int8)
    b = rng.integers(-(2**20), 2**20, n_out).astype(np.int32)
    b[:2] = (2**31 - 1, -(2**31))[:n_out]
    b_offset = R.wrap32_array(b.astype(np.int64) - 128 * W.astype(np.int64).sum(axis=1)).astype(np.int32)
    return x, W, b, (x.astype(np.int16) + 128).astype(np.uint8), b_offset


@pytest.mark.parametrize("extreme", [False, True], ids=["weights-64", "weights-extreme"])
@pytest.mark.parametrize("isa", FC0_PATHS)
def test_affine_signed_inputs_offset_on_every_path(rng, isa, extreme):
    """Signed first-layer inputs as the bytes x + 128 with offset biases (``Network.compute_layout``)
    give wrap32(b + W x) on every path that ``first_layer_isa`` can choose for them."""
    for n_in, n_out in ((64, 16), (1024, 16), (128, 32), (32, 8), (32, 15), (64, 1)):
        x, W, b, u, b_offset = signed_case(rng, n_in, n_out, extreme)
        pair = int(np.abs(W.astype(np.int32)).reshape(n_out, -1, 2).sum(axis=2).max())
        if isa == simd.FC0_AVX2_PAIRED or simd.first_layer_isa(isa, 255, pair) != isa:
            continue  # not a path chosen for these weights (AVX2's vpmaddubsw would saturate)
        z = np.empty(n_out, np.int32)
        affine(u, 0, n_in, blocked(W, n_out, n_in), 0, b_offset, 0, n_out, z, 0, isa)
        np.testing.assert_array_equal(z, R.wrap32_array(b.astype(np.int64) + W.astype(np.int64) @ x.astype(np.int64)))


@pytest.mark.parametrize("n_in, n_out", [(1024, 16), (1024, 32), (36, 24), (44, 8), (64, 16), (8, 16)])
def test_affine_paired_blocks_where_chosen(rng, n_in, n_out):
    """FC0_AVX2_PAIRED (two blocks per vpmaddwd; 16 then 8 outputs per pass; an odd last block
    alone) on Stockfish 15.1's input range (bytes to 126) with weights whose four-product sums fit
    int16, as first_layer_isa requires: equal to the int64 reference."""
    x = rng.integers(0, 127, n_in).astype(np.uint8)
    x[: n_in // 2] = 126
    W = rng.integers(-65, 66, (n_out, n_in)).astype(np.int8)
    b = rng.integers(-(2**31), 2**31, n_out, dtype=np.int64).astype(np.int32)
    net_quad = int(np.abs(W.astype(np.int32)).reshape(n_out, -1, 2, 2, 2).sum(axis=(2, 4)).max()) if n_in % 8 == 0 else 260
    assert simd.first_layer_isa(simd.ISA_AVX2, 126, 130, net_quad) == simd.FC0_AVX2_PAIRED
    z = np.empty(n_out, np.int32)
    affine(x, 0, n_in, blocked(W, n_out, n_in), 0, b, 0, n_out, z, 0, simd.FC0_AVX2_PAIRED)
    np.testing.assert_array_equal(z, R.wrap32_array(b.astype(np.int64) + W.astype(np.int64) @ x.astype(np.int64)))


def test_avx2_saturation_edge_takes_the_wide_form():
    """Bytes 255 against weight pairs 127 + 127 (64,770 > 32,767): first_layer_isa moves AVX2 to
    FC0_AVX2_WIDE, which is exact; the plain vpmaddubsw form would saturate there."""
    n_in, n_out = 64, 8
    W = np.full((n_out, n_in), 127, np.int8)
    W[1::2] = -128
    u = np.full(n_in, 255, np.uint8)
    b = np.zeros(n_out, np.int32)
    want = W.astype(np.int64) @ u.astype(np.int64)
    assert simd.first_layer_isa(simd.ISA_AVX2, 255, 255) == simd.FC0_AVX2_WIDE
    assert simd.first_layer_isa(simd.ISA_AVX2, 127, 256) == simd.ISA_AVX2
    z = np.empty(n_out, np.int32)
    affine(u, 0, n_in, blocked(W, n_out, n_in), 0, b, 0, n_out, z, 0, simd.FC0_AVX2_WIDE)
    np.testing.assert_array_equal(z, want)
    if simd.TARGET_AVX2:  # the edge is real: the saturating form gives other numbers
        affine(u, 0, n_in, blocked(W, n_out, n_in), 0, b, 0, n_out, z, 0, simd.ISA_AVX2)
        assert (z != want).all()


@pytest.mark.parametrize("isa", [simd.ISA_PORTABLE, ISA])
def test_affine_extremes_wrap_int32(isa):
    """int8 extremes times the largest input over 1024 inputs, and biases at the int32 edges
    (sums wrap as in C), for 4 outputs (plain loops) and 16 (SIMD registers)."""
    n_in = 1024
    top = 127 if isa == simd.ISA_AVX2 else 255
    for n_out in (4, 16):
        w = np.full(n_in * n_out, -128, np.int8)
        w[n_in : 2 * n_in] = 127
        b = np.zeros(n_out, np.int32)
        b[:4] = (-(2**31), 2**31 - 1, 0, 5)
        x = np.full(n_in, top, np.uint8)
        z = np.empty(n_out, np.int32)
        affine(x, 0, n_in, blocked(w, n_out, n_in), 0, b, 0, n_out, z, 0, isa)
        want = [R.wrap32(int(b[i]) + int(w[i * n_in : (i + 1) * n_in].astype(np.int64).sum()) * top)
                for i in range(n_out)]
        np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize("n_in, n_out", [(64, 16), (1024, 16), (1024, 32), (192, 48)])
def test_affine_rows_zmm_random(rng, n_in, n_out):
    """The row-major first-layer form (vnni512; VNNI emulated where the CPU lacks it): biases + W x
    for bytes up to 255, at offsets into longer arrays, wrapping int32 at the edges."""
    for top in (126, 255):
        w = rng.integers(-128, 128, size=2 * n_in * n_out, dtype=np.int8)
        b = rng.integers(-(2**31), 2**31, size=2 * n_out, dtype=np.int64).astype(np.int32)
        x = np.zeros(n_in + 64, np.uint8)
        x[64:] = rng.integers(0, top + 1, size=n_in)
        x[64:][rng.random(n_in) < 0.5] = 0
        z = np.zeros(n_out + 16, np.int32)
        for k in range(2):
            affine_rows_zmm(x, 64, n_in, w, k * n_in * n_out, b, k * n_out, n_out, z, 16)
            W = w[k * n_in * n_out : (k + 1) * n_in * n_out].reshape(n_out, n_in).astype(np.int64)
            want = R.wrap32_array(b[k * n_out : (k + 1) * n_out].astype(np.int64) + W @ x[64:].astype(np.int64))
            np.testing.assert_array_equal(z[16:], want)


def test_layout_keeps_first_layer_rows(network, layout):
    """compute_layout's row-major copy of fc_0 (``COL_ROWS``, what the vnni512 path reads) holds the
    file's weights, bucket by bucket; the other layers have none."""
    weights, _, layers = layout
    w0 = network.layer_weights[0]
    B, n_out, n_in = w0.shape
    rows = weights[layers[0, COL_ROWS]:layers[0, COL_ROWS] + B * layers[0, COL_W_STRIDE]].reshape(B, n_out, -1)
    np.testing.assert_array_equal(rows[:, :, :n_in], w0)
    assert (layers[1:, COL_ROWS] == -1).all()


def test_layer_stack_equal_on_every_first_layer_path(network, layout, sample_boards):
    """The layer stack gives the same numbers whichever first-layer path runs (the row-major
    vnni512 form, the block forms, the plain loops) on real transformed features."""
    weights, biases, layers = layout
    paths = [simd.ISA_PORTABLE, simd.ISA_VNNI512, simd.ISA_AVXVNNI, simd.FC0_AVX2_PAIRED]
    for board in sample_boards[::7]:
        x = R.evaluate(network, board).transformed.astype(np.int16)
        for k in (0, 7):
            got = {propagate_layer_stack(with_scratch(x, layers), k, weights, biases, layers, 6, *SKIP, 9600, ISA, fc0,
                                         False) for fc0 in paths}
            assert len(got) == 1, (board.fen(), k, got)


def test_psqt_term():
    """tdiv(psqt_stm - psqt_opp, 2) with the difference in wrapping int32, as Stockfish's
    ``FeatureTransformer::transform`` (issue 8 item 3: the extremes wrap, 2**32 - 1 -> -1 -> 0)."""
    acc = np.array([[0, -409, 409, 5, -5, 7, 2**31 - 1, -(2**31)], [0, 0, 0, 10, -10, -8, -(2**31), 2**31 - 1]], np.int32)
    for stm in (0, 1):
        for k in range(8):
            want = R.tdiv(R.wrap32(int(acc[stm, k]) - int(acc[1 - stm, k])), 2)
            assert psqt_term(acc, stm, k) == want
    assert psqt_term(acc, 1, 1) == 204 and psqt_term(acc, 0, 1) == -204
    assert psqt_term(acc, 0, 6) == psqt_term(acc, 1, 6) == 0


def test_layer_stack_matches_reference_on_real_inputs(network, layout, sample_boards):
    weights, biases, layers = layout
    for board in sample_boards[::3]:
        e = R.evaluate(network, board)
        x = e.transformed.astype(np.int16)
        for k in range(8):
            got = propagate_layer_stack(with_scratch(x, layers), k, weights, biases, layers, 6, *SKIP, 9600, ISA, FC0, False)
            assert got == e.positional[k], (board.fen(), k)


def test_layer_stack_random_dense_inputs(network, layout, rng):
    """Dense random inputs reach large |z| (SqrClippedReLU saturation, big skip terms)."""
    weights, biases, layers = layout
    for _ in range(40):
        x = rng.integers(0, 127, size=1024, dtype=np.int16)
        x[rng.random(1024) < rng.random()] = 0
        k = int(rng.integers(8))
        st = R.layer_stack(network, k, x)
        assert propagate_layer_stack(with_scratch(x, layers), k, weights, biases, layers, 6, *SKIP, 9600, ISA, FC0, False) == st.positional


def test_layer_stack_skip_wraps(network, layout):
    """An input maximising fc_0 neuron 15 makes z[15] * 9600 overflow int32: the kernel wraps like C."""
    weights, biases, layers = layout
    for k in range(1, 8):  # bucket 0's neuron-15 weights are too small to overflow (|z15| <= 42,670)
        w15 = network.layer_weights[0][k, 15].astype(np.int64)
        for sign in (1, -1):
            x = np.where(sign * w15 > 0, 126, 0).astype(np.int16)
            st = R.layer_stack(network, k, x)
            z15 = int(st.z[15])
            assert abs(z15) > 223_696, z15
            unwrapped = R.layer_stack(network, k, x, wrap_skip=False)
            assert unwrapped.positional != st.positional
            assert propagate_layer_stack(with_scratch(x, layers), k, weights, biases, layers, 6, *SKIP, 9600, ISA, FC0, False) == st.positional


def test_layer_stack_without_skip(network, layout):
    weights, biases, layers = layout
    x = R.evaluate(network, chess.Board()).transformed.astype(np.int16)
    st = R.layer_stack(network, 7, x)
    assert propagate_layer_stack(with_scratch(x, layers), 7, weights, biases, layers, 6, -1, -1, 0, 9600, 8128, 9600, ISA, FC0, False) == st.o

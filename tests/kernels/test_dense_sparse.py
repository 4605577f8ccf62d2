"""The sparse first dense layer: the dense layer's bits on every first-layer path, from real
feature-transformer outputs (Stockfish 15.1's net, permuted and not) and random sparse inputs."""

from __future__ import annotations

import numpy as np
import pytest

from nnue_infer import Evaluator
from nnue_infer.kernels import simd
from nnue_infer.kernels.nnue.dense import first_layer
from nnue_infer.kernels.nnue.dense_sparse import find_nnz, first_layer_sparse
from nnue_infer.network import block_layout

#: Every first-layer path code; paths the target CPU lacks run the plain loops (never another path's instructions).
FC0_PATHS = [simd.ISA_PORTABLE, simd.ISA_AVX2, simd.ISA_AVXVNNI, simd.ISA_VNNI512, simd.FC0_AVX2_WIDE,
             simd.FC0_AVX2_PAIRED]


def test_find_nnz_lists_the_non_zero_blocks_in_order():
    rng = np.random.default_rng(3)
    x = np.zeros(64, np.uint8)
    x[rng.choice(64, 9, replace=False)] = rng.integers(1, 256, 9)
    nnz = np.full(32, -1, np.int32)
    count = find_nnz(x, 0, 64, nnz)
    expected = np.flatnonzero(x.reshape(16, 4).any(axis=1))
    assert count == len(expected) and nnz[:count].tolist() == expected.tolist()
    assert find_nnz(np.zeros(32, np.uint8), 0, 32, nnz) == 0


@pytest.mark.parametrize("fc0", FC0_PATHS)
def test_sparse_equals_dense_on_stockfish_outputs(fc0, network, sample_boards):
    """Stockfish 15.1's fc_0 (1024 -> 16) on the transformed features of the sample positions, every
    bucket: the sparse layer's sums are the dense layer's on the same path."""
    if fc0 in (simd.ISA_AVX2, simd.FC0_AVX2_PAIRED) and \
            simd.first_layer_isa(simd.ISA_AVX2, 126, network.first_layer_pair_sum, network.first_layer_quad_sum) \
            not in (simd.ISA_AVX2, simd.FC0_AVX2_PAIRED):
        pytest.skip("vpmaddubsw could saturate on this net: the dense layer does not take this path either")
    weights, biases, layers = network.compute_layout
    n_in, n_out, w_off, w_stride, b_off, b_stride = (int(layers[0, c]) for c in (0, 1, 4, 5, 6, 7))
    rows = int(layers[0, 11])
    out = Evaluator(network).activations_batch(sample_boards).ft_output
    z_dense, z_sparse = np.empty(n_out, np.int32), np.empty(n_out, np.int32)
    nnz = np.empty(n_in // 4 + 16, np.int32)
    for x in out:
        x = np.ascontiguousarray(x)
        for bucket in range(8):
            first_layer(x, 0, n_in, weights, w_off + bucket * w_stride, rows + bucket * w_stride, biases,
                        b_off + bucket * b_stride, n_out, z_dense, 0, fc0)
            count = first_layer_sparse(x, 0, n_in, weights, w_off + bucket * w_stride, biases, b_off + bucket * b_stride,
                                       n_out, z_sparse, 0, fc0, nnz)
            np.testing.assert_array_equal(z_sparse, z_dense)
        assert count == int(x.reshape(-1, 4).any(axis=1).sum())


@pytest.mark.parametrize("fc0", FC0_PATHS)
@pytest.mark.parametrize("n_out", [16, 32, 8, 24, 15])
def test_sparse_equals_the_int64_reference_on_random_inputs(fc0, n_out):
    """Widths of every register class (16 per zmm, 8 per ymm, plain loops), blocks 0-100 % non-zero,
    bytes up to 255 where the path is exact for them (AVX2's vpmaddubsw only up to 127)."""
    rng = np.random.default_rng(n_out)
    n_in = 256
    top = 127 if fc0 in (simd.ISA_AVX2, simd.FC0_AVX2_PAIRED) else 255
    w = rng.integers(-128, 128, size=(2, n_out, n_in), dtype=np.int8)
    b = rng.integers(-(2**20), 2**20, size=2 * n_out, dtype=np.int32)
    wb = block_layout(w).reshape(-1)
    nnz = np.empty(n_in // 4 + 16, np.int32)
    z = np.empty(n_out, np.int32)
    for density in (0.0, 0.1, 0.38, 1.0):
        x = rng.integers(1, top + 1, size=n_in, dtype=np.uint8)
        x.reshape(-1, 4)[rng.random(n_in // 4) >= density] = 0
        x[rng.random(n_in) < 0.3] = 0  # zeros inside non-zero blocks too
        for k in range(2):
            first_layer_sparse(x, 0, n_in, wb, k * n_in * n_out, b, k * n_out, n_out, z, 0, fc0, nnz)
            expected = b[k * n_out:(k + 1) * n_out] + w[k].astype(np.int64) @ x.astype(np.int64)
            np.testing.assert_array_equal(z, expected)

"""Networks whose feature-transformer activation is signed (``glu``, ``bilinear``, ``hswish_glu``,
``lut_glu``: int8 inputs to the first dense layer) against a NumPy int64 reference, end to end.

The kernels store those inputs as the bytes x + 128 and lower the first layer's biases by
128 * (column sums of its weights), so that every SIMD path multiplies unsigned bytes; AVX2's
``vpmaddubsw`` would saturate on large weights, so such networks take its non-saturating form
(``simd.FC0_AVX2_WIDE``).  Each network here reaches both ends of its int8 range (checked) and
comes with small first-layer weights (where ``vpmaddubsw`` is exact) or extreme ones (-128 and
127, where it is not); ``tests/kernels/test_simd_paths.py`` compares every path the CPU has on such networks.
"""

from __future__ import annotations

import chess
import numpy as np
import pytest

import reference as R
from nnue_infer import Evaluator
from nnue_infer.features import feature_set
from nnue_infer.kernels.nnue import forward as K
from nnue_infer.kernels import simd
from nnue_infer.network import Architecture, HiddenLayer, Network

SF_LAYERS = (HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"), HiddenLayer(1, "none"))
L1 = 64
#: (activation, QA, shift): the smallest shifts keeping outputs in int8, so they reach its ends.
CASES = [("glu", 127, 7), ("bilinear", 127, 7), ("glu", 255, 9), ("bilinear", 255, 9), ("hswish_glu", 127, 14),
         ("lut_glu", 127, 7)]


def gate_table(qa: int) -> np.ndarray:
    """A lut_glu table reaching -QA and QA (int16[2 * QA + 1])."""
    u = np.arange(-qa, qa + 1) / qa
    return np.rint(qa * np.clip(np.sin(1.6 * u) * 1.05, -1, 1)).astype(np.int16)


def make(activation: str, qa: int, shift: int, extreme: bool, seed: int = 3) -> Network:
    """A random HalfKAv2_hm network (L1 = 64, Stockfish 15.1's layer stack) whose accumulators often
    pass both clamps; first-layer weights within +-40 (``extreme`` false) or mostly -128 / 127."""
    rng = np.random.default_rng(seed)
    arch = Architecture(feature_set="HalfKAv2_hm", ft_width=L1, ft_activation=activation, ft_clamp=qa, ft_shift=shift,
                        psqt_buckets=8, output_buckets=8, layers=SF_LAYERS, skip_index=15, skip_numerator=9600,
                        skip_denominator=8128)
    n = feature_set("HalfKAv2_hm").num_features
    if extreme:
        w0 = rng.choice(np.array([-128, -127, 127, 126, -1, 0, 1], np.int8), size=(8, 16, L1))
    else:
        w0 = rng.integers(-40, 41, (8, 16, L1), dtype=np.int8)
    b0 = rng.integers(-(2**20), 2**20, (8, 16), dtype=np.int32)
    b0[:, :3] = (2**31 - 1, -(2**31), 2**31 - 50_000)  # int32 edges: the offset biases wrap
    return Network(
        architecture=arch,
        ft_biases=rng.integers(-qa // 2, qa // 2, L1, dtype=np.int16),
        ft_weights=rng.integers(-qa * 2 // 3, qa * 2 // 3 + 1, (n, L1), dtype=np.int16),
        psqt_weights=rng.integers(-3000, 3000, (n, 8), dtype=np.int32),
        layer_weights=(w0, rng.integers(-128, 128, (8, 32, 32), dtype=np.int8),
                       rng.integers(-128, 128, (8, 1, 32), dtype=np.int8)),
        layer_biases=(b0, rng.integers(-9000, 9000, (8, 32), dtype=np.int32),
                      rng.integers(-9000, 9000, (8, 1), dtype=np.int32)),
        ft_table=gate_table(qa) if activation == "lut_glu" else None,
    )


def transform(net: Network, acc_stm: np.ndarray, acc_opp: np.ndarray) -> np.ndarray:
    """The signed activation's integer definition (``network.FT_ACTIVATIONS``), int64, stm first."""
    arch = net.architecture
    qa, s = arch.ft_clamp, arch.ft_shift
    parts = []
    for a in (acc_stm, acc_opp):
        x, y = a[: L1 // 2], np.clip(a[L1 // 2 :], -qa, qa)
        if arch.ft_activation == "glu":
            p = np.clip(x, 0, qa) * y
        elif arch.ft_activation == "bilinear":
            p = np.clip(x, -qa, qa) * y
        elif arch.ft_activation == "hswish_glu":
            c = np.clip(x, -qa, qa)
            p = (c * (c + qa) * y) >> 1
        else:
            p = net.ft_table.astype(np.int64)[np.clip(x, -qa, qa) + qa] * y
        parts.append(p >> s)
    return np.concatenate(parts)


def reference_value(net: Network, board: chess.Board) -> tuple[int, np.ndarray]:
    """(value, transformed features) in int64: HalfKAv2_hm features, accumulators, activation, then
    ``reference.layer_stack`` on the file-layout weights and biases (no offset anywhere)."""
    stm = board.turn
    acc, ps = {}, {}
    for c in (chess.WHITE, chess.BLACK):
        acc[c], ps[c] = R.accumulate(net, R.features(board, c))
    x = transform(net, acc[stm], acc[not stm])
    bucket = (len(board.piece_map()) - 1) // 4
    psqt = R.tdiv(R.wrap32(int(ps[stm][bucket]) - int(ps[not stm][bucket])), 2)
    positional = R.layer_stack(net, bucket, x).positional
    return R.tdiv(R.wrap32(psqt + positional), 16), x


@pytest.fixture(scope="module")
def boards(sample_boards):
    return [b for b in sample_boards if not b.chess960][:60]


@pytest.mark.parametrize("extreme", [False, True], ids=["small-fc0", "extreme-fc0"])
@pytest.mark.parametrize("activation,qa,shift", CASES)
def test_signed_network_matches_reference(activation, qa, shift, extreme, boards):
    net = make(activation, qa, shift, extreme)
    ev = Evaluator(net)
    want, xs = zip(*(reference_value(net, b) for b in boards))
    xs = np.concatenate(xs)
    top = qa**net.architecture.ft.degree >> shift
    assert xs.max() == top and xs.min() in (-top, -top - 1), "the positions must reach both ends of the int8 range"
    assert [ev.evaluate(b) for b in boards] == list(want)
    assert ev.evaluate_batch([b.fen() for b in boards]).tolist() == list(want)
    fc0 = int(ev._params[K.P_FC0_SIMD])
    assert fc0 == simd.first_layer_isa(simd.ISA, net.architecture.first_layer_max_byte, net.first_layer_pair_sum,
                                       net.first_layer_quad_sum)
    if simd.ISA == simd.ISA_AVX2:  # the saturating vpmaddubsw only where it is exact
        assert fc0 == (simd.FC0_AVX2_WIDE if extreme else simd.ISA_AVX2)


def test_first_layer_bytes_and_pair_sum():
    """The inputs' byte range (x + 128 for signed activations) and the weights' pair bound."""
    small, big = make("glu", 255, 9, False), make("bilinear", 127, 7, True)
    assert small.architecture.first_layer_max_byte == 128 + 127
    assert big.architecture.first_layer_max_byte == 128 + 126
    assert small.first_layer_pair_sum <= 80 and big.first_layer_pair_sum == 256
    pairwise = Architecture(feature_set="HalfKAv2_hm", ft_width=L1, ft_activation="pairwise", ft_clamp=127, ft_shift=7,
                            psqt_buckets=8, output_buckets=8, layers=SF_LAYERS, skip_index=15)
    assert pairwise.first_layer_max_byte == 126


def test_offset_biases_only_for_signed_inputs():
    """compute_layout lowers fc_0's biases by 128 * column sums (wrapping int32) for signed inputs only."""
    net = make("bilinear", 127, 7, True)
    _, biases, layers = net.compute_layout
    w0, b0 = net.layer_weights[0].astype(np.int64), net.layer_biases[0].astype(np.int64)
    stored = biases[layers[0, 6] : layers[0, 6] + b0.size].reshape(b0.shape)
    np.testing.assert_array_equal(stored, R.wrap32_array(b0 - 128 * w0.sum(axis=2)))
    assert (stored != b0).any()
    np.testing.assert_array_equal(biases[layers[1, 6] : layers[1, 6] + 8 * 32], net.layer_biases[1].reshape(-1))


def test_pair_and_quad_sums_by_brute_force():
    """Network.first_layer_pair_sum / first_layer_quad_sum against explicit loops over the products
    vpmaddubsw (one block: inputs 4b+2k, 4b+2k+1) and dot4x2_avx2 (blocks 2m, 2m+1) add in int16."""
    net = make("glu", 127, 7, False, seed=9)
    w = np.abs(net.layer_weights[0].astype(np.int64))
    pair = quad = 0
    for bucket in range(w.shape[0]):
        for o in range(w.shape[1]):
            row = w[bucket, o]
            for j in range(0, L1, 2):
                pair = max(pair, row[j] + row[j + 1])
            for m in range(L1 // 8):
                for k in range(2):
                    i = 8 * m + 2 * k
                    quad = max(quad, row[i] + row[i + 1] + row[i + 4] + row[i + 5])
    assert net.first_layer_pair_sum == pair
    assert net.first_layer_quad_sum == quad

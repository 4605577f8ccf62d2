"""Accumulator refresh and incremental update against the reference (int64 sums, int16 wrap)."""

from __future__ import annotations

import chess
import numpy as np

import reference as R
from nnue_infer.kernels.accumulator import refresh_accumulator, update_accumulator
from nnue_infer.kernels.simd import ISA  # the path under test (NNUE_INFER_SIMD; see test_simd_paths.py)


def as_feats(indices) -> np.ndarray:
    out = np.zeros(32, np.int32)
    out[: len(indices)] = indices
    return out


def wrap16(a: np.ndarray) -> np.ndarray:
    return ((np.asarray(a, np.int64) + 32768) % 65536 - 32768).astype(np.int64)


def test_refresh_matches_reference(network, sample_boards):
    acc = np.empty((2, 1024), np.int16)
    psqt = np.empty((2, 8), np.int32)
    for board in sample_boards:
        for p, color in enumerate((chess.WHITE, chess.BLACK)):
            feats = R.features(board, color)
            refresh_accumulator(network.ft_weights, network.ft_biases, network.psqt_weights, as_feats(feats),
                                len(feats), acc[p], psqt[p], ISA)
            want_acc, want_psqt = R.accumulate(network, feats)
            # Spec 4: no int16 overflow is possible for this net, so int64 sums are exact.
            assert want_acc.min() >= -32768 and want_acc.max() <= 32767
            np.testing.assert_array_equal(acc[p], want_acc, err_msg=board.fen())
            np.testing.assert_array_equal(psqt[p], want_psqt, err_msg=board.fen())


def test_refresh_reads_only_count_features(network):
    acc = np.empty((2, 1024), np.int16)
    psqt = np.empty((2, 8), np.int32)
    feats = as_feats([22468, 22524])
    feats[2:] = 22527  # garbage after count must be ignored
    refresh_accumulator(network.ft_weights, network.ft_biases, network.psqt_weights, feats, 2, acc[0], psqt[0], ISA)
    want_acc, want_psqt = R.accumulate(network, [22468, 22524])
    np.testing.assert_array_equal(acc[0], want_acc)
    np.testing.assert_array_equal(psqt[0], want_psqt)
    refresh_accumulator(network.ft_weights, network.ft_biases, network.psqt_weights, feats, 0, acc[1], psqt[1], ISA)
    np.testing.assert_array_equal(acc[1], network.ft_biases)  # no feature: biases, PSQT has no bias
    assert not psqt[1].any()


def test_refresh_wraps_int16_like_stockfish():
    """Stockfish adds 16-bit lanes: the sum wraps modulo 2**16 (synthetic weights that overflow)."""
    rng = np.random.default_rng(1)
    weights = rng.integers(-32768, 32768, size=(64, 1024), dtype=np.int16)
    weights[0, :4] = (32767, -32768, 30000, -30000)
    weights[1, :4] = (32767, -32768, 30000, -30000)
    biases = rng.integers(-32768, 32768, size=1024, dtype=np.int16)
    psqt_w = rng.integers(-(2**24), 2**24, size=(64, 8), dtype=np.int32)
    acc = np.empty((2, 1024), np.int16)
    psqt = np.empty((2, 8), np.int32)
    feats = as_feats(list(range(32)))
    refresh_accumulator(weights, biases, psqt_w, feats, 32, acc[0], psqt[0], ISA)
    want = biases.astype(np.int64) + weights[:32].astype(np.int64).sum(axis=0)
    np.testing.assert_array_equal(acc[0], wrap16(want))
    np.testing.assert_array_equal(psqt[0], psqt_w[:32].astype(np.int64).sum(axis=0))


def test_update_equals_refresh(network):
    """acc(src) + added - removed == refresh of the new feature set, in a new buffer and in place."""
    rng = np.random.default_rng(7)
    acc = np.empty((2, 1024), np.int16)
    psqt = np.empty((2, 8), np.int32)
    ref_acc = np.empty((2, 1024), np.int16)
    ref_psqt = np.empty((2, 8), np.int32)
    for _ in range(50):
        old = rng.choice(22528, size=int(rng.integers(2, 30)), replace=False)
        n_rem = int(rng.integers(0, min(3, len(old)) + 1))
        removed = old[:n_rem]
        added = rng.choice(np.setdiff1d(np.arange(22528), old), size=int(rng.integers(0, 4)), replace=False)
        new = np.concatenate([old[n_rem:], added])
        refresh_accumulator(network.ft_weights, network.ft_biases, network.psqt_weights, as_feats(old), len(old),
                            acc[0], psqt[0], ISA)
        update_accumulator(network.ft_weights, network.psqt_weights, acc[0], psqt[0], as_feats(added), len(added),
                           as_feats(removed), n_rem, acc[1], psqt[1], ISA)
        refresh_accumulator(network.ft_weights, network.ft_biases, network.psqt_weights, as_feats(new), len(new),
                            ref_acc[0], ref_psqt[0], ISA)
        np.testing.assert_array_equal(acc[1], ref_acc[0])
        np.testing.assert_array_equal(psqt[1], ref_psqt[0])
        want_acc, want_psqt = R.accumulate(network, new.tolist())
        np.testing.assert_array_equal(acc[1], want_acc)
        np.testing.assert_array_equal(psqt[1], want_psqt)
        # in place: destination is the source
        update_accumulator(network.ft_weights, network.psqt_weights, acc[0], psqt[0], as_feats(added), len(added),
                           as_feats(removed), n_rem, acc[0], psqt[0], ISA)
        np.testing.assert_array_equal(acc[0], ref_acc[0])
        np.testing.assert_array_equal(psqt[0], ref_psqt[0])


def test_update_wraps_and_unwraps_int16():
    """Adding then removing an overflowing row restores the accumulator exactly (modular arithmetic)."""
    weights = np.zeros((4, 1024), np.int16)
    weights[1, :] = 30000
    psqt_w = np.zeros((4, 8), np.int32)
    acc = np.empty((2, 1024), np.int16)
    psqt = np.empty((2, 8), np.int32)
    acc[0] = 20000
    psqt[0] = 0
    update_accumulator(weights, psqt_w, acc[0], psqt[0], as_feats([1]), 1, as_feats([]), 0, acc[1], psqt[1], ISA)
    assert (acc[1] == 50000 - 65536).all()
    update_accumulator(weights, psqt_w, acc[1], psqt[1], as_feats([]), 0, as_feats([1]), 1, acc[1], psqt[1], ISA)
    assert (acc[1] == 20000).all()

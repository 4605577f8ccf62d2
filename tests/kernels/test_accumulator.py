"""Accumulator refresh and incremental update against the reference (int64 sums, int16 wrap)."""

from __future__ import annotations

import chess
import numpy as np
import pytest
from numba import njit
from numba.core.registry import CPUDispatcher

import reference as R
from nnue_infer.kernels import simd
from nnue_infer.kernels.nnue.accumulator import refresh_accumulator, update_accumulator
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


#: Every path's code: the path is data (``simd.ISA_*``), so each runs on any CPU whose compiler
#: target has AVX2 (the intrinsics fall back to generic vector IR otherwise).
ALL_PATHS = (simd.ISA_PORTABLE, simd.ISA_AVX2, simd.ISA_AVXVNNI, simd.ISA_VNNI512)
# (added, removed) counts: quiet move, capture, castling, none, only added (<= 4 rows: 128-lane
# tiles), more than 4 rows (256-lane tiles where L % 256 == 0), a 30-row refresh-sized update.
ROW_COUNTS = ((1, 1), (1, 2), (2, 2), (0, 0), (3, 0), (0, 1), (4, 1), (5, 5), (30, 0))


def wrap32(a: np.ndarray) -> np.ndarray:
    return ((np.asarray(a, np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


def extreme_rows(rng, rows: int, width: int, dtype, lo: int, hi: int) -> np.ndarray:
    """Random rows, a third of the lanes at the type's ends (so every sum wraps somewhere)."""
    w = rng.integers(lo, hi + 1, size=(rows, width), dtype=np.int64)
    ends = rng.random((rows, width)) < 1 / 3
    w[ends] = rng.choice([lo, lo + 1, hi - 1, hi], size=int(ends.sum()))
    return w.astype(dtype)


# width: 1024 and 256 (128- or 256-lane tiles), 96 (32-lane tiles), 40 (not a multiple of 32:
# the loops on every path); P = 8 (one int32 register on the SIMD paths), 3 and 0 (loops).
@pytest.mark.parametrize("width, P", [(1024, 8), (256, 8), (96, 3), (40, 0)])
@pytest.mark.parametrize("isa", ALL_PATHS)
def test_update_every_path_equals_numpy(isa, width, P):
    """update_accumulator on each path == int64 NumPy sums wrapped to int16 / int32, into a new
    buffer and in place, for the row counts of every move kind; refresh == biases + rows."""
    if not isinstance(update_accumulator, CPUDispatcher):
        pytest.skip("NUMBA_DISABLE_JIT is set: no intrinsics, and plain NumPy scalars warn on int16 wrap")
    rng = np.random.default_rng(100 + width + isa)
    weights = extreme_rows(rng, 64, width, np.int16, -32768, 32767)
    psqt_w = extreme_rows(rng, 64, P, np.int32, -(2**31), 2**31 - 1)
    acc = np.empty((2, width), np.int16)
    psqt = np.empty((2, P), np.int32)
    for n_added, n_removed in ROW_COUNTS:
        rows = rng.choice(64, size=n_added + n_removed, replace=False).astype(np.int32)
        added, removed = as_feats(rows[:n_added]), as_feats(rows[n_added:])
        src = extreme_rows(rng, 1, width, np.int16, -32768, 32767)[0]
        src_psqt = extreme_rows(rng, 1, P, np.int32, -(2**31), 2**31 - 1)[0]
        want = wrap16(src.astype(np.int64) + weights[rows[:n_added]].astype(np.int64).sum(axis=0)
                      - weights[rows[n_added:]].astype(np.int64).sum(axis=0))
        want_psqt = wrap32(src_psqt.astype(np.int64) + psqt_w[rows[:n_added]].astype(np.int64).sum(axis=0)
                           - psqt_w[rows[n_added:]].astype(np.int64).sum(axis=0))
        acc[0], psqt[0] = src, src_psqt
        update_accumulator(weights, psqt_w, acc[0], psqt[0], added, n_added, removed, n_removed, acc[1], psqt[1], isa)
        np.testing.assert_array_equal(acc[1], want, err_msg=f"{n_added} added, {n_removed} removed")
        np.testing.assert_array_equal(psqt[1], want_psqt, err_msg=f"{n_added} added, {n_removed} removed")
        np.testing.assert_array_equal(acc[0], src)  # the source is not written
        update_accumulator(weights, psqt_w, acc[0], psqt[0], added, n_added, removed, n_removed, acc[0], psqt[0], isa)
        np.testing.assert_array_equal(acc[0], want, err_msg="in place")
        np.testing.assert_array_equal(psqt[0], want_psqt, err_msg="in place")
    biases = extreme_rows(rng, 1, width, np.int16, -32768, 32767)[0]
    feats = as_feats(rng.choice(64, size=30, replace=False))
    refresh_accumulator(weights, biases, psqt_w, feats, 30, acc[0], psqt[0], isa)
    np.testing.assert_array_equal(acc[0], wrap16(biases.astype(np.int64) + weights[feats[:30]].astype(np.int64).sum(axis=0)))
    np.testing.assert_array_equal(psqt[0], wrap32(psqt_w[feats[:30]].astype(np.int64).sum(axis=0)))


def test_update_loop_has_no_reference_counting():
    """A loop over update_accumulator (as the benchmark and the incremental kernels run it) compiles
    without reference-count calls: see kernels.refcount.last_use (with them the update took 2x)."""
    if not isinstance(update_accumulator, CPUDispatcher):
        pytest.skip("NUMBA_DISABLE_JIT is set")

    @njit
    def loop(w, pw, acc, psqt, added, removed, isa, n):
        for i in range(n):
            # counts as np.int64: a literal 1 would compile a second, Literal[int] signature of the kernel
            update_accumulator(w, pw, acc[i & 1], psqt[i & 1], added, np.int64(1), removed, np.int64(1),
                               acc[1 - (i & 1)], psqt[1 - (i & 1)], isa)

    acc, psqt = np.zeros((2, 256), np.int16), np.zeros((2, 8), np.int32)
    one = np.zeros(1, np.int32)
    loop(np.zeros((4, 256), np.int16), np.zeros((4, 8), np.int32), acc, psqt, one, one, ISA, 2)
    ir = loop.inspect_llvm(loop.signatures[0])
    body = ir[ir.index("\ndefine"):ir.index("\ndefine", ir.index("\ndefine") + 1)]  # the loop itself
    # no increment at all (not even the loop's own arguments at entry)
    assert body.count("call void @NRT_incref") == 0, body.count("call void @NRT_incref")


def test_network_arrays_are_aligned(network):
    """The feature transformer's arrays start on 64-byte boundaries (32-byte loads never split a line)."""
    for arr in (network.ft_weights, network.ft_biases, network.psqt_weights):
        assert arr.ctypes.data % simd.ALIGNMENT == 0

"""Pairwise multiplication, ClippedReLU and SqrClippedReLU against the reference, edge values included."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numba import njit
from numba.core.registry import CPUDispatcher

import reference as R
from nnue_infer.kernels import simd
from nnue_infer.kernels.nnue.activation import (
    ACT_CRELU,
    ACT_SQR_CRELU,
    ACT_SQR_CRELU_AND_CRELU,
    FT_PAIRWISE,
    activate,
    activate_lanes,
    clipped_relu,
    ft_activate,
    ft_transform,
    sqr_clipped_relu,
)

#: ``ft_activate``'s gate-table argument where the activation has none (int32, as the network's biases).
NO_TABLE = np.zeros(1, np.int32)
I16_EDGES = [-32768, -32767, -1000, -128, -127, -1, 0, 1, 2, 64, 126, 127, 128, 129, 255, 1000, 32766, 32767]
I32_EDGES = [-(2**31), -(2**31) + 1, -600_000, -46_341, -46_340, -8_129, -8_128, -65, -64, -63, -1, 0, 1, 63, 64,
             65, 8_127, 8_128, 8_191, 8_192, 46_339, 46_340, 46_341, 46_342, 100_000, 334_556, 600_000, 2**31 - 1]


def edge_pairs_accumulator(l1: int) -> np.ndarray:
    """int16[2, l1] holding every (a, b) pair of edge values at (j, j + l1/2), in both perspectives."""
    pairs = list(itertools.product(I16_EDGES, repeat=2))
    half = l1 // 2
    assert len(pairs) <= 2 * half
    acc = np.zeros((2, l1), np.int16)
    for k, (a, b) in enumerate(pairs):
        p, j = divmod(k, half)
        acc[p, j], acc[p, j + half] = a, b
    return acc


@pytest.mark.parametrize("stm", [0, 1])
def test_pairwise_edges(stm):
    acc = edge_pairs_accumulator(1024)
    out = np.empty(1024, np.int16)
    ft_activate(acc, stm, FT_PAIRWISE, 127, 7, NO_TABLE, out)
    np.testing.assert_array_equal(out, R.pairwise(acc[stm], acc[1 - stm]))
    assert out.max() == 126  # (127 * 127) >> 7: the output never reaches 127
    # spot checks by hand: clamp to [0, 127] before multiplying, floor shift
    half = 512
    a, b = acc[stm].astype(int), acc[stm].astype(int)
    for j in range(half):
        x, y = min(max(a[j], 0), 127), min(max(b[j + half], 0), 127)
        assert out[j] == (x * y) >> 7


def test_pairwise_random_full_int16_range():
    rng = np.random.default_rng(3)
    out = np.empty(1024, np.int16)
    for _ in range(20):
        acc = rng.integers(-32768, 32768, size=(2, 1024), dtype=np.int16)
        for stm in (0, 1):
            ft_activate(acc, stm, FT_PAIRWISE, 127, 7, NO_TABLE, out)
            np.testing.assert_array_equal(out, R.pairwise(acc[stm], acc[1 - stm]))


def test_pairwise_other_clamp_and_shift():
    """The kernel takes QA and the shift as parameters (e.g. QA = 255, >> 9 stays within uint8)."""
    acc = edge_pairs_accumulator(1024)
    out = np.empty(1024, np.int16)
    ft_activate(acc, 0, FT_PAIRWISE, 255, 9, NO_TABLE, out)
    a = np.clip(acc.astype(np.int64), 0, 255)
    want = np.concatenate([(a[p, :512] * a[p, 512:]) >> 9 for p in (0, 1)])
    np.testing.assert_array_equal(out, want)
    assert out.max() == (255 * 255) >> 9


def test_clipped_relu_edges():
    z = np.array(I32_EDGES, np.int32)
    out = np.full(len(z) + 3, 77, np.uint8)
    clipped_relu(z, 0, len(z), 6, out, 3)
    np.testing.assert_array_equal(out[3:], R.crelu(z))
    assert (out[:3] == 77).all()  # writes start at the offset
    assert out[3 + I32_EDGES.index(-1)] == 0  # -1 >> 6 == -1 -> 0 (arithmetic shift)
    assert out[3 + I32_EDGES.index(8_128)] == 127 and out[3 + I32_EDGES.index(8_127)] == 126


def test_sqr_clipped_relu_edges():
    z = np.array(I32_EDGES, np.int32)
    out = np.empty(len(z), np.uint8)
    sqr_clipped_relu(z, 0, len(z), 6, out, 0)
    want = [min(127, (int(v) * int(v)) >> 19) for v in I32_EDGES]
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(out, R.sqr_crelu(z))
    # |z| > 46340: z*z overflows int32; an int32 square would go negative and give garbage.
    for v in (46_341, -46_341, 334_556, 600_000, -600_000):
        assert out[I32_EDGES.index(v)] == 127
    assert R.wrap32(46_341 * 46_341) < 0  # so an int32 square would clamp to a garbage value
    # /128 after the 2 x 6-bit shift, not /127: 8191**2 >> 19 == 127 but 8000**2 >> 19 == 122
    assert out[I32_EDGES.index(8_191)] == (8191 * 8191) >> 19 == 127


def test_sqr_clipped_relu_random():
    rng = np.random.default_rng(11)
    z = rng.integers(-(2**31), 2**31, size=4096, dtype=np.int64).astype(np.int32)
    z[:2048] //= 4096  # plenty of values in the unsaturated range
    out = np.empty(4096, np.uint8)
    sqr_clipped_relu(z, 0, 4096, 6, out, 0)
    np.testing.assert_array_equal(out, R.sqr_crelu(z))
    clipped_relu(z, 0, 4096, 6, out, 0)
    np.testing.assert_array_equal(out, R.crelu(z))


def test_activate_codes():
    """Each code on z[5:21] into out[8:]: the offsets of both buffers are honoured."""
    z = np.array([-7] * 5 + I32_EDGES[:15] + [123_456], np.int32)
    out = np.full(40, 200, np.uint8)
    assert activate(z, 5, 15, ACT_SQR_CRELU_AND_CRELU, 6, out, 8) == 30
    np.testing.assert_array_equal(out[8:23], R.sqr_crelu(z[5:20]))
    np.testing.assert_array_equal(out[23:38], R.crelu(z[5:20]))
    assert (out[:8] == 200).all() and (out[38:] == 200).all()  # neuron 15 (the skip) is not activated; padding left to the caller
    assert activate(z, 5, 16, ACT_CRELU, 6, out, 8) == 16
    np.testing.assert_array_equal(out[8:24], R.crelu(z[5:]))
    assert activate(z, 5, 16, ACT_SQR_CRELU, 6, out, 8) == 16
    np.testing.assert_array_equal(out[8:24], R.sqr_crelu(z[5:]))


@pytest.mark.parametrize("shift", [6, 7, 0, 12])
@pytest.mark.parametrize("code", [ACT_SQR_CRELU_AND_CRELU, ACT_CRELU, ACT_SQR_CRELU])
def test_activate_lanes_equals_the_loops(code, shift):
    """The 8-lane SIMD activations (emulated where the CPU lacks AVX2) give the plain loops' bytes on
    int32 edges and random sums, for widths that do and do not fill a register (the bytes after
    the outputs are the caller's: it zeroes them)."""
    rng = np.random.default_rng(shift)
    z = np.array(I32_EDGES + list(rng.integers(-(2**31), 2**31, 100)) + list(rng.integers(-20_000, 20_000, 100)),
                 np.int64).astype(np.int32)
    for n in (15, 16, 32, 1, 31):
        for start in range(0, len(z) - 40, 9):
            want = np.full(80, 200, np.uint8)
            got = np.full(80, 200, np.uint8)
            n_want = activate(z, start, n, code, shift, want, 3)
            assert activate_lanes(z, start, n, code, shift, got, 3) == n_want
            np.testing.assert_array_equal(got[: 3 + n_want], want[: 3 + n_want])
            assert (got[:3] == 200).all()


#: Every path's code (the path is data, see test_accumulator.ALL_PATHS).
ALL_PATHS = (simd.ISA_PORTABLE, simd.ISA_AVX2, simd.ISA_AVXVNNI, simd.ISA_VNNI512)


# (QA, shift): Stockfish 15.1-18 and the default net, Stockfish 19, and two pairs no bundled net uses.
@pytest.mark.parametrize("clamp_max, shift", [(127, 7), (255, 9), (200, 8), (100, 6)])
@pytest.mark.parametrize("isa", ALL_PATHS)
def test_ft_transform_pairwise_every_path(isa, clamp_max, shift):
    """ft_transform's pairwise bytes (the SIMD lanes where L1 % 64 == 0, the loops otherwise) equal
    NumPy's clamp-multiply-shift for every path, both sides to move, edge and random accumulators,
    and zero the first layer's input beyond L1."""
    if not isinstance(ft_transform, CPUDispatcher):
        pytest.skip("NUMBA_DISABLE_JIT is set: no intrinsics, and plain NumPy int16 scalars overflow in the loops")
    rng = np.random.default_rng(clamp_max + shift + 10 * isa)
    table = np.zeros(1, np.int32)
    for l1 in (1024, 128, 96):
        edges = I16_EDGES + [clamp_max - 1, clamp_max, clamp_max + 1]
        accs = [rng.integers(-32768, 32768, size=(2, l1), dtype=np.int16) for _ in range(3)]
        accs.append(rng.choice(edges, size=(2, l1)).astype(np.int16))
        scratch = np.zeros(2 * l1 + 64, np.int16)
        out = np.full(l1 + 32, 0xAB, np.uint8)
        for acc in accs:
            for stm in (0, 1):
                ft_transform(acc, stm, FT_PAIRWISE, clamp_max, shift, isa, table, scratch, out)
                a = np.clip(acc.astype(np.int64), 0, clamp_max)
                half = l1 // 2
                want = np.concatenate([(a[p, :half] * a[p, half:]) >> shift for p in (stm, 1 - stm)])
                np.testing.assert_array_equal(out[:l1], want, err_msg=f"L1 {l1}, stm {stm}")
                assert not out[l1:].any()


def test_ft_transform_loop_has_no_reference_counting():
    """A loop over ft_transform (as bench_limits' pairwise row and the forward kernels run it) compiles
    without reference-count calls (see kernels.refcount.last_use; with them the pairwise took 61 ns, 46 without)."""
    if not isinstance(ft_transform, CPUDispatcher):
        pytest.skip("NUMBA_DISABLE_JIT is set")

    @njit
    def loop(acc, code, clamp_max, shift, isa, table, scratch, out, n):
        for i in range(n):
            ft_transform(acc, i & 1, code, clamp_max, shift, isa, table, scratch, out)

    loop(np.zeros((2, 128), np.int16), FT_PAIRWISE, 127, 7, simd.ISA, NO_TABLE, np.zeros(256, np.int16),
         np.zeros(128, np.uint8), 2)
    ir = loop.inspect_llvm(loop.signatures[0])
    body = ir[ir.index("\ndefine"):ir.index("\ndefine", ir.index("\ndefine") + 1)]  # the loop itself
    assert body.count("call void @NRT_incref") == 0, body.count("call void @NRT_incref")

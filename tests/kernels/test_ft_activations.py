"""Feature-transformer activation kernels against a plain NumPy integer reference, edge values included."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nnue_infer.kernels.nnue.activation import (
    FT_BILINEAR,
    FT_CRELU,
    FT_GLU,
    FT_HSWISH_GLU,
    FT_LUT_GLU,
    FT_PAIRWISE,
    FT_PAIRWISE_SCRELU,
    FT_SCRELU,
    ft_activate,
    ft_transform,
    signed_output,
)
from nnue_infer.kernels import simd
from nnue_infer.network import FT_ACTIVATIONS

EDGES = [-32768, -32767, -256, -255, -254, -128, -127, -126, -1, 0, 1, 2, 126, 127, 128, 254, 255, 256, 32767]


def gate_table(qa: int) -> np.ndarray:
    """A lut_glu table reaching both ends, -QA and QA, and zero (int32[2 * QA + 1], padded by 7 entries
    the kernel must not read)."""
    u = np.arange(-qa, qa + 1) / qa
    t = np.rint(qa * np.clip(np.sin(1.6 * u) * 1.05, -1, 1)).astype(np.int32)
    return np.concatenate([t, np.full(7, 10**6, np.int32)])


def reference(code: int, acc: np.ndarray, stm: int, qa: int, shift: int) -> np.ndarray:
    """int64 NumPy version of each activation's integer definition (network.FT_ACTIVATIONS)."""
    out = []
    for p in (stm, 1 - stm):
        a = acc[p].astype(np.int64)
        h = a.shape[0] // 2
        x, y = a[:h], a[h:]
        pos = lambda v: np.clip(v, 0, qa)  # noqa: E731
        sym = lambda v: np.clip(v, -qa, qa)  # noqa: E731
        prod = {
            FT_CRELU: pos(a),
            FT_SCRELU: pos(a) ** 2,
            FT_PAIRWISE: pos(x) * pos(y),
            FT_PAIRWISE_SCRELU: pos(x) ** 2 * pos(y) ** 2,
            FT_GLU: pos(x) * sym(y),
            FT_BILINEAR: sym(x) * sym(y),
            FT_HSWISH_GLU: (sym(x) * (sym(x) + qa) * sym(y)) >> 1,  # floor(floor(p / 2) / 2**s) = floor(p / 2**(s+1))
            FT_LUT_GLU: gate_table(qa)[sym(x) + qa].astype(np.int64) * sym(y),
        }[code]
        out.append(prod >> shift)  # arithmetic shift: floor
    return np.concatenate(out)


CASES = [  # (code, qa, shift, paired, max |output|)
    (FT_CRELU, 127, 0, False, 127), (FT_CRELU, 255, 1, False, 127),
    (FT_SCRELU, 127, 7, False, 126), (FT_SCRELU, 255, 9, False, 127),
    (FT_PAIRWISE, 127, 7, True, 126), (FT_PAIRWISE, 255, 9, True, 127),
    (FT_PAIRWISE_SCRELU, 127, 21, True, 124), (FT_PAIRWISE_SCRELU, 255, 25, True, 126),
    (FT_GLU, 127, 7, True, 127), (FT_GLU, 255, 9, True, 128),
    (FT_BILINEAR, 127, 7, True, 127), (FT_BILINEAR, 255, 9, True, 128),
    (FT_HSWISH_GLU, 127, 14, True, 126), (FT_HSWISH_GLU, 255, 17, True, 127),
    (FT_LUT_GLU, 127, 7, True, 127), (FT_LUT_GLU, 255, 9, True, 128),
]


def edge_accumulator(l1: int) -> np.ndarray:
    pairs = list(itertools.product(EDGES, repeat=2))
    acc = np.zeros((2, l1), np.int16)
    h = l1 // 2
    for k, (a, b) in enumerate(pairs):
        p, j = divmod(k, h)
        acc[p, j], acc[p, j + h] = a, b
    return acc


@pytest.mark.parametrize("code,qa,shift,paired,top", CASES)
def test_ft_activation_edges_and_random(code, qa, shift, paired, top):
    rng = np.random.default_rng(code * 1000 + qa)
    l1 = 1024
    out = np.empty(l1 if paired else 2 * l1, np.int16)
    accs = [edge_accumulator(l1)] + [rng.integers(-32768, 32768, (2, l1), dtype=np.int16) for _ in range(3)]
    accs += [rng.integers(-2 * qa, 2 * qa, (2, l1), dtype=np.int16)]  # mostly inside the clamp
    table = gate_table(qa)
    for acc in accs:
        for stm in (0, 1):
            ft_activate(acc, stm, code, qa, shift, table, out)
            np.testing.assert_array_equal(out, reference(code, acc, stm, qa, shift))
    # the extremes are reached and stay within the first dense layer's input type
    ft_activate(accs[0], 0, code, qa, shift, table, out)
    assert np.abs(out.astype(np.int64)).max() == top
    signed = code in (FT_GLU, FT_BILINEAR, FT_HSWISH_GLU, FT_LUT_GLU)
    assert out.min() < 0 if signed else out.min() == 0


def test_signed_floor_semantics():
    """glu/bilinear shift negative products arithmetically (floor), e.g. -1 * 1 >> 7 == -1."""
    acc = np.zeros((2, 4), np.int16)
    acc[0] = [1, -1, -1, 1]  # pairs (1, -1), (-1, 1)
    out = np.empty(4, np.int16)
    table = gate_table(127)
    ft_activate(acc, 0, FT_BILINEAR, 127, 7, table, out)
    assert out.tolist() == [-1, -1, 0, 0]
    ft_activate(acc, 0, FT_GLU, 127, 7, table, out)
    assert out.tolist() == [-1, 0, 0, 0]  # the gate clamps -1 to 0


def test_hswish_gate_values():
    """The hswish_glu gate x (x + QA) / 2 is QA**2 * hard-swish(3u)/3 at u = x / QA: zero at -QA and 0,
    smallest (-QA**2/8) at -QA/2, QA**2 at QA; with b = QA the output is that gate * QA >> shift."""
    qa, shift = 127, 14
    xs = [-32768, -127, -64, 0, 64, 127, 32767]
    acc = np.zeros((2, 2 * len(xs)), np.int16)
    acc[0, :len(xs)] = xs
    acc[0, len(xs):] = qa
    out = np.empty(2 * len(xs), np.int16)
    ft_activate(acc, 0, FT_HSWISH_GLU, qa, shift, gate_table(qa), out)
    u = np.clip(np.array(xs), -qa, qa) / qa
    hswish = 3 * u * np.clip(3 * u + 3, 0, 6) / 6 / 3  # hard-swish(3u) / 3
    expected = np.floor(hswish * qa**3 / 2**shift + 1e-9).astype(np.int64)
    assert out[:len(xs)].tolist() == expected.tolist() == [0, 0, -16, 0, 47, 125, 125]


def test_lut_reads_the_table_at_the_clamped_accumulator():
    """T[clamp(a, -QA, QA) + QA] * clamp(b, -QA, QA) >> shift: changing one table entry changes
    exactly the outputs whose accumulator indexes it."""
    qa = 127
    table = np.zeros(2 * qa + 1, np.int32)
    table[qa + 5] = 100
    table[0] = -qa
    acc = np.zeros((2, 8), np.int16)
    acc[0, :4] = [5, -32768, 6, 4]
    acc[0, 4:] = [127, 127, 127, 32767]
    out = np.empty(8, np.int16)
    ft_activate(acc, 0, FT_LUT_GLU, qa, 7, table, out)
    assert out[:4].tolist() == [100 * 127 >> 7, -127 * 127 >> 7, 0, 0]


def test_signed_output_matches_the_network_table():
    for act in FT_ACTIVATIONS.values():
        assert signed_output(act.code) == act.signed


@pytest.mark.parametrize("isa", [simd.ISA_PORTABLE, simd.ISA_AVX2], ids=["portable", "simd"])
@pytest.mark.parametrize("code,qa,shift,paired,top", CASES)
def test_ft_transform_bytes(code, qa, shift, paired, top, isa):
    """The first layer's input bytes: the activation's outputs, signed ones as x + 128, zeros
    after them; the SIMD branches (pairwise, glu, bilinear in 16-bit lanes; emulated where the
    CPU lacks AVX2) give the bytes of the plain loops."""
    rng = np.random.default_rng(code * 7 + qa)
    l1 = 128
    n = l1 if paired else 2 * l1
    table = gate_table(qa)
    scratch = np.zeros(2 * l1, np.int16)
    out = np.full(n + 32, 77, np.uint8)
    # every pair of edge values as (a, b) of one output: 3 accumulators of 2 x 64 pairs
    pairs = np.array(list(itertools.product(EDGES, repeat=2)) * 2, np.int16)[: 3 * l1].reshape(3, 2, l1 // 2, 2)
    accs = [np.concatenate([p[..., 0], p[..., 1]], axis=1) for p in pairs]
    accs += [rng.integers(-32768, 32768, (2, l1), dtype=np.int16), rng.integers(-2 * qa, 2 * qa, (2, l1), dtype=np.int16)]
    offset = 128 if signed_output(code) else 0
    for acc in accs:
        for stm in (0, 1):
            ft_transform(acc, stm, code, qa, shift, isa, table, scratch, out)
            np.testing.assert_array_equal(out[:n].astype(np.int64), reference(code, acc, stm, qa, shift) + offset)
            assert (out[n:] == 0).all()

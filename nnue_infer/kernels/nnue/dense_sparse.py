"""The first dense layer over the non-zero 4-byte chunks of its input only (Stockfish 16's
``AffineTransformSparseInput``, PR #4612: ``find_nnz`` lists the non-zero int32 words of the
feature transformer's output, then each listed block is multiplied with its weights).

The weights are the block layout the dense kernels already use (``network.block_layout``: block
``b``'s weights for all outputs are contiguous, ``n_out * 4`` bytes at ``w_off + 4 * b * n_out``),
so a listed block is one broadcast and one ``vpdpbusd`` per 16 outputs (two ``ymm`` ones on the
256-bit paths). The int32 sums wrap, so any order of blocks gives the dense kernel's bits; AVX2's
``vpmaddubsw`` is used per block under the same rule as the dense layer (``simd.first_layer_isa``):
exact where the dense path is.

A zero block adds nothing to any sum; signed activations store x + 128 (zero is the byte 128),
so their blocks are never zero and this layer is for unsigned ones only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import simd
from ..refcount import last_use
from ..simd import (FC0_AVX2_PAIRED, FC0_AVX2_WIDE, ISA_AVX2, ISA_AVXVNNI, ISA_VNNI512, TARGET_AVX2, TARGET_VNNI256,
                    TARGET_VNNI512)
from .dense import dot4_ymm


@njit(cache=True, inline="always")
def find_nnz(x, x_off, n_in, nnz):
    """Write to ``nnz`` (int32[>= n_in / 4 + 16]: a compressing store may write a whole group of 16)
    the indices of the 4-byte blocks of ``x[x_off:x_off + n_in]`` that are not all zero, in order;
    returns how many.  Groups of 16 blocks go through ``simd.nnz_blocks16`` (a vector compare and
    ``vpcompressd``), the rest one block at a time (branch-free)."""
    count = 0
    n_blocks = n_in // 4
    b = 0
    while b + 16 <= n_blocks:
        count += simd.nnz_blocks16(x, x_off + 4 * b, nnz, count, b)
        b += 16
    while b < n_blocks:
        i = np.uint64(x_off + 4 * b)
        v = x[i] | x[i + np.uint64(1)] | x[i + np.uint64(2)] | x[i + np.uint64(3)]
        nnz[count] = b
        count += v != 0
        b += 1
    return count


@njit(cache=True, forceinline=True)
def sparse_zmm(x, x_off, weights, w_off, biases, b_off, n_out, z, z_off, nnz, count):
    """16 outputs per AVX-512 register (``n_out % 16 == 0``), four accumulators over the listed blocks."""
    step = 4 * n_out
    for g in range(0, n_out, 16):
        a0 = simd.load_i32x16(biases, b_off + g)
        a1 = simd.zero_i32x16()
        a2 = simd.zero_i32x16()
        a3 = simd.zero_i32x16()
        w = w_off + 4 * g
        k = 0
        while k + 4 <= count:
            b0, b1, b2, b3 = nnz[k], nnz[k + 1], nnz[k + 2], nnz[k + 3]
            a0 = simd.dot4_vnni512(a0, x, x_off + 4 * b0, weights, w + b0 * step)
            a1 = simd.dot4_vnni512(a1, x, x_off + 4 * b1, weights, w + b1 * step)
            a2 = simd.dot4_vnni512(a2, x, x_off + 4 * b2, weights, w + b2 * step)
            a3 = simd.dot4_vnni512(a3, x, x_off + 4 * b3, weights, w + b3 * step)
            k += 4
        while k < count:
            b0 = nnz[k]
            a0 = simd.dot4_vnni512(a0, x, x_off + 4 * b0, weights, w + b0 * step)
            k += 1
        simd.store_i32x16(z, z_off + g, simd.add_i32x16(simd.add_i32x16(a0, a1), simd.add_i32x16(a2, a3)))


@njit(cache=True, forceinline=True)
def sparse_ymm(x, x_off, weights, w_off, biases, b_off, n_out, z, z_off, nnz, count, isa):
    """8 outputs per 256-bit register (``n_out % 8 == 0``), two accumulators over the listed blocks;
    ``isa`` as ``dense.dot4_ymm`` takes it (one block per instruction)."""
    step = 4 * n_out
    for g in range(0, n_out, 8):
        a0 = simd.load_i32x8(biases, b_off + g)
        a1 = simd.zero_i32x8()
        w = w_off + 4 * g
        k = 0
        while k + 2 <= count:
            b0, b1 = nnz[k], nnz[k + 1]
            a0 = dot4_ymm(a0, x, x_off + 4 * b0, weights, w + b0 * step, isa)
            a1 = dot4_ymm(a1, x, x_off + 4 * b1, weights, w + b1 * step, isa)
            k += 2
        if k < count:
            b0 = nnz[k]
            a0 = dot4_ymm(a0, x, x_off + 4 * b0, weights, w + b0 * step, isa)
        simd.store_i32x8(z, z_off + g, simd.add_i32x8(a0, a1))


@njit(cache=True, forceinline=True)
def sparse_portable(x, x_off, weights, w_off, biases, b_off, n_out, z, z_off, nnz, count):
    """Plain loops over the listed blocks."""
    for i in range(n_out):
        z[np.uint64(z_off + i)] = biases[np.uint64(b_off + i)]
    for k in range(count):
        b = nnz[k]
        xi = np.uint64(x_off + 4 * b)
        x0 = np.int32(x[xi])
        x1 = np.int32(x[xi + np.uint64(1)])
        x2 = np.int32(x[xi + np.uint64(2)])
        x3 = np.int32(x[xi + np.uint64(3)])
        row = w_off + b * n_out * 4
        for i in range(n_out):
            w = np.uint64(row + 4 * i)
            z[np.uint64(z_off + i)] += ((x0 * weights[w] + x1 * weights[w + np.uint64(1)])
                                        + (x2 * weights[w + np.uint64(2)] + x3 * weights[w + np.uint64(3)]))


@njit(cache=True, inline="always")
def first_layer_sparse(x, x_off, n_in, weights, w_off, biases, b_off, n_out, z, z_off, fc0_isa, nnz):
    """``z[z_off:z_off + n_out] = biases + W @ x[x_off:x_off + n_in]`` as ``dense.affine`` computes it
    (same arguments, W in the block layout at ``w_off``, ``fc0_isa`` from ``simd.first_layer_isa``),
    reading only the non-zero 4-byte blocks of ``x`` (listed in ``nnz``, int32[>= n_in / 4 + 16], a
    buffer of the caller's); returns how many blocks were non-zero."""
    count = find_nnz(x, x_off, n_in, nnz)
    if TARGET_VNNI512 and fc0_isa == ISA_VNNI512 and n_out % 16 == 0:
        sparse_zmm(x, x_off, weights, w_off, biases, b_off, n_out, z, z_off, nnz, count)
    elif ((TARGET_VNNI256 and (fc0_isa == ISA_VNNI512 or fc0_isa == ISA_AVXVNNI))
          or (TARGET_AVX2 and (fc0_isa == ISA_AVX2 or fc0_isa == FC0_AVX2_WIDE or fc0_isa == FC0_AVX2_PAIRED))) \
            and n_out % 8 == 0:
        # the paired path's two-block int16 sums are exact, so one block's alone is (vpmaddubsw)
        isa = np.int64(ISA_AVX2) if fc0_isa == FC0_AVX2_PAIRED else np.int64(fc0_isa)
        sparse_ymm(x, x_off, weights, w_off, biases, b_off, n_out, z, z_off, nnz, count, isa)
    else:
        sparse_portable(x, x_off, weights, w_off, biases, b_off, n_out, z, z_off, nnz, count)
    last_use((x, weights, biases, z, nnz))
    return count

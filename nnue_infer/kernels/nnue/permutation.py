"""Zero-chunk statistics of a feature-transformer output and the search for a neuron order that
puts its zeros into whole 4-byte chunks (``nnue_infer.inspection.permutation`` drives them).

Inputs are bit matrices: row ``m`` of ``bits`` (int64[M, W]) has bit ``s`` set when output neuron
``m`` of one perspective's half is zero in sample ``s`` (a sample is one perspective's half of one
position's output; padding bits beyond the samples are 0, never counted as zero). An *order* is an
int64[M] array: position ``p`` of the permuted output holds the original neuron ``order[p]``;
chunk ``c`` is positions ``4c .. 4c + 3``. The objective is the number of (chunk, sample) pairs
whose four neurons are all zero, :func:`all_zero_chunks`.

The idea (group neurons by how often they are zero together, then improve by exchanging neurons
between chunks) is nnue-pytorch's ``ftperm.py`` (official-stockfish/nnue-pytorch, algorithm by
Daniel Monroe); this is an independent CPU implementation over packed bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..chess.bitboard import popcount

#: Bytes of the feature-transformer output the first dense layer skips as one unit (Stockfish's
#: ``find_nnz`` reads the output as int32 words).
CHUNK = 4


@njit(cache=True)
def all_zero_chunks(bits, order):
    """Number of (chunk, sample) pairs whose ``CHUNK`` neurons are all zero under ``order``
    (int64; chunks of fewer than ``CHUNK`` neurons at the end are not counted)."""
    M, W = bits.shape
    total = 0
    for c in range(M // CHUNK):
        for w in range(W):
            x = bits[order[CHUNK * c], w]
            for k in range(1, CHUNK):
                x &= bits[order[CHUNK * c + k], w]
            total += popcount(x)
    return total


@njit(cache=True)
def greedy_order(bits):
    """An order built chunk by chunk: each chunk starts with the unplaced neuron that is zero most
    often, then takes, three times, the unplaced neuron whose zeros overlap most with the
    samples where every neuron of the chunk so far is zero (ties: the one zero more often).

    Returns int64[M]; neurons left over after the last full chunk come last, most often zero first.
    """
    M, W = bits.shape
    zeros = np.zeros(M, np.int64)
    for m in range(M):
        for w in range(W):
            zeros[m] += popcount(bits[m, w])
    placed = np.zeros(M, np.bool_)
    order = np.empty(M, np.int64)
    common = np.empty(W, np.int64)
    for c in range(M // CHUNK):
        seed = -1
        for m in range(M):
            if not placed[m] and (seed < 0 or zeros[m] > zeros[seed]):
                seed = m
        placed[seed] = True
        order[CHUNK * c] = seed
        common[:] = bits[seed]
        for k in range(1, CHUNK):
            best, best_overlap = -1, -1
            for m in range(M):
                if placed[m]:
                    continue
                overlap = 0
                for w in range(W):
                    overlap += popcount(common[w] & bits[m, w])
                if overlap > best_overlap or (overlap == best_overlap and zeros[m] > zeros[best]):
                    best, best_overlap = m, overlap
            placed[best] = True
            order[CHUNK * c + k] = best
            for w in range(W):
                common[w] &= bits[best, w]
    p = M // CHUNK * CHUNK
    while p < M:
        best = -1
        for m in range(M):
            if not placed[m] and (best < 0 or zeros[m] > zeros[best]):
                best = m
        placed[best] = True
        order[p] = best
        p += 1
    return order


@njit(cache=True, parallel=True)
def swap_gains(bits, order, gains):
    """``gains[i, j]`` (int64[M, M]): the change of :func:`all_zero_chunks` when the neurons at
    positions ``i`` and ``j`` of ``order`` (in different full chunks) exchange places; 0 for two
    positions of one chunk or outside the full chunks."""
    M, W = bits.shape
    n_full = M // CHUNK * CHUNK
    rest = np.empty((M, W), np.int64)  # rest[i]: samples where the other neurons of i's chunk are zero
    current = np.zeros(M, np.int64)  # all-zero samples of i's chunk as it is
    for i in prange(n_full):
        base = i // CHUNK * CHUNK
        for w in range(W):
            x = np.int64(-1)
            for k in range(CHUNK):
                if base + k != i:
                    x &= bits[order[base + k], w]
            rest[i, w] = x
            current[i] += popcount(x & bits[order[i], w])
    for i in prange(M):
        for j in range(M):
            if i >= n_full or j >= n_full or i // CHUNK == j // CHUNK:
                gains[i, j] = 0
                continue
            ni, nj = order[i], order[j]
            a = 0
            b = 0
            for w in range(W):
                a += popcount(rest[i, w] & bits[nj, w])
                b += popcount(rest[j, w] & bits[ni, w])
            gains[i, j] = a - current[i] + b - current[j]


@njit(cache=True)
def apply_best_swaps(gains, order):
    """Exchange, best first, the position pairs of positive gain whose chunks no earlier exchange of
    this round touched (so each gain is still exact when applied); returns the total gain."""
    M = order.size
    flat = np.argsort(-gains.ravel())
    used = np.zeros(M // CHUNK + 1, np.bool_)
    total = 0
    for f in flat:
        i, j = f // M, f % M
        g = gains[i, j]
        if g <= 0:
            break
        if i > j or used[i // CHUNK] or used[j // CHUNK]:
            continue
        used[i // CHUNK] = True
        used[j // CHUNK] = True
        order[i], order[j] = order[j], order[i]
        total += g
    return total

"""Batch kernels: validate and evaluate many positions, spread over all cores with ``prange``.

Each thread takes contiguous chunks of rows and owns its scratch buffers (features,
accumulators, transformed features), so a row is evaluated exactly as
:func:`~nnue_infer.kernels.forward.evaluate_bitboards` evaluates a single position.
The number of threads is Numba's (``numba.set_num_threads``).  Every architecture the
single-position kernels handle (feature sets, activations, float hidden layers) is handled
here too, since the work is theirs.

Note: Numba's on-disk cache keys a function on its own file only, so a change to a kernel
that this module calls must come with an edit of this file (or a cleared ``__pycache__``).
Last such change: the first dense layer reads row-major weights (``affine_int16_input``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .features import BB_KINGS, BB_PAWNS, BB_BLACK, BB_WHITE
from .forward import evaluate_bitboards

#: Per-row result codes of :func:`check_bitboards` / :func:`evaluate_batch` (0: valid).
(POS_OK, POS_WHITE_KINGS, POS_BLACK_KINGS, POS_TOO_MANY_PIECES, POS_BACK_RANK_PAWN, POS_INCONSISTENT) = range(6)

@njit(cache=True)
def popcount(x):
    """Number of set bits of the int64 ``x`` (all 64 bits)."""
    n = 0
    while x != 0:
        x &= x - 1
        n += 1
    return n


@njit(cache=True)
def check_bitboards(bitboards, max_pieces):
    """Whether a king-bucketed feature set can represent the position in ``bitboards``.

    ``bitboards`` is int64[8] (pawns, knights, bishops, rooks, queens, kings, white, black).
    Returns ``POS_OK`` or the first problem: a side without exactly one king, more than
    ``max_pieces`` pieces, a pawn on the first or last rank, or bitboards that contradict
    each other (a square with two piece types or both colours, or a piece without colour).
    The same rules as :func:`nnue_infer.features.check_position`.
    """
    pieces = np.int64(0)
    overlap = np.int64(0)
    for k in range(BB_KINGS + 1):
        overlap |= pieces & bitboards[k]
        pieces |= bitboards[k]
    white = bitboards[BB_WHITE]
    black = bitboards[BB_BLACK]
    if overlap != 0 or (white & black) != 0 or pieces != (white | black):
        return POS_INCONSISTENT
    kings = bitboards[BB_KINGS]
    if popcount(kings & white) != 1:
        return POS_WHITE_KINGS
    if popcount(kings & black) != 1:
        return POS_BLACK_KINGS
    if popcount(pieces) > max_pieces:
        return POS_TOO_MANY_PIECES
    pawns = bitboards[BB_PAWNS]
    if (pawns & 0xFF) != 0 or ((pawns >> 56) & 0xFF) != 0:
        return POS_BACK_RANK_PAWN
    return POS_OK


@njit(parallel=True, cache=True)
def evaluate_batch(bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights,
                   weights, biases, layers, max_pieces, ft_out_width, n_chunks, values, codes):
    """Validate and evaluate ``n`` positions with full refreshes, in parallel.

    Parameters
    ----------
    bitboards : int64[n, 8]
        Per row: pawns, knights, bishops, rooks, queens, kings, white, black (a1 = bit 0).
    stm : uint8[n]
        Side to move, 0 White, 1 Black.
    slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights, biases, layers
        The feature set's tables, scalar parameters and the network's arrays, as for
        :func:`~nnue_infer.kernels.forward.evaluate_bitboards`.
    max_pieces : int
        Most pieces the feature set accepts (32); the width of the feature scratch buffer.
    ft_out_width : int
        Width of the feature transformer's activated output (int16 scratch buffer).
    n_chunks : int
        Number of contiguous chunks of rows, each with its own scratch buffers (a few per
        thread balance uneven rows; clipped to ``1..n``).
    values : int32[n]
        Output: the value of each valid row in internal units, side to move's point of
        view (0 for invalid rows).
    codes : int32[n]
        Output: ``POS_OK`` or the row's problem (see :func:`check_bitboards`).
    """
    n = bitboards.shape[0]
    l1 = ft_biases.shape[0]
    n_psqt = psqt_weights.shape[1]
    n_chunks = max(1, min(n, n_chunks))
    for c in prange(n_chunks):
        feats = np.empty((2, max_pieces), np.int32)
        counts = np.empty(2, np.int64)
        acc = np.empty((2, l1), np.int16)
        psqt_acc = np.empty((2, n_psqt), np.int32)
        ft_out = np.empty(ft_out_width, np.int16)
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            code = check_bitboards(bitboards[i], max_pieces)
            codes[i] = code
            if code != POS_OK:
                values[i] = 0
                continue
            values[i] = evaluate_bitboards(bitboards[i], np.int64(stm[i]), slot_table, king_buckets, params,
                                           ft_weights, ft_biases, psqt_weights, weights, biases, layers,
                                           feats, counts, acc, psqt_acc, ft_out)

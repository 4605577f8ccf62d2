"""Batch kernels behind :func:`nnue_infer.features.indices.features_batch`: position checks and
threat / pawn-pair indices of many positions (the piece-square indices come from
:func:`nnue_infer.kernels.features.active_features_batch`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .features import check_bitboards
from .threats import active_relation_features


@njit(cache=True)
def check_bitboards_batch(bitboards, max_pieces, codes):
    """:func:`~nnue_infer.kernels.features.check_bitboards` of every row of ``bitboards``
    int64[n, 8] into ``codes`` int8[n]."""
    for i in range(bitboards.shape[0]):
        codes[i] = check_bitboards(bitboards[i], max_pieces)


@njit(cache=True)
def active_relation_features_batch(bitboards, threats, pairs, out, counts):
    """:func:`~nnue_infer.kernels.threats.active_relation_features` of many positions.

    ``bitboards`` int64[n, 8]; ``out`` int32[n, 2, >= MAX_RELATIONS] receives each position's
    indices (White's perspective, then Black's; the relation list's order, entries past the
    count left as they were); ``counts`` int64[n, 2].  The caller guarantees one king per side.
    """
    for i in range(bitboards.shape[0]):
        active_relation_features(bitboards[i], threats, pairs, np.int64(0), out[i], counts[i])

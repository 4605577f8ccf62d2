"""Whole-network kernels: accumulators -> feature-transformer activation -> layer stack -> value.

Scalar parameters travel in one int64 array (see ``P_*`` below) so a call unboxes few
arguments.  Source: Stockfish 15.1, ``nnue/evaluate_nnue.cpp`` (``evaluate``, ``trace_evaluate``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .accumulator import refresh_accumulator
from .activation import ft_activate
from .dense import propagate_layer_stack, psqt_term, tdiv
from .features import active_features

#: Indices into the ``params`` int64 array.
(P_FT_CLAMP, P_FT_SHIFT, P_WEIGHT_SHIFT, P_SKIP_INDEX, P_SKIP_NUM, P_SKIP_DEN, P_OUTPUT_SCALE,
 P_NUM_SLOTS, P_MIRROR, P_BUCKET_DIVISOR, P_FT_ACTIVATION) = range(11)
N_PARAMS = 11


@njit(cache=True)
def forward_bucket(acc, psqt_acc, stm, bucket, params, ft_out, weights, biases, layers):
    """PSQT term and layer-stack output ("positional") for one bucket.

    ``acc`` int16[2, L1] and ``psqt_acc`` int32[2, P] are both perspectives' accumulators
    (row 0 White); ``ft_out`` int16[ft_output_width] is scratch.  Returns ``(psqt, positional)`` in
    internal units times OutputScale, side to move's point of view.
    """
    ft_activate(acc, stm, params[P_FT_ACTIVATION], params[P_FT_CLAMP], params[P_FT_SHIFT], ft_out)
    positional = propagate_layer_stack(ft_out, bucket, weights, biases, layers, params[P_WEIGHT_SHIFT],
                                       params[P_SKIP_INDEX], params[P_SKIP_NUM], params[P_SKIP_DEN])
    return psqt_term(psqt_acc, stm, bucket), positional


@njit(cache=True)
def refresh_both(bitboards, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights,
                 feats, counts, acc, psqt_acc):
    """Features of both perspectives from bitboards, then refresh both accumulators.

    Returns the number of pieces on the board.
    """
    active_features(bitboards, slot_table, king_buckets, params[P_MIRROR], params[P_NUM_SLOTS], feats, counts)
    for p in range(2):
        refresh_accumulator(ft_weights, ft_biases, psqt_weights, feats[p], counts[p], acc[p], psqt_acc[p])
    return counts[0]


@njit(cache=True)
def evaluate_bitboards(bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights,
                       weights, biases, layers, feats, counts, acc, psqt_acc, ft_out):
    """Full-refresh evaluation of one position.

    Parameters are the validated bitboards (int64[8], see ``kernels.features``), the side
    to move (0 White, 1 Black), the feature set's tables, ``params`` (int64[N_PARAMS]),
    the network's arrays (compute layout) and scratch buffers: ``feats`` int32[2, 32],
    ``counts`` int64[2], ``acc`` int16[2, L1], ``psqt_acc`` int32[2, P], ``ft_out`` int16[ft_output_width].

    Returns the value ``tdiv(psqt + positional, OutputScale)`` in internal units from the
    side to move's point of view (Stockfish's ``NNUE::evaluate(pos, false)``).
    """
    pieces = refresh_both(bitboards, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights,
                          feats, counts, acc, psqt_acc)
    bucket = (pieces - 1) // params[P_BUCKET_DIVISOR]
    psqt, positional = forward_bucket(acc, psqt_acc, stm, bucket, params, ft_out, weights, biases, layers)
    return tdiv(np.int64(psqt) + positional, params[P_OUTPUT_SCALE])


@njit(cache=True)
def trace_buckets(acc, psqt_acc, stm, params, ft_out, weights, biases, layers, out):
    """Fill ``out`` int64[n_buckets, 2] with (psqt, positional) of every bucket (side to move's view)."""
    for b in range(out.shape[0]):
        psqt, positional = forward_bucket(acc, psqt_acc, stm, b, params, ft_out, weights, biases, layers)
        out[b, 0] = psqt
        out[b, 1] = positional

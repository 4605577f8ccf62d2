"""Feature-transformer accumulator kernels: refresh and incremental update.

The accumulator of one perspective is ``bias + sum of the weight rows of its active
features`` in int16 with wrap-around (Stockfish adds 16-bit lanes), and the PSQT
accumulator is the int32 sum of the PSQT rows (no bias).

Source: Stockfish 15.1, ``nnue/nnue_feature_transformer.h`` (``update_accumulator``,
``update_accumulator_refresh``).
"""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def refresh_accumulator(weights, biases, psqt_weights, features, count, acc, psqt):
    """Recompute one perspective's accumulator from scratch.

    Parameters
    ----------
    weights : int16[F, L]
        Feature-transformer weights, one row per feature.
    biases : int16[L]
        Feature-transformer biases.
    psqt_weights : int32[F, P]
        PSQT weights (P may be 0).
    features : int32[>= count]
        Active feature indices; only the first ``count`` are read.
    acc : int16[L]
        Output accumulator (wraps modulo 2**16 like Stockfish).
    psqt : int32[P]
        Output PSQT accumulator.
    """
    acc[:] = biases
    psqt[:] = 0
    for k in range(count):
        f = features[k]
        row = weights[f]
        for j in range(acc.shape[0]):
            acc[j] += row[j]
        prow = psqt_weights[f]
        for j in range(psqt.shape[0]):
            psqt[j] += prow[j]


@njit(cache=True)
def update_accumulator(weights, psqt_weights, src_acc, src_psqt, added, n_added, removed, n_removed, acc, psqt):
    """Incremental update: ``acc = src_acc + rows(added) - rows(removed)``.

    ``src_acc``/``acc`` are int16[L], ``src_psqt``/``psqt`` int32[P]; ``added`` and
    ``removed`` are int32 feature indices of which the first ``n_added`` /
    ``n_removed`` are used.  ``acc`` may be the same array as ``src_acc``.
    Bit-identical to a refresh because int16 addition wraps.
    """
    acc[:] = src_acc
    psqt[:] = src_psqt
    for k in range(n_removed):
        row = weights[removed[k]]
        for j in range(acc.shape[0]):
            acc[j] -= row[j]
        prow = psqt_weights[removed[k]]
        for j in range(psqt.shape[0]):
            psqt[j] -= prow[j]
    for k in range(n_added):
        row = weights[added[k]]
        for j in range(acc.shape[0]):
            acc[j] += row[j]
        prow = psqt_weights[added[k]]
        for j in range(psqt.shape[0]):
            psqt[j] += prow[j]

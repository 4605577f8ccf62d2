"""Batch kernels: validate and evaluate many positions, spread over all cores with ``prange``.

Each thread takes contiguous chunks of rows and owns its scratch buffers (features,
accumulators, transformed features), so a row is evaluated exactly as
:func:`~nnue_infer.kernels.nnue.forward.evaluate_refresh` evaluates a single position.  The kernels
are made per ``forward.Config`` (:func:`kernels`), like the single-position ones.
The number of threads is Numba's (``numba.set_num_threads``).  Every architecture the
single-position kernels handle (feature sets, activations, float hidden layers) is handled
here too, since the work is theirs.

The cached kernels here contain the kernels they inline from other files: their cache is stamped
with the contents of every kernel file (:mod:`nnue_infer.kernels.cache`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..chess.bitboard import POS_OK, check_bitboards
from ..chess.fen import FEN_OK, parse_fen
from .forward import INVALID_POSITION, Config, evaluate_refresh, stages


@njit(cache=True, inline="always")
def evaluate_row(i, bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8,
                 psqt8, weights, biases, layers, max_pieces, feats, counts, acc, psqt_acc, scratch, values, codes,
                 refresh, value):
    """Evaluate row ``i``'s bitboards (int64[8]) into ``values[i]`` (0 if the position cannot be
    represented) and its :func:`~nnue_infer.kernels.chess.bitboard.check_bitboards` code into ``codes[i]``."""
    value = evaluate_refresh(bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights,
                             weights8, psqt8, weights, biases, layers, feats, counts, acc, psqt_acc, scratch,
                             refresh, value)
    if value == INVALID_POSITION:
        values[i] = 0
        codes[i] = check_bitboards(bitboards, max_pieces)
    else:
        values[i] = value
        codes[i] = POS_OK


class Kernels(NamedTuple):
    """The batch kernels of one ``forward.Config`` (see :func:`kernels`)."""

    evaluate_batch: object
    evaluate_fens: object


@functools.cache
def kernels(config: Config) -> Kernels:
    """``evaluate_batch`` and ``evaluate_fens`` specialised for ``config`` (compile-time constants,
    as in :func:`forward.kernels <nnue_infer.kernels.nnue.forward.kernels>`).

    ``evaluate_batch(bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases,
    psqt_weights, weights8, psqt8, weights, biases, layers, max_pieces, scratch_len, n_chunks,
    values, codes)`` validates and evaluates ``n`` positions given as bitboards, with full
    refreshes, in parallel:

    bitboards : int64[n, 8]
        Per row: pawns, knights, bishops, rooks, queens, kings, white, black (a1 = bit 0).
    stm : uint8[n]
        Side to move, 0 White, 1 Black.
    slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8, psqt8, weights, biases, layers
        The feature set's tables, scalar parameters and the network's arrays, as for
        :func:`~nnue_infer.kernels.nnue.forward.evaluate_refresh`.
    max_pieces : int
        Most pieces the feature set accepts (32); the width of the feature scratch buffer.
    scratch_len : int
        Size of the int16 scratch buffer: the feature transformer's activated output and the
        layer stack's buffers (``dense.scratch_size(layers)``), then the threat / pawn-pair
        scratch (``forward.relation_scratch_size``).
    n_chunks : int
        Number of contiguous chunks of rows, each with its own scratch buffers (clipped to
        ``1..n``).  Many small chunks, handed out one at a time
        (``numba.parallel_chunksize(1)``), keep both cores busy when one is slowed down.
    values : int32[n]
        Output: the value of each valid row in internal units, side to move's point of
        view (0 for invalid rows).
    codes : int32[n]
        Output: ``POS_OK`` or the row's problem (see :func:`~nnue_infer.kernels.chess.bitboard.check_bitboards`).

    ``evaluate_fens(buf, offsets, slot_table, ..., layers, max_pieces, scratch_len, n_chunks,
    values, fen_codes, fen_offsets, codes)`` parses, validates and evaluates ``n`` FENs in one
    parallel pass.  ``buf`` (uint8) and ``offsets`` (int64[n + 1]) hold the FENs as for
    :func:`~nnue_infer.kernels.chess.fen.parse_fen`; ``fen_codes`` (int32[n]) and ``fen_offsets``
    (int64[n], offset within the row, -1 when valid) receive its per-row result.  Rows that
    parse are then checked and evaluated as by ``evaluate_batch`` (``codes``, ``values``);
    rows that do not get ``values`` 0 and ``codes`` ``POS_OK``.
    """
    made = stages(config)
    value, refresh = made.value, made.refresh

    @njit(parallel=True, cache=True)
    def evaluate_batch(bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights,
                       weights8, psqt8, weights, biases, layers, max_pieces, scratch_len, n_chunks, values, codes):
        n = bitboards.shape[0]
        n_chunks = max(1, min(n, n_chunks))
        for c in prange(n_chunks):
            feats = np.empty((2, max_pieces), np.int32)
            counts = np.empty(2, np.int64)
            acc = np.empty((2, ft_biases.shape[0]), np.int16)
            psqt_acc = np.empty((2, psqt_weights.shape[1]), np.int32)
            scratch = np.empty(scratch_len, np.int16)
            for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
                evaluate_row(i, bitboards[i], np.int64(stm[i]), slot_table, king_buckets, params, ft_weights,
                             ft_biases, psqt_weights, weights8, psqt8, weights, biases, layers, max_pieces, feats,
                             counts, acc, psqt_acc, scratch, values, codes, refresh, value)

    @njit(parallel=True, cache=True)
    def evaluate_fens(buf, offsets, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8,
                      psqt8, weights, biases, layers, max_pieces, scratch_len, n_chunks, values, fen_codes,
                      fen_offsets, codes):
        n = offsets.shape[0] - 1
        n_chunks = max(1, min(n, n_chunks))
        for c in prange(n_chunks):
            bitboards = np.empty(8, np.int64)
            feats = np.empty((2, max_pieces), np.int32)
            counts = np.empty(2, np.int64)
            acc = np.empty((2, ft_biases.shape[0]), np.int16)
            psqt_acc = np.empty((2, psqt_weights.shape[1]), np.int32)
            scratch = np.empty(scratch_len, np.int16)
            for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
                code, where, stm = parse_fen(buf, offsets[i], offsets[i + 1], bitboards)
                fen_codes[i] = code
                fen_offsets[i] = where - offsets[i] if where >= 0 else -1
                if code != FEN_OK:
                    values[i] = 0
                    codes[i] = POS_OK
                    continue
                evaluate_row(i, bitboards, np.int64(stm), slot_table, king_buckets, params, ft_weights, ft_biases,
                             psqt_weights, weights8, psqt8, weights, biases, layers, max_pieces, feats, counts, acc,
                             psqt_acc, scratch, values, codes, refresh, value)

    return Kernels(evaluate_batch, evaluate_fens)

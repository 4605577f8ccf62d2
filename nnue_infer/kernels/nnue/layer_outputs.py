"""Activations kernel: every intermediate array of many positions, on all cores.

One entry point, :func:`activations_batch`, built from the evaluation's own pieces: the
refresh of both accumulators (``forward.refresh_pair``), the feature-transformer activation
(``activation.ft_transform``), the layer stack (``dense.propagate_layer_stack``, which gives the
positional term exactly as :meth:`nnue_infer.Evaluator.evaluate` does) and, to record each
layer, its affine transform and activation again (``dense.affine`` on the same SIMD path,
``activation.activate``: the plain loops, which every SIMD path equals).  It is a separate
entry point from the evaluation kernels, so compiling it costs nothing until it is used.

Source: Stockfish 17.1 ``nnue/nnue_architecture.h`` (``propagate``: fc_0, ac_sqr_0, ac_0, fc_1,
ac_1, fc_2), ``nnue/nnue_feature_transformer.h`` (``transform``).
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit, prange

from .. import simd
from .activation import ACT_FLOAT, ACT_NONE, activate, ft_transform
from .dense import affine, propagate_layer_stack, psqt_term, scratch_layout
from ..chess.bitboard import POS_OK, check_bitboards
from .forward import (P_BUCKET_DIVISOR, P_FC0_SIMD, P_FLOAT_OUTPUT, P_FT_ACTIVATION, P_FT_CLAMP, P_FT_SHIFT, P_PAIRS,
                      P_SIMD, P_SKIP_DEN, P_SKIP_INDEX, P_SKIP_MODE, P_SKIP_NUM, P_SKIP_SUB, P_THREATS, P_WEIGHT_SHIFT,
                      bucket_value, refresh_pair, relation_buffers)


@njit(cache=True, inline="always")
def record_layers(scratch, bucket, weights, biases, layers, isa, fc0_isa, z_out, x_out):
    """Run the integer layers of layer stack ``bucket`` on the transformed features in
    ``scratch`` (as ``dense.propagate_layer_stack`` reads them) and record them.

    ``z_out`` int32 receives each integer layer's raw sums, layer after layer (``layers[l, 1]``
    each); ``x_out`` uint8 each activated layer's output bytes (``activation.activate``:
    ``layers[l, 3]`` or twice that for the concatenated SqrClippedReLU + ClippedReLU).  Stops after
    the output layer or at the first float layer (the integer layer before it is recorded
    raw only: its activation is computed in float).
    """
    ft_bytes, oz, ox, _, _ = scratch_layout(layers)
    n16 = scratch.shape[0]
    b8 = carray(simd.data_pointer(scratch, np.uint8), (2 * n16,))
    z = carray(simd.data_pointer(scratch, np.int32), (n16 >> 1,))
    zo = oz // 2
    xo = 2 * ox
    zpos = 0
    xpos = 0
    for l in range(layers.shape[0]):
        n_in = layers[l, 0]
        n_out = layers[l, 1]
        code = layers[l, 2]
        src = 2 * ft_bytes if l == 0 else xo + layers[l, 9]
        affine(b8, src, n_in, weights, layers[l, 4] + bucket * layers[l, 5], biases,
               layers[l, 6] + bucket * layers[l, 7], n_out, z, zo, fc0_isa if l == 0 else isa)
        for i in range(n_out):
            z_out[zpos + i] = z[zo + i]
        zpos += n_out
        if code == ACT_NONE or layers[l + 1, 2] >= ACT_FLOAT:
            break
        x_at = xo + layers[l, 10]
        written = activate(z, zo, layers[l, 3], code, layers[l, 8], b8, x_at)
        for i in range(written):
            x_out[xpos + i] = b8[x_at + i]
        xpos += written
        for i in range(x_at + written, x_at + (written + 31) // 32 * 32):
            b8[i] = 0


@njit(parallel=True, cache=True)
def activations_batch(bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8,
                      psqt8, weights, biases, layers, max_pieces, scratch_len, n_chunks, all_buckets, accs, psqts,
                      ft_bytes_out, buckets, z_out, x_out, positional, values, codes):
    """Refresh, transform and propagate ``n`` positions, keeping every intermediate array.

    Parameters
    ----------
    bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8, psqt8, weights, biases, layers, max_pieces, scratch_len, n_chunks
        As for :func:`nnue_infer.kernels.nnue.batch.evaluate_batch`.
    all_buckets : int
        1: run every layer stack (``z_out.shape[1]`` of them); 0: only the position's bucket.
    accs : int16[n, 2, L1], psqts : int32[n, 2, P]
        Output: both perspectives' accumulators (row 0 White) and PSQT accumulators.
    ft_bytes_out : uint8[n, F]
        Output: the first layer's input bytes, side to move's half first (signed outputs as x + 128).
    buckets : int32[n]
        Output: the position's bucket.
    z_out : int32[n, k, Z], x_out : uint8[n, k, X]
        Output: per layer stack run (k = 1 or all), the recorded layers (:func:`record_layers`).
    positional : int32[n, k]
        Output: the layer stack's result with the forward skip (internal units x OutputScale).
    values : int32[n]
        Output: the value, as :func:`nnue_infer.kernels.nnue.forward.evaluate_bitboards`.
    codes : int32[n]
        Output: ``POS_OK`` or the row's problem (the row's other outputs are then left as they were).
    """
    n = bitboards.shape[0]
    n_chunks = max(1, min(n, n_chunks))
    n_ft = ft_bytes_out.shape[1]
    for c in prange(n_chunks):
        feats = np.empty((2, max_pieces), np.int32)
        counts = np.empty(2, np.int64)
        scratch = np.zeros(scratch_len, np.int16)
        rel, idx = relation_buffers(scratch, layers, params)
        ft_in = scratch_layout(layers)[0]
        ft_bytes = scratch[ft_in:].view(np.uint8)[:layers[0, 0]]
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            codes[i] = check_bitboards(bitboards[i], max_pieces)
            if codes[i] != POS_OK:
                continue
            acc = accs[i]  # refreshed in place: no copy of the accumulators
            psqt_acc = psqts[i]
            pieces = refresh_pair(bitboards[i], slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights,
                                  weights8, psqt8, feats, counts, acc, psqt_acc, rel, idx, params[P_SIMD],
                                  params[P_THREATS] != 0 or params[P_PAIRS] != 0)
            side = np.int64(stm[i])
            bucket = (pieces - 1) // params[P_BUCKET_DIVISOR]
            buckets[i] = bucket
            ft_transform(acc, side, params[P_FT_ACTIVATION], params[P_FT_CLAMP], params[P_FT_SHIFT], params[P_SIMD],
                         biases, scratch, ft_bytes)
            for j in range(n_ft):
                ft_bytes_out[i, j] = ft_bytes[j]
            for k in range(z_out.shape[1]):
                b = k if all_buckets else bucket
                result = propagate_layer_stack(scratch, b, weights, biases, layers, params[P_WEIGHT_SHIFT],
                                               params[P_SKIP_INDEX], params[P_SKIP_SUB], params[P_SKIP_MODE],
                                               params[P_SKIP_NUM], params[P_SKIP_DEN], params[P_FLOAT_OUTPUT],
                                               params[P_SIMD], params[P_FC0_SIMD], True)
                positional[i, k] = result
                if b == bucket:
                    values[i] = bucket_value(psqt_term(psqt_acc, side, b), result, params)
                record_layers(scratch, b, weights, biases, layers, params[P_SIMD], params[P_FC0_SIMD], z_out[i, k],
                              x_out[i, k])

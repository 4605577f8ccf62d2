"""Feature-transformer accumulator kernels: refresh and incremental update.

The accumulator of one perspective is ``bias + sum of the weight rows of its active
features`` in int16 with wrap-around (Stockfish adds 16-bit lanes), and the PSQT
accumulator is the int32 sum of the PSQT rows (no bias).

Source: Stockfish 15.1, ``nnue/nnue_feature_transformer.h`` (``update_accumulator``,
``update_accumulator_refresh``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import simd
from .features import changed_features, count_changes, king_frame, king_square
from .threats import MAX_RELATIONS, relation_changes, relation_indices, relation_list, relation_orientation

#: Size of the int64 scratch of :func:`update_relations` (two relation lists, their difference)
#: and of its int32 index scratch.
RELATION_SCRATCH = 4 * MAX_RELATIONS
INDEX_SCRATCH = 2 * MAX_RELATIONS

#: Last axis of the ``state`` array that goes with an accumulator array (see
#: :func:`update_perspective`): the piece set's 8 bitboards, then a "computed" flag.
STATE_FLAG = 8
STATE_COLUMNS = 9


@njit(cache=True, inline="always")
def refresh_accumulator(weights, biases, psqt_weights, features, count, acc, psqt, isa):
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
    isa : int
        ``simd.ISA_*``; any SIMD path sums the rows in 16-bit vector registers (see
        :func:`update_rows`), ``ISA_PORTABLE`` in loops.

    Rows are added four at a time, so ``acc`` is loaded and stored once per four rows
    (about 1.5x faster than row by row); int16 wrap-around makes the order irrelevant.
    """
    width = acc.shape[0]
    if isa != simd.ISA_PORTABLE and width % 32 == 0:
        update_rows(biases, weights, features, count, features, 0, acc)
        psqt_rows(psqt_weights, features, count, psqt)
        return
    for j in range(width):
        acc[j] = biases[j]
    k = 0
    while k + 4 <= count:
        r0 = weights[features[k]]
        r1 = weights[features[k + 1]]
        r2 = weights[features[k + 2]]
        r3 = weights[features[k + 3]]
        for j in range(width):
            acc[j] += (r0[j] + r1[j]) + (r2[j] + r3[j])
        k += 4
    while k < count:
        row = weights[features[k]]
        for j in range(width):
            acc[j] += row[j]
        k += 1
    psqt_rows(psqt_weights, features, count, psqt)


@njit(cache=True, inline="always")
def psqt_rows(psqt_weights, features, count, psqt):
    """``psqt = sum of the PSQT rows of features[:count]`` (int32[P], no bias)."""
    for j in range(psqt.shape[0]):
        psqt[j] = 0
    for k in range(count):
        prow = psqt_weights[features[k]]
        for j in range(psqt.shape[0]):
            psqt[j] += prow[j]


@njit(cache=True, inline="always")
def update_rows(src, weights, added, n_added, removed, n_removed, acc):
    """``acc = src + rows(added[:n_added]) - rows(removed[:n_removed])`` in one pass, int16[L]
    with ``L % 32 == 0``: a tile of 256 lanes (32 if L is not a multiple of 256) stays in
    vector registers while every row is added or subtracted, then is stored once (Stockfish's
    register tiling; wide tiles read each row in long runs).  ``acc`` may be ``src``.
    Wrap-around as in the loops (bit-identical).
    """
    width = acc.shape[0]
    flat = weights.reshape(weights.shape[0] * width)
    if width % 256 == 0:
        for j in range(0, width, 256):
            v0 = simd.load_i16x64(src, j)
            v1 = simd.load_i16x64(src, j + 64)
            v2 = simd.load_i16x64(src, j + 128)
            v3 = simd.load_i16x64(src, j + 192)
            for k in range(n_added):
                r = added[k] * width + j
                v0 = simd.add_i16x64(v0, simd.load_i16x64(flat, r))
                v1 = simd.add_i16x64(v1, simd.load_i16x64(flat, r + 64))
                v2 = simd.add_i16x64(v2, simd.load_i16x64(flat, r + 128))
                v3 = simd.add_i16x64(v3, simd.load_i16x64(flat, r + 192))
            for k in range(n_removed):
                r = removed[k] * width + j
                v0 = simd.sub_i16x64(v0, simd.load_i16x64(flat, r))
                v1 = simd.sub_i16x64(v1, simd.load_i16x64(flat, r + 64))
                v2 = simd.sub_i16x64(v2, simd.load_i16x64(flat, r + 128))
                v3 = simd.sub_i16x64(v3, simd.load_i16x64(flat, r + 192))
            simd.store_i16x64(acc, j, v0)
            simd.store_i16x64(acc, j + 64, v1)
            simd.store_i16x64(acc, j + 128, v2)
            simd.store_i16x64(acc, j + 192, v3)
        return
    for j in range(0, width, 32):
        v0 = simd.load_i16x16(src, j)
        v1 = simd.load_i16x16(src, j + 16)
        for k in range(n_added):
            r = added[k] * width + j
            v0 = simd.add_i16x16(v0, simd.load_i16x16(flat, r))
            v1 = simd.add_i16x16(v1, simd.load_i16x16(flat, r + 16))
        for k in range(n_removed):
            r = removed[k] * width + j
            v0 = simd.sub_i16x16(v0, simd.load_i16x16(flat, r))
            v1 = simd.sub_i16x16(v1, simd.load_i16x16(flat, r + 16))
        simd.store_i16x16(acc, j, v0)
        simd.store_i16x16(acc, j + 16, v1)


@njit(cache=True, inline="always")
def update_accumulator(weights, psqt_weights, src_acc, src_psqt, added, n_added, removed, n_removed, acc, psqt, isa):
    """Incremental update: ``acc = src_acc + rows(added) - rows(removed)``.

    ``src_acc``/``acc`` are int16[L], ``src_psqt``/``psqt`` int32[P]; ``added`` and
    ``removed`` are int32 feature indices of which the first ``n_added`` /
    ``n_removed`` are used.  ``acc`` may be the same array as ``src_acc``.
    Bit-identical to a refresh because int16 addition wraps.  SIMD paths (``isa``): one
    fused pass (:func:`update_rows`).  ``ISA_PORTABLE``: copy, then one pass per row, as
    explicit loops (Numba's slice assignment ``acc[:] = src`` costs more than the whole
    update, and fusing these loops measured slower).
    """
    L = acc.shape[0]
    P = psqt.shape[0]
    if isa != simd.ISA_PORTABLE and L % 32 == 0:
        update_rows(src_acc, weights, added, n_added, removed, n_removed, acc)
        for j in range(P):
            psqt[j] = src_psqt[j]
        for i in range(n_added):
            prow = psqt_weights[added[i]]
            for j in range(P):
                psqt[j] += prow[j]
        for i in range(n_removed):
            prow = psqt_weights[removed[i]]
            for j in range(P):
                psqt[j] -= prow[j]
        return
    for j in range(L):
        acc[j] = src_acc[j]
    for j in range(P):
        psqt[j] = src_psqt[j]
    for i in range(n_added):
        row = weights[added[i]]
        for j in range(L):
            acc[j] += row[j]
        prow = psqt_weights[added[i]]
        for j in range(P):
            psqt[j] += prow[j]
    for i in range(n_removed):
        row = weights[removed[i]]
        for j in range(L):
            acc[j] -= row[j]
        prow = psqt_weights[removed[i]]
        for j in range(P):
            psqt[j] -= prow[j]


@njit(cache=True, inline="always")
def add_rows_i8(weights8, psqt8, features, count, acc, psqt):
    """``acc += rows(features)`` for int8 rows (sign-extended, int16 wrap-around) and their PSQT rows.

    ``weights8`` int8[F8, L], ``psqt8`` int32[F8, P], ``features`` int32 of which the first
    ``count`` are used, ``acc`` int16[L], ``psqt`` int32[P].
    """
    L = acc.shape[0]
    P = psqt.shape[0]
    k = 0
    while k + 4 <= count:
        r0 = weights8[features[k]]
        r1 = weights8[features[k + 1]]
        r2 = weights8[features[k + 2]]
        r3 = weights8[features[k + 3]]
        for j in range(L):
            acc[j] += (np.int16(r0[j]) + np.int16(r1[j])) + (np.int16(r2[j]) + np.int16(r3[j]))
        k += 4
    while k < count:
        row = weights8[features[k]]
        for j in range(L):
            acc[j] += np.int16(row[j])
        k += 1
    for k in range(count):
        prow = psqt8[features[k]]
        for j in range(P):
            psqt[j] += prow[j]


@njit(cache=True, inline="always")
def sub_rows_i8(weights8, psqt8, features, count, acc, psqt):
    """``acc -= rows(features)``: the inverse of :func:`add_rows_i8`."""
    L = acc.shape[0]
    P = psqt.shape[0]
    for k in range(count):
        row = weights8[features[k]]
        for j in range(L):
            acc[j] -= np.int16(row[j])
        prow = psqt8[features[k]]
        for j in range(P):
            psqt[j] -= prow[j]


@njit(cache=True, inline="always")
def refresh_relations(bitboards, threats, pairs, pair_offset, weights8, psqt8, rel, idx, acc, psqt):
    """``acc[p] += rows`` of every active threat / pawn-pair feature of both perspectives ``p``
    (int8 rows); ``acc`` int16[2, L], ``psqt`` int32[2, P] (row 0 White).  The relation list is
    built once for both.

    ``rel`` int64[>= RELATION_SCRATCH] and ``idx`` int32[>= INDEX_SCRATCH] are scratch; the
    other arguments as in :func:`update_relations`.
    """
    entries = rel[:MAX_RELATIONS]
    n = relation_list(bitboards, threats, pairs, np.int64(-1), entries)
    for p in range(2):
        orient = relation_orientation(king_square(bitboards, p), p)
        k = relation_indices(entries, n, p, orient, threats, pair_offset, idx)
        add_rows_i8(weights8, psqt8, idx, k, acc[p], psqt[p])


@njit(cache=True, inline="always")
def update_relations(old, new, p, threats, pairs, pair_offset, weights8, psqt8, rel, idx, acc, psqt):
    """Apply the threat / pawn-pair features that change from piece set ``old`` to ``new`` to
    perspective ``p``'s accumulator ``acc`` (int16[L]) and ``psqt`` (int32[P]), in place.

    Valid when ``p``'s own king is on the same side of the d/e boundary in ``old`` and ``new``
    (the threat orientation is the same); an empty ``old`` (no pieces) adds every feature.

    Parameters
    ----------
    old, new : int64[8]
        Bitboards (see ``kernels.features``); ``new`` has one king per side.
    threats, pairs, pair_offset : int
        Which int8 sets the network has and where the pair rows start (``features.Int8Layout``).
    weights8, psqt8 : int8[F8, L], int32[F8, P]
        The int8 feature rows and their PSQT rows.
    rel : int64[>= RELATION_SCRATCH]
        Scratch: the two relation lists near the changed squares and their difference.
    idx : int32[>= INDEX_SCRATCH]
        Scratch: feature indices.

    Only the relations near the squares whose content changed are listed (see
    ``threats.relation_list``): a quiet move touches two squares, so a few dozen entries at most.

    Source: Stockfish 19 ``DirtyThreats`` / ``DirtyPawnPairs`` (``position.cpp``), whose lists
    equal this difference (``shared/reference/stockfish-19-nnue.md`` section 11.2).
    """
    added = rel[2 * MAX_RELATIONS:3 * MAX_RELATIONS]
    removed = rel[3 * MAX_RELATIONS:4 * MAX_RELATIONS]
    na, nr = relation_changes(old, new, threats, pairs, rel[:MAX_RELATIONS], rel[MAX_RELATIONS:2 * MAX_RELATIONS],
                              added, removed)
    orient = relation_orientation(king_square(new, p), p)
    ia = relation_indices(added, na, p, orient, threats, pair_offset, idx[:MAX_RELATIONS])
    ir = relation_indices(removed, nr, p, orient, threats, pair_offset, idx[MAX_RELATIONS:])
    add_rows_i8(weights8, psqt8, idx[:MAX_RELATIONS], ia, acc, psqt)
    sub_rows_i8(weights8, psqt8, idx[MAX_RELATIONS:], ir, acc, psqt)


@njit(cache=True, inline="always")
def copy_accumulator(src_acc, src_psqt, acc, psqt):
    """``acc = src_acc`` (int16[L]) and ``psqt = src_psqt`` (int32[P]), as explicit loops."""
    for j in range(acc.shape[0]):
        acc[j] = src_acc[j]
    for j in range(psqt.shape[0]):
        psqt[j] = src_psqt[j]


@njit(cache=True, inline="always")  # inlined into its callers: a call with 16 arguments costs ~60 ns
def update_perspective(new, p, src, dst, empty, accs, psqts, state, weights, psqt_weights, slot_table,
                       king_buckets, mirror, num_slots, added, removed, weights8, psqt8, threats, pairs, pair_offset,
                       rel, idx, isa):
    """Bring perspective ``p``'s accumulator of pair ``dst`` to the piece set ``new``.

    Accumulators live in pairs (one per perspective): ``accs`` int16[pairs, 2, L],
    ``psqts`` int32[pairs, 2, P] and ``state`` int64[pairs, 2, STATE_COLUMNS] (the piece set,
    as 8 bitboards, each accumulator was computed for, and a flag).  Pairs
    ``0 .. 2 * n_buckets - 1`` are the **refresh cache** ("Finny tables", Stockfish's
    ``AccumulatorCaches``): entry ``key`` of :func:`~nnue_infer.kernels.features.king_frame`
    holds the last accumulator computed in that king frame and its piece set.  Pair
    ``empty`` holds the biases and an empty piece set and is never written.

    Rule: if ``src >= 0`` and ``p``'s own king stands on the same square in ``src`` and in
    ``new``, ``dst = src + (features of new) - (features of src)`` (incremental update),
    unless the cache entry is closer to ``new``.  Otherwise (``p``'s king moved, or no
    computed ancestor) the cache entry of ``new``'s king frame is brought to ``new`` the same
    way (a refresh that applies only the difference, or starts again from the biases when
    that is cheaper) and copied to ``dst``.  ``src`` may equal ``dst``.

    Parameters
    ----------
    new : int64[8]
        Bitboards of the target position (see ``kernels.features``).
    p : int
        Perspective, 0 White, 1 Black.
    src, dst, empty : int
        Pairs of the computed ancestor (-1 for none), of the target and of the biases.
    weights, psqt_weights : int16[F, L], int32[F, P]
        The feature transformer.
    slot_table, king_buckets, mirror, num_slots
        The feature set (see :func:`~nnue_infer.kernels.features.active_features`).
    added, removed : int32[>= 64]
        Scratch.
    weights8, psqt8, threats, pairs, pair_offset, rel, idx
        The int8 feature sets (threats, pawn pairs) and their scratch, see
        :func:`update_relations`; ``threats = pairs = 0`` for networks without them.  Within one
        king frame their orientation is fixed too, so they follow the same rule.
    isa : int
        ``simd.ISA_*`` (see :func:`update_accumulator`).

    Source: Stockfish 15.1 ``nnue/nnue_feature_transformer.h`` (``update_accumulator``) and
    Stockfish 16's ``AccumulatorCaches`` (``update_accumulator_refresh_cache``).
    """
    ksq = king_square(new, p)
    orient, base, key = king_frame(ksq, p, king_buckets, mirror, num_slots)
    cache_cost = count_changes(state[key, p], new)
    if src >= 0:
        old = state[src, p]
        if king_square(old, p) == ksq and count_changes(old, new) <= cache_cost:
            n_added, n_removed = changed_features(old, new, p, orient, base, slot_table, added, removed)
            update_accumulator(weights, psqt_weights, accs[src, p], psqts[src, p], added, n_added,
                               removed, n_removed, accs[dst, p], psqts[dst, p], isa)
            if threats or pairs:
                update_relations(old, new, p, threats, pairs, pair_offset, weights8, psqt8, rel, idx, accs[dst, p],
                                 psqts[dst, p])
            set_piece_set(state, dst, p, new)
            return
    origin = key if cache_cost <= count_changes(state[empty, p], new) else empty
    n_added, n_removed = changed_features(state[origin, p], new, p, orient, base, slot_table, added, removed)
    update_accumulator(weights, psqt_weights, accs[origin, p], psqts[origin, p], added, n_added, removed, n_removed,
                       accs[key, p], psqts[key, p], isa)
    if threats or pairs:
        update_relations(state[origin, p], new, p, threats, pairs, pair_offset, weights8, psqt8, rel, idx, accs[key, p],
                         psqts[key, p])
    set_piece_set(state, key, p, new)
    copy_accumulator(accs[key, p], psqts[key, p], accs[dst, p], psqts[dst, p])
    set_piece_set(state, dst, p, new)


@njit(cache=True, inline="always")
def set_piece_set(state, pair, p, bitboards):
    """``state[pair, p, :8] = bitboards`` (the piece set an accumulator was computed for)."""
    for i in range(8):
        state[pair, p, i] = bitboards[i]

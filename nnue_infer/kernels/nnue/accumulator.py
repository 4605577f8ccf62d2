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

from .. import simd
from ..refcount import last_use
from ..simd import ISA_PORTABLE  # a bare global: branches on it are pruned in specialised kernels
from .feature_index import changed_features, count_changes, king_frame
from ..chess.bitboard import king_square
from .threats import MAX_RELATIONS, relation_changes, relation_indices, relation_list, relation_orientation

#: Size of the int64 scratch of :func:`update_relations` (two relation lists, their difference)
#: and of its int32 index scratch.
RELATION_SCRATCH = 4 * MAX_RELATIONS
INDEX_SCRATCH = 2 * MAX_RELATIONS

#: Last axis of the ``state`` array that goes with an accumulator array (see
#: :func:`update_perspective`): the piece set's 8 bitboards, then a "computed" flag.
STATE_FLAG = 8
STATE_COLUMNS = 9


@njit(cache=True, forceinline=True)
def refresh_accumulator(weights, biases, psqt_weights, features, count, acc, psqt, isa):
    """Recompute one perspective's accumulator from scratch: the biases plus the rows of
    ``features[:count]`` (:func:`update_accumulator` from the biases and a zero PSQT).

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
        Output PSQT accumulator (no bias).
    isa : int
        ``simd.ISA_*`` (see :func:`update_accumulator`).
    """
    for j in range(psqt.shape[0]):
        psqt[j] = 0
    update_accumulator(weights, psqt_weights, biases, psqt, features, count, features, np.int64(0), acc, psqt, isa)
    last_use((weights, biases, psqt_weights, features, acc, psqt))


@njit(cache=True, forceinline=True)
def update_accumulator(weights, psqt_weights, src_acc, src_psqt, added, n_added, removed, n_removed, acc, psqt, isa):
    """``acc = src_acc + rows(added) - rows(removed)`` and the same for the PSQT rows.

    Parameters
    ----------
    weights, psqt_weights : int16[F, L], int32[F, P]
        The feature transformer (C-contiguous).
    src_acc, src_psqt : int16[L], int32[P]
        The accumulator to start from (may be ``acc`` / ``psqt``: updated in place).
    added, removed : int32[>= n_added], int32[>= n_removed]
        Feature indices; the first ``n_added`` / ``n_removed`` are used.
    acc, psqt : int16[L], int32[P]
        Output; every sum wraps (int16 / int32) as Stockfish's vector lanes do, so the order of
        the rows does not matter and an update equals a refresh bit for bit.
    isa : int
        ``simd.ISA_*``.  Any SIMD path (``L % 32 == 0``): one fused pass over register tiles
        (a tile of lanes stays in vector registers while every row is added or subtracted, then
        is stored once: Stockfish's register tiling), rows addressed by flat index (no row
        views).  Tiles of 128 lanes (8 ymm registers) for at most 4 rows (an update: 256 lanes
        would take all 16 ymm registers of AVX2 and spill), 256 lanes for more (a refresh: long
        runs of each row), 32 if L is not a multiple of 128 / 256.  P = 8 (every Stockfish
        net): the PSQT in one 8-lane int32 register.  ``ISA_PORTABLE``: plain loops (copy, the
        added rows four at a time, the removed rows one at a time).

    One flat body ending in :func:`~nnue_infer.kernels.refcount.last_use` on purpose: each
    inlined helper or branch-dependent last use of an array leaves reference-count calls in
    the compiled loop (Stockfish 15.1's net, AVX2, thread CPU: with two inlined helpers 76 ns,
    this body without ``last_use`` 83 ns, with it 43 ns; the C floor 38 ns).
    """
    L = acc.shape[0]
    P = psqt.shape[0]
    if isa != ISA_PORTABLE and L % 128 == 0 and (n_added + n_removed <= 4 or L % 256 != 0):
        for j in range(0, L, 128):
            v0 = simd.load_i16x64(src_acc, j)
            v1 = simd.load_i16x64(src_acc, j + 64)
            for k in range(n_added):
                r = added[k] * L + j
                v0 = simd.add_i16x64(v0, simd.load_i16x64(weights, r))
                v1 = simd.add_i16x64(v1, simd.load_i16x64(weights, r + 64))
            for k in range(n_removed):
                r = removed[k] * L + j
                v0 = simd.sub_i16x64(v0, simd.load_i16x64(weights, r))
                v1 = simd.sub_i16x64(v1, simd.load_i16x64(weights, r + 64))
            simd.store_i16x64(acc, j, v0)
            simd.store_i16x64(acc, j + 64, v1)
    elif isa != ISA_PORTABLE and L % 256 == 0:
        for j in range(0, L, 256):
            v0 = simd.load_i16x64(src_acc, j)
            v1 = simd.load_i16x64(src_acc, j + 64)
            v2 = simd.load_i16x64(src_acc, j + 128)
            v3 = simd.load_i16x64(src_acc, j + 192)
            for k in range(n_added):
                r = added[k] * L + j
                v0 = simd.add_i16x64(v0, simd.load_i16x64(weights, r))
                v1 = simd.add_i16x64(v1, simd.load_i16x64(weights, r + 64))
                v2 = simd.add_i16x64(v2, simd.load_i16x64(weights, r + 128))
                v3 = simd.add_i16x64(v3, simd.load_i16x64(weights, r + 192))
            for k in range(n_removed):
                r = removed[k] * L + j
                v0 = simd.sub_i16x64(v0, simd.load_i16x64(weights, r))
                v1 = simd.sub_i16x64(v1, simd.load_i16x64(weights, r + 64))
                v2 = simd.sub_i16x64(v2, simd.load_i16x64(weights, r + 128))
                v3 = simd.sub_i16x64(v3, simd.load_i16x64(weights, r + 192))
            simd.store_i16x64(acc, j, v0)
            simd.store_i16x64(acc, j + 64, v1)
            simd.store_i16x64(acc, j + 128, v2)
            simd.store_i16x64(acc, j + 192, v3)
    elif isa != ISA_PORTABLE and L % 32 == 0:
        for j in range(0, L, 32):
            v0 = simd.load_i16x16(src_acc, j)
            v1 = simd.load_i16x16(src_acc, j + 16)
            for k in range(n_added):
                r = added[k] * L + j
                v0 = simd.add_i16x16(v0, simd.load_i16x16(weights, r))
                v1 = simd.add_i16x16(v1, simd.load_i16x16(weights, r + 16))
            for k in range(n_removed):
                r = removed[k] * L + j
                v0 = simd.sub_i16x16(v0, simd.load_i16x16(weights, r))
                v1 = simd.sub_i16x16(v1, simd.load_i16x16(weights, r + 16))
            simd.store_i16x16(acc, j, v0)
            simd.store_i16x16(acc, j + 16, v1)
    else:
        for j in range(L):
            acc[j] = src_acc[j]
        k = 0
        while k + 4 <= n_added:  # acc loaded and stored once per four rows (~1.5x faster for a refresh)
            r0, r1, r2, r3 = added[k], added[k + 1], added[k + 2], added[k + 3]
            for j in range(L):
                acc[j] += (weights[r0, j] + weights[r1, j]) + (weights[r2, j] + weights[r3, j])
            k += 4
        while k < n_added:
            r0 = added[k]
            for j in range(L):
                acc[j] += weights[r0, j]
            k += 1
        for k in range(n_removed):
            r0 = removed[k]
            for j in range(L):
                acc[j] -= weights[r0, j]
    if isa != ISA_PORTABLE and P == 8:
        v = simd.load_i32x8(src_psqt, 0)
        for k in range(n_added):
            v = simd.add_i32x8(v, simd.load_i32x8(psqt_weights, added[k] * 8))
        for k in range(n_removed):
            v = simd.sub_i32x8(v, simd.load_i32x8(psqt_weights, removed[k] * 8))
        simd.store_i32x8(psqt, 0, v)
    else:
        for j in range(P):
            s = src_psqt[j]
            for k in range(n_added):
                s += psqt_weights[added[k], j]
            for k in range(n_removed):
                s -= psqt_weights[removed[k], j]
            psqt[j] = s
    last_use((weights, psqt_weights, src_acc, src_psqt, added, removed, acc, psqt))


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


@njit(cache=True, forceinline=True)
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


@njit(cache=True, forceinline=True)
def update_relations(old, new, p, threats, pairs, pair_offset, weights8, psqt8, rel, idx, acc, psqt):
    """Apply the threat / pawn-pair features that change from piece set ``old`` to ``new`` to
    perspective ``p``'s accumulator ``acc`` (int16[L]) and ``psqt`` (int32[P]), in place.

    Valid when ``p``'s own king is on the same side of the d/e boundary in ``old`` and ``new``
    (the threat orientation is the same); an empty ``old`` (no pieces) adds every feature.

    Parameters
    ----------
    old, new : int64[8]
        Bitboards (see ``kernels.chess.bitboard``); ``new`` has one king per side.
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
                       rel, idx, isa, relations):
    """Bring perspective ``p``'s accumulator of pair ``dst`` to the piece set ``new``.

    Accumulators live in pairs (one per perspective): ``accs`` int16[pairs, 2, L],
    ``psqts`` int32[pairs, 2, P] and ``state`` int64[pairs, 2, STATE_COLUMNS] (the piece set,
    as 8 bitboards, each accumulator was computed for, and a flag).  Pairs
    ``0 .. 2 * n_buckets - 1`` are the **refresh cache** ("Finny tables", Stockfish's
    ``AccumulatorCaches``): entry ``key`` of :func:`~nnue_infer.kernels.nnue.feature_index.king_frame`
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
        Bitboards of the target position (see ``kernels.chess.bitboard``).
    p : int
        Perspective, 0 White, 1 Black.
    src, dst, empty : int
        Pairs of the computed ancestor (-1 for none), of the target and of the biases.
    weights, psqt_weights : int16[F, L], int32[F, P]
        The feature transformer.
    slot_table, king_buckets, mirror, num_slots
        The feature set (see :func:`~nnue_infer.kernels.nnue.feature_index.active_features`).
    added, removed : int32[>= 64]
        Scratch.
    weights8, psqt8, threats, pairs, pair_offset, rel, idx
        The int8 feature sets (threats, pawn pairs) and their scratch, see
        :func:`update_relations`; ``threats = pairs = 0`` for networks without them.  Within one
        king frame their orientation is fixed too, so they follow the same rule.
    isa : int
        ``simd.ISA_*`` (see :func:`update_accumulator`).
    relations : bool
        ``threats or pairs``: whether the int8 sets are updated (a compile-time constant of the
        specialised kernels, ``forward.kernels``, so networks without them compile none of that code).

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
                               removed, n_removed, accs[dst, p], psqts[dst, p], np.int64(isa))
            if relations:
                update_relations(old, new, p, threats, pairs, pair_offset, weights8, psqt8, rel, idx, accs[dst, p],
                                 psqts[dst, p])
            set_piece_set(state, dst, p, new)
            return
    origin = key if cache_cost <= count_changes(state[empty, p], new) else empty
    n_added, n_removed = changed_features(state[origin, p], new, p, orient, base, slot_table, added, removed)
    update_accumulator(weights, psqt_weights, accs[origin, p], psqts[origin, p], added, n_added, removed, n_removed,
                       accs[key, p], psqts[key, p], np.int64(isa))
    if relations:
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

"""Whole-network kernels: accumulators -> feature-transformer activation -> layer stack -> value.

Scalar parameters travel in one int64 array (see ``P_*`` below) so a call unboxes few
arguments.  Source: Stockfish 15.1, ``nnue/evaluate_nnue.cpp`` (``evaluate``, ``trace_evaluate``).

The cached kernels here contain the kernels they inline from other files: their cache is stamped
with the contents of every kernel file (:mod:`nnue_infer.kernels.cache`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numba import njit

from .accumulator import (INDEX_SCRATCH, RELATION_SCRATCH, STATE_FLAG, refresh_accumulator, refresh_relations,
                          update_perspective)
from .activation import ACT_FLOAT, ft_transform
from .dense import (COL_ACT, LAYER_TABLE_COLUMNS, SCRATCH_FEATURES, ft_input, propagate_layer_stack, psqt_term,
                    scratch_layout, tdiv, wrap_int32)
from ..chess.bitboard import BB_BLACK, BB_WHITE, POS_OK, check_bitboards, popcount
from .feature_index import active_features

#: Indices into the ``params`` int64 array.  ``P_CACHE_PAIRS``: refresh-cache entries per
#: perspective (pairs ``0 .. P_CACHE_PAIRS - 1`` of the incremental kernels' arrays).
#: ``P_FLOAT_OUTPUT``: ``output_units * output_scale``, the integer per 1.0 of a float output layer.
#: ``P_THREATS``, ``P_PAIRS``, ``P_PAIR_OFFSET``: the int8 feature sets (``features.Int8Layout``).
#: ``P_SKIP_SUB``, ``P_SKIP_MODE``: see ``dense.propagate_layer_stack``; ``P_VALUE_DIVISION``: see
#: :func:`bucket_value`.  ``P_SIMD``: the instruction-set path (``simd.ISA_*``, normally
#: ``simd.ISA``); ``P_FC0_SIMD``: the first dense layer's (``simd.first_layer_isa``).  The entry
#: kernels take those two, the activation and the presence of threat / pawn-pair features and of
#: float layers as compile-time constants (:class:`Config`, :func:`kernels`).
(P_FT_CLAMP, P_FT_SHIFT, P_WEIGHT_SHIFT, P_SKIP_INDEX, P_SKIP_NUM, P_SKIP_DEN, P_OUTPUT_SCALE,
 P_NUM_SLOTS, P_MIRROR, P_BUCKET_DIVISOR, P_FT_ACTIVATION, P_CACHE_PAIRS, P_MAX_PIECES, P_FLOAT_OUTPUT,
 P_SKIP_SUB, P_SKIP_MODE, P_VALUE_DIVISION, P_THREATS, P_PAIRS, P_PAIR_OFFSET, P_SIMD, P_FC0_SIMD) = range(22)
N_PARAMS = 22

#: Value rules (``Architecture.value_division``): tdiv(psqt + positional, OutputScale)
#: (Stockfish 15.1, 16) or tdiv(psqt, OutputScale) + tdiv(positional, OutputScale) (17.1 and later).
VALUE_SUM = 0
VALUE_EACH = 1

#: Layout of the ``cfg`` int64 array of the incremental kernels (one array instead of four,
#: because Numba's call overhead grows with the number of array arguments): ``params``, then
#: the feature set's ``slot_table`` int32[2, 6] (6 words) and ``king_buckets`` int32[64]
#: (32 words) stored as raw int32 pairs, then the layer table int64[n_layers, 8].
CFG_SLOT_TABLE = N_PARAMS
CFG_KING_BUCKETS = N_PARAMS + 6
CFG_LAYERS = N_PARAMS + 38

#: Returned by :func:`evaluate_stack` for a position the network cannot represent.
INVALID_POSITION = -(1 << 62)


class Config(NamedTuple):
    """The compile-time choices of a specialised kernel (:func:`kernels`): the branches of the
    network families and instruction-set paths it does not use are pruned before Numba types them,
    so a path compiles its own code and no other.

    ``isa`` and ``fc0_isa``: ``params[P_SIMD]`` and ``params[P_FC0_SIMD]``; ``ft_activation``:
    ``params[P_FT_ACTIVATION]``; ``relations``: threat or pawn-pair features
    (``params[P_THREATS] or params[P_PAIRS]``); ``float_tail``: float hidden layers in the layer
    table.  Everything else stays data.
    """

    isa: int
    fc0_isa: int
    ft_activation: int
    relations: bool
    float_tail: bool


def config(params: np.ndarray, layers: np.ndarray) -> Config:
    """The :class:`Config` of a network's ``params`` (int64[N_PARAMS]) and ``layers`` table."""
    return Config(int(params[P_SIMD]), int(params[P_FC0_SIMD]), int(params[P_FT_ACTIVATION]),
                  bool(params[P_THREATS] or params[P_PAIRS]), bool((layers[:, COL_ACT] >= ACT_FLOAT).any()))


def config_of_cfg(cfg: np.ndarray) -> Config:
    """The :class:`Config` of a ``cfg`` array (see ``CFG_*``)."""
    return config(cfg[:N_PARAMS], cfg[CFG_LAYERS:].reshape(-1, LAYER_TABLE_COLUMNS))


@njit(cache=True, inline="always")
def forward_bucket(acc, psqt_acc, stm, bucket, params, scratch, weights, biases, layers, isa, fc0_isa, ft_activation,
                   float_tail):
    """PSQT term and layer-stack output ("positional") for one bucket.

    ``acc`` int16[2, L1] and ``psqt_acc`` int32[2, P] are both perspectives' accumulators
    (row 0 White); ``scratch`` is int16[>= dense.scratch_size(layers)] (the transformed
    features go to its first entries); ``isa`` .. ``float_tail`` as in :class:`Config`.
    Returns ``(psqt, positional)`` in internal units times OutputScale, side to move's point of view.
    """
    ft_transform(acc, stm, np.int64(ft_activation), params[P_FT_CLAMP], params[P_FT_SHIFT], np.int64(isa), biases,
                 scratch, ft_input(scratch, layers))
    positional = propagate_layer_stack(scratch, bucket, weights, biases, layers, params[P_WEIGHT_SHIFT],
                                       params[P_SKIP_INDEX], params[P_SKIP_SUB], params[P_SKIP_MODE],
                                       params[P_SKIP_NUM], params[P_SKIP_DEN], params[P_FLOAT_OUTPUT], isa, fc0_isa,
                                       float_tail)
    return psqt_term(psqt_acc, stm, bucket), positional


@njit(cache=True, inline="always")
def bucket_value(psqt, positional, params):
    """The value from a bucket's PSQT and positional terms (internal units x OutputScale):
    ``tdiv(wrap32(psqt + positional), OutputScale)`` (``VALUE_SUM``, an int32 sum as in Stockfish) or ``tdiv(psqt, OutputScale) +
    tdiv(positional, OutputScale)`` (``VALUE_EACH``)."""
    scale = params[P_OUTPUT_SCALE]
    if params[P_VALUE_DIVISION] == VALUE_EACH:
        return tdiv(np.int64(psqt), scale) + tdiv(np.int64(positional), scale)
    return tdiv(wrap_int32(np.int64(psqt) + positional), scale)  # Stockfish: int32 sum


def relation_scratch_size(threats: int, pairs: int) -> int:
    """int16 entries the scratch buffer needs after the layer stack's region (``dense.scratch_size``)
    for the threat / pawn-pair updates (see :func:`relation_buffers`): none without those sets."""
    return 4 * RELATION_SCRATCH + 2 * INDEX_SCRATCH if threats or pairs else 0


@njit(cache=True, inline="always")
def relation_buffers(scratch, layers, params):
    """Scratch of the threat / pawn-pair updates, int64[RELATION_SCRATCH] and int32[INDEX_SCRATCH],
    as views of the int16 ``scratch`` after the layer stack's region (empty for networks without
    those sets; the buffer is :func:`relation_scratch_size` longer for networks with them)."""
    start = scratch_layout(layers)[4]  # a multiple of 8 entries: int64-aligned
    on = params[P_THREATS] != 0 or params[P_PAIRS] != 0
    mid = start + (4 * RELATION_SCRATCH if on else 0)
    end = mid + (2 * INDEX_SCRATCH if on else 0)
    return scratch[start:mid].view(np.int64), scratch[mid:end].view(np.int32)


@njit(cache=True, inline="always")
def refresh_pair(bitboards, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8, psqt8,
                 feats, counts, acc, psqt_acc, rel, idx, isa, relations):
    """Features of both perspectives from bitboards, then refresh both accumulators (the
    piece-square rows, then the int8 threat / pawn-pair rows ``weights8``/``psqt8`` if
    ``relations``), with the threat / pawn-pair scratch given (see :func:`relation_buffers`).
    Returns the number of pieces on the board."""
    active_features(bitboards, slot_table, king_buckets, params[P_MIRROR], params[P_NUM_SLOTS], feats, counts)
    for p in range(2):
        refresh_accumulator(ft_weights, ft_biases, psqt_weights, feats[p], counts[p], acc[p], psqt_acc[p], np.int64(isa))
    if relations:
        refresh_relations(bitboards, params[P_THREATS], params[P_PAIRS], params[P_PAIR_OFFSET], weights8, psqt8, rel,
                          idx, acc, psqt_acc)
    return counts[0]


@njit(cache=True, inline="always")
def evaluate_refresh(bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8,
                     psqt8, weights, biases, layers, feats, counts, acc, psqt_acc, scratch, refresh, value):
    """Full-refresh evaluation of one position (the body of the batch kernels' rows,
    ``kernels.nnue.batch.kernels``).

    Parameters are the validated bitboards (int64[8], see ``kernels.chess.bitboard``), the side
    to move (0 White, 1 Black), the feature set's tables, ``params`` (int64[N_PARAMS]),
    the network's arrays (compute layout; ``weights8``/``psqt8`` the int8 feature rows), scratch
    buffers: ``feats`` int32[2, 32], ``counts`` int64[2], ``acc`` int16[2, L1], ``psqt_acc``
    int32[2, P], ``scratch`` int16[>= dense.scratch_size(layers) + relation_scratch_size(...)],
    and the configuration's :class:`Stages` ``refresh`` and ``value``.

    Returns the value ``tdiv(wrap32(psqt + positional), OutputScale)`` (the sum wraps as
    Stockfish's int32 does, so every value fits int32) in internal units from the
    side to move's point of view (Stockfish's ``NNUE::evaluate(pos, false)``), or
    ``INVALID_POSITION`` if the bitboards are not representable (see ``features.check_bitboards``).
    """
    if check_bitboards(bitboards, feats.shape[1]) != POS_OK:  # the feature buffer's width bounds the pieces
        return INVALID_POSITION
    rel, idx = relation_buffers(scratch, layers, params)
    pieces = refresh(bitboards, params, slot_table, king_buckets, ft_weights, ft_biases, psqt_weights, weights8, psqt8,
                     feats, counts, acc, psqt_acc, rel, idx)
    return value(acc, psqt_acc, np.int64(stm), np.int64(pieces), params, scratch, weights, biases, layers)


@njit(cache=True, inline="always")
def unpack_config(cfg):
    """Views ``(params, slot_table, king_buckets, layers)`` into a ``cfg`` array (see ``CFG_*``)."""
    params = cfg[:N_PARAMS]
    slot_table = cfg[CFG_SLOT_TABLE:CFG_SLOT_TABLE + 6].view(np.int32).reshape((2, 6))
    king_buckets = cfg[CFG_KING_BUCKETS:CFG_KING_BUCKETS + 32].view(np.int32)
    n_layers = (cfg.shape[0] - CFG_LAYERS) // LAYER_TABLE_COLUMNS
    layers = cfg[CFG_LAYERS:].reshape((n_layers, LAYER_TABLE_COLUMNS))
    return params, slot_table, king_buckets, layers


@njit(cache=True, inline="always")
def feature_buffers(scratch, layers):
    """Two int32[SCRATCH_FEATURES // 2] lists (added, removed features) in the scratch buffer's last region."""
    feats = scratch[scratch_layout(layers)[3]:].view(np.int32)
    return feats[:SCRATCH_FEATURES // 2], feats[SCRATCH_FEATURES // 2:SCRATCH_FEATURES]


@njit(cache=True, inline="always")
def evaluate_pair(new, pair, stm, params, accs, psqts, scratch, weights, biases, layers, value):
    """Value of the position ``new`` (int64[8]) whose accumulators are pair ``pair``, by ``value``
    (:attr:`Stages.value`); see :func:`evaluate_refresh`."""
    pieces = popcount(new[BB_WHITE] | new[BB_BLACK])
    return value(accs[pair], psqts[pair], np.int64(stm), np.int64(pieces), params, scratch, weights, biases, layers)


@njit(cache=True, inline="always")
def evaluate_fresh(stm, params, slot_table, king_buckets, layers, ft_weights, psqt_weights, weights8, psqt8, weights,
                   biases, accs, psqts, state, scratch, feats, counts, rel, idx, refresh, value):
    """Full-refresh evaluation of one position, on the arrays of :func:`evaluate_stack`.

    Inlined into its caller (``kernels.nnue.arena``'s ``evaluate_board``, which builds every argument as a
    view of the evaluator's arrays).  The caller has written the position's bitboards to
    ``state[work, 0, :8]``, where ``work = params[P_CACHE_PAIRS] + 1`` is the first scratch pair;
    both perspectives are refreshed with the biases pair's biases into pair ``work`` (the refresh cache
    and the stack are not touched).  ``feats`` int32[2, >= params[P_MAX_PIECES]] and ``counts``
    int64[2] receive the active features; ``rel``/``idx`` as in :func:`evaluate_stack`;
    ``refresh`` and ``value`` as in :func:`evaluate_refresh`.

    Returns
    -------
    int
        As :func:`evaluate_refresh`: internal units, side to move's point of view, or
        ``INVALID_POSITION``.
    """
    empty = params[P_CACHE_PAIRS]
    work = empty + 1
    new = state[work, 0]
    if check_bitboards(new, params[P_MAX_PIECES]) != POS_OK:
        return INVALID_POSITION
    refresh(new, params, slot_table, king_buckets, ft_weights, accs[empty, 0], psqt_weights, weights8, psqt8, feats,
            counts, accs[work], psqts[work], rel, idx)
    return evaluate_pair(new, work, stm, params, accs, psqts, scratch, weights, biases, layers, value)


@njit(cache=True, inline="always")
def update_stack(ply, trusted, params, slot_table, king_buckets, ft_weights, psqt_weights, weights8, psqt8, accs,
                 psqts, state, added, removed, rel, idx, update):
    """Bring both accumulators of the position at ``ply`` of an accumulator stack up to date,
    lazily: the first part of :func:`evaluate_stack` (arguments as there).

    Per perspective, the nearest computed ancestor ply is found and the accumulator is brought
    up to date from it (or refreshed through the cache); the pair is then flagged computed and
    the flags of the plies in between are cleared (so the caller may set ``trusted = ply + 1``).

    Returns
    -------
    int
        The ply's pair (``params[P_CACHE_PAIRS] + 3 + ply``), or -1 if the bitboards are not
        representable (then nothing but the bitboards the caller wrote is modified).
    """
    empty = params[P_CACHE_PAIRS]
    stack = empty + 3
    dst = stack + ply
    new = state[dst, 0]  # the first 8 columns are the position's bitboards
    if check_bitboards(new, params[P_MAX_PIECES]) != POS_OK:
        return -1
    top = min(ply, trusted - 1)
    for p in range(2):
        src = -1
        for i in range(top, -1, -1):
            if state[stack + i, p, STATE_FLAG] != 0:
                src = stack + i
                break
        if src != dst:
            update(new, np.int64(p), np.int64(src), np.int64(dst), np.int64(empty), accs, psqts, state, ft_weights,
                   psqt_weights, slot_table, king_buckets, params, added, removed, weights8, psqt8, rel, idx)
            state[dst, p, STATE_FLAG] = 1
    for i in range(max(trusted, 0), ply):
        state[stack + i, 0, STATE_FLAG] = 0
        state[stack + i, 1, STATE_FLAG] = 0
    return dst


@njit(cache=True, inline="always")
def evaluate_stack(ply, stm, trusted, params, slot_table, king_buckets, layers, ft_weights, psqt_weights, weights8,
                   psqt8, weights, biases, accs, psqts, state, scratch, added, removed, rel, idx, update, value):
    """Evaluate the position at ``ply`` of an accumulator stack, updating lazily.

    Inlined into its caller (``kernels.nnue.arena``'s ``evaluate_ply``, which builds every argument as a
    view of the evaluator's arrays: one compiled function, no reshapes or dtype views at run time).
    ``params``, ``slot_table``, ``king_buckets`` and ``layers`` are the parts of the ``cfg`` array
    (see :func:`unpack_config`); the network's arrays are in compute layout (``weights8``/``psqt8``
    the int8 feature rows).  Pairs of ``accs`` int16[pairs, 2, L1], ``psqts`` int32[pairs, 2, P]
    and ``state`` int64[pairs, 2, STATE_COLUMNS] (see
    :func:`~nnue_infer.kernels.nnue.accumulator.update_perspective`) are: the refresh cache
    (``params[P_CACHE_PAIRS]`` pairs), the biases with an empty piece set, two scratch pairs, then
    one pair per ply.  The caller has written the position's bitboards to ``state[pair, 0, :8]``
    where ``pair = P_CACHE_PAIRS + 3 + ply``.  Plies below ``trusted`` have correct "computed"
    flags; the others are stale and ignored.  ``scratch`` is int16[>= dense.scratch_size(layers) +
    relation_scratch_size(...)]; ``added``/``removed`` int32[SCRATCH_FEATURES // 2] and
    ``rel``/``idx`` (:func:`relation_buffers`) are scratch too; ``update`` and ``value`` are the
    configuration's :class:`Stages` members.

    The accumulators are brought up to date by :func:`update_stack`, then the layer stack runs.

    Returns
    -------
    int
        Internal units, side to move's point of view (as :func:`evaluate_refresh`), or
        ``INVALID_POSITION`` if the bitboards are not representable (nothing but the bitboards
        the caller wrote is modified).
    """
    dst = update_stack(ply, trusted, params, slot_table, king_buckets, ft_weights, psqt_weights, weights8, psqt8, accs,
                       psqts, state, added, removed, rel, idx, update)
    if dst < 0:
        return INVALID_POSITION
    return evaluate_pair(state[dst, 0], dst, stm, params, accs, psqts, scratch, weights, biases, layers, value)


class Stages(NamedTuple):
    """The stages of one :class:`Config` that the entry kernels (here, ``kernels.nnue.arena``,
    ``kernels.nnue.batch``, ``kernels.nnue.children``) call instead of inlining: each is compiled once per
    configuration and linked into every entry kernel that calls it, rather than typed and optimised
    again inside each of them (issue 19: the layer stack inlined into six entry kernels was most of
    a cold compile).  The call costs a few nanoseconds an evaluation.

    ``value(acc, psqt_acc, stm, pieces, params, scratch, weights, biases, layers)``: the value of a
    position from its accumulators (``acc`` int16[2, L1], ``psqt_acc`` int32[2, P], row 0 White),
    the side to move (int64, 0 White) and its number of pieces (int64, which picks the layer-stack
    bucket): :func:`forward_bucket` then :func:`bucket_value`, in internal units from the side to
    move's point of view.

    ``refresh(bitboards, params, slot_table, king_buckets, ft_weights, ft_biases, psqt_weights, weights8,
    psqt8, feats, counts, acc, psqt_acc, rel, idx)``: :func:`refresh_pair` (``ft_biases`` int16[L1]);
    returns the number of pieces.

    ``update(new, p, src, dst, empty, accs, psqts, state, ft_weights, psqt_weights, slot_table,
    king_buckets, params, added, removed, weights8, psqt8, rel, idx)``: perspective ``p``'s
    accumulator of pair ``dst`` brought to the piece set ``new`` (int64[8]) from pair ``src``
    (-1: none) or the refresh cache (``accumulator.update_perspective``, the feature set's
    scalars read from ``params``).  ``p``, ``src``, ``dst`` and ``empty`` are int64.
    """

    value: object
    refresh: object
    update: object


@functools.cache
def stages(config: Config) -> Stages:
    """The :class:`Stages` of ``config`` (compile-time constants as in :func:`kernels`)."""
    isa, fc0_isa, ft_activation, relations, float_tail = (int(config.isa), int(config.fc0_isa),
                                                          int(config.ft_activation), bool(config.relations),
                                                          bool(config.float_tail))

    @njit(cache=True)
    def value(acc, psqt_acc, stm, pieces, params, scratch, weights, biases, layers):
        bucket = (pieces - 1) // params[P_BUCKET_DIVISOR]
        psqt, positional = forward_bucket(acc, psqt_acc, stm, bucket, params, scratch, weights, biases, layers, isa,
                                          fc0_isa, ft_activation, float_tail)
        return bucket_value(psqt, positional, params)

    @njit(cache=True)
    def refresh(bitboards, params, slot_table, king_buckets, ft_weights, ft_biases, psqt_weights, weights8, psqt8, feats,
                counts, acc, psqt_acc, rel, idx):
        return refresh_pair(bitboards, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8,
                            psqt8, feats, counts, acc, psqt_acc, rel, idx, isa, relations)

    @njit(cache=True)
    def update(new, p, src, dst, empty, accs, psqts, state, ft_weights, psqt_weights, slot_table, king_buckets, params,
               added, removed, weights8, psqt8, rel, idx):
        update_perspective(new, p, src, dst, empty, accs, psqts, state, ft_weights, psqt_weights, slot_table,
                           king_buckets, params[P_MIRROR], params[P_NUM_SLOTS], added, removed, weights8, psqt8,
                           params[P_THREATS], params[P_PAIRS], params[P_PAIR_OFFSET], rel, idx, isa, relations)

    return Stages(value, refresh, update)


class Kernels(NamedTuple):
    """The entry kernels of one :class:`Config` (see :func:`kernels`)."""

    refresh_both: object
    trace_buckets: object
    evaluate_sequence: object


@functools.cache
def kernels(config: Config) -> Kernels:
    """The whole-network entry kernels specialised for ``config`` (each compiled on first use).

    The fields of ``config`` are compile-time constants of these kernels (closure variables):
    Numba prunes the branches of the other instruction sets, feature sets and activations
    before typing, so a network compiles only its own path.  Numba's cache keys a closure on its
    variables' values too, so each configuration has its own cached compilation (in files of its
    own: ``cache.closure_tag``).

    ``refresh_both(bitboards, slot_table, king_buckets, params, ft_weights, ft_biases,
    psqt_weights, weights8, psqt8, feats, counts, acc, psqt_acc)``: :func:`refresh_pair` with
    scratch of its own; returns the number of pieces.

    ``trace_buckets(acc, psqt_acc, stm, params, scratch, weights, biases, layers, out)``: fills
    ``out`` int64[n_buckets, 2] with (psqt, positional) of every bucket (side to move's view).

    ``evaluate_sequence(bitboards, stms, out, ft_weights, psqt_weights, weights8, psqt8, weights,
    biases, cfg, accs, psqts, state, scratch)``: evaluates consecutive positions (e.g. every ply
    of a game) with incremental updates; ``bitboards`` int64[n, 8] and ``stms`` int64[n] (0
    White, 1 Black to move) describe them, ``out`` int32[n] receives the values (internal units,
    side to move's point of view).  Uses the scratch pairs and the refresh cache of the arrays
    described in :func:`evaluate_stack` (so any stack state stays valid).  Returns -1 on success,
    else the index of the first position the network cannot represent (``out`` is then filled
    only before it).
    """
    isa, fc0_isa, ft_activation, relations, float_tail = (int(config.isa), int(config.fc0_isa),
                                                          int(config.ft_activation), bool(config.relations),
                                                          bool(config.float_tail))
    made = stages(config)
    value, refresh, update = made.value, made.refresh, made.update

    @njit(cache=True)
    def refresh_both(bitboards, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8, psqt8,
                     feats, counts, acc, psqt_acc):
        rel = np.empty(RELATION_SCRATCH if relations else 0, np.int64)
        idx = np.empty(INDEX_SCRATCH if relations else 0, np.int32)
        return refresh(bitboards, params, slot_table, king_buckets, ft_weights, ft_biases, psqt_weights, weights8, psqt8,
                       feats, counts, acc, psqt_acc, rel, idx)

    @njit(cache=True)
    def trace_buckets(acc, psqt_acc, stm, params, scratch, weights, biases, layers, out):
        for b in range(out.shape[0]):
            psqt, positional = forward_bucket(acc, psqt_acc, stm, b, params, scratch, weights, biases, layers, isa,
                                              fc0_isa, ft_activation, float_tail)
            out[b, 0] = psqt
            out[b, 1] = positional

    @njit(cache=True)
    def evaluate_sequence(bitboards, stms, out, ft_weights, psqt_weights, weights8, psqt8, weights, biases, cfg, accs,
                          psqts, state, scratch):
        params, slot_table, king_buckets, layers = unpack_config(cfg)
        empty = params[P_CACHE_PAIRS]
        work = empty + 1  # two scratch pairs, used in turn (an update in place would not vectorise)
        added, removed = feature_buffers(scratch, layers)
        rel, idx = relation_buffers(scratch, layers, params)
        for i in range(bitboards.shape[0]):
            new = bitboards[i]
            if check_bitboards(new, params[P_MAX_PIECES]) != POS_OK:
                return i
            dst = work + (i & 1)
            src = work + ((i - 1) & 1) if i > 0 else -1
            for p in range(2):
                update(new, np.int64(p), np.int64(src), np.int64(dst), np.int64(empty), accs, psqts, state, ft_weights,
                       psqt_weights, slot_table, king_buckets, params, added, removed, weights8, psqt8, rel, idx)
            out[i] = evaluate_pair(new, dst, stms[i], params, accs, psqts, scratch, weights, biases, layers, value)
        return -1

    return Kernels(refresh_both, trace_buckets, evaluate_sequence)

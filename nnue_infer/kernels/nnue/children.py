"""Every child of a position evaluated in one call: legal moves generated and played in compiled
code, each child one incremental update from its parent's accumulator.

The kernels work on an evaluator's arena header (see :mod:`~nnue_infer.kernels.nnue.arena`) and are made
per ``forward.Config`` (:func:`kernels`: a network compiles its own path only).  The parent goes to
some ply of the accumulator stack and is brought up to date as ``Evaluator.evaluate`` does
(``forward.update_stack``: from the nearest computed ancestor below ``trusted``, or through the
refresh cache); each child goes to the next ply's pair: per perspective whose king did not move, one
update from the parent's accumulator (copy plus the feature delta, threat and pawn-pair inputs
included; no search for an ancestor, no refresh-cache bookkeeping), and for the side whose king
moved a refresh through the refresh cache (``accumulator.update_perspective``), then the layer
stack.  The next child's feature delta is worked out while the current one is evaluated and its
weight rows are prefetched.  The values are those of ``push``, ``evaluate()`` and ``pop``
(accumulator sums wrap, so any order of rows gives the same bits).

Result codes (the return value of ``evaluate_children`` when negative):
``INVALID_POSITION`` the parent cannot be represented; ``OPPONENT_IN_CHECK`` the side not to move
is in check (its king could be taken: no child would be a chess position);
``ILLEGAL_MOVE - i`` the given move ``i`` is not legal; ``INVALID_CHILD - k`` child ``k``
cannot be represented (only after an odd en passant square, see :mod:`.movegen`).

The cached kernels here contain the kernels they inline from other files: their cache is stamped
with the contents of every kernel file (:mod:`nnue_infer.kernels.cache`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import carray, get_thread_id, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .accumulator import STATE_FLAG, update_accumulator, update_relations
from .arena import config_views, header_arrays, header_at, put_position, scratch_views
from ..chess.bitboard import BB_WHITE, POS_BLACK_KINGS, POS_INCONSISTENT, POS_OK, POS_WHITE_KINGS, check_bitboards, king_square
from .feature_index import changed_features, king_frame
from .forward import (INVALID_POSITION, P_CACHE_PAIRS, P_MAX_PIECES, P_MIRROR, P_NUM_SLOTS, P_PAIR_OFFSET, P_PAIRS,
                      P_THREATS, Config, evaluate_pair, stages, update_stack)
from ..chess.attacks import attackers
from ..chess.movegen import MAX_MOVES, legal_moves, play, to_chess960
from ..refcount import last_use
from ..simd import address_pointer

OPPONENT_IN_CHECK = -(1 << 60)
ILLEGAL_MOVE = -(1 << 50)
INVALID_CHILD = -(1 << 40)
#: Room for the added (or removed) features of one perspective in one move (at most 2 + 2 for
#: castling; 32 as ``features.changed_features`` asks).
DELTA = 32
#: int64 entries of ``children_values``' work buffer: bitboards (8), kings, orients, bases (2
#: each), two children (2 x 8), counts (2 x 2 x 2), then the int32 lists (2 x 2 x 2 x DELTA).
WORK = 38 + 2 * 2 * 2 * DELTA // 2


def prefetch(arr, index) -> None:
    """Ask the CPU to bring the cache line of ``arr.flat[index]`` (a C-contiguous array) into its
    caches; no effect on results.  Plain Python (``NUMBA_DISABLE_JIT``): does nothing.
    Compiled: :func:`_prefetch` (LLVM's ``llvm.prefetch``: read, high locality), inlined."""


@intrinsic
def _prefetch(typingctx, arr, index):
    """The compiled :func:`prefetch`."""
    if not (isinstance(arr, types.Array) and arr.layout == "C" and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(builder.gep(ary.data, [args[1]]), i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(arr, index), codegen


@overload(prefetch, inline="always")
def _prefetch_overload(arr, index):
    if isinstance(arr, types.Array) and arr.layout == "C" and isinstance(index, types.Integer):
        return lambda arr, index: _prefetch(arr, index)
    return None


@njit(cache=True, inline="always")
def child_delta(parent, child, kings, orients, bases, slot_table, ft_weights, psqt_weights, lists, counts):
    """The feature delta parent -> ``child`` per perspective whose king did not move (``kings``,
    ``orients``, ``bases``: the parent's king squares and frames, ``features.king_frame``) into
    ``lists`` int32[2, 2, DELTA] (perspective, added / removed) and ``counts`` int64[2, 2]
    (``counts[p, 0] = -1``: ``p``'s king moved), and a prefetch of the weight rows the update will
    read, so that they arrive while the previous child's layer stack runs."""
    width = ft_weights.shape[1]
    for p in range(2):
        if king_square(child, p) != kings[p]:
            counts[p, 0] = -1
            continue
        n_added, n_removed = changed_features(parent, child, p, orients[p], bases[p], slot_table, lists[p, 0],
                                              lists[p, 1])
        counts[p, 0] = n_added
        counts[p, 1] = n_removed
        for j in range(n_added + n_removed):
            row = lists[p, 0, j] if j < n_added else lists[p, 1, j - n_added]
            for line in range(0, width, 32):  # 64-byte lines of int16
                prefetch(ft_weights, row * width + line)
            prefetch(psqt_weights, row * psqt_weights.shape[1])


@njit(cache=True, inline="always")
def as_position(bitboards, white_to_move):
    """A position tuple of :data:`nnue_infer.kernels.nnue.arena.POSITION` (uint64 bitboards, side to move)."""
    return (np.uint64(bitboards[0]), np.uint64(bitboards[1]), np.uint64(bitboards[2]), np.uint64(bitboards[3]),
            np.uint64(bitboards[4]), np.uint64(bitboards[5]), np.uint64(bitboards[6]), np.uint64(bitboards[7]),
            white_to_move)


@njit(cache=True, inline="always")
def find_moves(bitboards, stm, castling, ep, chess960, n_given, moves):
    """The legal moves of the parent into ``moves`` (all when ``n_given < 0``, else the
    ``n_given`` moves given in ``moves``, replaced in place by the codes the generator writes for
    them); returns their number or ``ILLEGAL_MOVE - i``."""
    if n_given < 0:
        return legal_moves(bitboards, stm, castling, ep, chess960, moves)
    legal = np.empty(MAX_MOVES, np.uint16)
    n_legal = legal_moves(bitboards, stm, castling, ep, chess960, legal)
    for i in range(n_given):
        found = -1
        for j in range(n_legal):  # as written (UCI of python-chess's moves) ...
            if legal[j] == moves[i]:
                found = j
                break
        if found < 0:  # ... or castling written the other way
            wanted = to_chess960(bitboards, np.int64(moves[i]))
            for j in range(n_legal):
                if to_chess960(bitboards, np.int64(legal[j])) == wanted:
                    found = j
                    break
        if found < 0:
            return ILLEGAL_MOVE - i
        moves[i] = legal[found]
    return n_given


@njit(cache=True, inline="always")
def children_values(address, ply, trusted, position, castling, ep, chess960, n_given, with_parent, moves, values, isa,
                    relations, update, value):
    """The body of ``evaluate_children`` (see :func:`kernels`) with the buffers ``moves`` and
    ``values`` of :func:`io_views`; ``isa`` and ``relations`` as in ``forward.Config``, ``update``
    and ``value`` the configuration's ``forward.Stages`` members."""
    h = header_at(address)
    a = header_arrays(h)
    params, slot_table, king_buckets, layers = config_views(h)
    added, removed, rel, idx = scratch_views(h, params, layers)
    ft_weights, psqt_weights, weights8, psqt8, weights, biases = a[0], a[1], a[2], a[3], a[4], a[5]
    accs, psqts, state, scratch = a[7], a[8], a[9], a[10]
    empty = params[P_CACHE_PAIRS]
    top = empty + 3 + ply
    put_position(state, top, position)
    state[top, 0, STATE_FLAG] = 0
    state[top, 1, STATE_FLAG] = 0
    if update_stack(ply, trusted, params, slot_table, king_buckets, ft_weights, psqt_weights, weights8, psqt8, accs,
                    psqts, state, added, removed, rel, idx, update) < 0:
        return INVALID_POSITION, INVALID_POSITION
    # The call's small arrays are views of one buffer without reference counts (``numba.carray`` of
    # its address): views of arrays that np.empty makes each cost an atomic increment and decrement
    # of the array's count, several per child in the loop below
    work = np.empty(WORK, np.int64)
    at = np.int64(work.ctypes.data)
    bitboards = carray(address_pointer(at, np.int64), (8,))
    kings = carray(address_pointer(at + 64, np.int64), (2,))
    orients = carray(address_pointer(at + 80, np.int64), (2,))
    bases = carray(address_pointer(at + 96, np.int64), (2,))
    children = carray(address_pointer(at + 112, np.int64), (2, 8))
    counts = carray(address_pointer(at + 240, np.int64), (2, 2, 2))
    lists = carray(address_pointer(at + 304, np.int32), (2, 2, 2, DELTA))
    for i in range(8):
        bitboards[i] = state[top, 0, i]
    stm = 0 if position[8] else 1
    occupied = bitboards[BB_WHITE] | bitboards[BB_WHITE + 1]
    if attackers(bitboards, stm, king_square(bitboards, 1 - stm), occupied) != 0:
        result = OPPONENT_IN_CHECK
    else:
        result = find_moves(bitboards, stm, np.int64(np.uint64(castling)), ep, chess960, n_given, moves)
    n = max(result, 0)
    for p in range(2):
        kings[p] = king_square(bitboards, p)
        orient, base, _ = king_frame(kings[p], p, king_buckets, params[P_MIRROR], params[P_NUM_SLOTS])
        orients[p] = orient
        bases[p] = base
    pair = top + 1
    state[pair, 0, STATE_FLAG] = 0  # the children's pair is not a computed ply for the stack
    state[pair, 1, STATE_FLAG] = 0
    if n > 0:
        play(bitboards, stm, np.int64(moves[0]), ep, children[0])
        child_delta(bitboards, children[0], kings, orients, bases, slot_table, ft_weights, psqt_weights, lists[0],
                    counts[0])
    parent = 0
    for k in range(-1 if with_parent or result < 0 else 0, n):
        if k < 0:  # the parent's value, in the loop: one copy of the layer stack in the compiled code
            position_k, pair_k, stm_k = bitboards, top, stm
        else:
            position_k, pair_k, stm_k = children[k & 1], pair, 1 - stm
            if k + 1 < n:
                following = children[(k + 1) & 1]
                play(bitboards, stm, np.int64(moves[k + 1]), ep, following)
                child_delta(bitboards, following, kings, orients, bases, slot_table, ft_weights, psqt_weights,
                            lists[(k + 1) & 1], counts[(k + 1) & 1])
            if check_bitboards(position_k, params[P_MAX_PIECES]) != POS_OK:
                return INVALID_CHILD - k, parent
            delta, count = lists[k & 1], counts[k & 1]
            for p in range(2):
                if count[p, 0] < 0:
                    update(position_k, np.int64(p), np.int64(-1), np.int64(pair), np.int64(empty), accs, psqts, state,
                           ft_weights, psqt_weights, slot_table, king_buckets, params, added, removed, weights8, psqt8,
                           rel, idx)
                    continue
                update_accumulator(ft_weights, psqt_weights, accs[top, p], psqts[top, p], delta[p, 0], count[p, 0],
                                   delta[p, 1], count[p, 1], accs[pair, p], psqts[pair, p], np.int64(isa))
                if relations:
                    update_relations(bitboards, position_k, p, params[P_THREATS], params[P_PAIRS],
                                     params[P_PAIR_OFFSET], weights8, psqt8, rel, idx, accs[pair, p], psqts[pair, p])
        v = evaluate_pair(position_k, pair_k, stm_k, params, accs, psqts, scratch, weights, biases, layers, value)
        if k < 0:
            parent = v
        else:
            values[k] = v
    last_use((work,))  # the buffer lives until here: the views hold only its address
    return result, parent


@njit(cache=True, inline="always")
def io_views(io, n_given):
    """The buffers of ``evaluate_children`` at address ``io`` (an int32 array of
    ``nnue_infer.children.io_buffer``): ``values`` int32[cap], then ``moves`` uint16[cap],
    ``cap = max(MAX_MOVES, n_given)``."""
    cap = max(MAX_MOVES, n_given)
    return carray(address_pointer(io + 4 * cap, np.uint16), (cap,)), carray(address_pointer(io, np.int32), (cap,))


@njit(cache=True)
def count_legal_moves(bitboards, stm, castling, ep, chess960, counts):
    """Number of legal moves of each of ``n`` positions into ``counts`` int64[n] (arrays as in
    ``evaluate_children_batch``, :func:`kernels`); 0 for a row without exactly one king per side (or
    with contradictory bitboards), which ``evaluate_children`` then refuses."""
    buf = np.empty(MAX_MOVES, np.uint16)
    for i in range(bitboards.shape[0]):
        code = check_bitboards(bitboards[i], 64)
        if code == POS_WHITE_KINGS or code == POS_BLACK_KINGS or code == POS_INCONSISTENT:
            counts[i] = 0
            continue
        counts[i] = legal_moves(bitboards[i], np.int64(stm[i]), castling[i], np.int64(ep[i]), chess960[i] != 0, buf)


class Kernels(NamedTuple):
    """The kernels of one ``forward.Config`` (see :func:`kernels`)."""

    evaluate_children: object
    evaluate_children_batch: object


@functools.cache
def kernels(config: Config) -> Kernels:
    """The children kernels specialised for ``config`` (its fields are compile-time constants, as in
    :func:`forward.kernels <nnue_infer.kernels.nnue.forward.kernels>`).

    ``evaluate_children(address, ply, trusted, position, castling, ep, chess960, n_given,
    with_parent, io)``: values of the positions after the legal moves (or the given ones) of
    ``position``.  Arrays travel as addresses (ints unbox in a few ns, each array argument
    costs about 0.35 us of a call from Python).

    * ``address``: an arena header (:func:`nnue_infer.kernels.nnue.arena.write_header`);
    * ``ply``, ``trusted``: the parent goes to pair ``ply`` of the stack (as
      ``arena.kernels(config).evaluate_ply(address, ply, trusted, position)`` would compute it),
      the children to pair ``ply + 1``: the header needs ``ply + 2`` plies;
    * ``position``: the parent, an ``arena.POSITION`` (eight uint64 bitboards, the side to move,
      True: White); ``castling`` uint64 ``Board.clean_castling_rights()``; ``ep`` int
      ``Board.ep_square`` (0 for none); ``chess960`` bool;
    * ``n_given``: -1 for every legal move, else the number of move codes
      (:mod:`~nnue_infer.kernels.chess.movegen`) given in ``moves`` (castling king-to-target or
      king-takes-rook, as python-chess accepts it);
    * ``with_parent`` bool: also run the parent's layer stack (its value is returned, else 0);
    * ``io``: address of the int32 buffer of :func:`io_views` (``nnue_infer.children.io_buffer``):
      ``moves`` (the given moves in, the moves evaluated out, as python-chess writes them, in
      ``Board.legal_moves`` order when ``n_given < 0``) and ``values`` (each child's value,
      internal units, the child's side to move's point of view).

    Returns ``(n, parent)``: the number of children (or a negative result code, module
    docstring) and the parent's value (computed whenever the result is a code other than
    ``INVALID_POSITION`` or ``INVALID_CHILD``, for the caller to keep).

    ``evaluate_children_batch(addresses, bitboards, stm, castling, ep, chess960, offsets, n_chunks,
    moves, values, results)``: ``evaluate_children`` of ``n`` positions on all cores, into CSR
    arrays.  ``addresses`` int64[threads]: one arena header per Numba thread
    (``numba.get_num_threads()``), each with its own accumulators (two plies at least), refresh
    cache and scratch; ``bitboards`` int64[n, 8] (:mod:`nnue_infer.kernels.chess.bitboard` layout),
    ``stm`` uint8[n] (0 White), ``castling`` int64[n], ``ep`` int64[n] (0 none), ``chess960``
    uint8[n]; the children of row ``i`` go to ``moves`` / ``values`` ``[offsets[i]:offsets[i +
    1]]`` (``offsets`` int64[n + 1] from :func:`count_legal_moves`); ``n_chunks`` contiguous chunks
    of rows are handed out to the threads; ``results`` int64[n] receives per row what
    ``evaluate_children`` returned.
    """
    isa, relations = int(config.isa), bool(config.relations)
    made = stages(config)
    value, update = made.value, made.update

    @njit(cache=True)
    def evaluate_children(address, ply, trusted, position, castling, ep, chess960, n_given, with_parent, io):
        moves, values = io_views(io, n_given)
        return children_values(address, ply, trusted, position, castling, ep, chess960, n_given, with_parent, moves,
                               values, isa, relations, update, value)

    # The batch calls evaluate_children (compiled once, linked in) rather than inlining its body again:
    # half the children kernels' compile time (issue 19)
    @njit(parallel=True, cache=True)
    def evaluate_children_batch(addresses, bitboards, stm, castling, ep, chess960, offsets, n_chunks, moves, values,
                                results):
        n = bitboards.shape[0]
        n_chunks = max(1, min(n, n_chunks))
        for c in prange(n_chunks):
            address = addresses[get_thread_id()]
            buf = np.empty(MAX_MOVES + MAX_MOVES // 2, np.int32)  # io_views' layout for n_given = -1
            io = np.int64(buf.ctypes.data)
            buf_moves, buf_values = io_views(io, np.int64(-1))
            for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
                b = bitboards[i]
                white = stm[i] == 0
                result = evaluate_children(address, np.int64(0), np.int64(0), as_position(b, white),
                                           np.uint64(castling[i]), np.int64(ep[i]), chess960[i] != 0, np.int64(-1),
                                           white != white, io)[0]  # with_parent: False, as a boolean value
                results[i] = result
                lo = offsets[i]
                for k in range(min(result, offsets[i + 1] - lo)):
                    moves[lo + k] = buf_moves[k]
                    values[lo + k] = buf_values[k]
            last_use((buf,))  # the buffer lives until here: its address is all the loop holds

    return Kernels(evaluate_children, evaluate_children_batch)

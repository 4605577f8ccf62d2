"""Every child of a position evaluated in one call: legal moves generated and played in compiled
code, each child one incremental update from its parent's accumulator.

The evaluation goes through :func:`nnue_infer.kernels.arena.evaluate_ply` on an evaluator's
arena header (see :mod:`~nnue_infer.kernels.arena`): the parent at some ply of its accumulator
stack (brought up to date from the nearest computed ancestor below ``trusted``, or through the
refresh cache) and each child in turn at the next ply (one update from the parent per
perspective; a king move refreshes that perspective through the refresh cache, threat and
pawn-pair inputs included), exactly as ``push``, ``evaluate()`` and ``pop`` would.  Calling the compiled ``evaluate_ply`` instead of inlining the
network here keeps these entry points small: they compile in seconds, not minutes.

Result codes (the return value of :func:`evaluate_children` when negative):
``INVALID_POSITION`` the parent cannot be represented; ``OPPONENT_IN_CHECK`` the side not to move
is in check (its king could be taken: no child would be a chess position);
``ILLEGAL_MOVE - i`` the given move ``i`` is not legal; ``INVALID_CHILD - k`` child ``k``
cannot be represented (only after an odd en passant square, see :mod:`.movegen`).

Note: Numba's on-disk cache keys a function on its own file only, and the cached kernels here
contain the compiled :func:`~nnue_infer.kernels.arena.evaluate_ply` they call (and what it
inlines): a change to ``arena``, ``forward`` or a kernel those inline must come with an edit of
this file (or a cleared ``__pycache__``), as for ``arena`` itself.  Last such change: none (new).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import get_thread_id, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .arena import config_views, evaluate_ply, header_arrays, header_at, put_position
from .features import (BB_WHITE, POS_BLACK_KINGS, POS_INCONSISTENT, POS_WHITE_KINGS, changed_features, check_bitboards,
                       king_frame, king_square)
from .forward import INVALID_POSITION, P_MIRROR, P_NUM_SLOTS
from .movegen import MAX_MOVES, attackers, legal_moves, play, to_chess960

OPPONENT_IN_CHECK = -(1 << 60)
ILLEGAL_MOVE = -(1 << 50)
INVALID_CHILD = -(1 << 40)


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


@njit(cache=True)
def prefetch_rows(address, parent, child, orients, bases, added, removed):
    """Prefetch the feature-transformer rows the update parent -> ``child`` will read, for each
    perspective whose king does not move (``orients``/``bases``: the parent's king frames, see
    ``features.king_frame``), so that they arrive while the previous child's layer stack runs."""
    h = header_at(address)
    arrays = header_arrays(h)
    ft_weights, psqt_weights = arrays[0], arrays[1]
    params, slot_table, king_buckets, layers = config_views(h)
    width = ft_weights.shape[1]
    for p in range(2):
        if king_square(child, p) != king_square(parent, p):
            continue
        n_added, n_removed = changed_features(parent, child, p, orients[p], bases[p], slot_table, added, removed)
        for j in range(n_added + n_removed):
            row = (added[j] if j < n_added else removed[j - n_added]) * width
            for line in range(0, width, 32):  # 64-byte lines of int16
                prefetch(ft_weights, row + line)
            prefetch(psqt_weights, (added[j] if j < n_added else removed[j - n_added]) * psqt_weights.shape[1])


@njit(cache=True, inline="always")
def as_position(bitboards, white_to_move):
    """A position tuple of :data:`nnue_infer.kernels.arena.POSITION` (uint64 bitboards, side to move)."""
    return (np.uint64(bitboards[0]), np.uint64(bitboards[1]), np.uint64(bitboards[2]), np.uint64(bitboards[3]),
            np.uint64(bitboards[4]), np.uint64(bitboards[5]), np.uint64(bitboards[6]), np.uint64(bitboards[7]),
            white_to_move)


@njit(cache=True)
def evaluate_children(address, ply, trusted, position, castling, ep, chess960, given, n_given, moves, values):
    """Values of the positions after the legal moves (or the given ones) of ``position``.

    Parameters
    ----------
    address : int
        Address of an arena header (:func:`nnue_infer.kernels.arena.write_header`).
    ply, trusted : int
        The parent goes to pair ``ply`` of the stack (computed as ``arena.evaluate_ply(address, ply,
        trusted, position)``), the children to pair ``ply + 1``: the header needs ``ply + 2`` plies.
    position : arena.POSITION
        The parent: eight uint64 bitboards and the side to move (True: White).
    castling : uint64
        ``Board.clean_castling_rights()``.
    ep : int
        ``Board.ep_square``, 0 for none.
    chess960 : bool
        ``Board.chess960``.
    given : uint16[>= n_given]
        Move codes (:mod:`~nnue_infer.kernels.movegen`) to evaluate when ``n_given >= 0``; castling
        may be king-to-target or king-takes-rook, as python-chess accepts it.
    n_given : int
        -1 to evaluate every legal move.
    moves : uint16[>= max(MAX_MOVES, n_given)]
        Output: the moves evaluated, as python-chess writes them (``Board.legal_moves`` order
        when ``n_given < 0``).
    values : int32[>= max(MAX_MOVES, n_given)]
        Output: value of each child (internal units, the child's side to move's point of view).

    Returns
    -------
    (int, int)
        The number of children (or a negative result code, module docstring) and the parent's value.
    """
    parent = evaluate_ply(address, ply, trusted, position)
    if parent == INVALID_POSITION:
        return INVALID_POSITION, parent
    rows = np.empty((1, 1, 8), np.int64)
    put_position(rows, 0, position)
    bitboards = rows[0, 0]
    stm = 0 if position[8] else 1
    occupied = bitboards[BB_WHITE] | bitboards[BB_WHITE + 1]
    if attackers(bitboards, stm, king_square(bitboards, 1 - stm), occupied) != 0:
        return OPPONENT_IN_CHECK, parent
    castling = np.int64(np.uint64(castling))  # bit 63 (h8) set: through uint64, also in plain Python
    if n_given < 0:
        n = legal_moves(bitboards, stm, castling, ep, chess960, moves)
    else:
        legal = np.empty(MAX_MOVES, np.uint16)
        n_legal = legal_moves(bitboards, stm, castling, ep, chess960, legal)
        for i in range(n_given):
            wanted = to_chess960(bitboards, np.int64(given[i]))
            found = -1
            for j in range(n_legal):
                if to_chess960(bitboards, np.int64(legal[j])) == wanted:
                    found = j
                    break
            if found < 0:
                return ILLEGAL_MOVE - i, parent
            moves[i] = legal[found]
        n = n_given
    h = header_at(address)
    params, slot_table, king_buckets, layers = config_views(h)
    orients = np.empty(2, np.int64)
    bases = np.empty(2, np.int64)
    for p in range(2):
        orient, base, _ = king_frame(king_square(bitboards, p), p, king_buckets, params[P_MIRROR], params[P_NUM_SLOTS])
        orients[p] = orient
        bases[p] = base
    scratch = np.empty(64, np.int32)
    added, removed = scratch[:32], scratch[32:]
    children = np.empty((2, 8), np.int64)
    if n > 0:
        play(bitboards, stm, np.int64(moves[0]), ep, children[0])
    for k in range(n):
        child = children[k & 1]
        if k + 1 < n:
            following = children[(k + 1) & 1]
            play(bitboards, stm, np.int64(moves[k + 1]), ep, following)
            prefetch_rows(address, bitboards, following, orients, bases, added, removed)
        value = evaluate_ply(address, ply + 1, ply + 1, as_position(child, stm == 1))
        if value == INVALID_POSITION:
            return INVALID_CHILD - k, parent
        values[k] = value
    return n, parent


@njit(cache=True)
def count_legal_moves(bitboards, stm, castling, ep, chess960, counts):
    """Number of legal moves of each of ``n`` positions into ``counts`` int64[n] (arrays as in
    :func:`evaluate_children_batch`); 0 for a row without exactly one king per side (or with
    contradictory bitboards), which :func:`evaluate_children` then refuses."""
    buf = np.empty(MAX_MOVES, np.uint16)
    for i in range(bitboards.shape[0]):
        code = check_bitboards(bitboards[i], 64)
        if code == POS_WHITE_KINGS or code == POS_BLACK_KINGS or code == POS_INCONSISTENT:
            counts[i] = 0
            continue
        counts[i] = legal_moves(bitboards[i], np.int64(stm[i]), castling[i], np.int64(ep[i]), chess960[i] != 0, buf)


@njit(parallel=True, cache=True)
def evaluate_children_batch(addresses, bitboards, stm, castling, ep, chess960, offsets, n_chunks, moves, values,
                            results):
    """:func:`evaluate_children` of ``n`` positions on all cores, into CSR arrays.

    Parameters
    ----------
    addresses : int64[threads]
        One arena header per Numba thread (``numba.get_num_threads()``), each with its own
        accumulators (two plies at least), refresh cache and scratch.
    bitboards : int64[n, 8]
        The positions (:mod:`nnue_infer.kernels.features` layout).
    stm, castling, ep, chess960 : uint8[n], int64[n], int64[n], uint8[n]
        Side to move (0 White), clean castling rights, en passant square (0 none), Chess960 flag.
    offsets : int64[n + 1]
        The children of row ``i`` go to ``moves`` / ``values`` ``[offsets[i]:offsets[i + 1]]``
        (from :func:`count_legal_moves`).
    n_chunks : int
        Contiguous chunks of rows handed out to the threads.
    moves, values : uint16[offsets[n]], int32[offsets[n]]
        Output: move codes and values, as :func:`evaluate_children`.
    results : int64[n]
        Output: per row, what :func:`evaluate_children` returned.
    """
    n = bitboards.shape[0]
    n_chunks = max(1, min(n, n_chunks))
    for c in prange(n_chunks):
        address = addresses[get_thread_id()]
        buf_moves = np.empty(MAX_MOVES, np.uint16)
        buf_values = np.empty(MAX_MOVES, np.int32)
        none = np.empty(0, np.uint16)
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            b = bitboards[i]
            result = evaluate_children(address, np.int64(0), np.int64(0), as_position(b, stm[i] == 0),
                                       np.uint64(castling[i]), np.int64(ep[i]), chess960[i] != 0, none, np.int64(-1),
                                       buf_moves, buf_values)[0]
            results[i] = result
            lo = offsets[i]
            for k in range(min(result, offsets[i + 1] - lo)):
                moves[lo + k] = buf_moves[k]
                values[lo + k] = buf_values[k]

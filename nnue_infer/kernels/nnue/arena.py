"""One int64 *header* standing for the arrays of an evaluator, so a per-position call from Python
passes a few ints instead of eleven arrays.

Numba unboxes every array argument of a call from Python: an empty kernel taking three ints and
the Evaluator's eleven arrays costs about 0.7 us per call on this project's machine (at load 8),
with one array about 0.35 us, with ints only about 0.12 us (load 2).  The Evaluator writes the
address and shape of each of its arrays into a header (:func:`write_header`) and passes the
header's *address*; :func:`evaluate_ply` and :func:`evaluate_board` rebuild the arrays from it
(views, no copy), write the position's bitboards (given as a tuple of Python ints, see
:data:`POSITION`) into the evaluator's state and run the kernels of
:mod:`~nnue_infer.kernels.nnue.forward`.  Both are made per ``forward.Config`` (:func:`kernels`).

The caller keeps the header and every array alive while the address is in use and rewrites the
header whenever it replaces an array (the header holds raw addresses; they are never pickled).

The cached kernels here contain the kernels they inline from other files: their cache is stamped
with the contents of every kernel file (:mod:`nnue_infer.kernels.cache`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numba import carray, njit, types

from . import forward
from .accumulator import INDEX_SCRATCH, RELATION_SCRATCH, STATE_FLAG
from .dense import LAYER_TABLE_COLUMNS, SCRATCH_FEATURES, scratch_layout
from ..chess.fen import fen_fields
from ..simd import address_pointer as _pointer

#: The arrays a header stands for, in the order of the ``forward`` kernels' arguments: name,
#: dtype, number of dimensions.  Each takes ``SLOT`` int64 entries: address, then the shape.
ARRAYS = (
    ("ft_weights", np.int16, 2), ("psqt_weights", np.int32, 2), ("weights8", np.int8, 2), ("psqt8", np.int32, 2),
    ("weights", np.int8, 1), ("biases", np.int32, 1), ("cfg", np.int64, 1),
    ("accs", np.int16, 3), ("psqts", np.int32, 3), ("state", np.int64, 3), ("scratch", np.int16, 1),
)
SLOT = 4
HEADER_SIZE = SLOT * len(ARRAYS)

#: Numba type of a position as the Evaluator passes it: python-chess's eight bitboards (pawns,
#: knights, bishops, rooks, queens, kings, White's pieces, Black's pieces; a1 = bit 0) as uint64
#: (they reach 2**64 - 1), then the side to move (True: White, python-chess's ``Board.turn``).
POSITION = types.Tuple((types.uint64,) * 8 + (types.boolean,))


def write_header(header: np.ndarray, arrays: tuple) -> None:
    """Write the addresses and shapes of ``arrays`` (C-contiguous, the dtypes and dimensions of
    :data:`ARRAYS`) into ``header`` (int64[HEADER_SIZE]).

    Raises ``TypeError`` for an array of another dtype, dimension or layout: the kernels would
    read its memory with the wrong type.
    """
    if len(arrays) != len(ARRAYS):
        raise TypeError(f"expected {len(ARRAYS)} arrays, got {len(arrays)}")
    for k, ((name, dtype, ndim), a) in enumerate(zip(ARRAYS, arrays)):
        if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != ndim or not a.flags.c_contiguous:
            got = f"{a.dtype}[{a.ndim}d]" if isinstance(a, np.ndarray) else type(a).__name__
            raise TypeError(f"arena array {name}: expected C-contiguous {np.dtype(dtype)}[{ndim}d], got {got}")
        header[SLOT * k] = a.ctypes.data
        header[SLOT * k + 1:SLOT * k + 1 + ndim] = a.shape


@njit(cache=True, inline="always")
def header_arrays(h):
    """The arrays of header ``h`` (see :data:`ARRAYS`), as views of their memory."""
    return (
        carray(_pointer(h[0], np.int16), (h[1], h[2])),
        carray(_pointer(h[4], np.int32), (h[5], h[6])),
        carray(_pointer(h[8], np.int8), (h[9], h[10])),
        carray(_pointer(h[12], np.int32), (h[13], h[14])),
        carray(_pointer(h[16], np.int8), (h[17],)),
        carray(_pointer(h[20], np.int32), (h[21],)),
        carray(_pointer(h[24], np.int64), (h[25],)),
        carray(_pointer(h[28], np.int16), (h[29], h[30], h[31])),
        carray(_pointer(h[32], np.int32), (h[33], h[34], h[35])),
        carray(_pointer(h[36], np.int64), (h[37], h[38], h[39])),
        carray(_pointer(h[40], np.int16), (h[41],)),
    )


@njit(cache=True, inline="always")
def header_at(address):
    """The header int64[HEADER_SIZE] at ``address`` (a view of the caller's header array)."""
    return carray(_pointer(address, np.int64), (HEADER_SIZE,))


@njit(cache=True, inline="always")
def put_position(state, pair, position):
    """``state[pair, 0, :8] = position[:8]``: the bitboards of a :data:`POSITION` tuple, as int64
    (the same bits), where the ``forward`` kernels read the position to evaluate."""
    row = state[pair, 0]
    row[0] = np.int64(np.uint64(position[0]))
    row[1] = np.int64(np.uint64(position[1]))
    row[2] = np.int64(np.uint64(position[2]))
    row[3] = np.int64(np.uint64(position[3]))
    row[4] = np.int64(np.uint64(position[4]))
    row[5] = np.int64(np.uint64(position[5]))
    row[6] = np.int64(np.uint64(position[6]))
    row[7] = np.int64(np.uint64(position[7]))


@njit(cache=True, inline="always")
def config_views(h):
    """``(params, slot_table, king_buckets, layers)`` of the ``cfg`` array of header ``h`` (see
    ``forward.unpack_config``), made straight from its address: no reshape or dtype view at run time."""
    cfg = h[24]
    params = carray(_pointer(cfg, np.int64), (forward.N_PARAMS,))
    slot_table = carray(_pointer(cfg + 8 * forward.CFG_SLOT_TABLE, np.int32), (2, 6))
    king_buckets = carray(_pointer(cfg + 8 * forward.CFG_KING_BUCKETS, np.int32), (64,))
    n_layers = (h[25] - forward.CFG_LAYERS) // LAYER_TABLE_COLUMNS
    layers = carray(_pointer(cfg + 8 * forward.CFG_LAYERS, np.int64), (n_layers, LAYER_TABLE_COLUMNS))
    return params, slot_table, king_buckets, layers


@njit(cache=True, inline="always")
def scratch_views(h, params, layers):
    """The feature lists and the threat / pawn-pair scratch in the int16 scratch buffer of header
    ``h``: ``added``, ``removed`` int32[SCRATCH_FEATURES // 2] (``forward.feature_buffers``) and
    ``rel`` int64, ``idx`` int32 (``forward.relation_buffers``: empty for networks without those sets)."""
    address = h[40]
    _, _, _, feats, end = scratch_layout(layers)
    half = SCRATCH_FEATURES // 2
    added = carray(_pointer(address + 2 * feats, np.int32), (half,))
    removed = carray(_pointer(address + 2 * feats + 4 * half, np.int32), (half,))
    on = params[forward.P_THREATS] != 0 or params[forward.P_PAIRS] != 0
    rel = carray(_pointer(address + 2 * end, np.int64), (RELATION_SCRATCH if on else 0,))
    idx = carray(_pointer(address + 2 * end + 8 * RELATION_SCRATCH, np.int32), (INDEX_SCRATCH if on else 0,))
    return added, removed, rel, idx


@njit(cache=True, inline="always")
def ply_value(address, ply, trusted, position, update, value):
    """:func:`forward.evaluate_stack <nnue_infer.kernels.nnue.forward.evaluate_stack>` of ``position``
    (a :data:`POSITION` tuple) at ``ply`` on the arrays of the header at ``address``; ``update`` and
    ``value``: the configuration's ``forward.Stages`` members.

    The bitboards go to the ply's pair (``state[P_CACHE_PAIRS + 3 + ply, 0, :8]``) first and that
    pair's "computed" flags are cleared: the ply is always recomputed from its nearest computed
    ancestor (whatever ``trusted`` says), and a position refused as ``INVALID_POSITION`` leaves no
    flagged pair whose piece set is not its accumulator's.  The side to move is ``position[8]``.
    Returns what ``forward.evaluate_stack`` returns (the value, or ``INVALID_POSITION``).
    """
    h = header_at(address)
    a = header_arrays(h)
    params, slot_table, king_buckets, layers = config_views(h)
    added, removed, rel, idx = scratch_views(h, params, layers)
    state = a[9]
    pair = params[forward.P_CACHE_PAIRS] + 3 + ply
    put_position(state, pair, position)
    state[pair, 0, STATE_FLAG] = 0
    state[pair, 1, STATE_FLAG] = 0
    return forward.evaluate_stack(ply, 0 if position[8] else 1, trusted, params, slot_table, king_buckets, layers,
                                  a[0], a[1], a[2], a[3], a[4], a[5], a[7], a[8], state, a[10], added, removed, rel,
                                  idx, update, value)


@njit(cache=True, inline="always")
def board_value(address, position, refresh, value):
    """:func:`forward.evaluate_fresh <nnue_infer.kernels.nnue.forward.evaluate_fresh>` of ``position``
    (a :data:`POSITION` tuple, written to the first scratch pair) on the arrays of the header at
    ``address``: a full refresh; the value or ``INVALID_POSITION``.  ``refresh`` and ``value``: the
    configuration's ``forward.Stages`` members.  The active features go to the
    scratch buffer's feature lists (int32[2, MAX_PIECES] in ``added``, the two counts in ``removed``).
    """
    h = header_at(address)
    a = header_arrays(h)
    params, slot_table, king_buckets, layers = config_views(h)
    _, _, rel, idx = scratch_views(h, params, layers)
    lists = h[40] + 2 * scratch_layout(layers)[3]  # SCRATCH_FEATURES int32: 2 x MAX_PIECES, then the counts
    feats = carray(_pointer(lists, np.int32), (2, params[forward.P_MAX_PIECES]))
    counts = carray(_pointer(lists + 4 * (SCRATCH_FEATURES // 2), np.int64), (2,))
    state = a[9]
    put_position(state, params[forward.P_CACHE_PAIRS] + 1, position)
    return forward.evaluate_fresh(0 if position[8] else 1, params, slot_table, king_buckets, layers, a[0], a[1], a[2],
                                  a[3], a[4], a[5], a[7], a[8], state, a[10], feats, counts, rel, idx, refresh, value)


class Kernels(NamedTuple):
    """The entry kernels of one ``forward.Config`` (see :func:`kernels`)."""

    evaluate_ply: object
    evaluate_board: object
    evaluate_fen: object


@functools.cache
def kernels(config: forward.Config) -> Kernels:
    """The Evaluator's per-position kernels specialised for ``config`` (its fields are compile-time
    constants, as in :func:`forward.kernels <nnue_infer.kernels.nnue.forward.kernels>`).

    ``evaluate_ply(address, ply, trusted, position)``: :func:`ply_value`.

    ``evaluate_board(address, position)``: :func:`board_value`.

    ``evaluate_fen(address, buf)``: parses one FEN, the whole of ``buf`` (``bytes``), and evaluates
    it as ``evaluate_board`` (the string path of ``Evaluator.evaluate``).  Returns ``(fields,
    value)``: the number of white-space separated fields (-1 when ``kernels.chess.fen.parse_fen``
    refuses the text; nothing is evaluated then, nor with other than 4 or 6 fields: python-chess's
    path names the missing field) and the value (or ``INVALID_POSITION``).
    """
    made = forward.stages(config)
    value, refresh, update = made.value, made.refresh, made.update

    @njit(cache=True)
    def evaluate_ply(address, ply, trusted, position):
        return ply_value(address, ply, trusted, position, update, value)

    @njit(cache=True)
    def evaluate_board(address, position):
        return board_value(address, position, refresh, value)

    @njit(cache=True)
    def evaluate_fen(address, buf):
        bitboards = np.zeros(8, np.int64)
        fields, stm = fen_fields(buf, bitboards)
        if fields != 4 and fields != 6:
            return fields, 0
        return fields, board_value(address, (np.uint64(bitboards[0]), np.uint64(bitboards[1]),
                                             np.uint64(bitboards[2]), np.uint64(bitboards[3]),
                                             np.uint64(bitboards[4]), np.uint64(bitboards[5]),
                                             np.uint64(bitboards[6]), np.uint64(bitboards[7]), stm == 0),
                                   refresh, value)

    return Kernels(evaluate_ply, evaluate_board, evaluate_fen)

"""The :class:`Evaluator`: a network plus the buffers to evaluate positions with it.

Data flow: board -> validated bitboards -> feature indices per perspective ->
accumulators (int16 ``[2, L1]`` + int32 PSQT ``[2, P]``) -> feature-transformer activation
(pairwise: uint8 ``[L1]``; bilinear and the other signed ones: int8; side to move first) ->
layer stack of the position's bucket -> int value (internal units, side to move's point of
view) -> centipawns at the edge only.

Incremental evaluation (:meth:`Evaluator.push` / :meth:`Evaluator.pop` /
:meth:`Evaluator.evaluate`) keeps one accumulator pair per ply and a refresh cache; see
:class:`Evaluator`, :func:`nnue_infer.kernels.nnue.forward.evaluate_stack` and :mod:`nnue_infer.kernels.nnue.arena`.
"""

from __future__ import annotations

import copy
import functools
import os
import struct
import threading
import weakref
from collections.abc import Iterable, Sequence

import chess
import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

from . import children
from .batch import (as_sequence, evaluate_bitboards, evaluate_rows, position_problem, positions_bitboards,
                    raise_row_error)
from .errors import ConcurrentUseError, IllegalMoveError, NetworkNotFoundError, PositionError, clip, quote
from .features import MAX_PIECES, architecture_features, board_bitboards, check_position, check_variant, int8_layout
from .kernels.nnue import layer_outputs as KA
from .kernels.nnue import arena
from .kernels.nnue import forward as K
from .kernels import simd
from .kernels.nnue.accumulator import STATE_COLUMNS
from .kernels.nnue.children import kernels as children_kernels
from .kernels.nnue.dense import SCRATCH_FEATURES, scratch_size
from .kernels.nnue.forward import INVALID_POSITION
from .kernels.threads import PARALLEL_LOCK, n_chunks
from .layer_outputs import Activations
from .normalisation import material, tdiv
from .positions import board_from_fen
from .resources import NetworkLike, as_network, spec_network
from .network import SKIP_MODES, VALUE_DIVISIONS, Network
from .static_evaluation import EVALUATE, SMALL_NET_KEEP, small_net_kept, stockfish_evaluate, uses_small_net
from .trace import Trace, to_centipawns

#: A position's 8 bitboards as native-endian uint64, written straight into evaluate_game's
#: array (python-chess bitboards reach 2**64 - 1, which Numba would not take as int64).
_BITBOARDS = struct.Struct("=8Q")
_INITIAL_PLIES = 256
#: Stockfish 17.1 / 18 networks this wide or narrower (the lite and small nets) evaluate alone in
#: ``final_evaluation``, as the lite engines' single net does; wider ones pair with the small net.
_SINGLE_NET_WIDTH = 256

# evaluate(board) keeps both perspectives' active features (int32[2, MAX_PIECES]) and their counts in
# the scratch buffer's feature lists (kernels.nnue.arena.evaluate_board).
assert 2 * MAX_PIECES <= SCRATCH_FEATURES // 2

#: Compiled entry points of the per-position kernels, found once per (kernel, argument types)
#: (see :func:`_entry_index`); ``None`` until first used.
_ENTRIES: list = []
_ENTRY_INDEX: dict = {}


def _entry_index(kernel, types: tuple) -> int:
    """Index in ``_ENTRIES`` of ``kernel``'s compiled function for arguments of Numba ``types``.

    Numba's dispatcher works out the type of every argument on every call (for an int64
    header and three ints about 0.15 us, as much as unboxing them); the Evaluator's argument
    types are fixed, so it calls the compiled function directly (:func:`_entry`).  That
    function converts each argument to its type (ints, a tuple of ints) and does not check
    anything else: only arguments of exactly these types may be passed to it.
    """
    key = (kernel, types)
    index = _ENTRY_INDEX.get(key)
    if index is None:
        index = _ENTRY_INDEX[key] = len(_ENTRIES)
        _ENTRIES.append(None)
    return index


def _entry(index: int):
    """The compiled function of ``_ENTRIES[index]``, compiled (or loaded from Numba's cache) on
    first use; the plain Python function under ``NUMBA_DISABLE_JIT``."""
    fn = _ENTRIES[index]
    if fn is None:
        kernel, types = next(key for key, i in _ENTRY_INDEX.items() if i == index)
        fn = _ENTRIES[index] = kernel.compile(types) if isinstance(kernel, Dispatcher) else kernel
    return fn


def _checked_bitboards(bitboards, stm) -> tuple[np.ndarray, np.ndarray]:
    """``(bitboards, stm)`` of :meth:`Evaluator.evaluate_bitboards` as the kernel's C-contiguous
    int64[n, 8] and uint8[n], after checking shapes, dtypes and that every side to move is 0 or 1
    (a wrong length or value made the kernel read out of bounds: hostile pass)."""
    bb, side = np.asarray(bitboards), np.asarray(stm)
    if bb.dtype.kind not in "iu" or bb.dtype.itemsize != 8:
        raise TypeError(f"bitboards: expected 64-bit integers (int64 or uint64), got {bb.dtype}")
    if bb.ndim != 2 or bb.shape[1] != 8:
        raise ValueError(f"bitboards: expected shape [n, 8] (pawns, knights, bishops, rooks, queens, kings, white, "
                         f"black), got {list(bb.shape)}")
    if side.dtype.kind not in "iub":
        raise TypeError(f"stm: expected integers (0 White, 1 Black), got {side.dtype}")
    if side.shape != (bb.shape[0],):
        raise ValueError(f"stm: expected shape [{bb.shape[0]}] (one side to move per bitboards row), "
                         f"got {list(side.shape)}")
    bad = np.flatnonzero((side != 0) & (side != 1))
    if bad.size:
        raise ValueError(f"stm: row {int(bad[0])}: side to move {side[bad[0]].item()!r} is neither 0 (White) nor 1 (Black)")
    if not bb.dtype.isnative:  # big-endian: the bytes are not the board (viewed as native they were another one)
        bb = bb.astype(bb.dtype.newbyteorder("="))
    return np.ascontiguousarray(bb.view(np.int64)), np.ascontiguousarray(side, np.uint8)


def _as_board(board: chess.Board | str) -> chess.Board:
    """A ``chess.Board`` from a board or a FEN string, read by the command line's strict rule
    (:func:`nnue_infer.positions.board_from_fen`: :class:`FenError` naming the problem or the missing field;
    :class:`PositionError` for a variant board, ``TypeError`` for anything else)."""
    if isinstance(board, chess.Board):
        check_variant(board)
        return board
    if isinstance(board, str):
        return board_from_fen(board, strict=True, hint="api")
    raise TypeError(f"expected a chess.Board or a FEN string, got {type(board).__name__}")


#: Argument types of ``evaluate_fen`` (``kernels.nnue.arena.kernels``): the header's address and the FEN's bytes.
_FEN_TYPES = (numba.types.int64, numba.types.Bytes(numba.types.uint8, 1, "C", readonly=True))


#: The in-use guard (see :meth:`Evaluator._busy`): an evaluator's ``_free`` list holds this one
#: token while no call runs.  A call takes it with ``list.pop()`` (atomic: one C call, under the
#: GIL or the list's own lock) or raises :class:`~nnue_infer.errors.ConcurrentUseError`, and puts
#: it back when it ends.  Five times cheaper than ``threading.Lock`` (about 25 ns against 140 ns
#: per call here), which matters on the incremental path (push, evaluate, pop: three calls).
_TOKEN = None


def _exclusive(method):
    """Run ``method`` holding the evaluator's in-use token; a call while another runs raises
    :class:`~nnue_infer.errors.ConcurrentUseError` (the hot methods inline the same check)."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        free = self._free
        try:
            free.pop()
        except IndexError:
            raise self._busy() from None
        try:
            return method(self, *args, **kwargs)
        finally:
            free.append(_TOKEN)

    return run


#: Every live Evaluator, to give each a fresh in-use token in a forked child (the thread that held
#: it at the fork does not exist there, so it would never be given back).
_ALL_EVALUATORS: weakref.WeakSet = weakref.WeakSet()


def _new_tokens_after_fork() -> None:
    for ev in list(_ALL_EVALUATORS):
        ev._free = [_TOKEN]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_tokens_after_fork)


def _in_position(message: str, board: chess.Board) -> str:
    """``message`` ending with the position's FEN (python-chess's move errors often name it already)."""
    fen = board.fen()
    return message if fen in message else f"{message} in {fen}"


class Evaluator:
    """Evaluates positions with one network, from scratch or incrementally along moves.

    Parameters
    ----------
    network : Network, str or os.PathLike, optional
        The network, a network file (``.nnue`` / ``.safetensors``) or a name such as
        ``"default"`` or ``"stockfish"`` (:func:`nnue_infer.resources.network_from_spec`);
        defaults to :func:`nnue_infer.resources.default_network`.
    isa : str, optional, keyword only
        The instruction-set path of the kernels: ``"portable"``, ``"avx2"``, ``"avxvnni"`` or
        ``"vnni512"`` (``nnue_infer.kernels.simd.ISA_NAMES``); by default ``NNUE_INFER_SIMD`` or the
        best path this CPU has.  Every path gives the same numbers (the test suite checks each
        against the others); another path is for checking that, or for timing the paths side by
        side.  :class:`~nnue_infer.errors.SimdPathError` for an unknown name or a path whose
        instructions this CPU lacks.

    Notes
    -----
    Two ways to evaluate:

    * ``evaluate(board)`` scores any board or FEN with a full refresh (nothing is kept).
    * ``set_position(board)``, ``push(move)``, ``pop()`` and ``evaluate()`` (no argument)
      follow a game like ``chess.Board`` does.  ``push`` only plays the move on the internal
      board; ``evaluate()`` brings the accumulators up to date lazily, per perspective, from
      the nearest evaluated ancestor on the stack: the difference of the two piece sets (at
      most 4 features per ply, whatever the kind of move) is subtracted and added.  If a
      perspective's own king moved, that perspective is refreshed through a refresh cache
      ("Finny tables": per perspective and king frame, i.e. king bucket and mirroring, the
      last accumulator and its piece set), which again applies only the difference.
      Results equal ``evaluate(board)`` bit for bit.  ``evaluate()`` of a ply already
      evaluated (since the last push to it) returns the value it stored then, after comparing
      the board's eight bitboards and side to move with the ones it evaluated: a board changed
      behind the evaluator's back is evaluated afresh, never given the old number.

    An ``Evaluator`` owns its buffers and is **not thread-safe**: use one per thread (the
    module-level :func:`nnue_infer.evaluate` does so).  The network's arrays are shared
    read-only and can back any number of evaluators.  Assigning :attr:`network` rebinds the
    evaluator (the refresh cache and all accumulators are rebuilt, the board is kept).
    """

    def __init__(self, network: Network | str | os.PathLike[str] | None = None, *, isa: str | None = None) -> None:
        if isa is not None and not isinstance(isa, str):
            raise TypeError(f"isa: expected a path name ({', '.join(simd.ISA_NAMES)}) or None, got {type(isa).__name__}")
        self._isa = simd.ISA if isa is None else simd.path_code(isa)
        self._free = [_TOKEN]  # the in-use token, taken while a method runs: concurrent use raises (see _busy)
        _ALL_EVALUATORS.add(self)
        self._board = chess.Board()
        self.network = network

    def __getstate__(self) -> dict:
        """Pickling (spawn pools, ``copy.deepcopy``): everything but the in-use token, the arena
        header and its address (this process's) and the entry-point indices."""
        state = self.__dict__.copy()
        for name in ("_free", *self._arena(None)):
            del state[name]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for name in ("_accs", "_psqts", "_state", "_scratch", "_acc", "_psqt"):  # unpickled copies lose the alignment
            setattr(self, name, simd.aligned(getattr(self, name)))
        self._kernel_args = (*self._net_args, self._accs, self._psqts, self._state, self._scratch)
        self.__dict__.update(self._arena(self._kernel_args))
        self._free = [_TOKEN]
        _ALL_EVALUATORS.add(self)

    def __copy__(self) -> Evaluator:
        """``copy.copy``: an independent evaluator at the same position on the same network.

        The network's arrays are shared (read-only, as between any evaluators of one network);
        the board, accumulators, refresh cache, stored values and scratch are copied: a push or
        pop on one never moves the other (the default shallow copy shared them all).
        """
        state = self.__getstate__()
        shared = (self._network, *self._net_args, *self._batch_args[0])
        clone = Evaluator.__new__(Evaluator)
        clone.__setstate__(copy.deepcopy(state, {id(x): x for x in shared}))
        return clone

    @staticmethod
    def _arena(kernel_args: tuple | None) -> dict:
        """The arena header of ``kernel_args`` (see ``kernels.nnue.arena``: the per-position kernels
        take its address instead of the eleven arrays), that address, the entry-point indices
        of those kernels and the other entry kernels, all specialised for the network's
        ``forward.Config``, and the moves / values buffer of ``evaluate_moves``
        (``children.io_buffer``, passed by address too) (``kernel_args`` None: the same keys, no values)."""
        if kernel_args is None:
            return dict.fromkeys(("_header", "_address", "_ply_entry", "_board_entry", "_fen_entry", "_children_entry",
                                  "_kernels", "_children_kernels", "_children_io"))
        header = np.zeros(arena.HEADER_SIZE, np.int64)
        arena.write_header(header, kernel_args)
        int64 = numba.types.int64
        config = K.config_of_cfg(kernel_args[6])
        entries = arena.kernels(config)
        made = children_kernels(config)
        return {"_header": header, "_address": header.ctypes.data,
                "_ply_entry": _entry_index(entries.evaluate_ply, (int64, int64, int64, arena.POSITION)),
                "_board_entry": _entry_index(entries.evaluate_board, (int64, arena.POSITION)),
                "_fen_entry": _entry_index(entries.evaluate_fen, _FEN_TYPES),
                "_children_entry": _entry_index(made.evaluate_children, children.ENTRY_TYPES),
                "_kernels": K.kernels(config), "_children_kernels": made, "_children_io": children.io_buffer()}

    @staticmethod
    def _entry_point(index: int):
        """The compiled function of entry ``index`` (``_ply_entry``, ``_children_entry``, ...): see :func:`_entry`."""
        return _ENTRIES[index] or _entry(index)

    def _busy(self) -> ConcurrentUseError:
        """The error for a call made while another call is running: from another thread, or from code
        that call runs (a method of a ``chess.Board`` subclass given to it); the token cannot tell which.  Moves and
        positions given as iterators are read before the token is taken, so a generator may use the evaluator."""
        return ConcurrentUseError(
            "this Evaluator is already inside a call: used by another thread at the same time, or called again "
            "from code that call runs (e.g. a method of a chess.Board subclass given to it); an Evaluator holds one game's "
            "accumulators and is not thread-safe: give each thread its own (the module-level "
            "nnue_infer.evaluate, evaluate_batch and evaluate_game keep one per thread)")

    @property
    def isa(self) -> str:
        """The instruction-set path this evaluator's kernels run (a name of ``kernels.simd.ISA_NAMES``)."""
        return simd.ISA_NAMES[self._isa]

    @property
    def network(self) -> Network:
        """The network; assigning another one (a :class:`Network`, a file or a name such as ``"sf18"``)
        rebuilds every accumulator and the refresh cache (the board is kept).  The assignment
        succeeds completely or raises and changes nothing."""
        return self._network

    @network.setter
    def network(self, network: Network | str | os.PathLike[str] | None) -> None:
        if type(network).__name__ == "FloatNetwork":
            raise TypeError("expected a Network, got FloatNetwork (a float network: quantise it first, nnue_infer.quantise)")
        network = as_network(network)  # a name or file, as everywhere a network is expected
        state = self._bind(network, self._isa)  # everything built before anything is replaced
        free = self._free
        try:
            free.pop()
        except IndexError:
            raise self._busy() from None
        try:
            self.__dict__.update(state)
        finally:
            free.append(_TOKEN)

    @staticmethod
    def _bind(network: Network, isa: int) -> dict:
        """Every attribute that depends on the network and the instruction-set path ``isa``
        (``simd.ISA_*``), freshly built (``self`` is not touched)."""
        arch = network.architecture
        fs = architecture_features(arch)
        params = np.zeros(K.N_PARAMS, np.int64)
        params[K.P_FT_CLAMP] = arch.ft_clamp
        params[K.P_FT_SHIFT] = arch.ft_shift
        params[K.P_WEIGHT_SHIFT] = arch.weight_scale_bits
        params[K.P_SKIP_INDEX] = arch.skip_index
        params[K.P_SKIP_NUM] = arch.skip_numerator
        params[K.P_SKIP_DEN] = arch.skip_denominator
        params[K.P_OUTPUT_SCALE] = arch.output_scale
        params[K.P_NUM_SLOTS] = fs.num_slots
        params[K.P_MIRROR] = int(fs.mirror)
        params[K.P_BUCKET_DIVISOR] = 32 // arch.output_buckets
        params[K.P_FT_ACTIVATION] = arch.ft.code
        params[K.P_CACHE_PAIRS] = fs.num_king_frames
        params[K.P_MAX_PIECES] = MAX_PIECES
        params[K.P_FLOAT_OUTPUT] = arch.output_units * arch.output_scale
        params[K.P_SKIP_SUB] = arch.skip_subtract_index
        params[K.P_SKIP_MODE] = SKIP_MODES.index(arch.skip_mode)
        params[K.P_VALUE_DIVISION] = VALUE_DIVISIONS.index(arch.value_division)
        int8 = int8_layout(arch.int8_feature_sets)
        params[K.P_THREATS] = int8.threats
        params[K.P_PAIRS] = int8.pairs
        params[K.P_PAIR_OFFSET] = int8.pair_offset
        params[K.P_SIMD] = isa
        params[K.P_FC0_SIMD] = simd.first_layer_isa(isa, arch.first_layer_max_byte, network.first_layer_pair_sum,
                                                    network.first_layer_quad_sum)
        weights, biases, layers = network.compute_layout
        cfg = np.concatenate([
            params,
            fs.slot_table.astype(np.int32).reshape(-1).view(np.int64),
            fs.king_buckets.astype(np.int32).view(np.int64),
            layers.reshape(-1),
        ])
        L1 = arch.ft_width
        # transformed features, layer stack, then the threat / pawn-pair update scratch (if any)
        scratch = simd.aligned_zeros(scratch_size(layers) + K.relation_scratch_size(int8.threats, int8.pairs), np.int16)
        # Incremental state: pairs [0, frames) refresh cache, pair `frames` the biases with an empty
        # piece set, `frames + 1` and `+ 2` scratch (evaluate_game), then one pair per ply
        # (ply + _stack_base).  See kernels.nnue.forward.evaluate_stack.
        cache_pairs = fs.num_king_frames
        stack_base = cache_pairs + 3
        pairs = stack_base + _INITIAL_PLIES
        # 64-byte aligned (simd.ALIGNMENT): the SIMD kernels' 32-byte loads then never split a cache line
        accs = simd.aligned_zeros((pairs, 2, L1), np.int16)
        psqts = simd.aligned_zeros((pairs, 2, arch.psqt_buckets), np.int32)
        state = simd.aligned_zeros((pairs, 2, STATE_COLUMNS), np.int64)
        accs[:cache_pairs + 1] = network.ft_biases  # the refresh cache and the biases pair (see refresh)
        net_args = (network.ft_weights, network.psqt_weights, network.int8_weights, network.int8_psqt_weights, weights,
                    biases, cfg)
        kernel_args = (*net_args, accs, psqts, state, scratch)
        return {
            **Evaluator._arena(kernel_args),
            "_network": network, "_slot_table": fs.slot_table, "_king_buckets": fs.king_buckets, "_params": params,
            "_weights": weights, "_biases": biases, "_layers": layers, "_cfg": cfg,
            "_bb": np.empty(8, np.int64), "_feats": np.empty((2, MAX_PIECES), np.int32),
            "_counts": np.empty(2, np.int64), "_acc": simd.aligned_empty((2, L1), np.int16),
            "_psqt": simd.aligned_empty((2, arch.psqt_buckets), np.int32), "_scratch": scratch,
            "_cache_pairs": cache_pairs, "_stack_base": stack_base,
            "_accs": accs, "_psqts": psqts, "_state": state, "_pairs": pairs, "_trusted": 0,
            "_memo": [(None, 0)] * (pairs - stack_base),
            "_net_args": net_args,
            "_kernel_args": kernel_args,
            # the batch paths' one read (they run without the in-use token): arrays, scratch length, network
            "_batch_args": ((fs.slot_table, fs.king_buckets, params, network.ft_weights, network.ft_biases,
                             network.psqt_weights, network.int8_weights, network.int8_psqt_weights, weights, biases,
                             layers), scratch.shape[0], network),
        }

    def _allocate(self, pairs: int) -> None:
        """Grow the incremental arrays to ``pairs`` pairs, keeping their content."""
        accs = simd.aligned_zeros((pairs, *self._accs.shape[1:]), np.int16)
        psqts = simd.aligned_zeros((pairs, *self._psqts.shape[1:]), np.int32)
        state = simd.aligned_zeros((pairs, *self._state.shape[1:]), np.int64)
        n = self._pairs
        accs[:n], psqts[:n], state[:n] = self._accs, self._psqts, self._state
        self._accs, self._psqts, self._state = accs, psqts, state
        self._memo = self._memo + [(None, 0)] * (pairs - n)
        self._pairs = pairs
        self._kernel_args = (*self._net_args, accs, psqts, state, self._scratch)
        arena.write_header(self._header, self._kernel_args)  # the header must never point at the old arrays

    @_exclusive
    def refresh(self) -> None:
        """Forget every computed accumulator and empty the refresh cache.

        The next :meth:`evaluate` recomputes the current position from the biases.  Never
        needed for correctness unless the network's arrays were modified in place.
        """
        frames = self._cache_pairs + 1  # the cache and the biases pair
        self._accs[:frames] = self._network.ft_biases
        self._psqts[:frames] = 0
        self._state[:] = 0
        self._trusted = 0  # plies below this have trustworthy "computed" flags
        self._memo = [(None, 0)] * len(self._memo)  # values stored before the network's arrays changed

    def __repr__(self) -> str:
        return f"Evaluator({self._network!r}, fen={self._board.fen()!r})"

    # -- incremental API -------------------------------------------------------------
    @property
    @_exclusive
    def board(self) -> chess.Board:
        """A copy of the current position, with its move stack (read while another thread is inside a call,
        :class:`~nnue_infer.errors.ConcurrentUseError`: a push half done is no position)."""
        return self._board.copy()

    @_exclusive
    def set_position(self, board: chess.Board | str) -> None:
        """Start following ``board`` (a ``chess.Board`` or FEN; copied, move stack included).

        :meth:`pop` can take back the moves already on the board's stack; pass
        ``board.copy(stack=False)`` to start with an empty stack.

        Raises
        ------
        ValueError
            Bad FEN; :class:`~nnue_infer.errors.PositionError` for a position the network
            cannot represent, or a chess variant other than standard chess / Chess960.
            The evaluator is unchanged then.
        """
        board = _as_board(board)
        check_position(board)
        self._board = board.copy()
        self._trusted = 0

    def push(self, move: chess.Move, *, validate: bool = True) -> None:
        """Play ``move`` (a legal ``chess.Move``, or ``chess.Move.null()`` when not in check) on the current position.

        Costs python-chess's legality check and ``Board.push``; the accumulators are updated
        later, by :meth:`evaluate`, only if needed.  Castling may be given as king-to-target
        (``e1g1``) or, as python-chess stores it, king-takes-rook (also Chess960).

        Parameters
        ----------
        move : chess.Move
            The move.
        validate : bool
            Check legality first (``Board.is_legal``: about 2.5 us for most moves, 6 us for
            king moves).  With ``False`` the caller guarantees a legal move (e.g. one from
            ``board.legal_moves``), as with ``chess.Board.push``; even then the accumulators
            always follow the board python-chess produces, and :meth:`evaluate` raises
            :class:`~nnue_infer.errors.PositionError` (changing nothing) if that board
            cannot be represented.

        Raises
        ------
        IllegalMoveError
            (a ``ValueError``) the move is not legal here (or would capture a king, which
            python-chess allows in impossible positions); unvalidated, only a move that does
            not start on a piece of the side to move.  Nothing changes.
        TypeError
            ``move`` is not a ``chess.Move`` (also unvalidated).
        """
        if not isinstance(move, chess.Move):
            hint = "; push_uci('e2e4') and push_san('e4') take text" if isinstance(move, str) else ""
            raise TypeError(f"expected a chess.Move, got {type(move).__name__}{hint}")
        free = self._free
        try:
            free.pop()
        except IndexError:
            raise self._busy() from None
        try:
            self._play(move, validate)
        finally:
            free.append(_TOKEN)

    def _play(self, move: chess.Move, validate: bool) -> None:
        """The work of :meth:`push` (the caller holds the in-use token)."""
        board = self._board
        if validate:
            if move and (not board.is_legal(move) or board.kings & chess.BB_SQUARES[move.to_square]):
                raise IllegalMoveError(f"illegal move {move.uci()} in {board.fen()}")
            if not move and board.is_check():
                raise IllegalMoveError(f"null move in check in {board.fen()} (the side that passed would "
                                       "stand in check with the opponent to move)")
        elif not board.occupied_co[board.turn] & chess.BB_SQUARES[move.from_square] and move:
            # python-chess would fail an assertion half-way through push(), leaving the move on the stack
            # (``move`` last: Move.__bool__ is a Python call, needed only to let a null move through)
            raise IllegalMoveError(f"move {move.uci()} does not start on a piece of the side to move in "
                                   f"{board.fen()}")
        board.push(move)
        ply = len(board.move_stack)
        if ply < self._trusted:
            self._trusted = ply

    def push_uci(self, uci: str) -> chess.Move:
        """Play the move in UCI notation (``e2e4``, ``e7e8q``, ``e1g1``), like ``chess.Board.push_uci``; returns it.

        Raises :class:`IllegalMoveError` (a ``ValueError``) for a malformed or illegal move;
        nothing changes then.
        """
        return self._push_text(uci, "UCI")

    def push_san(self, san: str) -> chess.Move:
        """Play the move in SAN (``Nf3``, ``O-O``, ``exd8=Q+``), like ``chess.Board.push_san``; returns it.

        Raises :class:`IllegalMoveError` (a ``ValueError``) for a malformed, ambiguous or
        illegal move; nothing changes then.
        """
        return self._push_text(san, "SAN")

    @_exclusive
    def _push_text(self, text: str, notation: str) -> chess.Move:
        """Parse ``text`` with python-chess's ``parse_uci`` / ``parse_san`` (``notation`` "UCI" / "SAN") and push
        it, holding the in-use token for both (a push in another thread between them read a half-pushed board)."""
        if not isinstance(text, str):
            raise TypeError(f"expected a {notation} move string, got {type(text).__name__}")
        board = self._board
        try:
            move = board.parse_uci(text) if notation == "UCI" else board.parse_san(text)
        except ValueError as exc:
            raise IllegalMoveError(_in_position(str(exc), board)) from None
        self._play(move, True)
        return move

    def pop(self) -> chess.Move:
        """Take back the last move and return it, like ``chess.Board.pop``.

        Raises
        ------
        IndexError
            The move stack is empty.
        """
        free = self._free
        try:
            free.pop()
        except IndexError:
            raise self._busy() from None
        try:
            if not self._board.move_stack:
                raise IndexError("pop from an empty move stack")
            return self._board.pop()
        finally:
            free.append(_TOKEN)

    def _refresh(self, board: chess.Board) -> int:
        board_bitboards(board, self._bb)
        net = self._network
        return int(self._kernels.refresh_both(self._bb, self._slot_table, self._king_buckets, self._params,
                                  net.ft_weights, net.ft_biases, net.psqt_weights, net.int8_weights,
                                  net.int8_psqt_weights,
                                  self._feats, self._counts, self._acc, self._psqt))

    def evaluate(self, board: chess.Board | str | None = None) -> int:
        """NNUE value of the current position, or of ``board`` (a ``chess.Board`` or FEN) with a full refresh.

        Without ``board``, the position reached by :meth:`set_position` and :meth:`push` /
        :meth:`pop` (the standard start position by default) is evaluated with incremental
        updates; with ``board``, that board alone is evaluated from scratch and the
        incremental state is left untouched.  Both give identical numbers.

        Returns
        -------
        int
            Internal units (361 = one pawn for Stockfish 15.1) from the **side to move's**
            point of view: Stockfish's ``NNUE::evaluate(pos, false)``.  Multiply by -1 when
            Black is to move for White's point of view, or use :meth:`evaluate_cp`.

        Raises
        ------
        ValueError
            Bad FEN string (:class:`~nnue_infer.errors.FenError`; every field is required, as on the
            command line: pass ``chess.Board(fen)`` for python-chess's lenient reading);
            :class:`~nnue_infer.errors.PositionError` (a ``ValueError``) for a
            position the network cannot represent (kings, more than 32 pieces, pawns on the
            first or last rank), raised before any accumulator changes.
        """
        free = self._free
        try:
            free.pop()
        except IndexError:
            raise self._busy() from None
        try:
            return self._evaluate_current() if board is None else self._evaluate_fresh(board)
        finally:
            free.append(_TOKEN)

    def _evaluate_current(self) -> int:
        """``evaluate()`` of the current position without the in-use token (for methods that hold it)."""
        board = self._board
        ply = len(board.move_stack)
        occupied_co = board.occupied_co
        position = (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                    occupied_co[1], occupied_co[0], board.turn)
        trusted = self._trusted
        if ply < trusted:  # evaluated since the last push to this ply (or set_position / refresh)
            memo = self._memo[ply]
            if memo[0] == position:
                return memo[1]
            # Another board than the one evaluated at this ply (the board was changed behind the
            # evaluator's back): its pair is recomputed from an ancestor, never trusted.
            trusted = ply
        elif self._stack_base + ply >= self._pairs:
            self._allocate(2 * (self._stack_base + ply))
        value = (_ENTRIES[self._ply_entry] or _entry(self._ply_entry))(self._address, ply, trusted, position)
        if value == INVALID_POSITION:
            self._trusted = trusted  # the kernel wrote the refused bitboards into this ply's pair
            check_position(board)
            raise PositionError(f"position not representable: {board.fen()}")
        self._trusted = ply + 1
        self._memo[ply] = (position, value)
        return value

    def _evaluate_fresh(self, board: chess.Board | str) -> int:
        """``evaluate(board)`` without the in-use token (for methods that hold it)."""
        if type(board) is not chess.Board:  # FEN strings, variants (refused), subclasses, wrong types
            if type(board) is str and board.isascii():  # the compiled parser of the batch path, then the kernel
                fields, value = (_ENTRIES[self._fen_entry] or _entry(self._fen_entry))(self._address, board.encode())
                if (fields == 4 or fields == 6) and value != INVALID_POSITION:
                    return value
            # python-chess reads what the compiled parser does not take as it stands (Unicode white space,
            # a malformed FEN, a missing field) and names the problem, or the position's
            board = _as_board(board)
        occupied_co = board.occupied_co  # checked by the kernel; check_position only names the problem
        value = (_ENTRIES[self._board_entry] or _entry(self._board_entry))(
            self._address, (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                            occupied_co[1], occupied_co[0], board.turn))
        if value == INVALID_POSITION:
            check_position(board)
            raise PositionError(f"position not representable: {board.fen()}")
        return value

    def evaluate_batch(self, positions: Iterable[chess.Board | str]) -> np.ndarray:
        """Evaluate many positions on all cores; the same numbers as :meth:`evaluate`, row by row.

        Parameters
        ----------
        positions : sequence of chess.Board, or sequence of str
            All boards or all FEN strings.  FENs are parsed and checked in compiled code
            (placement and side to move are used; castling, en passant and the counters are
            only checked, as they do not change the NNUE value); every field is required, as
            for :meth:`evaluate`.

        Returns
        -------
        numpy.ndarray
            int32[n]: internal units, each from its **side to move's** point of view.

        Raises
        ------
        FenError
            A malformed FEN; the message names the row index, the problem and its offset.
        PositionError
            A position the network cannot represent; the message names the row index.
        TypeError
            Rows of mixed or unsupported types (the message names the row).

        Notes
        -----
        Work is spread over Numba's threads (``numba.set_num_threads`` limits them), each
        with its own scratch buffers, and does not touch the incremental state.  Calls from
        several Python threads are safe (also on one ``Evaluator``, alone among its methods);
        they take turns (one lock), each using all threads.
        The first bad row is reported, whatever its problem (a row of the wrong type comes first: its
        ``TypeError`` is raised even after a bad FEN or position in an earlier row); nothing is returned then.
        The threading layer is fork-safe (TBB, else Numba's ``workqueue``; see
        :mod:`nnue_infer.kernels.threads`): ``multiprocessing`` pools started with ``fork``
        after a batch work.
        """
        net_arrays, scratch_len, _ = self._batch_args  # one read: consistent even while the network is reassigned
        return evaluate_rows(as_sequence(positions), net_arrays, scratch_len)

    def evaluate_bitboards(self, bitboards: np.ndarray, stm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Evaluate positions given as bitboards on all cores, with full refreshes (as :meth:`evaluate_batch`).

        Parameters
        ----------
        bitboards : int64[n, 8]
            Per row: pawns, knights, bishops, rooks, queens, kings, white, black (a1 = bit 0),
            as :func:`nnue_infer.features.board_bitboards`.
        stm : integer array [n]
            Side to move, 0 White, 1 Black.

        Returns
        -------
        values : int32[n]
            Internal units, side to move's point of view; 0 for rows that cannot be represented.
        codes : int32[n]
            0 for evaluated rows, else the problem (``nnue_infer.kernels.chess.bitboard.POS_*``; a
            side without exactly one king, more than 32 pieces, a pawn on a back rank, or
            contradictory bitboards).  Nothing is raised for bad rows.

        Raises
        ------
        TypeError
            ``bitboards`` is not an array of 64-bit integers, or ``stm`` not of integers or bools.
        ValueError
            ``bitboards`` is not of shape [n, 8], ``stm`` not of shape [n], or a side to move is
            neither 0 nor 1 (the message names the first such row).  Checked before any kernel
            runs: the kernels trust their arrays.
        """
        bitboards, stm = _checked_bitboards(bitboards, stm)
        net_arrays, scratch_len, _ = self._batch_args  # one read, as evaluate_batch (also thread-safe)
        n = len(bitboards)
        values = np.empty(n, np.int32)
        codes = np.empty(n, np.int32)
        evaluate_bitboards(bitboards, stm, net_arrays, scratch_len, values, codes)
        return values, codes

    def activations(self, board: chess.Board | str, buckets: str = "used") -> Activations:
        """Every intermediate array of ``board``'s evaluation, exact integers, no leading axis.

        :meth:`activations_batch` of one position with its ``N`` axis dropped (``accumulator``
        int16[2, L1], ``fc_0`` int32[L2 + 1], ``value`` an int32 scalar array, ...); see
        :class:`~nnue_infer.layer_outputs.Activations`.  Raises as :meth:`evaluate`.
        """
        if not isinstance(board, (chess.Board, str)):
            raise TypeError(f"expected a chess.Board or a FEN string, got {type(board).__name__}")
        acts = self.activations_batch([_as_board(board)], buckets)
        return Activations({name: arr[0] for name, arr in acts.to_dict().items()}, batched=False)

    def activations_batch(self, positions: Iterable[chess.Board | str], buckets: str = "used") -> Activations:
        """Every intermediate array of many positions' evaluations, on all cores.

        Parameters
        ----------
        positions : sequence of chess.Board, or sequence of str
            All boards or all FEN strings (every field required), as for :meth:`evaluate_batch`.
        buckets : str
            ``"used"`` (default): the layers of each position's own layer stack; ``"all"``: of
            every stack (a bucket axis after ``N``).

        Returns
        -------
        Activations
            ``accumulator`` int16[N, 2, L1], ``psqt`` int32[N, 2, P], ``ft_output`` uint8[N, F]
            (int8 for signed activations), ``bucket`` int32[N], ``fc_0`` int32[N, L2 + 1],
            ``fc_0_activated`` uint8[N, 2 * L2], ``fc_1``, ``fc_1_activated``, ...,
            ``output`` int32[N], ``positional`` int32[N], ``value`` int32[N] (equal to
            :meth:`evaluate_batch`); names and Stockfish's equivalents in
            :class:`~nnue_infer.layer_outputs.Activations`.

        Raises
        ------
        FenError, PositionError, TypeError
            As :meth:`evaluate_batch`, naming the first bad row.
        ValueError
            ``buckets`` is neither ``"used"`` nor ``"all"``.

        Notes
        -----
        One compiled entry point of its own (:mod:`nnue_infer.kernels.nnue.layer_outputs`), compiled on
        first use from the evaluation's kernels (refresh, feature-transformer activation, layer
        stack), so every number is the evaluation's own.
        """
        if buckets not in ("used", "all"):
            raise ValueError(f"buckets must be 'used' or 'all', got {buckets!r}")
        positions = as_sequence(positions)
        bitboards, stm = positions_bitboards(positions)
        acts, codes = self._activations(bitboards, stm, buckets)
        bad = np.flatnonzero(codes)
        if bad.size:
            raise_row_error(positions, int(bad[0]), None, None, codes)
        return acts

    def activations_bitboards(self, bitboards: np.ndarray, stm: np.ndarray, buckets: str = "used") -> Activations:
        """:meth:`activations_batch` of positions given as bitboards (as :meth:`evaluate_bitboards`
        takes them: a PGN's :class:`~nnue_infer.io.pgn.GameBatch` or a training-data file's rows).

        Parameters
        ----------
        bitboards : int64[n, 8]
            Pawns, knights, bishops, rooks, queens, kings, White's pieces, Black's pieces (a1 = bit 0).
        stm : integer[n]
            Side to move, 0 White, 1 Black.
        buckets : str
            ``"used"`` or ``"all"``, as for :meth:`activations_batch`.

        Returns
        -------
        Activations
            As :meth:`activations_batch`.

        Raises
        ------
        TypeError, ValueError
            As :meth:`evaluate_bitboards` for the arrays; ``ValueError`` naming the first row the
            network cannot evaluate and why (no exactly one king per side, more than 32 pieces, a
            pawn on a back rank, contradictory bitboards).
        """
        if buckets not in ("used", "all"):
            raise ValueError(f"buckets must be 'used' or 'all', got {buckets!r}")
        bitboards, stm = _checked_bitboards(bitboards, stm)
        acts, codes = self._activations(bitboards, stm, buckets)
        bad = np.flatnonzero(codes)
        if bad.size:
            raise ValueError(f"row {int(bad[0])}: {position_problem(int(codes[bad[0]]))}")
        return acts

    def _activations(self, bitboards: np.ndarray, stm: np.ndarray, buckets: str) -> tuple[Activations, np.ndarray]:
        """The arrays of :meth:`activations_batch` for checked bitboards, and the kernel's row codes
        (0 evaluated, else ``kernels.chess.bitboard.POS_*``)."""
        (slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights, weights8, psqt8, weights, biases,
         layers), scratch_len, net = self._batch_args  # one read: the network sizing the buffers is the arrays' own
        arch = net.architecture
        n = len(bitboards)
        k = arch.output_buckets if buckets == "all" else 1
        recorded = []  # (layer index, raw outputs, activated outputs or 0)
        for l, layer in enumerate(arch.layers):
            last = layer.activation == "none" or (l + 1 < len(arch.layers) and arch.layers[l + 1].is_float)
            recorded.append((l, layer.outputs, 0 if last else layer.activated_width))
            if last:
                break
        z = np.empty((n, k, sum(r[1] for r in recorded)), np.int32)
        x = np.empty((n, k, max(1, sum(r[2] for r in recorded))), np.uint8)
        accs = np.empty((n, 2, arch.ft_width), np.int16)
        psqts = np.empty((n, 2, arch.psqt_buckets), np.int32)
        ft_bytes = np.empty((n, arch.ft_output_width), np.uint8)
        bucket = np.empty(n, np.int32)
        positional = np.empty((n, k), np.int32)
        values = np.empty(n, np.int32)
        codes = np.empty(n, np.int32)
        with PARALLEL_LOCK, numba.parallel_chunksize(1):
            KA.activations_batch(bitboards, stm, slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights,
                                 weights8, psqt8, weights, biases, layers, MAX_PIECES, scratch_len, n_chunks(),
                                 int(buckets == "all"), accs, psqts, ft_bytes, bucket, z, x, positional, values, codes)
        ft_output = (ft_bytes.view(np.int8) ^ np.int8(-128)) if arch.ft.signed else ft_bytes  # x + 128 -> x
        arrays = {"accumulator": accs, "psqt": psqts, "ft_output": ft_output, "bucket": bucket}
        zpos = xpos = 0
        squeeze = (lambda a: a[:, 0]) if buckets == "used" else (lambda a: a)  # "all": the axis even for one bucket
        for l, n_out, n_act in recorded:
            if arch.layers[l].activation == "none":
                arrays["output"] = squeeze(z[:, :, zpos])
                break
            arrays[f"fc_{l}"] = squeeze(z[:, :, zpos:zpos + n_out])
            if n_act:
                arrays[f"fc_{l}_activated"] = squeeze(x[:, :, xpos:xpos + n_act])
            zpos, xpos = zpos + n_out, xpos + n_act
        arrays["positional"] = squeeze(positional)
        arrays["value"] = values
        return Activations(arrays, batched=True), codes

    @_exclusive
    def evaluate_cp(self, board: chess.Board | str | None = None, white_pov: bool = False) -> int:
        """:meth:`evaluate` in centipawns, ``tdiv(100 * value, units_per_pawn)`` (361 for Stockfish 15.1).

        Current position (or ``board``), side to move's point of view, or White's when
        ``white_pov`` is true.  The in-use token is held for the whole call (value, side to move
        and units per pawn come from one position and one network).
        """
        if board is None:
            v, turn = self._evaluate_current(), self._board.turn
        else:
            board = _as_board(board)
            v, turn = self._evaluate_fresh(board), board.turn
        if white_pov and turn == chess.BLACK:
            v = -v
        return to_centipawns(v, self._network.architecture.units_per_pawn)

    def evaluate_game(self, board: chess.Board | str, moves: Iterable[chess.Move | str], *,
                      validate: bool = True) -> np.ndarray:
        """Values of a game's start position and of the position after each move.

        Parameters
        ----------
        board : chess.Board or str
            Start position (board or FEN; not modified).
        moves : iterable of chess.Move or str
            The moves, as ``chess.Move`` or UCI strings (``e1g1`` or king-takes-rook
            castling, ``e7e8q``, ``0000`` for a null move, refused in check when validated).
        validate : bool
            Check each move's legality (python-chess's ``is_legal``, most of the cost).
            ``False`` for moves known to be legal (e.g. from a parsed PGN); a position that
            then cannot be represented still raises :class:`~nnue_infer.errors.PositionError`.

        Returns
        -------
        numpy.ndarray
            int32[len(moves) + 1]: internal units, each from the side to move's point of view
            in that position, as :meth:`evaluate`.

        Raises
        ------
        IllegalMoveError
            (a ``ValueError``) ``moves[i]`` is malformed or illegal; the message names ``i``.
        PositionError
            The start position (or, unvalidated, a later one) cannot be represented, or the
            board is a chess variant.
        TypeError
            ``moves[i]`` is neither a ``chess.Move`` nor a string (the message names ``i``), or
            ``moves`` is a single string or move instead of a sequence.

        Notes
        -----
        Incremental (one compiled call for the whole game after python-chess has played the
        moves); uses the refresh cache and scratch accumulators, so the incremental state
        (:meth:`set_position`, :meth:`push`, :meth:`pop`) is not disturbed.  ``moves`` is read (into a
        list) before the call takes the in-use token: a generator of moves may read :attr:`board`.
        """
        if isinstance(moves, (str, chess.Move)):  # a string would be read as one-character moves
            raise TypeError(f"moves must be a sequence of moves, got a single {type(moves).__name__} "
                            f"({moves!r:.40}); wrap it in a list")
        return self._evaluate_game(board, list(moves), validate)

    @_exclusive
    def _evaluate_game(self, board: chess.Board | str, moves: list, validate: bool) -> np.ndarray:
        """The work of :meth:`evaluate_game` (``moves`` already a list)."""
        b = _as_board(board).copy(stack=False)
        check_position(b)
        n = len(moves) + 1
        bitboards = np.empty((n, 8), np.int64)
        turns = bytearray(n)
        pack = _BITBOARDS.pack_into
        squares = chess.BB_SQUARES
        for i in range(n):
            if i:
                move = moves[i - 1]
                try:
                    if isinstance(move, str):
                        move = b.parse_uci(move) if validate else chess.Move.from_uci(move)
                    elif not isinstance(move, chess.Move):
                        raise TypeError(f"moves[{i - 1}]: expected a chess.Move or a UCI string, got {type(move).__name__}")
                    elif validate and move and not b.is_legal(move):
                        raise ValueError(f"illegal move {move.uci()}")
                    if validate and move and b.kings & squares[move.to_square]:
                        raise ValueError(f"move {move.uci()} captures a king")
                    if validate and not move and b.is_check():
                        raise ValueError("null move in check (the side that passed would stand in check)")
                    if not b.occupied_co[b.turn] & squares[move.from_square] and move:  # (unvalidated moves)
                        raise ValueError(f"move {move.uci()} does not start on a piece of the side to move")
                except ValueError as exc:
                    fen, text = b.fen(), str(exc)
                    text = text.removesuffix(f" in {fen}")  # python-chess's parse_uci names the FEN too
                    raise IllegalMoveError(f"moves[{i - 1}] ({quote(moves[i - 1])}) in {fen}: {clip(text)}") from exc
                b.push(move)
            occupied_co = b.occupied_co
            pack(bitboards, 64 * i, b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings,
                 occupied_co[1], occupied_co[0])
            turns[i] = not b.turn
        out = np.empty(n, np.int32)
        stms = np.frombuffer(turns, np.uint8).astype(np.int64)
        bad = self._kernels.evaluate_sequence(bitboards, stms, out, *self._kernel_args)
        if bad >= 0:
            raise PositionError(f"the position after moves[{bad - 1}] cannot be represented (a side without "
                                "exactly one king, more than 32 pieces or a pawn on the first or last rank)")
        return out

    # -- every child of a position (nnue_infer.children) ----------------------------
    def evaluate_moves(self, board: chess.Board | str | None = None,
                       moves: Iterable[chess.Move | str] | None = None) -> np.ndarray:
        """Values of the positions after each legal move of the current position (or of ``board``).

        Legal moves are generated in compiled code, in python-chess's ``board.legal_moves``
        order (castling, Chess960 castling, en passant, promotions, pins and checks), and each
        child is evaluated with one incremental update from the parent's accumulator (a refresh
        through the refresh cache for a perspective whose king moved): the numbers of
        ``push(move)``, :meth:`evaluate`, :meth:`pop` for every move, in one call.

        Parameters
        ----------
        board : chess.Board or str, optional
            The parent (board or FEN, not modified); default: the current position of
            :meth:`set_position` / :meth:`push`.
        moves : sequence of chess.Move or str, optional
            Legal moves to evaluate instead of all of them (``chess.Move`` or UCI; castling as
            ``e1g1`` or king-takes-rook, as python-chess accepts it).

        Returns
        -------
        numpy.ndarray
            int32[n]: per move, what :meth:`evaluate` returns after it (internal units, from the
            **child's** side to move's point of view: the opponent of the side moving).

        Raises
        ------
        IllegalMoveError
            (a ``ValueError``) ``moves[i]`` is malformed, illegal, a drop or a null move (a null
            move has no child to evaluate: push it and call :meth:`evaluate`).
        PositionError
            The parent cannot be represented, or the side not to move is in check.
        TypeError
            ``board`` is neither a board nor a FEN, ``moves`` a single move or string.
        """
        moves = children.move_list(moves)  # before the token: a generator of moves may read self.board
        free = self._free  # the in-use token, as _exclusive takes it (inlined: this call is per position)
        try:
            free.pop()
        except IndexError:
            raise self._busy() from None
        try:
            return children.evaluate_moves(self, None if board is None else _as_board(board), moves)
        finally:
            free.append(_TOKEN)

    @_exclusive
    def _children_for_cp(self, board: chess.Board | str | None, moves: list | None) -> tuple[np.ndarray, bool, int]:
        """:meth:`evaluate_moves_cp`'s part under the in-use token (``moves`` already read, as in
        :meth:`evaluate_moves`): the values as int64[n], the parent's side to move, units per pawn."""
        parent = None if board is None else _as_board(board)
        values = children.evaluate_moves(self, parent, moves).astype(np.int64)
        parent_turn = self._board.turn if parent is None else parent.turn
        return values, parent_turn, self._network.architecture.units_per_pawn

    def evaluate_moves_cp(self, board: chess.Board | str | None = None,
                          moves: Iterable[chess.Move | str] | None = None, white_pov: bool = False) -> np.ndarray:
        """:meth:`evaluate_moves` in centipawns, ``tdiv(100 * value, units_per_pawn)`` (int64[n]).

        From each child's side to move's point of view, or White's when ``white_pov`` is true; the
        in-use token is held for the whole call, as in :meth:`evaluate_cp` (the moves are read before it).
        """
        values, parent_turn, units_per_pawn = self._children_for_cp(board, children.move_list(moves))
        if white_pov and parent_turn == chess.WHITE:  # the children have Black to move
            values = -values
        scaled = 100 * values
        return np.sign(scaled) * (np.abs(scaled) // units_per_pawn)

    def evaluate_children_batch(self, positions: Iterable[chess.Board | str], *,
                                uci: bool = False) -> tuple[np.ndarray, np.ndarray | list[str], np.ndarray]:
        """Every legal move of many positions and the value after it, on all cores, as CSR arrays.

        Parameters
        ----------
        positions : sequence of chess.Board or str
            Boards or FENs (read by the strict rule of :meth:`evaluate`).
        uci : bool
            Moves as UCI strings instead of 16-bit codes.

        Returns
        -------
        offsets : numpy.ndarray
            int64[n + 1]: the children of row ``i`` are entries ``offsets[i]:offsets[i + 1]``.
        moves : numpy.ndarray or list of str
            uint16[m] codes ``from_square | to_square << 6 | promotion << 12`` (python-chess
            squares and piece types; :func:`nnue_infer.children.decode_moves` makes
            ``chess.Move`` objects) in ``board.legal_moves`` order per row, or UCI strings.
        values : numpy.ndarray
            int32[m]: as :meth:`evaluate_moves`, row by row.

        Raises
        ------
        FenError, PositionError, TypeError
            As :meth:`evaluate_moves`, naming the first bad row.

        Notes
        -----
        Each Numba thread has its own accumulators and refresh cache; the evaluator's
        incremental state is not touched.  ``positions`` is read (into a list) before the call takes
        the in-use token: a generator of positions may read :attr:`board`.
        """
        return self._evaluate_children_batch(as_sequence(positions), uci)

    @_exclusive
    def _evaluate_children_batch(self, positions: Sequence[chess.Board | str], uci: bool
                                 ) -> tuple[np.ndarray, np.ndarray | list[str], np.ndarray]:
        """The work of :meth:`evaluate_children_batch` (``positions`` already a list or tuple)."""
        offsets, codes, values = children.evaluate_children_batch(self, positions, _as_board)
        return offsets, children.uci_moves(codes) if uci else codes, values

    @_exclusive
    def trace(self, board: chess.Board | str) -> Trace:
        """Per-bucket PSQT and positional integers, the value and the derived piece values.

        The numbers behind Stockfish 15.1's ``eval`` output (see :class:`~nnue_infer.trace.Trace`;
        ``str(trace)`` renders the text).  Raises as :meth:`evaluate`.
        """
        board = _as_board(board)
        stm = 0 if board.turn else 1
        arch = self.network.architecture
        pieces = self._refresh(board)
        per_bucket = np.empty((arch.output_buckets, 2), np.int64)
        self._kernels.trace_buckets(self._acc, self._psqt, stm, self._params, self._scratch, self._weights, self._biases,
                        self._layers, per_bucket)
        bucket = arch.bucket_of(pieces)
        psqt, positional = per_bucket[:, 0].tolist(), per_bucket[:, 1].tolist()
        final = None
        if arch.stockfish_version in EVALUATE:
            try:
                final = self._final(board, tdiv(psqt[bucket], arch.output_scale),
                                    tdiv(positional[bucket], arch.output_scale), None)
            except NetworkNotFoundError:
                pass  # 17.1 / 18 would take it from their small net, which is not here
        value = self._evaluate_fresh(board)  # the kernel's value rule (int32 semantics), not a copy of it
        sign = 1 if board.turn == chess.WHITE else -1
        piece_values = {}
        reduced = board.copy(stack=False)
        for sq in chess.scan_forward(board.occupied & ~board.kings):
            piece = reduced.remove_piece_at(sq)
            piece_values[sq] = sign * (value - self._evaluate_fresh(reduced))
            reduced.set_piece_at(sq, piece)
        return Trace(board.fen(), board.turn, tuple(psqt), tuple(positional), bucket, value, piece_values,
                     arch.output_scale, arch.units_per_pawn, arch.stockfish_version, material(board), final)

    def _terms(self, board: chess.Board) -> tuple[int, int]:
        """The used bucket's (PSQT, positional) terms, each divided by OutputScale (Stockfish's
        ``Network::evaluate``); the caller holds the in-use token."""
        arch = self.network.architecture
        pieces = self._refresh(board)
        per_bucket = np.empty((arch.output_buckets, 2), np.int64)
        self._kernels.trace_buckets(self._acc, self._psqt, 0 if board.turn else 1, self._params, self._scratch,
                                    self._weights, self._biases, self._layers, per_bucket)
        psqt, positional = per_bucket[arch.bucket_of(pieces)].tolist()
        return tdiv(psqt, arch.output_scale), tdiv(positional, arch.output_scale)

    def _final(self, board: chess.Board, psqt: int, positional: int, small_network: Network | None) -> int:
        """:meth:`final_evaluation` from this network's terms (the caller holds the token)."""
        version = self.network.architecture.stockfish_version
        if version in SMALL_NET_KEEP and uses_small_net(board) and self.network.architecture.ft_width > _SINGLE_NET_WIDTH:
            if small_network is None:
                from .resources import known_network

                small_network = known_network(f"sf{version}-small")
            terms = (psqt, positional) if small_network is self.network else \
                _thread_evaluator(small_network)._terms_exclusive(board)
            if small_net_kept(*terms, version):
                psqt, positional = terms
        return stockfish_evaluate(psqt, positional, board, version)

    @_exclusive
    def _terms_exclusive(self, board: chess.Board) -> tuple[int, int]:
        return self._terms(board)

    @_exclusive
    def final_evaluation(self, board: chess.Board | str, small_network: Network | None = None) -> int:
        """Stockfish's own static evaluation of ``board``: the ``Final evaluation`` of its ``eval``.

        ``Eval::evaluate`` with optimism 0 as the network's version (17.1, 18 or 19) computes it
        (:func:`nnue_infer.static_evaluation.stockfish_evaluate`): the used bucket's PSQT and positional
        terms blended and reduced by their difference (the network's complexity), scaled by the
        material, damped by the half-move clock, kept within +-31506.  17.1 and 18 evaluate
        their small net first when the material is unbalanced (:func:`nnue_infer.static_evaluation.uses_small_net`)
        and keep it unless its blend is below 236 / 277; this network plays the big net, and
        ``small_network`` (default: the version's own, ``known_network("sf17.1-small")`` /
        ``"sf18-small"``) the small one, as the engine does with a network loaded as
        ``EvalFile``.  A network of L1 <= 256 (the lite and small nets) plays both, as the lite
        engines' single net does.

        Returns
        -------
        int
            Internal units, side to move's point of view.  The engine prints it from White's
            point of view through :func:`nnue_infer.normalisation.to_cp`.

        Raises
        ------
        ValueError
            For a network of version 15.1 or 16 (their final adds a classical evaluation), and
            as :meth:`evaluate` for a bad board.
        NetworkNotFoundError
            17.1 / 18 need their small net and it is not in the cache (the message says how to fetch it).
        """
        board = _as_board(board)
        version = self.network.architecture.stockfish_version
        if version not in EVALUATE:
            raise ValueError(f"this network is a Stockfish {version} network; Stockfish {version}'s final evaluation "
                             f"adds a classical evaluation (computed here for {', '.join(EVALUATE)} only)")
        if board.is_check():
            raise PositionError(f"Stockfish prints no final evaluation in check (Final evaluation: none): {board.fen()}")
        return self._final(board, *self._terms(board), small_network)


_local = threading.local()


#: Evaluators (and so networks) each thread keeps for the module-level functions.
_CACHED_EVALUATORS = 4


def _thread_evaluator(network: Network | str | os.PathLike[str] | None) -> Evaluator:
    """This thread's cached :class:`Evaluator` for ``network`` (a network, file or name; default: the default network).

    Evaluators of the :data:`_CACHED_EVALUATORS` most recently used networks are kept, so a
    program going through many networks does not keep them all alive.
    """
    from .resources import default_network

    if network is None:
        net = default_network()
    elif isinstance(network, Network):
        net = network
    elif isinstance(network, (str, os.PathLike)):
        net = spec_network(network)
    else:
        net = as_network(network)  # raises TypeError
    cache = getattr(_local, "evaluators", None)
    if cache is None:
        cache = _local.evaluators = {}
    ev = cache.pop(id(net), None)
    if ev is None or ev.network is not net:
        ev = Evaluator(net)
        if len(cache) >= _CACHED_EVALUATORS:  # the least recently used goes, and its network with it
            del cache[next(iter(cache))]
    cache[id(net)] = ev  # most recently used last
    return ev


def evaluate(board: chess.Board | str, network: NetworkLike = None) -> int:
    """Evaluate ``board`` with ``network`` (default: :func:`nnue_infer.resources.default_network`).

    Internal units from the side to move's point of view, as :meth:`Evaluator.evaluate`.
    ``network`` may be a ``Network``, a file or a name (``"stockfish"``; loaded once per
    thread).  Thread-safe: each thread gets its own cached :class:`Evaluator` per network.

    Raises ``TypeError`` when ``board`` is neither a ``chess.Board`` nor a FEN string.
    """
    if not isinstance(board, (chess.Board, str)):  # None would mean the cached evaluator's current position
        raise TypeError(f"expected a chess.Board or a FEN string, got {type(board).__name__}")
    return _thread_evaluator(network).evaluate(board)


def evaluate_cp(board: chess.Board | str, network: NetworkLike = None, white_pov: bool = False) -> int:
    """:func:`evaluate` in centipawns, ``tdiv(100 * value, units_per_pawn)`` (361 for Stockfish 15.1).

    Side to move's point of view, or White's when ``white_pov`` is true; see
    :meth:`Evaluator.evaluate_cp`.  Thread-safe like :func:`evaluate`.
    """
    return _thread_evaluator(network).evaluate_cp(board, white_pov=white_pov)


def final_evaluation(board: chess.Board | str, network: NetworkLike = None, small_network: NetworkLike = None) -> int:
    """Stockfish's ``Final evaluation`` of ``board`` with ``network`` (17.1, 18 or 19):
    internal units, side to move's point of view.  See :meth:`Evaluator.final_evaluation`.

    Example: ``final_evaluation(board, "sf19")``.  Thread-safe like :func:`evaluate`.
    """
    small = None if small_network is None else as_network(small_network)
    return _thread_evaluator(network).final_evaluation(board, small)


def evaluate_batch(positions: Iterable[chess.Board | str], network: NetworkLike = None) -> np.ndarray:
    """Evaluate many boards or FEN strings with ``network`` (default: the default network), on all cores.

    Returns int32[n] in internal units, each from its side to move's point of view, exactly
    as :func:`evaluate` row by row.  Raises as :meth:`Evaluator.evaluate_batch`.  Thread-safe.
    """
    return _thread_evaluator(network).evaluate_batch(positions)


def evaluate_game(board: chess.Board | str, moves: Iterable[chess.Move | str], network: NetworkLike = None, *,
                  validate: bool = True) -> np.ndarray:
    """Values of a game's start position and of the position after each move (int32 array).

    See :meth:`Evaluator.evaluate_game`; ``network`` defaults to
    :func:`nnue_infer.resources.default_network`.  Thread-safe like :func:`evaluate`.
    """
    return _thread_evaluator(network).evaluate_game(board, moves, validate=validate)


def evaluate_moves(board: chess.Board | str, moves: Iterable[chess.Move | str] | None = None,
                   network: NetworkLike = None) -> np.ndarray:
    """Values after each legal move of ``board`` (or after ``moves``), int32 in ``board.legal_moves`` order.

    See :meth:`Evaluator.evaluate_moves`; ``network`` defaults to the default network.
    Thread-safe like :func:`evaluate`.
    """
    if not isinstance(board, (chess.Board, str)):  # None would mean the cached evaluator's current position
        raise TypeError(f"expected a chess.Board or a FEN string, got {type(board).__name__}")
    return _thread_evaluator(network).evaluate_moves(board, moves)

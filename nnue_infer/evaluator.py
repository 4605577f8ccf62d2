"""The :class:`Evaluator`: a network plus the buffers to evaluate positions with it.

Data flow: board -> validated bitboards -> feature indices per perspective ->
accumulators (int16 ``[2, L1]`` + int32 PSQT ``[2, P]``) -> pairwise multiplication
(uint8 ``[L1]``, side to move first) -> layer stack of the position's bucket -> int value
(internal units, side to move's point of view) -> centipawns at the edge only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import chess
import numpy as np

from .batch import PARALLEL_LOCK, as_sequence, n_chunks, raise_position_error, to_bitboards
from .features import MAX_PIECES, architecture_features, board_bitboards
from .kernels import forward as K
from .kernels.batch import evaluate_batch as _evaluate_batch_kernel
from .network import Network
from .trace import Trace, to_centipawns


def _as_board(board: chess.Board | str) -> chess.Board:
    """A ``chess.Board`` from a board or a FEN string (``ValueError`` naming the problem if bad)."""
    if isinstance(board, chess.Board):
        return board
    if isinstance(board, str):
        try:
            return chess.Board(board)
        except ValueError as exc:
            raise ValueError(f"invalid FEN {board!r}: {exc}") from exc
    raise TypeError(f"expected a chess.Board or a FEN string, got {type(board).__name__}")


class Evaluator:
    """Evaluates positions with one network.

    Parameters
    ----------
    network : Network, optional
        The network; defaults to :func:`nnue_infer.resources.default_network`.

    Notes
    -----
    An ``Evaluator`` owns scratch buffers and is **not thread-safe**: use one per thread
    (the module-level :func:`nnue_infer.evaluate` does so).  The network's arrays are
    shared read-only and can back any number of evaluators.
    """

    def __init__(self, network: Network | None = None) -> None:
        if network is None:
            from .resources import default_network

            network = default_network()
        self.network = network
        arch = network.architecture
        fs = architecture_features(arch)
        self._slot_table = fs.slot_table
        self._king_buckets = fs.king_buckets
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
        self._params = params
        self._weights, self._biases, self._layers = network.compute_layout
        L1 = arch.ft_width
        self._bb = np.empty(8, np.int64)
        self._feats = np.empty((2, MAX_PIECES), np.int32)
        self._counts = np.empty(2, np.int64)
        self._acc = np.empty((2, L1), np.int16)
        self._psqt = np.empty((2, arch.psqt_buckets), np.int32)
        self._ft_out = np.empty(arch.ft_output_width, np.int16)

    def __repr__(self) -> str:
        return f"Evaluator({self.network!r})"

    def _refresh(self, board: chess.Board) -> int:
        board_bitboards(board, self._bb)
        return int(K.refresh_both(self._bb, self._slot_table, self._king_buckets, self._params,
                                  self.network.ft_weights, self.network.ft_biases, self.network.psqt_weights,
                                  self._feats, self._counts, self._acc, self._psqt))

    def evaluate(self, board: chess.Board | str) -> int:
        """NNUE value of ``board`` (a ``chess.Board`` or FEN) with a full refresh.

        Returns
        -------
        int
            Internal units (361 = one pawn for Stockfish 15.1) from the **side to move's**
            point of view: Stockfish's ``NNUE::evaluate(pos, false)``.  Multiply by -1 when
            Black is to move for White's point of view, or use :meth:`evaluate_cp`.

        Raises
        ------
        ValueError
            Bad FEN string; :class:`~nnue_infer.errors.PositionError` (a ``ValueError``) for a
            position the network cannot represent (kings, more than 32 pieces, pawns on the
            first or last rank), raised before any kernel runs.
        """
        board = _as_board(board)
        board_bitboards(board, self._bb)
        net = self.network
        return int(K.evaluate_bitboards(self._bb, 0 if board.turn else 1, self._slot_table, self._king_buckets,
                                        self._params, net.ft_weights, net.ft_biases, net.psqt_weights,
                                        self._weights, self._biases, self._layers,
                                        self._feats, self._counts, self._acc, self._psqt, self._ft_out))

    def evaluate_batch(self, positions: Iterable[chess.Board | str]) -> np.ndarray:
        """Evaluate many positions on all cores; the same numbers as :meth:`evaluate`, row by row.

        Parameters
        ----------
        positions : sequence of chess.Board, or sequence of str
            All boards or all FEN strings.  FENs are parsed and checked in compiled code
            (placement and side to move are used; castling, en passant and the counters are
            only checked, as they do not change the NNUE value).

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
        Work is spread over Numba's threads (``numba.set_num_threads`` limits them); each
        thread has its own scratch buffers, so calls from several threads are safe.
        """
        positions = as_sequence(positions)
        bitboards, stm = to_bitboards(positions)
        n = len(positions)
        values = np.empty(n, np.int32)
        codes = np.empty(n, np.int32)
        net = self.network
        with PARALLEL_LOCK:
            _evaluate_batch_kernel(bitboards, stm, self._slot_table, self._king_buckets, self._params,
                                   net.ft_weights, net.ft_biases, net.psqt_weights, self._weights, self._biases,
                                   self._layers, MAX_PIECES, self._ft_out.shape[0], n_chunks(), values, codes)
        raise_position_error(positions, codes)
        return values

    def evaluate_cp(self, board: chess.Board | str, white_pov: bool = False) -> int:
        """:meth:`evaluate` in centipawns, ``tdiv(100 * value, 361)`` (Stockfish 15.1's conversion).

        Side to move's point of view, or White's when ``white_pov`` is true.
        """
        board = _as_board(board)
        v = self.evaluate(board)
        if white_pov and board.turn == chess.BLACK:
            v = -v
        return to_centipawns(v)

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
        K.trace_buckets(self._acc, self._psqt, stm, self._params, self._ft_out, self._weights, self._biases,
                        self._layers, per_bucket)
        bucket = arch.bucket_of(pieces)
        psqt, positional = per_bucket[:, 0].tolist(), per_bucket[:, 1].tolist()
        from .trace import tdiv

        value = tdiv(psqt[bucket] + positional[bucket], arch.output_scale)
        sign = 1 if board.turn == chess.WHITE else -1
        piece_values = {}
        reduced = board.copy(stack=False)
        for sq in chess.scan_forward(board.occupied & ~board.kings):
            piece = reduced.remove_piece_at(sq)
            piece_values[sq] = sign * (value - self.evaluate(reduced))
            reduced.set_piece_at(sq, piece)
        return Trace(board.fen(), board.turn, tuple(psqt), tuple(positional), bucket, value, piece_values,
                     arch.output_scale)


_local = threading.local()


def _thread_evaluator(network: Network | None) -> Evaluator:
    """This thread's cached :class:`Evaluator` for ``network`` (default: the default network)."""
    from .resources import default_network

    net = network if network is not None else default_network()
    cache = getattr(_local, "evaluators", None)
    if cache is None:
        cache = _local.evaluators = {}
    ev = cache.get(id(net))
    if ev is None or ev.network is not net:
        ev = cache[id(net)] = Evaluator(net)
    return ev


def evaluate(board: chess.Board | str, network: Network | None = None) -> int:
    """Evaluate ``board`` with ``network`` (default: :func:`nnue_infer.resources.default_network`).

    Internal units from the side to move's point of view, as :meth:`Evaluator.evaluate`.
    Thread-safe: each thread gets its own cached :class:`Evaluator` per network.
    """
    return _thread_evaluator(network).evaluate(board)


def evaluate_batch(positions: Iterable[chess.Board | str], network: Network | None = None) -> np.ndarray:
    """Evaluate many boards or FEN strings with ``network`` (default: the default network), on all cores.

    Returns int32[n] in internal units, each from its side to move's point of view, exactly
    as :func:`evaluate` row by row.  Raises as :meth:`Evaluator.evaluate_batch`.  Thread-safe.
    """
    return _thread_evaluator(network).evaluate_batch(positions)

"""Every child of a position in one compiled call (the work behind :meth:`Evaluator.evaluate_moves
<nnue_infer.evaluator.Evaluator.evaluate_moves>` and :meth:`~nnue_infer.evaluator.Evaluator.evaluate_children_batch`).

Legal moves are generated from bitboards in compiled code in python-chess's ``board.legal_moves``
order (:mod:`nnue_infer.kernels.chess.movegen`) and each child is evaluated with one incremental update
from its parent's accumulator (:mod:`nnue_infer.kernels.nnue.children`).  Moves travel as 16-bit codes,
``from_square | to_square << 6 | promotion << 12`` (python-chess squares a1 = 0 .. h8 = 63 and
piece types, promotion 2..5 = knight .. queen, 0 for none; castling as python-chess writes it:
``e1g1`` in standard chess, king-takes-rook in Chess960): :func:`move_codes` and :func:`decode_moves`
convert.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

import chess
import numba
import numpy as np
from numba import types

from .batch import PARALLEL_LOCK, as_sequence, n_chunks
from .errors import IllegalMoveError, PositionError, clip, quote
from .features import check_position
from .kernels import simd
from .kernels.nnue import arena
from .kernels.nnue import children as KC
from .kernels.chess.movegen import MAX_MOVES

#: Argument types of ``evaluate_children`` (:func:`nnue_infer.kernels.nnue.children.kernels`) as the
#: Evaluator calls it (its ``_children_entry``): ints only, the buffers travel as an address.
ENTRY_TYPES = (types.int64, types.int64, types.int64, arena.POSITION, types.uint64, types.int64, types.boolean,
               types.int64, types.boolean, types.int64)


class IOBuffer(NamedTuple):
    """The buffer ``evaluate_children`` reads the given moves from and writes the moves and
    values to (``kernels.nnue.children.io_views``): ``moves`` uint16[cap] and ``values`` int32[cap]
    are views of one int32 array at ``address`` (``values`` first)."""

    moves: np.ndarray
    values: np.ndarray
    address: int
    array: np.ndarray


def io_buffer(n_given: int = -1) -> IOBuffer:
    """An :class:`IOBuffer` for ``n_given`` given moves (-1: every legal move): ``cap =
    max(MAX_MOVES, n_given)`` entries each (the kernel's layout for that ``n_given``)."""
    cap = max(MAX_MOVES, n_given)
    array = np.zeros(cap + (cap + 1) // 2, np.int32)
    return IOBuffer(array[cap:].view(np.uint16)[:cap], array[:cap], array.ctypes.data, array)


def move_code(move: chess.Move) -> int:
    """The 16-bit code of a ``chess.Move`` (see the module docstring)."""
    return move.from_square | move.to_square << 6 | (move.promotion or 0) << 12


def decode_moves(codes: np.ndarray) -> list[chess.Move]:
    """``chess.Move`` objects of 16-bit move codes (uint16[n])."""
    return [chess.Move(c & 63, (c >> 6) & 63, (c >> 12) or None) for c in codes.tolist()]


def uci_moves(codes: np.ndarray) -> list[str]:
    """UCI strings (``e2e4``, ``e7e8q``) of 16-bit move codes."""
    return [m.uci() for m in decode_moves(codes)]


def move_codes(moves: Iterable[chess.Move | str]) -> np.ndarray:
    """uint16[n] codes of ``moves`` (``chess.Move`` or UCI strings); legality is checked later, by the kernel.

    Raises
    ------
    IllegalMoveError
        ``moves[i]`` is malformed UCI, a null move (no child position to evaluate) or a drop.
    TypeError
        ``moves`` is a single move or string, or ``moves[i]`` is neither a move nor a string.
    """
    if isinstance(moves, (str, chess.Move)):
        raise TypeError(f"moves must be a sequence of moves, got a single {type(moves).__name__} "
                        f"({moves!r:.40}); wrap it in a list")
    moves = list(moves)
    codes = np.empty(len(moves), np.uint16)
    for i, move in enumerate(moves):
        if isinstance(move, str):
            try:
                move = chess.Move.from_uci(move)
            except ValueError as exc:
                raise IllegalMoveError(f"moves[{i}] ({quote(moves[i])}): {clip(str(exc))}") from None
        elif not isinstance(move, chess.Move):
            raise TypeError(f"moves[{i}]: expected a chess.Move or a UCI string, got {type(move).__name__}")
        if not move:
            raise IllegalMoveError(f"moves[{i}] is a null move: evaluate_moves evaluates the positions after "
                                   "moves; for the position with the other side to move use push(chess.Move.null()) "
                                   "and evaluate()")
        if move.drop:
            raise IllegalMoveError(f"moves[{i}] ({move.uci()}) is a drop, not a chess move")
        codes[i] = move_code(move)
    return codes


def move_list(moves: Iterable[chess.Move | str] | None) -> list | str | chess.Move | None:
    """``moves`` read into a list (an iterator is read once: an error quotes ``moves[i]`` from the list), before
    the evaluator's in-use token is taken (a generator reading ``ev.board`` runs then); ``None``, or a single move
    or string (:func:`move_codes` names it), as it is."""
    if moves is None or isinstance(moves, (str, chess.Move)):
        return moves
    return list(moves)


def evaluate_moves(ev, board: chess.Board | None, moves: list | str | chess.Move | None) -> np.ndarray:
    """The work of ``Evaluator.evaluate_moves`` (the caller holds the evaluator's in-use token and
    has read ``board``, a standard or Chess960 board, or None, and ``moves`` with :func:`move_list`).

    Returns the values (int32[n], a new array).  With ``board`` None the parent is
    the evaluator's current position at its ply of the accumulator stack and the children use the
    next ply, as ``push`` / ``evaluate()`` / ``pop`` would; a given board goes one ply above the
    current one (the plies the game uses are left as they are).
    """
    current = board is None
    if current:
        board = ev._board
        ply = len(board.move_stack)
    else:
        ply = len(ev._board.move_stack) + 1
    given = None if moves is None else move_codes(moves)
    if board.ep_square and board.promoted & board.kings & board.occupied_co[board.turn]:
        return _promoted_king_children(ev, board, moves, given)
    if given is None:
        n_given, io = -1, ev._children_io
    else:
        n_given = len(given)
        io = ev._children_io if n_given <= MAX_MOVES else io_buffer(n_given)
        io.moves[:n_given] = given
    if ev._stack_base + ply + 1 >= ev._pairs:
        ev._allocate(2 * (ev._stack_base + ply + 2))
    trusted = ev._trusted
    occupied_co = board.occupied_co
    position = (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings, occupied_co[1],
                occupied_co[0], board.turn)
    castling = board.castling_rights and board.clean_castling_rights()  # none: 0 without python-chess's cleaning
    n, parent = ev._entry_point(ev._children_entry)(ev._address, ply, trusted, position, castling,
                                                    board.ep_square or 0, board.chess960, n_given, current, io.address)
    if current and n != KC.INVALID_POSITION:
        ev._trusted = ply + 1  # the parent's pair is computed; the children's (ply + 1) is not trusted
        ev._memo[ply] = (position, parent)
    if n < 0:
        _raise(n, board, moves, io.moves)
    return io.values[:n].copy()


def _promoted_king_children(ev, board: chess.Board, moves, given: np.ndarray | None) -> np.ndarray:
    """Children through python-chess, each evaluated afresh, for a side to move whose king is marked
    promoted (``K~`` in a FEN) when an en passant square is set: python-chess then ignores pins of
    an en passant capturer along a file (``pin_mask`` finds no king), which the compiled generator
    does not imitate.  Same results and errors as the compiled path."""
    check_position(board)
    if board.was_into_check():
        _raise(KC.OPPONENT_IN_CHECK, board, moves, given)
    if moves is None:
        legal = list(board.legal_moves)
    else:
        legal = []
        for i, move in enumerate(decode_moves(given)):
            if not board.is_legal(move):
                _raise(KC.ILLEGAL_MOVE - i, board, moves, given)
            legal.append(move)
    values = []
    for move in legal:
        child = board.copy(stack=False)
        child.push(move)
        values.append(ev._evaluate_fresh(child))
    return np.array(values, np.int32)


def _raise(result: int, board: chess.Board, moves, codes: np.ndarray) -> None:
    """The error for a negative result code of ``evaluate_children`` (``codes``: the moves it wrote)."""
    if result == KC.INVALID_POSITION:
        check_position(board)
        raise PositionError(f"position not representable: {board.fen()}")
    if result == KC.OPPONENT_IN_CHECK:
        raise PositionError(f"the side not to move is in check in {board.fen()} (its king could be captured): "
                            "no move leads to a chess position")
    if result <= KC.ILLEGAL_MOVE:
        i = KC.ILLEGAL_MOVE - result
        moves = list(moves)
        raise IllegalMoveError(f"moves[{i}] ({quote(moves[i])}) is not a legal move in {board.fen()}")
    move = decode_moves(codes[KC.INVALID_CHILD - result:][:1])[0]
    raise PositionError(f"the position after {move.uci()} in {board.fen()} cannot be represented (python-chess "
                        "removes whatever stands behind an en passant square that no double pawn push made)")


def _thread_arenas(ev, threads: int) -> tuple[list, np.ndarray]:
    """Per Numba thread, arrays for the two-ply stack of :func:`~nnue_infer.kernels.nnue.children.evaluate_children_batch`
    (refresh cache, biases pair, scratch pairs, two plies; own scratch buffer) and the addresses
    of their headers int64[threads].  The caller keeps the returned list alive while they are used."""
    keep = []
    addresses = np.empty(threads, np.int64)
    for t in range(threads):
        accs = simd.aligned_zeros((ev._stack_base + 2, *ev._accs.shape[1:]), np.int16)
        accs[:ev._cache_pairs + 1] = ev._network.ft_biases
        psqts = simd.aligned_zeros((ev._stack_base + 2, *ev._psqts.shape[1:]), np.int32)
        state = simd.aligned_zeros((ev._stack_base + 2, *ev._state.shape[1:]), np.int64)
        scratch = simd.aligned_zeros(ev._scratch.shape, np.int16)
        header = np.zeros(arena.HEADER_SIZE, np.int64)
        arena.write_header(header, (*ev._net_args, accs, psqts, state, scratch))
        keep.append((header, accs, psqts, state, scratch))
        addresses[t] = header.ctypes.data
    return keep, addresses


def evaluate_children_batch(ev, positions: Iterable[chess.Board | str], as_board: Callable[[object], chess.Board]
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The work of ``Evaluator.evaluate_children_batch``: ``(offsets, codes, values)``; ``as_board``
    reads each row (a board or FEN) as ``Evaluator.evaluate`` does."""
    positions = as_sequence(positions)
    n = len(positions)
    bitboards = np.empty((n, 8), np.uint64)
    stm = np.empty(n, np.uint8)
    castling = np.empty(n, np.uint64)
    ep = np.empty(n, np.int64)
    chess960 = np.empty(n, np.uint8)
    boards = []
    for i, position in enumerate(positions):
        try:
            board = as_board(position)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"row {i}: {exc}") from None
        if board.ep_square and board.promoted & board.kings & board.occupied_co[board.turn]:
            raise PositionError(f"row {i}: the side to move's king is marked promoted ('~' in the FEN) and an en "
                                "passant square is set, where python-chess's moves differ from the compiled "
                                f"generator's: use Evaluator.evaluate_moves for {board.fen()}")
        occupied_co = board.occupied_co
        bitboards[i] = (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                        occupied_co[1], occupied_co[0])
        stm[i] = not board.turn
        castling[i] = board.clean_castling_rights()
        ep[i] = board.ep_square or 0
        chess960[i] = board.chess960
        boards.append(board)
    bitboards = bitboards.view(np.int64)
    castling = castling.view(np.int64)
    counts = np.empty(n, np.int64)
    KC.count_legal_moves(bitboards, stm, castling, ep, chess960, counts)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    codes = np.empty(offsets[-1], np.uint16)
    values = np.empty(offsets[-1], np.int32)
    results = np.empty(n, np.int64)
    keep, addresses = _thread_arenas(ev, numba.get_num_threads())
    with PARALLEL_LOCK, numba.parallel_chunksize(1):
        ev._children_kernels.evaluate_children_batch(addresses, bitboards, stm, castling, ep, chess960, offsets,
                                                     n_chunks(), codes, values, results)
    del keep
    bad = np.flatnonzero(results < 0)
    if bad.size:
        i = int(bad[0])
        try:
            _raise(int(results[i]), boards[i], None, codes[offsets[i]:offsets[i + 1]])
        except ValueError as exc:
            raise type(exc)(f"row {i}: {exc}") from None
    return offsets, codes, values

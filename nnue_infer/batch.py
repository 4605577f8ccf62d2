"""Batch evaluation: FEN strings or python-chess boards -> one parallel kernel call -> values.

FEN strings are joined and encoded once and parsed, checked and evaluated in one compiled
pass (``evaluate_fens`` of :func:`nnue_infer.kernels.nnue.batch.kernels`); boards are read through
their bitboards, one tuple per board, into int64 ``[n, 8]`` for its ``evaluate_batch``.  Errors
name the first bad row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import chess
import numba
import numpy as np

from .errors import FenError, PositionError, clip, quote
from .features import MAX_PIECES, check_position, check_variant
from .kernels.nnue import batch as KB
from .kernels.chess import bitboard as KFT
from .kernels.nnue.forward import config
from .kernels.threads import PARALLEL_LOCK, n_chunks
from .positions import (FEN_MISSING_FIELD, _first_not, fen_buffer, fen_problem, field_counts, missing_field,
                        missing_field_message)

_POSITION_PROBLEMS = {
    KFT.POS_WHITE_KINGS: "White must have exactly one king",
    KFT.POS_BLACK_KINGS: "Black must have exactly one king",
    KFT.POS_TOO_MANY_PIECES: "more than 32 pieces on the board",
    KFT.POS_BACK_RANK_PAWN: "pawn on the first or last rank",
    KFT.POS_INCONSISTENT: "bitboards contradict each other (a square with two pieces or colours)",
}


def position_problem(code: int) -> str:
    """What a ``POS_*`` code of the batch kernels means (for messages)."""
    return _POSITION_PROBLEMS[int(code)]


def as_sequence(positions: Iterable[chess.Board | str]) -> Sequence[chess.Board | str]:
    """``positions`` as a list or tuple (iterators and generators are consumed once).

    ``TypeError`` for a single FEN string or board (a string would be read as one-letter FENs).
    """
    if isinstance(positions, (str, bytes, chess.Board)):
        raise TypeError(f"expected a sequence of FEN strings or boards, got a single {type(positions).__name__}; "
                        "wrap it in a list")
    if isinstance(positions, (list, tuple)):
        return positions
    try:
        return list(positions)
    except TypeError:
        raise TypeError(f"expected a sequence of FEN strings or boards, got {type(positions).__name__}") from None


def board_bitboards_batch(boards: Sequence[chess.Board]) -> tuple[np.ndarray, np.ndarray]:
    """Bitboards and side to move of python-chess boards (not validated: the kernel checks them).

    Returns int64[n, 8] bitboards (as :func:`nnue_infer.features.board_bitboards`) and
    uint8[n] side to move (0 White, 1 Black).  Raises ``TypeError`` naming the first row
    that is not a ``chess.Board``, :class:`PositionError` naming the first variant board
    (``chess.variant.*``).
    """
    try:
        rows = [(b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings, b.occupied_co[1], b.occupied_co[0],
                 b.turn) for b in boards]
    except AttributeError:
        i = _first_not(boards, chess.Board)
        wanted = "a chess.Board like the rows before" if i else "a FEN string or a chess.Board"
        raise TypeError(f"row {i}: expected {wanted}, got {type(boards[i]).__name__}") from None
    variant = next((i for i, b in enumerate(boards) if b.uci_variant != "chess"), None)
    if variant is not None:
        try:
            check_variant(boards[variant])
        except PositionError as exc:
            raise PositionError(f"row {variant}: {exc}") from None
    table = np.array(rows, np.uint64).reshape(len(boards), 9)
    bitboards = np.ascontiguousarray(table[:, :8]).view(np.int64)
    stm = (table[:, 8] == 0).astype(np.uint8)
    return bitboards, stm


def positions_bitboards(positions: Sequence[chess.Board | str]) -> tuple[np.ndarray, np.ndarray]:
    """Bitboards int64[n, 8] and side to move uint8[n] of all-FEN or all-board ``positions``.

    FENs are parsed in compiled code (:func:`nnue_infer.positions.parse_fen_buffer`); when any row is refused or
    lacks a field, every row is read through :func:`nnue_infer.positions.board_from_fen`
    instead, whose :class:`FenError` names the first bad row (the same rule as
    :func:`evaluate_rows`).  Positions are not validated: the kernels check the bitboards.
    """
    from .positions import board_from_fen, parse_fen_buffer

    if not positions or not isinstance(positions[0], str):
        return board_bitboards_batch(positions)  # type: ignore[arg-type]
    buf, offsets = fen_buffer(positions)  # type: ignore[arg-type]
    bitboards, stm, fen_codes, _ = parse_fen_buffer(buf, offsets)
    fields = field_counts(buf, offsets)
    if fen_codes.any() or ((fields < 4) | (fields == 5)).any():
        boards = []
        for i, fen in enumerate(positions):
            try:
                boards.append(board_from_fen(fen, hint="api"))  # type: ignore[arg-type]
            except FenError as exc:
                raise FenError(f"row {i}: {exc}") from None
        return board_bitboards_batch(boards)
    return bitboards, stm


def evaluate_rows(positions: Sequence[chess.Board | str], net_arrays: tuple, scratch_len: int) -> np.ndarray:
    """Evaluate all-FEN or all-board ``positions`` with a network's kernel arrays (see ``Evaluator``).

    ``net_arrays`` is ``(slot_table, king_buckets, params, ft_weights, ft_biases, psqt_weights,
    int8_weights, int8_psqt_weights, weights, biases, layers)``.  Returns int32[n]; raises :class:`FenError` /
    :class:`PositionError` for the first bad row, ``TypeError`` for rows of the wrong type.

    python-chess (``chess.Board(fen)``) has the last word on FENs the compiled parser refuses:
    it also reads text outside the parser's ASCII rules (Unicode white space and digits,
    letters such as the Kelvin sign for ``K``, ``1_0`` counters); such rows are evaluated
    from its board.  Then the strict rule of :func:`nnue_infer.positions.board_from_fen`
    applies (a row lacking side to move, castling rights or en passant square, or with a
    half-move clock but no full-move number, is an error naming the field), so a batch
    accepts exactly the FENs :meth:`Evaluator.evaluate` and the command line accept.
    """
    n = len(positions)
    values = np.empty(n, np.int32)
    codes = np.empty(n, np.int32)
    fen_codes = fen_offsets = None
    if n and isinstance(positions[0], str):
        fen_codes = np.empty(n, np.int32)
        fen_offsets = np.empty(n, np.int64)
        for lo in range(0, n, FEN_CHUNK_ROWS):  # a wrong-typed row raises TypeError at its chunk, before any FenError
            hi = min(n, lo + FEN_CHUNK_ROWS)
            evaluate_fens(positions[lo:hi], lo, net_arrays, scratch_len, values[lo:hi], codes[lo:hi],  # type: ignore[arg-type]
                          fen_codes[lo:hi], fen_offsets[lo:hi])
    else:
        evaluate_boards(positions, net_arrays, scratch_len, values, codes)  # type: ignore[arg-type]
    bad = np.flatnonzero(codes if fen_codes is None else codes | fen_codes)
    if bad.size:
        raise_row_error(positions, int(bad[0]), fen_codes, fen_offsets, codes)
    return values


#: FEN strings :func:`evaluate_rows` joins, parses and evaluates at a time: the text and the arrays of a chunk are a
#: few megabytes, which the allocator hands back to the next chunk and the next call, where one buffer for the whole
#: list was fresh memory every call (640,000 FENs, one thread: 28,000-44,000 page faults, 0.06-0.22 s of system
#: time in 1.2-1.4 s of thread CPU).
FEN_CHUNK_ROWS = 1 << 16


def evaluate_fens(fens: Sequence[str], first_row: int, net_arrays: tuple, scratch_len: int, values: np.ndarray,
                  codes: np.ndarray, fen_codes: np.ndarray, fen_offsets: np.ndarray) -> None:
    """Parse and evaluate the FEN strings ``fens`` (rows ``first_row ...`` of the caller's, for messages) into
    ``values`` / ``codes`` int32[n] (:func:`evaluate_bitboards`' meaning), ``fen_codes`` int32[n] and
    ``fen_offsets`` int64[n] (``kernels.chess.fen`` codes and offsets; ``FEN_MISSING_FIELD`` for a row lacking a field
    under the strict rule; 0 for the rows python-chess reads where the compiled parser refused:
    :func:`reread_refused_fens`).  ``TypeError`` naming the row for an element that is not a ``str``."""
    buf, offsets = fen_buffer(fens, first_row)
    with PARALLEL_LOCK, numba.parallel_chunksize(1):
        batch_kernels(net_arrays).evaluate_fens(buf, offsets, *net_arrays, MAX_PIECES, scratch_len, n_chunks(),
                                                values, fen_codes, fen_offsets, codes)
    refused = fen_codes != 0
    if refused.any():
        reread_refused_fens(fens, fen_codes, values, codes, net_arrays, scratch_len)
    fields = field_counts(buf, offsets)
    for i in np.flatnonzero(refused & (fen_codes == 0)).tolist():  # read by python-chess: Unicode white space
        fields[i] = len(fens[i].split())
    fen_codes[(fen_codes == 0) & ((fields < 4) | (fields == 5))] = FEN_MISSING_FIELD


def evaluate_boards(boards: Sequence[chess.Board], net_arrays: tuple, scratch_len: int, values: np.ndarray,
                    codes: np.ndarray) -> None:
    """Evaluate ``boards`` into ``values`` int32[n], with the kernel's ``POS_*`` result per row in ``codes``."""
    bitboards, stm = board_bitboards_batch(boards)
    evaluate_bitboards(bitboards, stm, net_arrays, scratch_len, values, codes)


def evaluate_bitboards(bitboards: np.ndarray, stm: np.ndarray, net_arrays: tuple, scratch_len: int,
                       values: np.ndarray, codes: np.ndarray) -> None:
    """Evaluate int64[n, 8] bitboards with side to move uint8[n] (0 White) into ``values`` int32[n];
    the kernel's ``POS_*`` result per row goes to ``codes`` int32[n] (rows not ``POS_OK`` get value 0)."""
    with PARALLEL_LOCK, numba.parallel_chunksize(1):
        batch_kernels(net_arrays).evaluate_batch(bitboards, stm, *net_arrays, MAX_PIECES, scratch_len, n_chunks(),
                                                 values, codes)


def batch_kernels(net_arrays: tuple) -> KB.Kernels:
    """The batch kernels of the network whose kernel arrays are ``net_arrays`` (see
    :func:`evaluate_rows`), specialised for its ``forward.Config``."""
    return KB.kernels(config(net_arrays[2], net_arrays[10]))


def reread_refused_fens(fens: Sequence[str], fen_codes: np.ndarray, values: np.ndarray, codes: np.ndarray,
                        net_arrays: tuple, scratch_len: int) -> None:
    """Evaluate through python-chess the rows the compiled parser refused but python-chess reads.

    Up to the first row python-chess refuses too (that row's error is the one to report);
    their ``fen_codes`` are cleared and ``values`` / ``codes`` filled.
    """
    rows, boards = [], []
    for i in np.flatnonzero(fen_codes).tolist():
        try:
            boards.append(chess.Board(fens[i]))
        except ValueError:
            break
        rows.append(i)
    if rows:
        v = np.empty(len(rows), np.int32)
        c = np.empty(len(rows), np.int32)
        evaluate_boards(boards, net_arrays, scratch_len, v, c)
        values[rows], codes[rows], fen_codes[rows] = v, c, 0


def raise_row_error(positions: Sequence[chess.Board | str], i: int, fen_codes: np.ndarray | None,
                    fen_offsets: np.ndarray | None, codes: np.ndarray) -> None:
    """Raise :class:`FenError` or :class:`PositionError` for row ``i`` from the kernels' codes."""
    position = positions[i]
    if fen_codes is not None and fen_codes[i]:
        assert fen_offsets is not None and isinstance(position, str)
        if fen_codes[i] == FEN_MISSING_FIELD:
            field = missing_field(len(position.split())) or ""
            raise FenError(f"row {i}: {missing_field_message(position, field, 'api')}")
        if not position.isascii():  # python-chess refused it too; the kernel's offset counts bytes
            try:
                chess.Board(position)
            except ValueError as exc:
                raise FenError(f"row {i}: invalid FEN {quote(position)}: {clip(str(exc))}") from None
        raise FenError(f"row {i}: {fen_problem(position, int(fen_codes[i]), int(fen_offsets[i]))}")
    board = chess.Board(position) if isinstance(position, str) else position
    try:
        check_position(board)
    except PositionError as exc:
        raise PositionError(f"row {i}: {exc}: {board.fen()!r}") from None
    raise PositionError(f"row {i}: {_POSITION_PROBLEMS[int(codes[i])]}")

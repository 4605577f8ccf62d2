"""Batch evaluation: FEN strings or python-chess boards -> one parallel kernel call -> values.

FEN strings are joined and encoded once and parsed, checked and evaluated in one compiled
pass (:func:`nnue_infer.kernels.batch.evaluate_fens`); boards are read through their
bitboards, one tuple per board, into int64 ``[n, 8]`` for
:func:`nnue_infer.kernels.batch.evaluate_batch`.  Errors name the first bad row.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence

import chess
import numba
import numpy as np

from .errors import QUOTE_LIMIT, FenError, PositionError, clip, quote
from .features import MAX_PIECES, check_position, check_variant
from .kernels import batch as KB
from .kernels import features as KFT
from .kernels import fen as KF
from .positions import missing_field, missing_field_message

# Idle OpenMP threads sleep instead of spinning (unless the user chose otherwise): on a
# machine busy with other work, a spinning thread takes CPU from the one still computing
# (measured here: 10-30% more batch throughput with two threads at load average 6).  Read
# by libgomp when Numba starts its thread pool, at the first parallel kernel call; only when
# the user chose the OpenMP layer (NUMBA_THREADING_LAYER=omp; see kernels/threads.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: Held around every parallel kernel call: Numba's "workqueue" threading layer (the fallback
#: when TBB is missing, kernels/threads.py) aborts the process when two threads launch
#: parallel kernels at once.
PARALLEL_LOCK = threading.Lock()


def _new_parallel_lock() -> None:
    """In a forked child: a fresh lock (a thread of the parent may have held it at the fork, and
    that thread does not exist in the child: the child's first batch would wait forever)."""
    global PARALLEL_LOCK
    PARALLEL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_parallel_lock)
#: Chunks of rows per thread in the batch kernels, handed out one at a time: many, so a
#: thread slowed down by other work on the machine does not hold the others up.
CHUNKS_PER_THREAD = 32


def n_chunks() -> int:
    """Number of row chunks for the batch kernels with Numba's current thread count."""
    return CHUNKS_PER_THREAD * numba.get_num_threads()


_FEN_PROBLEMS = {
    KF.FEN_EMPTY: "empty FEN",
    KF.FEN_BAD_CHARACTER: "invalid character {char!r} in the placement field",
    KF.FEN_TWO_DIGITS: "two digits in a row in the placement field",
    KF.FEN_BAD_TILDE: "'~' not after a piece in the placement field",
    KF.FEN_RANK_LENGTH: "rank {rank} of the placement field does not have 8 squares",
    KF.FEN_RANK_COUNT: "the placement field does not have 8 ranks",
    KF.FEN_SIDE_TO_MOVE: "side to move must be 'w' or 'b', found {field!r}",
    KF.FEN_CASTLING: "invalid castling field {field!r}",
    KF.FEN_EN_PASSANT: "invalid en passant field {field!r}",
    KF.FEN_HALFMOVE: "half-move clock must be a non-negative integer, found {field!r}",
    KF.FEN_FULLMOVE: "full-move number must be a non-negative integer, found {field!r}",
    KF.FEN_EXTRA_FIELDS: "more than 6 fields, found {field!r}",
}

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


def _first_not(positions: Sequence[object], kind: type) -> int:
    return next(i for i, p in enumerate(positions) if not isinstance(p, kind))


def fen_buffer(fens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The FENs' UTF-8 bytes joined by newlines, and where each row starts.

    Returns
    -------
    buf : uint8[total]
        ``"\\n".join(fens) + "\\n"``, encoded (one copy, no per-row Python work for ASCII input;
        a lone surrogate becomes bytes the parser refuses, so its row is named).
    offsets : int64[n + 1]
        Row ``i`` is ``buf[offsets[i]:offsets[i + 1]]``, its trailing newline included.

    Raises
    ------
    TypeError
        An element is not a ``str`` (the message names its row).
    """
    n = len(fens)
    try:
        text = "\n".join(fens)
    except TypeError:
        i = _first_not(fens, str)
        wanted = "a FEN string like the rows before" if i else "a FEN string or a chess.Board"
        raise TypeError(f"row {i}: expected {wanted}, got {type(fens[i]).__name__}") from None
    buf = np.frombuffer(bytearray(text + "\n", "utf-8", "surrogatepass"), np.uint8)
    lengths = np.fromiter(map(len, fens), np.int64, n)
    if int(lengths.sum()) + n != buf.size:  # non-ASCII characters: count bytes, not characters
        lengths = np.fromiter((len(f.encode("utf-8", "surrogatepass")) for f in fens), np.int64, n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths + 1, out=offsets[1:])
    return buf, offsets


#: ``fen_codes`` of a row that parses but lacks a field under the strict rule
#: (:func:`nnue_infer.positions.missing_field`); the compiled parser's codes are ``kernels.fen.FEN_*``.
FEN_MISSING_FIELD = -1


def field_counts(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """int64[n]: white-space separated fields of each row of ``buf`` (layout of :func:`fen_buffer`;
    ASCII white space as ``kernels.fen.is_space``)."""
    space = (buf == 32) | ((buf >= 9) & (buf <= 13)) | ((buf >= 28) & (buf <= 31))
    starts = ~space
    starts[1:] &= space[:-1]  # a field starts after white space (every row ends with a newline)
    if offsets.shape[0] < 2:
        return np.zeros(0, np.int64)
    return np.add.reduceat(starts.astype(np.int64), offsets[:-1])


def fen_problem(fen: str, code: int, offset: int) -> str:
    """Human-readable description of :func:`nnue_infer.kernels.fen.parse_fen`'s ``code`` at ``offset``.

    For an ASCII ``fen`` (:func:`raise_row_error` quotes python-chess for the others), the
    0-based byte ``offset`` is also a character offset; messages give it as the 1-based
    column, as editors and the EPD operation messages count.
    """
    rest = fen[offset:]
    details = {
        "char": rest[:1] or "end of field",
        "rank": 8 - fen[:offset].count("/"),
        "field": (rest.split() or [""])[0][:QUOTE_LIMIT],  # the whole FEN is quoted (cut) after it
    }
    return f"{_FEN_PROBLEMS[code].format(**details)} at column {offset + 1} of {quote(fen)}"


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
        buf, offsets = fen_buffer(positions)  # type: ignore[arg-type]
        fen_codes = np.empty(n, np.int32)
        fen_offsets = np.empty(n, np.int64)
        with PARALLEL_LOCK, numba.parallel_chunksize(1):
            KB.evaluate_fens(buf, offsets, *net_arrays, MAX_PIECES, scratch_len, n_chunks(), values, fen_codes,
                             fen_offsets, codes)
        refused = fen_codes != 0
        if refused.any():
            reread_refused_fens(positions, fen_codes, values, codes, net_arrays, scratch_len)  # type: ignore[arg-type]
        fields = field_counts(buf, offsets)
        for i in np.flatnonzero(refused & (fen_codes == 0)).tolist():  # read by python-chess: Unicode white space
            fields[i] = len(positions[i].split())  # type: ignore[union-attr]
        fen_codes[(fen_codes == 0) & ((fields < 4) | (fields == 5))] = FEN_MISSING_FIELD
    else:
        evaluate_boards(positions, net_arrays, scratch_len, values, codes)  # type: ignore[arg-type]
    bad = np.flatnonzero(codes if fen_codes is None else codes | fen_codes)
    if bad.size:
        raise_row_error(positions, int(bad[0]), fen_codes, fen_offsets, codes)
    return values


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
        KB.evaluate_batch(bitboards, stm, *net_arrays, MAX_PIECES, scratch_len, n_chunks(), values, codes)


def parse_fen_buffer(buf: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parse the FENs in ``buf`` (layout of :func:`fen_buffer`) on all cores, raising nothing.

    Returns ``bitboards`` int64[n, 8] (zeros where a row does not parse), ``stm`` uint8[n],
    ``fen_codes`` int32[n] (``kernels.fen.FEN_*``, 0 = parsed) and ``fen_offsets`` int64[n]
    (offset of the problem within the row, -1 if none; :func:`fen_problem` words it).
    """
    n = offsets.shape[0] - 1
    bitboards, stm = np.empty((n, 8), np.int64), np.empty(n, np.uint8)
    fen_codes, fen_offsets = np.empty(n, np.int32), np.empty(n, np.int64)
    with PARALLEL_LOCK:
        KF.parse_fens(buf, offsets, bitboards, stm, fen_codes, fen_offsets)
    return bitboards, stm, fen_codes, fen_offsets


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

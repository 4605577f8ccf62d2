"""Stockfish training data: ``.binpack``, ``.bin`` and ``.plain`` files read and written exactly.

Three formats carry the same record (position, move played, score, game ply, game result):

* ``.binpack``: a sequence of independent blocks (``BINP``, uint32 little-endian size, payload
  of at most 100 MiB); a block holds chains, each a 32-byte first entry (packed position, move,
  score, ply and result, rule-50 counter; big-endian), a uint16 count of the plies that follow and
  a bit stream giving each following ply's move (piece index, move index) and score (difference
  from the negated previous score, zig-zag, 4-bit variable-length groups).  The tools' writer
  starts a chain whenever a row does not continue the previous one and closes a block before a
  chain once the block holds at least 1 MiB, so blocks decode in parallel and
  the output is deterministic;
* ``.bin``: 40-byte nodchip ``PackedSfenValue`` records (Huffman-coded board, score, move, game
  ply, result, padding 0xFF);
* ``.plain``: text records ``fen ...``, ``move ...`` (UCI), ``score``, ``ply``, ``result``, ``e``.

Reading gives :class:`TrainingData` (columns, see :mod:`nnue_infer.kernels.data.binpack`); writing
takes it.  Output is byte-identical to Stockfish's ``tools`` branch (``convert`` in
``src/tools/convert.cpp``, format rules in ``src/extra/nnue_data_binpack_format.h``; checked
against files it wrote, see ``tests/test_training_data.py``).  Inputs may be gzip or Zstandard
compressed (detected from the content) and ``-`` is standard input / output.  Damaged input
raises :class:`~nnue_infer.errors.TrainingDataError` naming the file and the byte offset (of the
decompressed data) where the problem is.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import BinaryIO, ClassVar

import numpy as np

from ..errors import InputError, TrainingDataError
from ..inputs import STDIN, input_label, open_input, replacing, standard_stream
from ..kernels.data import binpack as KB
from ..kernels.chess.attacks import PAWN_ATTACKS
from ..kernels.chess.bitboard import BB_BLACK, BB_KINGS, BB_PAWNS, BB_ROOKS, BB_WHITE
from ..kernels.threads import PARALLEL_LOCK
from .parquet import _pa

#: File kinds by extension (a trailing ``.gz`` / ``.zst`` names the compression).
KINDS = ("binpack", "bin", "plain", "parquet")
#: Bytes of ``.binpack`` blocks decoded together (blocks of one group decode in parallel): two of the
#: tools' 1 MiB blocks, about 800,000 rows (70 MB of columns), so that a conversion's memory stays
#: small whatever the file's size.
GROUP_BYTES = 1 << 20
#: Rows encoded as ``.plain`` text at a time (the text takes up to :data:`KB.PLAIN_SLOT` bytes a row
#: before it is packed: 12 MB).
PLAIN_ROWS = 1 << 16
#: Offset of the result (game_result, int8) in a ``.bin`` record.
BIN_RESULT_BYTE = 38
#: Largest ``ply`` of a ``.binpack`` chain's first row (14 bits: the top 2 of its field hold the result).
BINPACK_HEAD_PLY = (1 << 14) - 1
#: Largest ``fullmove`` the formats keep: each holds the game ply ``2 * (fullmove - 1) + stm`` in
#: 16 bits (the tools' ``Position::set``), so 0 and 32,769 .. 65,535 read back as other numbers.
MAX_FULLMOVE = KB.MAX_FULLMOVE
#: Largest ``rule50`` a ``.bin`` record holds (7 bits).
BIN_RULE50 = (1 << 7) - 1
#: Bytes of ``.plain`` / ``.bin`` read at a time.
READ_BYTES = 16 << 20
#: Longest ``.plain`` record accepted (a record is about 150 bytes): past it the reader stops
#: rather than keep growing an unfinished record (a binary file, no line ``e``).
MAX_PLAIN_RECORD = 1 << 20


class KindError(ValueError):
    """The training-data kind cannot be told from a file name (or standard output's), or is not
    one of :data:`KINDS`; the message says which and how to name the kind."""


@dataclass(frozen=True, eq=False)
class TrainingData:
    """Training positions as columns (``n`` rows; arrays are C-contiguous).

    Attributes
    ----------
    bitboards : numpy.ndarray
        int64[n, 8]: pawns, knights, bishops, rooks, queens, kings, White's pieces, Black's
        pieces (a1 = bit 0), the layout :func:`nnue_infer.batch.evaluate_bitboards` reads.
    stm : numpy.ndarray
        uint8[n], side to move (0 White, 1 Black).
    castling : numpy.ndarray
        uint8[n], castling rights (1 White O-O, 2 White O-O-O, 4 Black O-O, 8 Black O-O-O).
    ep : numpy.ndarray
        int8[n], en passant square (a1 = 0), -1 when none or when no capture is possible.
    rule50 : numpy.ndarray
        uint8[n], half-move clock (the tools keep 8 bits).
    fullmove : numpy.ndarray
        uint16[n], the FEN's full-move number.
    move : numpy.ndarray
        uint16[n], the move played, in the tools' ``CompressedMove`` layout (see
        :mod:`nnue_infer.kernels.data.binpack`); :meth:`uci` gives text.
    score : numpy.ndarray
        int16[n], score in Stockfish's internal units from the side to move.
    ply : numpy.ndarray
        uint16[n], game ply.
    result : numpy.ndarray
        int16[n], game result from the side to move (1 win, 0 draw, -1 loss).
    chain : numpy.ndarray
        int64[n], chain (game segment) number from the start of the file: a row continues the
        previous one's game exactly when it has the same chain number.

    Raises
    ------
    ValueError
        On construction, a column that is not of its dtype and shape (all ``n`` rows), or the
        first row holding a value the formats cannot (``stm`` not 0 / 1, ``castling`` over 15,
        ``ep`` neither -1 nor a square of the side to move's en passant rank, ``result`` outside
        -1 .. 1, ``fullmove`` outside 1 .. :data:`MAX_FULLMOVE`, a ``move`` other than 0 from a
        square to itself or with promotion bits on another move type, bitboards whose pieces or
        colours overlap, differ, or lack one king per side) or a position that a writer would
        write and a reader refuse or change (a pawn on rank 1 or 8, the side not to move in
        check, a castling right without its king and rook on their start squares, an ``ep``
        square no legal capture uses; see :func:`_position_problem`): the message names the
        column, the row and the problem.  Columns that are not C-contiguous are copied.
        (:meth:`empty`, slices and the readers' rows are not checked again.)
    """

    bitboards: np.ndarray
    stm: np.ndarray
    castling: np.ndarray
    ep: np.ndarray
    rule50: np.ndarray
    fullmove: np.ndarray
    move: np.ndarray
    score: np.ndarray
    ply: np.ndarray
    result: np.ndarray
    chain: np.ndarray

    DTYPES: ClassVar[dict[str, type]] = {"bitboards": np.int64, "stm": np.uint8, "castling": np.uint8, "ep": np.int8, "rule50": np.uint8,
              "fullmove": np.uint16, "move": np.uint16, "score": np.int16, "ply": np.uint16, "result": np.int16,
              "chain": np.int64}

    def __post_init__(self) -> None:
        n = None
        for name, dtype in self.DTYPES.items():
            column = np.asarray(getattr(self, name))
            if column.dtype != dtype:
                raise ValueError(f"TrainingData: column {name!r} holds {column.dtype}, expected "
                                 f"{np.dtype(dtype).name} (convert it with .astype)")
            if n is None:
                n = column.shape[0] if column.ndim else -1
            shape = (n, 8) if name == "bitboards" else (n,)
            if column.shape != shape:
                raise ValueError(f"TrainingData: column {name!r} has shape {column.shape}, expected {shape} "
                                 f"(every column has one entry per row; bitboards has {n} rows)")
            if not column.flags.c_contiguous:
                column = np.ascontiguousarray(column)
            object.__setattr__(self, name, column)
        found = _row_problem(self)
        if found is not None:
            name, i, problem, value = found
            raise ValueError(f"TrainingData: column {name!r} row {i}: {problem}: {value}")

    @classmethod
    def _trusted(cls, columns: dict[str, np.ndarray]) -> TrainingData:
        """A TrainingData of ``columns`` without the checks of construction: for columns known to
        be good (rows of checked data, a reader's decoded rows) or about to be filled."""
        data = object.__new__(cls)
        for name, column in columns.items():
            object.__setattr__(data, name, column)
        return data

    @classmethod
    def empty(cls, n: int = 0) -> TrainingData:
        """Uninitialised columns for ``n`` rows, unchecked: fill every row before use."""
        return cls._trusted({name: np.empty((n, 8) if name == "bitboards" else n, dtype)
                             for name, dtype in cls.DTYPES.items()})

    @classmethod
    def concat(cls, parts: Sequence[TrainingData]) -> TrainingData:
        """Rows of ``parts`` one after another (chain numbers as they are)."""
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls._trusted({f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})

    def __len__(self) -> int:
        return int(self.stm.shape[0])

    def rows_view(self, start: int, stop: int) -> TrainingData:
        """Rows ``start .. stop`` as views of these columns (no copy: writing to them writes here)."""
        return TrainingData._trusted({f.name: getattr(self, f.name)[start:stop] for f in fields(self)})

    def __getitem__(self, rows) -> TrainingData:
        """Rows ``rows`` (a slice, an index array or a boolean mask), copied to contiguous arrays."""
        return TrainingData._trusted({f.name: np.array(getattr(self, f.name)[rows], order="C") for f in fields(self)})

    def __repr__(self) -> str:
        return f"TrainingData({len(self)} positions, {len(np.unique(self.chain))} chains)"

    def equals(self, other: TrainingData, chains: bool = True) -> bool:
        """Whether every column (``chain`` too unless ``chains`` is False) is equal."""
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)
                   if chains or f.name != "chain")

    def fens(self) -> list[str]:
        """Each row's FEN as the tools write it (en passant square only when a capture is possible)."""
        n = len(self)
        out, lengths = np.empty(100 * n, np.uint8), np.empty(n, np.int64)
        with PARALLEL_LOCK:
            KB.write_fens(self.bitboards, self.stm, self.castling, self.ep, self.rule50, self.fullmove, out, lengths)
        return _slots_to_strings(out, 100, lengths)

    def uci(self) -> list[str]:
        """Each row's move in UCI as the tools write it (castling as ``e1g1``)."""
        n = len(self)
        out, lengths = np.empty(5 * n, np.uint8), np.empty(n, np.int64)
        with PARALLEL_LOCK:
            KB.write_ucis(self.stm, self.move, out, lengths)
        return _slots_to_strings(out, 5, lengths)

    def continuations(self) -> np.ndarray:
        """bool[n]: row ``i`` continues row ``i - 1``'s game by the tools' rule (results opposite,
        ply + 1, row ``i - 1``'s move leads to row ``i``'s position); row 0 is False."""
        cont = np.empty(len(self), np.bool_)
        with PARALLEL_LOCK:
            KB.continuations(self.bitboards, self.stm, self.castling, self.ep, self.rule50, self.move, self.ply,
                             self.result, cont)
        return cont

    def with_chains(self, first: int = 0) -> TrainingData:
        """A copy whose ``chain`` numbers come from :meth:`continuations`, starting at ``first``."""
        cont = self.continuations()
        KB.limit_chains(cont)
        chain = np.cumsum(~cont, dtype=np.int64) + (first - 1)
        return TrainingData._trusted({**{f.name: getattr(self, f.name) for f in fields(self)}, "chain": chain})

    def to_arrow(self):
        """A pyarrow Table: ``fen`` and ``move`` (strings, the tools' text), ``score`` int16,
        ``ply`` uint16, ``result`` int16, ``chain`` int64.  :func:`from_arrow` reads it back exactly."""
        import pyarrow as pa

        return pa.table({"fen": pa.array(self.fens(), pa.string()), "move": pa.array(self.uci(), pa.string()),
                         "score": self.score, "ply": self.ply, "result": self.result, "chain": self.chain})


def _first(checks) -> tuple[str, int, str] | None:
    """``(column, first bad row, problem)`` of the first check ``(column, bad rows mask, problem)``
    that finds a bad row, or None."""
    for name, bad, problem in checks:
        if bad.any():
            return name, int(np.flatnonzero(bad)[0]), problem
    return None


def _column_problem(data: TrainingData, bitboards: bool = True) -> tuple[str, int, str] | None:
    """The first value no format holds (each column alone; with ``bitboards``, also pieces and
    colours that overlap or differ and kings: the readers' rows have them right)."""
    found = _first((
        ("stm", data.stm > 1, "side to move not 0 (White) or 1 (Black)"),
        ("castling", data.castling > 15, "castling rights beyond the 4 bits"),
        ("ep", (data.ep != -1) & ((data.ep >> 3) != np.where(data.stm == 0, 5, 2)),
         "en passant square neither -1 nor on the side to move's en passant rank"),
        ("result", (data.result < -1) | (data.result > 1), "result outside -1 .. 1"),
        ("fullmove", (data.fullmove < 1) | (data.fullmove > MAX_FULLMOVE),
         f"full-move number outside 1 .. {MAX_FULLMOVE} (the formats keep the game ply in 16 bits)"),
        ("move", (data.move != 0) & ((data.move >> 8) & 63 == (data.move >> 2) & 63),
         "from-square equal to the to-square (only the null move 0 may be)"),
        ("move", (data.move & 3 != 0) & (data.move >> 14 != KB.PROMOTION),
         "promotion-piece bits set in a move that is not a promotion"),
    ))
    if found is not None or not bitboards:
        return found
    bb = data.bitboards.view(np.uint64)
    pieces = bb[:, 0] | bb[:, 1] | bb[:, 2] | bb[:, 3] | bb[:, 4] | bb[:, 5]
    piece_count = np.bitwise_count(bb[:, :6]).sum(axis=1, dtype=np.int64)
    white, black = bb[:, BB_WHITE], bb[:, BB_BLACK]
    kings = bb[:, BB_KINGS]
    return _first((
        ("bitboards", (piece_count != np.bitwise_count(pieces)) | ((white & black) != 0)
         | ((white | black) != pieces), "pieces or colours overlap or differ"),
        ("bitboards", (np.bitwise_count(kings & white) != 1) | (np.bitwise_count(kings & black) != 1),
         "not exactly one king per side"),
    ))


def _row_problem(data: TrainingData, bitboards: bool = True) -> tuple[str, int, str, object] | None:
    """``(column, row, problem, value)`` of the first row :func:`_column_problem` (passed
    ``bitboards``) or :func:`_position_problem` finds (value: the row's FEN for a position, with
    its column's value unless that column is ``bitboards``), or None when every row can be
    written and read back."""
    found = _column_problem(data, bitboards)
    if found is not None:
        name, i, problem = found
        return name, i, problem, data.bitboards[i].tolist() if name == "bitboards" else int(getattr(data, name)[i])
    found = _position_problem(data)
    if found is None:
        return None
    name, i, problem = found
    fen = data[i:i + 1].fens()[0]
    return name, i, problem, fen if name == "bitboards" else f"{int(getattr(data, name)[i])} ({fen})"


#: Castling-right bits with the squares of their king and rook.
_CASTLING_SQUARES = ((KB.WHITE_OO, 4, 7), (KB.WHITE_OOO, 4, 0), (KB.BLACK_OO, 60, 63), (KB.BLACK_OOO, 60, 56))


def _position_problem(data: TrainingData) -> tuple[str, int, str] | None:
    """The first row whose position the ``.plain`` reader refuses or a writer changes (columns
    already valid alone): a pawn on rank 1 or 8, the side not to move in check (the tools'
    ``Position::trySet`` refuses both), a castling right without its king and rook on their start
    squares (a ``.binpack`` marks rights on the rooks; ``Position::doMove`` clears a right when
    either moves), an en passant square no capture can use (every format keeps it only when a
    capture is possible: the tools' ``Position::isEpPossible``)."""
    bb = data.bitboards.view(np.uint64)
    pawns, rooks, kings = bb[:, BB_PAWNS], bb[:, BB_ROOKS], bb[:, BB_KINGS]
    white, black = bb[:, BB_WHITE], bb[:, BB_BLACK]
    found = _first((("bitboards", pawns & np.uint64(0xFF000000000000FF) != 0, "pawn on the first or last rank"),))
    if found is not None:
        return found
    n = len(data)
    not_to_move_in_check, _ = np.empty(n, np.bool_), np.empty(n, np.bool_)
    with PARALLEL_LOCK:
        KB.row_flags(data.bitboards, data.stm ^ np.uint8(1), data.move, not_to_move_in_check, _)
    castling_bad = np.zeros(n, np.bool_)
    rights = np.flatnonzero(data.castling)  # (most rows have none: the rest is checked on these alone)
    if rights.size:
        castling, kings_r, rooks_r = data.castling[rights], kings[rights], rooks[rights]
        white_r, black_r = white[rights], black[rights]
        bad = np.zeros(rights.size, np.bool_)
        for bit, king, rook in _CASTLING_SQUARES:
            colour = white_r if king == 4 else black_r
            bad |= ((castling & bit) != 0) & ((kings_r & colour & np.uint64(1 << king) == 0)
                                              | (rooks_r & colour & np.uint64(1 << rook) == 0))
        castling_bad[rights] = bad
    found = _first((
        ("bitboards", not_to_move_in_check, "the side not to move is in check"),
        ("castling", castling_bad, "castling right without the king and that rook on their start squares"),
    ))
    if found is not None:
        return found
    rows = np.flatnonzero(data.ep != -1)
    if rows.size:
        ep, stm = data.ep[rows].astype(np.int64), data.stm[rows].astype(np.int64)
        fwd = np.where(stm == 0, 8, -8)
        ours = np.where(stm == 0, white[rows], black[rows])
        theirs = np.where(stm == 0, black[rows], white[rows])
        occupied = white[rows] | black[rows]
        one = np.uint64(1)
        moved = (pawns[rows] & theirs) >> (ep - fwd).astype(np.uint64) & one  # the pawn that just moved
        empty = ~(occupied >> ep.astype(np.uint64) | occupied >> (ep + fwd).astype(np.uint64)) & one
        attackers = PAWN_ATTACKS.view(np.uint64)[1 - stm, ep] & pawns[rows] & ours
        no_pawn = (moved == 0) | (empty == 0)
        bad = no_pawn | (attackers == 0)
        for k in np.flatnonzero(~bad).tolist():  # a pawn can capture: without leaving its king in check?
            bad[k] = not KB.ep_possible(data.bitboards[rows[k]], int(ep[k]), int(stm[k]))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            return "ep", int(rows[k]), ("en passant square without the pawn that just moved past it (or not "
                                        "empty, or its start square not empty)" if no_pawn[k] else
                                        "en passant square no pawn of the side to move can legally capture on "
                                        "(every format keeps it only then)")
    return None


def _slots_to_strings(out: np.ndarray, width: int, lengths: np.ndarray) -> list[str]:
    n = lengths.shape[0]
    if n == 0:
        return []
    starts = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    packed = np.empty(int(lengths.sum()) + n, np.uint8)
    packed[starts + lengths] = 10
    with PARALLEL_LOCK:
        KB.compact_slots(out, width, lengths, starts, packed)
    return packed.tobytes().decode("ascii").split("\n")[:-1]


def kind_of(path: str | os.PathLike[str]) -> str:
    """The file kind (``binpack``, ``bin``, ``plain``, ``parquet``) from ``path``'s extension,
    ignoring a trailing ``.gz`` or ``.zst``.

    Raises
    ------
    KindError
        The extension is none of these (the message lists them).
    """
    name = os.fspath(path).lower()
    for suffix in (".gz", ".zst", ".zstd"):
        name = name.removesuffix(suffix)
    ext = os.path.splitext(name)[1].lstrip(".")
    if ext not in KINDS:
        raise KindError(f"{input_label(path)}: cannot tell the training-data kind from the extension "
                         f"{ext or '(none)'!r}; use one of .binpack, .bin, .plain, .parquet, or name the kind "
                         "(--from / --to on the command line, kind= in Python)")
    return ext


def _error(label: str, offset: int, problem: str, compressed: bool = False) -> TrainingDataError:
    where = f"byte {offset}" + (" of the decompressed data" if compressed else "")
    return TrainingDataError(f"{label}: {where}: {problem}")


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    data = stream.read(n)
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = stream.read(n - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class RowOrigins:
    """Where the rows of one chunk of :func:`iter_chunks` came from in their file.

    ``.plain`` rows are placed by the line and byte offset of their record, ``.bin`` rows by their
    record, ``.binpack`` and ``.parquet`` rows by their row number from the start of the file.
    """

    def __init__(self, label: str, first_row: int, *, record_bytes: int = 0, text: bytes | None = None,
                 offsets: np.ndarray | None = None, base: int = 0, lines_before: int = 0,
                 compressed: bool = False) -> None:
        self.label, self.first_row, self._record_bytes = label, first_row, record_bytes
        self._text, self._offsets, self._base, self._lines_before = text, offsets, base, lines_before
        self._compressed = compressed

    def describe(self, i: int) -> str:
        """Where row ``i`` of the chunk is, as messages say it: ``line 7 (byte 66)``, ``record 3 (byte 120)``
        or ``row 12`` (rows and records count from 0, lines from 1; bytes of the decompressed data for
        compressed input)."""
        of = " of the decompressed data" if self._compressed else ""
        if self._text is not None and self._offsets is not None:
            at = int(self._offsets[i])
            line = self._lines_before + self._text.count(b"\n", 0, at) + 1
            return f"line {line} (byte {self._base + at}{of})"
        row = self.first_row + i
        if self._record_bytes:
            return f"record {row} (byte {row * self._record_bytes}{of})"
        return f"row {row}"


def iter_chunks(source: str | os.PathLike[str], kind: str | None = None, *,
                chunk_bytes: int | None = None, with_origins: bool = False) -> Iterator[TrainingData]:
    """Read a training-data file in chunks of rows.

    Parameters
    ----------
    source : str or os.PathLike
        A path (gzip / Zstandard content is decompressed) or ``"-"`` for standard input.
    kind : str, optional
        ``"binpack"``, ``"bin"``, ``"plain"`` or ``"parquet"``; default from the extension
        (:func:`kind_of`), required for ``-``.
    chunk_bytes : int, optional
        Input bytes per chunk (default :data:`GROUP_BYTES` for ``.binpack``, whose blocks of one
        chunk decode in parallel, :data:`READ_BYTES` otherwise).
    with_origins : bool
        Yield ``(rows, origins)`` pairs: :class:`RowOrigins` tells where in the file each row came
        from (for messages about a row found bad later, as by a writer).

    Yields
    ------
    TrainingData
        Consecutive rows; ``chain`` numbers count from the start of the file.

    Raises
    ------
    TrainingDataError
        Damaged or truncated data (message: file, byte offset, problem), corrupt or truncated gzip /
        Zstandard data included (the compressed byte offset; raised after the chunks decoded before it,
        or instead of the problem those bytes' end made).
    OSError
        The source cannot be opened.
    ValueError
        ``chunk_bytes`` is not a positive integer.
    """
    if chunk_bytes is not None and (isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, (int, np.integer))
                                    or chunk_bytes <= 0):
        raise ValueError(f"chunk_bytes must be a positive integer (bytes per chunk), got {chunk_bytes!r}")
    kind = kind or kind_of(source)
    if kind == "parquet":
        _pa("Parquet training data")
        for data, origins in _iter_parquet(source):
            yield (data, origins) if with_origins else data
        return
    reader = {"binpack": _iter_binpack, "bin": _iter_bin, "plain": _iter_plain}.get(kind)
    if reader is None:
        raise KindError(f"unknown training-data kind {kind!r}; use one of {', '.join(KINDS)}")
    try:
        with open_input(source, text=False) as inp:
            try:
                for data, origins in reader(inp.binary, input_label(source), inp.compression is not None, chunk_bytes):
                    yield (data, origins) if with_origins else data
            except TrainingDataError as exc:  # the data ended early (where the compression is damaged): say why
                if inp.damage is None:
                    raise
                raise inp.damage from exc
    except InputError as exc:  # damaged gzip / zstd data: damaged training data like any other
        raise TrainingDataError(str(exc).removesuffix(_ROWS_READ)) from exc


#: How :class:`~nnue_infer.errors.InputError` ends (the rows before the damage were read: true of a reader of
#: lines as they come, not of training data read and written whole).
_ROWS_READ = "; the rows before it were read"


def read(source: str | os.PathLike[str], kind: str | None = None) -> TrainingData:
    """Every row of a training-data file (see :func:`iter_chunks` for the arguments and errors)."""
    return TrainingData.concat(list(iter_chunks(source, kind)))


def _decode_group(buf: np.ndarray, starts: list[int], ends: list[int], bases: list[int], label: str,
                  compressed: bool, first_chain: int) -> tuple[list[TrainingData], int]:
    """The rows of the blocks ``buf[starts[b]:ends[b]]`` decoded in parallel: one part per block, views of
    one set of columns, and the next chain number."""
    nb = len(starts)
    s, e = np.array(starts, np.int64), np.array(ends, np.int64)
    capacity = (e - s) + 64  # rows: real data takes 2-3 bytes a position, so this rarely runs short
    while True:
        row0 = np.zeros(nb, np.int64)
        np.cumsum(capacity[:-1], out=row0[1:])
        out = TrainingData.empty(int(capacity.sum()))
        rows, chains = np.empty(nb, np.int64), np.empty(nb, np.int64)
        problems, offsets = np.empty(nb, np.int64), np.empty(nb, np.int64)
        with PARALLEL_LOCK:
            KB.decode_blocks(buf, s, e, row0, capacity, out.bitboards, out.stm, out.castling, out.ep, out.rule50,
                             out.fullmove, out.move, out.score, out.ply, out.result, out.chain, rows, chains,
                             problems, offsets)
        short = problems == -1
        if not short.any():
            break
        bound = (e - s) * 8 // 5 + 64  # a ply takes at least 5 bits, a chain head 34 bytes
        over = np.flatnonzero(short & (capacity >= bound))
        if over.size:  # the chain's declared ply count cannot fit in the rest of its block
            b = int(over[0])
            at = int(offsets[b]) + KB.CHAIN_HEAD_BYTES - 2  # the ply count field
            plies = (int(buf[at]) << 8) | int(buf[at + 1])
            raise _error(label, bases[b] + at - starts[b], f"truncated: the chain declares {plies} plies, more than "
                         f"the {ends[b] - at - 2} bytes left in its block can hold", compressed)
        capacity[short] = bound[short]
    for b in range(nb):
        if problems[b]:
            raise _error(label, bases[b] + int(offsets[b]) - starts[b], KB.PROBLEMS[problems[b]], compressed)
    parts = []
    chain = first_chain
    for b in range(nb):
        part = out.rows_view(int(row0[b]), int(row0[b] + rows[b]))
        outside = np.flatnonzero((part.result < -1) | (part.result > 1))
        if outside.size:  # the 2 result bits hold 3 (-2); a chain's first row is the first bad one
            at = _chain_offset(buf, starts[b], ends[b], int(outside[0])) + KB.ENTRY_BYTES - 4
            raise _error(label, bases[b] + at - starts[b], f"result {int(part.result[outside[0]])} outside -1 .. 1 "
                         "(ply and result field)", compressed)
        part.chain[:] += chain
        chain += int(chains[b])
        parts.append(part)
    return parts, chain


def _chain_offset(buf: np.ndarray, start: int, end: int, row: int) -> int:
    """Offset in ``buf`` of the chain whose first row is row ``row`` of the block ``buf[start:end]``
    (the block decoded again, stopping there: its rows would pass ``row``)."""
    one = np.array([0], np.int64)
    out = TrainingData.empty(row)
    rows, chains, problems, offsets = (np.empty(1, np.int64) for _ in range(4))
    with PARALLEL_LOCK:
        KB.decode_blocks(buf, one + start, one + end, one * 0, one * 0 + row, out.bitboards, out.stm, out.castling,
                         out.ep, out.rule50, out.fullmove, out.move, out.score, out.ply, out.result, out.chain, rows,
                         chains, problems, offsets)
    assert problems[0] == -1, "the block decoded before"
    return int(offsets[0])


def _iter_binpack(stream: BinaryIO, label: str, compressed: bool, chunk_bytes: int | None,
                  offset: int = 0, stop: int | None = None) -> Iterator[tuple[TrainingData, RowOrigins]]:
    target = chunk_bytes or GROUP_BYTES
    chain = 0
    rows = 0
    while stop is None or offset < stop:
        payloads, bases = [], []
        size = 0
        while size < target and (stop is None or offset < stop):
            header = _read_exact(stream, 8)
            if not header:
                break
            if len(header) < 8 or header[:4] != b"BINP":
                what = "truncated block header" if len(header) < 8 else f"block magic {header[:4]!r}, expected b'BINP'"
                raise _error(label, offset, what, compressed)
            n = int.from_bytes(header[4:], "little")
            if n > KB.BLOCK_LIMIT:
                raise _error(label, offset + 4, f"block size {n} over the limit {KB.BLOCK_LIMIT}", compressed)
            payload = _read_exact(stream, n)
            if len(payload) < n:
                raise _error(label, offset + 8 + len(payload),
                             f"truncated block: {len(payload)} of its {n} bytes", compressed)
            payloads.append(payload)
            bases.append(offset + 8)
            offset += 8 + n
            size += n
        if not payloads:
            return
        buf = np.frombuffer(b"".join(payloads), np.uint8).copy()
        ends = np.cumsum([len(p) for p in payloads]).tolist()
        starts = [0] + ends[:-1]
        parts, chain = _decode_group(buf, starts, ends, bases, label, compressed, chain)
        for data in _joined(parts, PLAIN_ROWS):
            yield data, RowOrigins(label, rows)
            rows += len(data)
        del parts, data, buf  # before the next group's columns are made


def _joined(parts: list[TrainingData], rows: int) -> Iterator[TrainingData]:
    """``parts`` in order, consecutive ones joined until they hold ``rows`` rows (a large part as it is, no
    copy: a group's rows are not copied again, the small blocks of some files are not a chunk each)."""
    pending: list[TrainingData] = []
    n = 0
    for part in parts:
        pending.append(part)
        n += len(part)
        if n >= rows:
            yield TrainingData.concat(pending)
            pending, n = [], 0
    if pending:
        yield TrainingData.concat(pending)


def block_ranges(path: str | os.PathLike[str], target_bytes: int = 64 << 20) -> list[tuple[int, int]]:
    """Split an uncompressed ``.binpack`` file into byte ranges of whole blocks of about
    ``target_bytes`` each (blocks are independent, so each range can be read on its own with
    :func:`read_range`), reading only the 8-byte block headers.

    Returns
    -------
    list of (start, stop)
        Byte offsets; together they cover the file.

    Raises
    ------
    TrainingDataError
        A block header that is not ``BINP`` or a block that runs past the end of the file.
    """
    label = input_label(path)
    size = os.path.getsize(path)
    ranges, start, offset = [], 0, 0
    with open(path, "rb") as f:
        while offset < size:
            f.seek(offset)
            header = f.read(8)
            if len(header) < 8 or header[:4] != b"BINP":
                raise _error(label, offset, "not a binpack block header")
            n = int.from_bytes(header[4:], "little")
            if offset + 8 + n > size:
                raise _error(label, offset + 8, f"truncated block: {size - offset - 8} of its {n} bytes")
            offset += 8 + n
            if offset - start >= target_bytes:
                ranges.append((start, offset))
                start = offset
    if start < size or not ranges:
        ranges.append((start, size))
    return ranges


def read_range(path: str | os.PathLike[str], start: int, stop: int) -> Iterator[TrainingData]:
    """The rows of the blocks in bytes ``start .. stop`` of an uncompressed ``.binpack`` (a range
    of :func:`block_ranges`), in chunks; ``chain`` counts from 0 at ``start``; error offsets are
    the file's."""
    with open(path, "rb") as f:
        f.seek(start)
        for data, _ in _iter_binpack(f, input_label(path), False, None, start, stop):
            yield data


def _iter_bin(stream: BinaryIO, label: str, compressed: bool, chunk_bytes: int | None) -> Iterator[tuple[TrainingData, RowOrigins]]:
    size = (chunk_bytes or READ_BYTES) // KB.BIN_RECORD * KB.BIN_RECORD or KB.BIN_RECORD
    offset = 0
    chain = 0
    previous: TrainingData | None = None
    while True:
        data = _read_exact(stream, size)
        if not data:
            return
        if len(data) % KB.BIN_RECORD:
            whole = len(data) // KB.BIN_RECORD * KB.BIN_RECORD
            raise _error(label, offset + whole, f"truncated record: {len(data) - whole} of {KB.BIN_RECORD} bytes",
                         compressed)
        buf = np.frombuffer(data, np.uint8).copy()
        n = len(data) // KB.BIN_RECORD
        out = TrainingData.empty(n)
        problems = np.empty(n, np.int64)
        with PARALLEL_LOCK:
            KB.decode_bin(buf, out.bitboards, out.stm, out.castling, out.ep, out.rule50, out.fullmove, out.move,
                          out.score, out.ply, out.result, problems)
        bad = np.flatnonzero(problems)
        if bad.size:
            i = int(bad[0])
            raise _error(label, offset + i * KB.BIN_RECORD, f"record {offset // KB.BIN_RECORD + i}: "
                         f"{KB.PROBLEMS[problems[i]]}", compressed)
        outside = np.flatnonzero((out.result < -1) | (out.result > 1))  # game_result is an int8
        if outside.size:
            i = int(outside[0])
            raise _error(label, offset + i * KB.BIN_RECORD + BIN_RESULT_BYTE, f"record {offset // KB.BIN_RECORD + i}: "
                         f"result {int(out.result[i])} outside -1 .. 1", compressed)
        out, chain, previous = number_chains(out, chain, previous)
        yield out, RowOrigins(label, offset // KB.BIN_RECORD, record_bytes=KB.BIN_RECORD, compressed=compressed)
        offset += len(data)


def number_chains(out: TrainingData, chain: int, previous: TrainingData | None
                  ) -> tuple[TrainingData, int, TrainingData | None]:
    """``out`` with chain numbers by the tools' continuation rule (:meth:`TrainingData.with_chains`),
    across chunk boundaries: feed consecutive chunks with the ``chain`` and ``previous`` this returned
    for the chunk before (0 and None for the first).

    Returns
    -------
    (TrainingData, int, TrainingData or None)
        ``out`` renumbered, the next free chain number and the last row seen so far.
    """
    joined = out if previous is None else TrainingData.concat([previous, out])
    numbered = joined.with_chains(chain - 1 if previous is not None else chain)
    if previous is not None:
        numbered = numbered[1:]
    last = int(numbered.chain[-1]) if len(numbered) else chain - 1
    return numbered, last + 1, numbered[len(numbered) - 1:] if len(numbered) else previous


def _iter_plain(stream: BinaryIO, label: str, compressed: bool,
                chunk_bytes: int | None) -> Iterator[tuple[TrainingData, RowOrigins]]:
    size = chunk_bytes or READ_BYTES
    carry = b""
    offset = 0  # of carry's first byte
    chain = 0
    previous: TrainingData | None = None
    at_end = False
    lines = 0  # before carry's first byte
    while not at_end:
        data = stream.read(size)
        if not data:
            if not carry.strip():
                return
            at_end, data = True, b"\n"  # a last line 'e' may lack its newline
        text = carry + data
        buf = np.frombuffer(text, np.uint8)
        starts = np.empty(len(text) // 2 + 1, np.int64)
        ends = np.empty_like(starts)
        n, tail = KB.find_records(buf, starts, ends)
        out, bad, at, problem = _parse_records(buf, starts[:n], ends[:n])
        if bad >= 0:
            raise _error(label, offset + at, problem, compressed)
        carry = text[tail:]
        if len(carry) > MAX_PLAIN_RECORD:
            raise _error(label, offset + tail, f"a record longer than {MAX_PLAIN_RECORD} bytes without a line 'e' "
                         "(not .plain text?)", compressed)
        if at_end and carry.strip():
            raise _error(label, offset + tail, "unterminated record: the text ends without a line 'e'", compressed)
        if n:
            out, chain, previous = number_chains(out, chain, previous)
            yield out, RowOrigins(label, 0, text=text, offsets=starts[:n].copy(), base=offset, lines_before=lines,
                                  compressed=compressed)
            lines += text.count(b"\n", 0, tail)
        offset += tail


def _parse_records(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[TrainingData, int, int, str]:
    """Rows of the ``.plain`` records ``buf[starts[i]:ends[i]]``, and the first bad record:
    ``(rows, index, byte offset, problem)`` (index -1 when all parse)."""
    n = starts.shape[0]
    out = TrainingData.empty(n)
    problems, offsets = np.empty(n, np.int64), np.empty(n, np.int64)
    with PARALLEL_LOCK:
        KB.parse_plain(buf, starts, ends, out.bitboards, out.stm, out.castling, out.ep, out.rule50, out.fullmove,
                       out.move, out.score, out.ply, out.result, problems, offsets)
    out.chain[:] = 0
    bad = np.flatnonzero(problems)
    if not bad.size:
        return out, -1, -1, ""
    i = int(bad[0])
    at = int(offsets[i])
    line = buf[at: at + 80].tobytes().split(b"\n")[0].decode("utf-8", "replace")
    return out, i, at, f"{KB.PROBLEMS[problems[i]]} (at {line!r})"


#: Errors opening a file that stay OSErrors (other OSErrors from pyarrow mean damaged data).
_OPEN_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError)


def _iter_parquet(source: str | os.PathLike[str]) -> Iterator[tuple[TrainingData, RowOrigins]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    label = input_label(source)
    path = io.BytesIO(standard_stream("stdin").read()) if os.fspath(source) == STDIN else source  # Parquet needs seeking
    # pyarrow's errors on damaged data derive from ArrowException (ArrowInvalid, ArrowNotImplementedError,
    # ...); a bad compressed page is an OSError, a column name that is not UTF-8 a UnicodeDecodeError
    damage = (pa.ArrowException, OSError, UnicodeDecodeError)
    try:
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        batches = pf.iter_batches(batch_size=1 << 18)
    except damage as exc:
        if isinstance(exc, _OPEN_ERRORS):
            raise
        raise TrainingDataError(f"{label}: not a Parquet file or a damaged one ({type(exc).__name__}: {exc})") from exc
    missing = {"fen", "move", "score", "ply", "result"} - set(names)
    if missing:
        raise TrainingDataError(f"{label}: Parquet file lacks the column(s) {', '.join(sorted(missing))}")
    row = 0
    while True:
        try:
            batch = next(batches, None)
        except damage as exc:
            raise TrainingDataError(f"{label}: damaged Parquet data after row {row} "
                                    f"({type(exc).__name__}: {exc})") from exc
        if batch is None:
            return
        yield from_arrow(batch, label=label, first_row=row), RowOrigins(label, row)
        row += batch.num_rows


def from_arrow(table, *, label: str = "<arrow>", first_row: int = 0) -> TrainingData:
    """Rows from a pyarrow Table or RecordBatch with the columns of :meth:`TrainingData.to_arrow`
    (``chain`` optional: recomputed by the continuation rule when absent).

    Raises
    ------
    TrainingDataError
        A FEN or move the tools' parser refuses, holding a line break or not UTF-8, a null, a
        ``score`` / ``ply`` / ``result`` / ``chain`` column that is not integers or a value outside
        its column's range (int16, uint16, -1 .. 1, int64): the message names the row and the value.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    names = ("fen", "move", "score", "ply", "result") + (("chain",) if "chain" in table.schema.names else ())
    cols = {name: table.column(name) for name in names}
    for name, col in cols.items():
        if col.null_count:
            raise TrainingDataError(f"{label}: column {name!r} has {col.null_count} null value(s)")
        text = name in ("fen", "move")
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) if text \
                else not pa.types.is_integer(col.type):
            raise TrainingDataError(f"{label}: column {name!r} holds {col.type}, not "
                                    f"{'strings' if text else 'integers'}")
        if text:
            _check_utf8(col, name, label, first_row)
            # a line break would end the record early and shift every later row
            broken = np.flatnonzero(np.asarray(pc.match_substring_regex(col, "[\r\n]"), np.bool_))
            if broken.size:
                i = int(broken[0])
                raise TrainingDataError(f"{label}: row {first_row + i}: {name} holds a line break: "
                                        f"{col[i].as_py()[:80]!r}")
    ints = {}
    for name, dtype in (("score", np.int16), ("ply", np.uint16), ("result", np.int16), ("chain", np.int64)):
        if name in cols:
            values = np.asarray(cols[name])
            lo, hi = (-1, 1) if name == "result" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
            outside = np.flatnonzero((values < lo) | (values > hi))
            if outside.size:
                i = int(outside[0])
                raise TrainingDataError(f"{label}: row {first_row + i}: {name} {values[i]} outside {lo} .. {hi}")
            ints[name] = values.astype(dtype)
    fens, moves = cols["fen"].to_pylist(), cols["move"].to_pylist()
    text = "".join(f"fen {f}\nmove {m}\nscore 0\nply 0\nresult 0\ne\n" for f, m in zip(fens, moves)).encode()
    buf = np.frombuffer(text, np.uint8)
    starts = np.empty(len(fens) + 1, np.int64)
    ends = np.empty_like(starts)
    n, _ = KB.find_records(buf, starts, ends)
    out, bad, _, problem = _parse_records(buf, starts[:n], ends[:n])
    if bad >= 0:
        raise TrainingDataError(f"{label}: row {first_row + bad}: {problem}")
    out.score[:], out.ply[:], out.result[:] = ints["score"], ints["ply"], ints["result"]
    if "chain" in ints:
        out.chain[:] = ints["chain"]
    else:
        out = out.with_chains()
    return out


def _check_utf8(col, name: str, label: str, first_row: int) -> None:
    """Raise :class:`TrainingDataError` naming the first row of the string column ``col`` that is
    not valid UTF-8 (pyarrow does not check a column it reads; Python's decoding would fail later)."""
    import pyarrow as pa

    row = 0
    for chunk in col.chunks if hasattr(col, "chunks") else [col]:
        try:
            chunk.validate(full=True)
        except pa.ArrowInvalid as invalid:
            for i, value in enumerate(chunk.cast(pa.large_binary() if pa.types.is_large_string(chunk.type)
                                                 else pa.binary()).to_pylist()):
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise TrainingDataError(f"{label}: row {first_row + row + i}: {name} is not UTF-8 text "
                                            f"({exc.reason} at byte {exc.start}): {value[:80]!r}") from None
            raise TrainingDataError(f"{label}: column {name!r} after row {first_row + row}: {invalid}") from invalid
        row += len(chunk)


def _unwritable(label: str, row: int, problem: str) -> TrainingDataError:
    """The error of a row that cannot be written: ``LABEL: row ROW: PROBLEM``, with ``row`` (the row's number among
    the rows written) and ``problem`` as attributes, so that a converter can name where the row came from
    (:meth:`RowOrigins.describe`)."""
    exc = TrainingDataError(f"{label}: row {row}: {problem}")
    exc.row, exc.problem = row, problem
    return exc


class TrainingDataWriter:
    """Write rows to a training-data file in the tools' exact layout, chunk by chunk.

    Parameters
    ----------
    dest : str or os.PathLike
        Output path, or ``"-"`` for standard output; a ``.gz`` / ``.zst`` suffix compresses.
    kind : str, optional
        As :func:`kind_of` (default from ``dest``'s extension; required for ``-``).

    Notes
    -----
    ``.binpack`` output follows the tools' ``CompressedTrainingDataEntryWriter``: a row starts a
    new chain unless it continues the previous row (:meth:`TrainingData.continuations`; a chain
    also ends after 65,535 plies, the most its ply count holds), and a block is closed before a
    chain once it holds 1 MiB.  Rows whose move the movetext cannot encode (not a pseudo-legal
    move of the side to move) raise :class:`TrainingDataError`; so does a position without one
    king per side for ``.bin``.  Use as a context manager: the last block is written on close.
    A file is written under a temporary name beside ``dest`` and renamed on a successful close;
    an error inside the ``with`` block (or :meth:`abort`) leaves ``dest`` as it was.  An existing
    ``dest`` that is not a regular file (a named pipe, a device) is written in place.  The rules are
    :func:`nnue_infer.inputs.replacing`'s: a replaced file keeps its permission bits (a 0600 file
    stays private), a read-only one is refused with ``PermissionError`` before anything is written,
    and two writers of one ``dest`` in one process write files of their own.
    """

    def __init__(self, dest: str | os.PathLike[str], kind: str | None = None) -> None:
        if kind is None and os.fspath(dest) == STDIN:
            raise KindError("<stdout>: standard output has no extension to tell the training-data kind; "
                             "pass the kind (binpack, bin, plain, parquet)")
        self.kind = kind or kind_of(dest)
        if self.kind not in KINDS:
            raise KindError(f"unknown training-data kind {self.kind!r}; use one of {', '.join(KINDS)}")
        if self.kind == "parquet":
            _pa("Parquet training data")  # before any file is made
        self.label = "<stdout>" if os.fspath(dest) == STDIN else os.fspath(dest)
        self._rows = 0
        self._open: TrainingData | None = None  # rows of the unfinished binpack chain
        self._block: list[bytes] = []
        self._block_size = 0
        self._parquet = None
        self._plain = _PlainEncoder()
        self._file: BinaryIO | None = None
        path = os.fspath(dest)
        self._path = None if path == STDIN else path
        # a FIFO or device (/dev/stdout, a named pipe) is written in place: renaming over it would replace it
        special = self._path is not None and os.path.exists(path) and not os.path.isfile(path)
        self._replacing = None if path == STDIN or special else replacing(path)
        self._tmp = None if self._replacing is None else self._replacing.__enter__()
        if self.kind != "parquet" or special:  # Parquet goes to the temporary file by name (pyarrow seeks in it)
            try:
                self._file = _open_output(self._tmp or path, path)
            except OSError as exc:  # name the output, not its temporary file
                self._release(False)
                raise OSError(exc.errno, exc.strerror or str(exc), self.label) from exc

    def _release(self, done: bool) -> None:
        """Rename the temporary file over the destination (``done``; with the old file's permission
        bits) or remove it."""
        cm, self._replacing, self._tmp = self._replacing, None, None
        if cm is not None:
            if done:
                cm.__exit__(None, None, None)
            else:
                cm.gen.close()  # replacing's clean-up: the temporary file is removed

    def write(self, data: TrainingData) -> None:
        """Append ``data``'s rows.

        Raises
        ------
        TrainingDataError
            A row the kind cannot hold (named by its row number and the output's name).
        OSError
            The output cannot be written; its ``filename`` is the output's name (``<stdout>``).
        """
        with _naming_output_errors(self.label):
            self._write(data)

    def _write(self, data: TrainingData) -> None:
        if len(data) == 0:
            return
        # rows a reader gave unchecked (a .bin or .binpack written elsewhere; their pieces are sound)
        found = _row_problem(data, bitboards=False)
        if found is not None:
            name, i, problem, value = found
            raise _unwritable(self.label, self._rows + i, f"column {name!r}: {problem}: {value}")
        if self.kind == "binpack":
            both = data.bitboards[:, BB_WHITE] | data.bitboards[:, BB_BLACK]
            occupied = np.bitwise_count(both.view(np.uint64))  # of the absolute value if signed
            crowded = np.flatnonzero(occupied > 32)
            if crowded.size:
                bad = int(crowded[0])
                raise _unwritable(self.label, self._rows + bad, f"{KB.PROBLEMS[KB.E_OCCUPANCY]}: "
                                                                   f"{data[bad: bad + 1].fens()[0]}")
            rows = data if self._open is None else TrainingData.concat([self._open, data])
            cont = rows.continuations()
            KB.limit_chains(cont)
            starts = np.flatnonzero(~cont)
            cut = int(starts[-1])
            self._encode_chains(rows[:cut], cont[:cut], self._rows - (0 if self._open is None else len(self._open)))
            self._open = rows[cut:]
            self._open_cont = cont[cut:]
        elif self.kind == "bin":
            self._file.write(encode_bin(data, self.label, self._rows))
        elif self.kind == "plain":
            for start in range(0, len(data), PLAIN_ROWS):  # a piece at a time: the text's memory stays small
                for piece in self._plain.encode(data.rows_view(start, min(start + PLAIN_ROWS, len(data)))):
                    self._file.write(piece)
        else:
            self._write_parquet(data)
        self._rows += len(data)

    def _encode_chains(self, rows: TrainingData, cont: np.ndarray, first_row: int) -> None:
        if len(rows) == 0:
            return
        high = np.flatnonzero(~cont & (rows.ply > BINPACK_HEAD_PLY))
        if high.size:
            i = int(high[0])
            raise _unwritable(self.label, first_row + i, f"ply {int(rows.ply[i])} does not fit a chain's first entry "
                                                         f"(at most {BINPACK_HEAD_PLY}; the .binpack field keeps 14 bits)")
        out = np.zeros(38 * len(rows) + 64, np.uint8)
        chain_ends = np.empty(len(rows), np.int64)
        size, chains, bad = KB.encode_chains(rows.bitboards, rows.stm, rows.castling, rows.ep, rows.rule50, rows.move,
                                             rows.score, rows.ply, rows.result, cont, out, chain_ends)
        if bad >= 0:
            fen, uci = rows[bad: bad + 1].fens()[0], rows[bad: bad + 1].uci()[0]
            raise _unwritable(self.label, first_row + bad, f"{KB.PROBLEMS[KB.E_UNENCODABLE]}: {uci} in {fen}")
        ends = chain_ends[:chains]
        cuts = np.empty(chains, np.int64)
        k = KB.block_cuts(ends, self._block_size, KB.BLOCK_TARGET, cuts)
        begin = 0
        for c in cuts[:k].tolist():
            stop = int(ends[c - 1]) if c > 0 else 0
            self._block.append(out[begin:stop].tobytes())
            self._block_size += stop - begin
            self._flush_block()
            begin = stop
        self._block.append(out[begin:size].tobytes())
        self._block_size += size - begin

    def _flush_block(self) -> None:
        if self._block_size:
            self._file.write(b"BINP" + self._block_size.to_bytes(4, "little"))
            for part in self._block:
                self._file.write(part)
        self._block, self._block_size = [], 0

    def _write_parquet(self, data: TrainingData) -> None:
        import pyarrow.parquet as pq

        table = data.to_arrow()
        if self._parquet is None:
            sink = self._tmp or self._file or standard_stream("stdout")
            self._parquet = pq.ParquetWriter(sink, table.schema)
        self._parquet.write_table(table)

    def close(self) -> None:
        """Write what is pending (the last chain and block) and close the output; raises as :meth:`write`."""
        with _naming_output_errors(self.label):
            self._close()

    def _close(self) -> None:
        if self.kind == "binpack" and self._open is not None:
            self._encode_chains(self._open, self._open_cont, self._rows - len(self._open))
            self._open = None
            self._flush_block()
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        elif self.kind == "parquet" and self._rows == 0:
            self._write_parquet(TrainingData.empty())
            self._parquet.close()
            self._parquet = None
        self._close_file()
        self._release(True)

    def _close_file(self, discard: bool = False) -> None:
        """Close the output (standard output: flushed, left open); with ``discard`` (the rows are being
        dropped), errors flushing what was buffered are ignored: the error that stopped the writing is the one
        to report, and a second one from the same full disk, raised without the output's name, hid it."""
        file, self._file = self._file, None
        if file is None:
            return
        with contextlib.suppress(OSError) if discard else contextlib.nullcontext():
            if self._path is None:
                if not discard:
                    file.flush()
            else:
                file.close()

    def abort(self) -> None:
        """Stop without finishing: the temporary file is removed, ``dest`` is left as it was."""
        try:
            if self._parquet is not None:
                parquet, self._parquet = self._parquet, None
                with contextlib.suppress(Exception):  # (pyarrow's own errors too: the file is dropped)
                    parquet.close()
            self._close_file(discard=True)
        finally:
            self._release(False)

    def __enter__(self) -> TrainingDataWriter:  # noqa: PYI034 (final class)
        return self

    def __exit__(self, exc_type, *exc_info) -> None:
        if exc_type is not None:
            self.abort()
            return
        try:
            self.close()
        except BaseException:
            self.abort()
            raise


@contextlib.contextmanager
def _naming_output_errors(label: str) -> Iterator[None]:
    """An ``OSError`` raised while writing (a full disk, a closed pipe) carries no file name: give it
    the output's, so that a message names the file that failed rather than the input."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), label) from exc


class _OwningGzipFile(gzip.GzipFile):
    """A gzip writer over a file object that it closes with itself (``gzip.open`` stores the name of the
    file it opens in the header; this one stores the name it is given)."""

    def close(self) -> None:
        fileobj = self.fileobj
        try:
            super().close()
        finally:
            if fileobj is not None:
                fileobj.close()


def _open_output(path: str, name: str) -> BinaryIO:
    """Open ``path`` for writing (``-``: standard output), compressed by ``name``'s suffix."""
    if path == STDIN:
        return standard_stream("stdout")
    lower = name.lower()
    if lower.endswith(".gz"):
        raw = open(path, "wb")  # noqa: SIM115 (closed with the gzip stream)
        try:
            # the header names the destination without its .gz, as gzip does, not the temporary file: gunzip -N
            # restores that name
            return _OwningGzipFile(filename=os.path.basename(name)[:-3], mode="wb", fileobj=raw)
        except BaseException:
            raw.close()
            raise
    if lower.endswith((".zst", ".zstd")):
        import zstandard

        return zstandard.ZstdCompressor().stream_writer(open(path, "wb"), closefd=True)
    return open(path, "wb")


def write(data: TrainingData, dest: str | os.PathLike[str], kind: str | None = None) -> None:
    """Write ``data`` to ``dest`` (see :class:`TrainingDataWriter`)."""
    with TrainingDataWriter(dest, kind) as writer:
        writer.write(data)


def encode_plain(data: TrainingData) -> bytes:
    """``data`` as ``.plain`` text (the tools' ``emitPlainEntry``), as bytes."""
    return b"".join(piece.tobytes() for piece in _PlainEncoder().encode(data))


class _PlainEncoder:
    """Encodes rows as ``.plain`` text into a buffer kept from one call to the next (a conversion's pieces of
    :data:`PLAIN_ROWS` rows: a fresh buffer costs a page fault every 4 KiB), in :data:`RUNS` runs of rows
    written in parallel, each run's text one piece (no copy to pack the pieces together)."""

    #: Runs of rows a call writes (in parallel; one piece of text each).
    RUNS = 16

    def __init__(self) -> None:
        self._text = np.empty(0, np.uint8)

    def encode(self, data: TrainingData) -> list[np.ndarray]:
        """The uint8 pieces of ``data``'s text, in order: valid until the next call."""
        n = len(data)
        if self._text.shape[0] < KB.PLAIN_SLOT * n:
            self._text = np.empty(KB.PLAIN_SLOT * n, np.uint8)
        runs = np.linspace(0, n, min(self.RUNS, n) + 1).astype(np.int64)
        ends = np.empty(runs.shape[0] - 1, np.int64)
        with PARALLEL_LOCK:
            KB.write_plain_runs(data.bitboards, data.stm, data.castling, data.ep, data.rule50, data.fullmove,
                                data.move, data.score, data.ply, data.result, runs, self._text, ends)
        return [self._text[KB.PLAIN_SLOT * int(start): int(end)] for start, end in zip(runs[:-1], ends)]


def encode_bin(data: TrainingData, label: str = "<bin>", first_row: int = 0) -> bytes:
    """``data`` as 40-byte ``.bin`` records (nodchip ``PackedSfenValue``), as bytes.

    Raises
    ------
    TrainingDataError
        A row without one king per side, one whose board takes more than 256 bits or whose
        half-move clock is over 127 (7 bits).
    """
    n = len(data)
    high = np.flatnonzero(data.rule50 > BIN_RULE50)
    if high.size:
        i = int(high[0])
        raise _unwritable(label, first_row + i, f"half-move clock {int(data.rule50[i])} does not fit a .bin record "
                                                f"(at most {BIN_RULE50}; the tools keep 7 bits)")
    out, problems = np.zeros(KB.BIN_RECORD * n, np.uint8), np.empty(n, np.int64)
    with PARALLEL_LOCK:
        KB.encode_bin(data.bitboards, data.stm, data.castling, data.ep, data.rule50, data.fullmove, data.move,
                      data.score, data.ply, data.result, out, problems)
    bad = np.flatnonzero(problems)
    if bad.size:
        i = int(bad[0])
        raise _unwritable(label, first_row + i, f"{KB.PROBLEMS[problems[i]]}: {data[i:i + 1].fens()[0]}")
    return out.tobytes()


def flags(data: TrainingData) -> tuple[np.ndarray, np.ndarray]:
    """bool[n] arrays ``(in_check, capture)``: the side to move is in check; the move captures a
    piece standing on its to-square (the tools' ``isCapturingMove``: castling and en passant are
    not captures)."""
    in_check, capture = np.empty(len(data), np.bool_), np.empty(len(data), np.bool_)
    with PARALLEL_LOCK:
        KB.row_flags(data.bitboards, data.stm, data.move, in_check, capture)
    return in_check, capture


def select(data: TrainingData, *, skip_in_check: bool = False, skip_captures: bool = False, min_ply: int = 0,
           max_abs_score: int | None = None) -> np.ndarray:
    """bool[n] mask of the rows kept by the usual training filters (all off by default).

    Parameters
    ----------
    skip_in_check, skip_captures : bool
        Drop positions whose side to move is in check / whose move captures (see :func:`flags`).
    min_ply : int
        Drop positions with ``ply`` below this.
    max_abs_score : int, optional
        Drop positions with ``|score|`` above this (internal units).
    """
    keep = data.ply >= min_ply
    if skip_in_check or skip_captures:
        in_check, capture = flags(data)
        if skip_in_check:
            keep &= ~in_check
        if skip_captures:
            keep &= ~capture
    if max_abs_score is not None:
        keep &= np.abs(data.score.astype(np.int32)) <= max_abs_score
    return keep


def rescore(data: TrainingData, evaluator, *, blend: float = 1.0, label: str = "<data>",
            first_row: int = 0) -> TrainingData:
    """``data`` with each score replaced by ``evaluator``'s evaluation of the position.

    Parameters
    ----------
    data : TrainingData
        Rows to rescore.
    evaluator : nnue_infer.Evaluator
        Evaluates the bitboards on all cores (:meth:`~nnue_infer.Evaluator.evaluate_bitboards`,
        the values :func:`nnue_infer.evaluate_batch` gives: internal units, side to move).
    blend : float
        Weight of the new evaluation: the score becomes
        ``rint(blend * evaluation + (1 - blend) * old score)`` (1: the evaluation alone, exact).
        Results outside int16 are clamped to -32768 .. 32767.
    label, first_row : str, int
        How errors name the data and its first row.

    Raises
    ------
    TrainingDataError
        A position the network cannot evaluate (no king, more than 32 pieces, ...): names the row
        and the FEN.
    """
    from ..batch import position_problem  # (the evaluation's modules: loaded by the commands that evaluate)

    if not 0.0 <= blend <= 1.0:
        raise ValueError(f"blend must be between 0 and 1, got {blend}")
    values, codes = evaluator.evaluate_bitboards(data.bitboards, data.stm)
    bad = np.flatnonzero(codes)
    if bad.size:
        i = int(bad[0])
        raise TrainingDataError(f"{label}: row {first_row + i}: {position_problem(int(codes[i]))}: "
                                f"{data[i:i + 1].fens()[0]}")
    new = values.astype(np.float64) if blend != 1.0 else values.astype(np.int64)
    if blend != 1.0:
        new = np.rint(blend * new + (1.0 - blend) * data.score.astype(np.float64))
    score = np.clip(new, -32768, 32767).astype(np.int16)
    return TrainingData._trusted({**{f.name: getattr(data, f.name) for f in fields(data)}, "score": score})


#: Edges of :func:`summary`'s score histogram (internal units; the outer bins are open).
SCORE_BINS = (-32768, -2000, -1000, -500, -250, -100, -50, 0, 1, 51, 101, 251, 501, 1001, 2001, 32768)


class Summary:
    """Running counts for ``nnue-infer data info``: add chunks with :meth:`add`, read :meth:`as_dict`."""

    def __init__(self) -> None:
        self.positions = 0
        self.chains = 0
        self.results = np.zeros(3, np.int64)
        self.in_check = 0
        self.captures = 0
        self.histogram = np.zeros(len(SCORE_BINS) - 1, np.int64)
        self.ply_min: int | None = None
        self.ply_max: int | None = None
        self.score_sum = 0
        self._last_chain: int | None = None

    def add(self, data: TrainingData) -> None:
        """Count ``data``'s rows (chunks of one file in order)."""
        if len(data) == 0:
            return
        self.positions += len(data)
        starts = np.count_nonzero(np.diff(data.chain)) + (1 if data.chain[0] != self._last_chain else 0)
        self.chains += int(starts)
        self._last_chain = int(data.chain[-1])
        self.results += np.bincount(data.result.astype(np.int64) + 1, minlength=3)  # results are -1 .. 1
        in_check, capture = flags(data)
        self.in_check += int(in_check.sum())
        self.captures += int(capture.sum())
        self.histogram += np.histogram(data.score, bins=np.array(SCORE_BINS))[0]
        lo, hi = int(data.ply.min()), int(data.ply.max())
        self.ply_min = lo if self.ply_min is None else min(self.ply_min, lo)
        self.ply_max = hi if self.ply_max is None else max(self.ply_max, hi)
        self.score_sum += int(data.score.astype(np.int64).sum())

    def as_dict(self) -> dict:
        """The counts as plain Python values (JSON-ready)."""
        labels = [f"{SCORE_BINS[k]}..{SCORE_BINS[k + 1] - 1}" for k in range(len(SCORE_BINS) - 1)]
        return {"positions": self.positions, "chains": self.chains,
                "results": {"loss": int(self.results[0]), "draw": int(self.results[1]), "win": int(self.results[2])},
                "in_check": self.in_check, "captures": self.captures,
                "ply": {"min": self.ply_min, "max": self.ply_max},
                "score": {"mean": self.score_sum / self.positions if self.positions else None,
                          "histogram": dict(zip(labels, self.histogram.tolist()))}}


__all__ = ["KINDS", "KindError", "RowOrigins", "Summary", "TrainingData", "TrainingDataWriter", "block_ranges", "encode_bin",
           "encode_plain", "flags", "from_arrow", "iter_chunks", "kind_of", "number_chains", "read", "read_range",
           "rescore", "select", "write"]

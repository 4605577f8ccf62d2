"""Result tables and their text: columns of rows -> CSV or JSON lines, written in compiled code.

A *table* is an ordered mapping ``name -> column``; every column has one cell per row:

* integer NumPy arrays (any int dtype): numbers (JSON numbers, not strings);
* bool arrays: ``true`` / ``false`` (JSON booleans; CSV the same words, which pandas and
  DuckDB read as booleans);
* ``numpy.ma.MaskedArray`` of those: masked cells are null (CSV empty, JSON ``null``);
* :class:`TextColumn`: text cells as byte ranges of one UTF-8 buffer (build one with
  :meth:`TextColumn.from_strings`, :meth:`TextColumn.from_codes`, or point into a file's bytes
  without copying); cells with ``valid`` false are null.

:func:`encode` turns a table into bytes; :class:`TableWriter` writes tables one after another
(chunks of the same columns) to a binary stream.  No Python code runs per row: lengths are
summed and cells copied by :mod:`nnue_infer.kernels.data.text`, so writing costs well under a
microsecond per row.  Other output formats (e.g. Parquet) can take the same columns:
``TextColumn.starts`` / ``ends`` and ``buf`` are Arrow-style offsets into one buffer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Union

import numpy as np

from ..kernels.threads import PARALLEL_LOCK
from ..kernels.data import text as KT

#: Output formats of :func:`encode` and :class:`TableWriter`.
FORMATS = ("csv", "jsonl")


@dataclass(frozen=True)
class TextColumn:
    """``n`` text cells: cell ``i`` is ``buf[starts[i]:ends[i]]`` decoded as UTF-8.

    Attributes
    ----------
    buf : numpy.ndarray
        uint8[m], UTF-8 bytes the cells point into (shared, never modified).
    starts, ends : numpy.ndarray
        int64[n], byte offsets of each cell in ``buf`` (``ends[i] >= starts[i]``).
    valid : numpy.ndarray or None
        bool[n], false for a null cell; ``None`` when every cell is valid.
    """

    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    valid: np.ndarray | None = None

    @classmethod
    def from_strings(cls, strings: Sequence[str | None]) -> TextColumn:
        """A column of Python strings (``None`` = null), encoded once as one buffer."""
        n = len(strings)
        valid = None
        if any(s is None for s in strings):
            valid = np.array([s is not None for s in strings], bool)
            strings = [s or "" for s in strings]
        text = "".join(strings)  # type: ignore[arg-type]
        buf = np.frombuffer(bytearray(text, "utf-8", "surrogatepass"), np.uint8)
        lengths = np.fromiter(map(len, strings), np.int64, n)  # type: ignore[arg-type]
        if int(lengths.sum()) != buf.size:  # non-ASCII text: count bytes
            lengths = np.fromiter((len(s.encode("utf-8", "surrogatepass")) for s in strings), np.int64, n)  # type: ignore[union-attr]
        ends = np.cumsum(lengths)
        return cls(buf, ends - lengths, ends, valid)

    @classmethod
    def from_codes(cls, codes: np.ndarray, labels: Sequence[str]) -> TextColumn:
        """A categorical column: cell ``i`` is ``labels[codes[i]]`` (codes: ints in ``range(len(labels))``)."""
        encoded = [label.encode() for label in labels]
        buf = np.frombuffer(bytearray(b"".join(encoded)), np.uint8)  # writeable, as every other column's
        lengths = np.array([len(e) for e in encoded], np.int64)
        label_ends = np.cumsum(lengths)
        codes = np.asarray(codes, np.int64)
        return cls(buf, (label_ends - lengths)[codes], label_ends[codes])

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    def __getitem__(self, i: int) -> str | None:
        if self.valid is not None and not self.valid[i]:
            return None
        return bytes(self.buf[self.starts[i]:self.ends[i]]).decode("utf-8", "surrogateescape")

    def to_list(self) -> list[str | None]:
        """The cells as Python strings (``None`` for null cells)."""
        return [self[i] for i in range(len(self))]

    def take(self, rows: np.ndarray) -> TextColumn:
        """The cells at ``rows`` (int indices or a bool mask), sharing the buffer."""
        return TextColumn(self.buf, self.starts[rows], self.ends[rows], None if self.valid is None else self.valid[rows])


Column = Union[np.ndarray, TextColumn]
Table = Mapping[str, Column]


def table_length(table: Table) -> int:
    """Rows of ``table``; ``ValueError`` naming the column when the columns differ in length."""
    n = None
    for name, column in table.items():
        m = len(column)
        if n is None:
            n = m
        elif m != n:
            raise ValueError(f"column {name!r} has {m} rows, the columns before it {n}")
    return n or 0


def take(table: Table, rows: np.ndarray) -> dict[str, Column]:
    """The rows ``rows`` (indices or a bool mask) of every column."""
    return {name: column.take(rows) if isinstance(column, TextColumn) else column[rows]
            for name, column in table.items()}


_CONSTANTS = {
    # (cell prefix of the first column, of the others, row suffix, null cell)
    "csv": ("", ",", "\n", ""),
    "jsonl": ("{", ", ", "}\n", "null"),
}


def _bytes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), np.uint8)


def _read_only(buf: np.ndarray) -> np.ndarray:
    """``buf`` as a read-only view: every text buffer reaches the kernels with one type (one compiled
    signature), whether it came from ``bytes`` (read-only) or a ``bytearray``."""
    if not buf.flags.writeable:
        return buf
    view = buf.view()
    view.flags.writeable = False
    return view


def _cells(column: Column, n: int, fmt: str):
    """(kind, arrays...) of a column for the kernels; kind 'int' or 'text'."""
    if isinstance(column, TextColumn):
        valid = column.valid if column.valid is not None else np.ones(n, bool)
        mode = KT.CSV if fmt == "csv" else KT.JSON
        return "text", _read_only(column.buf), np.asarray(column.starts, np.int64), np.asarray(column.ends, np.int64), \
            valid, mode
    mask = np.ma.getmaskarray(column) if isinstance(column, np.ma.MaskedArray) else None
    data = np.ma.getdata(column)
    valid = np.ones(n, bool) if mask is None else ~mask
    if data.dtype == np.bool_:
        words = TextColumn.from_codes(data.astype(np.int64), ("false", "true"))
        return "text", _read_only(words.buf), words.starts, words.ends, valid, KT.RAW
    if np.issubdtype(data.dtype, np.integer):
        if data.dtype == np.uint64 and data.size and data.max() > np.iinfo(np.int64).max:
            raise ValueError("uint64 cells above 2**63 - 1 cannot be written")
        return "int", np.ascontiguousarray(data, np.int64), valid
    raise TypeError(f"cannot write a column of dtype {data.dtype} (integers, booleans and TextColumn only)")


def header(columns: Sequence[str]) -> bytes:
    """The CSV header line of ``columns`` (names quoted as cells would be)."""
    return encode({str(k): TextColumn.from_strings([name]) for k, name in enumerate(columns)}, "csv")


def encode(table: Table, fmt: str) -> bytes:
    """The rows of ``table`` as CSV lines (no header, see :func:`header`) or JSON lines.

    Parameters
    ----------
    table : mapping of str to column
        See the module docstring.
    fmt : {"csv", "jsonl"}
        CSV (RFC 4180 quoting, ``\\n`` line ends) or one JSON object per line, keys in column order.

    Returns
    -------
    bytes
        UTF-8 text, one line per row.
    """
    if fmt not in _CONSTANTS:
        raise ValueError(f"unknown output format {fmt!r}; one of {', '.join(FORMATS)}")
    n = table_length(table)
    first, other, suffix, null = _CONSTANTS[fmt]
    null_b = _bytes(null)
    prefixes, cells = [], []
    for k, (name, column) in enumerate(table.items()):
        if fmt == "jsonl":
            prefixes.append(_bytes((first if k == 0 else other) + json.dumps(name) + ": "))
        else:
            prefixes.append(_bytes(first if k == 0 else other))
        cells.append(_cells(column, n, fmt))
    if not cells:
        prefixes.append(_bytes(first))
    suffix_b = _bytes(suffix)
    with PARALLEL_LOCK:  # Numba's workqueue layer aborts on concurrent parallel launches
        return _encode(n, prefixes, cells, suffix_b, null_b)


def _encode(n: int, prefixes: list, cells: list, suffix_b: np.ndarray, null_b: np.ndarray) -> bytes:
    lengths = np.zeros(n, np.int64)
    lengths += sum(p.shape[0] for p in prefixes) + suffix_b.shape[0]
    for c in cells:
        if c[0] == "int":
            KT.int_lengths(c[1], c[2], null_b.shape[0], lengths)
        else:
            KT.text_lengths(c[1], c[2], c[3], c[4], c[5], null_b.shape[0], lengths)
    cursor = np.zeros(n, np.int64)
    if n:
        np.cumsum(lengths[:-1], out=cursor[1:])
    out = np.empty(int(lengths.sum()), np.uint8)
    for prefix, c in zip(prefixes, cells):
        KT.write_constant(out, cursor, prefix)
        if c[0] == "int":
            KT.write_ints(out, cursor, c[1], c[2], null_b)
        else:
            KT.write_texts(out, cursor, c[1], c[2], c[3], c[4], c[5], null_b)
    if not cells:
        KT.write_constant(out, cursor, prefixes[0])
    KT.write_constant(out, cursor, suffix_b)
    return out.tobytes()


class TableWriter:
    """Writes tables with the same columns, one after another, to a binary stream.

    CSV gets a header line before the first rows (also when the first table is empty);
    JSON lines none.  ``columns`` fixes the column names (default: the first table's).
    """

    def __init__(self, stream: IO[bytes], fmt: str, columns: Sequence[str] | None = None) -> None:
        if fmt not in _CONSTANTS:
            raise ValueError(f"unknown output format {fmt!r}; one of {', '.join(FORMATS)}")
        self.stream, self.fmt = stream, fmt
        self.columns: tuple[str, ...] | None = None
        self.rows = 0
        if columns is not None:
            self._start(tuple(columns))

    def _start(self, columns: tuple[str, ...]) -> None:
        self.columns = columns
        if self.fmt == "csv":
            self.stream.write(header(columns))

    def write(self, table: Table) -> None:
        """Write the rows of ``table`` (its columns must be :attr:`columns`, in order)."""
        names = tuple(table)
        if self.columns is None:
            self._start(names)
        elif names != self.columns:
            raise ValueError(f"columns {names} differ from the columns written before, {self.columns}")
        self.rows += table_length(table)
        self.stream.write(encode(table, self.fmt))

"""Scored positions as Arrow tables and Parquet files (needs ``pyarrow``: the ``parquet`` or ``dask`` extra).

:func:`to_arrow` turns a result table of :mod:`nnue_infer.io.score` (the columns ``nnue-infer eval``
writes as CSV / JSON lines) into an Arrow table, column for column; :class:`ParquetTableWriter`
streams such tables into one Parquet file (``nnue-infer eval ... -o scores.parquet``).

Datasets of many inputs (:mod:`nnue_infer.io.distributed`) have one schema for every kind of input,
:func:`schema`, so EPD, PGN and Parquet shards of one job land in one dataset:

================  ==========  ============================================================
column            type        meaning
================  ==========  ============================================================
``source``        string      the input file, as given
``line``          int64       EPD: the position's line (1-based); Parquet input: its row (1-based); PGN: null
``game``          int64       PGN: 1-based game number in the file; null otherwise
``event`` ...     string      PGN tags ``event``, ``site``, ``date``, ``round``, ``white``, ``black``,
``result``                    ``result`` (null when absent, and for EPD)
``ply``           int64       PGN: plies from the game's start position (0 = start); null otherwise
``san``, ``uci``  string      PGN: the move that led to the position (python-chess's SAN and UCI); null at ply 0
``fen``           string      the position (PGN: python-chess's ``Board.fen()``; EPD: as written)
``value``         int64       NNUE value, internal units, side to move's point of view
``cp``            int64       ``tdiv(100 * value, units_per_pawn)``, side to move
``cp_white``      int64       ``cp`` from White's point of view
``in_check``      bool        the side to move is in check (Stockfish prints no NNUE value then)
``outcome``       string      ``checkmate``, ``stalemate`` or ``none``
================  ==========  ============================================================

EPD operations are not kept in datasets.  Errors (:func:`errors_schema`): ``source``, ``line``,
``game``, ``ply``, ``message``.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from ..inputs import replacing

#: PGN tag columns (lower-case names of :data:`nnue_infer.io.score.PGN_TAGS`).
TAG_COLUMNS = ("event", "site", "date", "round", "white", "black", "result")


def _pa(what: str = "Parquet output"):
    """The ``pyarrow`` module; ``ImportError`` saying ``what`` needs it and how to install it."""
    try:
        import pyarrow
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"{what} needs pyarrow: pip install 'nnue-infer[parquet]'") from exc
    return pyarrow


@functools.cache
def schema():
    """The ``pyarrow.Schema`` of scored-position datasets (see the module docstring); one object (immutable),
    built once."""
    pa = _pa()
    fields = [pa.field("source", pa.string(), nullable=False), pa.field("line", pa.int64()),
              pa.field("game", pa.int64())]
    fields += [pa.field(name, pa.string()) for name in TAG_COLUMNS]
    fields += [pa.field("ply", pa.int64()), pa.field("san", pa.string()), pa.field("uci", pa.string()),
               pa.field("fen", pa.string()), pa.field("value", pa.int64()), pa.field("cp", pa.int64()),
               pa.field("cp_white", pa.int64()), pa.field("in_check", pa.bool_()), pa.field("outcome", pa.string())]
    return pa.schema(fields, metadata={"nnue-infer": "scored positions; value in internal units, side to move"})


@functools.cache
def errors_schema():
    """The ``pyarrow.Schema`` of the errors table: ``source``, ``line``, ``game``, ``ply``, ``message`` (built once)."""
    pa = _pa()
    return pa.schema([pa.field("source", pa.string(), nullable=False), pa.field("line", pa.int64()),
                      pa.field("game", pa.int64()), pa.field("ply", pa.int64()),
                      pa.field("message", pa.string(), nullable=False)])


def dataset_table(table, source: str, target, rows=None):
    """The rows ``rows`` (indices or a bool mask; default: all) of an output table (``{name: column}``, see
    :mod:`nnue_infer.io.output`) as a ``pyarrow.Table`` of schema ``target``: ``source`` filled in, the
    schema's columns missing from ``table`` null, the others (EPD operations, ``error``) left out.

    Each column goes straight to its type (:func:`arrow_array`): no intermediate table, nothing
    converted that is dropped, no Python object per row.
    """
    pa = _pa()
    from .output import take

    if rows is not None:
        table = take({f.name: table[f.name] for f in target if f.name in table}, rows)
    n = table_rows(table)
    arrays = []
    for f in target:
        if f.name == "source":  # one value on every row: its bytes repeated, no Python object per row
            data = source.encode("utf-8", "surrogateescape")
            offsets = np.arange(n + 1, dtype=np.int32) * len(data)
            arrays.append(pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n)))
        elif f.name in table:
            arrays.append(arrow_array(table[f.name], f.type))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(arrays, schema=target)


def table_rows(table) -> int:
    """Rows of an output table (its first column's length; 0 without columns)."""
    return len(next(iter(table.values()))) if table else 0


def arrow_array(column, type=None):
    """A ``pyarrow`` array of one output-table column: :class:`~nnue_infer.io.output.TextColumn` as strings
    (:func:`text_array`), a masked array with nulls, other arrays as they are; ``type`` (optional) the
    Arrow type to give it (an integer column is converted once, straight from NumPy)."""
    pa = _pa()
    from .output import TextColumn

    if isinstance(column, TextColumn):
        array = text_array(column)
        return array if type is None or array.type == type else array.cast(type)
    if isinstance(column, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(column)
        return pa.array(np.ma.getdata(column), mask=mask if mask.any() else None, type=type)
    return pa.array(np.asarray(column), type=type)


def text_array(column):
    """A ``pyarrow`` string array of a :class:`~nnue_infer.io.output.TextColumn` (bytes gathered in compiled
    code, :func:`nnue_infer.kernels.data.text.gather`; no Python object per cell); all-null cells make a null
    array without copying anything."""
    pa = _pa()
    from ..kernels.data.text import gather

    n = len(column)
    if column.valid is not None and not column.valid.any():
        return pa.nulls(n, pa.string())
    starts = np.ascontiguousarray(column.starts, np.int64)
    ends = np.ascontiguousarray(column.ends, np.int64)
    if column.valid is None and _one_byte_apart(column.buf, starts, ends):
        return _lines_array(column.buf, starts, ends)
    if column.buf.shape[0] <= _FEW_BYTES < n:
        labels = _labels_array(column.buf, starts, ends, column.valid)
        if labels is not None:
            return labels
    offsets = np.empty(n + 1, np.int64)
    data = np.empty(int((ends - starts).sum()), np.uint8)
    gather(np.ascontiguousarray(column.buf, np.uint8), starts, ends, data, offsets)
    validity = None
    if column.valid is not None and not column.valid.all():
        validity = pa.py_buffer(np.packbits(np.asarray(column.valid, bool), bitorder="little"))
    if data.size < 1 << 31:  # Arrow's string type: int32 offsets
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data), validity)
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), validity).cast(pa.string())


#: A text column over a buffer of at most this many bytes with more cells than that is a column of labels (the
#: ``outcome`` column, :meth:`~nnue_infer.io.output.TextColumn.from_codes`): :func:`_labels_array` builds it.
_FEW_BYTES = 64


def _labels_array(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, valid: np.ndarray | None):
    """The string array of cells drawn from a few labels (each byte offset of ``buf`` starts at most one label:
    one end for every cell starting there), as Arrow's ``take`` of the labels by each cell's label index
    (0.19 -> 0.05 ms for 10,000 ``outcome`` cells against copying each cell); ``None`` when two cells start at
    one offset and end apart (then the cells are copied)."""
    pa = _pa()
    size = buf.shape[0]
    use = slice(None) if valid is None else np.asarray(valid, bool)
    s, e = starts[use], ends[use]
    if s.size and (s.min() < 0 or e.max() > size):
        return None
    end_of = np.full(size + 1, -1, np.int64)
    end_of[s] = e
    if not np.array_equal(end_of[s], e):
        return None
    present = np.flatnonzero(end_of >= 0)
    labels = pa.array([bytes(buf[k:end_of[k]]) for k in present.tolist()], pa.binary()).view(pa.string())
    index = np.zeros(size + 1, np.int32)
    index[present] = np.arange(present.shape[0], dtype=np.int32)
    at = index[np.clip(starts, 0, size)]
    return labels.take(pa.array(at, mask=None if valid is None else ~np.asarray(valid, bool)))


def _one_byte_apart(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> bool:
    """Whether the cells lie one after another with one byte between each and the next, the last inside
    ``buf`` with a byte after it (the lines of a FEN file, each cell its line without the newline)."""
    n = starts.shape[0]
    return bool(n) and int(ends[-1]) < buf.shape[0] and int(ends[-1]) + 1 - int(starts[0]) < 1 << 31 \
        and np.array_equal(starts[1:], ends[:-1] + 1)


def _lines_array(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """The string array of cells laid out as :func:`_one_byte_apart` says: each cell with the byte after it is a
    view of ``buf`` (no copy), and Arrow's ``binary_slice`` drops that byte from every cell in one pass (a
    fifth of the time of copying cell by cell, :func:`nnue_infer.kernels.data.text.gather`: 0.06 against 0.30 ms for
    10,000 FENs).  The bytes dropped are not part of a cell, so the result is UTF-8 whenever the cells are."""
    pa = _pa()
    import pyarrow.compute as pc

    n, first = starts.shape[0], int(starts[0])
    offsets = np.empty(n + 1, np.int32)
    offsets[:n] = starts - first
    offsets[n] = int(ends[-1]) + 1 - first
    with_next = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                       pa.py_buffer(buf[first:int(ends[-1]) + 1])])
    return pc.binary_slice(with_next, 0, -1).view(pa.string())


def to_arrow(table):
    """A ``pyarrow.Table`` of an output table (``{name: column}``, see :mod:`nnue_infer.io.output`): integer and
    bool arrays as they are, masked arrays with nulls, :class:`~nnue_infer.io.output.TextColumn` as strings."""
    pa = _pa()
    return pa.Table.from_arrays([arrow_array(c) for c in table.values()], names=list(table))


def write_table(table, path: str, **options) -> None:
    """Write ``table`` to the Parquet file ``path`` atomically (a temporary file, then a rename),
    so a file that exists is complete and a failed write leaves ``path`` as it was
    (:func:`nnue_infer.inputs.replacing`); zstd-compressed unless ``options`` (of
    ``pyarrow.parquet.write_table``) say otherwise.  The file is put together in memory and written
    with one call (Arrow's file sink writes each page on its own: 0.3-0.5 ms more for a part of
    10,000 positions)."""
    pa = _pa()
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **({"compression": "zstd"} | options))
    with replacing(path) as tmp, open(tmp, "wb") as f:
        f.write(sink.getvalue())


class ParquetTableWriter:
    """Writes result tables (:mod:`nnue_infer.io.output` columns) one after another into one Parquet file,
    the counterpart of :class:`nnue_infer.io.output.TableWriter`.  The first table fixes the schema; the
    file is written under a temporary name and renamed by :meth:`close`; :meth:`abort` removes it,
    leaving the target untouched (:func:`nnue_infer.inputs.replacing`: a replaced file keeps its
    permission bits, a read-only one is refused with ``PermissionError`` here, before any work).  A
    target that is not a regular file (a named pipe, a device) is written in place by :meth:`close`,
    the file put together in memory (Arrow's file sink seeks, which a pipe cannot)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.rows = 0
        self.columns: tuple[str, ...] | None = None
        self._writer = None
        self._replacing = replacing(path)
        self._tmp = self._replacing.__enter__()
        self._memory = _pa().BufferOutputStream() if self._tmp == os.fspath(path) else None  # in place: a FIFO

    def _sink(self):
        """Where pyarrow writes: the temporary file's name, or the buffer of a target written in place."""
        return self._tmp if self._memory is None else self._memory

    def write(self, table) -> None:
        """Append the rows of ``table`` (the same columns as the first table)."""
        import pyarrow.parquet as pq

        arrow = to_arrow(table)
        if self._writer is None:
            self.columns = tuple(arrow.column_names)
            self._writer = pq.ParquetWriter(self._sink(), arrow.schema, compression="zstd")
        elif tuple(arrow.column_names) != self.columns:
            raise ValueError(f"columns {tuple(arrow.column_names)} differ from the columns written before, {self.columns}")
        self._writer.write_table(arrow.cast(self._writer.schema))
        self.rows += arrow.num_rows

    def close(self) -> None:
        """Finish the file (an empty table of no columns when nothing was written) and rename it into place."""
        import pyarrow.parquet as pq

        if self._writer is None:
            pq.write_table(_pa().table({}), self._sink())
        else:
            self._writer.close()
        if self._memory is not None:
            with open(self._tmp, "wb") as f:
                f.write(self._memory.getvalue())
        cm, self._replacing = self._replacing, None
        if cm is not None:
            cm.__exit__(None, None, None)  # renamed into place with the old file's permission bits

    def abort(self) -> None:
        """Drop what was written: the temporary file is removed, the target (if any) left untouched."""
        import contextlib

        try:
            if self._writer is not None:
                with contextlib.suppress(Exception):
                    self._writer.close()
        finally:
            cm, self._replacing = self._replacing, None
            if cm is not None:
                cm.gen.close()  # replacing's clean-up: the temporary file is removed

"""Reading training data: ``.binpack``, ``.bin``, ``.plain`` and Parquet files (plain, gzip or Zstandard) in
chunks (:func:`iter_chunks`, :func:`read`, :func:`read_range` of whole blocks), each row's place in its file kept
(:class:`RowOrigins`) for the messages.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from ...errors import KindError, InputError, TrainingDataError
from ...inputs import STDIN, input_label, open_input, standard_stream
from ...kernels.data import bin as KBIN
from ...kernels.data import binpack as KBP
from ...kernels.data import plain as KPL
from ...kernels.data import records as KR
from ...kernels.threads import PARALLEL_LOCK
from ..parquet import _pa
from .data import BIN_RESULT_BYTE, KINDS, PLAIN_ROWS, TrainingData, kind_of


#: Bytes of ``.binpack`` blocks decoded together (blocks of one group decode in parallel): two of the
#: tools' 1 MiB blocks, about 800,000 rows (70 MB of columns), so that a conversion's memory stays
#: small whatever the file's size.
GROUP_BYTES = 1 << 20

#: Bytes of ``.plain`` / ``.bin`` read at a time.
READ_BYTES = 16 << 20

#: Longest ``.plain`` record accepted (a record is about 150 bytes): past it the reader stops
#: rather than keep growing an unfinished record (a binary file, no line ``e``).
MAX_PLAIN_RECORD = 1 << 20


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
            KBP.decode_blocks(buf, s, e, row0, capacity, out.bitboards, out.stm, out.castling, out.ep, out.rule50,
                             out.fullmove, out.move, out.score, out.ply, out.result, out.chain, rows, chains,
                             problems, offsets)
        short = problems == -1
        if not short.any():
            break
        bound = (e - s) * 8 // 5 + 64  # a ply takes at least 5 bits, a chain head 34 bytes
        over = np.flatnonzero(short & (capacity >= bound))
        if over.size:  # the chain's declared ply count cannot fit in the rest of its block
            b = int(over[0])
            at = int(offsets[b]) + KBP.CHAIN_HEAD_BYTES - 2  # the ply count field
            plies = (int(buf[at]) << 8) | int(buf[at + 1])
            raise _error(label, bases[b] + at - starts[b], f"truncated: the chain declares {plies} plies, more than "
                         f"the {ends[b] - at - 2} bytes left in its block can hold", compressed)
        capacity[short] = bound[short]
    for b in range(nb):
        if problems[b]:
            raise _error(label, bases[b] + int(offsets[b]) - starts[b], KR.PROBLEMS[problems[b]], compressed)
    parts = []
    chain = first_chain
    for b in range(nb):
        part = out.rows_view(int(row0[b]), int(row0[b] + rows[b]))
        outside = np.flatnonzero((part.result < -1) | (part.result > 1))
        if outside.size:  # the 2 result bits hold 3 (-2); a chain's first row is the first bad one
            at = _chain_offset(buf, starts[b], ends[b], int(outside[0])) + KBP.ENTRY_BYTES - 4
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
        KBP.decode_blocks(buf, one + start, one + end, one * 0, one * 0 + row, out.bitboards, out.stm, out.castling,
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
            if n > KBP.BLOCK_LIMIT:
                raise _error(label, offset + 4, f"block size {n} over the limit {KBP.BLOCK_LIMIT}", compressed)
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
    size = (chunk_bytes or READ_BYTES) // KBIN.BIN_RECORD * KBIN.BIN_RECORD or KBIN.BIN_RECORD
    offset = 0
    chain = 0
    previous: TrainingData | None = None
    while True:
        data = _read_exact(stream, size)
        if not data:
            return
        if len(data) % KBIN.BIN_RECORD:
            whole = len(data) // KBIN.BIN_RECORD * KBIN.BIN_RECORD
            raise _error(label, offset + whole, f"truncated record: {len(data) - whole} of {KBIN.BIN_RECORD} bytes",
                         compressed)
        buf = np.frombuffer(data, np.uint8).copy()
        n = len(data) // KBIN.BIN_RECORD
        out = TrainingData.empty(n)
        problems = np.empty(n, np.int64)
        with PARALLEL_LOCK:
            KBIN.decode_bin(buf, out.bitboards, out.stm, out.castling, out.ep, out.rule50, out.fullmove, out.move,
                          out.score, out.ply, out.result, problems)
        bad = np.flatnonzero(problems)
        if bad.size:
            i = int(bad[0])
            raise _error(label, offset + i * KBIN.BIN_RECORD, f"record {offset // KBIN.BIN_RECORD + i}: "
                         f"{KR.PROBLEMS[problems[i]]}", compressed)
        outside = np.flatnonzero((out.result < -1) | (out.result > 1))  # game_result is an int8
        if outside.size:
            i = int(outside[0])
            raise _error(label, offset + i * KBIN.BIN_RECORD + BIN_RESULT_BYTE, f"record {offset // KBIN.BIN_RECORD + i}: "
                         f"result {int(out.result[i])} outside -1 .. 1", compressed)
        out, chain, previous = number_chains(out, chain, previous)
        yield out, RowOrigins(label, offset // KBIN.BIN_RECORD, record_bytes=KBIN.BIN_RECORD, compressed=compressed)
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
        n, tail = KPL.find_records(buf, starts, ends)
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
        KPL.parse_plain(buf, starts, ends, out.bitboards, out.stm, out.castling, out.ep, out.rule50, out.fullmove,
                       out.move, out.score, out.ply, out.result, problems, offsets)
    out.chain[:] = 0
    bad = np.flatnonzero(problems)
    if not bad.size:
        return out, -1, -1, ""
    i = int(bad[0])
    at = int(offsets[i])
    line = buf[at: at + 80].tobytes().split(b"\n")[0].decode("utf-8", "replace")
    return out, i, at, f"{KR.PROBLEMS[problems[i]]} (at {line!r})"


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
    n, _ = KPL.find_records(buf, starts, ends)
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

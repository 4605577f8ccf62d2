"""Writing training data: :class:`TrainingDataWriter` (``.binpack`` chains and blocks as the tools close them,
``.bin`` records, ``.plain`` text; a file replaced only when complete) and :func:`write`.
"""

from __future__ import annotations

import contextlib
import gzip
import os
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from ...errors import KindError, TrainingDataError
from ...inputs import STDIN, replacing, standard_stream
from ...kernels.chess.bitboard import BB_BLACK, BB_WHITE
from ...kernels.data import bin as KBIN
from ...kernels.data import binpack as KBP
from ...kernels.data import plain as KPL
from ...kernels.data import records as KR
from ...kernels.threads import PARALLEL_LOCK
from ..parquet import _pa
from .data import BINPACK_HEAD_PLY, BIN_RULE50, KINDS, PLAIN_ROWS, TrainingData, _row_problem, kind_of


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
                raise _unwritable(self.label, self._rows + bad, f"{KR.PROBLEMS[KR.E_OCCUPANCY]}: "
                                                                   f"{data[bad: bad + 1].fens()[0]}")
            rows = data if self._open is None else TrainingData.concat([self._open, data])
            cont = rows.continuations()
            KBP.limit_chains(cont)
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
        size, chains, bad = KBP.encode_chains(rows.bitboards, rows.stm, rows.castling, rows.ep, rows.rule50, rows.move,
                                             rows.score, rows.ply, rows.result, cont, out, chain_ends)
        if bad >= 0:
            fen, uci = rows[bad: bad + 1].fens()[0], rows[bad: bad + 1].uci()[0]
            raise _unwritable(self.label, first_row + bad, f"{KR.PROBLEMS[KR.E_UNENCODABLE]}: {uci} in {fen}")
        ends = chain_ends[:chains]
        cuts = np.empty(chains, np.int64)
        k = KBP.block_cuts(ends, self._block_size, KBP.BLOCK_TARGET, cuts)
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
        if self._text.shape[0] < KPL.PLAIN_SLOT * n:
            self._text = np.empty(KPL.PLAIN_SLOT * n, np.uint8)
        runs = np.linspace(0, n, min(self.RUNS, n) + 1).astype(np.int64)
        ends = np.empty(runs.shape[0] - 1, np.int64)
        with PARALLEL_LOCK:
            KPL.write_plain_runs(data.bitboards, data.stm, data.castling, data.ep, data.rule50, data.fullmove,
                                data.move, data.score, data.ply, data.result, runs, self._text, ends)
        return [self._text[KPL.PLAIN_SLOT * int(start): int(end)] for start, end in zip(runs[:-1], ends)]


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
    out, problems = np.zeros(KBIN.BIN_RECORD * n, np.uint8), np.empty(n, np.int64)
    with PARALLEL_LOCK:
        KBIN.encode_bin(data.bitboards, data.stm, data.castling, data.ep, data.rule50, data.fullmove, data.move,
                      data.score, data.ply, data.result, out, problems)
    bad = np.flatnonzero(problems)
    if bad.size:
        i = int(bad[0])
        raise _unwritable(label, first_row + i, f"{KR.PROBLEMS[problems[i]]}: {data[i:i + 1].fens()[0]}")
    return out.tobytes()

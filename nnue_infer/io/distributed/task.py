"""One task on a worker: its input rows read (a file or a range of one), scored, written as one
Parquet part (and its bad rows as an errors part); the warm-up of a worker before its first task.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import InputKindError
from .workers import _lock, _one_per_host, _set_threads, _worker_threads, worker_evaluator

log = logging.getLogger("nnue_infer.io")


@dataclass(frozen=True)
class Task:
    """One task of :func:`score_files`: a whole input, or a range of one.

    ``start``/``end``: EPD, PGN or ``.binpack`` byte range (``end`` -1: the whole input), Parquet row
    groups ``[start, end)``; ``first``: the number of its first line (EPD, PGN) or row (Parquet);
    ``game``: the number of its first game (PGN); ``index`` of ``count`` ranges.
    """

    path: str
    kind: str
    index: int = 0
    count: int = 1
    start: int = 0
    end: int = -1
    first: int = 1
    game: int = 1

    @property
    def part(self) -> str:
        """The name of the task's part (the same in every run: ranges are kept in the manifest)."""
        return part_name(self.path, None if self.count == 1 else (self.start, self.end))


def part_name(path: str, byte_range: tuple[int, int] | None = None) -> str:
    """Stable name of an input's part: its base name and a hash of its real path (links and other names
    of one file give one part, in any run) (and, for a task
    that reads a range of a split input, the range's start: byte, or Parquet row group)."""
    real = os.path.realpath(path)
    digest = hashlib.sha1(real.encode()).hexdigest()[:12]
    base = os.path.basename(real).replace(".", "_")[:60]
    at = f"-b{byte_range[0]}" if byte_range is not None else ""
    return f"part-{base}-{digest}{at}.parquet"


#: Sub-directory of the errors table (a leading "_": dataset readers skip it when reading the positions).
ERRORS_DIR = "_errors"

#: Networks this process has been warmed up for (:func:`warm_up`).
_warm: set[str] = set()


def warm_up(network: str, threads: int | None = None) -> float:
    """Load ``network`` and every compiled kernel a task uses into this process (run it on each worker:
    ``client.run(warm_up, network)``; :func:`score_files` does, for the workers it has not warmed yet).  Returns the
    seconds it took: 0 once this process is warm for ``network``.

    The first call per network scores EPD lines and a short game as the files path of ``nnue-infer warmup`` does
    (:func:`nnue_infer.io.score.warm_up_files`), and a part into an in-memory Parquet file: the network is
    read once per process (:func:`worker_evaluator`), the kernels come from Numba's cache
    (``__pycache__`` next to the sources, or ``NUMBA_CACHE_DIR``: one cache shared by every worker
    process of a machine), so a task's own time is scoring.
    """
    import time

    import pyarrow.parquet as pq

    from ..epd import read_epd
    from ..score import WARM_UP_EPD, score_epd, warm_up_files

    if network in _warm:
        return 0.0
    t = time.perf_counter()
    _set_threads(threads)
    ev = worker_evaluator(network)
    warm_up_files(ev)
    table, _ = _score_tables(score_epd(ev, read_epd(WARM_UP_EPD), operations=False), "<warm-up>")
    pq.write_table(table, io.BytesIO(), **_parquet())
    with _lock:
        _warm.add(network)
    return time.perf_counter() - t


#: Workers each client has warmed up (:func:`_warm_workers`): {client: {(worker address, network, threads)}}.
_warmed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _warm_workers(client, network: str, threads: int | None) -> int:
    """Warm up (:func:`warm_up`) the workers of ``client`` that it has not warmed for ``network`` and ``threads``
    yet, and return the cluster's number of worker threads (:func:`_worker_threads`; ``client.run`` on every
    worker cost each job about 2 ms of wall clock and of the workers' CPU).  A worker that restarted at a known
    address is not warmed again: its first task loads the network (:func:`worker_evaluator`), the same values."""
    nthreads = _worker_threads(client)
    with _lock:
        known = _warmed.setdefault(client, set())
        cold = [w for w in nthreads if (w, network, threads) not in known]
    if cold:
        first = _one_per_host(cold)  # a machine's first worker compiles into the Numba cache they share; then the
        client.run(warm_up, network, threads, workers=first)  # others load from it, not compile it again at once
        if len(first) < len(cold):
            client.run(warm_up, network, threads, workers=[w for w in cold if w not in first])
        with _lock:
            known.update((w, network, threads) for w in cold)
    return sum(nthreads.values())


#: Rows per row group of the parts written (readers, and a later job reading the dataset, split by row group).
ROW_GROUP_ROWS = 1 << 17

#: Columns of the parts that hold text with many distinct values: the only ones compressed (zstd by default:
#: the FENs to a third of their size).
_FREE_TEXT = ("fen", "san", "uci", "message")

#: Columns of the parts with min/max statistics: those a reader can skip row groups by (a part's rows come in
#: ``line``, ``game`` and ``ply`` order; ``source`` and the tags are few values); none on the free text, nor on
#: the values and flags (unordered: every row group spans nearly their whole range, so they would prune nothing).
_STATISTICS = ("source", "line", "game", "event", "site", "date", "round", "white", "black", "result", "ply")

#: Codecs for the free text of the parts (:func:`score_files`' ``compression``; Parquet's, as pyarrow names them).
CODECS = ("zstd", "lz4", "snappy", "gzip", "brotli", "none")


def _parquet(compression: str = "zstd") -> dict:
    """Parquet settings of the parts: ``compression`` for :data:`_FREE_TEXT`, nothing else compressed
    (compressing a column costs a fixed time per column and file: 19 columns of a part of 5 rows took
    0.56 ms with zstd everywhere, 0.29 ms this way, and the other columns hardly shrink), dictionaries only
    for the columns with few distinct values, the integers delta-encoded (Parquet's DELTA_BINARY_PACKED:
    ``line`` and ``ply`` count up, values are small, so the bit-packed deltas are smaller and quicker to
    write than plain 8-byte integers), and rows encoded 16,384 at a time (pyarrow's default, 1,024, made a part of
    10,000 positions take 7 % longer to write uncompressed: 1.23 against 1.14 ms)."""
    names = ("source", "line", "game", "event", "site", "date", "round", "white", "black", "result", "ply", "san",
             "uci", "fen", "value", "cp", "cp_white", "in_check", "outcome", "message")
    return {"compression": {name: compression if name in _FREE_TEXT else "none" for name in names},
            "row_group_size": ROW_GROUP_ROWS,
            "write_batch_size": 1 << 14,
            "write_statistics": [name for name in names if name in _STATISTICS],
            "use_dictionary": ["source", "event", "site", "date", "round", "white", "black", "result", "outcome"],
            "column_encoding": dict.fromkeys(("line", "game", "ply", "value", "cp", "cp_white"),
                                             "DELTA_BINARY_PACKED")}


_MAGIC = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd")  # gzip, Zstandard


class _Range(io.RawIOBase):
    """A binary file read from ``start`` up to ``end`` (a raw stream: ``read``, or buffered and decoded)."""

    def __init__(self, f, start: int, end: int) -> None:
        f.seek(start)
        self.f, self.left = f, end - start

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        """Up to ``size`` bytes (all that is left for ``-1``) with one read of the file (no buffer to fill).

        Raises ``ValueError`` naming the file and the byte where it ended when it ends before ``end``
        (truncated while it was scored: the range's last rows would be missing, silently)."""
        want = self.left if size < 0 else min(size, self.left)
        data = self.f.read(want)
        if not data and want > 0:
            size = os.fstat(self.f.fileno()).st_size  # (tell() is past the end after a seek there)
            raise ValueError(f"{self.f.name}: ends at byte {size}, before the end of the range planned for this "
                             f"task (byte {self.f.tell() + self.left}): the file changed while it was scored")
        self.left -= len(data)
        return data


def _parquet_rows(task: Task, column: str):
    """EPD rows of a Parquet input's FEN cells (row groups ``task.start`` to ``task.end``), one line per
    cell, numbered by row (from 1 in the file), and the rows whose cell cannot be a line ({row: message}:
    null, empty or blank, a comment (``#``), a line break or a NUL byte inside, longer than
    :data:`~nnue_infer.io.epd.MAX_LINE_BYTES`; each is one line ``?`` here, an error row whose message
    becomes this one).  The column holds strings: ``string``, ``large_string``, ``string_view`` or a
    dictionary of them (pandas' ``category``); ``InputKindError`` otherwise."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ..epd import MAX_LINE_BYTES, read_epd

    pf = pq.ParquetFile(task.path)
    _check_column(task.path, pf.schema_arrow, column)
    groups = pf.metadata.num_row_groups
    end = groups if task.end < 0 else task.end
    if end > groups:  # (pyarrow's own message names no file)
        raise ValueError(f"{task.path}: has {groups} row groups, not the {end} this task's range ends at: the file "
                         "changed while it was scored")
    cells = pf.read_row_groups(range(task.start, end), columns=[column]).column(column)
    if not (pa.types.is_string(cells.type) or pa.types.is_large_string(cells.type)):  # a dictionary, views
        cells = cells.cast(pa.large_string())
    cells = cells.combine_chunks() if cells.num_chunks != 1 else cells.chunk(0)
    bad = {}
    problems = (("a null cell", pc.is_null(cells)),
                ("an empty cell", pc.equal(pc.utf8_trim_whitespace(cells), "")),
                ("a comment, not a FEN", pc.starts_with(pc.utf8_ltrim_whitespace(cells), "#")),
                ("a line break inside the cell", pc.match_substring_regex(cells, "[\n\r]")),
                ("a NUL byte in the cell", pc.match_substring(cells, "\0")),  # (read_epd refuses the whole input)
                (f"a cell longer than {MAX_LINE_BYTES} bytes", pc.greater(pc.binary_length(cells), MAX_LINE_BYTES)))
    for message, mask in problems:
        for i in np.flatnonzero(mask.fill_null(False).to_numpy(zero_copy_only=False)).tolist():
            bad.setdefault(task.first + i, f"row {task.first + i}: {message}")
    def unread(cells):  # the cells of the rows in bad as "?" lines (error rows), then read as EPD lines
        if bad:
            mask = np.zeros(len(cells), bool)
            mask[np.array(list(bad), np.int64) - task.first] = True
            cells = pc.replace_with_mask(cells, pa.array(mask), pa.array(["?"] * len(bad), cells.type))
        return read_epd(_lines(cells.cast(pa.large_string())), first_line=task.first, source=task.path)

    rows = unread(cells)
    more = np.zeros(len(rows), bool)  # a cell with text after its FEN: EPD operations, read or refused
    more[rows.op_row] = True
    more |= rows.op_problem != 0
    if more.any():  # (evaluate_batch and evaluate_dataframe refuse such a cell: a dataset's row must not differ)
        for i in np.flatnonzero(more).tolist():
            cell, fen = cells[i].as_py(), rows.fen[i] or ""
            rest = cell.split(fen, 1)[-1].strip() if fen else cell.strip()
            bad.setdefault(task.first + i, f"row {task.first + i}: text after the FEN ({rest[:40]!r}): a FEN column "
                                           "holds one FEN per cell (EPD operations are not read from Parquet)")
        rows = unread(cells)
    return rows, bad


def _check_column(path: str, schema, column: str) -> None:
    """``InputKindError`` naming the Parquet input ``path`` (Arrow ``schema``) unless its ``column`` holds text:
    ``string``, ``large_string``, ``string_view`` or a dictionary of them (pandas' ``category``)."""
    import pyarrow as pa

    if column not in schema.names:
        raise InputKindError(f"{path}: no column {column!r} (columns: {', '.join(schema.names)})")
    if schema.names.count(column) > 1:
        raise InputKindError(f"{path}: {schema.names.count(column)} columns are named {column!r}: which one holds "
                             "the FENs is not known")
    kind = schema.field(column).type
    text = kind.value_type if pa.types.is_dictionary(kind) else kind
    if not (pa.types.is_string(text) or pa.types.is_large_string(text)
            or getattr(pa.types, "is_string_view", lambda t: False)(text)):  # (pyarrow 16 on)
        raise InputKindError(f"{path}: column {column!r} holds {kind}, not text")


def _lines(cells) -> bytes:
    """The cells of a ``large_string`` array without nulls, each followed by a newline, as one bytes object
    (NumPy over Arrow's buffers, no Python object per cell)."""
    n = len(cells)
    offsets = np.frombuffer(cells.buffers()[1], np.int64)[cells.offset:cells.offset + n + 1]
    data = np.frombuffer(cells.buffers()[2], np.uint8)[offsets[0]:offsets[-1]] if n else np.zeros(0, np.uint8)
    out = np.empty(data.size + n, np.uint8)
    newline = np.zeros(out.size, bool)
    newline[offsets[1:] - offsets[0] + np.arange(n)] = True
    out[newline] = 10
    out[~newline] = data
    return out.tobytes()


def _plain_file(path: str) -> bool:
    """Whether ``path`` is a regular file that is not gzip or Zstandard data."""
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return not f.read(4).startswith(_MAGIC)


def _kind_advice(kind: str) -> str:
    """The end of the message refusing an EPD (``kind``) or PGN input that holds the other kind: content of the
    other kind (FENs in a .pgn file read as games of the start position, PGN in a .txt file an error per line) is
    the call's error (InputKindError), naming the file and line, as for ``eval --epd`` / ``--pgn``."""
    return f"a job reads each input by its name's kind: rename it .{'epd' if kind == 'pgn' else 'pgn'}"


def _task_tables(task: Task, ev, column: str) -> tuple[Iterator[dict], dict[int, str]]:
    """The result tables (:mod:`nnue_infer.io.score`) of one task, and the rows (by line) whose
    message is the cell's problem (Parquet inputs)."""
    from ...inputs import input_label, open_input
    from ..score import epd_chunks, pgn_lines
    from ..score import score_epd, score_pgn

    label = input_label(task.path)
    advice = _kind_advice(task.kind)
    if task.kind == "parquet":
        rows, bad = _parquet_rows(task, column)
        return score_epd(ev, rows, operations=False), bad

    def tables() -> Iterator[dict]:
        if task.kind == "binpack":  # a range's chains are numbered (game) from 0 at its first block
            from ..score import score_training_data
            from ..training_data import iter_chunks, read_range

            chunks = iter_chunks(task.path, "binpack") if task.end < 0 else read_range(task.path, task.start, task.end)
            for data in chunks:
                yield score_training_data(ev, data)
        elif task.kind == "pgn" and task.end < 0:
            with open_input(task.path) as inp:
                for table, _ in score_pgn(ev, pgn_lines(inp.text, label, advice=advice), source=label):
                    yield table
        elif task.kind == "pgn":  # whole games from a game's first line (decoded as open_input's text)
            with open(task.path, "rb") as f:
                text = io.TextIOWrapper(io.BufferedReader(_Range(f, task.start, task.end)),
                                        encoding="utf-8-sig" if task.start == 0 else "utf-8", errors="replace")
                lines = pgn_lines(text, label, advice=advice, first_line=task.first)
                for table, _ in score_pgn(ev, lines, source=label, first_line=task.first, first_game=task.game):
                    yield table
        elif task.end < 0 and not _plain_file(task.path):  # gzip, zstd, a FIFO: in bounded chunks, as the CLI
            with open_input(task.path, text=False) as inp:
                yield from score_epd(ev, epd_chunks(inp.binary, label, advice=advice), operations=False)
        else:  # a range, or a whole uncompressed file: read straight from the file
            with open(task.path, "rb", buffering=0) as f:
                end = task.end if task.end >= 0 else os.fstat(f.fileno()).st_size
                yield from score_epd(ev, epd_chunks(_Range(f, task.start, end), label, advice=advice,
                                                    first_line=task.first), operations=False)

    return tables(), {}


def _score_tables(tables: Iterable[dict], source: str, bad: dict[int, str] | None = None):
    """``(positions, errors)``: Arrow tables of :func:`nnue_infer.io.parquet.schema` and
    :func:`~nnue_infer.io.parquet.errors_schema` of result ``tables``; ``bad`` {line: message}
    words the errors of those lines."""
    import pyarrow as pa

    from .. import parquet as P
    from ..output import TextColumn, take

    target, errors_target = P.schema(), P.errors_schema()
    parts, errors = [], []
    for table in tables:
        error = table["error"]
        failed = np.zeros(len(error), bool) if error.valid is None else error.valid
        if not failed.any():
            parts.append(P.dataset_table(table, source, target))
            continue
        e = take(table, failed)
        messages = e["error"]
        if bad:
            lines = e["line"].tolist()  # error rows only: few
            messages = TextColumn.from_strings([bad.get(k, m) for k, m in zip(lines, messages.to_list())])
        errors.append(P.dataset_table(e | {"message": messages}, source, errors_target))
        parts.append(P.dataset_table(table, source, target, ~failed))
    table = pa.concat_tables(parts) if parts else target.empty_table()
    return table, (pa.concat_tables(errors) if errors else errors_target.empty_table())


def score_task(task: Task, network: str, out_dir: str, *, threads: int | None = None, column: str = "fen",
               compression: str = "zstd", network_sha256: str | None = None) -> dict:
    """Score one task (an input, or a range of one: :func:`plan_tasks`) into ``out_dir/part-*.parquet``
    (and ``_errors/part-*.parquet``); the task of :func:`score_files`.  Skips a task whose part exists (and
    scores it again, with a warning, when that part or its errors part cannot be read: damaged since).

    Returns a small summary (what travels back to the client): ``{"input", "part", "range", "rows",
    "errors", "skipped"}`` and, for work done, ``"seconds"`` (wall clock), ``"thread_cpu_seconds"``
    (CPU time of the task's thread; Numba's other threads not counted) and ``"positions_seconds"``
    (of that, reading and scoring up to the Arrow tables; the rest is writing Parquet).  A task whose
    input cannot be read (damaged compression, a file that vanished or shrank) writes no part and one
    row in its errors part, and its summary has ``"failed"`` (the message): :func:`_failed_task`.
    """
    import time

    import pyarrow.parquet as pq

    from ..parquet import write_table

    part = task.part  # (a real path: once)
    out = os.path.join(out_dir, part)
    errors_path = os.path.join(out_dir, ERRORS_DIR, part)
    summary = {"input": task.path, "part": out, "range": (task.index, task.count)}
    if os.path.exists(out):  # done before (a re-run, or a task re-run after its worker died)
        reading = out
        try:
            rows = pq.read_metadata(out).num_rows
            reading = errors_path
            n_errors = pq.read_metadata(errors_path).num_rows if os.path.exists(errors_path) else 0
            return summary | {"rows": rows, "errors": n_errors, "skipped": True}
        except (OSError, ValueError) as exc:  # damaged since it was written (cut short, overwritten): done again
            log.warning("%s: %s; scoring %s again", reading, exc, task.path)
    wall, cpu = time.perf_counter(), time.thread_time()
    _set_threads(threads)
    ev = worker_evaluator(network, network_sha256)  # the job's network, or NetworkChangedError
    try:
        tables, bad = _task_tables(task, ev, column)
        table, errors = _score_tables(tables, task.path, bad)
    except InputKindError:  # not the input the call describes (a Parquet file without the FEN column): the call's error
        raise
    except (OSError, ValueError, EOFError) as exc:  # the input cannot be read (damaged, vanished, changed)
        return summary | _failed_task(task, errors_path, out_dir, exc, compression)
    scored = time.thread_time() - cpu
    if errors.num_rows:
        os.makedirs(os.path.join(out_dir, ERRORS_DIR), exist_ok=True)
        write_table(errors, errors_path, **_parquet(compression))
    elif os.path.exists(errors_path):  # of an earlier run of an input fixed since (its part deleted to redo it)
        os.remove(errors_path)
    write_table(table, out, **_parquet(compression))  # last: its existence marks the task as done
    return summary | {"rows": table.num_rows, "errors": errors.num_rows, "skipped": False,
                      "seconds": time.perf_counter() - wall, "thread_cpu_seconds": time.thread_time() - cpu,
                      "positions_seconds": scored}


def _failed_task(task: Task, errors_path: str, out_dir: str, exc: BaseException, compression: str) -> dict:
    """Record a task whose input could not be read (a damaged gzip or zstd stream, a file that vanished,
    shrank or became unreadable) as one row of its errors part, naming the input and the problem, and
    write no positions part: the task counts as not done, so a re-run tries it again (and removes the
    errors part when it succeeds).  The other tasks of the job go on.  Returns the summary's fields."""
    import pyarrow as pa

    from ..parquet import errors_schema, write_table

    where = "" if task.count == 1 else f" (range {task.index + 1} of {task.count})"
    text = str(exc).removesuffix("; the rows before it were read")  # (the CLI's reader keeps them; not here)
    if task.path not in text:  # pyarrow's messages ("Parquet magic bytes not found ...") name no file
        text = f"{task.path}: {text}"
    message = f"{text}; input not scored{where}: no row of it is in the dataset"
    row = pa.table({"source": [task.path], "line": [None], "game": [None], "ply": [None], "message": [message]},
                   schema=errors_schema())
    os.makedirs(os.path.join(out_dir, ERRORS_DIR), exist_ok=True)
    write_table(row, errors_path, **_parquet(compression))
    return {"rows": 0, "errors": 1, "skipped": False, "failed": message}


def score_batch(tasks: Sequence[Task], network: str, out_dir: str, *, threads: int | None = None,
                column: str = "fen", compression: str = "zstd", network_sha256: str | None = None) -> list[dict]:
    """:func:`score_task` of each of ``tasks``, one after another: one Dask task of :func:`score_files`
    (see :func:`batches`).  Each task's part is written on its own, so a batch re-run after its worker
    died skips the parts it finished."""
    return [score_task(task, network, out_dir, threads=threads, column=column, compression=compression,
                       network_sha256=network_sha256) for task in tasks]

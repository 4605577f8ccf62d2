"""Planning a job: inputs found (globs, kinds), checked, and cut into tasks (:class:`Task`: a file or a
range of one: lines, games, row groups or binpack blocks), recorded in the manifest, grouped into batches.
"""

from __future__ import annotations

import glob
import io
import logging
import numbers
import os
from collections.abc import Iterable, Sequence

from ...errors import InputKindError
from .manifest import MANIFEST, _OWN_FILE, _read_manifest, _write_manifest
from .task import ERRORS_DIR, _MAGIC, Task, _check_column, _kind_advice, part_name

log = logging.getLogger("nnue_infer.io")


#: Input kinds by file name (compression suffixes are stripped first).
INPUT_KIND_BY_SUFFIX = {".epd": "epd", ".fen": "epd", ".txt": "epd", ".pgn": "pgn", ".parquet": "parquet",
                        ".binpack": "binpack"}
_COMPRESSED = (".gz", ".zst", ".zstd")


def input_kind(path: str) -> str:
    """``"epd"``, ``"pgn"``, ``"parquet"`` or ``"binpack"`` from a file name (``.epd``/``.fen``/``.txt``,
    ``.pgn``, ``.parquet``, ``.binpack``, each optionally ``.gz`` / ``.zst``; in any case); ``ValueError`` otherwise."""
    name = path
    for suffix in _COMPRESSED:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    ext = os.path.splitext(name)[1].lower()
    if ext not in INPUT_KIND_BY_SUFFIX:
        raise ValueError(f"{path}: unknown input kind {ext!r} (expected .epd, .fen, .txt, .pgn, .parquet or .binpack, "
                         "optionally .gz or .zst)")
    return INPUT_KIND_BY_SUFFIX[ext]


def expand_inputs(inputs: str | Iterable[str], output: str | None = None) -> list[str]:
    """Files named by ``inputs`` (paths or glob patterns), each pattern's matches sorted, each file
    once (by real path and by device and inode: overlapping patterns, symbolic and hard links to one
    file name it once, as first named);
    ``FileNotFoundError`` for a pattern that matches nothing.  A name that exists is that file even when
    it holds glob characters (``a[1].epd`` is not read as the pattern matching ``a1.epd``).

    ``output``: the dataset directory of the job; its own files (``part-*.parquet``, also in ``_errors/``, the
    manifest and the lock) are left out (a pattern over the directory the dataset goes to matched them on a
    re-run, which scored the parts as inputs and refused the manifest's kind), and a pattern that matches
    only them is a ``FileNotFoundError``."""
    patterns = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files: list[str] = []
    seen: set[str] = set()
    own = {os.path.realpath(d) for d in (output, os.path.join(output, ERRORS_DIR))} if output is not None else set()
    for pattern in patterns:
        pattern = os.fspath(pattern)
        literal = not glob.has_magic(pattern) or os.path.lexists(pattern)
        matches = [pattern] if literal else sorted(glob.glob(pattern))
        matches = [m for m in matches if os.path.exists(m) and not os.path.isdir(m)]  # files, FIFOs
        if not matches:
            raise FileNotFoundError(f"no input file matches {pattern!r}")
        parts = [m for m in matches if _OWN_FILE.fullmatch(os.path.basename(m))
                 and os.path.dirname(os.path.realpath(m)) in own]
        if parts:
            log.warning("left out %d file(s) of the output dataset %s that %r matches (%s%s)", len(parts), output,
                        pattern, parts[0], ", ..." if len(parts) > 1 else "")
            matches = [m for m in matches if m not in parts]
            if not matches:
                raise FileNotFoundError(f"{pattern!r} matches only files of the output dataset {output}")
        for m in matches:
            st = os.stat(m)
            keys = {os.path.realpath(m)} | ({(st.st_dev, st.st_ino)} if st.st_ino else set())  # (0: no inodes)
            if not keys & seen:
                seen |= keys
                files.append(m)
    return files


#: EPD/FEN or PGN text per task: an uncompressed input over 1.5 times this is split into byte ranges of
#: about this size, of whole lines (EPD; 32 MiB: about 500,000 positions, a few CPU seconds of scoring)
#: or whole games (PGN; 32 MiB: tens of thousands of games).
SPLIT_BYTES = 32 << 20

#: Rows of a Parquet input per task (whole row groups; a file of one row group is one task).
SPLIT_ROWS = 1 << 19

#: Bytes of an uncompressed ``.binpack`` input per task (whole blocks; blocks are independent).
BINPACK_TASK_BYTES = 64 << 20


def _epd_ranges(path: str, split_bytes: int) -> list[tuple[int, int, int]]:
    """Line-aligned ``(start, end, first line)`` byte ranges of about ``split_bytes`` of an uncompressed file
    (one pass reading it in chunks; only newlines are counted)."""
    size = os.path.getsize(path)
    ranges, start, first, offset, lines = [], 0, 1, 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            search = start + split_bytes - 1 - offset
            while 0 <= search < len(chunk) or (search < 0 and chunk):
                idx = chunk.find(b"\n", max(search, 0))
                if idx < 0 or size - (offset + idx + 1) < split_bytes // 2:
                    break
                ranges.append((start, offset + idx + 1, first))
                first = 1 + lines + chunk.count(b"\n", 0, idx + 1)
                start = offset + idx + 1
                search = start + split_bytes - 1 - offset
            lines += chunk.count(b"\n")
            offset += len(chunk)
    ranges.append((start, size, first))
    return ranges


def _pgn_ranges(path: str, split_bytes: int) -> list[tuple[int, int, int, int]]:
    """``(start, end, first line, first game)`` byte ranges of whole games, of about ``split_bytes``, of an
    uncompressed PGN file (one pass: :func:`nnue_infer.io.pgn.game_starts`); the whole file when it
    cannot be cut by bytes."""
    from ...inputs import MAX_LINE
    from ..pgn import Unsplittable, game_starts

    size = os.path.getsize(path)
    ranges, start, line, game = [], 0, 1, 1
    try:
        for at, at_line, at_game in game_starts(path, MAX_LINE):
            if size - at < split_bytes // 2:  # no sliver at the end
                break
            if at - start >= split_bytes:
                ranges.append((start, at, line, game))
                start, line, game = at, at_line, at_game
    except Unsplittable:
        return [(0, -1, 1, 1)]
    return ranges + [(start, size, line, game)]


def _plan(path: str, split_bytes: int, split_rows: int, binpack_task_bytes: int) -> tuple[str, list[tuple[int, ...]]]:
    """``(kind, ranges)`` of one input: several ranges for an uncompressed regular EPD or PGN file over
    1.5 x ``split_bytes``, a Parquet file of several row groups over 1.5 x ``split_rows`` and an
    uncompressed ``.binpack`` of several blocks over ``binpack_task_bytes``; else one."""
    kind = input_kind(path)
    whole = [(0, -1, 1)]
    if not os.path.isfile(path) or path.lower().endswith(_COMPRESSED):  # FIFOs, devices: one front-to-back read
        return kind, whole
    if kind == "binpack":
        from ..training_data import block_ranges

        try:
            ranges = [(start, stop, 1) for start, stop in block_ranges(path, binpack_task_bytes)]
        except (OSError, ValueError):  # damaged: its task fails, naming it, and the others are scored
            return kind, whole
        return kind, ranges if len(ranges) > 1 else whole
    if kind in ("epd", "pgn") and os.path.getsize(path) > 1.5 * split_bytes:
        with open(path, "rb") as f:
            head = f.read(4)
        if not head.startswith(_MAGIC):
            return kind, (_epd_ranges if kind == "epd" else _pgn_ranges)(path, split_bytes)
    elif kind == "parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(path)
        except (OSError, ValueError):  # not Parquet, damaged: as a damaged .binpack
            return kind, whole
        if meta.num_rows > 1.5 * split_rows and meta.num_row_groups > 1:
            ranges, lo, rows, first = [], 0, 0, 1
            for g in range(meta.num_row_groups):
                rows += meta.row_group(g).num_rows
                if rows >= split_rows and meta.num_rows - (first - 1 + rows) >= split_rows // 2:  # no small tail
                    ranges.append((lo, g + 1, first))
                    lo, first, rows = g + 1, first + rows, 0
            ranges.append((lo, meta.num_row_groups, first))
            return kind, ranges
    return kind, whole


def tasks_of(path: str, binpack_task_bytes: int = BINPACK_TASK_BYTES, *, split_bytes: int = SPLIT_BYTES,
             split_rows: int = SPLIT_ROWS) -> list[Task]:
    """The tasks of one input for a new dataset: the whole input, or its ranges (see :func:`score_files`)."""
    kind, ranges = _plan(path, split_bytes, split_rows, binpack_task_bytes)
    return [Task(path, kind, k, len(ranges), *r) for k, r in enumerate(ranges)]


def _check_task_sizes(**sizes: int) -> None:
    """``ValueError`` naming the first task size (``split_bytes``, ...) or thread count that is not a positive
    integer (0 made the range planner loop forever; ``threads=-3`` ran one thread, ``threads=0`` all)."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def plan_tasks(files: Sequence[str], output: str, *, split_bytes: int = SPLIT_BYTES, split_rows: int = SPLIT_ROWS,
               binpack_task_bytes: int = BINPACK_TASK_BYTES) -> list[Task]:
    """The tasks of ``files`` for the dataset ``output``: one per input, or per range of a large one.

    An input's plan (its ranges, or the whole input as one task) is recorded in the manifest the first
    time (with the file's size) and reused by every later run, so a re-run skips exactly the finished
    ranges, whatever its own task sizes; an input whose part exists whole (scored before in one task)
    stays one task.  :func:`score_files` plans under the output's lock (:func:`planning`).  Every
    regular file's size and modification time are recorded too (``sizes``, ``mtimes``); an input that
    changed since (edited, replaced, even at the same size) is planned afresh when none of its parts
    exist (deleted to score it again), and its old errors tables are dropped (once no input is refused).
    Raises ``ValueError`` when an input changed while parts of it exist (they hold the old file's scores:
    the message names them), or a task size is not a positive integer.
    """
    _check_task_sizes(split_bytes=split_bytes, split_rows=split_rows, binpack_task_bytes=binpack_task_bytes)
    manifest_path = os.path.join(output, MANIFEST)
    manifest = _read_manifest(manifest_path)
    plans = manifest.setdefault("ranges", {})
    sizes = manifest.setdefault("sizes", {})
    tasks, changed, stale = [], False, []
    stamps = manifest.setdefault("mtimes", {})
    names = set(os.listdir(output))
    for path in files:
        key = os.path.realpath(path)
        kind = input_kind(path)
        size = os.path.getsize(path) if os.path.isfile(path) else None
        mtime = os.stat(path).st_mtime_ns if size is not None else None
        if size is not None and key in sizes and (sizes[key] != size or stamps.get(key, mtime) != mtime):
            stem = part_name(path)[:-len(".parquet")]
            parts = sorted(n for n in names if n == f"{stem}.parquet" or n.startswith(f"{stem}-b"))
            if parts:
                now = f"now {size}" if sizes[key] != size else f"{size} and modified since"
                raise ValueError(f"{path}: changed since {output} planned it ({sizes[key]} bytes, {now}): its "
                                 f"parts there ({', '.join(parts[:3])}{', ...' if len(parts) > 3 else ''}) hold "
                                 "the old file's scores; delete them to score it again, or use another output "
                                 "directory")
            del sizes[key]  # nothing of the old file is kept: planned afresh, its old errors tables dropped
            plans.pop(key, None)
            errors_dir = os.path.join(output, ERRORS_DIR)
            for name in os.listdir(errors_dir) if os.path.isdir(errors_dir) else ():
                if name == f"{stem}.parquet" or name.startswith(f"{stem}-b"):
                    stale.append(os.path.join(errors_dir, name))  # (once no other input is refused)
        if size is not None and key not in sizes:
            sizes[key], stamps[key] = size, mtime
            changed = True
        if os.path.exists(os.path.join(output, part_name(path))):
            tasks.append(Task(path, kind))
            continue
        if key in plans:
            ranges = [tuple(r) for r in plans[key]["ranges"]]
        else:
            planned = tasks_of(path, binpack_task_bytes, split_bytes=split_bytes, split_rows=split_rows)
            if size is not None:  # whole inputs too: a later run with another split size follows this plan
                plans[key] = {"size": size, "ranges": [(t.start, t.end, t.first, t.game) for t in planned]}
                changed = True
            tasks += planned
            continue
        tasks += [Task(path, kind, k, len(ranges), *r) for k, r in enumerate(ranges)]
    for path in stale:
        os.unlink(path)
    if changed:
        _write_manifest(manifest_path, manifest)
    return tasks


def _check_columns(files: Sequence[str], column: str) -> None:
    """:func:`_check_column` of the Parquet inputs among ``files`` (their footers: tens of microseconds each), so
    that a job refused for one of them writes nothing; a file whose footer cannot be read is left to its task
    (a damaged input is an error row of its own, the others are scored)."""
    import pyarrow.parquet as pq

    for path in files:
        if input_kind(path) == "parquet" and os.path.isfile(path):  # (not a FIFO: a read would consume it)
            try:
                schema = pq.read_schema(path)
            except (OSError, ValueError):
                continue
            _check_column(path, schema, column)


def _check_kinds(files: Sequence[str]) -> None:
    """Raise the ``InputKindError`` an EPD or PGN input's task would raise when its first
    :data:`~nnue_infer.inputs.SNIFF_BYTES` (decompressed) show another kind: binary data, PGN in an EPD file, FENs in
    a PGN file.  Checked in the client before planning, so that a job refused for one input writes nothing (it left
    the manifest and the lock, and the parts other tasks had finished).  Regular files only (a named pipe's bytes
    would be consumed); an input whose start cannot be read is left to its task (an error row of its own)."""
    from ...inputs import SNIFF_BYTES, binary_problem, input_label, open_input
    from ..score import epd_chunks, pgn_lines

    for path in files:
        kind = input_kind(path)
        if kind not in ("epd", "pgn") or not os.path.isfile(path):
            continue
        try:
            with open_input(path, text=False) as inp:
                head = inp.binary.read(SNIFF_BYTES)
        except (OSError, ValueError, EOFError):
            continue
        label, advice = input_label(path), _kind_advice(kind)
        problem = binary_problem(head, label, "an EPD/FEN text file" if kind == "epd" else "a PGN text file")
        if problem:  # (before the cut to whole lines: a NUL after the last newline, as in text padded with NULs)
            raise InputKindError(problem)
        head = head[:head.rfind(b"\n") + 1] or head  # whole lines (or the first line's start)
        if kind == "epd":
            next(epd_chunks(io.BytesIO(head), label, advice=advice), None)
        else:
            text = io.TextIOWrapper(io.BufferedReader(io.BytesIO(head)), encoding="utf-8-sig", errors="replace")
            for _ in pgn_lines(text, label, advice=advice):
                pass


#: Dask tasks per worker thread that :func:`batches` leaves at least (when there are inputs enough), so
#: that the cluster still balances (a thread that falls behind hands on half of its share).  Fewer, larger
#: Dask tasks: each costs a worker 4-6 ms of CPU and the scheduler some more (benchmarks/bench_distributed.py).
TASKS_PER_THREAD = 2


def batches(tasks: Sequence[Task], threads: int, split_bytes: int = SPLIT_BYTES) -> list[list[Task]]:
    """``tasks`` grouped into the Dask tasks of a cluster job on ``threads`` worker threads.

    Dask costs a worker several milliseconds of CPU per task (receiving it, handing it to a thread,
    reporting back: 4-6 ms in ``benchmarks/bench_distributed.py``), a fifth of scoring a shard of
    10,000 positions; so
    consecutive whole inputs that are regular files go several to a Dask task, as near as they come to
    ``total bytes / (TASKS_PER_THREAD * threads)`` (at most ``split_bytes``) each (inputs of one size
    make groups of one size, so the workers finish together).  Ranges of a split
    input (already large), inputs of unknown size (FIFOs) and inputs that large go alone;
    ``threads`` < 1 (no worker yet): every task alone.
    """
    sizes = [os.path.getsize(t.path) if t.count == 1 and os.path.isfile(t.path) else None for t in tasks]
    known = sum(size for size in sizes if size is not None)
    if threads < 1 or not known:
        return [[t] for t in tasks]
    target = min(split_bytes, known // (TASKS_PER_THREAD * threads))
    groups: list[list[Task]] = []
    group: list[Task] = []
    held = 0
    for task, size in zip(tasks, sizes):
        if size is None or size >= target:
            groups.append([task])
            continue
        if group and held + size / 2 > target:  # the nearest to target: equal inputs make equal groups
            groups.append(group)
            group, held = [], 0
        group.append(task)
        held += size
    return groups + [group] if group else groups

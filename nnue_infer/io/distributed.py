"""Score datasets on a Dask cluster: EPD / PGN / Parquet / .binpack shards -> a partitioned Parquet dataset.

Needs the ``dask`` extra (``pip install 'nnue-infer[dask]'``: ``dask[distributed,dataframe]``,
``pyarrow`` and the Rust PGN parser).  Nothing else in nnue-infer imports this module.

* :func:`score_files` scores files (globs; plain, gzip or Zstandard) into a directory: one
  ``part-*.parquet`` per task (schema: :func:`nnue_infer.io.parquet.schema`) and, for a task
  with bad rows, ``_errors/part-*.parquet`` (source, line, game, message).  A task is an input
  file, or a range of a large one (:func:`plan_tasks`: uncompressed EPD by line-aligned byte
  range, uncompressed PGN by whole games, Parquet by row groups, an uncompressed ``.binpack`` by whole blocks, which decode
  independently), so a cluster balances and a dead worker loses little.  A bad
  row never stops the job.  Each part is written to a temporary name and renamed, so a part
  that exists is complete: a re-run skips the tasks whose part exists (ranges are recorded in
  the manifest and reused), and a task re-run after a worker died rewrites the same name (no
  duplicated or missing rows; the temporary file of a part a killed worker was writing is removed by a later run,
  :data:`STALE_SECONDS` after it was last written).  ``_nnue_infer.json`` records the network and each input's plan; a re-run
  with another network is refused, and runs into one output plan one at a time (``_nnue_infer.lock``),
  so a concurrent run with other task sizes follows the first run's plan.
* :func:`evaluate_dataframe` adds ``value``, ``cp`` and ``cp_white`` columns to a Dask
  DataFrame of FENs.

Workers get the network *by name* (a path every worker can read, ``default`` or
``stockfish``) and load it once per process (:func:`worker_evaluator`); arrays never travel
with the tasks, and only a small summary returns from each (the client never holds the data).
Each worker is warmed up once (:func:`warm_up`: the network and the compiled kernels,
from the Numba cache that the worker processes of a machine share).  Dask retries the tasks of a worker that died (``distributed.scheduler.allowed-failures``,
3 by default).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import io
import json
import logging
import numbers
import os
import re
import shutil
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputKindError

#: Input kinds by file name (compression suffixes are stripped first).
INPUT_KIND_BY_SUFFIX = {".epd": "epd", ".fen": "epd", ".txt": "epd", ".pgn": "pgn", ".parquet": "parquet", ".binpack": "binpack"}
_COMPRESSED = (".gz", ".zst", ".zstd")
MANIFEST = "_nnue_infer.json"
log = logging.getLogger("nnue_infer.io")
#: Sub-directory of the errors table (a leading "_": dataset readers skip it when reading the positions).
ERRORS_DIR = "_errors"

_local = threading.local()
_lock = threading.Lock()


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


def _stamp(network: str) -> tuple | None:
    """What identifies the file a network spec reads (``None`` for a name that is no file: ``default``,
    ``stockfish``, ``sf16``..., networks loaded once per process): its real path, device, inode, size,
    modification and status-change times (``st_ctime_ns`` moves on every write or rename, and nothing
    sets it back), so a file replaced or rewritten under the same name is another network."""
    try:
        st = os.stat(network)
    except (OSError, ValueError, TypeError):
        return None
    return os.path.realpath(network), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


@dataclass
class _Version:
    """One version of the file a network spec reads (:func:`_stamp`), as this process knows it: the
    network (when an evaluator needed it), its ``repr`` and SHA-256 (when a manifest or a check needed
    them: hashing Stockfish 15.1's ~46 MB of parameters took 34 ms of the client's CPU per job)."""

    stamp: tuple | None
    network: object = None
    text: str | None = None
    sha256: str | None = None


#: The current :class:`_Version` of each network spec used in this process (an older one is dropped).
_versions: dict[str, _Version] = {}


def _version(spec: str, *, keep: bool = False, digest: bool = False) -> _Version:
    """``spec``'s :class:`_Version` for its file as it is now, loading the network once per version (kept
    when ``keep``) and hashing it once (``digest``).  Raises as :func:`nnue_infer.resources.network_from_spec`."""
    from ..network import network_digest
    from ..resources import network_from_spec

    stamp = _stamp(spec)
    with _lock:
        v = _versions.get(spec)
        if v is None or v.stamp != stamp:
            v = _versions[spec] = _Version(stamp)
        if (keep and v.network is None) or (digest and v.sha256 is None):
            net = v.network if v.network is not None else network_from_spec(spec)
            if keep:
                v.network = net
            if digest and v.sha256 is None:
                v.text, v.sha256 = repr(net), network_digest(net)
    return v


def network_identity(network: str) -> dict:
    """``{"network", "network_repr", "network_sha256"}`` of the network spec ``network`` (what a dataset's
    manifest records: :func:`nnue_infer.network.network_digest`), computed once per file version
    (:func:`_stamp`) in this process: a later job with the same unchanged file hashes nothing.  Raises
    as :func:`nnue_infer.resources.network_from_spec` for a network that cannot be read."""
    v = _version(network, digest=True)
    return {"network": network, "network_repr": v.text, "network_sha256": v.sha256}


def worker_evaluator(network: str, sha256: str | None = None):
    """This process's :class:`~nnue_infer.evaluator.Evaluator` for ``network`` (a path or spec name),
    loaded on first use and kept while the file is unchanged (:func:`_stamp`: a network file replaced
    under the same name is loaded again, so a long-lived worker never scores with the old one while the
    manifest names the new one); one per thread (an ``Evaluator`` is not thread-safe).

    ``sha256``: the job's network digest (its manifest's, :func:`network_identity`); a network whose
    digest differs (the file replaced or rewritten while the job ran) raises
    :class:`~nnue_infer.errors.NetworkChangedError` instead of scoring rows with another network than
    the one the manifest names.  The digest is computed once per file version and process.
    """
    from ..evaluator import Evaluator

    v = _version(network, keep=True, digest=sha256 is not None)
    if sha256 is not None and v.sha256 != sha256:
        from ..errors import NetworkChangedError

        raise NetworkChangedError(f"{network}: now holds the network with SHA-256 {v.sha256[:12]}..., not the "
                                  f"job's {sha256[:12]}... (the file changed while the job ran); the parts "
                                  "written so far are the job's network's: score the rest into another "
                                  "directory, or delete this one and start again")
    cache = getattr(_local, "evaluators", None)
    if cache is None:
        cache = _local.evaluators = {}
    net, ev = cache.get(network, (None, None))
    if net is not v.network:  # first use in this thread, or a new version of the file
        ev = Evaluator(v.network)  # type: ignore[arg-type]
        cache[network] = (v.network, ev)
    return ev


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

    from .epd import read_epd
    from .score import WARM_UP_EPD, score_epd, warm_up_files

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


def _worker_threads(client) -> dict[str, int]:
    """{worker address: threads} of ``client``'s cluster: from the table of workers its cluster object keeps
    (``client.cluster.scheduler_info``, which the scheduler's stream of worker events keeps current: a
    ``LocalCluster``, most deployment clusters), else asked of the scheduler (``client.nthreads()``, a round
    trip, which kept a job of 16 shards on a LocalCluster of 2 workers waiting 6-9 ms when it followed another)."""
    info = getattr(getattr(client, "cluster", None), "scheduler_info", None)
    workers = info.get("workers") if isinstance(info, dict) else None
    if workers and all(isinstance(w, dict) and isinstance(w.get("nthreads"), int) for w in workers.values()):
        return {address: w["nthreads"] for address, w in workers.items()}
    return client.nthreads()


def _one_per_host(workers: Sequence[str]) -> list[str]:
    """The first of ``workers`` (addresses) on each host: warmed first (:func:`_warm_workers`), so that a machine's
    kernels compile once (2 cold workers of one machine compiling at once took twice the CPU of one)."""
    from distributed.comm import get_address_host

    first: dict[str, str] = {}
    for w in workers:
        first.setdefault(get_address_host(w), w)
    return list(first.values())


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


def _set_threads(threads: int | None) -> None:
    if threads:
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))


def part_name(path: str, byte_range: tuple[int, int] | None = None) -> str:
    """Stable name of an input's part: its base name and a hash of its real path (links and other names
    of one file give one part, in any run) (and, for a task
    that reads a range of a split input, the range's start: byte, or Parquet row group)."""
    real = os.path.realpath(path)
    digest = hashlib.sha1(real.encode()).hexdigest()[:12]
    base = os.path.basename(real).replace(".", "_")[:60]
    at = f"-b{byte_range[0]}" if byte_range is not None else ""
    return f"part-{base}-{digest}{at}.parquet"


#: Dask settings for workers that only score: no statistical profiler (a thread sampling every task's
#: stack 100 times a second, for the dashboard; it cost a worker about a third of its wall clock here),
#: and the periodic checks made rarer: the event loop's tick (20 ms: only warns of a blocked loop), the
#: system monitor (500 ms: dashboard figures) and the memory monitor (100 ms: spilling and pausing near
#: the memory limit; a task here holds one input's rows).  Measured here (2 workers, idle): 16-17 ms of
#: CPU per worker-second with the profiler off, 3 ms with these.
QUIET_WORKERS = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "500ms",
                 "distributed.admin.system-monitor.interval": "2s", "distributed.worker.memory.monitor-interval": "1s"}
#: EPD/FEN or PGN text per task: an uncompressed input over 1.5 times this is split into byte ranges of
#: about this size, of whole lines (EPD; 32 MiB: about 500,000 positions, a few CPU seconds of scoring)
#: or whole games (PGN; 32 MiB: tens of thousands of games).
SPLIT_BYTES = 32 << 20
#: Rows of a Parquet input per task (whole row groups; a file of one row group is one task).
SPLIT_ROWS = 1 << 19
#: Bytes of an uncompressed ``.binpack`` input per task (whole blocks; blocks are independent).
BINPACK_TASK_BYTES = 64 << 20
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
    from ..inputs import MAX_LINE
    from .pgn import Unsplittable, game_starts

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
        from .training_data import block_ranges

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

    from .epd import MAX_LINE_BYTES, read_epd

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


def _check_kinds(files: Sequence[str]) -> None:
    """Raise the ``InputKindError`` an EPD or PGN input's task would raise when its first
    :data:`~nnue_infer.inputs.SNIFF_BYTES` (decompressed) show another kind: binary data, PGN in an EPD file, FENs in
    a PGN file.  Checked in the client before planning, so that a job refused for one input writes nothing (it left
    the manifest and the lock, and the parts other tasks had finished).  Regular files only (a named pipe's bytes
    would be consumed); an input whose start cannot be read is left to its task (an error row of its own)."""
    from ..inputs import SNIFF_BYTES, binary_problem, input_label, open_input
    from .score import epd_chunks, pgn_lines

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


def _task_tables(task: Task, ev, column: str) -> tuple[Iterator[dict], dict[int, str]]:
    """The result tables (:mod:`nnue_infer.io.score`) of one task, and the rows (by line) whose
    message is the cell's problem (Parquet inputs)."""
    from ..inputs import input_label, open_input
    from .score import epd_chunks, pgn_lines
    from .score import score_epd, score_pgn

    label = input_label(task.path)
    advice = _kind_advice(task.kind)
    if task.kind == "parquet":
        rows, bad = _parquet_rows(task, column)
        return score_epd(ev, rows, operations=False), bad

    def tables() -> Iterator[dict]:
        if task.kind == "binpack":  # a range's chains are numbered (game) from 0 at its first block
            from .score import score_training_data
            from .training_data import iter_chunks, read_range

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

    from . import parquet as P
    from .output import TextColumn, take

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

    from .parquet import write_table

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

    from .parquet import errors_schema, write_table

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


def _check_manifest(out_dir: str, network: str, identity: dict | None = None) -> None:
    """Create ``out_dir`` and its manifest (written atomically), or check that an existing one names the same
    network.  The network is read first (``identity``: :func:`network_identity`, computed when not given):
    a network that cannot be read creates nothing."""
    if identity is None:
        identity = network_identity(network)
    os.makedirs(out_dir, exist_ok=True)
    if not _refuse_by_manifest(out_dir, network, identity):
        _write_manifest(os.path.join(out_dir, MANIFEST), identity | {"schema": "nnue_infer.parquet.schema"})


def _refuse_by_manifest(out_dir: str, network: str, identity: dict) -> bool:
    """``ValueError`` when the dataset directory ``out_dir`` cannot take results of ``network`` (``identity``: its
    :func:`network_identity`): its manifest names another network or version, is damaged, or is missing beside
    parts.  Reads only; returns whether the manifest exists (``False`` also for no directory)."""
    path = os.path.join(out_dir, MANIFEST)
    if not os.path.exists(path) and os.path.isdir(out_dir):
        parts = sorted(n for n in os.listdir(out_dir) if _PART.fullmatch(n))
        if parts:  # their network and plans are unknown: new plans would score rows again under other names
            raise ValueError(f"{out_dir} holds parts ({', '.join(parts[:2])}{', ...' if len(parts) > 2 else ''}) "
                             f"but no manifest ({MANIFEST}, deleted?): the network and the task plans they were "
                             "scored with are unknown, so a run could write their rows again; use another output "
                             "directory, or delete the parts to score again")
    if os.path.exists(path):
        old = _read_manifest(path)
        if old.get("network") != network:
            raise ValueError(f"{out_dir} holds results of network {old.get('network')!r}, not {network!r}: "
                             "use another output directory")
        if old.get("network_sha256") != identity["network_sha256"]:
            was = ("an unrecorded version of it (a manifest of an older nnue-infer)" if "network_sha256" not in old
                   else f"other parameters (SHA-256 {old['network_sha256'][:12]}..., now "
                        f"{identity['network_sha256'][:12]}...: the file was replaced, or the package updated)")
            raise ValueError(f"{out_dir} holds results of {network!r} with {was}: use another output directory")
        return True
    return False


def _read_manifest(path: str) -> dict:
    """The manifest ``path`` (:func:`_check_manifest`, :func:`plan_tasks`); ``ValueError`` naming it and what is
    wrong when it is not one nnue-infer wrote (cut short, edited, another program's file): a run neither guesses
    the plans of a damaged manifest nor writes over it."""
    try:
        with open(path, "rb") as f:
            manifest = json.loads(f.read().decode("utf-8"))
        problem = _manifest_problem(manifest)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = f"not JSON ({exc})"
    if problem:
        raise ValueError(f"{path}: {problem}: not a manifest as nnue-infer writes it (damaged or edited), so the "
                         "plans of the parts beside it are unknown: use another output directory, or delete "
                         f"{os.path.dirname(path) or '.'} to score again")
    return manifest


def _manifest_problem(manifest) -> str | None:
    """What makes the JSON value ``manifest`` no manifest (its shape: :func:`plan_tasks`), or ``None``."""
    def integer(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if not isinstance(manifest, dict):
        return f"a JSON {type(manifest).__name__}, not an object"
    for key in ("network", "network_repr", "network_sha256", "schema"):
        if key in manifest and not isinstance(manifest[key], str):
            return f"{key!r} is not a string"
    for key in ("ranges", "sizes", "mtimes"):
        if not isinstance(manifest.get(key, {}), dict):
            return f"{key!r} is not an object"
    for key in ("sizes", "mtimes"):
        for name, value in manifest.get(key, {}).items():
            if not integer(value):
                return f"{key!r} of {name!r} is not an integer"
    for name, plan in manifest.get("ranges", {}).items():
        ranges = plan.get("ranges") if isinstance(plan, dict) else None
        if not (isinstance(ranges, list) and ranges and integer(plan.get("size"))
                and all(isinstance(r, list) and 2 <= len(r) <= 4 and all(map(integer, r)) for r in ranges)):
            return f"the plan of {name!r} is not a size and a list of ranges of integers"
    return None


def _write_manifest(path: str, manifest: dict) -> None:
    """Write the manifest ``path`` atomically (a temporary file of this process, then a rename)."""
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(manifest))  # one write (json.dump writes each token on its own)
    os.replace(tmp, path)


#: The lock file of an output directory: held while a run checks and plans (:func:`planning`).
LOCK = "_nnue_infer.lock"
#: Names of the parts :func:`score_files` writes (:func:`part_name`).
_PART = re.compile(r"part-.*-[0-9a-f]{12}(-b\d+)?\.parquet", re.S)
#: Names of the files :func:`score_files` writes into a dataset directory (:func:`expand_inputs` passes over them):
#: parts, the manifest (and its temporary names) and the lock.
_OWN_FILE = re.compile(rf"{_PART.pattern}|{re.escape(MANIFEST)}(\.tmp-.*)?|{re.escape(LOCK)}", re.S)
#: Temporary files of parts (:func:`nnue_infer.inputs.replacing`) and of the manifest (:func:`_write_manifest`).
_TEMPORARY = re.compile(rf"\.{_PART.pattern}\.tmp-\d+-\d+|{re.escape(MANIFEST)}\.tmp-\d+-\d+", re.S)
#: Seconds after which a temporary file of a dataset directory is a dead writer's (a worker killed while it wrote a
#: part) and a run into the directory removes it (:func:`_remove_stale_temporaries`): a live writer's exists for the
#: one call that writes a part put together in memory.
STALE_SECONDS = 600


def _remove_stale_temporaries(out_dir: str) -> list[str]:
    """Remove the temporary files (:data:`_TEMPORARY`) of ``out_dir`` and its errors directory last written more than
    :data:`STALE_SECONDS` ago: those of writers that died (readers skip them, being hidden, but they took the disk
    space of a part each).  Returns the paths removed (a warning names how many and the first)."""
    import time

    removed = []
    now = time.time()
    for directory in (out_dir, os.path.join(out_dir, ERRORS_DIR)):
        try:
            names = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            path = os.path.join(directory, name)
            with contextlib.suppress(OSError):  # removed by another run first, or not ours to remove: left
                if _TEMPORARY.fullmatch(name) and os.path.isfile(path) and not os.path.islink(path) \
                        and now - os.stat(path).st_mtime > STALE_SECONDS:
                    os.remove(path)
                    removed.append(path)
    if removed:
        log.warning("removed %d temporary file(s) of writers that died (killed workers), e.g. %s", len(removed),
                    removed[0])
    return removed


@contextlib.contextmanager
def planning(out_dir: str) -> Iterator[None]:
    """Hold ``out_dir``'s lock (:data:`LOCK`, created with the directory) while the block reads and writes the
    manifest: runs into one output plan one after another, so a second run follows the first one's plan
    (ranges and whole inputs recorded in the manifest) instead of planning other tasks for the same rows.
    ``flock`` where there is one (every open of the lock file excludes the others, threads too), else
    ``msvcrt.locking``; on a file system that cannot lock (``ENOLCK``, ``EOPNOTSUPP``: some network file
    systems) runs go unlocked, as before there was a lock."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, LOCK), "a+b") as f:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            f.seek(0)
            while True:
                try:
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after 10 s
                    continue
            try:
                yield
            finally:
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
            return
        try:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.warning("waiting for another run planning into %s (it holds %s)", out_dir, LOCK)
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP):
                raise
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@dataclass
class ScoreReport:
    """What :func:`score_files` did: per task (an input, or a range of a large one), its summary
    (see :func:`score_task`)."""

    output: str
    parts: list[dict] = field(default_factory=list)
    #: Messages for the inputs that changed while the job scored them (:func:`_changed_inputs`).
    changed: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows in the parts of the tasks (also of those skipped because they were done before)."""
        return sum(p["rows"] or 0 for p in self.parts)

    @property
    def errors(self) -> int:
        """Rows in the errors tables of the tasks."""
        return sum(p["errors"] or 0 for p in self.parts)

    @property
    def skipped(self) -> int:
        """Tasks whose part already existed when they ran."""
        return sum(bool(p["skipped"]) for p in self.parts)

    @property
    def failed(self) -> list[str]:
        """The messages of the tasks whose input could not be read (no part written: a re-run tries them again)."""
        return [p["failed"] for p in self.parts if p.get("failed")]


def check_job(inputs: str | Sequence[str], output: str, network: str = "default", *, column: str = "fen",
              compression: str = "zstd", threads: int | None = None) -> tuple[list[str], dict]:
    """The checks :func:`score_files` makes before any work, reading only (nothing is created): a refused job fails
    here at once, before a cluster is started for it (:func:`run_job`).  Returns the input files
    (:func:`expand_inputs`) and the network's :func:`network_identity`.

    Raises ``ValueError`` (an unknown codec, input kind, a file name that is not UTF-8, a dataset directory whose
    manifest names another network or is damaged or missing beside parts), ``NotADirectoryError`` (``output`` or
    its ``_errors`` is a file), ``FileNotFoundError`` (a pattern matching nothing),
    :class:`~nnue_infer.errors.InputKindError` (a Parquet input without ``column``, an EPD / PGN input holding
    binary data or the other kind), or as :func:`nnue_infer.resources.network_from_spec` (a network that cannot be
    read)."""
    if compression not in CODECS:
        raise ValueError(f"unknown Parquet compression {compression!r}: one of {', '.join(CODECS)}")
    if threads is not None:
        _check_task_sizes(threads=threads)
    if os.path.exists(output) and not os.path.isdir(output):
        raise NotADirectoryError(f"{output}: exists and is not a directory (score_files writes a dataset directory "
                                 "of Parquet parts there)")
    errors_dir = os.path.join(output, ERRORS_DIR)
    if os.path.lexists(errors_dir) and not os.path.isdir(errors_dir):
        raise NotADirectoryError(f"{errors_dir}: exists and is not a directory (score_files writes the errors "
                                 "table there): move it away or use another output directory")
    files = expand_inputs(inputs, output)
    for f in files:
        input_kind(f)  # unknown kinds fail before any work
        try:
            f.encode("utf-8")
        except UnicodeEncodeError:  # bytes of another encoding, decoded as surrogates
            raise ValueError(f"{f!r}: the file name is not UTF-8, and the dataset's source column is UTF-8 text "
                             "(it would hold bytes no reader can decode): rename the file") from None
    _check_columns(files, column)  # so do Parquet inputs without the FEN column
    _check_kinds(files)  # and EPD / PGN inputs holding another kind
    identity = network_identity(network)  # a network that cannot be read fails before anything is created
    _refuse_by_manifest(output, network, identity)  # (checked again under the dataset's lock by score_files)
    return files, identity


def score_files(inputs: str | Sequence[str], output: str, network: str = "default", client=None, *,
                threads: int | None = None, column: str = "fen", compression: str = "zstd",
                progress: Callable[[dict], None] | None = None,
                split_bytes: int = SPLIT_BYTES, split_rows: int = SPLIT_ROWS,
                binpack_task_bytes: int = BINPACK_TASK_BYTES) -> ScoreReport:
    """Score EPD / PGN / Parquet / ``.binpack`` files into the Parquet dataset directory ``output``, on a Dask cluster.

    Parameters
    ----------
    inputs : str or sequence of str
        Paths or glob patterns (``'shards/*.epd.zst'``); every worker must be able to read them
        (and this process, which plans the tasks).  A file named twice is scored once.  On a cluster, relative
        paths (and ``output``) are made absolute against this process's working directory before they go to
        the workers, which may run in other directories; the ``source`` column then holds the absolute path.
    output : str
        Dataset directory (created): a ``part-*.parquet`` per task, ``_errors/``, ``_nnue_infer.json``.
        Read it back with ``pyarrow.parquet.read_table(output)`` (it skips ``_errors/``) or
        ``dask.dataframe.read_parquet(output + "/part-*.parquet")`` (Dask reads ``_errors/`` too otherwise).
    network : str
        A network file every worker can read (on a cluster, a relative name is made absolute as the inputs'),
        ``default`` or ``stockfish``.
    client : distributed.Client, optional
        The cluster (each worker is warmed up first: :func:`warm_up`); ``None`` scores in this
        process, one task after another.
    threads : int, optional
        Numba threads per task (default: Numba's default, all cores of the worker's machine).
    column : str
        The FEN column of Parquet inputs (one FEN per cell; ``line`` is the row number).
    compression : str
        Codec of the parts' free text (FEN, SAN, UCI, messages), one of :data:`CODECS`.  zstd stores an
        EPD shard in 17 bytes per position, ``"none"`` in 62 and saves compressing the FENs (in
        ``benchmarks/bench_distributed.py`` 0.88-0.93x of ``evaluate_batch``'s thread CPU in process
        against zstd's 0.82-0.87x, paired medians of four runs at load 1.0-2.3).
    progress : callable, optional
        Called with each task's summary as it completes, with ``"tasks"``: the job's number of tasks.
    split_bytes, split_rows : int
        Task size: an uncompressed EPD file over 1.5 x ``split_bytes`` is split into line-aligned byte
        ranges of about that size, an uncompressed PGN file into byte ranges of whole games, a Parquet
        file over 1.5 x ``split_rows`` rows into runs of whole row groups; compressed EPD and PGN files
        are one task each (:func:`plan_tasks`).  On a cluster, small whole inputs run several to a Dask
        task (:func:`batches`).
    binpack_task_bytes : int
        An uncompressed ``.binpack`` input is split into tasks of whole blocks of about this many bytes.

    Returns
    -------
    ScoreReport
        With ``changed``: the inputs written to or removed while the job read them (their rows are the file as
        each task found it; the job still completes), as the CLI's exit status 1 reports them.
    """
    _check_task_sizes(split_bytes=split_bytes, split_rows=split_rows, binpack_task_bytes=binpack_task_bytes)
    files, identity = check_job(inputs, output, network, column=column, compression=compression, threads=threads)
    if client is not None:  # workers may run in other directories (a cluster of its own): paths resolved here
        files = [os.path.abspath(f) for f in files]
    stamps = {f: _file_stamp(f) for f in files}  # before planning: a change from here on is reported
    if client is not None:  # so do workers that cannot load it (warmed before the output directory is made)
        worker_network = _absolute_network(network)  # (the manifest keeps the name as given)
        workers = _warm_workers(client, worker_network, threads)
    created = not os.path.exists(output)
    with planning(output):
        fresh = not os.path.exists(os.path.join(output, MANIFEST))  # (else another run got here first)
        try:
            _check_manifest(output, network, identity)
            tasks = plan_tasks(files, output, split_bytes=split_bytes, split_rows=split_rows,
                               binpack_task_bytes=binpack_task_bytes)
            if not fresh:
                _remove_stale_temporaries(output)
        except BaseException:
            if created and fresh:  # a refused plan changes nothing; removed under the lock: no other run wrote here
                shutil.rmtree(output, ignore_errors=True)
            raise
    report = ScoreReport(output)

    def done(summary: dict) -> None:
        report.parts.append(summary)
        if progress:
            progress(summary | {"tasks": len(tasks)})

    if client is None:
        for task in tasks:
            done(score_task(task, network, output, threads=threads, column=column, compression=compression,
                            network_sha256=identity["network_sha256"]))
        report.changed = _changed_inputs(stamps)
        return report
    from distributed import as_completed

    run = os.urandom(4).hex()
    groups = batches(tasks, workers, split_bytes)
    futures = client.map(score_batch, groups, network=worker_network, out_dir=os.path.abspath(output),
                         threads=threads, column=column, compression=compression,
                         network_sha256=identity["network_sha256"],
                         pure=False, key=[f"nnue-infer-{run}-{g[0].part}" + (f"+{len(g) - 1}" if len(g) > 1 else "")
                                          for g in groups])
    # results gathered as tasks finish (with_results): a result() per task was a round trip each, the last one after
    # the work (2 workers, 16 shards of 10,000: 206 against 209 ms a job, 13.0 against 14.2 ms of client CPU)
    for _, summaries in as_completed(futures, with_results=True):
        for summary in summaries:
            done(summary)
    order = {(t.path, t.index): i for i, t in enumerate(tasks)}
    report.parts.sort(key=lambda p: order[p["input"], p["range"][0]])
    report.changed = _changed_inputs(stamps)
    return report


def _absolute_network(network: str) -> str:
    """``network`` for workers that may run in other directories: a file named relative to this process's directory
    made absolute, as the inputs (workers started elsewhere did not find it: a job failed at their warm-up, a
    DataFrame's partitions at compute time); names (``default``, ``sf16``: :func:`nnue_infer.resources.is_network_name`,
    the rule of ``network_from_spec``, so a directory named ``sf16`` here does not turn the name into its path) as
    they are."""
    from ..resources import is_network_name

    return network if is_network_name(network) else os.path.abspath(network)


def _file_stamp(path: str) -> tuple[int, int] | None:
    """(size, modification time in ns) of a regular file, ``None`` for others (FIFOs, devices: read once)."""
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns) if os.path.isfile(path) else None


def _changed_inputs(stamps: dict[str, tuple[int, int] | None]) -> list[str]:
    """Messages for the inputs whose :func:`_file_stamp` is not what it was before the job planned them: written to
    (appended to, rewritten, cut) or removed while their tasks read them, so their rows in the dataset are the file
    as each task found it, and a re-run refuses them while their parts exist (:func:`plan_tasks`)."""
    messages = []
    for path, before in stamps.items():
        now = _file_stamp(path)
        if before is None or now == before:
            continue
        if now == (-1, -1):
            what = "was removed"
        elif now is None:  # replaced by a directory, a FIFO, a device
            what = "is no longer a regular file"
        elif now[0] != before[0]:
            what = f"was {before[0]} bytes when the job planned it, {now[0]} now"
        else:
            what = f"was modified (still {now[0]} bytes)"
        messages.append(f"{path}: changed while it was scored ({what}): its rows in the dataset are the file as its "
                        "tasks read it; score it again into another output directory, or delete its parts")
        log.warning("%s", messages[-1])
    return messages


def _evaluate_partition(df, column: str, network: str, threads: int | None):
    """``df`` (pandas) with ``value``, ``cp`` and ``cp_white`` columns for its FEN column."""
    _set_threads(threads)
    ev = worker_evaluator(network)
    fens = df[column].tolist()
    try:
        values = ev.evaluate_batch(fens).astype(np.int64) if fens else np.zeros(0, np.int64)
    except (ValueError, TypeError) as exc:  # "row I: ...", I within this partition: name the frame's index label
        at = re.match(r"row (\d+): ", str(exc))
        if at is None:
            raise
        row = int(at.group(1))
        label = df.index[row]
        label = label.item() if isinstance(label, np.generic) else label  # 11, not np.int64(11)
        import pandas as pd

        cell = fens[row]
        null = pd.api.types.is_scalar(cell) and pd.isna(cell)  # None, NaN, pd.NA, NaT
        problem = "a null cell, not a FEN string" if null else str(exc)[at.end():]
        raise type(exc)(f"{column!r} at index {label!r}: {problem}") from None
    black = np.array([f.split()[1:2] == ["b"] for f in fens], bool)
    cp = np.sign(values) * (np.abs(100 * values) // ev.network.architecture.units_per_pawn)  # tdiv
    return df.assign(value=values, cp=cp, cp_white=np.where(black, -cp, cp))


def evaluate_dataframe(ddf, column: str = "fen", network: str = "default", *, threads: int | None = None):
    """A Dask DataFrame like ``ddf`` with ``value`` (int64, internal units, side to move), ``cp`` and
    ``cp_white`` (int64 centipawns) columns for the FENs in ``column``, computed lazily per partition.

    ``network`` is a path every worker can read (a relative one made absolute here), ``default`` or
    ``stockfish``; each worker process loads it once.  A bad FEN fails its partition with
    :class:`~nnue_infer.errors.FenError` / :class:`~nnue_infer.errors.PositionError` (``TypeError`` for a
    cell that is no string) naming the column and the row's index label; use :func:`score_files` for error
    tables.  ``KeyError`` at once when ``ddf`` has no ``column``.
    """
    if threads is not None:
        _check_task_sizes(threads=threads)
    if column not in ddf.columns:
        raise KeyError(f"no column {column!r} (columns: {', '.join(map(str, ddf.columns))})")
    meta = ddf._meta.assign(value=np.int64(0), cp=np.int64(0), cp_white=np.int64(0))
    return ddf.map_partitions(_evaluate_partition, column, _absolute_network(network), threads, meta=meta)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask's (``os.sched_getaffinity``: ``taskset``'s or a
    container's cpuset; a CPU quota, ``docker --cpus``, is not seen), else ``os.cpu_count()`` (at least 1); Numba counts its default threads so.
    A local cluster's size and threads (:func:`run_job`) and ``eval --workers``' limit count these."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # (no affinity masks: macOS, Windows)
        return os.cpu_count() or 1


def run_job(inputs: Sequence[str], output: str, network: str, *, scheduler: str | None = None,
            workers: int | None = None, progress: bool | None = None, log: Callable[[str], None] = print) -> int:
    """``nnue-infer eval ... --output DIR.parquet --scheduler ADDRESS | --workers N``: score ``inputs`` on a
    Dask cluster with a progress bar over tasks (on stderr); returns the exit status (1 if any row
    or game was bad, as ``nnue-infer eval``).

    ``scheduler`` is a running scheduler's address (``tcp://host:8786``); ``workers`` starts a
    local cluster of that many worker processes (one Dask thread each; the cores this process may use,
    :func:`usable_cpus`, shared among them as Numba threads); neither: a local cluster with one worker per such core.
    """
    import sys

    import dask
    from distributed import Client, LocalCluster
    from tqdm import tqdm

    cluster = None
    threads = None
    if not scheduler:
        cpus = usable_cpus()  # (a cpuset's share: its machine's os.cpu_count() made a worker per host CPU)
        n = workers or cpus
        threads = max(1, cpus // n)
    # a job refused by its inputs, output or network fails at once, before a cluster is started or joined for it
    files, _ = check_job(inputs, output, network, threads=threads)
    if scheduler:
        client = Client(scheduler)
    else:
        # the workers load the kernels from this machine's Numba cache: compiled here first (once, with the command
        # line's notice on stderr), not by every worker at once and in silence (a new user's cold cache: 30-107 s
        # without a word when stderr was not a terminal, twice the CPU with 2 workers); loads them when cached
        warm_up(network, threads)
        with dask.config.set(QUIET_WORKERS):
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None,  # no dashboard; the scheduler's HTTP server (health,
                                   # metrics) on a free port: its default, 8787, is another cluster's if one runs
                                   scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
        client = Client(cluster)
    try:
        show = sys.stderr is not None and (progress or (progress is None and sys.stderr.isatty()))
        with tqdm(unit="task", file=sys.stderr, disable=not show, dynamic_ncols=True) as bar:
            def step(summary: dict) -> None:
                bar.total = summary["tasks"]
                bar.update(1)

            report = score_files(files, output, network, client, threads=threads, progress=step)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    for message in report.failed + report.changed:
        log(f"error: {message}")
    log(f"{output}: {report.rows} positions from {len(files)} input(s) ({report.skipped} task(s) done before), "
        f"{report.errors} error(s)" + (f" in {os.path.join(output, ERRORS_DIR)}" if report.errors else "")
        + (f"; {len(report.failed)} input(s) or range(s) not scored: a re-run scores them again once they are "
           "mended (a file cut into ranges that changed meanwhile is refused while its other parts exist: "
           "the refusal names them)"
           if report.failed else ""))
    return 1 if report.errors or report.changed else 0

"""Score datasets on a Dask cluster: EPD / PGN / Parquet / .binpack shards -> a partitioned Parquet dataset.

Needs the ``dask`` extra (``pip install 'nnue-infer[dask]'``: ``dask[distributed,dataframe]``,
``pyarrow`` and the Rust PGN parser).  Nothing else in nnue-infer imports this module.

* :func:`score_files` scores files (globs; plain, gzip or Zstandard) into a directory: one
  ``part-*.parquet`` per input file (schema: :func:`nnue_infer.io.parquet.schema`) and, for a
  file with bad rows, ``_errors/part-*.parquet`` (source, line, game, message).  A bad row
  never stops the job.  Each part is written to a temporary name and renamed, so a part that
  exists is complete: a re-run skips the inputs whose part exists, and a task re-run after a
  worker died rewrites the same name (no duplicated or missing rows).  ``_nnue_infer.json``
  records the network; a re-run with another network is refused.  An uncompressed ``.binpack``
  (Stockfish training data) is one task, and one part, per range of whole blocks
  (:func:`tasks_of`), since its blocks decode independently.
* :func:`evaluate_dataframe` adds ``value``, ``cp`` and ``cp_white`` columns to a Dask
  DataFrame of FENs.

Workers get the network *by name* (a path every worker can read, ``default`` or
``stockfish``) and load it once per process (:func:`worker_evaluator`); arrays never travel
with the tasks.  Dask retries the tasks of a worker that died (``distributed.scheduler.allowed-failures``,
3 by default).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

#: Input kinds by file name (compression suffixes are stripped first).
KINDS = {".epd": "epd", ".fen": "epd", ".txt": "epd", ".pgn": "pgn", ".parquet": "parquet", ".binpack": "binpack"}
#: Bytes of an uncompressed ``.binpack`` input per task (whole blocks; blocks are independent).
BINPACK_TASK_BYTES = 64 << 20
_COMPRESSED = (".gz", ".zst", ".zstd")
MANIFEST = "_nnue_infer.json"
#: Sub-directory of the errors table (a leading "_": dataset readers skip it when reading the positions).
ERRORS_DIR = "_errors"

_local = threading.local()
_lock = threading.Lock()
_evaluators: dict[str, object] = {}


def input_kind(path: str) -> str:
    """``"epd"``, ``"pgn"``, ``"parquet"`` or ``"binpack"`` from a file name (``.epd``/``.fen``/``.txt``,
    ``.pgn``, ``.parquet``, ``.binpack``, each optionally ``.gz`` / ``.zst``); ``ValueError`` otherwise."""
    name = path
    for suffix in _COMPRESSED:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    ext = os.path.splitext(name)[1].lower()
    if ext not in KINDS:
        raise ValueError(f"{path}: unknown input kind {ext!r} (expected .epd, .fen, .txt, .pgn, .parquet or .binpack, "
                         "optionally .gz or .zst)")
    return KINDS[ext]


def expand_inputs(inputs: str | Iterable[str]) -> list[str]:
    """Files named by ``inputs`` (paths or glob patterns), each pattern's matches sorted;
    ``FileNotFoundError`` for a pattern that matches nothing."""
    patterns = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files: list[str] = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        matches = [m for m in matches if os.path.exists(m) and not os.path.isdir(m)]  # files, FIFOs
        if not matches:
            raise FileNotFoundError(f"no input file matches {pattern!r}")
        files += matches
    return files


def worker_evaluator(network: str):
    """This process's :class:`~nnue_infer.evaluator.Evaluator` for ``network`` (a path or spec name),
    loaded on first use and kept; one per thread (an ``Evaluator`` is not thread-safe)."""
    from ..evaluator import Evaluator
    from ..resources import network_from_spec

    cache = getattr(_local, "evaluators", None)
    if cache is None:
        cache = _local.evaluators = {}
    ev = cache.get(network)
    if ev is None:
        with _lock:
            net = _evaluators.get(network)
            if net is None:
                net = _evaluators[network] = network_from_spec(network)
        ev = cache[network] = Evaluator(net)  # type: ignore[arg-type]
    return ev


def _set_threads(threads: int | None) -> None:
    if threads:
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))


def part_name(path: str, byte_range: tuple[int, int] | None = None) -> str:
    """Stable name of an input's part: its base name and a hash of its absolute path (and, for a
    task that reads a byte range of a ``.binpack``, the range's first byte)."""
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:12]
    base = os.path.basename(path).replace(".", "_")[:60]
    at = f"-b{byte_range[0]}" if byte_range is not None else ""
    return f"part-{base}-{digest}{at}.parquet"


def tasks_of(path: str, binpack_task_bytes: int = BINPACK_TASK_BYTES) -> list[tuple[str, tuple[int, int] | None]]:
    """The tasks of one input: ``(path, None)``, or for an uncompressed ``.binpack`` one
    ``(path, (start, stop))`` per range of whole blocks of about ``binpack_task_bytes``
    (:func:`nnue_infer.io.training_data.block_ranges`)."""
    if input_kind(path) != "binpack" or path.endswith(_COMPRESSED):
        return [(path, None)]
    from .training_data import block_ranges

    return [(path, r) for r in block_ranges(path, binpack_task_bytes)]


def _tables(path: str, kind: str, ev, column: str, threads: int | None, byte_range: tuple[int, int] | None = None):
    """Result tables (:mod:`nnue_infer.io.score`) of one input file (or byte range of a ``.binpack``)."""
    from .epd import iter_epd, read_epd
    from ..inputs import input_label, open_input
    from .score import score_epd, score_pgn, score_training_data

    if kind == "binpack":
        from .training_data import iter_chunks, read_range

        chunks = read_range(path, *byte_range) if byte_range is not None else iter_chunks(path, "binpack")
        for data in chunks:
            yield score_training_data(ev, data)
        return

    if kind == "pgn":
        with open_input(path) as inp:
            for table, _ in score_pgn(ev, inp.text, source=input_label(path)):
                yield table
        return
    if kind == "epd":
        with open_input(path, text=False) as inp:  # in bounded chunks, like the command line
            yield from score_epd(ev, iter_epd(inp.binary, input_label(path)))
        return
    import pyarrow.parquet as pq  # Parquet: one FEN per row, rows numbered from 1 like lines

    fens = pq.read_table(path, columns=[column]).column(column).to_pylist()
    data = "".join(f"{f}\n" for f in fens).encode()
    yield from score_epd(ev, read_epd(data))


def score_file(path: str, network: str, out_dir: str, *, threads: int | None = None, column: str = "fen",
               byte_range: tuple[int, int] | None = None) -> dict:
    """Score one input file into ``out_dir/part-*.parquet`` (and ``_errors/part-*.parquet``); the task of
    :func:`score_files`.  Skips a file whose part exists.  Returns ``{"input", "part", "rows", "errors",
    "skipped"}`` and, for work done, ``"seconds"`` (wall clock) and ``"thread_cpu_seconds"`` (CPU time of the
    task's thread; Numba's other threads not counted).  ``byte_range`` (from :func:`tasks_of`) limits a
    ``.binpack`` input to those blocks; its part is named after the range, and its rows' ``game`` numbers
    the chains from 0 at the range's first block (``line`` is empty for ``.binpack`` rows)."""
    import time

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from . import parquet as P

    out = os.path.join(out_dir, part_name(path, byte_range))
    errors_path = os.path.join(out_dir, ERRORS_DIR, part_name(path, byte_range))
    if os.path.exists(out):  # done before (a re-run, or a task re-run after its worker died)
        n_errors = pq.read_metadata(errors_path).num_rows if os.path.exists(errors_path) else 0
        return {"input": path, "part": out, "rows": pq.read_metadata(out).num_rows, "errors": n_errors,
                "skipped": True}
    wall, cpu = time.perf_counter(), time.thread_time()
    _set_threads(threads)
    ev = worker_evaluator(network)
    target, errors_target = P.schema(), P.errors_schema()
    parts, bad = [], []
    for table in _tables(path, input_kind(path), ev, column, threads, byte_range):
        arrow = P.to_arrow(table)
        failed = arrow.column("error").is_valid()
        if pc.any(failed).as_py():
            e = arrow.filter(failed)
            bad.append(P.conform(e.append_column("message", e.column("error")), path, errors_target))
            arrow = arrow.filter(pc.invert(failed))
        parts.append(P.conform(arrow, path, target))
    table = pa.concat_tables(parts) if parts else target.empty_table()
    n_errors = sum(t.num_rows for t in bad)
    if bad:
        os.makedirs(os.path.join(out_dir, ERRORS_DIR), exist_ok=True)
        P.write_table(pa.concat_tables(bad), errors_path)
    P.write_table(table, out)  # last: its existence marks the input as done
    return {"input": path, "part": out, "rows": table.num_rows, "errors": n_errors, "skipped": False,
            "seconds": time.perf_counter() - wall, "thread_cpu_seconds": time.thread_time() - cpu}


def _check_manifest(out_dir: str, network: str) -> None:
    """Create ``out_dir`` and its manifest, or check that an existing one names the same network."""
    from ..resources import network_from_spec

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, MANIFEST)
    net = network_from_spec(network)
    identity = {"network": network, "network_repr": repr(net)}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
        if old.get("network") != network:
            raise ValueError(f"{out_dir} holds results of network {old.get('network')!r}, not {network!r}: "
                             "use another output directory")
        return
    with open(path, "w", encoding="utf-8") as f:
        json.dump(identity | {"schema": "nnue_infer.parquet.schema"}, f)


@dataclass
class ScoreReport:
    """What :func:`score_files` did: per input, the task's summary (see :func:`score_file`)."""

    output: str
    parts: list[dict] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows in the parts of the inputs (also of those skipped because they were done before)."""
        return sum(p["rows"] or 0 for p in self.parts)

    @property
    def errors(self) -> int:
        """Rows in the errors tables of the inputs."""
        return sum(p["errors"] or 0 for p in self.parts)

    @property
    def skipped(self) -> int:
        """Inputs whose part already existed when their task ran."""
        return sum(bool(p["skipped"]) for p in self.parts)


def score_files(inputs: str | Sequence[str], output: str, network: str = "default", client=None, *,
                threads: int | None = None, column: str = "fen", progress: Callable[[dict], None] | None = None,
                binpack_task_bytes: int = BINPACK_TASK_BYTES) -> ScoreReport:
    """Score EPD / PGN / Parquet / ``.binpack`` files into the Parquet dataset directory ``output``, on a Dask cluster.

    Parameters
    ----------
    inputs : str or sequence of str
        Paths or glob patterns (``'shards/*.epd.zst'``); every worker must be able to read them.
    output : str
        Dataset directory (created): ``part-*.parquet`` per input, ``_errors/``, ``_nnue_infer.json``.
        Read it back with ``pyarrow.parquet.read_table(output)`` or ``dask.dataframe.read_parquet``.
    network : str
        A network file every worker can read, ``default`` or ``stockfish``.
    client : distributed.Client, optional
        The cluster; ``None`` scores in this process, one input after another.
    threads : int, optional
        Numba threads per task (default: Numba's default, all cores of the worker's machine).
    column : str
        The FEN column of Parquet inputs.
    progress : callable, optional
        Called with each task's summary as it completes (e.g. to advance a progress bar).
    binpack_task_bytes : int
        An uncompressed ``.binpack`` input is split into tasks of whole blocks of about this many
        bytes (:func:`tasks_of`); other inputs are one task each.

    Returns
    -------
    ScoreReport
    """
    files = expand_inputs(inputs)
    for f in files:
        input_kind(f)  # unknown kinds fail before any work
    tasks = [t for f in files for t in tasks_of(f, binpack_task_bytes)]
    _check_manifest(output, network)
    report = ScoreReport(output)
    if client is None:
        for path, byte_range in tasks:
            summary = score_file(path, network, output, threads=threads, column=column, byte_range=byte_range)
            report.parts.append(summary)
            if progress:
                progress(summary)
        return report
    from distributed import as_completed

    run = os.urandom(4).hex()
    futures = client.map(_score_task, tasks, network=network, out_dir=output, threads=threads, column=column,
                         pure=False, key=[f"nnue-infer-{run}-{part_name(*t)}" for t in tasks])
    for future in as_completed(futures):
        summary = future.result()
        report.parts.append(summary)
        if progress:
            progress(summary)
    order = {part_name(*t): i for i, t in enumerate(tasks)}
    report.parts.sort(key=lambda p: order[os.path.basename(p["part"])])
    return report


def _score_task(task: tuple[str, tuple[int, int] | None], **kwargs) -> dict:
    """:func:`score_file` of one ``(path, byte_range)`` task."""
    return score_file(task[0], byte_range=task[1], **kwargs)


def _evaluate_partition(df, column: str, network: str, threads: int | None):
    """``df`` (pandas) with ``value``, ``cp`` and ``cp_white`` columns for its FEN column."""
    _set_threads(threads)
    ev = worker_evaluator(network)
    fens = df[column].tolist()
    values = ev.evaluate_batch(fens).astype(np.int64) if fens else np.zeros(0, np.int64)
    black = np.array([f.split()[1:2] == ["b"] for f in fens], bool)
    cp = np.sign(values) * (np.abs(100 * values) // ev.network.architecture.units_per_pawn)  # tdiv
    return df.assign(value=values, cp=cp, cp_white=np.where(black, -cp, cp))


def evaluate_dataframe(ddf, column: str = "fen", network: str = "default", *, threads: int | None = None):
    """A Dask DataFrame like ``ddf`` with ``value`` (int32, internal units, side to move), ``cp`` and
    ``cp_white`` (int32 centipawns) columns for the FENs in ``column``, computed lazily per partition.

    ``network`` is a path every worker can read, ``default`` or ``stockfish``; each worker
    process loads it once.  A bad FEN fails its partition with
    :class:`~nnue_infer.errors.FenError` / :class:`~nnue_infer.errors.PositionError` (row index
    within the partition); use :func:`score_files` for error tables.
    """
    meta = ddf._meta.assign(value=np.int64(0), cp=np.int64(0), cp_white=np.int64(0))
    return ddf.map_partitions(_evaluate_partition, column, network, threads, meta=meta)


def run_job(inputs: Sequence[str], output: str, network: str, *, scheduler: str | None = None,
            workers: int | None = None, progress: bool | None = None, log: Callable[[str], None] = print) -> int:
    """``nnue-infer eval ... --output DIR.parquet --scheduler ADDRESS | --workers N``: score ``inputs`` on a
    Dask cluster with a progress bar over inputs (on stderr); returns the exit status (1 if any row
    or game was bad, as ``nnue-infer eval``).

    ``scheduler`` is a running scheduler's address (``tcp://host:8786``); ``workers`` starts a
    local cluster of that many worker processes (one thread each, the machine's cores shared
    among them); neither: a local cluster with one worker per core.
    """
    import sys

    from distributed import Client, LocalCluster
    from tqdm import tqdm

    files = expand_inputs(inputs)
    cluster = None
    threads = None
    if scheduler:
        client = Client(scheduler)
    else:
        n = workers or os.cpu_count() or 1
        threads = max(1, (os.cpu_count() or 1) // n)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None)
        client = Client(cluster)
    try:
        show = progress or (progress is None and sys.stderr.isatty())
        total = sum(len(tasks_of(f)) for f in files)
        with tqdm(total=total, unit="task", file=sys.stderr, disable=not show, dynamic_ncols=True) as bar:
            report = score_files(files, output, network, client, threads=threads, progress=lambda s: bar.update(1))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    log(f"{output}: {report.rows} positions from {len(files)} input(s) ({report.skipped} done before), "
        f"{report.errors} error(s)" + (f" in {os.path.join(output, ERRORS_DIR)}" if report.errors else ""))
    return 1 if report.errors else 0

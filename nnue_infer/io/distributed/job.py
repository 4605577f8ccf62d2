"""The job driver: :func:`score_files` (and :func:`check_job`, :func:`run_job`) plans the tasks, warms
the workers up, runs the tasks on a Dask cluster and reports (:class:`ScoreReport`).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .manifest import MANIFEST, _check_manifest, _refuse_by_manifest, _remove_stale_temporaries, planning
from .plan import (BINPACK_TASK_BYTES, SPLIT_BYTES, SPLIT_ROWS, _check_columns, _check_kinds, _check_task_sizes,
                   batches, expand_inputs, input_kind, plan_tasks)
from .task import CODECS, ERRORS_DIR, _warm_workers, score_batch, score_task, warm_up
from .workers import QUIET_WORKERS, _absolute_network, network_identity, usable_cpus


log = logging.getLogger("nnue_infer.io")


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

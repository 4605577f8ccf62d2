"""What a Dask worker process keeps: the network it scores with (loaded once per process and file
identity, :func:`worker_evaluator`), its threads, and the network's identity that a job records.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass


_local = threading.local()

_lock = threading.Lock()


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
    from ...network import network_digest
    from ...resources import network_from_spec

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
    from ...evaluator import Evaluator

    v = _version(network, keep=True, digest=sha256 is not None)
    if sha256 is not None and v.sha256 != sha256:
        from ...errors import NetworkChangedError

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


def _set_threads(threads: int | None) -> None:
    if threads:
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))


#: Dask settings for workers that only score: no statistical profiler (a thread sampling every task's
#: stack 100 times a second, for the dashboard; it cost a worker about a third of its wall clock here),
#: and the periodic checks made rarer: the event loop's tick (20 ms: only warns of a blocked loop), the
#: system monitor (500 ms: dashboard figures) and the memory monitor (100 ms: spilling and pausing near
#: the memory limit; a task here holds one input's rows).  Measured here (2 workers, idle): 16-17 ms of
#: CPU per worker-second with the profiler off, 3 ms with these.
QUIET_WORKERS = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "500ms",
                 "distributed.admin.system-monitor.interval": "2s", "distributed.worker.memory.monitor-interval": "1s"}


def _absolute_network(network: str) -> str:
    """``network`` for workers that may run in other directories: a file named relative to this process's directory
    made absolute, as the inputs (workers started elsewhere did not find it: a job failed at their warm-up, a
    DataFrame's partitions at compute time); names (``default``, ``sf16``: :func:`nnue_infer.resources.is_network_name`,
    the rule of ``network_from_spec``, so a directory named ``sf16`` here does not turn the name into its path) as
    they are."""
    from ...resources import is_network_name

    return network if is_network_name(network) else os.path.abspath(network)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask's (``os.sched_getaffinity``: ``taskset``'s or a
    container's cpuset; a CPU quota, ``docker --cpus``, is not seen), else ``os.cpu_count()`` (at least 1); Numba counts its default threads so.
    A local cluster's size and threads (:func:`run_job`) and ``eval --workers``' limit count these."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # (no affinity masks: macOS, Windows)
        return os.cpu_count() or 1

"""Which Numba threading layer runs the parallel kernels (``parallel=True``): one that survives ``fork``.

Numba picks its threading layer when the first parallel kernel runs.  Its default prefers
OpenMP, and with GNU OpenMP (libgomp, what Linux wheels use) a process that ran a parallel
kernel cannot ``fork``: every child of a ``multiprocessing`` pool started with ``fork``
(Linux's default before Python 3.14) prints "Terminating: fork() called from a process already
using GNU OpenMP, this is unsafe." and dies, so the pool never returns.

:func:`choose_threading_layer` (run when :mod:`nnue_infer.kernels` is imported) therefore asks
Numba for its ``"forksafe"`` selection: Intel TBB (the ``tbb`` package, a dependency where
wheels exist; fork-safe *and* thread-safe, dynamic scheduling), else ``workqueue`` (Numba's
built-in pool: fork-safe, but it aborts when two threads launch parallel kernels at once, so
every parallel call of nnue-infer holds :data:`PARALLEL_LOCK`).  A choice the
user made (``NUMBA_THREADING_LAYER``, or ``numba.config.THREADING_LAYER`` set before importing
nnue-infer) is kept, as is a layer Numba already started.

pip puts TBB's ``libtbb.so.12`` into ``<venv>/lib``, which the dynamic loader does not search
from a virtual environment, so Numba reports TBB missing; :func:`load_tbb` loads it from there
first (by absolute path, ``RTLD_GLOBAL``) so that Numba's own ``dlopen("libtbb.so.12")`` finds it.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

import numba

#: TBB's runtime interface version Numba requires (``numba/np/ufunc/parallel.py``: 12060 = oneTBB 2021.6).
MIN_TBB_INTERFACE = 12060
_TBB_NAMES = {"linux": "libtbb.so.12", "darwin": "libtbb.12.dylib", "win32": "tbb12.dll"}


def load_tbb() -> bool:
    """Load TBB's runtime (system path first, then the environment's ``lib``); whether a usable one is loaded."""
    name = _TBB_NAMES.get(sys.platform)
    if name is None:
        return False
    candidates = [name, os.path.join(sys.prefix, "lib", name), os.path.join(sys.prefix, "Library", "bin", name)]
    for path in candidates:
        try:
            lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_GLOBAL", 0) | getattr(os, "RTLD_NOW", 0))
            return int(lib.TBB_runtime_interface_version()) >= MIN_TBB_INTERFACE
        except (OSError, AttributeError):
            continue
    return False


def choose_threading_layer() -> str:
    """Select a fork-safe threading layer unless the user chose one; returns the configured name.

    Returns ``numba.config.THREADING_LAYER`` afterwards: ``"forksafe"`` when nnue-infer chose
    (TBB if :func:`load_tbb` succeeds, else ``workqueue``), otherwise the user's setting.
    """
    from numba.np.ufunc import parallel

    user_choice = os.environ.get("NUMBA_THREADING_LAYER") or numba.config.THREADING_LAYER != "default"
    if user_choice or parallel._is_initialized:  # a parallel kernel already ran: too late to change
        return numba.config.THREADING_LAYER
    load_tbb()
    numba.config.THREADING_LAYER = "forksafe"
    return numba.config.THREADING_LAYER


# Idle OpenMP threads sleep instead of spinning (unless the user chose otherwise): on a
# machine busy with other work, a spinning thread takes CPU from the one still computing
# (measured here: 10-30% more batch throughput with two threads at load average 6).  Read
# by libgomp when Numba starts its thread pool, at the first parallel kernel call; only when
# the user chose the OpenMP layer (NUMBA_THREADING_LAYER=omp).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class ParallelLock:
    """The lock held around every parallel kernel call (``with PARALLEL_LOCK: ...``).

    Numba's ``workqueue`` threading layer (the fallback when TBB is missing) aborts the process
    when two threads launch parallel kernels at once.  A forked child gets a fresh lock: a thread
    of the parent may have held it at the fork, and that thread does not exist in the child (its
    first batch would wait forever).  One object for the process, so modules that imported it by
    name see the child's fresh lock too.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> "ParallelLock":
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def _after_fork(self) -> None:
        self._lock = threading.Lock()


#: Held around every parallel kernel call (see :class:`ParallelLock`).
PARALLEL_LOCK = ParallelLock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=PARALLEL_LOCK._after_fork)

#: Chunks of rows per thread in the batch kernels, handed out one at a time: many, so a
#: thread slowed down by other work on the machine does not hold the others up.
CHUNKS_PER_THREAD = 32


def n_chunks() -> int:
    """Number of row chunks for the batch kernels with Numba's current thread count."""
    return CHUNKS_PER_THREAD * numba.get_num_threads()

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
every parallel call of nnue-infer holds :data:`nnue_infer.batch.PARALLEL_LOCK`).  A choice the
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

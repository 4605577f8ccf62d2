"""Numba's on-disk cache for the kernels: where it lives, when it is valid, and a notice while it fills.

**Validity.**  Numba stamps a cached kernel with its own source file, but the entry kernels
inline kernels of other files (``arena`` contains ``forward``, ``dense``, ``activation``,
``accumulator``, ...), so an edit of an inlined kernel would leave stale machine code in their
callers' cache.  :class:`KernelCacheLocator` stamps every kernel with the SHA-256 of the
contents of all of ``nnue_infer/kernels/*.py`` instead (:func:`kernels_stamp`): any change there
recompiles, and an unchanged tree reuses its cache whatever the files' times, the checkout's
folder or the machine (Numba's own key adds the CPU name and features and the Numba and Python
versions).

**Location.**  ``$NUMBA_CACHE_DIR`` if set, in ``nnue_infer-<stamp>`` below it: the path does
not depend on the checkout's folder, so a fresh clone, another worktree or a CI run with the same
kernel sources reuses it, and caches of other sources sit beside it.  Otherwise ``__pycache__``
next to the kernels, as Numba does; when the package's directory is read-only (a system or
shared install), the user's cache directory (:func:`user_cache_dir`, ``numba-<stamp>``).

**Notice.**  A cold compile takes seconds to minutes of CPU; :func:`install` registers a Numba
event listener that reports the first compile of an ``nnue_infer`` kernel in the process: one
line on stderr when the command line asked for it (:data:`notice`), else a ``logging`` record of
the ``nnue_infer`` logger (INFO).  A warm cache compiles nothing and says nothing.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import sys
from pathlib import Path

from numba.core import caching, event
from numba.core import config as numba_config

#: The directory whose files the stamp covers.
KERNELS = Path(__file__).resolve().parent
#: Where the notice goes: ``"stderr"`` (the command line, unless ``--quiet``), ``"log"`` (the Python
#: API: the ``nnue_infer`` logger) or ``None`` (nothing).
notice: str | None = "log"
log = logging.getLogger("nnue_infer")


def user_cache_dir() -> Path:
    """The user's cache directory for nnue-infer: ``$NNUE_INFER_CACHE``, else
    ``$XDG_CACHE_HOME/nnue-infer``, else ``~/.cache/nnue-infer``."""
    if os.environ.get("NNUE_INFER_CACHE"):
        return Path(os.environ["NNUE_INFER_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nnue-infer"


@functools.cache
def kernels_stamp() -> str:
    """SHA-256 (hex) of the names and contents of ``nnue_infer/kernels/*.py``, read once per process."""
    h = hashlib.sha256()
    for path in sorted(KERNELS.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_dirs(py_file: str) -> list[str]:
    """The cache directories for the kernel file ``py_file``, in order of preference (the first
    writable one is used)."""
    tag = kernels_stamp()[:16]
    if numba_config.CACHE_DIR:
        return [os.path.join(numba_config.CACHE_DIR, f"nnue_infer-{tag}")]
    return [os.path.join(os.path.dirname(py_file), "__pycache__"), str(user_cache_dir() / f"numba-{tag}")]


class KernelCacheLocator(caching._CacheLocator):
    """Numba cache locator of the ``nnue_infer/kernels`` files (see the module docstring); other
    files are left to Numba's own locators."""

    def __init__(self, py_func, py_file: str, path: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = path

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> tuple:
        return ("nnue_infer.kernels", kernels_stamp())

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file):
        if Path(py_file).resolve().parent != KERNELS:
            return None
        for path in cache_dirs(py_file):
            locator = cls(py_func, py_file, path)
            try:
                locator.ensure_cache_path()
            except OSError:  # not writable: the next one
                continue
            return locator
        return None


class _Notice(event.Listener):
    """Reports the first real compile (a cache miss) of an ``nnue_infer`` kernel, once per process."""

    done = False
    registered = False

    def on_start(self, ev: event.Event) -> None:
        if _Notice.done or notice is None:
            return
        dispatcher = ev.data["dispatcher"]
        if not dispatcher.py_func.__module__.startswith("nnue_infer."):
            return
        _Notice.done = True
        where = getattr(dispatcher._cache, "_cache_path", None) or "memory only"
        text = f"compiling kernels for this CPU (first use; cached in {where})"
        if notice == "stderr":
            if sys.stderr is not None:  # closed (2>&-): say nothing (print(file=None) would write to stdout)
                print(f"nnue-infer: {text}", file=sys.stderr, flush=True)
        else:
            log.info(text)

    def on_end(self, ev: event.Event) -> None:
        pass


def install() -> None:
    """Put :class:`KernelCacheLocator` first among Numba's locators and register the compile notice.

    Called by ``nnue_infer.kernels`` before any kernel is defined (a kernel's locator is chosen
    when its ``@njit(cache=True)`` decorator runs)."""
    impl = caching.CompileResultCacheImpl
    if KernelCacheLocator not in impl._locator_classes:
        impl._locator_classes = [KernelCacheLocator, *impl._locator_classes]
    if not _Notice.registered:
        _Notice.registered = True
        event.register("numba:compile", _Notice())

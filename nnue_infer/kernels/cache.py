"""Numba's on-disk cache for the kernels: where it lives, when it is valid, and a notice while it fills.

**Validity.**  Numba stamps a cached kernel with its own source file, but the entry kernels
inline kernels of other files (``arena`` contains ``forward``, ``dense``, ``activation``,
``accumulator``, ...), so an edit of an inlined kernel would leave stale machine code in their
callers' cache.  :class:`KernelCacheLocator` stamps every kernel with the SHA-256 of the
contents of every ``.py`` file below ``nnue_infer/kernels`` (its family folders included) instead (:func:`kernels_stamp`): any change there
recompiles, and an unchanged tree reuses its cache whatever the files' times, the checkout's
folder or the machine (Numba's own key adds the CPU name and features and the Numba and Python
versions).  The stamp is read once per process and the kernel modules are imported when first
needed: one that changed in between compiles for the process only (:func:`stamped_as_imported`).

**Location.**  ``$NUMBA_CACHE_DIR`` if set, in ``nnue_infer-<stamp>`` below it: the path does
not depend on the checkout's folder, so a fresh clone, another worktree or a CI run with the same
kernel sources reuses it, and caches of other sources sit beside it.  Otherwise ``__pycache__``
next to the kernels, as Numba does; when the package's directory is read-only (a system or
shared install), the user's cache directory (:func:`user_cache_dir`, ``numba-<stamp>``).  A
missing directory is made when the first kernel is saved there, not when the kernels are defined
(their modules imported): :func:`usable_cache_dir`.  When none of these can be written but one
holds kernels (a cache filled ahead of use, ``nnue-infer warmup``, then read-only: a read-only file system
or image, another user's directory), its kernels are loaded from it and those it lacks compile for
the process only, said once by a WARNING (:func:`readable_cache_dir`); with no such directory either,
a temporary directory of the process (:func:`private_cache_dir`).  The other candidates that hold kernels
(the package's ``__pycache__`` filled by another user, beside the user's writable cache) are read too: a
kernel the directory used lacks loads from them (:attr:`KernelCacheLocator.seeds`).

**Notice.**  A cold compile takes seconds to minutes of CPU; :func:`install` registers a Numba
event listener that reports compiles of ``nnue_infer`` kernels (cache misses) to the ``nnue_infer``
logger: the first one in the process as one INFO record (:data:`NOTICE`, with the usual cost and
the cache's directory), and the start and end of every compile (a kernel with the kernels compiled
inside it) as DEBUG records whose ``compile`` attribute is ``"start"`` or ``"end"`` (the end
record has ``cpu_seconds``).  The Python API leaves them to the application's logging
configuration; when there is none and stderr is a terminal (or a Jupyter kernel's), the notice is also printed there
(a first session would otherwise compile in silence); the command line shows the INFO record on stderr and, on a terminal, the elapsed
time while a compile runs (``nnue_infer.cli.main``), unless ``--quiet``.  A warm cache compiles
nothing and says nothing.

**Symbols.**  Numba names a compiled function's machine-code symbol by its qualified name and a
number from a counter that starts at 1 in every process (``FunctionIdentity._unique_ids``), so two
processes compiling two configurations of one kernel factory (two networks' entry kernels) in the
same order give different code the same symbol.  A process that later loads both from the cache (a
cache two processes filled: pytest-xdist's workers, Dask workers, two command-line runs with
different networks, caches copied together) links them into one library, where one symbol wins: the
second network ran the first's layers and returned wrong values, with no error (Numba issue #10486;
``tests/kernels/test_cache.py``).  :func:`fresh_symbol_numbers` starts the counter at a random 60-bit
number in every process and again in a forked child, so symbols of different processes differ.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

from numba.core import bytecode, caching, event, types
from numba.core.dispatcher import Dispatcher
from numba.core import config as numba_config

#: The directory whose files, and its subfolders' (``chess/``, ``nnue/``, ``data/``, ...), the stamp covers.
KERNELS = Path(__file__).resolve().parent
#: The first compile's notice (``%s``: the cache directory).  The cost is the measured range of one path's
#: cold compile on a 2-core machine (docs/benchmarks.md, ``benchmarks/bench_compile.py``).
#: Its figure: benchmarks/bench_compile.py, a cold cache, process CPU on a shared 2-core Xeon (load 10):
#: ``eval FEN`` 18 s, ``data convert`` 18 s, ``eval --epd`` 45 s.
NOTICE = "compiling kernels for this CPU (first use: about 15-45 s of CPU per path; cached in %s)"
log = logging.getLogger("nnue_infer")


def user_cache_dir() -> Path:
    """The user's cache directory for nnue-infer: ``$NNUE_INFER_CACHE``, else
    ``$XDG_CACHE_HOME/nnue-infer``, else ``~/.cache/nnue-infer``.

    A leading ``~`` of either variable is the home directory (a value set where no shell expands it,
    a Dockerfile's ``ENV`` or a systemd unit, made a directory named ``~`` in the working directory),
    and a relative ``$XDG_CACHE_HOME`` is ignored, as the XDG Base Directory specification says."""
    if os.environ.get("NNUE_INFER_CACHE"):
        return Path(os.path.expanduser(os.environ["NNUE_INFER_CACHE"]))
    base = os.path.expanduser(os.environ.get("XDG_CACHE_HOME") or "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nnue-infer"


#: SHA-256 (hex) of each kernel file (by its path below ``nnue_infer/kernels``, e.g. ``chess/attacks.py``)
#: as :func:`kernels_stamp` read it.
STAMPED: dict[str, str] = {}


def kernel_name(path: Path) -> str:
    """``path``'s name below ``nnue_infer/kernels`` (``forward.py`` at the top, ``nnue/forward.py`` in a
    family folder); its plain name for a file elsewhere."""
    try:
        return path.relative_to(KERNELS).as_posix()
    except ValueError:
        return path.name


def kernel_file(path: Path) -> bool:
    """Whether the resolved ``path`` is a file of ``nnue_infer/kernels`` or of one of its subfolders."""
    return KERNELS in path.parents


@functools.cache
def kernels_stamp() -> str:
    """SHA-256 (hex) of the paths (below ``nnue_infer/kernels``) and contents of every ``.py`` file of
    ``nnue_infer/kernels`` and its subfolders, read once per process (each file's own hash kept in
    :data:`STAMPED`)."""
    h = hashlib.sha256()
    for name, path in sorted((kernel_name(p), p) for p in KERNELS.rglob("*.py")):
        data = path.read_bytes()
        STAMPED[name] = hashlib.sha256(data).hexdigest()
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


@functools.cache
def stamped_as_imported(py_file: str) -> bool:
    """Whether the kernel file ``py_file``, as it is now (its module being imported: its kernels are
    being defined), is the file :func:`kernels_stamp` read.  The kernel modules are imported when first
    needed, so one edited after the stamp was taken (a ``git checkout`` or an edit while a notebook or
    a worker runs) would be compiled from its new source and saved under the stamp of the old sources,
    where every later process with the old sources loaded it: a silent wrong result until the kernels
    changed again.  Such a module's kernels compile for the process only, with a WARNING (once per
    file).  A :func:`register`-ed module is hashed as it is imported, so it always matches."""
    path = Path(py_file).resolve()
    if path in REGISTERED:
        return True
    kernels_stamp()
    try:
        same = kernel_file(path) and STAMPED.get(kernel_name(path)) == hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        same = False
    if not same:
        log.warning("%s changed since this process read the kernel sources: its kernels are compiled for this "
                    "process only, not cached (start a new process to use the cache)", path)
    return same


def usable_cache_dir(path: str) -> bool:
    """Whether ``path`` can hold kernel cache files: a directory this process can write a file in, or
    a missing one below a writable directory (Numba makes it, ``os.makedirs``, when it saves the first
    kernel: ``Cache._save_overload`` calls the locator's ``ensure_cache_path``).  Numba's own
    locators make the directory when a kernel is defined; ours only choose it then, so importing
    the kernels creates no directory."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        try:
            tempfile.TemporaryFile(dir=path).close()
        except OSError:
            return False
        return True
    parent = path
    while not os.path.lexists(parent):  # the nearest existing ancestor
        parent, below = os.path.dirname(parent), parent
        if parent == below:
            return False
    return parent != path and os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)


def readable_cache_dir(path: str) -> bool:
    """Whether ``path`` is an existing directory this process can list and read that holds kernel index
    files (``*.nbi``): a cache that cannot be written (:func:`usable_cache_dir` is false) but holds kernels
    compiled ahead of use.  A read-only package's ``__pycache__`` (a system install: Python's ``.pyc``
    files only) is none, so the user's cache after it in :func:`cache_dirs`, filled ahead, is read."""
    if not (os.path.isdir(path) and os.access(path, os.R_OK | os.X_OK)):
        return False
    try:
        with os.scandir(path) as entries:
            return any(entry.name.endswith(".nbi") for entry in entries)
    except OSError:
        return False


def cache_dirs(py_file: str) -> list[str]:
    """The cache directories for the kernel file ``py_file``, in order of preference (the first
    that is writable or can be made, :func:`usable_cache_dir`, is used).  The files of every family
    folder (``kernels/chess``, ``kernels/nnue``, ...) share ``nnue_infer/kernels/__pycache__``: one
    cache to fill, report (``nnue-infer info --cache``) and ship."""
    tag = kernels_stamp()[:16]
    if numba_config.CACHE_DIR:
        return [os.path.join(numba_config.CACHE_DIR, f"nnue_infer-{tag}")]
    beside = str(KERNELS) if kernel_file(Path(py_file).resolve()) else os.path.dirname(py_file)
    return [os.path.join(beside, "__pycache__"), str(user_cache_dir() / f"numba-{tag}")]


def closure_values(py_func, _seen: tuple = ()) -> tuple | None:
    """The closure variables of ``py_func`` as a stable value: integers and booleans as they are,
    a kernel (``Dispatcher``, e.g. a ``forward.Stages`` member called by an entry kernel) as its module,
    qualified name and closure values; ``()`` for a module-level kernel, None when a variable (or a
    called kernel's) is of another type (:func:`_index_key` then leaves the key to Numba).  A kernel
    calling itself, or one that calls it (the recursive search, ``kernels.search.alphabeta``), appears
    by its name alone inside its own value."""
    values = []
    for cell in py_func.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # not yet bound
            continue
        if isinstance(value, (bool, int)):
            values.append(value)
            continue
        if isinstance(value, Dispatcher) and (value.py_func is py_func or value.py_func in _seen):
            values.append((value.py_func.__module__, value.py_func.__qualname__))
            continue
        inner = closure_values(value.py_func, _seen + (py_func,)) if isinstance(value, Dispatcher) else None
        if inner is None:
            return None
        values.append((value.py_func.__module__, value.py_func.__qualname__, inner))
    return tuple(values)


def closure_tag(py_func) -> str:
    """A short hash of :func:`closure_values` of ``py_func`` (a kernel made per ``forward.Config``),
    ``""`` for a module-level kernel.

    Numba keeps every compilation of one function in one index file, the closures of one kernel
    factory included, and picks a data file's number by reading that index when it saves: two
    processes compiling two configurations of one entry kernel at once (pytest-xdist's workers,
    Dask workers) could both pick the same number and leave one configuration's index entry
    pointing at the other's machine code.  With the configuration in the file names
    (:meth:`KernelCacheLocator.get_disambiguator`) each configuration has files of its own, and two
    processes compiling the same one write the same entry.
    """
    values = closure_values(py_func)
    return hashlib.sha256(repr(values).encode()).hexdigest()[:8] if values else ""


def _index_key(self, sig, codegen):
    """Numba's index key (``caching.Cache._index_key``) with the closure variables of our kernels
    hashed as :func:`closure_values`: Numba pickles them, and a pickled ``Dispatcher`` holds a
    random id, so a kernel calling another kernel made by a factory would miss the cache in
    every new process.  Other functions keep Numba's key."""
    py_func = self._py_func
    values = closure_values(py_func) if py_func.__module__.startswith("nnue_infer.kernels") else None
    if not values:  # a module-level kernel, or a closure value we do not know
        return _numba_index_key(self, sig, codegen)
    code = hashlib.sha256(py_func.__code__.co_code).hexdigest()
    cvars = hashlib.sha256(repr(values).encode()).hexdigest()
    return (sig, codegen.magic_tuple(), (code, cvars))


_numba_index_key = caching.Cache._index_key


def _ours(py_func) -> bool:
    """Whether ``py_func`` is one of nnue-infer's kernels (the patched cache methods and the compile
    notice leave other functions to Numba)."""
    return py_func.__module__.startswith("nnue_infer.")


def _load_overload(self, sig, target_context):
    """Numba's ``Cache.load_overload``, but a damaged cache file of our kernels (truncated by a full
    disk or a killed process, or garbage) is reported as a WARNING naming the kernel and the cache
    directory and compiled again, instead of an unpickling traceback on every run.  An index file
    that cannot be read (an ``OSError``: another user's private file in a read-only cache,
    :func:`readable_cache_dir`) is no damage: a WARNING says so once per directory."""
    try:
        loaded = _numba_load_overload(self, sig, target_context)
        seeds = getattr(self._impl.locator, "seeds", ())
        if loaded is None and seeds and self._enabled:
            key = self._index_key(sig, target_context.codegen())
            for seed in seeds:  # another candidate holding kernels (:attr:`KernelCacheLocator.seeds`)
                try:
                    data = caching.IndexDataCacheFile(seed, self._impl.filename_base,
                                                      self._impl.locator.get_source_stamp()).load(key)
                    if data is not None:
                        return self._impl.rebuild(target_context, data)
                except Exception as exc:  # (only a help: its unreadable or damaged files are passed over)
                    log.debug("cannot load %s from %s (%s: %s)", self._py_func.__qualname__, seed,
                              type(exc).__name__, exc)
        return loaded
    except Exception as exc:
        if not _ours(self._py_func):
            raise
        if isinstance(exc, OSError):
            said = self._cache_path in _UNREADABLE
            _UNREADABLE.add(self._cache_path)
            (log.debug if said else log.warning)("cannot read the kernel cache in %s (%s): compiling %s and any other "
                                                 "kernel it cannot read", self._cache_path, exc,
                                                 self._py_func.__qualname__)
        else:
            log.warning("damaged kernel cache entry of %s in %s (%s: %s): compiling it again",
                        self._py_func.__qualname__, self._cache_path, type(exc).__name__, exc)
        return None


def _save_overload(self, sig, data):
    """Numba's ``Cache.save_overload``; when our kernel's index file cannot be read (damaged), it is
    started again (its other entries compile again when used) and the save retried once.  When the
    cache cannot be written (the directory cannot be made or is read-only, :func:`readable_cache_dir`,
    or made read-only or taken since :func:`usable_cache_dir` chose it; a full device), a WARNING names
    it and the error, once per directory, and the kernel stays compiled in this process only."""
    try:
        _numba_save_overload(self, sig, data)
    except Exception as exc:
        if not _ours(self._py_func):
            raise
        error = exc if isinstance(exc, OSError) else None
        if error is None:  # the index file could not be read
            try:
                self._impl.locator.ensure_cache_path()
                try:
                    os.remove(self._cache_file._index_path)
                except OSError:
                    pass
                _numba_save_overload(self, sig, data)
                return
            except OSError as again:
                error = again
        said = self._cache_path in _UNWRITABLE
        _UNWRITABLE.add(self._cache_path)
        (log.debug if said else log.warning)(
            "cannot write the kernel cache in %s (%s): %s is compiled for this process only (and so is any "
            "other kernel not cached there)", self._cache_path, error, self._py_func.__qualname__)


_numba_load_overload = caching.Cache.load_overload
_numba_save_overload = caching.Cache.save_overload
#: Cache directories a kernel could not be saved in / whose index files could not be read (one WARNING each).
_UNWRITABLE: set[str] = set()
_UNREADABLE: set[str] = set()


def _get_call_template(self, args, kws):
    """Numba's ``Dispatcher.get_call_template`` (how a kernel called from another kernel is typed and
    compiled), but our kernels are compiled for the plain types of constant arguments: a call such as
    ``line_attacks(sq, occupied, 0, 4)`` compiled a ``Literal[int](0), Literal[int](4)`` version of its
    own beside the ``int64`` one, one more compile per distinct constant (``read_bin_bits``: nine), and
    which versions existed depended on the order the tests ran (``test_one_signature_per_kernel``).
    No kernel of ours uses ``numba.literally``; branches on a constant argument are folded by LLVM
    after inlining, as for any other call."""
    if _ours(self.py_func):
        args = tuple(types.unliteral(a) for a in args)
        kws = {k: types.unliteral(v) for k, v in kws.items()}
    return _numba_get_call_template(self, args, kws)


_numba_get_call_template = Dispatcher.get_call_template


#: Modules outside ``nnue_infer/kernels`` whose kernels :class:`KernelCacheLocator` caches
#: (:func:`register`): resolved path -> SHA-256 (hex) of the file's contents.
REGISTERED: dict[Path, str] = {}


def register(module_file: str) -> None:
    """Cache the kernels of ``module_file`` (the ``__file__`` of a module outside ``nnue_infer/kernels``;
    call it before the module's first ``@njit(cache=True)``) with :class:`KernelCacheLocator`: stamped
    with :func:`kernels_stamp` and the file's own contents, since its kernels may inline ours or fold
    our constants (Numba's own stamp, the file's time, sees neither), in :func:`cache_dirs`, the
    directory made when a kernel is saved."""
    path = Path(module_file).resolve()
    REGISTERED[path] = hashlib.sha256(path.read_bytes()).hexdigest()


class KernelCacheLocator(caching._CacheLocator):
    """Numba cache locator of the ``nnue_infer/kernels`` files and the :func:`register`-ed modules
    (see the module docstring); other files are left to Numba's own locators."""

    def __init__(self, py_func, py_file: str, path: str, seeds: tuple[str, ...] = ()) -> None:
        #: The other candidates (:func:`cache_dirs`) that hold kernels and can be read (:func:`readable_cache_dir`):
        #: a kernel ``path`` lacks is loaded from them (:func:`_load_overload`).  The package's ``__pycache__``
        #: filled by another user (a Docker image's ``nnue-infer warmup`` as root, run as a user with a home
        #: directory) was passed over for the user's empty cache: every kernel compiled in every new container.
        self.seeds = seeds
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = path
        self._config = closure_tag(py_func)
        self._own = REGISTERED.get(Path(py_file).resolve())
        #: The family folder of a kernel file below ``nnue_infer/kernels`` (``chess``, ``nnue``, ...), "" at the top.
        #: Numba names a cache file by the source's base name, qualified name and line: two families' files of
        #: one name sharing a flat cache directory (``$NUMBA_CACHE_DIR``, the user's) keep apart by it.
        folder = Path(kernel_name(Path(py_file).resolve())).parent.as_posix()
        self._folder = "" if folder == "." else folder.replace("/", ".")

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> tuple:
        return ("nnue_infer.kernels", kernels_stamp()) + ((self._own,) if self._own else ())

    def get_disambiguator(self) -> str:
        """The family folder of a file below ``nnue_infer/kernels`` (see ``__init__``), the line number, then the configuration (:func:`closure_tag`) of a kernel made by a factory,
        or the start of a :func:`register`-ed module's hash: that module's versions (two checkouts
        with the same kernels sharing one ``NUMBA_CACHE_DIR``) keep files of their own instead of
        replacing each other's index, which made each compile again after the other ran, and two
        processes saving at once could leave one version's index naming the other's code."""
        tag = self._config or (self._own[:8] if self._own else "")
        line = f"{self._folder}-{self._lineno}" if self._folder else str(self._lineno)
        return f"{line}-{tag}" if tag else line

    @classmethod
    def from_function(cls, py_func, py_file):
        resolved = Path(py_file).resolve()
        if not kernel_file(resolved) and resolved not in REGISTERED:
            return None
        path, seeds = chosen_cache_dirs(tuple(cache_dirs(py_file)) if stamped_as_imported(py_file) else ())
        return cls(py_func, py_file, path or private_cache_dir(), seeds)


@functools.cache
def chosen_cache_dirs(dirs: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """Of the candidate cache directories ``dirs`` (:func:`cache_dirs`), the one kernels are saved in (the first
    :func:`usable_cache_dir`; else the first :func:`readable_cache_dir`, loaded from only; else None) and the
    others holding kernels, read beside it (:attr:`KernelCacheLocator.seeds`).  Chosen once per process for each
    list, when the first kernel of a file is defined: every kernel probed them (a temporary file made, a directory
    listed), some 220 times in a process importing every kernel module."""
    path = next((d for d in dirs if usable_cache_dir(d)), None)
    others = [d for d in dirs if d != path and readable_cache_dir(d)]
    if path is None and others:
        path = others.pop(0)
    return path, tuple(others)


@functools.cache
def private_cache_dir() -> str:
    """A new temporary directory of this process, removed at its exit: the cache of last resort
    when no directory of :func:`cache_dirs` is writable or readable (e.g. ``NUMBA_CACHE_DIR`` names a file).
    Our locator must still answer then: Numba's own locators would cache in ``__pycache__``,
    stamped by each file's time alone, and load stale code after an edit of another kernel file.
    Every process then compiles again, as ``nnue-infer info --cache`` says."""
    import atexit
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="nnue-infer-kernels-")
    atexit.register(shutil.rmtree, path, True)
    return path


class _Notice(event.Listener):
    """Reports the compiles (cache misses) of ``nnue_infer`` kernels to :data:`log` (see the module docstring)."""

    done = False
    registered = False
    depth = 0
    started = 0.0

    @staticmethod
    def _ours(ev: event.Event) -> bool:
        return _ours(ev.data["dispatcher"].py_func)

    def on_start(self, ev: event.Event) -> None:
        if not self._ours(ev):
            return
        _Notice.depth += 1
        if _Notice.depth > 1:  # compiled inside the outer kernel's compile
            return
        _Notice.started = time.process_time()
        if not _Notice.done:
            _Notice.done = True
            where = getattr(ev.data["dispatcher"]._cache, "_cache_path", None) or "memory only"
            if private_cache_dir.cache_info().currsize and where == private_cache_dir():  # (made only when used)
                where += ", for this process only: no writable cache directory"
            elif where != "memory only" and not usable_cache_dir(where):
                where += ", read-only: what it lacks is compiled for this process only"
            log.info(NOTICE, where)
            if not log.hasHandlers() and sys.stderr is not None and (sys.stderr.isatty() or "ipykernel" in sys.modules):
                # a first session at a terminal or in a notebook with no logging set up: say it there (the
                # record goes nowhere, and 10-30 s of silent compiling looks like a hang: fresh-user trials)
                print("nnue-infer: " + NOTICE % where, file=sys.stderr, flush=True)
        log.debug("compile of %s started", ev.data["dispatcher"].py_func.__qualname__, extra={"compile": "start"})

    def on_end(self, ev: event.Event) -> None:
        if not self._ours(ev):
            return
        _Notice.depth -= 1
        if _Notice.depth == 0:
            seconds = time.process_time() - _Notice.started
            log.debug("compile of %s took %.1f s of CPU", ev.data["dispatcher"].py_func.__qualname__, seconds,
                      extra={"compile": "end", "cpu_seconds": seconds})


def fresh_symbol_numbers() -> None:
    """Start Numba's function numbering (``numba.core.bytecode.FunctionIdentity._unique_ids``, the
    number in every compiled function's symbol) at a random 60-bit number: see **Symbols** in the
    module docstring.  Numbers stay unique within the process (a counter); two processes share a
    range with probability about ``2 * compiles / 2**60``."""
    bytecode.FunctionIdentity._unique_ids = itertools.count(1 + secrets.randbits(60))


def install() -> None:
    """Put :class:`KernelCacheLocator` first among Numba's locators, key our closures' cache entries
    by :func:`closure_values` (:func:`_index_key`), compile again over a damaged cache file
    (:func:`_load_overload`, :func:`_save_overload`), type our kernels' constant arguments by
    their plain types (:func:`_get_call_template`), number compiled symbols from a random start in
    this process and every forked child (:func:`fresh_symbol_numbers`) and register the compile notice.

    Called by ``nnue_infer.kernels`` before any kernel is defined (a kernel's locator is chosen
    when its ``@njit(cache=True)`` decorator runs)."""
    caching.Cache._index_key = _index_key
    caching.Cache.load_overload = _load_overload
    Dispatcher.get_call_template = _get_call_template
    caching.Cache.save_overload = _save_overload
    impl = caching.CompileResultCacheImpl
    if KernelCacheLocator not in impl._locator_classes:
        impl._locator_classes = [KernelCacheLocator, *impl._locator_classes]
    if not _Notice.registered:
        _Notice.registered = True
        fresh_symbol_numbers()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=fresh_symbol_numbers)
        event.register("numba:compile", _Notice())

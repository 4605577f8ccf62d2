"""Finding networks: the bundled default network, and Stockfish 15.1's net from Debian's binary.

The default network ships inside the package (``nnue_infer/weights/``, a link to the
repository's ``weights/`` directory, copied into wheels as package data), so it needs nothing
but ``pip install``.  Stockfish 15.1's network is extracted once from Debian's engine binary
into the user's cache directory (``$NNUE_INFER_CACHE``, else ``$XDG_CACHE_HOME/nnue-infer``,
else ``~/.cache/nnue-infer``).

A network *spec* (what :class:`~nnue_infer.Evaluator` and the module-level functions take: a
``Network``, a file, a name or ``None``) becomes a ``Network`` here: :func:`network_from_spec`,
:func:`as_network`, and :func:`spec_network` (loaded once per thread and file identity).
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path
from typing import Union

from . import constants as C
from .errors import NetworkNotFoundError
from .kernels.cache import user_cache_dir
from .network import Network

_lock = threading.Lock()
_default: Network | None = None
_stockfish: Network | None = None

#: File name of the bundled default network in ``nnue_infer/weights/`` (model card: ``README.md`` there).
DEFAULT_NETWORK_FILE = "nnue-infer-default.safetensors"
#: Names :func:`network_from_spec` accepts besides file paths (and the specs of
#: :mod:`nnue_infer.formats.registry`: ``sf16``, ``sf17.1``, ``sf17.1-small``, ``sf19-lite``, ...).
NETWORK_NAMES = ("default", "stockfish")

HOW_TO_GET = (
    "Install Debian's stockfish package (apt-get install stockfish, Stockfish 15.1, which embeds "
    f"{C.SF15_1_NET_NAME}), or pass a network file with --net / load(path); "
    "`nnue-infer extract BINARY -o FILE` extracts the network from another Stockfish 15.1 binary."
)


def cache_dir() -> Path:
    """Directory where extracted networks are kept (:func:`nnue_infer.kernels.cache.user_cache_dir`)."""
    return user_cache_dir()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def stockfish_15_1_network_path(binary: str | os.PathLike[str] | None = None) -> Path:
    """Path of ``nn-ad9b42354671.nnue``, extracting it from the engine binary on first use.

    ``binary`` defaults to Debian's ``/usr/games/stockfish``.  A cached copy is reused when
    its size and SHA-256 are right.  When the cache (:func:`cache_dir`) cannot be written (a
    read-only file system, a full disk), the network is extracted into a temporary directory of the
    process, removed at its exit, with a WARNING on the ``nnue_infer`` logger.

    Raises
    ------
    NetworkNotFoundError
        No binary, or no Stockfish 15.1 network inside it; the message says how to get one.
    """
    from .errors import NetworkFormatError
    from .formats.extract import extract_network

    target = cache_dir() / C.SF15_1_NET_NAME
    if target.is_file() and target.stat().st_size == C.SF15_1_NET_SIZE and _sha256(target) == C.SF15_1_NET_SHA256:
        return target
    binary = Path(binary or C.DEBIAN_STOCKFISH)
    if not binary.is_file():
        raise NetworkNotFoundError(f"no network given and {binary} does not exist. {HOW_TO_GET}")
    try:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = extract_network(binary, target)
        except OSError as exc:  # a read-only or full cache: the network is extracted for this process
            import logging

            logging.getLogger("nnue_infer").warning(
                "cannot keep %s in the cache %s (%s): extracted for this process only (set NNUE_INFER_CACHE to a "
                "writable directory)", C.SF15_1_NET_NAME, target.parent, exc.strerror or exc)
            target = _private_dir() / C.SF15_1_NET_NAME
            if target.is_file():  # extracted by an earlier call of this process
                return target
            digest = extract_network(binary, target)
    except NetworkFormatError as exc:
        raise NetworkNotFoundError(f"{exc}. {HOW_TO_GET}") from exc
    if digest != C.SF15_1_NET_SHA256:
        target.unlink()
        raise NetworkNotFoundError(f"{binary} embeds a network with SHA-256 {digest}, not {C.SF15_1_NET_NAME}. {HOW_TO_GET}")
    return target


@functools.cache
def _private_dir() -> Path:
    """A temporary directory of this process, removed at its exit (networks that cannot be cached)."""
    import atexit
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="nnue-infer-networks-")
    atexit.register(shutil.rmtree, path, True)
    return Path(path)


def default_network_path() -> Path:
    """Path of the bundled default network (``nnue_infer/weights/nnue-infer-default.safetensors``).

    Raises :class:`NetworkNotFoundError` when the package was installed without its data.
    """
    path = Path(__file__).resolve().parent / "weights" / DEFAULT_NETWORK_FILE
    if not path.is_file():
        raise NetworkNotFoundError(f"the bundled default network {path} is missing: reinstall nnue-infer "
                                   "(it ships as package data), or pass a network file with --net / load(path)")
    return path


def default_network() -> Network:
    """The network used when none is given: the bundled default network (loaded once, thread-safe).

    A small network (2 x 512, bilinear activation) distilled from Stockfish 15.1's (see
    ``weights/README.md``); values are in Stockfish 15.1's internal units (361 per pawn), side to
    move's point of view.  Use :func:`stockfish_15_1_network` for Stockfish 15.1's own network.

    Raises :class:`NetworkNotFoundError` when the package data is missing.
    """
    global _default
    with _lock:
        if _default is None:
            from .formats import load

            _default = load(default_network_path())
        return _default


def stockfish_15_1_network(binary: str | os.PathLike[str] | None = None) -> Network:
    """Stockfish 15.1's network ``nn-ad9b42354671.nnue`` (loaded once, thread-safe).

    Extracted on first use from ``binary`` (default: Debian's ``/usr/games/stockfish``) into
    :func:`cache_dir` (see :func:`stockfish_15_1_network_path`, whose errors it raises); later
    calls use the cached copy, whatever ``binary``.
    """
    global _stockfish
    with _lock:
        if _stockfish is None:
            from .formats import load

            _stockfish = load(stockfish_15_1_network_path(binary))
        return _stockfish


def npm_dir() -> Path:
    """Where npm tarballs of the ``stockfish`` package are kept: ``<cache_dir>/npm``."""
    return cache_dir() / "npm"


def fetch_command(npm_version: str) -> str:
    """The shell command that downloads ``stockfish@npm_version`` into :func:`npm_dir`."""
    return f"mkdir -p {npm_dir()} && npm pack stockfish@{npm_version} --pack-destination {npm_dir()}"


def fetch_npm(npm_version: str) -> Path:
    """Download the npm tarball ``stockfish-<npm_version>.tgz`` into :func:`npm_dir` (skipped if
    present) with ``npm pack``; returns its path.

    Raises :class:`NetworkNotFoundError` if ``npm`` is missing or fails.
    """
    import shutil
    import subprocess

    tarball = npm_dir() / f"stockfish-{npm_version}.tgz"
    if tarball.is_file():
        return tarball
    if shutil.which("npm") is None:
        raise NetworkNotFoundError(f"npm is not installed; install Node.js/npm, then run: {fetch_command(npm_version)}")
    npm_dir().mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["npm", "pack", f"stockfish@{npm_version}", "--pack-destination", str(npm_dir())],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not tarball.is_file():
        raise NetworkNotFoundError(f"`npm pack stockfish@{npm_version}` failed ({proc.returncode}): "
                                   f"{proc.stderr.strip()[-500:]}")
    return tarball


_verified: set[Path] = set()


def known_network_path(spec: str, *, fetch: bool = False) -> Path:
    """Path of a known network (:mod:`nnue_infer.formats.registry`) in the cache directory.

    On first use the network is extracted from the npm tarball ``<cache_dir>/npm/stockfish-V.tgz``
    (``fetch=True`` downloads it with ``npm pack`` when missing) and checked by SHA-256.

    Raises
    ------
    NetworkNotFoundError
        Unknown spec, or the tarball is missing: the message gives the command that fetches it
        (and, for a cached file of another size or SHA-256, says it is damaged or replaced).
    """
    from .formats.registry import known_by_spec, specs

    known = known_by_spec(spec)
    if known is None:
        raise NetworkNotFoundError(f"unknown network name {spec!r}; known: {', '.join(specs())}")
    if known.spec == "sf15.1":
        return stockfish_15_1_network_path()
    target = cache_dir() / known.name
    if target in _verified and target.is_file():
        return target
    damaged = None  # (size, SHA-256) of a cached file that is not the network
    if target.is_file():
        size, digest = target.stat().st_size, _sha256(target)
        if size == known.size and digest == known.sha256:
            _verified.add(target)
            return target
        damaged = size, digest
    tarball = npm_dir() / f"stockfish-{known.npm}.tgz"
    if not tarball.is_file():
        if not fetch and damaged is not None:
            raise NetworkNotFoundError(
                f"{target}: damaged or replaced ({damaged[0]} bytes, SHA-256 {damaged[1][:16]}...; expected "
                f"{known.size} bytes, SHA-256 {known.sha256[:16]}...: {spec}, Stockfish {known.version} {known.role} "
                f"net); fetch it again (the file is replaced) with: nnue-infer fetch {known.spec}  (or: "
                f"{fetch_command(known.npm)})")
        if not fetch:
            raise NetworkNotFoundError(
                f"{known.name} ({spec}: Stockfish {known.version} {known.role} net) is not in {cache_dir()}; it comes "
                f"from the npm package stockfish@{known.npm}. Fetch it with: {fetch_command(known.npm)}  "
                f"(or: nnue-infer fetch {known.spec})")
        fetch_npm(known.npm)
    from .formats.extract import extract_network

    target.parent.mkdir(parents=True, exist_ok=True)
    with _lock_extract:
        digest = extract_network(tarball, target, member=known.source)
    if digest != known.sha256:
        target.unlink()
        raise NetworkNotFoundError(f"{tarball}:{known.source} holds {digest[:12]}..., not {known.name}")
    _verified.add(target)
    return target


_lock_extract = threading.Lock()
_known: dict[str, Network] = {}


def known_network(spec: str, *, fetch: bool = False) -> Network:
    """A known network by spec (loaded once per process, thread-safe), with its architecture's
    ``stockfish_version`` set to the spec's version (the lite net serves 17.1 and 18)."""
    from .formats.stockfish import read_stockfish
    from .formats.registry import known_by_spec

    known = known_by_spec(spec)
    path = known_network_path(spec, fetch=fetch)
    assert known is not None
    with _lock:
        if known.spec not in _known:
            _known[known.spec] = read_stockfish(path, known.version)
        return _known[known.spec]


#: Names of Stockfish 15.1's network for :func:`network_from_spec`.
STOCKFISH_15_1_NAMES = ("stockfish", "sf15.1", "sf15")
#: The names :func:`network_from_spec` reads as names whatever files exist (the bundled networks); a known
#: Stockfish network's name is a name only when no file has it.
BUILT_IN_NAMES = ("default", *STOCKFISH_15_1_NAMES)


def is_network_name(spec: str | os.PathLike[str] | None) -> bool:
    """Whether :func:`network_from_spec` reads ``spec`` as a network's name (``None``, :data:`BUILT_IN_NAMES`
    whatever files exist, a known Stockfish network's spec when no regular file has that name: a directory
    such as one's own ``sf19-lite/`` folder does not take the name over), not as a file."""
    from .formats.registry import known_by_spec

    return spec is None or spec in BUILT_IN_NAMES or (isinstance(spec, str) and known_by_spec(spec) is not None
                                                      and not os.path.isfile(spec))


def network_file(spec: str | os.PathLike[str] | None) -> Path:
    """The file :func:`network_from_spec` reads for ``spec``: the bundled default network's, Stockfish 15.1's
    (extracted on first use), a known network's in the cache, or ``spec`` itself (not checked here).

    Raises :class:`NetworkNotFoundError` as :func:`network_from_spec` does for a name whose file cannot be had.
    """
    if spec is None or spec == "default":
        return default_network_path()
    if spec in STOCKFISH_15_1_NAMES:
        return stockfish_15_1_network_path()
    if is_network_name(spec):
        return known_network_path(str(spec))
    return Path(spec)


def network_from_spec(spec: str | os.PathLike[str] | None) -> Network:
    """A quantised network from a name or a file: ``None`` or ``"default"`` (the bundled default
    network), ``"stockfish"`` / ``"sf15.1"`` (:func:`stockfish_15_1_network`), a known Stockfish
    network (``"sf16"``, ``"sf17.1"``, ``"sf17.1-small"``, ``"sf17.1-lite"``, ``"sf18"``,
    ``"sf18-small"``, ``"sf18-lite"``, ``"sf19"``, ``"sf19-lite"``: :func:`nnue_infer.formats.registry.specs`;
    :func:`known_network`, from the cache or the cached npm tarball) or a path (:func:`nnue_infer.load`).

    Raises
    ------
    NetworkNotFoundError
        The file does not exist (the message says how to get a network).
    NetworkFormatError
        The file is malformed or holds a float network (quantise it first).
    """
    from .errors import NetworkFormatError

    if spec is None or spec == "default":
        return default_network()
    if spec in STOCKFISH_15_1_NAMES:
        return stockfish_15_1_network()
    from .formats.registry import specs

    if is_network_name(spec):
        return known_network(spec)
    if not os.path.exists(spec):  # (Path("") is ".", which exists); a directory or device: load() says what it is
        raise NetworkNotFoundError(f"{os.fspath(spec)!r} is no known network name and no file (it does not exist); "
                                   "give an existing .nnue or "
                                   f".safetensors file, or one of the names {' or '.join(NETWORK_NAMES)} "
                                   "('stockfish' needs Debian's package: apt-get install stockfish) or a known "
                                   f"Stockfish net ({', '.join(specs())})")
    from .formats import load

    network = load(spec)
    if not isinstance(network, Network):
        raise NetworkFormatError(f"{os.fspath(spec)} holds a float network; quantise it first (nnue-infer quantise)")
    return network


#: What the module-level functions and :class:`Evaluator` take as a network: a ``Network``, a
#: network file, a name (``"default"``, ``"stockfish"``, ...) or ``None`` (the default network).
NetworkLike = Union[Network, str, "os.PathLike[str]", None]


def as_network(network: Network | str | os.PathLike[str] | None) -> Network:
    """``network`` itself, or the network a file path or name gives (:func:`nnue_infer.resources.network_from_spec`).

    ``None`` is the default network.  Raises ``TypeError`` for anything else, and what
    :func:`~nnue_infer.resources.network_from_spec` raises for a bad file or unknown name.
    """
    if isinstance(network, Network):
        return network
    if network is None or isinstance(network, (str, os.PathLike)):
        return network_from_spec(network)
    raise TypeError(f"expected a Network, a network file or a name such as 'default' or 'stockfish', "
                    f"got {type(network).__name__}")


def spec_network(spec: str | os.PathLike[str]) -> Network:
    """This thread's network for a file or name (the module-level functions of :mod:`nnue_infer.evaluator`), loaded once per (spec, file identity and stamps): the device
    and inode (another file under the name, a relative name in another directory) and the size, modification
    and status-change times (a file saved over, also when a copy kept the old modification time)."""
    key: tuple = (os.fspath(spec),)
    try:
        st = os.stat(spec)
        key += (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    except OSError:
        pass
    cache = getattr(_local_specs, "specs", None)
    if cache is None:
        cache = _local_specs.specs = {}
    net = cache.pop(key, None)
    if net is None:
        net = as_network(spec)
        if len(cache) >= CACHED_SPEC_NETWORKS:
            del cache[next(iter(cache))]
    cache[key] = net
    return net


#: Networks each thread keeps by file or name for :func:`spec_network` (as many as the evaluators
#: :mod:`nnue_infer.evaluator` keeps per thread).
CACHED_SPEC_NETWORKS = 4
_local_specs = threading.local()

"""Finding networks: the bundled default network, and Stockfish 15.1's net from Debian's binary.

The default network ships inside the package (``nnue_infer/weights/``, a link to the
repository's ``weights/`` directory, copied into wheels as package data), so it needs nothing
but ``pip install``.  Stockfish 15.1's network is extracted once from Debian's engine binary
into the user's cache directory (``$NNUE_INFER_CACHE``, else ``$XDG_CACHE_HOME/nnue-infer``,
else ``~/.cache/nnue-infer``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from . import constants as C
from .errors import NetworkNotFoundError
from .network import Network

_lock = threading.Lock()
_default: Network | None = None
_stockfish: Network | None = None

#: File name of the bundled default network in ``nnue_infer/weights/`` (model card: ``README.md`` there).
DEFAULT_NETWORK_FILE = "nnue-infer-default.safetensors"
#: Names :func:`network_from_spec` accepts besides file paths.
NETWORK_NAMES = ("default", "stockfish")

HOW_TO_GET = (
    "Install Debian's stockfish package (apt-get install stockfish, Stockfish 15.1, which embeds "
    f"{C.SF15_1_NET_NAME}), or pass a network file with --net / load(path); "
    "`nnue-infer extract BINARY -o FILE` extracts the network from another Stockfish 15.1 binary."
)


def cache_dir() -> Path:
    """Directory where extracted networks are kept."""
    if os.environ.get("NNUE_INFER_CACHE"):
        return Path(os.environ["NNUE_INFER_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nnue-infer"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def stockfish_15_1_network_path(binary: str | os.PathLike[str] | None = None) -> Path:
    """Path of ``nn-ad9b42354671.nnue``, extracting it from the engine binary on first use.

    ``binary`` defaults to Debian's ``/usr/games/stockfish``.  A cached copy is reused when
    its size and SHA-256 are right.

    Raises
    ------
    NetworkNotFoundError
        No binary, or no Stockfish 15.1 network inside it; the message says how to get one.
    """
    from .errors import NetworkFormatError
    from .formats.stockfish import extract_network

    target = cache_dir() / C.SF15_1_NET_NAME
    if target.is_file() and target.stat().st_size == C.SF15_1_NET_SIZE and _sha256(target) == C.SF15_1_NET_SHA256:
        return target
    binary = Path(binary or C.DEBIAN_STOCKFISH)
    if not binary.is_file():
        raise NetworkNotFoundError(f"no network given and {binary} does not exist. {HOW_TO_GET}")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        digest = extract_network(binary, target)
    except NetworkFormatError as exc:
        raise NetworkNotFoundError(f"{exc}. {HOW_TO_GET}") from exc
    if digest != C.SF15_1_NET_SHA256:
        target.unlink()
        raise NetworkNotFoundError(f"{binary} embeds a network with SHA-256 {digest}, not {C.SF15_1_NET_NAME}. {HOW_TO_GET}")
    return target


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

    A small pairwise network distilled from Stockfish 15.1's (see ``weights/README.md``); values
    are in Stockfish 15.1's internal units (361 per pawn), side to move's point of view.  Use
    :func:`stockfish_15_1_network` for Stockfish 15.1's own network.

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


def network_from_spec(spec: str | os.PathLike[str] | None) -> Network:
    """A quantised network from a name or a file: ``None`` or ``"default"`` (the bundled default
    network), ``"stockfish"`` (:func:`stockfish_15_1_network`) or a path (:func:`nnue_infer.load`).

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
    if spec == "stockfish":
        return stockfish_15_1_network()
    if not Path(spec).exists():  # a directory or device: load() says what it is
        raise NetworkNotFoundError(f"network file {os.fspath(spec)} does not exist; give an existing .nnue or "
                                   f".safetensors file, or one of the names {' or '.join(NETWORK_NAMES)} "
                                   "('stockfish' needs Debian's package: apt-get install stockfish)")
    from .formats import load

    network = load(spec)
    if not isinstance(network, Network):
        raise NetworkFormatError(f"{os.fspath(spec)} holds a float network; quantise it first (nnue-infer quantise)")
    return network

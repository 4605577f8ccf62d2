"""Finding networks on this machine: Stockfish 15.1's net extracted from Debian's binary.

The network is extracted once into the user's cache directory
(``$NNUE_INFER_CACHE``, else ``$XDG_CACHE_HOME/nnue-infer``, else ``~/.cache/nnue-infer``).
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


def default_network() -> Network:
    """The network used when none is given (loaded once per process, thread-safe).

    For now Stockfish 15.1's network from Debian's package (see
    :func:`stockfish_15_1_network_path`).  Raises :class:`NetworkNotFoundError` otherwise.
    """
    global _default
    with _lock:
        if _default is None:
            from .formats import load

            _default = load(stockfish_15_1_network_path())
        return _default

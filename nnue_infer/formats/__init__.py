"""Network file formats: each module reads and writes a :class:`~nnue_infer.network.Network` (``extract``
finds the networks embedded in engine binaries and WebAssembly modules).

:func:`load` picks the format from the file's first bytes; :func:`save` from the path's
extension (``.nnue``: Stockfish 15.1; ``.safetensors``: native, quantised or float).
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING

from .. import constants as C
from ..errors import NetworkFormatError
from ..network import Network

if TYPE_CHECKING:
    from ..float_network import FloatNetwork


#: Formats by name and the file extension that selects them in :func:`save`.
FORMAT_EXTENSIONS = {"stockfish": ".nnue", "safetensors": ".safetensors"}


def check_regular_file(path: str | os.PathLike[str], hint: str) -> None:
    """Refuse a path that is not a regular file before any reader opens it: a FIFO would block in
    ``open``, a device such as ``/dev/zero`` be read until memory runs out.

    Raises ``FileNotFoundError`` when nothing is there, :class:`NetworkFormatError` naming the path
    and ending with ``hint`` (what the file should be) for a directory, device, FIFO or socket.
    """
    if not os.path.isfile(path):
        if not os.path.exists(path):
            raise FileNotFoundError(2, "no such network file", os.fspath(path))
        raise NetworkFormatError(f"{os.fspath(path)}: not a regular file (a directory, device or FIFO); {hint}")


def detect_format(path: str | os.PathLike[str]) -> str:
    """``"stockfish"`` (``.nnue``, Stockfish 12-19) or ``"safetensors"`` (native) from the file's magic bytes.

    Raises :class:`NetworkFormatError` naming the path when the format is unknown, the
    file is empty or not a regular file (a FIFO would block), ``FileNotFoundError`` when it
    does not exist and ``OSError`` when it cannot be read.
    """
    from .safetensors import is_safetensors

    check_regular_file(path, "a network is a .nnue or .safetensors file")
    with open(path, "rb") as f:
        head = f.read(9)
    if len(head) >= 4 and struct.unpack("<I", head[:4])[0] in (C.SF_FILE_VERSION, C.SF19_FILE_VERSION):
        return "stockfish"
    if is_safetensors(head):
        return "safetensors"
    if not head:
        raise NetworkFormatError(f"{os.fspath(path)}: empty file, not a network")
    from ..inputs import GZIP_MAGIC, ZSTD_MAGIC

    if head.startswith((GZIP_MAGIC, ZSTD_MAGIC)):
        kind = "gzip" if head.startswith(GZIP_MAGIC) else "zstd"
        raise NetworkFormatError(f"{os.fspath(path)}: a {kind}-compressed file; decompress the network first "
                                 f"({'gunzip' if kind == 'gzip' else 'unzstd'} {os.fspath(path)})")
    raise NetworkFormatError(
        f"{os.fspath(path)}: unknown network format (first bytes {head.hex(' ')}); "
        f"expected a Stockfish .nnue file (version 0x{C.SF_FILE_VERSION:08X} or 0x{C.SF19_FILE_VERSION:08X}) or an "
        "nnue-infer .safetensors file"
    )


def load(path: str | os.PathLike[str]) -> Network | FloatNetwork:
    """Load a network file, choosing the reader from its magic bytes.

    Returns a :class:`Network`, or a :class:`~nnue_infer.float_network.FloatNetwork` for a
    native file holding float tensors (``kind = float``).

    Raises :class:`NetworkFormatError` (a ``ValueError``) for malformed files, naming the
    section and byte offset (or tensor / metadata key), and ``OSError``/``FileNotFoundError``
    when unreadable.
    """
    fmt = detect_format(path)
    from .safetensors import read_safetensors
    from .stockfish import read_stockfish

    return {"stockfish": read_stockfish, "safetensors": read_safetensors}[fmt](path)


def format_for_path(path: str | os.PathLike[str]) -> str:
    """The format a path's extension selects (``ValueError`` naming the extension if none does)."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    for name, e in FORMAT_EXTENSIONS.items():
        if ext == e:
            return name
    raise ValueError(f"cannot tell the format from the extension {ext!r} of {os.fspath(path)}; "
                     f"use {' or '.join(FORMAT_EXTENSIONS.values())} or give the format explicitly")


def save(network: Network | FloatNetwork, path: str | os.PathLike[str], format: str | None = None) -> None:
    """Write ``network`` as ``format`` (``"stockfish"`` or ``"safetensors"``; default: from the extension).

    The file is written next to ``path`` under a temporary name, read back with :func:`load`
    and only then renamed to ``path``: a network the format cannot hold (e.g. an ``.nnue``
    ``ft_width`` that is not a multiple of 32, a description over 1 MiB) is refused with the
    reader's reason, and ``path`` is never left half-written or replaced by a file that
    :func:`load` would refuse.

    Raises
    ------
    ValueError
        Unknown format, a float network or a non-Stockfish architecture written as ``.nnue``;
        :class:`NetworkFormatError` (a ``ValueError``) when the written file would not load
        (the message gives the reader's reason); ``path`` is unchanged then.
    OSError
        The file cannot be written (``path`` names something other than a regular file, a
        missing directory, no permission, a full disk).
    """
    from ..float_network import FloatNetwork
    from ..inputs import replacing
    from .safetensors import write_safetensors
    from .stockfish import write_stockfish

    fmt = format or format_for_path(path)
    if fmt not in FORMAT_EXTENSIONS:
        raise ValueError(f"unknown format {fmt!r}; known: {sorted(FORMAT_EXTENSIONS)}")
    if fmt == "stockfish" and isinstance(network, FloatNetwork):
        raise ValueError("a float network cannot be written as .nnue: quantise it first")
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        raise IsADirectoryError(21, "not a regular file, refusing to replace it", path) if os.path.isdir(path) else \
            OSError(f"{path}: not a regular file; networks are written to regular files only")
    with replacing(path) as tmp:  # the file asked for is named in an OSError, never the temporary one
        (write_stockfish if fmt == "stockfish" else write_safetensors)(network, tmp)
        try:
            load(tmp)
        except NetworkFormatError as exc:
            raise NetworkFormatError(f"{path}: not written: this network cannot be stored as {fmt} (reading the file "
                                     f"back fails: {str(exc).replace(tmp, path)})") from None

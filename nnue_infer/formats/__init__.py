"""Network file formats: each module reads and writes a :class:`~nnue_infer.network.Network`.

:func:`load` picks the format from the file's first bytes.
"""

from __future__ import annotations

import os
import struct

from .. import constants as C
from ..errors import NetworkFormatError
from ..network import Network


def detect_format(path: str | os.PathLike[str]) -> str:
    """``"stockfish"`` (``.nnue``, Stockfish 15.1) from the file's magic bytes.

    Raises :class:`NetworkFormatError` naming the path when the format is unknown or the
    file is empty, and ``OSError`` when it cannot be read.
    """
    with open(path, "rb") as f:
        head = f.read(8)
    if len(head) >= 4 and struct.unpack("<I", head[:4])[0] == C.SF_FILE_VERSION:
        return "stockfish"
    if not head:
        raise NetworkFormatError(f"{os.fspath(path)}: empty file, not a network")
    raise NetworkFormatError(
        f"{os.fspath(path)}: unknown network format (first bytes {head.hex(' ')}); "
        f"expected a Stockfish 15.1 .nnue file (version 0x{C.SF_FILE_VERSION:08X})"
    )


def load(path: str | os.PathLike[str]) -> Network:
    """Load a network file, choosing the reader from its magic bytes.

    Raises :class:`NetworkFormatError` (a ``ValueError``) for malformed files, naming the
    section and byte offset, and ``OSError``/``FileNotFoundError`` when unreadable.
    """
    fmt = detect_format(path)
    from .stockfish import read_stockfish

    return {"stockfish": read_stockfish}[fmt](path)

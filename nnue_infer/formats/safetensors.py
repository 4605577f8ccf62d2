"""nnue-infer's native format: a safetensors file with the architecture as JSON metadata.

Layout: a standard safetensors file (8-byte little-endian header length, JSON header, raw
little-endian tensor data) holding every tensor under its canonical name
(:func:`nnue_infer.float_network.network_tensors`: ``ft.biases``, ``ft.weights``,
``ft.psqt_weights``, ``layers.{i}.weights``, ``layers.{i}.biases``) in the logical layout of
:class:`~nnue_infer.network.Network` (quantised: int16/int32/int8) or
:class:`~nnue_infer.float_network.FloatNetwork` (float32).  The safetensors metadata has one
key, ``nnue-infer``, whose value is a JSON object (keys sorted, so files are byte-for-byte
reproducible; safetensors itself stores metadata keys in arbitrary order):

* ``format_version``: 1 (:data:`FORMAT_VERSION`)
* ``kind``: ``"quantised"`` or ``"float"``
* ``architecture``: the :class:`~nnue_infer.network.Architecture` as an object
  (:meth:`~nnue_infer.network.Architecture.to_json`)
* ``description``: free text (Stockfish's description string for converted ``.nnue`` files)

Source: the safetensors format, https://github.com/huggingface/safetensors (``safetensors.numpy``).
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np

from ..errors import NetworkFormatError
from ..float_network import FloatNetwork, _from_tensors, network_tensors
from ..network import Architecture, Network

#: The metadata key holding nnue-infer's JSON.
FORMAT_NAME = "nnue-infer"
#: Version of this layout, stored as ``format_version``; readers refuse other versions.
FORMAT_VERSION = 1
#: Largest JSON header accepted when sniffing a file (safetensors itself caps it at 100 MB).
_MAX_HEADER = 100_000_000


def is_safetensors(head: bytes) -> bool:
    """Whether the first bytes of a file look like safetensors: a plausible u64 header length then ``{``."""
    if len(head) < 9:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= _MAX_HEADER and head[8:9] == b"{"


def write_safetensors(network: Network | FloatNetwork, path: str | os.PathLike[str]) -> None:
    """Write a quantised or float network in the native format (see the module docstring).

    Raises ``OSError`` when ``path`` cannot be written.
    """
    from safetensors.numpy import save

    kind = "float" if isinstance(network, FloatNetwork) else "quantised"
    tensors = {name: np.ascontiguousarray(arr) for name, arr in network_tensors(network).items()}
    info = {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "architecture": json.loads(network.architecture.to_json()),
        "description": network.description,
    }
    data = save(tensors, metadata={FORMAT_NAME: json.dumps(info, sort_keys=True)})
    with open(path, "wb") as f:  # a plain open: the file mode follows the umask (save_file made it 0600)
        f.write(data)


def _read_header(path: str) -> tuple[int, object]:
    """The header length ``n`` and the parsed JSON header of a safetensors file (data starts at ``8 + n``)."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise NetworkFormatError(f"{path}: truncated safetensors header length (offset 0)")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER:
            raise NetworkFormatError(f"{path}: safetensors header length {n} at offset 0 is implausible")
        raw = f.read(n)
    if len(raw) != n:
        raise NetworkFormatError(f"{path}: safetensors header truncated: needs {n} bytes at offset 8, {len(raw)} left")
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise NetworkFormatError(f"{path}: safetensors header at offset 8 is not JSON: {exc}") from exc
    except RecursionError:  # arrays or objects nested beyond Python's recursion limit
        raise NetworkFormatError(f"{path}: safetensors header at offset 8 is not JSON: nested too deeply") from None
    return n, header


def _check_data_size(path: str) -> None:
    """``NetworkFormatError`` naming the first tensor whose data lies beyond the end of the file (truncation)."""
    n, header = _read_header(path)
    size = os.path.getsize(path)
    if not isinstance(header, dict):
        return  # the safetensors reader names this
    spans = [(v["data_offsets"][1], k, v["data_offsets"][0]) for k, v in header.items()
             if k != "__metadata__" and isinstance(v, dict) and isinstance(v.get("data_offsets"), list)
             and len(v["data_offsets"]) == 2 and all(type(o) is int for o in v["data_offsets"])]
    for end, name, start in sorted(spans):
        if 8 + n + end > size:
            raise NetworkFormatError(f"{path}: truncated in tensor {name!r} (bytes {8 + n + start}..{8 + n + end} of "
                                     f"the file): the file has {size} bytes, its header needs "
                                     f"{8 + n + max(spans)[0]}")


def read_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The string metadata of a safetensors file (``NetworkFormatError`` if the header is unreadable)."""
    path = os.fspath(path)
    _, header = _read_header(path)
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return dict(meta) if isinstance(meta, dict) else {}


def read_info(path: str | os.PathLike[str]) -> dict:
    """nnue-infer's metadata object of a native file, checked: ``format_version``, ``kind``, ``architecture``.

    Raises :class:`NetworkFormatError` naming the missing or bad key.
    """
    path = os.fspath(path)
    meta = read_metadata(path)
    if FORMAT_NAME not in meta:
        raise NetworkFormatError(f"{path}: no {FORMAT_NAME!r} metadata (a safetensors file not written by nnue-infer; "
                                 f"metadata keys: {sorted(meta)})")
    try:
        info = json.loads(meta[FORMAT_NAME])
    except (TypeError, ValueError) as exc:  # TypeError: a hand-made header whose value is not a string
        raise NetworkFormatError(f"{path}: metadata {FORMAT_NAME!r} is not JSON: {exc}") from exc
    except RecursionError:
        raise NetworkFormatError(f"{path}: metadata {FORMAT_NAME!r} is not JSON: nested too deeply") from None
    if not isinstance(info, dict):
        raise NetworkFormatError(f"{path}: metadata {FORMAT_NAME!r} must be a JSON object")
    if type(info.get("format_version")) is not int or info["format_version"] != FORMAT_VERSION:  # not 1.0 or true
        raise NetworkFormatError(f"{path}: metadata 'format_version' is {info.get('format_version')!r}, this reader "
                                 f"supports {FORMAT_VERSION}")
    if info.get("kind") not in ("quantised", "float"):
        raise NetworkFormatError(f"{path}: metadata 'kind' is {info.get('kind')!r}, expected 'quantised' or 'float'")
    if not isinstance(info.get("architecture"), dict):
        raise NetworkFormatError(f"{path}: metadata 'architecture' is missing or not an object")
    return info


def read_safetensors(path: str | os.PathLike[str]) -> Network | FloatNetwork:
    """Read a native network file: a :class:`Network` (``kind = quantised``) or a :class:`FloatNetwork`.

    Raises
    ------
    NetworkFormatError
        Not an nnue-infer safetensors file, unknown ``format_version``, missing or malformed
        metadata (the message names the key), missing or unexpected tensors, or a tensor whose
        dtype or shape does not match the architecture (the message names the tensor).
    OSError
        The file cannot be read.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = os.fspath(path)
    info = read_info(path)
    kind = info["kind"]
    try:
        arch = Architecture.from_dict(info["architecture"])
    except NetworkFormatError as exc:
        raise NetworkFormatError(f"{path}: metadata 'architecture': {exc}") from exc
    _check_data_size(path)
    try:
        tensors = load_file(path)
    except (SafetensorError, OSError, TypeError, ValueError) as exc:  # TypeError: dtypes numpy lacks (BF16)
        if isinstance(exc, FileNotFoundError):
            raise
        raise NetworkFormatError(f"{path}: unreadable safetensors data: {exc}") from exc
    try:
        fields = _from_tensors(arch, tensors)
        cls = FloatNetwork if kind == "float" else Network
        return cls(architecture=arch, description=str(info.get("description", "")), **fields)
    except NetworkFormatError as exc:
        raise NetworkFormatError(f"{path}: {exc} (architecture from the metadata: {arch.feature_set}, "
                                 f"ft_width {arch.ft_width}, {len(arch.layers)} dense layers)") from exc

"""Stockfish 15.1's ``.nnue`` file format: read, write, and find a network inside an engine binary.

Layout (little-endian): header (version, hash, description), feature transformer
(hash, int16 biases [L1], int16 weights [22528][L1], int32 PSQT weights [22528][8]),
then 8 layer stacks (hash, fc_0, fc_1, fc_2 as int32 biases + int8 row-major weights).
Any L1 is accepted: it is encoded in the feature-transformer hash.

Source: Stockfish 15.1, ``nnue/evaluate_nnue.cpp`` (``read_header``, ``read_parameters``),
``nnue/nnue_feature_transformer.h``, ``nnue/layers/affine_transform.h``; see also
``shared/reference/stockfish-15.1-nnue.md`` section 2.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import threading
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from .. import constants as C
from ..errors import NetworkFormatError
from ..features import feature_set
from ..network import Architecture, Network, stockfish_15_1_architecture

#: The first 8 bytes of every Stockfish 15.1 network file: version and (for L1 = 1024) hash.
SF15_1_MAGIC = struct.pack("<II", C.SF_FILE_VERSION, 0x1C102EF2)
_MAX_DESCRIPTION = 1 << 20
_MAX_L1 = 1 << 15
_MASK = 0xFFFFFFFF


def ft_hash(l1: int) -> int:
    """Feature-transformer hash for HalfKAv2_hm with accumulator width ``l1``."""
    return (C.HALFKAV2_HM_HASH ^ (2 * l1)) & _MASK


def layer_stack_hash(l1: int) -> int:
    """Layer-stack hash of Stockfish 15.1's architecture with accumulator width ``l1``.

    Source: Stockfish 15.1 ``nnue/nnue_architecture.h`` (``get_hash_value``): the input
    slice seed XOR 2*L1, folded through affine(16), ClippedReLU, affine(32), ClippedReLU,
    affine(1).  SqrClippedReLU is not part of the hash.
    """
    h = (C.SF_INPUT_SLICE_HASH ^ (2 * l1)) & _MASK

    def affine(h: int, n: int) -> int:
        return ((C.SF_AFFINE_HASH + n) ^ (h >> 1) ^ (h << 31)) & _MASK

    def crelu(h: int) -> int:
        return (C.SF_CLIPPED_RELU_HASH + h) & _MASK

    h = crelu(affine(h, C.SF_L2 + 1))
    h = crelu(affine(h, C.SF_L3))
    return affine(h, 1)


@dataclass(frozen=True)
class _Section:
    name: str
    offset: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def _sections(desc_len: int, l1: int) -> list[_Section]:
    """Every section after the description, with its offset."""
    nf = feature_set("HalfKAv2_hm").num_features
    arch = stockfish_15_1_architecture(l1)
    out: list[_Section] = []
    off = 12 + desc_len

    def add(name: str, dtype: str, shape: tuple[int, ...]) -> None:
        nonlocal off
        out.append(_Section(name, off, dtype, shape))
        off += out[-1].nbytes

    add("feature_transformer.hash", "<u4", ())
    add("feature_transformer.biases", "<i2", (l1,))
    add("feature_transformer.weights", "<i2", (nf, l1))
    add("feature_transformer.psqt_weights", "<i4", (nf, C.SF_BUCKETS))
    for b in range(C.SF_BUCKETS):
        add(f"layer_stack[{b}].hash", "<u4", ())
        for i, (layer, n_in) in enumerate(zip(arch.layers, arch.layer_inputs())):
            add(f"layer_stack[{b}].fc_{i}.biases", "<i4", (layer.outputs,))
            add(f"layer_stack[{b}].fc_{i}.weights", "i1", (layer.outputs, n_in))
    return out


def _read_exact(f: BinaryIO, n: int, what: str, offset: int, path: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise NetworkFormatError(f"{path}: truncated in {what} at offset {offset}: needs {n} bytes, {len(data)} left")
    return data


def _u32(data: bytes) -> int:
    return int(struct.unpack("<I", data)[0])


def _read_header(f: BinaryIO, path: str) -> tuple[str, int, int]:
    """Read and check version, hashes and description; returns (description, its length in bytes, L1)."""
    version = _u32(_read_exact(f, 4, "header.version", 0, path))
    if version != C.SF_FILE_VERSION:
        raise NetworkFormatError(
            f"{path}: header.version at offset 0: expected 0x{C.SF_FILE_VERSION:08X}, got 0x{version:08X}"
            " (not a Stockfish 15.1 network file)"
        )
    net_hash = _u32(_read_exact(f, 4, "header.hash", 4, path))
    desc_len = _u32(_read_exact(f, 4, "header.description_length", 8, path))
    if desc_len > _MAX_DESCRIPTION:
        raise NetworkFormatError(f"{path}: header.description_length at offset 8: {desc_len} bytes is implausible")
    raw = _read_exact(f, desc_len, "header.description", 12, path)
    description = raw.decode("utf-8", "surrogateescape")  # other bytes kept, so writing reproduces them
    off = 12 + desc_len
    fth = _u32(_read_exact(f, 4, "feature_transformer.hash", off, path))
    l1 = (fth ^ C.HALFKAV2_HM_HASH) // 2
    if (fth ^ C.HALFKAV2_HM_HASH) % 2 or not 0 < l1 <= _MAX_L1 or l1 % 32:
        raise NetworkFormatError(
            f"{path}: feature_transformer.hash at offset {off}: 0x{fth:08X} is not HalfKAv2_hm "
            f"(expected 0x{ft_hash(C.SF_L1):08X} for L1 = {C.SF_L1})"
        )
    expected = fth ^ layer_stack_hash(l1)
    if net_hash != expected:
        raise NetworkFormatError(
            f"{path}: header.hash at offset 4: expected 0x{expected:08X} (feature transformer XOR layer stack "
            f"for L1 = {l1}), got 0x{net_hash:08X}"
        )
    return description, desc_len, l1


def read_stockfish(path: str | os.PathLike[str]) -> Network:
    """Read a Stockfish 15.1 ``.nnue`` file.

    Every byte is checked: version, the three kinds of hash, the exact length (no
    truncation, no trailing bytes).  Arrays are read straight into their final buffers
    (no per-element Python work, no second copy of the file).

    Returns
    -------
    Network
        With :func:`~nnue_infer.network.stockfish_15_1_architecture` (L1 taken from the file).

    Raises
    ------
    NetworkFormatError
        Naming the path, the section (e.g. ``layer_stack[3].hash``) and its byte offset.
    OSError
        The file cannot be read.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        description, desc_len, l1 = _read_header(f, path)
        sections = _sections(desc_len, l1)
        end = sections[-1].offset + sections[-1].nbytes
        if size < end:
            cut = next(s for s in sections if s.offset + s.nbytes > size)
            raise NetworkFormatError(
                f"{path}: truncated in {cut.name} (offset {cut.offset}, {cut.nbytes} bytes): file has {size} bytes,"
                f" a network with L1 = {l1} needs {end}"
            )
        if size > end:
            raise NetworkFormatError(f"{path}: {size - end} trailing bytes after the last layer stack (offset {end})")
        arrays: dict[str, np.ndarray] = {}
        stack_hash = layer_stack_hash(l1)
        for s in sections[1:]:  # the feature-transformer hash was read with the header
            if s.shape == ():
                got = _u32(_read_exact(f, 4, s.name, s.offset, path))
                want = ft_hash(l1) if s.name.startswith("feature") else stack_hash
                if got != want:
                    raise NetworkFormatError(f"{path}: {s.name} at offset {s.offset}: expected 0x{want:08X}, got 0x{got:08X}")
                continue
            arr = np.empty(s.shape, np.dtype(s.dtype).newbyteorder("="))  # native order, aligned
            if f.readinto(memoryview(arr).cast("B")) != s.nbytes:
                raise NetworkFormatError(f"{path}: truncated in {s.name} at offset {s.offset}")
            if sys.byteorder == "big":
                arr.byteswap(inplace=True)
            arrays[s.name] = arr
    arch = stockfish_15_1_architecture(l1)
    layer_weights, layer_biases = [], []
    for i in range(len(arch.layers)):
        layer_weights.append(np.stack([arrays[f"layer_stack[{b}].fc_{i}.weights"] for b in range(C.SF_BUCKETS)]))
        layer_biases.append(np.stack([arrays[f"layer_stack[{b}].fc_{i}.biases"] for b in range(C.SF_BUCKETS)]))
    return Network(
        architecture=arch,
        ft_biases=arrays["feature_transformer.biases"],
        ft_weights=arrays["feature_transformer.weights"],
        psqt_weights=arrays["feature_transformer.psqt_weights"],
        layer_weights=tuple(layer_weights),
        layer_biases=tuple(layer_biases),
        description=description,
    )


def is_stockfish_architecture(arch: Architecture) -> bool:
    """Whether ``arch`` can be written in Stockfish 15.1's format (any L1, everything else fixed)."""
    return arch == stockfish_15_1_architecture(arch.ft_width)


def write_stockfish(network: Network, path: str | os.PathLike[str]) -> None:
    """Write ``network`` in Stockfish 15.1's ``.nnue`` format.

    Raises ``ValueError`` if the architecture is not Stockfish 15.1's (any L1 allowed).
    """
    arch = network.architecture
    if not is_stockfish_architecture(arch):
        raise ValueError("only Stockfish 15.1's architecture (with any ft_width) can be written as .nnue")
    l1 = arch.ft_width
    desc = network.description.encode("utf-8", "surrogateescape")
    with open(path, "wb") as f:
        f.write(struct.pack("<III", C.SF_FILE_VERSION, ft_hash(l1) ^ layer_stack_hash(l1), len(desc)))
        f.write(desc)
        f.write(struct.pack("<I", ft_hash(l1)))
        for arr, dt in ((network.ft_biases, "<i2"), (network.ft_weights, "<i2"), (network.psqt_weights, "<i4")):
            f.write(np.ascontiguousarray(arr, dtype=dt).tobytes())
        for b in range(arch.output_buckets):
            f.write(struct.pack("<I", layer_stack_hash(l1)))
            for w, bias in zip(network.layer_weights, network.layer_biases):
                f.write(np.ascontiguousarray(bias[b], dtype="<i4").tobytes())
                f.write(np.ascontiguousarray(w[b], dtype="i1").tobytes())


def network_size(description_length: int, l1: int) -> int:
    """Total file size in bytes of a Stockfish-format network."""
    last = _sections(description_length, l1)[-1]
    return last.offset + last.nbytes


def extract_network(binary: str | os.PathLike[str], out: str | os.PathLike[str]) -> str:
    """Find a network embedded in an engine binary and write it to ``out``.

    The binary is searched for the Stockfish 15.1 header (version + hash for L1 = 1024,
    bytes ``20 2F F3 7A F2 2E 10 1C``); the candidate's size follows from its header, every
    hash is checked, and when its SHA-256 is that of ``nn-ad9b42354671.nnue`` (Stockfish 15.1's
    default net) or ``out``'s name is ``nn-<12 hex>.nnue``, the SHA-256 prefix must match.

    Returns the SHA-256 (hex) of the extracted network.

    Raises
    ------
    NetworkFormatError
        No valid network is embedded, or a named file's SHA-256 prefix does not match.
    OSError
        The binary cannot be read or ``out`` cannot be written.
    """
    import io

    binary = os.fspath(binary)
    with open(binary, "rb") as f:
        data = f.read()
    start = data.find(SF15_1_MAGIC)
    problems, skipped = [], 0
    while start >= 0:
        if not _hashes_agree(data, start):  # cheap, no copy: a file full of magic bytes stays linear
            skipped += 1
            start = data.find(SF15_1_MAGIC, start + 1)
            continue
        try:
            view = io.BytesIO(data[start : start + 12 + _MAX_DESCRIPTION + 8])
            _, desc_len, l1 = _read_header(view, f"{binary}@{start}")
            size = network_size(desc_len, l1)
            blob = data[start : start + size]
            if len(blob) != size:
                raise NetworkFormatError(f"{binary}: network at offset {start} is cut off by the end of the file")
            # A temporary file of our own: processes or threads extracting at once must not share one.
            tmp = f"{os.fspath(out)}.{os.getpid()}-{threading.get_ident()}.part"
            with open(tmp, "wb") as g:
                g.write(blob)
            try:
                read_stockfish(tmp)  # checks every hash and the exact size
                digest = hashlib.sha256(blob).hexdigest()
                name = os.path.basename(os.fspath(out))
                if name.startswith("nn-") and name.endswith(".nnue") and len(name) == 20 and not digest.startswith(name[3:15]):
                    raise NetworkFormatError(f"{binary}: extracted network has SHA-256 {digest[:12]}..., but {name} names {name[3:15]}")
                os.replace(tmp, out)
                return digest
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
        except NetworkFormatError as exc:
            problems.append(str(exc))
        start = data.find(SF15_1_MAGIC, start + 1)
    if skipped:
        problems.append(f"{skipped} header(s) with a bad description length or inconsistent hashes")
    detail = f" ({'; '.join(problems[:5])}{'; ...' if len(problems) > 5 else ''})" if problems else ""
    raise NetworkFormatError(f"{binary}: no embedded Stockfish 15.1 network found{detail}")


def _hashes_agree(data: bytes, start: int) -> bool:
    """Whether a network header at ``data[start]`` has a plausible description length, a
    HalfKAv2_hm feature-transformer hash matching the network hash and, where the data reaches
    them, the right layer-stack hashes (read in place; a network cut off after its
    feature-transformer hash still counts, so that the error can say so)."""
    if start + 16 > len(data):
        return False
    net_hash, desc_len = struct.unpack_from("<II", data, start + 4)
    if desc_len > _MAX_DESCRIPTION or start + 16 + desc_len > len(data):
        return False
    (fth,) = struct.unpack_from("<I", data, start + 12 + desc_len)
    x = fth ^ C.HALFKAV2_HM_HASH
    l1 = x // 2
    if x % 2 or not 0 < l1 <= _MAX_L1 or l1 % 32 or net_hash != fth ^ layer_stack_hash(l1):
        return False
    want = layer_stack_hash(l1)
    return all(struct.unpack_from("<I", data, start + s.offset)[0] == want
               for s in _sections(desc_len, l1) if s.shape == () and start + s.offset + 4 <= len(data)
               and s.name.startswith("layer_stack"))

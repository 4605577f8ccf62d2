"""Finding Stockfish networks inside engines: native binaries, WebAssembly modules (also split
into parts), npm tarballs of the ``stockfish`` package and unpacked package directories.

A native binary embeds a network verbatim, so its bytes are searched directly.  A ``.wasm``
module keeps it in its data section, split into segments around runs of zero bytes; the
module's initial linear memory is rebuilt first: active segments are copied to their
``i32.const`` offsets, passive ones to the destinations of the ``memory.init`` instructions in
the code section (``i32.const dest; i32.const src; i32.const len; memory.init seg``).  Split
modules (``...-part-0.wasm``, ``-part-1``, ...) are concatenated in part order first.  Networks
are found by their header (version ``20 2F F3 7A`` up to Stockfish 18, ``FA 8A 44 6A`` in 19)
and walked with the ``.nnue`` format (:func:`nnue_infer.formats.stockfish.network_extent`);
each is parsed completely and named ``nn-`` + the first 12 hex digits of its SHA-256.

Source: the WebAssembly core specification 2.0, section 5.5 (binary modules: sections, data
segments, ``memory.init`` = ``0xFC 8``); ``shared/reference/stockfish-19-nnue.md`` section 12.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import stat
import struct
import tarfile
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import NetworkFormatError
from .stockfish import VERSIONS, network_extent, parse_stockfish

#: The most bytes read from one source file or tarball member: engines, ``.wasm`` modules and npm
#: tarballs are well under 1 GiB (Stockfish 18's, the largest, is 168 MB); anything larger (or a
#: device such as ``/dev/zero``) would only fill the memory.
MAX_SOURCE_BYTES = 1 << 30
_WASM_MAGIC = b"\0asm"
_PART = re.compile(r"^(.*)-part-(\d+)\.wasm$")
#: i32.const a; i32.const b; i32.const c; memory.init seg 0 (LEB128 immediates).
_MEMORY_INIT = re.compile(rb"\x41([\x80-\xff]{0,4}[\x00-\x7f])\x41([\x80-\xff]{0,4}[\x00-\x7f])"
                          rb"\x41([\x80-\xff]{0,4}[\x00-\x7f])\xfc\x08([\x80-\xff]{0,4}[\x00-\x7f])\x00", re.S)


@dataclass(frozen=True)
class FoundNetwork:
    """A network found in an engine file.

    Attributes
    ----------
    source : str
        The file it came from (for a tarball: ``tarball:member``; for a split module, its first part).
    offset : int
        Byte offset in the file (native binaries, ``.nnue`` files) or in the rebuilt linear memory (wasm).
    size : int
        Bytes.
    sha256 : str
        SHA-256 of the network's bytes (hex).
    data : bytes
        The network file's bytes.
    """

    source: str
    offset: int
    size: int
    sha256: str
    data: bytes = field(repr=False)

    @property
    def name(self) -> str:
        """``nn-`` + the first 12 hex digits of the SHA-256 + ``.nnue`` (Stockfish's naming)."""
        return f"nn-{self.sha256[:12]}.nnue"


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def _sleb(raw: bytes) -> int:
    result = shift = 0
    for byte in raw:
        result |= (byte & 0x7F) << shift
        shift += 7
    if raw[-1] & 0x40:
        result -= 1 << shift
    return result


def wasm_memory(module: bytes, where: str = "wasm") -> np.ndarray:
    """The initial linear memory (uint8) a WebAssembly module's data section describes.

    Raises :class:`NetworkFormatError` if ``module`` is not a wasm module, is truncated (a
    section or segment runs past its end, e.g. a split module with a part missing) or a
    segment's destination cannot be found.
    """
    if module[:4] != _WASM_MAGIC:
        raise NetworkFormatError(f"{where}: not a WebAssembly module (first bytes {module[:4].hex(' ')})")
    try:
        return _wasm_memory(module, where)
    except IndexError:  # a LEB128 number or a segment header runs past the end
        raise NetworkFormatError(f"{where}: the WebAssembly module is truncated ({len(module)} bytes; for a split "
                                 "module, is a part missing?)") from None


def _wasm_memory(module: bytes, where: str) -> np.ndarray:
    pos = 8
    data_section = code_section = None
    while pos < len(module):
        sid = module[pos]
        size, body = _uleb(module, pos + 1)
        if body + size > len(module):
            raise NetworkFormatError(f"{where}: section {sid} at byte {pos} needs {size} bytes, {len(module) - body} "
                                     f"left: the WebAssembly module is truncated ({len(module)} bytes; for a split "
                                     "module, is a part missing?)")
        if sid == 11:
            data_section = (body, body + size)
        elif sid == 10:
            code_section = (body, body + size)
        pos = body + size
    if data_section is None:
        return np.zeros(0, np.uint8)
    pos, end = data_section
    count, pos = _uleb(module, pos)
    active, passive = [], {}
    for seg in range(count):
        flags, pos = _uleb(module, pos)
        if flags in (0, 2):
            if flags == 2:
                _, pos = _uleb(module, pos)  # memory index
            if module[pos] != 0x41:
                raise NetworkFormatError(f"{where}: data segment {seg} at byte {pos}: offset is not an i32.const")
            start = pos = pos + 1
            while module[pos] >= 0x80:
                pos += 1
            offset = _sleb(module[start:pos + 1]) & 0xFFFFFFFF
            pos += 1
            if module[pos] != 0x0B:
                raise NetworkFormatError(f"{where}: data segment {seg} at byte {pos}: offset expression is not a "
                                         "single i32.const")
            pos += 1
            n, pos = _uleb(module, pos)
            active.append((offset, pos, n))
        elif flags == 1:
            n, pos = _uleb(module, pos)
            passive[seg] = (pos, n)
        else:
            raise NetworkFormatError(f"{where}: data segment {seg}: unknown flags {flags}")
        if pos + n > end:
            raise NetworkFormatError(f"{where}: data segment {seg} at byte {pos} needs {n} bytes, {end - pos} left in "
                                     "the data section: the WebAssembly module is truncated or corrupt")
        pos += n
    if passive and code_section is not None:
        code = module[code_section[0]:code_section[1]]
        for m in _MEMORY_INIT.finditer(code):
            seg = _uleb(m.group(4), 0)[0]
            if seg in passive and len(passive[seg]) == 2:
                src, n = passive[seg]
                active.append((_sleb(m.group(1)) & 0xFFFFFFFF, src, n))
                passive[seg] = (src, n, True)
    if not active:
        return np.zeros(0, np.uint8)
    size = max(offset + n for offset, _, n in active)
    memory = np.zeros(size, np.uint8)
    raw = np.frombuffer(module, np.uint8)
    for offset, src, n in active:
        memory[offset:offset + n] = raw[src:src + n]
    return memory


def find_in_image(image: np.ndarray, source: str) -> list[FoundNetwork]:
    """Every valid Stockfish network in a byte image (uint8 array), in order of offset."""
    found = []
    raw = image.tobytes()
    starts = sorted(m for version in VERSIONS for m in _all(raw, struct.pack("<I", version)))
    next_free = 0
    for start in starts:
        if start < next_free:
            continue
        try:
            size = network_extent(image, start, f"{source}@{start}")
            if start + size > len(image):
                continue
            blob = image[start:start + size]
            parse_stockfish(np.array(blob), f"{source}@{start}")  # checks every hash, LEB128 block and size
        except NetworkFormatError:
            continue
        data = blob.tobytes()
        found.append(FoundNetwork(source, start, size, hashlib.sha256(data).hexdigest(), data))
        next_free = start + size
    return found


def _all(data: bytes, needle: bytes):
    i = data.find(needle)
    while i >= 0:
        yield i
        i = data.find(needle, i + 1)


def _group_parts(names: list[str]) -> list[list[str]]:
    """Files to scan, split wasm modules as one group of parts in order."""
    groups: dict[str, list[tuple[int, str]]] = {}
    singles = []
    for name in names:
        m = _PART.match(os.path.basename(name))
        if m:
            groups.setdefault(os.path.join(os.path.dirname(name), m.group(1)), []).append((int(m.group(2)), name))
        else:
            singles.append([name])
    return singles + [[n for _, n in sorted(parts)] for parts in groups.values()]


def _scan_bytes(blob: bytes, source: str) -> list[FoundNetwork]:
    if blob[:4] == _WASM_MAGIC:
        return find_in_image(wasm_memory(blob, source), source)
    return find_in_image(np.frombuffer(blob, np.uint8), source)


def _check_size(size: int, where: str) -> None:
    if size > MAX_SOURCE_BYTES:
        raise NetworkFormatError(f"{where}: {size} bytes, more than any engine file ({MAX_SOURCE_BYTES} bytes at most "
                                 "are read)")


def _read(path: Path) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_SOURCE_BYTES` (never a device or FIFO)."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise NetworkFormatError(f"{path}: not a regular file (a device, FIFO or socket); give an engine binary, "
                                 "a .wasm, an npm tarball or a directory")
    _check_size(st.st_size, str(path))
    with open(path, "rb") as f:
        data = f.read(MAX_SOURCE_BYTES + 1)
    _check_size(len(data), str(path))
    return data


def find_networks(path: str | os.PathLike[str], member: str | None = None) -> list[FoundNetwork]:
    """Every Stockfish network in an engine binary, a ``.wasm`` (the first part of a split one
    brings its other parts), a ``.nnue`` file, an npm tarball (``stockfish-17.1.0.tgz``) or a
    directory (an unpacked package: its ``.wasm`` and ``.nnue`` files, recursively).

    The same network found in several files is listed once per file.  ``member`` limits a
    tarball to one file (a path inside it, e.g. ``package/bin/stockfish-19-lite-single.wasm``;
    for a split module its first part).

    Raises
    ------
    OSError
        The path cannot be read.
    NetworkFormatError
        A wasm module is malformed, the path is a device or FIFO (not a regular file or directory),
        a file is larger than :data:`MAX_SOURCE_BYTES`, or a tarball is truncated or corrupt.
    """
    path = Path(path)
    if path.is_dir():
        names = sorted(str(p) for p in path.rglob("*") if p.suffix in (".wasm", ".nnue") and p.is_file())
        out = []
        for group in _group_parts(names):
            out += _scan_bytes(b"".join(_read(Path(n)) for n in group), group[0])
        return out
    name = path.name
    if name.endswith((".tgz", ".tar.gz", ".tar")):
        if not stat.S_ISREG(path.stat().st_mode):
            _read(path)  # names the problem
        out = []
        try:
            with tarfile.open(path) as tar:
                members = {m.name: m for m in tar.getmembers() if m.isfile() and m.name.endswith((".wasm", ".nnue"))}
                for group in _group_parts(sorted(members)):
                    if member is not None and group[0] != member:
                        continue
                    _check_size(sum(members[n].size for n in group), f"{path}:{group[0]}")
                    blob = b"".join(tar.extractfile(members[n]).read() for n in group)  # type: ignore[union-attr]
                    out += _scan_bytes(blob, f"{path}:{group[0]}")
        except (EOFError, tarfile.TarError, zlib.error, gzip.BadGzipFile) as exc:
            raise NetworkFormatError(f"{path}: truncated or corrupt archive ({exc or type(exc).__name__})") from exc
        return out
    m = _PART.match(name)
    if m:
        parts = []
        k = 0
        while (path.parent / f"{m.group(1)}-part-{k}.wasm").is_file():
            parts.append(_read(path.parent / f"{m.group(1)}-part-{k}.wasm"))
            k += 1
        if not parts:
            raise FileNotFoundError(f"{path}: the split module's first part {m.group(1)}-part-0.wasm is missing")
        return _scan_bytes(b"".join(parts), str(path))
    return _scan_bytes(_read(path), str(path))


def extract_network(source: str | os.PathLike[str], out: str | os.PathLike[str], member: str | None = None) -> str:
    """Find a network in ``source`` (see :func:`find_networks`) and write it to ``out``.

    ``out`` may be a directory (every distinct network is written there under its
    ``nn-<12 hex>.nnue`` name), a file named ``nn-<12 hex>.nnue`` (the network with that
    SHA-256 prefix), or any other file name when ``source`` holds exactly one distinct network.
    ``member``: as for :func:`find_networks`.

    Returns the SHA-256 (hex) of the (first) network written.

    Raises
    ------
    NetworkFormatError
        No network is embedded, the named one is not there, or several are and ``out`` does
        not say which (the message lists them).
    OSError
        ``source`` cannot be read or ``out`` cannot be written.
    """
    found = find_networks(source, member)
    distinct: dict[str, FoundNetwork] = {}
    for f in found:
        distinct.setdefault(f.sha256, f)
    if not distinct:
        raise NetworkFormatError(f"{os.fspath(source)}: no embedded Stockfish network found (searched for headers "
                                 "20 2F F3 7A and FA 8A 44 6A with valid hashes and sizes)")
    out = Path(out)
    listing = ", ".join(f"{f.name} ({f.size} bytes, in {f.source})" for f in distinct.values())
    if out.is_dir():
        return write_networks(found, out)[0].sha256
    name = out.name
    if name.startswith("nn-") and name.endswith(".nnue") and len(name) == 20:
        chosen = [f for f in distinct.values() if f.sha256.startswith(name[3:15])]
        if not chosen:
            raise NetworkFormatError(f"{os.fspath(source)}: no network with SHA-256 prefix {name[3:15]} (the name {name}); "
                                     f"found {listing}")
    elif len(distinct) == 1:
        chosen = list(distinct.values())
    else:
        raise NetworkFormatError(f"{os.fspath(source)}: {len(distinct)} networks found ({listing}); name the output "
                                 "nn-<12 hex digits>.nnue to pick one, or give a directory for all")
    _write(out, chosen[0].data)
    return chosen[0].sha256


def write_networks(found: list[FoundNetwork], directory: str | os.PathLike[str]) -> list[FoundNetwork]:
    """Write each distinct network of ``found`` into ``directory`` under its ``nn-<12 hex>.nnue``
    name; returns the networks written (first occurrence of each SHA-256)."""
    distinct: dict[str, FoundNetwork] = {}
    for f in found:
        distinct.setdefault(f.sha256, f)
    for f in distinct.values():
        _write(Path(directory) / f.name, f.data)
    return list(distinct.values())


def _write(path: Path, data: bytes) -> None:
    """Write through a temporary file of our own, so concurrent extractions never share one."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.part")
    try:
        with open(tmp, "wb") as g:
            g.write(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()



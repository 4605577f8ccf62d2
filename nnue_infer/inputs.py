"""Open any input file of the CLI: a path, ``-`` for standard input, plain or compressed.

:func:`open_input` reads a source front to back without ever seeking, so pipes, FIFOs and
process substitutions (``<(zcat games.pgn.gz)``) work like regular files.  The compression is
detected from the first bytes, not from the name:

* gzip (``1f 8b``, RFC 1952; concatenated members are read one after the other);
* Zstandard (``28 b5 2f fd``, RFC 8878; several frames are read one after the other), through the
  ``zstandard`` package;
* anything else is read as it is.

The returned :class:`Input` is a context manager; its ``text`` (or ``binary``) stream gives the
decompressed content, ``bytes_read`` counts the bytes consumed from the source (compressed bytes,
for a progress bar) and ``size`` is the source's size when it is a regular file (``None`` for a
pipe).  Where compressed data is corrupt or truncated (or a gzip member is followed by bytes
that are no member) the decompressed stream ends, and the :class:`~nnue_infer.errors.InputError`
naming the source and the compressed byte offset is raised when the ``Input`` is closed: a reader
gets every row decoded before the damage, then the error.
"""

from __future__ import annotations

import errno
import io
import itertools
import os
import stat
import sys
import zlib
from contextlib import contextmanager
from typing import BinaryIO, Iterator, TextIO

from .errors import InputError, InputKindError, StreamClosedError

#: Magic bytes of the compressed formats: gzip (RFC 1952) and Zstandard frames (RFC 8878).
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

#: ``-`` names standard input.
STDIN = "-"
#: Longest text line read (bytes): a file without newlines (``/dev/zero``, a binary file) raises
#: :class:`InputError` instead of filling the memory.
MAX_LINE = 1 << 24


#: Bytes at the start of a text input (EPD/FEN, PGN) looked at for a NUL byte, the mark of binary data
#: (:func:`binary_problem`; git's test for binary files looks at 8,000).
SNIFF_BYTES = 8192


def binary_problem(head: bytes, label: str, what: str) -> str | None:
    """The message refusing a text input named ``label`` whose first bytes ``head`` (decompressed; the first
    :data:`SNIFF_BYTES` are looked at) hold a NUL byte: binary data (an image, an archive, UTF-16 text) is not
    ``what``; it names the byte's offset and line, and for a name ending ``.binpack`` or ``.bin`` (``.gz``,
    ``.zst``) where Stockfish's training data is read instead.  ``None`` for text: bytes that are not UTF-8 alone do not make
    binary data (they are read as U+FFFD, as in a Latin-1 PGN's names)."""
    at = head.find(b"\0", 0, SNIFF_BYTES)
    if at < 0:
        return None
    line = head.count(b"\n", 0, at) + 1
    utf16 = " (UTF-16 text: convert it to UTF-8)" if head[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
    name = label.lower().removesuffix(".gz").removesuffix(".zst")
    if name.endswith((".binpack", ".bin")):
        utf16 = (" (Stockfish training data: nnue-infer data and nnue_infer.io.training_data read it; eval scores a "
                 ".binpack with --workers or --scheduler: docs/training-data.md)")
    return f"{label}: NUL byte at byte offset {at} (line {line}): binary data, not {what}{utf16}"


def peek_start(stream) -> bytes:
    """The first bytes that ``stream`` (a buffered binary stream, or a text stream over one: ``.buffer``) will
    give, reading nothing (at most a buffer's worth, fewer from a pipe: what has arrived); ``b""`` when it cannot
    tell (a list of lines).  Call it before the stream is read.  The text stream of :func:`open_input` with
    ``binary_what`` also checks the rest of the first :data:`SNIFF_BYTES` as they are read."""
    buffer = stream if hasattr(stream, "peek") else getattr(stream, "buffer", None)
    peek = getattr(buffer, "peek", None)
    return peek(SNIFF_BYTES)[:SNIFF_BYTES] if peek is not None else b""


class _LineGuard(io.RawIOBase):
    """A raw stream over ``source`` (decompressed bytes) that raises :class:`InputError` once a line
    exceeds ``max_line`` bytes; checked per chunk in C (``bytes.rfind``, ``bytes.count``), so
    reading lines costs no Python work per line.  With ``binary_what``, a NUL byte among the first
    :data:`SNIFF_BYTES` is :class:`InputKindError` (:func:`binary_problem`), found as they are read: a pipe's
    later pieces too, without waiting for them before the first line (a stream of games read as they come)."""

    def __init__(self, source: BinaryIO, name: str, max_line: int, binary_what: str | None = None) -> None:
        self._source, self._name, self._max_line = source, name, max_line
        self._open_line = 0  # bytes since the last newline
        self._newlines = 0
        self._what = binary_what
        self._head = b""  # the first SNIFF_BYTES read so far (while binary_what is checked)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self._source.read1(len(b))  # type: ignore[attr-defined]
        n = len(data)
        if self._what is not None and data:
            self._head += data[:SNIFF_BYTES - len(self._head)]
            problem = binary_problem(self._head, self._name, self._what) if b"\0" in self._head else None
            if problem:
                raise InputKindError(problem)
            if len(self._head) >= SNIFF_BYTES:
                self._what, self._head = None, b""
        last = data.rfind(b"\n")
        if last < 0:
            self._open_line += n
        else:
            self._newlines += data.count(b"\n")
            self._open_line = n - last - 1
        if self._open_line > self._max_line:
            raise InputError(f"{self._name}: line {self._newlines + 1} is longer than {self._max_line} bytes "
                             "(not a text file of positions or games?)")
        b[:n] = data
        return n

    def close(self) -> None:
        if not self.closed:
            self._source.close()
        super().close()


class _CountingReader(io.RawIOBase):
    """A raw, non-seekable stream over ``f`` that first serves ``head`` (bytes already read from
    ``f`` to detect the compression) and counts every byte taken from ``f`` in ``bytes_read``."""

    def __init__(self, f: BinaryIO, head: bytes, close_source: bool) -> None:
        self._f, self._head, self._close_source = f, head, close_source
        self.bytes_read = len(head)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        read1 = getattr(self._f, "read1", self._f.read)
        data = read1(len(b))
        n = len(data)
        b[:n] = data
        self.bytes_read += n
        return n

    def close(self) -> None:
        if not self.closed and self._close_source:
            self._f.close()
        super().close()


class _CheckedReader(io.RawIOBase):
    """A raw stream over a decompressor (gzip) that ends where its data is damaged (corrupt,
    truncated, or followed by bytes that are not another member) and keeps the error as ``damage``:
    an :class:`InputError` naming the source, the compression and the compressed byte offset,
    raised by :class:`Input` when it is closed, after everything decoded before the damage was
    read (``gzip.GzipFile.read1`` returns what one step decoded, or raises)."""

    def __init__(self, stream, name: str, compression: str, errors: tuple[type[BaseException], ...],
                 counter: _CountingReader) -> None:
        self._stream, self._name, self._compression, self._errors = stream, name, compression, errors
        self._counter = counter
        self.damage: InputError | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        if self.damage is not None:
            return 0
        try:
            data = self._stream.read1(len(b))  # one decompression step: read() would drop what it had on an error
        except self._errors as exc:
            self.damage = InputError(f"{self._name}: corrupt or truncated {self._compression} data found by compressed "
                                     f"byte {self._counter.bytes_read} ({exc}); the rows before it were read")
            return 0
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


class _ZstdReader(io.RawIOBase):
    """Decompresses consecutive Zstandard frames from ``source`` (a buffered stream); where the data
    is corrupt, or the source ends inside a frame (``zstandard``'s stream reader would stop
    silently), it hands out what it decoded before and ends, keeping the :class:`InputError` as
    ``damage`` (raised by :class:`Input` when it is closed), as :class:`_CheckedReader`."""

    def __init__(self, source: BinaryIO, name: str, counter: _CountingReader) -> None:
        import zstandard

        self._zstd, self._source, self._name, self._counter = zstandard, source, name, counter
        self._obj = zstandard.ZstdDecompressor().decompressobj()
        self._in_frame = False  # bytes of the current frame were fed and its end is not reached yet
        self._out, self._pos = b"", 0  # decompressed bytes not yet handed out: self._out[self._pos:]
        self.damage: InputError | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        while self._pos == len(self._out):
            self._out, self._pos = b"", 0
            if self.damage is not None:
                return 0
            chunk = self._source.read1(1 << 16)  # type: ignore[attr-defined]
            if not chunk:
                if self._in_frame:
                    self.damage = InputError(f"{self._name}: truncated zstd data (the input ends inside a frame, "
                                             f"at compressed byte {self._counter.bytes_read}); the rows before it "
                                             "were read")
                return 0
            while chunk:
                start = chunk if not self._in_frame else None  # a frame's header is at its start
                try:
                    self._out += self._obj.decompress(chunk)
                except self._zstd.ZstdError as exc:
                    self.damage = InputError(self._zstd_problem(exc, start))
                    break
                self._in_frame = not self._obj.eof
                chunk = self._obj.unused_data if self._obj.eof else b""
                if self._obj.eof:
                    self._obj = self._zstd.ZstdDecompressor().decompressobj()
        n = min(len(b), len(self._out) - self._pos)
        b[:n] = self._out[self._pos:self._pos + n]
        self._pos += n
        return n

    def _zstd_problem(self, exc: Exception, start: bytes | None) -> str:
        """The message of a decompression error: a frame whose window is over the decompressor's limit
        (128 MiB, as the ``zstd`` tool's default: a frame written with ``zstd --long=31`` declares
        2 GiB) is no corrupt data, and says how to read it; other errors say the data is corrupt."""
        where = f"compressed byte {self._counter.bytes_read}"
        if "too much memory" in str(exc):
            try:
                window = f"a {self._zstd.get_frame_parameters(start).window_size >> 20} MiB window" if start else "a window"
            except self._zstd.ZstdError:
                window = "a window"
            return (f"{self._name}: a zstd frame (by {where}) needs {window} to decompress, over the 128 MiB "
                    f"this reader allows (written with zstd --long?); decompress it first, e.g. zstd -d --long=31, "
                    "or compress it without --long; the rows before it were read")
        return f"{self._name}: corrupt zstd data found by {where} ({exc}); the rows before it were read"

    def close(self) -> None:
        if not self.closed:
            self._source.close()
        super().close()


class Input:
    """An open input: ``binary`` (decompressed bytes) or ``text`` (decoded lines), closed on exit.

    Attributes
    ----------
    name : str
        The source as given (``"-"`` shows as ``"<stdin>"``), for messages.
    compression : str or None
        ``"gzip"``, ``"zstd"`` or ``None``.
    size : int or None
        Bytes of the source when it is a regular file, else ``None`` (pipe, FIFO, terminal).
    """

    def __init__(self, source: str | os.PathLike[str], text: bool, encoding: str, errors: str,
                 binary_what: str | None = None) -> None:
        path = os.fspath(source)
        if path == STDIN:
            raw, self.name, close_source = standard_stream("stdin"), "<stdin>", False
        else:
            raw, self.name, close_source = open(path, "rb"), path, True  # noqa: SIM115 (closed by close())
        try:
            mode = os.fstat(raw.fileno()).st_mode
            self.size = os.fstat(raw.fileno()).st_size if stat.S_ISREG(mode) else None
        except (OSError, io.UnsupportedOperation):  # e.g. a replaced sys.stdin without a descriptor
            self.size = None
        head = b""
        read1 = getattr(raw, "read1", raw.read)
        while len(head) < len(ZSTD_MAGIC):  # a pipe may deliver fewer bytes per read
            # what one read gives (a regular file: SNIFF_BYTES), so that the first block of a text input can be
            # peeked at (peek_start) through the buffered streams over this one; not more from a pipe, whose
            # first lines are read as they come (the binary check of its later pieces: _LineGuard)
            chunk = read1(SNIFF_BYTES - len(head))
            if not chunk:
                break
            head += chunk
        self._counter = _CountingReader(raw, head, close_source)
        counted = io.BufferedReader(self._counter)
        if head.startswith(GZIP_MAGIC):
            import gzip

            self.compression: str | None = "gzip"
            self._decoder: _CheckedReader | _ZstdReader | None = _CheckedReader(
                gzip.GzipFile(fileobj=counted, mode="rb"), self.name, "gzip", (EOFError, gzip.BadGzipFile, zlib.error),
                self._counter)
            self.binary: BinaryIO = io.BufferedReader(self._decoder)
        elif head.startswith(ZSTD_MAGIC):
            self.compression = "zstd"
            self._decoder = _ZstdReader(counted, self.name, self._counter)
            self.binary = io.BufferedReader(self._decoder)
        else:
            self.compression = None
            self._decoder = None
            self.binary = counted
        self._counted = counted
        self._guard = io.BufferedReader(_LineGuard(self.binary, self.name, MAX_LINE, binary_what)) if text else None
        self.text: TextIO | None = (io.TextIOWrapper(self._guard, encoding=encoding, errors=errors)
                                    if self._guard is not None else None)

    @property
    def bytes_read(self) -> int:
        """Bytes consumed from the source so far (compressed bytes for a compressed source)."""
        return self._counter.bytes_read

    def close(self) -> None:
        """Close the streams and the source (never standard input)."""
        for stream in (self.text, self._guard, self.binary, self._counted, self._counter):
            if stream is not None:
                stream.close()

    @property
    def damage(self) -> InputError | None:
        """Where the compressed data was found damaged (the decompressed stream ends there), or None."""
        return self._decoder.damage if self._decoder is not None else None

    def __enter__(self) -> Input:
        return self

    def __exit__(self, exc_type, *exc_info) -> None:
        """Close; then, when the block ended normally, raise the :attr:`damage` found (the reader has
        had everything decoded before it)."""
        self.close()
        if exc_type is None and self.damage is not None:
            raise self.damage


def standard_stream(name: str) -> BinaryIO:
    """``sys.stdin.buffer`` (``name`` ``"stdin"``) or ``sys.stdout.buffer`` (``"stdout"``).

    Raises :class:`~nnue_infer.errors.StreamClosedError` naming the stream when the process was
    started with it closed (Python then sets ``sys.stdin`` / ``sys.stdout`` to None).
    """
    stream = getattr(sys, name)
    if stream is None:
        which = "input" if name == "stdin" else "output"
        raise StreamClosedError(f"standard {which} is closed (the process was started without it): "
                                f"{'give a file instead of -' if which == 'input' else 'write to a file with -o FILE'}")
    return stream.buffer


def open_input(source: str | os.PathLike[str], *, text: bool = True, encoding: str = "utf-8-sig",
               errors: str = "replace", binary_what: str | None = None) -> Input:
    """Open ``source`` (a path, or ``-`` for standard input) for one front-to-back read.

    Parameters
    ----------
    source : str or os.PathLike
        A file, FIFO or ``/dev/stdin``-style path, or ``"-"`` for standard input.  gzip and
        Zstandard content is decompressed on the fly (detected from the magic bytes).
    text : bool
        Whether to decode: ``Input.text`` is then a text stream (universal newlines; lines of
        at most :data:`MAX_LINE` bytes, else :class:`InputError`); ``Input.binary`` gives the
        decompressed bytes (read one or the other).
    encoding, errors : str
        Text decoding, as for :func:`open` (default: UTF-8 with an optional BOM; undecodable
        bytes become U+FFFD, so a bad line is reported by whatever parses it).
    binary_what : str, optional
        What the text should be (``"a PGN text file"``): a NUL byte among its first :data:`SNIFF_BYTES`
        (decompressed) is then :class:`~nnue_infer.errors.InputKindError` (:func:`binary_problem`), raised by
        the read that reaches it (from a pipe, lines before it are read as they come).

    Returns
    -------
    Input
        A context manager; use ``with open_input(p) as inp: for line in inp.text: ...``.

    Raises
    ------
    OSError
        The source cannot be opened (``FileNotFoundError``, ``IsADirectoryError``, ...; the
        exception names the path).
    InputError
        On read: corrupt or truncated compressed data (an ``OSError`` naming the source).
    """
    return Input(source, text, encoding, errors, binary_what)


def input_label(source: str | os.PathLike[str]) -> str:
    """How messages name ``source``: ``<stdin>`` for ``-``, else the path as given."""
    path = os.fspath(source)
    return "<stdin>" if path == STDIN else path


def numbered_lines(source: str | os.PathLike[str]) -> Iterator[tuple[str, int, str]]:
    """The non-blank lines of a text input, stripped, with what an error message needs.

    Yields ``(label, lineno, line)``: ``label`` from :func:`input_label`, ``lineno`` counting from 1
    over every line (blank ones included, as an editor counts), ``line`` without surrounding white
    space.  Opens ``source`` with :func:`open_input` (``-``, pipes, gzip/zstd) and closes it when
    the iteration ends or is abandoned.

    Raises
    ------
    OSError, InputError
        As :func:`open_input`.
    """
    with open_input(source) as inp:
        label = input_label(source)
        for lineno, line in enumerate(inp.text, 1):
            line = line.strip()
            if line:
                yield label, lineno, line


#: Numbers of :func:`replacing`'s temporary files in this process (``next`` is atomic under the GIL).
_REPLACING = itertools.count()


@contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[str]:
    """Write a whole output file so that it exists complete or not at all.

    Yields the name to write to: a hidden temporary file beside ``path`` (``.NAME.tmp-PID-K``, ``K`` counting
    this process's calls: two writers of one path in one process, such as two threads of a Dask worker
    running one part for two jobs, each write their own file),
    renamed over ``path`` when the block ends without an exception and removed when it raises,
    leaving an existing ``path`` as it was.  The new ``path`` keeps an existing file's permission
    bits (as ``cp`` and editors do; a new one gets the umask's); the temporary file over an existing
    one is made beforehand, readable by its owner only until it is complete.  A ``path`` that exists and is not
    a regular file (a device such as ``/dev/full``, a named pipe) is written in place: renaming over
    it would replace it.  An ``OSError`` naming the temporary file is re-raised naming ``path``.

    Raises
    ------
    PermissionError
        Before anything is written: ``path`` is a file this user may not write (read-only for
        them; root may write any file, so it is replaced, mode kept, as ``cp`` would).
    """
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        yield path
        return
    mode = None
    if os.path.exists(path):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if not os.access(path, os.W_OK):
            raise PermissionError(errno.EACCES, f"Permission denied: the file is read-only (mode {mode:04o}), "
                                                "not replaced", path)
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.tmp-{os.getpid()}-{next(_REPLACING)}")  # readers skip names starting with "."
    try:
        try:
            if mode is not None:  # made for the owner only: the new contents of a 0600 file are never readable by others
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            yield tmp
            if mode is not None:
                os.chmod(tmp, mode)
        except OSError as exc:
            if exc.filename != tmp:
                raise
            raise type(exc)(exc.errno, exc.strerror, path) from None
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

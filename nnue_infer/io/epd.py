"""EPD and FEN files as columns: each position's line number, FEN and EPD operations.

One line per position: a FEN (six fields) or an EPD record (the first four FEN fields, then
operations such as ``bm Nf3; id "WAC.001";``; PGN standard, section 16.2).  Blank lines and
lines starting with ``#`` are skipped.  Fields are separated by white space as python-chess
reads a FEN (``str.split()``): ASCII and :data:`UNICODE_SPACES` (a no-break space copied from a
web page); the FEN column keeps the line's own characters.  Splitting runs in compiled code over
the file's bytes (:mod:`nnue_infer.kernels.data.epd`); the FENs and operands stay byte ranges of that buffer
(:class:`~nnue_infer.io.output.TextColumn`), so a file of millions of lines is read without a
Python object per line, and :func:`iter_epd` reads a stream in chunks of
:data:`CHUNK_BYTES`, so memory stays bounded whatever the input.

EPD operations are checked: an opcode must be a name (a letter, then letters, digits or
``_``, at most 15 characters), a string operand needs its closing quote (``\\"`` and ``\\\\``
inside are a quote and a backslash), and an opcode may appear once per line.  A line
breaking these rules is a problem of that line (:meth:`EpdRows.problem`), like a bad FEN.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from ..errors import InputError, InputKindError
from ..inputs import binary_problem
from ..kernels.data import epd as KE
from .output import TextColumn
from ..positions import missing_field

#: Bytes read from a stream at a time by :func:`iter_epd` (about 100,000 EPD lines).
CHUNK_BYTES = 1 << 23
#: Longest line :func:`iter_epd` accepts, in bytes (a FEN and its operations are far shorter;
#: a longer "line" means the input is not an EPD/FEN file).
MAX_LINE_BYTES = 1 << 20

_OP_PROBLEMS = {
    KE.OP_BAD_OPCODE: "EPD opcode {opcode!r} is not a name (a letter, then letters, digits or '_', at most 15)",
    KE.OP_UNTERMINATED: "EPD string operand without its closing '\"'",
    KE.OP_REPEATED: "EPD opcode {opcode!r} given twice on the line",
}
#: The characters beyond ASCII that Python's ``str.split()``, and so python-chess's ``chess.Board(fen)``, takes for white
#: space (U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000; none lies above U+3000).
UNICODE_SPACES = "".join(c for c in map(chr, range(0x80, 0x3001)) if c.isspace())
_UNICODE_SPACE = re.compile(b"|".join(re.escape(c.encode("utf-8")) for c in UNICODE_SPACES))
_ASCII = bytes(range(128))


def _has_unicode_space(data: bytes) -> bool:
    """Whether the UTF-8 text ``data`` holds one of :data:`UNICODE_SPACES`."""
    rest = data.translate(None, _ASCII).decode("utf-8", "replace")
    return any(c in rest for c in UNICODE_SPACES)
_PGN_LINE = re.compile(rb"\s*(\[[A-Za-z0-9_]+\s+\"|1\.\s*[a-hNBRQKO])")
_FEN_LINE = re.compile(r"\s*[1-8pnbrqkPNBRQK]{1,8}(/[1-8pnbrqkPNBRQK~]{1,9}){7}(\s|$)")


@dataclass(frozen=True)
class EpdRows:
    """The positions of one EPD/FEN text (or one chunk of it).

    Attributes
    ----------
    line : numpy.ndarray
        int64[n], 1-based line number of each position in the text.
    fen : TextColumn
        The FEN of each position: its first four fields, or six when the line ends in the two
        counters (or five: see ``fields``).
    fields : numpy.ndarray
        int8[n], FEN fields found: 1-4 or 6; 5 when a half-move clock has no full-move number.
    line_start : numpy.ndarray
        int64[n], byte offset of each position's line in ``fen.buf`` (for columns in messages).
    op_row, op_name_start, op_name_end, op_start, op_end, op_hash : numpy.ndarray
        int64[m] each: the EPD operations, in order: the position they belong to, the byte
        ranges of opcode and operand (one string operand: without quotes, unescaped) and the
        opcode's hash (FNV-1a 64).
    op_problem, op_problem_at : numpy.ndarray
        int8[n] (``kernels.data.epd.OP_*``, 0: none) and int64[n] (byte offset in the buffer): the
        first problem of each position's operations.
    """

    line: np.ndarray
    fen: TextColumn
    fields: np.ndarray
    line_start: np.ndarray
    op_row: np.ndarray
    op_name_start: np.ndarray
    op_name_end: np.ndarray
    op_start: np.ndarray
    op_end: np.ndarray
    op_hash: np.ndarray
    op_problem: np.ndarray
    op_problem_at: np.ndarray

    def __len__(self) -> int:
        return int(self.line.shape[0])

    def missing_field(self, i: int) -> str | None:
        """The first FEN field row ``i`` lacks (``None`` when it has at least four and both counters or none)."""
        return missing_field(int(self.fields[i]))

    def problem(self, i: int) -> str | None:
        """What is wrong with row ``i``'s EPD operations ("column C: ..."), or ``None``."""
        code = int(self.op_problem[i])
        if not code:
            return None
        at = int(self.op_problem_at[i])
        buf = self.fen.buf
        end = at
        while end < buf.shape[0] and buf[end] not in b" \t\r\n;":
            end += 1
        opcode = bytes(buf[at:end]).decode("utf-8", "replace")[:40]
        before = bytes(buf[int(self.line_start[i]):at])
        column = len(before.decode("utf-8", "replace")) + 1
        hint = " (the file's lines end in CR only: convert them to LF)" if b"\r" in before.replace(b"\r\n", b"") else ""
        space = next((c for c in opcode if c in UNICODE_SPACES), None)
        if space:  # the fields are split as python-chess splits them, the operations by the PGN standard
            # (U+0085, the one without a name, has the alias NEXT LINE)
            hint = (f" (U+{ord(space):04X} {unicodedata.name(space, 'NEXT LINE')} is not white space in EPD "
                    "operations: separate opcodes and operands with ASCII spaces)")
        return f"column {column}: {_OP_PROBLEMS[code].format(opcode=opcode)}{hint}"

    def opcodes(self, keep: np.ndarray | None = None) -> list[str]:
        """The opcodes of the rows with ``keep`` true (default: all) and no operation problem, in order of first appearance."""
        if not self.op_row.shape[0]:  # a FEN file: no operations
            return []
        sel = self._kept(keep)
        _, first = np.unique(self.op_hash[sel], return_index=True)
        starts, ends = self.op_name_start[sel], self.op_name_end[sel]
        return [bytes(self.fen.buf[starts[j]:ends[j]]).decode("utf-8") for j in sorted(first.tolist())]

    def _kept(self, keep: np.ndarray | None) -> np.ndarray:
        ok = self.op_problem == 0
        if keep is not None:
            ok = ok & keep
        return ok[self.op_row]

    def operation_columns(self, names: list[str], keep: np.ndarray | None = None) -> tuple[dict[str, TextColumn],
                                                                                            dict[int, str]]:
        """One column per opcode of ``names`` (the operand text, null where a row lacks it) over
        the rows with ``keep`` true (default: all) and no operation problem, and the rows among
        them with an opcode not in ``names`` (row -> that opcode)."""
        n = len(self)
        if not self.op_row.shape[0]:  # a FEN file: every named column null, no other opcode
            zeros = np.zeros(n, np.int64)
            return {name: TextColumn(self.fen.buf, zeros, zeros, np.zeros(n, bool)) for name in names}, {}
        sel = self._kept(keep)
        hashes = self.op_hash[sel]
        rows = self.op_row[sel]
        name_of = {}
        for h, j in zip(*np.unique(hashes, return_index=True)):
            k = np.flatnonzero(sel)[j]
            name_of[int(h)] = bytes(self.fen.buf[self.op_name_start[k]:self.op_name_end[k]]).decode("utf-8")
        columns: dict[str, TextColumn] = {}
        for name in names:
            hs = [h for h, nm in name_of.items() if nm == name]
            pick = np.isin(hashes, hs) if hs else np.zeros(hashes.shape[0], bool)
            starts, ends, valid = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool)
            r = rows[pick]
            starts[r], ends[r], valid[r] = self.op_start[sel][pick], self.op_end[sel][pick], True
            columns[name] = TextColumn(self.fen.buf, starts, ends, valid)
        unknown: dict[int, str] = {}
        known = set(names)
        for h, nm in name_of.items():
            if nm not in known:
                for r in rows[hashes == h].tolist():
                    unknown.setdefault(r, nm)
        return columns, unknown

    @property
    def operations(self) -> dict[str, TextColumn]:
        """:meth:`operation_columns` of every opcode over all rows without an operation problem."""
        return self.operation_columns(self.opcodes())[0]

    def fen_buffer(self) -> tuple[np.ndarray, np.ndarray]:
        """The FENs one per line, as ``nnue_infer.positions.fen_buffer`` lays them out: (uint8 buffer, int64[n + 1] offsets).

        When the FENs are the text's lines one after another (a FEN file: each line a FEN and its
        newline, nothing between), the buffer is ``fen.buf`` itself, not a copy.
        """
        f = self.fen
        n = len(self)
        if n and f.ends[-1] < f.buf.shape[0] and np.array_equal(f.starts[1:], f.ends[:-1] + 1) \
                and bool((f.buf[f.ends] == 10).all()):
            offsets = np.empty(n + 1, np.int64)
            offsets[:n], offsets[n] = f.starts, f.ends[-1] + 1
            return f.buf, offsets
        out = np.empty(int((f.ends - f.starts).sum()) + len(self), np.uint8)
        offsets = np.empty(len(self) + 1, np.int64)
        KE.pack_rows(f.buf, f.starts, f.ends, out, offsets)
        return out, offsets


def read_epd(data: bytes, *, first_line: int = 1, source: str = "<epd>", max_line: int = MAX_LINE_BYTES) -> EpdRows:
    """The positions of an EPD/FEN text given as bytes (UTF-8; a BOM is skipped, undecodable
    bytes become U+FFFD), its first line numbered ``first_line``.

    Raises :class:`~nnue_infer.errors.InputError` naming ``source`` and the line for a line
    longer than ``max_line`` bytes or a NUL byte (binary data).
    """
    rows, problem, _ = _split(data, first_line, source, max_line)
    if problem:
        raise InputError(problem)
    return rows


def _split(data: bytes, first_line: int, source: str, max_line: int) -> tuple[EpdRows, str | None, int]:
    """:func:`read_epd`'s rows up to a line it refuses, the message for that line (``None``: none) and the
    number of lines in ``data`` (a last line without ``\\n`` counts)."""
    if first_line == 1 and data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    original = data
    if not data.isascii():  # (a quick test: no copy)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            data = data.decode("utf-8", "replace").encode("utf-8")
    buf = np.frombuffer(bytearray(data), np.uint8)  # writeable: string operands are unescaped in place
    scan = buf  # the bytes split into lines and fields: Unicode white space as ASCII spaces of its length (the
    # fields python-chess reads; the FENs keep their text).  Looked for among the characters beyond ASCII only
    # (the bytes left are whole UTF-8 sequences; a regular expression over the whole chunk cost 4-10 times as much)
    if not data.isascii() and _has_unicode_space(data):
        scan = np.frombuffer(bytearray(_UNICODE_SPACE.sub(lambda m: b" " * len(m[0]), data)), np.uint8)
    size = KE.count_lines(scan)
    line, line_start = np.empty(size, np.int64), np.empty(size, np.int64)
    starts, ends = np.empty(size, np.int64), np.empty(size, np.int64)
    fields = np.empty(size, np.int8)
    ops_starts, ops_ends = np.empty(size, np.int64), np.empty(size, np.int64)
    problem = np.zeros(3, np.int64)
    n = KE.split_lines(scan, max_line, line, line_start, starts, ends, fields, ops_starts, ops_ends, problem)
    message = None
    if problem[0] == KE.LINE_TOO_LONG:
        message = (f"{source}:{first_line - 1 + int(problem[1])}: line longer than {max_line} bytes "
                   "(not an EPD/FEN file?)")
    elif problem[0] == KE.LINE_BINARY:  # the column counts characters, as the EPD operation messages do
        text = original.split(b"\n", int(problem[1]))[int(problem[1]) - 1]
        column = len(text[:text.index(b"\0")].decode("utf-8", "replace")) + 1
        message = (f"{source}:{first_line - 1 + int(problem[1])}: NUL byte at column {column}: "
                   "binary data, not an EPD/FEN text file")
    ops_starts, ops_ends = ops_starts[:n], ops_ends[:n]
    none = np.empty(0, np.int64)
    m = KE.split_operations(buf, ops_starts, ops_ends, none, none, none, none, none, none, np.empty(0, np.int8),
                            none)
    op = [np.empty(m, np.int64) for _ in range(6)]
    op_problem, op_problem_at = np.empty(n, np.int8), np.empty(n, np.int64)
    KE.split_operations(buf, ops_starts, ops_ends, *op, op_problem, op_problem_at)
    rows = EpdRows(line[:n] + (first_line - 1), TextColumn(buf, starts[:n], ends[:n]), fields[:n], line_start[:n],
                   *op, op_problem, op_problem_at)
    return rows, message, size


def iter_epd(stream: BinaryIO, source: str = "<epd>", *, chunk_bytes: int = CHUNK_BYTES,
             max_line: int = MAX_LINE_BYTES, first_line: int = 1) -> Iterator[EpdRows]:
    """:func:`read_epd` of a binary stream, chunk by chunk (whole lines, about ``chunk_bytes`` each),
    its first line numbered ``first_line`` (a range of a file read from a line's start).

    Memory stays within a few chunks and ``max_line``: a line longer than ``max_line`` bytes
    (``/dev/zero``) or holding a NUL byte (a binary file) is an
    :class:`~nnue_infer.errors.InputError` naming ``source`` and the line number, raised when
    it is reached, after the positions before it have been yielded; a NUL byte among the stream's
    first bytes (``first_line`` 1: :func:`nnue_infer.inputs.binary_problem`) is an
    :class:`~nnue_infer.errors.InputKindError` raised before anything is yielded.

    Each block is split once the next one has been read: a stream's last line without a newline belongs to
    the chunk before it (as a chunk of its own it was "after the first chunk", and an opcode first written
    there an error, in a file of two lines).
    """
    carry = b""
    line = first_line
    block = stream.read(chunk_bytes)
    problem = binary_problem(block, source, "an EPD/FEN text file") if first_line == 1 else None
    if problem:  # an image named .epd: nothing is scored (it gave error rows up to its first NUL)
        raise InputKindError(problem)
    while True:
        following = stream.read(chunk_bytes) if block else b""
        data = carry + block if carry else block
        cut = data.rfind(b"\n") + 1 if following else len(data)
        too_long = len(data) - cut > max_line  # the unfinished last line
        if cut:
            rows, problem, lines = _split(data[:cut] if cut < len(data) else data, line, source, max_line)
            yield rows  # the positions before a refused line are still scored
            if problem:
                raise InputError(problem)
            line += lines
        if too_long:
            raise InputError(f"{source}:{line}: line longer than {max_line} bytes (not an EPD/FEN file?)")
        if not following:
            return
        carry, block = data[cut:], following


def looks_like_pgn(line: bytes) -> bool:
    """Whether the text ``line`` starts like PGN (a tag pair ``[Event "..."]`` or ``1. e4``), not like a FEN."""
    return _PGN_LINE.match(line) is not None


def looks_like_fen(line: str) -> bool:
    """Whether ``line`` starts with a FEN placement field (eight ranks), as EPD/FEN lines do."""
    return _FEN_LINE.match(line) is not None

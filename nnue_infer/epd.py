"""EPD and FEN files as columns: each position's line number, FEN and EPD operations.

One line per position: a FEN (six fields) or an EPD record (the first four FEN fields, then
operations such as ``bm Nf3; id "WAC.001";``; PGN standard, section 16.2).  Blank lines and
lines starting with ``#`` are skipped.  Splitting runs in compiled code over the file's bytes
(:mod:`nnue_infer.kernels.epd`); the FENs and operands stay byte ranges of that buffer
(:class:`~nnue_infer.output.TextColumn`), so a file of millions of lines is read without a
Python object per line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels import epd as KE
from .output import TextColumn

#: What a FEN with ``fields`` fields lacks (strict mode names it).
MISSING_FIELD = {1: "side to move", 2: "castling rights", 3: "en passant square",
                 KE.HALFMOVE_WITHOUT_FULLMOVE: "full-move number"}


@dataclass(frozen=True)
class EpdRows:
    """The positions of one EPD/FEN text.

    Attributes
    ----------
    line : numpy.ndarray
        int64[n], 1-based line number of each position in the text.
    fen : TextColumn
        The FEN of each position: its first four fields, or six when the line ends in the two
        counters (or five: see ``fields``).
    fields : numpy.ndarray
        int8[n], FEN fields found: 1-4 or 6; 5 when a half-move clock has no full-move number.
    operations : dict of str to TextColumn
        One column per opcode, in order of first appearance: the operand text (quotes of a
        single string removed), null where a line lacks the opcode.  A line repeating an
        opcode keeps the last one.
    """

    line: np.ndarray
    fen: TextColumn
    fields: np.ndarray
    operations: dict[str, TextColumn]

    def __len__(self) -> int:
        return int(self.line.shape[0])

    def missing_field(self, i: int) -> str | None:
        """The first FEN field row ``i`` lacks (``None`` when it has at least four and both counters or none)."""
        return MISSING_FIELD.get(int(self.fields[i]))

    def fen_buffer(self) -> tuple[np.ndarray, np.ndarray]:
        """The FENs one per line, as ``nnue_infer.batch.fen_buffer`` lays them out: (uint8 buffer, int64[n + 1] offsets)."""
        f = self.fen
        out = np.empty(int((f.ends - f.starts).sum()) + len(self), np.uint8)
        offsets = np.empty(len(self) + 1, np.int64)
        KE.pack_rows(f.buf, f.starts, f.ends, out, offsets)
        return out, offsets


def read_epd(data: bytes) -> EpdRows:
    """The positions of an EPD/FEN text given as bytes (UTF-8; a BOM is skipped, undecodable bytes become U+FFFD)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        data = data.decode("utf-8", "replace").encode("utf-8")
    buf = np.frombuffer(data, np.uint8)
    size = KE.count_lines(buf)
    line = np.empty(size, np.int64)
    starts, ends = np.empty(size, np.int64), np.empty(size, np.int64)
    fields = np.empty(size, np.int8)
    ops_starts, ops_ends = np.empty(size, np.int64), np.empty(size, np.int64)
    n = KE.split_lines(buf, line, starts, ends, fields, ops_starts, ops_ends)
    ops_starts, ops_ends = ops_starts[:n], ops_ends[:n]
    none = np.empty(0, np.int64)
    m = KE.split_operations(buf, ops_starts, ops_ends, none, none, none, none, none, none)
    rows, o_starts, o_ends, a_starts, a_ends, hashes = (np.empty(m, np.int64) for _ in range(6))
    KE.split_operations(buf, ops_starts, ops_ends, rows, o_starts, o_ends, a_starts, a_ends, hashes)
    operations: dict[str, TextColumn] = {}
    if m:
        unique, first = np.unique(hashes, return_index=True)
        for h, j in sorted(zip(unique.tolist(), first.tolist()), key=lambda t: t[1]):
            name = bytes(buf[o_starts[j]:o_ends[j]]).decode("utf-8")
            sel = hashes == h
            col_starts, col_ends = np.zeros(n, np.int64), np.zeros(n, np.int64)
            valid = np.zeros(n, bool)
            col_starts[rows[sel]], col_ends[rows[sel]], valid[rows[sel]] = a_starts[sel], a_ends[sel], True
            operations[name] = TextColumn(buf, col_starts, col_ends, valid)
    return EpdRows(line[:n], TextColumn(buf, starts[:n], ends[:n]), fields[:n], operations)

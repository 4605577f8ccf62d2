"""The training-data container: :class:`TrainingData` (one row per position, the columns of Stockfish's
training data) and the rules a row must keep to be written in each format; :func:`kind_of` a file's format.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from ...errors import KindError
from ...inputs import input_label
from ...kernels.chess import make_move as KMM
from ...kernels.chess.attacks import PAWN_ATTACKS
from ...kernels.chess.bitboard import BB_BLACK, BB_KINGS, BB_PAWNS, BB_ROOKS, BB_WHITE
from ...kernels.data import binpack as KBP
from ...kernels.data import plain as KPL
from ...kernels.data import records as KR
from ...kernels.threads import PARALLEL_LOCK


#: File kinds by extension (a trailing ``.gz`` / ``.zst`` names the compression).
KINDS = ("binpack", "bin", "plain", "parquet")

#: Rows encoded as ``.plain`` text at a time (the text takes up to :data:`KPL.PLAIN_SLOT` bytes a row
#: before it is packed: 12 MB).
PLAIN_ROWS = 1 << 16

#: Offset of the result (game_result, int8) in a ``.bin`` record.
BIN_RESULT_BYTE = 38

#: Largest ``ply`` of a ``.binpack`` chain's first row (14 bits: the top 2 of its field hold the result).
BINPACK_HEAD_PLY = (1 << 14) - 1

#: Largest ``fullmove`` the formats keep: each holds the game ply ``2 * (fullmove - 1) + stm`` in
#: 16 bits (the tools' ``Position::set``), so 0 and 32,769 .. 65,535 read back as other numbers.
MAX_FULLMOVE = KR.MAX_FULLMOVE

#: Largest ``rule50`` a ``.bin`` record holds (7 bits).
BIN_RULE50 = (1 << 7) - 1


@dataclass(frozen=True, eq=False)
class TrainingData:
    """Training positions as columns (``n`` rows; arrays are C-contiguous).

    Attributes
    ----------
    bitboards : numpy.ndarray
        int64[n, 8]: pawns, knights, bishops, rooks, queens, kings, White's pieces, Black's
        pieces (a1 = bit 0), the layout :func:`nnue_infer.batch.evaluate_bitboards` reads.
    stm : numpy.ndarray
        uint8[n], side to move (0 White, 1 Black).
    castling : numpy.ndarray
        uint8[n], castling rights (1 White O-O, 2 White O-O-O, 4 Black O-O, 8 Black O-O-O).
    ep : numpy.ndarray
        int8[n], en passant square (a1 = 0), -1 when none or when no capture is possible.
    rule50 : numpy.ndarray
        uint8[n], half-move clock (the tools keep 8 bits).
    fullmove : numpy.ndarray
        uint16[n], the FEN's full-move number.
    move : numpy.ndarray
        uint16[n], the move played, in the tools' ``CompressedMove`` layout (see
        :mod:`nnue_infer.kernels.data.records`); :meth:`uci` gives text.
    score : numpy.ndarray
        int16[n], score in Stockfish's internal units from the side to move.
    ply : numpy.ndarray
        uint16[n], game ply.
    result : numpy.ndarray
        int16[n], game result from the side to move (1 win, 0 draw, -1 loss).
    chain : numpy.ndarray
        int64[n], chain (game segment) number from the start of the file: a row continues the
        previous one's game exactly when it has the same chain number.

    Raises
    ------
    ValueError
        On construction, a column that is not of its dtype and shape (all ``n`` rows), or the
        first row holding a value the formats cannot (``stm`` not 0 / 1, ``castling`` over 15,
        ``ep`` neither -1 nor a square of the side to move's en passant rank, ``result`` outside
        -1 .. 1, ``fullmove`` outside 1 .. :data:`MAX_FULLMOVE`, a ``move`` other than 0 from a
        square to itself or with promotion bits on another move type, bitboards whose pieces or
        colours overlap, differ, or lack one king per side) or a position that a writer would
        write and a reader refuse or change (a pawn on rank 1 or 8, the side not to move in
        check, a castling right without its king and rook on their start squares, an ``ep``
        square no legal capture uses; see :func:`_position_problem`): the message names the
        column, the row and the problem.  Columns that are not C-contiguous are copied.
        (:meth:`empty`, slices and the readers' rows are not checked again.)
    """

    bitboards: np.ndarray
    stm: np.ndarray
    castling: np.ndarray
    ep: np.ndarray
    rule50: np.ndarray
    fullmove: np.ndarray
    move: np.ndarray
    score: np.ndarray
    ply: np.ndarray
    result: np.ndarray
    chain: np.ndarray

    DTYPES: ClassVar[dict[str, type]] = {"bitboards": np.int64, "stm": np.uint8, "castling": np.uint8, "ep": np.int8, "rule50": np.uint8,
              "fullmove": np.uint16, "move": np.uint16, "score": np.int16, "ply": np.uint16, "result": np.int16,
              "chain": np.int64}

    def __post_init__(self) -> None:
        n = None
        for name, dtype in self.DTYPES.items():
            column = np.asarray(getattr(self, name))
            if column.dtype != dtype:
                raise ValueError(f"TrainingData: column {name!r} holds {column.dtype}, expected "
                                 f"{np.dtype(dtype).name} (convert it with .astype)")
            if n is None:
                n = column.shape[0] if column.ndim else -1
            shape = (n, 8) if name == "bitboards" else (n,)
            if column.shape != shape:
                raise ValueError(f"TrainingData: column {name!r} has shape {column.shape}, expected {shape} "
                                 f"(every column has one entry per row; bitboards has {n} rows)")
            if not column.flags.c_contiguous:
                column = np.ascontiguousarray(column)
            object.__setattr__(self, name, column)
        found = _row_problem(self)
        if found is not None:
            name, i, problem, value = found
            raise ValueError(f"TrainingData: column {name!r} row {i}: {problem}: {value}")

    @classmethod
    def _trusted(cls, columns: dict[str, np.ndarray]) -> TrainingData:
        """A TrainingData of ``columns`` without the checks of construction: for columns known to
        be good (rows of checked data, a reader's decoded rows) or about to be filled."""
        data = object.__new__(cls)
        for name, column in columns.items():
            object.__setattr__(data, name, column)
        return data

    @classmethod
    def empty(cls, n: int = 0) -> TrainingData:
        """Uninitialised columns for ``n`` rows, unchecked: fill every row before use."""
        return cls._trusted({name: np.empty((n, 8) if name == "bitboards" else n, dtype)
                             for name, dtype in cls.DTYPES.items()})

    @classmethod
    def concat(cls, parts: Sequence[TrainingData]) -> TrainingData:
        """Rows of ``parts`` one after another (chain numbers as they are)."""
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls._trusted({f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})

    def __len__(self) -> int:
        return int(self.stm.shape[0])

    def rows_view(self, start: int, stop: int) -> TrainingData:
        """Rows ``start .. stop`` as views of these columns (no copy: writing to them writes here)."""
        return TrainingData._trusted({f.name: getattr(self, f.name)[start:stop] for f in fields(self)})

    def __getitem__(self, rows) -> TrainingData:
        """Rows ``rows`` (a slice, an index array or a boolean mask), copied to contiguous arrays."""
        return TrainingData._trusted({f.name: np.array(getattr(self, f.name)[rows], order="C") for f in fields(self)})

    def __repr__(self) -> str:
        return f"TrainingData({len(self)} positions, {len(np.unique(self.chain))} chains)"

    def equals(self, other: TrainingData, chains: bool = True) -> bool:
        """Whether every column (``chain`` too unless ``chains`` is False) is equal."""
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)
                   if chains or f.name != "chain")

    def fens(self) -> list[str]:
        """Each row's FEN as the tools write it (en passant square only when a capture is possible)."""
        n = len(self)
        out, lengths = np.empty(100 * n, np.uint8), np.empty(n, np.int64)
        with PARALLEL_LOCK:
            KPL.write_fens(self.bitboards, self.stm, self.castling, self.ep, self.rule50, self.fullmove, out, lengths)
        return _slots_to_strings(out, 100, lengths)

    def uci(self) -> list[str]:
        """Each row's move in UCI as the tools write it (castling as ``e1g1``)."""
        n = len(self)
        out, lengths = np.empty(5 * n, np.uint8), np.empty(n, np.int64)
        with PARALLEL_LOCK:
            KPL.write_ucis(self.stm, self.move, out, lengths)
        return _slots_to_strings(out, 5, lengths)

    def continuations(self) -> np.ndarray:
        """bool[n]: row ``i`` continues row ``i - 1``'s game by the tools' rule (results opposite,
        ply + 1, row ``i - 1``'s move leads to row ``i``'s position); row 0 is False."""
        cont = np.empty(len(self), np.bool_)
        with PARALLEL_LOCK:
            KBP.continuations(self.bitboards, self.stm, self.castling, self.ep, self.rule50, self.move, self.ply,
                             self.result, cont)
        return cont

    def with_chains(self, first: int = 0) -> TrainingData:
        """A copy whose ``chain`` numbers come from :meth:`continuations`, starting at ``first``."""
        cont = self.continuations()
        KBP.limit_chains(cont)
        chain = np.cumsum(~cont, dtype=np.int64) + (first - 1)
        return TrainingData._trusted({**{f.name: getattr(self, f.name) for f in fields(self)}, "chain": chain})

    def to_arrow(self):
        """A pyarrow Table: ``fen`` and ``move`` (strings, the tools' text), ``score`` int16,
        ``ply`` uint16, ``result`` int16, ``chain`` int64.  :func:`from_arrow` reads it back exactly."""
        import pyarrow as pa

        return pa.table({"fen": pa.array(self.fens(), pa.string()), "move": pa.array(self.uci(), pa.string()),
                         "score": self.score, "ply": self.ply, "result": self.result, "chain": self.chain})


def _first(checks) -> tuple[str, int, str] | None:
    """``(column, first bad row, problem)`` of the first check ``(column, bad rows mask, problem)``
    that finds a bad row, or None."""
    for name, bad, problem in checks:
        if bad.any():
            return name, int(np.flatnonzero(bad)[0]), problem
    return None


def _column_problem(data: TrainingData, bitboards: bool = True) -> tuple[str, int, str] | None:
    """The first value no format holds (each column alone; with ``bitboards``, also pieces and
    colours that overlap or differ and kings: the readers' rows have them right)."""
    found = _first((
        ("stm", data.stm > 1, "side to move not 0 (White) or 1 (Black)"),
        ("castling", data.castling > 15, "castling rights beyond the 4 bits"),
        ("ep", (data.ep != -1) & ((data.ep >> 3) != np.where(data.stm == 0, 5, 2)),
         "en passant square neither -1 nor on the side to move's en passant rank"),
        ("result", (data.result < -1) | (data.result > 1), "result outside -1 .. 1"),
        ("fullmove", (data.fullmove < 1) | (data.fullmove > MAX_FULLMOVE),
         f"full-move number outside 1 .. {MAX_FULLMOVE} (the formats keep the game ply in 16 bits)"),
        ("move", (data.move != 0) & ((data.move >> 8) & 63 == (data.move >> 2) & 63),
         "from-square equal to the to-square (only the null move 0 may be)"),
        ("move", (data.move & 3 != 0) & (data.move >> 14 != KMM.PROMOTION),
         "promotion-piece bits set in a move that is not a promotion"),
    ))
    if found is not None or not bitboards:
        return found
    bb = data.bitboards.view(np.uint64)
    pieces = bb[:, 0] | bb[:, 1] | bb[:, 2] | bb[:, 3] | bb[:, 4] | bb[:, 5]
    piece_count = np.bitwise_count(bb[:, :6]).sum(axis=1, dtype=np.int64)
    white, black = bb[:, BB_WHITE], bb[:, BB_BLACK]
    kings = bb[:, BB_KINGS]
    return _first((
        ("bitboards", (piece_count != np.bitwise_count(pieces)) | ((white & black) != 0)
         | ((white | black) != pieces), "pieces or colours overlap or differ"),
        ("bitboards", (np.bitwise_count(kings & white) != 1) | (np.bitwise_count(kings & black) != 1),
         "not exactly one king per side"),
    ))


def _row_problem(data: TrainingData, bitboards: bool = True) -> tuple[str, int, str, object] | None:
    """``(column, row, problem, value)`` of the first row :func:`_column_problem` (passed
    ``bitboards``) or :func:`_position_problem` finds (value: the row's FEN for a position, with
    its column's value unless that column is ``bitboards``), or None when every row can be
    written and read back."""
    found = _column_problem(data, bitboards)
    if found is not None:
        name, i, problem = found
        return name, i, problem, data.bitboards[i].tolist() if name == "bitboards" else int(getattr(data, name)[i])
    found = _position_problem(data)
    if found is None:
        return None
    name, i, problem = found
    fen = data[i:i + 1].fens()[0]
    return name, i, problem, fen if name == "bitboards" else f"{int(getattr(data, name)[i])} ({fen})"


#: Castling-right bits with the squares of their king and rook.
_CASTLING_SQUARES = ((KMM.WHITE_OO, 4, 7), (KMM.WHITE_OOO, 4, 0), (KMM.BLACK_OO, 60, 63), (KMM.BLACK_OOO, 60, 56))


def _position_problem(data: TrainingData) -> tuple[str, int, str] | None:
    """The first row whose position the ``.plain`` reader refuses or a writer changes (columns
    already valid alone): a pawn on rank 1 or 8, the side not to move in check (the tools'
    ``Position::trySet`` refuses both), a castling right without its king and rook on their start
    squares (a ``.binpack`` marks rights on the rooks; ``Position::doMove`` clears a right when
    either moves), an en passant square no capture can use (every format keeps it only when a
    capture is possible: the tools' ``Position::isEpPossible``)."""
    bb = data.bitboards.view(np.uint64)
    pawns, rooks, kings = bb[:, BB_PAWNS], bb[:, BB_ROOKS], bb[:, BB_KINGS]
    white, black = bb[:, BB_WHITE], bb[:, BB_BLACK]
    found = _first((("bitboards", pawns & np.uint64(0xFF000000000000FF) != 0, "pawn on the first or last rank"),))
    if found is not None:
        return found
    n = len(data)
    not_to_move_in_check, _ = np.empty(n, np.bool_), np.empty(n, np.bool_)
    with PARALLEL_LOCK:
        KMM.row_flags(data.bitboards, data.stm ^ np.uint8(1), data.move, not_to_move_in_check, _)
    castling_bad = np.zeros(n, np.bool_)
    rights = np.flatnonzero(data.castling)  # (most rows have none: the rest is checked on these alone)
    if rights.size:
        castling, kings_r, rooks_r = data.castling[rights], kings[rights], rooks[rights]
        white_r, black_r = white[rights], black[rights]
        bad = np.zeros(rights.size, np.bool_)
        for bit, king, rook in _CASTLING_SQUARES:
            colour = white_r if king == 4 else black_r
            bad |= ((castling & bit) != 0) & ((kings_r & colour & np.uint64(1 << king) == 0)
                                              | (rooks_r & colour & np.uint64(1 << rook) == 0))
        castling_bad[rights] = bad
    found = _first((
        ("bitboards", not_to_move_in_check, "the side not to move is in check"),
        ("castling", castling_bad, "castling right without the king and that rook on their start squares"),
    ))
    if found is not None:
        return found
    rows = np.flatnonzero(data.ep != -1)
    if rows.size:
        ep, stm = data.ep[rows].astype(np.int64), data.stm[rows].astype(np.int64)
        fwd = np.where(stm == 0, 8, -8)
        ours = np.where(stm == 0, white[rows], black[rows])
        theirs = np.where(stm == 0, black[rows], white[rows])
        occupied = white[rows] | black[rows]
        one = np.uint64(1)
        moved = (pawns[rows] & theirs) >> (ep - fwd).astype(np.uint64) & one  # the pawn that just moved
        empty = ~(occupied >> ep.astype(np.uint64) | occupied >> (ep + fwd).astype(np.uint64)) & one
        attackers = PAWN_ATTACKS.view(np.uint64)[1 - stm, ep] & pawns[rows] & ours
        no_pawn = (moved == 0) | (empty == 0)
        bad = no_pawn | (attackers == 0)
        for k in np.flatnonzero(~bad).tolist():  # a pawn can capture: without leaving its king in check?
            bad[k] = not KMM.ep_possible(data.bitboards[rows[k]], int(ep[k]), int(stm[k]))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            return "ep", int(rows[k]), ("en passant square without the pawn that just moved past it (or not "
                                        "empty, or its start square not empty)" if no_pawn[k] else
                                        "en passant square no pawn of the side to move can legally capture on "
                                        "(every format keeps it only then)")
    return None


def _slots_to_strings(out: np.ndarray, width: int, lengths: np.ndarray) -> list[str]:
    n = lengths.shape[0]
    if n == 0:
        return []
    starts = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    packed = np.empty(int(lengths.sum()) + n, np.uint8)
    packed[starts + lengths] = 10
    with PARALLEL_LOCK:
        KPL.compact_slots(out, width, lengths, starts, packed)
    return packed.tobytes().decode("ascii").split("\n")[:-1]


def kind_of(path: str | os.PathLike[str]) -> str:
    """The file kind (``binpack``, ``bin``, ``plain``, ``parquet``) from ``path``'s extension,
    ignoring a trailing ``.gz`` or ``.zst``.

    Raises
    ------
    KindError
        The extension is none of these (the message lists them).
    """
    name = os.fspath(path).lower()
    for suffix in (".gz", ".zst", ".zstd"):
        name = name.removesuffix(suffix)
    ext = os.path.splitext(name)[1].lstrip(".")
    if ext not in KINDS:
        raise KindError(f"{input_label(path)}: cannot tell the training-data kind from the extension "
                         f"{ext or '(none)'!r}; use one of .binpack, .bin, .plain, .parquet, or name the kind "
                         "(--from / --to on the command line, kind= in Python)")
    return ext

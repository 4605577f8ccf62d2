"""Scored positions as Arrow tables and Parquet files (needs ``pyarrow``: the ``parquet`` or ``dask`` extra).

One schema, :func:`schema`, for every input kind, so EPD, PGN and Parquet shards of one job
land in one dataset.  Columns, in order:

================  ==========  ============================================================
column            type        meaning
================  ==========  ============================================================
``source``        string      the input file, as given (dictionary-encoded)
``line``          int64       EPD: the position's line (1-based); PGN: the first line of its game;
                              Parquet input: the row (1-based)
``game``          int64       PGN: 1-based game number in the file; null otherwise
``ply``           int32       PGN: plies from the game's start position (0 = start); null otherwise
``fen``           string      the position (PGN: python-chess's ``Board.fen()``; EPD: as read)
``move``          string      PGN: the UCI move that led to the position; null at ply 0 and otherwise
``san``           string      PGN: the same move in SAN (python-chess's ``Board.san``); null likewise
``value``         int32       NNUE value, internal units, side to move's point of view
``cp``            int32       ``value`` in centipawns, ``tdiv(100 * value, units_per_pawn)``, side to move
``cp_white``      int32       ``cp`` from White's point of view
``in_check``      bool        the side to move is in check (Stockfish prints no NNUE value then);
                              null when not computed (EPD and Parquet input)
``outcome``       string      ``checkmate`` or ``stalemate`` when the position is one, else ``none``;
                              null when not computed (EPD and Parquet input)
``event`` ...     string      PGN game headers ``event``, ``site``, ``date``, ``round``, ``white``,
``result``                    ``black``, ``result`` (null when absent or not PGN)
================  ==========  ============================================================

Errors (:func:`errors_schema`): ``source``, ``line``, ``game`` (null unless PGN), ``message``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .pgn import HEADERS, GameBatch

#: Header columns, lower-case names of :data:`nnue_infer.pgn.HEADERS`.
HEADER_COLUMNS = tuple(h.lower() for h in HEADERS)


def _pa():
    try:
        import pyarrow
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("Parquet output needs pyarrow: pip install 'nnue-infer[parquet]'") from exc
    return pyarrow


def schema():
    """The ``pyarrow.Schema`` of scored positions (see the module docstring)."""
    pa = _pa()
    fields = [
        pa.field("source", pa.dictionary(pa.int32(), pa.string()), nullable=False),
        pa.field("line", pa.int64(), nullable=False),
        pa.field("game", pa.int64()),
        pa.field("ply", pa.int32()),
        pa.field("fen", pa.string(), nullable=False),
        pa.field("move", pa.string()),
        pa.field("san", pa.string()),
        pa.field("value", pa.int32(), nullable=False),
        pa.field("cp", pa.int32(), nullable=False),
        pa.field("cp_white", pa.int32(), nullable=False),
        pa.field("in_check", pa.bool_()),
        pa.field("outcome", pa.string()),
    ] + [pa.field(name, pa.string()) for name in HEADER_COLUMNS]
    return pa.schema(fields, metadata={"nnue-infer": "scored positions; value in internal units, side to move"})


def errors_schema():
    """The ``pyarrow.Schema`` of the errors table: ``source``, ``line``, ``game``, ``message``."""
    pa = _pa()
    return pa.schema([pa.field("source", pa.string(), nullable=False), pa.field("line", pa.int64(), nullable=False),
                      pa.field("game", pa.int64()), pa.field("message", pa.string(), nullable=False)])


def centipawns(values: np.ndarray, stm: np.ndarray, units_per_pawn: int) -> tuple[np.ndarray, np.ndarray]:
    """(cp, cp_white) int32 from int values and side to move (0 White): ``tdiv(100 * v, units_per_pawn)``."""
    v = np.asarray(values, np.int64)
    cp = np.sign(v) * (np.abs(100 * v) // units_per_pawn)
    return cp.astype(np.int32), np.where(np.asarray(stm) == 1, -cp, cp).astype(np.int32)


def _source_column(source: str, n: int):
    pa = _pa()
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([source], pa.string()))


def _nulls(n: int, type_):
    return _pa().nulls(n, type_)


def positions_table(source: str, lines: np.ndarray, fens: Sequence[str], values: np.ndarray, stm: np.ndarray,
                    units_per_pawn: int, in_check: np.ndarray | None = None, outcome: Sequence[str] | None = None):
    """A table of scored EPD / FEN positions (``game``, ``ply``, moves and headers null).

    ``lines`` int64[n] are 1-based line (or row) numbers, ``stm`` the side to move (0 White).
    """
    pa = _pa()
    n = len(fens)
    cp, cp_white = centipawns(values, stm, units_per_pawn)
    cols = {
        "source": _source_column(source, n),
        "line": pa.array(np.asarray(lines, np.int64)),
        "game": _nulls(n, pa.int64()),
        "ply": _nulls(n, pa.int32()),
        "fen": pa.array(fens, pa.string()),
        "move": _nulls(n, pa.string()),
        "san": _nulls(n, pa.string()),
        "value": pa.array(np.asarray(values, np.int32)),
        "cp": pa.array(cp),
        "cp_white": pa.array(cp_white),
        "in_check": _nulls(n, pa.bool_()) if in_check is None else pa.array(np.asarray(in_check, bool)),
        "outcome": _nulls(n, pa.string()) if outcome is None else pa.array(outcome, pa.string()),
    }
    for name in HEADER_COLUMNS:
        cols[name] = _nulls(n, pa.string())
    return pa.Table.from_pydict(cols, schema=schema())


def games_table(batch: GameBatch, values: np.ndarray, units_per_pawn: int):
    """A table of the scored positions of a :class:`~nnue_infer.pgn.GameBatch` (``values`` per row)."""
    pa = _pa()
    n = len(batch)
    cp, cp_white = centipawns(values, batch.stm, units_per_pawn)
    first = batch.ply == 0
    outcome = np.where(batch.checkmate, "checkmate", np.where(batch.stalemate, "stalemate", "none"))
    cols = {
        "source": _source_column(batch.source, n),
        "line": pa.array(batch.line),
        "game": pa.array(batch.game),
        "ply": pa.array(batch.ply),
        "fen": pa.array(batch.fen, pa.string()),
        "move": pa.array(batch.uci, pa.string(), mask=first),
        "san": pa.array(batch.san, pa.string(), mask=first),
        "value": pa.array(np.asarray(values, np.int32)),
        "cp": pa.array(cp),
        "cp_white": pa.array(cp_white),
        "in_check": pa.array(batch.in_check),
        "outcome": pa.array(outcome, pa.string()),
    }
    for tag, name in zip(HEADERS, HEADER_COLUMNS):
        values_ = batch.headers[tag]
        cols[name] = pa.array(values_, pa.string(), mask=values_ == "")
    return pa.Table.from_pydict(cols, schema=schema())


def errors_table(errors: Sequence) -> object:
    """The errors table of ``(source, line, game or None, message)`` records (see :func:`errors_schema`)."""
    pa = _pa()
    rows = [tuple(e) for e in errors]
    return pa.Table.from_pydict({
        "source": pa.array([r[0] for r in rows], pa.string()),
        "line": pa.array([r[1] for r in rows], pa.int64()),
        "game": pa.array([r[2] for r in rows], pa.int64()),
        "message": pa.array([r[3] for r in rows], pa.string()),
    }, schema=errors_schema())


def text_array(column):
    """A ``pyarrow`` string array of a :class:`~nnue_infer.output.TextColumn` (bytes gathered with NumPy,
    no Python object per cell)."""
    pa = _pa()
    starts = np.asarray(column.starts, np.int64)
    lengths = np.asarray(column.ends, np.int64) - starts
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total and not (len(starts) and starts[0] == 0 and np.array_equal(starts[1:], offsets[1:-1])):
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(total)  # source byte of each output byte
        data = np.asarray(column.buf)[gather]
    else:
        data = np.asarray(column.buf)[:total]
    validity = None
    if column.valid is not None and not column.valid.all():
        validity = pa.py_buffer(np.packbits(np.asarray(column.valid, bool), bitorder="little"))
    return pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data)),
                                            validity).cast(pa.string())


def to_arrow(table):
    """A ``pyarrow.Table`` of an output table (``{name: column}``, see :mod:`nnue_infer.output`): integer and
    bool arrays as they are, masked arrays with nulls, :class:`~nnue_infer.output.TextColumn` as strings."""
    pa = _pa()
    from .output import TextColumn

    arrays, names = [], []
    for name, column in table.items():
        if isinstance(column, TextColumn):
            arrays.append(text_array(column))
        elif isinstance(column, np.ma.MaskedArray):
            arrays.append(pa.array(np.ma.getdata(column), mask=np.ma.getmaskarray(column)))
        else:
            arrays.append(pa.array(np.asarray(column)))
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


def write_table(table, path: str) -> None:
    """Write ``table`` to the Parquet file ``path`` atomically (a temporary file, then a rename),
    so a file that exists is complete; zstd-compressed."""
    import os

    import pyarrow.parquet as pq

    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.tmp-{os.getpid()}")  # dataset readers skip names starting with "."
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)

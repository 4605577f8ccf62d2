"""Whole files scored into one table file: an EPD/FEN file or a PGN file -> CSV, JSON lines or Parquet.

What ``nnue-infer eval --epd FILE`` / ``--pgn FILE`` runs, callable from Python with the same
rules: every input may be ``-`` (standard input) and gzip- or zstd-compressed
(:func:`nnue_infer.inputs.open_input`); rows that cannot be scored are reported through
``on_error`` (and kept, with null values and an ``error`` column, under ``keep_errors``); a
Parquet target is written to a temporary file and renamed, so an interrupted run leaves an
existing target untouched, while an input that turns out damaged part-way (``InputError``)
still writes the rows scored before it.  The tables themselves come from
:func:`nnue_infer.io.score.score_epd` and :func:`nnue_infer.io.score.score_pgn`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import IO

import numpy as np

from ..errors import InputError, InputKindError
from ..inputs import binary_problem, input_label, open_input, peek_start
from .epd import iter_epd, looks_like_fen, looks_like_pgn
from .output import TableWriter, take
from .score import empty_table, score_epd, score_pgn

#: ``on_error(where, message)``: ``where`` is the input's label and the line (EPD) or game (PGN).
ErrorCallback = Callable[[str, str], None]
#: ``on_progress(rows, games)``: rows written (EPD and PGN) and games read (PGN; 0 for EPD) since the last call.
ProgressCallback = Callable[[int, int], None]


def table_writer(fmt: str, stream: IO[bytes] | None = None, path: str | None = None):
    """A writer of result tables: ``fmt`` ``"csv"`` or ``"jsonl"`` to the binary ``stream``, or
    ``"parquet"`` to the file ``path`` (:class:`nnue_infer.io.parquet.ParquetTableWriter`).

    Raises
    ------
    ImportError
        ``"parquet"`` without pyarrow (the ``parquet`` extra), checked before any work.
    ValueError
        An unknown ``fmt``.
    """
    if fmt == "parquet":
        from .parquet import ParquetTableWriter, _pa

        _pa()
        return ParquetTableWriter(path)
    return TableWriter(stream, fmt)


def keep_rows(table: dict, keep_errors: bool) -> dict:
    """The rows of ``table`` to write: all (with the ``error`` column) when ``keep_errors``, else the
    rows that were scored, without the ``error`` column."""
    if keep_errors:
        return table
    errors = table["error"]
    rest = {k: c for k, c in table.items() if k != "error"}
    return rest if errors.valid is None else take(rest, ~errors.valid)


def row_errors(table: dict) -> list[tuple[int, str]]:
    """``(row, message)`` of the rows of ``table`` whose ``error`` cell is set."""
    errors = table["error"]
    if errors.valid is None:
        return []
    return [(int(i), errors[int(i)]) for i in np.flatnonzero(errors.valid)]


@contextlib.contextmanager
def _finishing(writer) -> Iterator[None]:
    """Close a Parquet ``writer`` after its loop: an input refused part-way (``InputError``) keeps the
    rows written before it; refused before any table was written (its first line), or any other failure
    (Ctrl-C, a bug), the temporary file is removed and the target left as it was (a refused first line left
    a Parquet file of no columns)."""
    if isinstance(writer, TableWriter):
        yield
        return
    try:
        yield
    except InputError:
        if writer.columns is None:
            writer.abort()
        else:
            writer.close()
        raise
    except BaseException:
        writer.abort()
        raise
    writer.close()


def epd_chunks(binary: IO[bytes], label: str, *, advice: str = "use --pgn for games", first_line: int = 1):
    """The chunks (:class:`nnue_infer.io.epd.EpdRows`) of an EPD/FEN byte stream, its first line numbered
    ``first_line`` (:func:`nnue_infer.io.epd.iter_epd`).

    Raises
    ------
    InputKindError
        The first line is PGN (a tag pair or moves), naming the line; the message ends with ``advice``.
    """
    first = True
    for rows in iter_epd(binary, label, first_line=first_line):
        if first and len(rows):
            first = False
            head = rows.fen.buf[rows.line_start[0]:rows.fen.ends[0]].tobytes()
            if looks_like_pgn(head):
                raise InputKindError(f"{label}:{rows.line[0]}: this is PGN (a tag pair or moves), not a FEN/EPD "
                                     f"line: {advice}")
        yield rows


def pgn_lines(stream, label: str, *, advice: str = "use --epd for positions", first_line: int = 1):
    """The lines of a PGN text stream, its first line numbered ``first_line``.

    Raises
    ------
    InputKindError
        The first line (after blank lines, ``%`` escapes and ``#`` comments) is a FEN, naming the line; the
        message ends with ``advice``.  Or, from the stream's start (``first_line`` 1), its first bytes hold a
        NUL byte (:func:`nnue_infer.inputs.binary_problem`: an image named ``.pgn`` gave rows of the start position
        and error rows).
    """
    if first_line == 1:
        problem = binary_problem(peek_start(stream), label, "a PGN text file")
        if problem:
            raise InputKindError(problem)
    for number, line in enumerate(stream, first_line):
        if line.strip() and not line.startswith(("%", "#")):
            if looks_like_fen(line):
                raise InputKindError(f"{label}:{number}: this is a FEN/EPD line, not PGN (tag pairs and moves): "
                                     f"{advice}")
            yield line
            break
        yield line
    yield from stream


def score_epd_file(ev, source: str, writer, *, strict: bool = True, keep_errors: bool = False,
                   empty_in_check: bool = False, on_error: ErrorCallback | None = None,
                   on_progress: ProgressCallback | None = None) -> int:
    """Score every line of the EPD/FEN file ``source`` (a path or ``-``) with the
    :class:`~nnue_infer.evaluator.Evaluator` ``ev`` into ``writer`` (:func:`table_writer`).

    Rows: ``line``, ``fen``, ``value``, ``cp``, ``cp_white``, ``in_check``, ``outcome``, one column
    per EPD operation, and ``error`` under ``keep_errors`` (:mod:`nnue_infer.io.score`).  An input
    without positions (empty, comments only) still gets the CSV header, and a Parquet file these columns
    with no rows (:func:`nnue_infer.io.score.empty_table`).  Returns the number of rows that could not be
    scored (each also passed to ``on_error`` as ``("FILE:LINE", message)``).

    Raises
    ------
    InputError
        The input is damaged (corrupt or truncated compression); rows before it are written.
    InputKindError
        The file is PGN.
    OSError
        The input cannot be opened or the output written.
    """
    label = input_label(source)
    failed = 0
    with _finishing(writer):
        with open_input(source, text=False) as inp:  # (raises damage found at its end: before the empty table)
            for table in score_epd(ev, epd_chunks(inp.binary, label), strict=strict, empty_in_check=empty_in_check):
                for i, message in row_errors(table):
                    failed += 1
                    if on_error is not None:
                        on_error(f"{label}:{table['line'][i]}", message)
                writer.write(keep_rows(table, keep_errors))
                if on_progress is not None:
                    on_progress(len(table["line"]), 0)
        if writer.columns is None:  # no positions: the CSV header alone, a Parquet file of the usual columns
            writer.write(keep_rows(empty_table("epd"), keep_errors))
    return failed


def score_pgn_file(ev, source: str, writer, *, keep_errors: bool = False, empty_in_check: bool = False,
                   on_error: ErrorCallback | None = None, on_progress: ProgressCallback | None = None) -> int:
    """Score every position of every game's mainline in the PGN file ``source`` (a path or ``-``) with
    ``ev`` into ``writer`` (:func:`table_writer`).

    Rows: ``game``, the seven standard tags, ``ply``, ``san``, ``uci``, ``fen`` and the value columns
    (:func:`nnue_infer.io.score.score_pgn`), also for an input without games (as :func:`score_epd_file`).
    Returns the number of rows that could not be scored
    (each also passed to ``on_error`` as ``("FILE: game N, ply P", message)``, the form of
    :class:`nnue_infer.io.pgn.PgnError` but the line, which the rows do not carry).

    Raises
    ------
    InputError, InputKindError, OSError
        As :func:`score_epd_file` (``InputKindError``: the file holds FENs).
    """
    label = input_label(source)
    failed = 0
    with _finishing(writer):
        with open_input(source, binary_what="a PGN text file") as inp:  # (a NUL byte in a pipe's later piece)
            for table, games in score_pgn(ev, pgn_lines(inp.text, label), source=label, empty_in_check=empty_in_check):
                for i, message in row_errors(table):
                    failed += 1
                    if on_error is not None:
                        on_error(f"{label}: game {table['game'][i]}, ply {table['ply'][i]}", message)
                rows = keep_rows(table, keep_errors)
                writer.write(rows)
                if on_progress is not None:
                    on_progress(len(rows["game"]), games)
        if writer.columns is None:  # no games: as for EPD
            writer.write(keep_rows(empty_table("pgn"), keep_errors))
    return failed

"""Scoring files: EPD/FEN lines and PGN games -> result tables (:mod:`nnue_infer.io.output`) that join back to the input.

Every row carries where it came from (``line`` of an EPD file; ``game``, its first ``line`` and ``ply`` of a PGN,
with the game's standard tags), what the input said (the FEN, the EPD operations, the move
in SAN and UCI), the values and two flags of the position:

* ``value``: the network's output in internal units (Stockfish 15.1: 361 = one pawn), side
  to move's point of view; ``cp``: ``tdiv(100 * value, units_per_pawn)``, side to move;
  ``cp_white``: ``cp`` from White's point of view;
* ``in_check``: the side to move is in check (Stockfish prints no NNUE evaluation then;
  ``empty_in_check`` leaves the three values null there too);
* ``outcome``: ``checkmate``, ``stalemate`` or ``none`` (a network's number for a finished
  game means nothing).

Rows that cannot be scored get null values and a message in the ``error`` column (null on
good rows); the caller decides whether to write them.  Tables come in chunks
(:data:`CHUNK_ROWS` rows) so that files of any size stream through.

**Whole files** (:func:`score_epd_file`, :func:`score_pgn_file`): an EPD/FEN file or a PGN file ->
CSV, JSON lines or Parquet, what ``nnue-infer eval --epd FILE`` / ``--pgn FILE`` runs, callable from
Python with the same rules: every input may be ``-`` (standard input) and gzip- or zstd-compressed
(:func:`nnue_infer.inputs.open_input`); rows that cannot be scored are reported through
``on_error`` (and kept, with null values and an ``error`` column, under ``keep_errors``); a
Parquet target is written to a temporary file and renamed, so an interrupted run leaves an
existing target untouched, while an input that turns out damaged part-way (``InputError``)
still writes the rows scored before it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import IO

import chess
import numpy as np

from ..batch import _POSITION_PROBLEMS
from ..kernels.threads import PARALLEL_LOCK
from ..features import MAX_PIECES
from ..positions import fen_problem
from ..inputs import binary_problem, input_label, open_input, peek_start
from .epd import CHUNK_BYTES, EpdRows, iter_epd, looks_like_fen, looks_like_pgn
from ..errors import InputError, InputKindError, PositionError
from ..evaluator import Evaluator
from ..features import check_position
from ..kernels.chess import status as KS
from .output import TableWriter, TextColumn, take
from ..positions import missing_field_message

#: Games per PGN table (about 80 positions each in real games).
GAMES_PER_TABLE = 2000
#: Rows per table chunk (and per progress-bar step).
CHUNK_ROWS = 65536
#: Columns about the position's value and state, in this order, at the end of every table.
VALUE_COLUMNS = ("value", "cp", "cp_white", "in_check", "outcome")
#: The PGN tags copied onto every row of a game (the Seven Tag Roster, PGN standard 8.1.1), as columns.
PGN_TAGS = ("Event", "Site", "Date", "Round", "White", "Black", "Result")


#: ``outcome`` codes and their labels.
NONE, CHECKMATE, STALEMATE = KS.OUTCOME_NONE, KS.OUTCOME_CHECKMATE, KS.OUTCOME_STALEMATE
OUTCOMES = ("none", "checkmate", "stalemate")


def outcome_code(board: chess.Board) -> int:
    """:data:`CHECKMATE`, :data:`STALEMATE` or :data:`NONE`: python-chess's ``is_checkmate`` / ``is_stalemate``."""
    if board.is_checkmate():
        return CHECKMATE
    if board.is_stalemate():
        return STALEMATE
    return NONE


def parse_and_flag(buf: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    """Parse the FENs in ``buf`` (layout of :func:`nnue_infer.positions.fen_buffer`) and flag each position,
    in one compiled pass on all cores (:func:`nnue_infer.kernels.chess.status.parse_fens_status`), raising nothing.

    Returns ``bitboards`` int64[n, 8], ``stm`` uint8[n], ``fen_codes`` int32[n], ``fen_offsets`` int64[n] (as
    :func:`nnue_infer.positions.parse_fen_buffer`), ``in_check`` bool[n] and ``outcome`` int8[n]
    (:data:`OUTCOMES` codes, ``kernels.chess.status.OUTCOME_ASK`` where python-chess decides: :func:`outcomes`).
    """
    n = offsets.shape[0] - 1
    bitboards, stm = np.empty((n, 8), np.int64), np.empty(n, np.uint8)
    fen_codes, fen_offsets = np.empty(n, np.int32), np.empty(n, np.int64)
    in_check, outcome = np.empty(n, bool), np.empty(n, np.int8)
    with PARALLEL_LOCK:
        KS.parse_fens_status(buf, offsets, MAX_PIECES, bitboards, stm, fen_codes, fen_offsets, in_check, outcome)
    return bitboards, stm, fen_codes, fen_offsets, in_check, outcome


def outcomes(outcome: np.ndarray, ok: np.ndarray, fens, chess960=None) -> np.ndarray:
    """int8[n] outcome codes: :func:`parse_and_flag`'s ``outcome`` with python-chess's verdict
    (:func:`outcome_code`) on its ``OUTCOME_ASK`` rows (castling could matter), :data:`NONE` on rows with
    ``ok`` false (they are nulled).  ``fens[i]`` (indexable) gives the position of row ``i``; ``chess960``
    (bool[n] or None) how to read its castling rights."""
    result = np.where(ok, outcome, np.int8(NONE)).astype(np.int8)
    for i in np.flatnonzero(result == KS.OUTCOME_ASK).tolist():
        result[i] = outcome_code(chess.Board(fens[i], chess960=bool(chess960[i]) if chess960 is not None else False))
    return result


def value_columns(values: np.ndarray, black: np.ndarray, in_check: np.ndarray, outcome: np.ndarray, ok: np.ndarray,
                  units_per_pawn: int, empty_in_check: bool = False) -> dict:
    """The :data:`VALUE_COLUMNS` of ``n`` rows.

    ``values`` int[n] (internal units, side to move), ``black`` bool[n] (Black to move),
    ``in_check`` bool[n], ``outcome`` int[n] (:data:`OUTCOMES` codes), ``ok`` bool[n]
    (false: the row could not be scored, every column is null).  ``empty_in_check`` also
    nulls the three values where the side to move is in check.
    """
    v = np.asarray(values, np.int64)
    cp = np.sign(v) * (np.abs(100 * v) // units_per_pawn)  # tdiv(100 * v, units_per_pawn)
    cp_white = np.where(black, -cp, cp)
    no_value = ~ok | (in_check & empty_in_check)
    outcome_text = TextColumn.from_codes(np.where(ok, outcome, NONE), OUTCOMES)
    return {
        "value": np.ma.masked_array(v, no_value),
        "cp": np.ma.masked_array(cp, no_value),
        "cp_white": np.ma.masked_array(cp_white, no_value),
        "in_check": np.ma.masked_array(np.asarray(in_check, bool), ~ok),
        "outcome": TextColumn(outcome_text.buf, outcome_text.starts, outcome_text.ends, ok.copy()),
    }


def error_column(n: int, errors: dict[int, str]) -> TextColumn:
    """The ``error`` column of ``n`` rows: ``errors[i]`` on row ``i``, null on rows without one."""
    rows = np.array(sorted(errors), np.int64)
    messages = TextColumn.from_strings([errors[i] for i in rows.tolist()])
    starts, ends, valid = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool)
    starts[rows], ends[rows], valid[rows] = messages.starts, messages.ends, True
    return TextColumn(messages.buf, starts, ends, valid)


def _rescore_fen(ev: Evaluator, fen: str, fen_code: int, fen_offset: int, code: int) -> tuple[int, bool, int]:
    """A row the compiled parser refused or could not represent: python-chess's reading, or the reason.

    Returns (value, in_check, outcome) when python-chess reads the FEN and the network can
    represent it; raises ``ValueError`` with the problem otherwise.
    """
    if fen_code:
        try:
            board = chess.Board(fen)
        except ValueError as exc:
            if fen.isascii():
                raise ValueError(fen_problem(fen, fen_code, fen_offset)) from None
            raise ValueError(f"invalid FEN {fen!r}: {exc}") from None
        value = ev.evaluate(board)
        return value, board.is_check(), outcome_code(board)
    board = chess.Board(fen)
    check_position(board)
    raise PositionError(_POSITION_PROBLEMS[code])


def score_epd(ev: Evaluator, chunks: EpdRows | Iterable[EpdRows], *, strict: bool = True,
              empty_in_check: bool = False, chunk_rows: int = CHUNK_ROWS, operations: bool = True) -> Iterator[dict]:
    """Tables of ``chunks`` (one :class:`EpdRows`, or the chunks of :func:`nnue_infer.io.epd.iter_epd`)
    scored with ``ev``: ``line``, ``fen``, :data:`VALUE_COLUMNS`, the EPD operations, ``error``.

    FENs are parsed, flagged and evaluated in compiled code on all cores (:func:`parse_and_flag`,
    :meth:`Evaluator.evaluate_bitboards`); rows the parser refuses get python-chess's
    reading (so exactly the FENs ``chess.Board`` accepts are scored).  With ``strict``, a row
    lacking a FEN field is an error naming the field.

    A rejected row (bad FEN, missing field, unrepresentable position, bad EPD operations)
    contributes nothing but its error: its operations make no column.  The operation columns
    are the opcodes of the first chunk's good rows (the whole input up to
    :data:`nnue_infer.io.epd.CHUNK_BYTES`), in order of first appearance; a later row with
    another opcode is an error naming it.  An operation named like a column gets the prefix
    ``epd_``.  Without ``operations`` the tables have no operation columns and no opcode is an error
    (the Parquet datasets of :mod:`nnue_infer.io.distributed` keep none: which rows they keep must not depend
    on where a task's first chunk ends); a line whose operations break the EPD rules still is one.
    """
    opcodes: list[str] | None = None if operations else []
    for rows in [chunks] if isinstance(chunks, EpdRows) else chunks:
        parts, ok = _score_rows(ev, rows, strict, chunk_rows)
        if opcodes is None:
            opcodes = rows.opcodes(ok)
        columns, unknown = rows.operation_columns(opcodes, ok) if operations else ({}, {})
        reserved = {"line", "fen", *VALUE_COLUMNS, "error"}
        columns = {(f"epd_{k}" if k in reserved else k): c for k, c in columns.items()}
        per_pawn = ev.network.architecture.units_per_pawn
        for lo, (values, black, in_check, outcome, row_ok, errors) in zip(range(0, len(rows), chunk_rows), parts):
            hi = lo + len(values)
            for r, name in unknown.items():
                if lo <= r < hi:
                    errors[r - lo] = (f"EPD opcode {name!r} first appears after the first chunk of the input "
                                      f"({CHUNK_BYTES >> 20} MiB), whose opcodes are the columns "
                                      f"({', '.join(opcodes) or 'none'})")
                    row_ok[r - lo] = False
            table = {"line": rows.line[lo:hi], "fen": rows.fen.take(slice(lo, hi))}
            table |= value_columns(values, black, in_check, outcome, row_ok, per_pawn, empty_in_check)
            table |= {k: c.take(slice(lo, hi)) for k, c in columns.items()}
            table["error"] = error_column(hi - lo, errors)
            yield table


def _score_rows(ev: Evaluator, rows: EpdRows, strict: bool, chunk_rows: int) -> tuple[list, np.ndarray]:
    """Values and flags of ``rows`` in parts of ``chunk_rows``: per part (values, black, in_check,
    outcome, ok, errors {row in part: message}); and ok bool[n] over all rows (before errors)."""
    buf, offsets = rows.fen_buffer()
    n = len(rows)
    parts = []
    all_ok = np.empty(n, bool)
    for lo in range(0, n, chunk_rows):
        hi = min(n, lo + chunk_rows)
        sub = offsets[lo:hi + 1]
        bitboards, stm, fen_codes, fen_offsets, in_check, outcome = parse_and_flag(buf, sub)
        values, codes = ev.evaluate_bitboards(bitboards, stm)
        ok = (fen_codes | codes) == 0
        outcome = outcomes(outcome, ok, _Offset(rows.fen, lo))
        errors: dict[int, str] = {}
        for i in np.flatnonzero(~ok).tolist():
            fen = rows.fen[lo + i] or ""
            try:
                values[i], in_check[i], outcome[i] = _rescore_fen(ev, fen, int(fen_codes[i]), int(fen_offsets[i]),
                                                                  int(codes[i]))
                ok[i] = True
            except ValueError as exc:
                errors[i] = str(exc)
        if strict:
            fields = rows.fields[lo:hi]
            for i in np.flatnonzero((fields != 4) & (fields != 6)).tolist():
                if i not in errors:
                    errors[i] = missing_field_message(rows.fen[lo + i] or "", rows.missing_field(lo + i) or "")
                    ok[i] = False
        for i in np.flatnonzero(rows.op_problem[lo:hi]).tolist():
            if i not in errors:
                errors[i] = rows.problem(lo + i) or ""
                ok[i] = False
        all_ok[lo:hi] = ok
        parts.append((values, stm == 1, in_check, outcome, ok, errors))
    return parts, all_ok


class _Offset:
    """``fens[lo + i]`` as ``view[i]``."""

    def __init__(self, fens: TextColumn, lo: int) -> None:
        self.fens, self.lo = fens, lo

    def __getitem__(self, i: int) -> str:
        return self.fens[self.lo + i] or ""


def _text(cells: np.ndarray, valid: np.ndarray) -> TextColumn:
    """A text column of the strings ``cells`` (object array, no ``None``) with ``valid`` false for null cells
    (encoded at once, as :meth:`TextColumn.from_strings`, without its per-cell ``None`` test)."""
    strings = cells.tolist()
    n = len(strings)
    buf = np.frombuffer(bytearray("".join(strings), "utf-8", "surrogatepass"), np.uint8)
    lengths = np.fromiter(map(len, strings), np.int64, n)
    if int(lengths.sum()) != buf.size:  # non-ASCII text: count bytes
        lengths = np.fromiter((len(t.encode("utf-8", "surrogatepass")) for t in strings), np.int64, n)
    ends = np.cumsum(lengths)
    return TextColumn(buf, ends - lengths, ends, None if valid.all() else np.asarray(valid, bool))


def score_pgn(ev: Evaluator, stream: Iterable[str], *, source: str = "<pgn>", empty_in_check: bool = False,
              games_per_table: int = GAMES_PER_TABLE, parser: str = "auto", first_line: int = 1,
              first_game: int = 1) -> Iterator[tuple[dict, int]]:
    """Tables of every position of every game's mainline in ``stream`` (lines of PGN text), with the
    number of games in each.  ``first_line`` and ``first_game`` number the first line and game of
    ``stream`` (a range of a larger source that starts at a game's first line).

    Columns: ``game`` (1-based), ``line`` (the game's first line in the source, 1-based, as an EPD row's
    line; error rows too), the :data:`PGN_TAGS` (lower case), ``ply`` (0 = start
    position), ``san`` and ``uci`` (the move that led to the position; null at ply 0),
    ``fen``, :data:`VALUE_COLUMNS`, ``error``.  A game with a problem (illegal move, bad FEN
    tag, chess variant) keeps its rows up to the problem and gets one error row after them
    (the ply the failed move would have reached); a position the network cannot represent is
    an error row itself.  Games are read by :func:`nnue_infer.io.pgn.read_pgn_lines` (with the
    ``pgn`` extra a compiled parser: nothing replays the games in Python, no move is checked
    twice) and evaluated in batches on all cores.
    """
    from ..batch import position_problem
    from .pgn import read_pgn_lines

    per_pawn = ev.network.architecture.units_per_pawn
    for batch in read_pgn_lines(stream, source, parser=parser, games_per_batch=games_per_table,
                                first_line=first_line, first_game=first_game):
        n = len(batch)
        values, codes = ev.evaluate_bitboards(batch.bitboards, batch.stm)
        game = batch.game
        last_row = {g: i for i, g in enumerate(game.tolist())}  # games are contiguous
        keep = np.ones(n, bool)
        # (game, ply, row whose tags / FEN the error row takes or -1, message, tags)
        problems: list[tuple[int, int, int, str | None, str, dict]] = []
        for i in np.flatnonzero(codes).tolist():  # a position the network cannot represent ends its game
            g = int(game[i])
            if keep[i]:
                keep[i:last_row[g] + 1] = False
                problems.append((g, int(batch.ply[i]), i, batch.fen[i], position_problem(codes[i]), {}))
        stopped = {p[0] for p in problems}
        for e in batch.errors:
            if e.game not in stopped:
                end = last_row.get(e.game, -1)
                problems.append((e.game, int(batch.ply[end]) + 1 if end >= 0 else 0, end, None, e.message, e.headers))
        rows = np.flatnonzero(keep)
        k = len(problems)
        order = np.argsort(np.concatenate([game[rows], np.array([p[0] for p in problems], np.int64)]), kind="stable")
        src = np.concatenate([rows, np.full(k, -1, np.int64)])[order]  # batch row of each table row, -1: an error row
        is_row = src >= 0
        prob_at = np.flatnonzero(~is_row)  # table rows of the problems, in problem order
        problem_of = order[prob_at] - len(rows)
        table: dict = {"game": np.concatenate([game[rows], np.array([p[0] for p in problems], np.int64)])[order]}
        first_lines = dict(zip(game.tolist(), batch.line.tolist())) | {e.game: e.line for e in batch.errors}
        table["line"] = np.concatenate([batch.line[rows], np.array([first_lines[p[0]] for p in problems],
                                                                   np.int64)])[order]  # the game's first line
        for tag in PGN_TAGS:
            cells = np.full(len(src), "", object)
            cells[is_row] = batch.headers[tag][src[is_row]]
            for t, q in zip(prob_at.tolist(), problem_of.tolist()):
                p = problems[q]
                cells[t] = batch.headers[tag][p[2]] if p[2] >= 0 else p[5].get(tag, "")
            table[tag.lower()] = _text(cells, cells != "")
        ply = np.zeros(len(src), np.int64)
        ply[is_row] = batch.ply[src[is_row]]
        ply[prob_at] = [problems[q][1] for q in problem_of.tolist()]
        table["ply"] = ply
        moved = is_row & (ply > 0)
        for name, column in (("san", batch.san), ("uci", batch.uci)):
            cells = np.full(len(src), "", object)
            cells[is_row] = np.asarray(column, object)[src[is_row]]
            table[name] = _text(cells, moved)
        fens = np.full(len(src), "", object)
        fens[is_row] = np.asarray(batch.fen, object)[src[is_row]]
        has_fen = is_row.copy()
        for t, q in zip(prob_at.tolist(), problem_of.tolist()):
            if problems[q][3] is not None:
                fens[t], has_fen[t] = problems[q][3], True
        table["fen"] = _text(fens, has_fen)
        picked = np.maximum(src, 0)
        outcome = np.where(batch.checkmate, CHECKMATE, np.where(batch.stalemate, STALEMATE, NONE))
        table |= value_columns(values[picked] if n else np.zeros(len(src), np.int32),
                               (batch.stm[picked] == 1) if n else np.zeros(len(src), bool),
                               batch.in_check[picked] if n else np.zeros(len(src), bool),
                               outcome[picked] if n else np.zeros(len(src), np.int64), is_row, per_pawn, empty_in_check)
        table["error"] = error_column(len(src), {t: problems[q][4] for t, q in zip(prob_at.tolist(),
                                                                                   problem_of.tolist())})
        yield table, len(set(table["game"].tolist()))




def empty_table(kind: str) -> dict:
    """The table of an input without positions: the columns of :func:`score_epd` (``kind`` ``"epd"``, no
    operation columns) or of :func:`score_pgn` (``"pgn"``) with no rows, typed as theirs, so that such an
    input still gets its CSV header and a Parquet file its schema (a Parquet file of no columns was
    written: fresh-user trial)."""
    none = np.zeros(0, bool)
    text = TextColumn.from_strings([])
    table: dict = {"line": np.zeros(0, np.int64)} if kind == "epd" else {
        "game": np.zeros(0, np.int64), "line": np.zeros(0, np.int64), **{tag.lower(): text for tag in PGN_TAGS},
        "ply": np.zeros(0, np.int64),
        "san": text, "uci": text}
    table["fen"] = text
    table |= value_columns(np.zeros(0, np.int32), none, none, np.zeros(0, np.int64), none, 1)
    table["error"] = error_column(0, {})
    return table


def score_training_data(ev: Evaluator, data) -> dict:
    """The output table of training-data rows (:class:`nnue_infer.io.training_data.TrainingData`):
    ``game`` (the chain number), ``ply``, ``uci``, ``fen`` and :data:`VALUE_COLUMNS` (``outcome`` is
    ``none``: a position with a move played is neither mate nor stalemate), ``error`` for rows the
    network cannot represent."""
    from .training_data import flags

    values, codes = ev.evaluate_bitboards(data.bitboards, data.stm)
    ok = codes == 0
    in_check, _ = flags(data)
    errors = {i: _POSITION_PROBLEMS[int(codes[i])] for i in np.flatnonzero(~ok).tolist()}
    table = {"game": data.chain.astype(np.int64), "ply": data.ply.astype(np.int64),
             "uci": TextColumn.from_strings(data.uci()), "fen": TextColumn.from_strings(data.fens())}
    table |= value_columns(values, data.stm == 1, in_check, np.zeros(len(data), np.int8), ok,
                           ev.network.architecture.units_per_pawn)
    table["error"] = error_column(len(data), errors)
    return table


def warm_up_files(ev: Evaluator) -> None:
    """Compile (or load) the kernels of scoring EPD and PGN files with ``ev``'s network: line splitting and EPD
    operations, FEN parsing with the in-check and mate flags, a game's SAN, UCI and FEN (:data:`WARM_UP_GAME`), the
    result columns as CSV lines and (with pyarrow) a dataset part's Arrow table: ``eval --epd`` / ``--pgn`` into
    CSV, JSON lines or Parquet, and the workers of :func:`nnue_infer.io.distributed.score_files` (``nnue-infer
    warmup --paths files``)."""
    from .epd import read_epd
    from .output import encode

    text = WARM_UP_EPD
    for table in score_epd(ev, read_epd(text)):
        encode(table, "csv")
    for table, _ in score_pgn(ev, WARM_UP_GAME.splitlines(keepends=True)):
        encode(table, "csv")
    try:
        import pyarrow  # noqa: F401  (the parquet extra: Parquet outputs and datasets)
    except ImportError:
        return
    from .parquet import dataset_table, schema

    for table in score_epd(ev, read_epd(text), operations=False):
        dataset_table(table, "<warm-up>", schema())
    for table, _ in score_pgn(ev, WARM_UP_GAME.splitlines(keepends=True)):
        dataset_table(table, "<warm-up>", schema())


#: The EPD lines the warm-ups score (:func:`warm_up_files`, :func:`nnue_infer.io.distributed.warm_up`): a position, a
#: checkmate (its legal moves counted), castling rights (python-chess decides the outcome) and a line with
#: operations (its FEN packed apart from them: ``kernels.data.epd.pack_rows``, which a Dask job over such a file compiled
#: after the worker's warm-up, found by tests/kernels/test_cache.py).
WARM_UP_EPD = (b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1\n"
               b"rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3\n"
               b"4k3/8/8/8/8/8/8/4K2R w K - 0 1\n"
               b'r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq bm Nxe5; id "warm-up";\n')

#: The PGN game the warm-ups score (:func:`warm_up_files`, :func:`nnue_infer.io.distributed.warm_up`): a capture, a
#: check and castling, so that the SAN, UCI and FEN writers of PGN rows are compiled too (``eval --pgn`` and a
#: Dask job over PGN inputs compiled them after ``warmup --paths files``, about 5 s of CPU, every worker at once).
WARM_UP_GAME = '[Event "warm-up"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 Nf6 4. O-O Nxe4 5. Bxc6 dxc6 6. Re1 Be7 7. Rxe4 *\n'


# -- whole files ------------------------------------------------------------------------------------------------

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
    :class:`nnue_infer.io.pgn.PgnProblem` but the line, which the rows do not carry).

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

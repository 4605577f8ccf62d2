"""Scoring files: EPD/FEN lines and PGN games -> result tables (:mod:`nnue_infer.output`) that join back to the input.

Every row carries where it came from (``line`` of an EPD file; ``game`` and ``ply`` of a PGN,
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
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TextIO

import chess
import numpy as np

from .batch import PARALLEL_LOCK, _POSITION_PROBLEMS, fen_problem, parse_fen_buffer
from .epd import MISSING_FIELD, EpdRows
from .errors import PositionError
from .evaluator import Evaluator
from .features import check_position
from .kernels import status as KS
from .output import TextColumn

#: Rows per table chunk (and per progress-bar step).
CHUNK_ROWS = 65536
#: Columns about the position's value and state, in this order, at the end of every table.
VALUE_COLUMNS = ("value", "cp", "cp_white", "in_check", "outcome")
#: The PGN tags copied onto every row of a game (the Seven Tag Roster, PGN standard 8.1.1), as columns.
PGN_TAGS = ("Event", "Site", "Date", "Round", "White", "Black", "Result")


#: ``outcome`` codes and their labels.
NONE, CHECKMATE, STALEMATE = 0, 1, 2
OUTCOMES = ("none", "checkmate", "stalemate")


def outcome_code(board: chess.Board) -> int:
    """:data:`CHECKMATE`, :data:`STALEMATE` or :data:`NONE`: python-chess's ``is_checkmate`` / ``is_stalemate``."""
    if board.is_checkmate():
        return CHECKMATE
    if board.is_stalemate():
        return STALEMATE
    return NONE


def outcomes(in_check: np.ndarray, cleared: np.ndarray, ok: np.ndarray, fens, chess960=None) -> np.ndarray:
    """int8[n] outcome codes: :data:`NONE` where ``kernels.status`` cleared the row, else python-chess's verdict.

    ``fens[i]`` (indexable) gives the position of row ``i``; ``chess960`` (bool[n] or None) how
    to read its castling rights.  Rows with ``ok`` false get :data:`NONE` (they are nulled).
    """
    result = np.zeros(len(ok), np.int8)
    for i in np.flatnonzero(ok & (cleared == KS.NOT_CLEARED)).tolist():
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


def score_epd(ev: Evaluator, rows: EpdRows, *, strict: bool = True, empty_in_check: bool = False,
              chunk_rows: int = CHUNK_ROWS) -> Iterator[dict]:
    """Tables of ``rows`` scored with ``ev``: ``line``, ``fen``, :data:`VALUE_COLUMNS`, the EPD operations, ``error``.

    FENs are parsed, checked and evaluated in compiled code on all cores
    (:func:`nnue_infer.batch.parse_fen_buffer`, :meth:`Evaluator.evaluate_bitboards`,
    :func:`nnue_infer.kernels.status.status_batch`); rows the parser refuses get python-chess's
    reading (so exactly the FENs ``chess.Board`` accepts are scored).  With ``strict``, a row
    lacking a FEN field is an error naming the field.  An operation named like a column
    gets the prefix ``epd_``.
    """
    buf, offsets = rows.fen_buffer()
    per_pawn = ev.network.architecture.units_per_pawn
    n = len(rows)
    reserved = {"line", "fen", *VALUE_COLUMNS, "error"}
    operations = {(f"epd_{k}" if k in reserved else k): c for k, c in rows.operations.items()}
    for lo in range(0, n, chunk_rows):
        hi = min(n, lo + chunk_rows)
        sub = offsets[lo:hi + 1]
        bitboards, stm, fen_codes, fen_offsets = parse_fen_buffer(buf, sub)
        values, codes = ev.evaluate_bitboards(bitboards, stm)
        ok = (fen_codes | codes) == 0
        in_check, cleared = np.empty(hi - lo, bool), np.empty(hi - lo, np.uint8)
        with PARALLEL_LOCK:
            KS.status_batch(bitboards, stm, ok, in_check, cleared)
        outcome = outcomes(in_check, cleared, ok, _Offset(rows.fen, lo))
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
            for i in np.flatnonzero(~np.isin(rows.fields[lo:hi], (4, 6))).tolist():
                if i not in errors:
                    errors[i] = (f"FEN {rows.fen[lo + i]!r} has no {MISSING_FIELD[int(rows.fields[lo + i])]} field "
                                 "(strict FEN; --lenient reads it as python-chess does)")
                    ok[i] = False
        black = stm == 1
        table = {"line": rows.line[lo:hi], "fen": rows.fen.take(slice(lo, hi))}
        table |= value_columns(values, black, in_check, outcome, ok, per_pawn, empty_in_check)
        table |= {k: c.take(slice(lo, hi)) for k, c in operations.items()}
        table["error"] = error_column(hi - lo, errors)
        yield table


class _Offset:
    """``fens[lo + i]`` as ``view[i]``."""

    def __init__(self, fens: TextColumn, lo: int) -> None:
        self.fens, self.lo = fens, lo

    def __getitem__(self, i: int) -> str:
        return self.fens[self.lo + i] or ""


def score_pgn(ev: Evaluator, stream: TextIO, *, empty_in_check: bool = False, games_per_table: int = 256,
              report=None) -> Iterator[tuple[dict, int]]:
    """Tables of every position of every game's mainline in ``stream``, with the number of games in each.

    Columns: ``game`` (1-based), the :data:`PGN_TAGS` (lower case), ``ply`` (0 = start
    position), ``san`` and ``uci`` (the move that led to the position; null at ply 0),
    ``fen``, :data:`VALUE_COLUMNS`, ``error``.  A game with a problem (illegal move, bad FEN
    tag, chess variant) keeps its rows up to the problem and gets one error row after them
    (ply of the move that failed, or 0).  Games start from their ``FEN`` tag when there is
    one; values come from :meth:`Evaluator.evaluate_game` (incremental).
    """
    import chess.pgn

    # python-chess also logs each game's errors (with a traceback); they are reported in the error column.
    logging.getLogger("chess.pgn").addHandler(logging.NullHandler())
    per_pawn = ev.network.architecture.units_per_pawn
    number = 0
    done = False
    while not done:
        cols: dict[str, list] = {k: [] for k in ("game", *PGN_TAGS, "ply", "san", "uci", "fen", "value", "black",
                                                  "bitboards", "chess960", "ok", "error")}
        games = 0
        while games < games_per_table:
            game = chess.pgn.read_game(stream)
            if game is None:
                done = True
                break
            number += 1
            games += 1
            _game_rows(ev, game, number, cols)
        if not cols["game"]:
            continue
        m = len(cols["game"])
        ok = np.array(cols["ok"], bool)
        bitboards = np.array(cols["bitboards"], np.uint64).reshape(m, 8).view(np.int64)
        black = np.array(cols["black"], bool)
        in_check, cleared = np.empty(m, bool), np.empty(m, np.uint8)
        with PARALLEL_LOCK:
            KS.status_batch(bitboards, black.astype(np.uint8), ok, in_check, cleared)
        outcome = outcomes(in_check, cleared, ok, cols["fen"], np.array(cols["chess960"], bool))
        table: dict = {"game": np.array(cols["game"], np.int64)}
        table |= {tag.lower(): TextColumn.from_strings(cols[tag]) for tag in PGN_TAGS}
        table["ply"] = np.array(cols["ply"], np.int64)
        table |= {k: TextColumn.from_strings(cols[k]) for k in ("san", "uci", "fen")}
        table |= value_columns(np.array(cols["value"], np.int64), black, in_check, outcome, ok, per_pawn,
                               empty_in_check)
        table["error"] = error_column(m, {i: e for i, e in enumerate(cols["error"]) if e is not None})
        yield table, games


def _game_rows(ev: Evaluator, game, number: int, cols: dict[str, list]) -> None:
    """Append one game's rows (and its error row, if any) to the column lists ``cols``."""
    tags = [game.headers.get(tag) for tag in PGN_TAGS]

    def row(ply, san, uci, fen, value, black, bitboards, chess960, error):
        cols["game"].append(number)
        for tag, text in zip(PGN_TAGS, tags):
            cols[tag].append(text)
        cols["ply"].append(ply)
        cols["san"].append(san)
        cols["uci"].append(uci)
        cols["fen"].append(fen)
        cols["value"].append(value)
        cols["black"].append(black)
        cols["bitboards"].extend(bitboards)
        cols["chess960"].append(chess960)
        cols["ok"].append(error is None)
        cols["error"].append(error)

    nothing = (0,) * 8
    problem = "; ".join(str(e) for e in game.errors) or None
    try:
        board = game.board()
    except ValueError as exc:  # a bad FEN tag
        row(0, None, None, game.headers.get("FEN"), 0, False, nothing, False, problem or str(exc))
        return
    if board.uci_variant != "chess":
        row(0, None, None, board.fen(), 0, False, nothing, False,
            f"variant {board.uci_variant!r} is not supported (standard chess and Chess960 only)")
        return
    moves = list(game.mainline_moves())
    try:
        values = ev.evaluate_game(board, moves, validate=False).tolist()
    except ValueError as exc:
        row(0, None, None, board.fen(), 0, False, nothing, False, str(exc))
        return
    for ply in range(len(moves) + 1):
        san = uci = None
        if ply:
            move = moves[ply - 1]
            san, uci = board.san(move), move.uci()
            board.push(move)
        occ = board.occupied_co
        row(ply, san, uci, board.fen(), values[ply], board.turn == chess.BLACK,
            (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings, occ[1], occ[0]),
            board.chess960, None)
    if problem is not None:
        row(len(moves) + 1, None, None, None, 0, board.turn == chess.BLACK, nothing, False, problem)

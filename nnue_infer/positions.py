"""Positions as people type them: FENs (strict or lenient), ``startpos``, ``fen ... moves ...``.

The words follow Stockfish's UCI ``position`` command (``position startpos moves e2e4 e7e5``,
``position fen <FEN> moves ...``), with two additions: the word ``fen`` is optional before a
FEN, and moves may be SAN as well as UCI (``moves e4 e5 Nf3``; move numbers such as ``1.``
or ``1...`` and a result such as ``1-0`` are skipped, so a PGN move list can be pasted).

Strict FENs, the one rule for FEN strings of the command line and of the Python API
(``evaluate``, ``evaluate_batch``, ``Evaluator``, ``forward_float``), must have at least the
four EPD fields (placement, side to move, castling rights, en passant square) and both
counters or neither; python-chess reads them (:func:`board_from_fen`).  python-chess's
lenient reading (``chess.Board(fen)``: a missing side to move means White, missing castling
rights mean none) is what ``strict=False`` (``--lenient``) gives, and what a Python caller
gets by passing ``chess.Board(fen)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import chess

import numpy as np

from .errors import QUOTE_LIMIT, FenError, IllegalMoveError, clip, quote
from .kernels.chess import fen as KF
from .kernels.threads import PARALLEL_LOCK

#: The FEN fields after the placement, as named in messages.
FIELD_NAMES = ("side to move", "castling rights", "en passant square", "half-move clock", "full-move number")

#: Words that start a position or its moves (they end the FEN before them).
_KEYWORDS = ("startpos", "fen", "moves")
_MOVE_NUMBER = re.compile(r"^\d+\.+")
_RESULTS = {"1-0", "0-1", "1/2-1/2", "*"}


#: What strict mode suggests for a FEN lacking a field, by caller: the command line's option, the API's way.
LENIENT_HINTS = {"cli": "--lenient reads it as python-chess does",
                 "api": "chess.Board(fen) reads it as python-chess does: pass that board instead"}


def missing_field(fields: int) -> str | None:
    """The first field a FEN of ``fields`` white-space separated fields lacks under the strict
    rule (at least placement, side to move, castling rights and en passant square; both
    counters or neither), or ``None``."""
    if fields < 4:
        return FIELD_NAMES[max(fields, 1) - 1]
    if fields == 5:
        return FIELD_NAMES[4]
    return None


def missing_field_message(fen: str, field: str, hint: str = "cli") -> str:
    """The strict rule's message for ``fen`` lacking ``field`` (``hint``: a key of :data:`LENIENT_HINTS`)."""
    if field == FIELD_NAMES[4]:
        return (f"FEN {quote(fen)} has a half-move clock but no full-move number field "
                f"(give both counters or neither; {LENIENT_HINTS[hint]})")
    return (f"FEN {quote(fen)} has no {field} field (a FEN needs at least placement, side to move, "
            f"castling rights and en passant square; {LENIENT_HINTS[hint]})")


def check_fen_fields(fen: str, hint: str = "cli") -> None:
    """Raise :class:`FenError` naming the first missing field of ``fen`` (strict FEN rules, :func:`missing_field`).

    Fields present are not validated here (python-chess does that).
    """
    fields = fen.split()
    if not fields:
        raise FenError("empty FEN")
    field = missing_field(len(fields))
    if field is not None:
        raise FenError(missing_field_message(fen, field, hint))


def fen_error(fen: str, exc: ValueError) -> FenError:
    """The error for a FEN python-chess refused (``exc``): for ASCII text the compiled parser's
    wording (the field or character, its 0-based character offset and the FEN), else python-chess's."""
    if fen.isascii() and "\n" not in fen:
        buf, offsets = fen_buffer([fen])
        codes, where = parse_fen_buffer(buf, offsets)[2:]
        if codes[0]:
            return FenError(fen_problem(fen, int(codes[0]), int(where[0])))
    return FenError(f"invalid FEN {quote(fen)}: {clip(str(exc))}")


def board_from_fen(fen: str, strict: bool = True, hint: str = "cli") -> chess.Board:
    """A board from ``fen``: python-chess reads it (``chess.Board(fen)``); strict mode (the
    default, the rule of the command line and of the Python API) also requires every field
    (:func:`check_fen_fields`).

    A Chess960 position is read as one (``chess960=True``) when its castling field names rook
    files (Shredder-FEN, such as ``HFhf``) and the Chess960 reading keeps more of those rights
    than the standard one (read as standard chess, python-chess drops them and the castling moves
    with them).  ``KQkq`` always reads as standard chess, whose rules then drop the rights that do
    not fit (a stale ``kq`` after the king left e8 keeps White's ordinary castling as ``e1g1``);
    pass a ``chess.Board(fen, chess960=True)`` for X-FEN.

    Raises :class:`FenError` naming the problem: the bad field or character and where it
    stands, or the missing field.
    """
    try:
        board = chess.Board(fen)
        fields = fen.split()
        if len(fields) > 2 and any(c in "abcdefghABCDEFGH" for c in fields[2]):
            chess960 = chess.Board(fen, chess960=True)
            if chess960.clean_castling_rights().bit_count() > board.clean_castling_rights().bit_count():
                board = chess960
    except ValueError as exc:
        raise fen_error(fen, exc) from None
    if strict:
        check_fen_fields(fen, hint)
    return board


def parse_move(board: chess.Board, text: str) -> chess.Move:
    """The move ``text`` (UCI such as ``e2e4``/``e7e8q``/``e1g1``, or SAN such as ``Nf3``, ``O-O``,
    ``exd8=Q+``) in ``board``; :class:`IllegalMoveError` naming the move and the position.

    The null move (``0000``, ``--``) is accepted except in check (Stockfish never makes a null
    move in check: the side that passed would stand in check with the opponent to move)."""
    try:
        move = board.parse_uci(text)
    except ValueError:
        try:
            move = board.parse_san(text)
        except ValueError as exc:
            reason = str(exc).replace(f" in {board.fen()}", "")  # python-chess names the position too
            raise IllegalMoveError(f"move {text!r} is neither a legal UCI nor a legal SAN move in {board.fen()} "
                                   f"({reason})") from None
    if not move and board.is_check():
        raise IllegalMoveError(f"null move {text!r} in check in {board.fen()} (the side to move would leave its "
                               "king in check)")
    return move


@dataclass
class Position:
    """One position given on a command line: how it was written and the board it gives."""

    text: str
    board: chess.Board


def parse_positions(words: Sequence[str], strict: bool = True) -> list[Position]:
    """The positions in command-line ``words`` (each word may hold several, separated by spaces).

    A position starts with ``startpos``, ``fen`` or a placement field (a word with ``/``);
    a placement takes the FEN fields that follow it; ``moves`` is followed by moves to play
    from the position before it.  Examples: ``startpos moves e2e4 e7e5``,
    ``"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"``,
    ``fen 8/8/8/8/8/5k2/8/4K2R w K - 0 1 moves O-O``.

    Raises
    ------
    FenError
        A malformed FEN, a missing field in strict mode, or a word that fits nowhere.
    IllegalMoveError
        A move that is not legal (the message names it and the position).
    """
    tokens = [t for w in words for t in w.split()]
    if words and not tokens:
        raise FenError("empty position (the arguments hold only spaces)")
    positions: list[Position] = []
    i = 0
    n = len(tokens)
    while i < n:
        t = tokens[i]
        start = i
        if t == "startpos":
            board = chess.Board()
            i += 1
        elif t == "fen" or "/" in t:
            if t == "fen":
                i += 1
                if i >= n:
                    raise FenError("'fen' must be followed by a FEN")
            fields = [tokens[i]]
            i += 1
            while i < n and len(fields) < 6 and tokens[i] not in _KEYWORDS and "/" not in tokens[i]:
                fields.append(tokens[i])  # a bad field is the parser's to name, not a word that fits nowhere
                i += 1
            board = board_from_fen(" ".join(fields), strict)
        elif t == "moves":
            raise FenError("'moves' must follow a position (startpos or a FEN)")
        else:
            hint = (f"; after {quote(positions[-1].text)} moves need the word 'moves' before them" if positions
                    else "")
            raise FenError(f"{t!r} is neither a FEN, 'startpos', 'fen FEN' nor 'moves ...'{hint}")
        if i < n and tokens[i] == "moves":
            i += 1
            index = 0
            result = None
            while i < n and tokens[i] not in ("startpos", "fen", "moves") and (
                    "/" not in tokens[i] or tokens[i] in _RESULTS):
                text = _MOVE_NUMBER.sub("", tokens[i])
                i += 1
                if text in _RESULTS:
                    result = text
                if not text or text in _RESULTS:
                    continue
                if result is not None:  # a pasted game's result ends its moves
                    raise IllegalMoveError(f"moves[{index}]: {text!r} follows the result {result!r}: a result ends "
                                           "the moves")
                try:
                    board.push(parse_move(board, text))
                except IllegalMoveError as exc:
                    raise IllegalMoveError(f"moves[{index}]: {exc}") from None
                index += 1
        positions.append(Position(" ".join(tokens[start:i]), board))
    return positions


# The compiled FEN parser's side (kernels/chess/fen.py): rows laid out in one buffer, parsed on all cores,
# its problem codes worded.

def _first_not(positions: Sequence[object], kind: type) -> int:
    return next(i for i, p in enumerate(positions) if not isinstance(p, kind))


def fen_buffer(fens: Sequence[str], first_row: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The FENs' UTF-8 bytes joined by newlines, and where each row starts (``first_row``: the number of
    ``fens[0]`` in the caller's rows, for messages).

    Returns
    -------
    buf : uint8[total]
        ``"\\n".join(fens) + "\\n"``, encoded (one copy, no per-row Python work for ASCII input;
        a lone surrogate becomes bytes the parser refuses, so its row is named).
    offsets : int64[n + 1]
        Row ``i`` is ``buf[offsets[i]:offsets[i + 1]]``, its trailing newline included.

    Raises
    ------
    TypeError
        An element is not a ``str`` (the message names its row).
    """
    n = len(fens)
    try:
        text = "\n".join(fens)
    except TypeError:
        i = _first_not(fens, str)
        wanted = "a FEN string like the rows before" if i + first_row else "a FEN string or a chess.Board"
        raise TypeError(f"row {i + first_row}: expected {wanted}, got {type(fens[i]).__name__}") from None
    buf = np.frombuffer(bytearray(text + "\n", "utf-8", "surrogatepass"), np.uint8)
    lengths = np.fromiter(map(len, fens), np.int64, n)
    if int(lengths.sum()) + n != buf.size:  # non-ASCII characters: count bytes, not characters
        lengths = np.fromiter((len(f.encode("utf-8", "surrogatepass")) for f in fens), np.int64, n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths + 1, out=offsets[1:])
    return buf, offsets


#: ``fen_codes`` of a row that parses but lacks a field under the strict rule
#: (:func:`nnue_infer.positions.missing_field`); the compiled parser's codes are ``kernels.chess.fen.FEN_*``.
FEN_MISSING_FIELD = -1


def field_counts(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """int64[n]: white-space separated fields of each row of ``buf`` (layout of :func:`fen_buffer`;
    ASCII white space as ``kernels.chess.fen.is_space``).

    Counted as the field starts (a byte that is not white space after one that is: every row ends
    with a newline) between the rows' offsets, by searching the starts' positions: it summed an int64
    copy of the whole buffer, eight bytes a byte, whose fresh allocation made ``evaluate_batch`` on
    640,000 FENs take 1.3 to 2.1 s from call to call."""
    if offsets.shape[0] < 2:
        return np.zeros(0, np.int64)
    space = (buf == 32) | ((buf >= 9) & (buf <= 13)) | ((buf >= 28) & (buf <= 31))
    starts = ~space
    starts[1:] &= space[:-1]
    return np.diff(np.searchsorted(np.flatnonzero(starts), offsets)).astype(np.int64)


def fen_problem(fen: str, code: int, offset: int) -> str:
    """Human-readable description of :func:`nnue_infer.kernels.chess.fen.parse_fen`'s ``code`` at ``offset``.

    For an ASCII ``fen`` (:func:`raise_row_error` quotes python-chess for the others), the
    0-based byte ``offset`` is also a character offset; messages give it as the 1-based
    column, as editors and the EPD operation messages count.
    """
    rest = fen[offset:]
    details = {
        "char": rest[:1] or "end of field",
        "rank": 8 - fen[:offset].count("/"),
        "field": (rest.split() or [""])[0][:QUOTE_LIMIT],  # the whole FEN is quoted (cut) after it
    }
    return f"{_FEN_PROBLEMS[code].format(**details)} at column {offset + 1} of {quote(fen)}"


_FEN_PROBLEMS = {
    KF.FEN_EMPTY: "empty FEN",
    KF.FEN_BAD_CHARACTER: "invalid character {char!r} in the placement field",
    KF.FEN_TWO_DIGITS: "two digits in a row in the placement field",
    KF.FEN_BAD_TILDE: "'~' not after a piece in the placement field",
    KF.FEN_RANK_LENGTH: "rank {rank} of the placement field does not have 8 squares",
    KF.FEN_RANK_COUNT: "the placement field does not have 8 ranks",
    KF.FEN_SIDE_TO_MOVE: "side to move must be 'w' or 'b', found {field!r}",
    KF.FEN_CASTLING: "invalid castling field {field!r}",
    KF.FEN_EN_PASSANT: "invalid en passant field {field!r}",
    KF.FEN_HALFMOVE: "half-move clock must be a non-negative integer, found {field!r}",
    KF.FEN_FULLMOVE: "full-move number must be a non-negative integer, found {field!r}",
    KF.FEN_EXTRA_FIELDS: "more than 6 fields, found {field!r}",
}

def parse_fen_buffer(buf: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parse the FENs in ``buf`` (layout of :func:`fen_buffer`) on all cores, raising nothing.

    Returns ``bitboards`` int64[n, 8] (zeros where a row does not parse), ``stm`` uint8[n],
    ``fen_codes`` int32[n] (``kernels.chess.fen.FEN_*``, 0 = parsed) and ``fen_offsets`` int64[n]
    (offset of the problem within the row, -1 if none; :func:`fen_problem` words it).
    """
    n = offsets.shape[0] - 1
    bitboards, stm = np.empty((n, 8), np.int64), np.empty(n, np.uint8)
    fen_codes, fen_offsets = np.empty(n, np.int32), np.empty(n, np.int64)
    with PARALLEL_LOCK:
        KF.parse_fens(buf, offsets, bitboards, stm, fen_codes, fen_offsets)
    return bitboards, stm, fen_codes, fen_offsets

"""Positions as people type them: FENs (strict or lenient), ``startpos``, ``fen ... moves ...``.

The words follow Stockfish's UCI ``position`` command (``position startpos moves e2e4 e7e5``,
``position fen <FEN> moves ...``), with two additions: the word ``fen`` is optional before a
FEN, and moves may be SAN as well as UCI (``moves e4 e5 Nf3``; move numbers such as ``1.``
or ``1...`` and a result such as ``1-0`` are skipped, so a PGN move list can be pasted).

Strict FENs (the default of the command line) must have at least the four EPD fields
(placement, side to move, castling rights, en passant square) and both counters or neither;
python-chess's lenient reading (``chess.Board(fen)``: a missing side to move means White,
missing castling rights mean none) is what ``strict=False`` gives.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import chess

from .errors import FenError, IllegalMoveError

#: The FEN fields after the placement, as named in messages.
FIELD_NAMES = ("side to move", "castling rights", "en passant square", "half-move clock", "full-move number")

_FIELD_PATTERNS = (
    re.compile(r"[wb]"),
    re.compile(r"-|[KQA-H]{0,2}[kqa-h]{0,2}"),
    re.compile(r"-|[a-h][1-8]"),
    re.compile(r"\d+"),
    re.compile(r"\d+"),
)
_MOVE_NUMBER = re.compile(r"^\d+\.+")
_RESULTS = {"1-0", "0-1", "1/2-1/2", "*"}


def check_fen_fields(fen: str) -> None:
    """Raise :class:`FenError` naming the first missing field of ``fen`` (strict FEN rules).

    Fields present are not validated here (the parser does that); this only requires
    placement, side to move, castling rights and en passant square, and the full-move number
    when the half-move clock is given.
    """
    fields = fen.split()
    if not fields:
        raise FenError("empty FEN")
    if len(fields) < 4:
        missing = FIELD_NAMES[len(fields) - 1]
        raise FenError(f"FEN {fen!r} has no {missing} field (a FEN needs at least placement, side to move, "
                       "castling rights and en passant square; --lenient reads it as python-chess does)")
    if len(fields) == 5:
        raise FenError(f"FEN {fen!r} has a half-move clock but no full-move number field "
                       "(give both counters or neither; --lenient reads it as python-chess does)")


def board_from_fen(fen: str, strict: bool = True) -> chess.Board:
    """A board from ``fen``; strict mode first requires every field (:func:`check_fen_fields`).

    Raises :class:`FenError` for anything ``chess.Board(fen)`` refuses, then (strict) for a missing field.
    """
    try:
        board = chess.Board(fen)
    except ValueError as exc:
        raise FenError(f"invalid FEN {fen!r}: {exc}") from None
    if strict:
        check_fen_fields(fen)
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
            raise IllegalMoveError(f"move {text!r} is neither a legal UCI nor a legal SAN move in {board.fen()} "
                                   f"({exc})") from None
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
            while i < n and len(fields) < 6 and _FIELD_PATTERNS[len(fields) - 1].fullmatch(tokens[i]):
                fields.append(tokens[i])
                i += 1
            board = board_from_fen(" ".join(fields), strict)
        elif t == "moves":
            raise FenError("'moves' must follow a position (startpos or a FEN)")
        else:
            raise FenError(f"{t!r} is neither a FEN, 'startpos', 'fen FEN' nor 'moves ...' "
                           "(a FEN field that does not fit where it stands?)")
        if i < n and tokens[i] == "moves":
            i += 1
            index = 0
            while i < n and tokens[i] not in ("startpos", "fen", "moves") and (
                    "/" not in tokens[i] or tokens[i] in _RESULTS):
                text = _MOVE_NUMBER.sub("", tokens[i])
                i += 1
                if not text or text in _RESULTS:
                    continue
                try:
                    board.push(parse_move(board, text))
                except IllegalMoveError as exc:
                    raise IllegalMoveError(f"moves[{index}]: {exc}") from None
                index += 1
        positions.append(Position(" ".join(tokens[start:i]), board))
    return positions

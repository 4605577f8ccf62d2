"""A match's openings: a book read from EPD/FEN or PGN files (optionally gzipped), or openings generated
by random legal moves from the start position, kept when a network's static evaluation finds them balanced."""

from __future__ import annotations

import gzip
import io
import os
import random
from dataclasses import dataclass

import chess
import chess.pgn

from ...errors import MatchError


@dataclass(frozen=True)
class Opening:
    """A game's start: a FEN and book moves (UCI) played from it; ``source`` names where it came from."""

    fen: str = chess.STARTING_FEN
    moves: tuple[str, ...] = ()
    source: str = ""

    def board(self) -> chess.Board:
        board = chess.Board(self.fen)
        for m in self.moves:
            board.push_uci(m)
        return board


def _open_text(path: str):
    try:
        if path.endswith(".gz"):
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
        return open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise MatchError(f"{path}: cannot read the opening book ({exc.strerror or exc})") from None


def read_openings(path: str, *, plies: int | None = None) -> list[Opening]:
    """The openings of an EPD/FEN book (one position a line; blank lines and ``#`` comments skipped) or a PGN book
    (each game's start and main line, cut to ``plies`` half-moves when given), by the file name's ending
    (``.epd``, ``.fen``, ``.txt``, ``.pgn``, optionally ``.gz``).

    Raises
    ------
    MatchError
        The file cannot be read, is of an unknown kind, holds a line that is no legal position (file and line
        named) or a game with an illegal move, or holds no opening.
    """
    name = path[:-3] if path.endswith(".gz") else path
    ext = os.path.splitext(name)[1].lower()
    if ext not in (".epd", ".fen", ".txt", ".pgn"):
        raise MatchError(f"{path}: unknown opening book kind {ext or '(none)'!r} (expected .epd, .fen, .txt or "
                         ".pgn, optionally .gz)")
    openings: list[Opening] = []
    with _open_text(path) as f:
        if ext == ".pgn":
            n = 0
            while True:
                try:
                    game = chess.pgn.read_game(f)
                except (ValueError, UnicodeError) as exc:
                    raise MatchError(f"{path}: game {n + 1}: unreadable PGN ({exc})") from None
                if game is None:
                    break
                n += 1
                if game.errors:
                    raise MatchError(f"{path}: game {n}: {game.errors[0]}")
                board = game.board()
                try:
                    start = board.fen()
                    if not board.is_valid():
                        raise ValueError(f"invalid start position {start}")
                except ValueError as exc:
                    raise MatchError(f"{path}: game {n}: {exc}") from None
                moves = [m.uci() for m in game.mainline_moves()]
                if plies is not None:
                    moves = moves[:plies]
                openings.append(Opening(start, tuple(moves), f"{os.path.basename(path)}#{n}"))
        else:
            for lineno, line in enumerate(f, 1):
                text = line.strip()
                if not text or text.startswith("#"):
                    continue
                try:
                    board = chess.Board()
                    board.set_epd(text) if len(text.split()) != 6 or ";" in text else board.set_fen(text)
                    if not board.is_valid():
                        raise ValueError(f"not a legal position ({board.status()!r})")
                    if board.is_game_over():
                        raise ValueError("the game is already over in this position")
                except ValueError as exc:
                    raise MatchError(f"{path}, line {lineno}: {exc}: {text[:120]!r}") from None
                openings.append(Opening(board.fen(), (), f"{os.path.basename(path)}:{lineno}"))
    if not openings:
        raise MatchError(f"{path}: the opening book holds no opening")
    return openings


def generate_openings(count: int, *, plies: int = 8, seed: int = 0, network: str | None = None,
                      max_cp: int = 100, attempts: int = 200) -> list[Opening]:
    """``count`` distinct openings of ``plies`` random legal moves from the start position, each kept when the
    network's static evaluation of its end lies within ``max_cp`` centipawns of zero (a balanced start);
    deterministic for a ``seed``.  ``network``: a spec as ``--net`` takes (None: the bundled default network).

    Raises
    ------
    MatchError
        Fewer than ``count`` balanced openings in ``attempts * count`` tries.
    """
    from ...evaluator import evaluate_cp

    if count <= 0 or plies < 0 or max_cp < 0:
        raise MatchError(f"generated openings: count > 0, plies >= 0 and max_cp >= 0 (got {count}, {plies}, {max_cp})")
    rng = random.Random(seed)
    found: dict[str, Opening] = {}
    tries = 0
    while len(found) < count:
        tries += 1
        if tries > attempts * count:
            raise MatchError(f"generated openings: only {len(found)} of {count} balanced within {max_cp} cp in "
                             f"{tries - 1} tries (more plies give more distinct openings; raise max_cp)")
        board = chess.Board()
        moves = []
        for _ in range(plies):
            legal = sorted(board.legal_moves, key=lambda m: m.uci())
            if not legal:
                break
            move = rng.choice(legal)
            board.push(move)
            moves.append(move.uci())
        if board.is_game_over() or len(moves) < plies:
            continue
        key = board.epd()
        if key in found or abs(evaluate_cp(board, network)) > max_cp:
            continue
        found[key] = Opening(chess.STARTING_FEN, tuple(moves), f"random#{len(found) + 1}")
    return list(found.values())

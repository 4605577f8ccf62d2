"""PGN files as batches of positions: bitboards, FEN, SAN, UCI, check and outcome flags, headers.

:func:`read_pgn` splits a PGN source into games (python-chess's rules: a game ends at a blank
line outside a comment), parses their mainlines with a compiled parser and yields
:class:`GameBatch` es of whole games, one row per position (ply 0 is the start position).
The moves are validated once, by the parser; nothing replays them in Python.  FEN, SAN and
UCI strings, the bitboards the evaluation kernels read and the in-check flags come from one
compiled pass (:func:`nnue_infer.kernels.chess.notation.describe_games`), written exactly as
python-chess writes them.

Parsers (``parser=``):

* ``"rust"``: ``rust-pgn-reader-python-binding`` (PyPI; Rust, on the ``shakmaty`` move
  generator), installed by the ``pgn`` extra.  About 3 million positions per second per core
  here, parsing only (``benchmarks/bench_pgn.py`` measures the whole path against python-chess's).
* ``"python-chess"``: python-chess's ``chess.pgn.read_game`` replaying every game (the
  reference, and the fallback when the Rust parser is not installed).
* ``"auto"`` (default): the Rust parser when installed, else python-chess.

Chess960 games (a ``Variant`` header) always go through python-chess (X-FEN castling); other
variants are errors.  Games whose ``[FEN]`` the Rust parser refuses (e.g. a side without a king)
are read again by python-chess, so that the evaluator names the problem of their positions.  Games the parser rejects keep the positions before the first bad move
and produce a :class:`PgnProblem` naming the source, the game number and its first line.
Null moves (``--``) are an error with the Rust parser (python-chess plays them).  Both parsers give the
same rows and errors for the same text: variations are skipped unread (an illegal move inside one is no
error: the rows are the mainline's), and a game holding a NUL byte (binary data; the first 8 KiB of a
file are checked before any game) is read up to it, with an error.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..kernels.chess import notation as KN

#: Game headers kept as columns (the Seven Tag Roster less Date and Round, which few users
#: read per position, plus the usual extras).  Missing headers are empty strings.
HEADERS = ("Event", "Site", "Date", "Round", "White", "Black", "Result")
#: Games per batch of :func:`read_pgn` (about 80 positions each in real games).
GAMES_PER_BATCH = 2000
PARSERS = ("auto", "rust", "python-chess")


class PgnProblem(NamedTuple):
    """A problem with one game: its source, 1-based game number, first line, the message, the
    game's tags (``{}`` if none could be read) and the ply it is at: the position's, or the one the
    failed move would have reached (0: the game's start, its ``[FEN]`` or ``[Variant]``).

    Its text is the one form of every PGN problem, ``FILE:LINE: game N, ply P: message`` (the
    command line's, whose rows do not carry the line: ``FILE: game N, ply P: message``)."""

    source: str
    game: int
    line: int
    message: str
    headers: dict = {}
    ply: int = 0

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: game {self.game}, ply {self.ply}: {self.message}"


def _at_ply(message: str, ply: int) -> str:
    """``message`` without the parser's own `` at ply P`` (the Rust parser's "illegal move at ply 3: Ke3"): the
    ply is named once, where every PGN problem names it (:class:`PgnProblem`)."""
    return message.replace(f" at ply {ply}:", ":", 1)


@dataclass
class GameBatch:
    """Every position of consecutive games of one PGN source (``n`` rows, games in file order).

    Attributes
    ----------
    source : str
        The source as named in messages.
    game : int64[n]
        1-based game number in the source.
    line : int64[n]
        Line of the source where the position's game starts (its first header).
    ply : int32[n]
        Plies played from the game's start position (0 = the start position).
    bitboards : int64[n, 8]
        Pawns, knights, bishops, rooks, queens, kings, white, black (a1 = bit 0).
    stm : int64[n]
        Side to move, 0 White, 1 Black.
    in_check : bool[n]
        The side to move is in check (Stockfish's ``eval`` prints no NNUE value then).
    checkmate, stalemate : bool[n]
        The position is checkmate / stalemate (only a game's last position can be).
    fen, san, uci : list of str
        python-chess's ``Board.fen()``; the SAN and UCI of the move that led to the
        position (empty at ply 0).
    headers : dict of str to object ndarray[n]
        The game's :data:`HEADERS`, per position.
    errors : list of PgnProblem
        Games of this batch the parser rejected (their positions before the problem are rows).
    """

    source: str
    game: np.ndarray
    line: np.ndarray
    ply: np.ndarray
    bitboards: np.ndarray
    stm: np.ndarray
    in_check: np.ndarray
    checkmate: np.ndarray
    stalemate: np.ndarray
    fen: list[str]
    san: list[str]
    uci: list[str]
    headers: dict[str, np.ndarray]
    errors: list[PgnProblem]

    def __len__(self) -> int:
        return len(self.fen)

    def take(self, rows: np.ndarray) -> GameBatch:
        """The batch restricted to ``rows`` (int indices or a bool mask), errors kept."""
        idx = np.flatnonzero(rows) if rows.dtype == bool else rows
        pick = idx.tolist()
        return GameBatch(self.source, self.game[idx], self.line[idx], self.ply[idx], self.bitboards[idx],
                         self.stm[idx], self.in_check[idx], self.checkmate[idx], self.stalemate[idx],
                         [self.fen[i] for i in pick], [self.san[i] for i in pick], [self.uci[i] for i in pick],
                         {k: v[idx] for k, v in self.headers.items()}, self.errors)


def rust_parser_available() -> bool:
    """Whether ``rust-pgn-reader-python-binding`` (the ``pgn`` extra) is installed."""
    try:
        import rust_pgn_reader_python_binding  # noqa: F401
    except ImportError:
        return False
    return True


def split_games(lines: Iterable[str], first_line: int = 1) -> Iterator[tuple[int, str]]:
    """Split PGN text (an iterable of lines with their ends) into ``(first line, game text)``.

    The boundaries of python-chess's ``read_game``: lines starting with ``%`` or ``;`` before a
    game are skipped, tag lines (``[``) may be separated by one blank line, and the movetext
    ends at a blank line that is not inside a ``{...}`` comment (or at the end of the text).
    """
    game: list[str] = []
    start = 0
    in_headers = False
    blank_run = 0
    in_comment = False
    number = first_line - 1
    for line in lines:
        number += 1
        if number == first_line:
            line = line.lstrip("\ufeff")
        if not game:
            if not line.strip() or line[0] in "%;":
                continue
            game.append(line)
            start = number
            in_headers = line[0] == "["
            blank_run = 0
            in_comment = False
            if not in_headers:
                in_comment = _ends_in_comment(line, False)
            continue
        if in_headers:
            if not line.strip():
                blank_run += 1
                if blank_run > 1:
                    in_headers = False  # two blank lines: a game of headers only
                    yield start, "".join(game)
                    game = []
                continue
            if line[0] in "%;":
                continue
            blank_run = 0
            game.append(line)
            if line[0] != "[":
                in_headers = False
                in_comment = _ends_in_comment(line, False)
            continue
        if not in_comment and (not line.strip()):
            yield start, "".join(game)
            game = []
            continue
        if not in_comment and line[0] == "%":
            continue
        game.append(line)
        in_comment = _ends_in_comment(line, in_comment)
    if game:
        yield start, "".join(game)


class Unsplittable(ValueError):
    """A PGN file :func:`game_starts` cannot cut by byte offsets (read it as one stream)."""


def game_starts(path: str | os.PathLike[str], max_line: int = 1 << 24) -> Iterator[tuple[int, int, int]]:
    """``(byte offset, line, game)`` of the games of an uncompressed PGN file where a range may start:
    reading from that offset (with :func:`read_pgn_lines`, ``first_line=line, first_game=game``) gives
    the same games, numbers and lines as reading the whole file from its start.

    One pass over the file, through :func:`split_games` itself (so the boundaries and numbers are
    exactly the reader's), each line decoded as the text stream of :func:`nnue_infer.inputs.open_input`
    decodes it (UTF-8 after an optional BOM, undecodable bytes replaced, ``\\r\\n`` read as ``\\n``).
    A game whose first line starts with a BOM (U+FEFF) is no start (:func:`split_games` strips it
    from a stream's first line only).

    Raises
    ------
    Unsplittable
        A carriage return that does not end its line (universal newlines would read more lines than
        the bytes' ``\\n``), or a line longer than ``max_line`` bytes.
    """
    from collections import deque

    pending: deque[tuple[int, int]] = deque()  # (line, byte offset) of the lines read since the last game's start

    def lines() -> Iterator[str]:
        offset, number = 0, 0
        with open(path, "rb") as f:
            while raw := f.readline(max_line + 1):
                number += 1
                if len(raw) > max_line:
                    raise Unsplittable(f"{os.fspath(path)}: line {number} is longer than {max_line} bytes")
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8", "replace")
                if "\r" in text:
                    if text.find("\r") != len(text) - 2 or text[-1] != "\n":
                        raise Unsplittable(f"{os.fspath(path)}: line {number} holds a carriage return inside it")
                    text = text[:-2] + "\n"
                pending.append((number, offset))
                offset += len(raw)
                yield text

    for game, (line, text) in enumerate(split_games(lines()), 1):
        while pending[0][0] < line:
            pending.popleft()
        if not text.startswith("\ufeff"):
            yield pending[0][1], line, game


def _ends_in_comment(line: str, in_comment: bool) -> bool:
    """Whether a movetext line leaves an open ``{`` comment (``;`` comments end with the line)."""
    if "{" not in line and "}" not in line:
        return in_comment
    i = 0
    n = len(line)
    while i < n:
        if in_comment:
            j = line.find("}", i)
            if j < 0:
                return True
            in_comment = False
            i = j + 1
            continue
        j = line.find("{", i)
        k = line.find(";", i)
        if j < 0 or (0 <= k < j):
            return False
        in_comment = True
        i = j + 1
    return in_comment


def _counters(fen: str | None) -> tuple[int, int]:
    """Half-move clock and full-move number of a ``[FEN]`` header (python-chess's defaults 0 and 1)."""
    if not fen:
        return 0, 1
    fields = fen.split()
    try:
        halfmove = int(fields[4]) if len(fields) > 4 else 0
        fullmove = int(fields[5]) if len(fields) > 5 else 1
    except ValueError:
        return 0, 1
    return max(halfmove, 0), max(fullmove, 1)


def _strings(buf: np.ndarray, offsets: np.ndarray) -> list[str]:
    """The strings of a column written by the notation kernel (newline-separated: one decode, one split)."""
    n = offsets.shape[0] - 1
    return buf[:int(offsets[-1])].tobytes().decode("ascii").split("\n")[:n] if n else []


def _describe(source: str, numbers: list[int], lines: list[int], boards: np.ndarray, turn: np.ndarray,
              castling: np.ndarray, ep: np.ndarray, move_from: np.ndarray, move_to: np.ndarray,
              move_promo: np.ndarray, game_offsets: np.ndarray, counters: list[tuple[int, int]],
              mate: np.ndarray, stalemate: np.ndarray, headers: list[dict[str, str]],
              errors: list[PgnProblem]) -> GameBatch:
    """Run the notation kernel over parsed games (arrays as for :func:`~nnue_infer.kernels.chess.notation.describe_games`)."""
    n = boards.shape[0]
    bitboards = np.empty((n, 8), np.int64)
    stm = np.empty(n, np.int64)
    in_check = np.empty(n, np.bool_)
    fen_buf = np.empty(max(n, 1) * KN.FEN_WIDTH, np.uint8)
    san_buf = np.empty(max(n, 1) * KN.SAN_WIDTH, np.uint8)
    uci_buf = np.empty(max(n, 1) * KN.UCI_WIDTH, np.uint8)
    fen_off = np.empty(n + 1, np.int32)
    san_off = np.empty(n + 1, np.int32)
    uci_off = np.empty(n + 1, np.int32)
    counts = np.diff(game_offsets)
    c = np.array(counters, np.int64).reshape(-1, 2)
    KN.describe_games(boards, turn, castling, ep, move_from, move_to, move_promo, game_offsets,
                      np.ascontiguousarray(c[:, 0]), np.ascontiguousarray(c[:, 1]), mate, bitboards, stm, in_check,
                      fen_buf, fen_off, san_buf, san_off, uci_buf, uci_off)
    game_of_row = np.repeat(np.arange(len(numbers)), counts)
    last = np.zeros(n, np.bool_)
    ends = game_offsets[1:][counts > 0] - 1
    last[ends] = True
    ply = (np.arange(n) - np.repeat(game_offsets[:-1], counts)).astype(np.int32)
    header_cols = {}
    for name in HEADERS:
        values = np.array([h.get(name, "") for h in headers] or [""], object)
        header_cols[name] = values[game_of_row]
    return GameBatch(source, np.asarray(numbers, np.int64)[game_of_row], np.asarray(lines, np.int64)[game_of_row],
                     ply, bitboards, stm, in_check, last & np.repeat(mate, counts), last & np.repeat(stalemate, counts),
                     _strings(fen_buf, fen_off), _strings(san_buf, san_off), _strings(uci_buf, uci_off), header_cols,
                     errors)


def _parse_rust(source: str, games: list[tuple[int, int, str]], threads: int | None) -> GameBatch:
    """Parse ``(number, line, text)`` standard-chess games with the Rust parser into a batch."""
    import rust_pgn_reader_python_binding as R

    parsed = R.parse_games_from_strings([g[2] for g in games], num_threads=threads)
    chunks = parsed.chunks
    cat = (lambda name: np.concatenate([getattr(c, name) for c in chunks]) if len(chunks) != 1
           else getattr(chunks[0], name))
    boards = np.ascontiguousarray(cat("boards")).reshape(-1, 64)
    move_offsets = _offsets([c.move_offsets for c in chunks])
    position_offsets = _offsets([c.position_offsets for c in chunks])
    headers = [h for c in chunks for h in c.headers]
    parse_errors = [e for c in chunks for e in c.parse_errors]
    counts = np.diff(position_offsets)
    # the move leading to each position (ply >= 1): game j's move (ply - 1)
    ply = np.arange(boards.shape[0]) - np.repeat(position_offsets[:-1], counts)
    move_index = np.repeat(move_offsets[:-1], counts) + ply - 1
    move_index[ply == 0] = 0
    n_moves = int(move_offsets[-1])
    frm, to, promo = (cat("from_squares"), cat("to_squares"), cat("promotions")) if n_moves else (
        np.zeros(1, np.uint8), np.zeros(1, np.uint8), np.full(1, -1, np.int8))
    errors = [PgnProblem(source, number, line, _at_ply(message, ply), h, ply)
              for (number, line, _), message, h, ply in zip(games, parse_errors, headers, counts.tolist()) if message]
    return _describe(source, [g[0] for g in games], [g[1] for g in games], boards, cat("turn"),
                     np.ascontiguousarray(cat("castling")), cat("en_passant"), frm[move_index].astype(np.int16),
                     to[move_index].astype(np.int16), promo[move_index].astype(np.int16), position_offsets,
                     [_counters(h.get("FEN")) for h in headers], cat("is_checkmate"), cat("is_stalemate"),
                     headers, errors)


def _offsets(parts: list[np.ndarray]) -> np.ndarray:
    """Concatenate per-chunk offset arrays (each starting at 0) into one int64[g + 1]."""
    out = [np.zeros(1, np.int64)]
    base = 0
    for p in parts:
        p = p.astype(np.int64)
        out.append(p[1:] + base)
        base += int(p[-1])
    return np.concatenate(out)


def _parse_python_chess(source: str, games: list[tuple[int, int, str]]) -> GameBatch:
    """Parse games with python-chess's ``read_game`` (reference path; Chess960)."""
    import logging

    import chess
    import chess.pgn

    logging.getLogger("chess.pgn").addHandler(logging.NullHandler())
    logging.getLogger("chess.pgn").propagate = False
    rows: dict[str, list] = {k: [] for k in ("game", "line", "ply", "bb", "stm", "check", "mate", "stale", "fen",
                                             "san", "uci")}
    headers: dict[str, list[str]] = {k: [] for k in HEADERS}
    errors: list[PgnProblem] = []
    for number, line, text in games:
        try:
            game = chess.pgn.read_game(io.StringIO(text), Visitor=_mainline_builder())
        except Exception as exc:  # read_game records problems in game.errors: what it raises is its own
            # failure on this game's text (IndexError on an illegal move followed by ")" and a move)
            errors.append(PgnProblem(source, number, line, f"python-chess cannot read this game "
                                                           f"({type(exc).__name__}: {exc})", _tags(text)))
            continue
        if game is None:
            continue
        tags = _tags(text)
        try:
            board = game.board()
        except ValueError:
            if game.errors:
                errors.append(PgnProblem(source, number, line, str(game.errors[0]), tags))
            continue
        if board.uci_variant != "chess":
            errors.append(PgnProblem(source, number, line, f"variant {board.uci_variant!r} is not supported "
                                                           "(standard chess and Chess960 only)", tags))
            continue
        sans, ucis = [""], [""]
        boards = [board.copy(stack=False)]
        for move in game.mainline_moves():
            if not move:  # as the Rust parser: a null move ('--') ends the game with an error
                errors.append(PgnProblem(source, number, line, "null move: -- (a null move is not a chess move; in "
                                         "check it would leave the king in check)", tags, len(boards)))
                break
            sans.append(board.san(move))
            ucis.append(move.uci())
            board.push(move)
            boards.append(board.copy(stack=False))
        else:
            if game.errors:  # (the mainline stops at the move it could not read)
                errors.append(PgnProblem(source, number, line, str(game.errors[0]), tags, len(boards)))
        for ply, b in enumerate(boards):
            oc = b.occupied_co
            rows["bb"].append([b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings, oc[1], oc[0]])
            rows["stm"].append(0 if b.turn else 1)
            rows["check"].append(b.is_check())
            last = ply == len(boards) - 1
            rows["mate"].append(last and b.is_checkmate())
            rows["stale"].append(last and b.is_stalemate())
            rows["fen"].append(b.fen())
        n = len(boards)
        rows["game"] += [number] * n
        rows["line"] += [line] * n
        rows["ply"] += list(range(n))
        rows["san"] += sans
        rows["uci"] += ucis
        for k in HEADERS:
            headers[k] += [tags.get(k, "")] * n
    bb = np.array(rows["bb"], np.uint64).reshape(-1, 8).view(np.int64)
    return GameBatch(source, np.array(rows["game"], np.int64), np.array(rows["line"], np.int64),
                     np.array(rows["ply"], np.int32), bb, np.array(rows["stm"], np.int64),
                     np.array(rows["check"], np.bool_), np.array(rows["mate"], np.bool_),
                     np.array(rows["stale"], np.bool_), rows["fen"], rows["san"], rows["uci"],
                     {k: np.array(v, object) for k, v in headers.items()}, errors)


def _mainline_builder():
    """python-chess's ``GameBuilder`` skipping variations: the rows are the mainline's positions, and the Rust
    parser reads the mainline alone, so an illegal move inside a variation is no error with either parser (it
    ended the game at the variation with python-chess's own builder)."""
    import chess.pgn

    class MainlineBuilder(chess.pgn.GameBuilder):
        def begin_game(self):
            super().begin_game()
            self.failed = False

        def begin_variation(self):
            return chess.pgn.SKIP

        def end_variation(self):  # read_game calls it at the end of a skipped variation too: none was entered
            pass

        def handle_error(self, error):  # recorded in game.errors; the mainline ends there, as with the Rust parser
            super().handle_error(error)  # (read_game went on after a stray ')' and played the moves after it)
            self.failed = True

        def begin_parse_san(self, board, san):
            return chess.pgn.SKIP if self.failed else None

    return MainlineBuilder


def _tags(text: str) -> dict[str, str]:
    """The tag pairs written in a game's text (python-chess's ``Game.headers`` adds ``"?"`` for
    missing roster tags; here a missing tag stays missing)."""
    import chess.pgn

    tags = {}
    for line in text.splitlines():
        if line.startswith("["):
            m = chess.pgn.TAG_REGEX.match(line)
            if m:
                tags[m.group(1)] = m.group(2)
        elif line.strip() and not line.startswith(("%", ";")):
            break
    return tags


def parse_games(source: str, games: list[tuple[int, int, str]], parser: str = "auto",
                threads: int | None = None) -> list[GameBatch]:
    """Parse ``(game number, first line, text)`` games into batches, in order.

    Games with a ``Variant`` header go to python-chess (Chess960 castling; other variants are
    errors); the others to ``parser``.
    """
    if parser not in PARSERS:
        raise ValueError(f"parser must be one of {', '.join(PARSERS)}, got {parser!r}")
    games, binary = _cut_at_nul(games)
    return [_with_nul_errors(source, batch, binary) for batch in _parse(source, games, parser, threads)]


def _cut_at_nul(games: list[tuple[int, int, str]]) -> tuple[list[tuple[int, int, str]], dict[int, dict]]:
    """The games cut at their first NUL byte, and ``{game: tags}`` of those cut.  A NUL byte
    is binary data, not PGN text (:func:`nnue_infer.inputs.open_input` refuses one in the first 8 KiB): each
    parser read it its own way (the Rust one as a bad move, python-chess skipped it), so neither sees it."""
    binary: dict[int, dict] = {}
    out = []
    for number, line, text in games:
        at = text.find("\0")
        if at >= 0:
            binary[number] = _tags(text)
            text = text[:at]
        out.append((number, line, text))
    return out, binary


def _with_nul_errors(source: str, batch: GameBatch, binary: dict[int, dict]) -> GameBatch:
    """``batch`` with the error of each of its games cut at a NUL byte (:func:`_cut_at_nul`) that has no error of
    its own before it: the game's rows end there, the next ply is the one named."""
    if not binary:
        return batch
    failed = {e.game for e in batch.errors}
    games = batch.game.tolist()
    lines = dict(zip(games, batch.line.tolist()))
    added = []
    for number in sorted(set(games) & binary.keys() - failed):
        added.append(PgnProblem(batch.source, number, lines[number], "NUL byte in the game's text: binary data, "
                                "not PGN text (the game is read up to it)", binary[number], games.count(number)))
    if added:
        batch.errors = sorted(batch.errors + added, key=lambda e: e.game)
    return batch


def _parse(source: str, games: list[tuple[int, int, str]], parser: str, threads: int | None) -> list[GameBatch]:
    use_rust = parser == "rust" or (parser == "auto" and rust_parser_available())
    if not use_rust:
        return [_parse_python_chess(source, games)] if games else []
    batches, run = [], []
    for g in games:
        if "[Variant " in g[2]:
            if run:
                batches.append(_parse_rust(source, run, threads))
                run = []
            batches.append(_parse_python_chess(source, [g]))
        else:
            run.append(g)
    if run:
        batches.append(_parse_rust(source, run, threads))
    return [b for batch in batches for b in _reread_refused_setups(source, batch, games, threads)]


def _reread_refused_setups(source: str, batch: GameBatch, games: list[tuple[int, int, str]],
                           threads: int | None) -> list[GameBatch]:
    """``batch``, with the games whose ``[FEN]`` the Rust parser refused (e.g. a side without a king)
    read again by python-chess, which accepts any placement: their positions then get the
    evaluator's precise reason (:func:`evaluate_games`)."""
    refused = {e.game for e in batch.errors if e.message.startswith(("invalid FEN", "failed to parse FEN"))}
    if not refused:
        return [batch]
    numbers = sorted({int(g) for g in batch.game.tolist()} | {e.game for e in batch.errors})
    by_number = {g[0]: g for g in games}
    out, run = [], []
    for number in numbers:
        if number in refused:
            if run:
                out.append(_parse_rust(source, run, threads))
                run = []
            out.append(_parse_python_chess(source, [by_number[number]]))
        else:
            run.append(by_number[number])
    if run:
        out.append(_parse_rust(source, run, threads))
    return out


def read_pgn_lines(lines: Iterable[str], source: str, *, parser: str = "auto",
                   games_per_batch: int = GAMES_PER_BATCH, threads: int | None = None, first_line: int = 1,
                   first_game: int = 1) -> Iterator[GameBatch]:
    """:func:`read_pgn` over PGN text already open: ``lines`` (e.g. a text stream), named ``source`` in errors;
    ``first_line`` and ``first_game`` number its first line and game (a range of a larger source that
    starts at a game's first line, see :func:`game_starts`)."""
    pending: list[tuple[int, int, str]] = []
    for number, (line, text) in enumerate(split_games(lines, first_line), first_game):
        pending.append((number, line, text))
        if len(pending) >= games_per_batch:
            yield from parse_games(source, pending, parser, threads)
            pending = []
    if pending:
        yield from parse_games(source, pending, parser, threads)


def read_pgn(source: str | os.PathLike[str], *, parser: str = "auto", games_per_batch: int = GAMES_PER_BATCH,
             threads: int | None = None) -> Iterator[GameBatch]:
    """Every mainline position of every game of a PGN source, in batches of whole games.

    Parameters
    ----------
    source : str or os.PathLike
        A path (plain, gzip or Zstandard, detected from the content) or ``-`` for standard input.
    parser : str
        ``"auto"``, ``"rust"`` or ``"python-chess"`` (see the module docstring).
    games_per_batch : int
        Games per yielded batch (fewer at the end of the source).
    threads : int, optional
        Threads of the Rust parser (default: all cores).

    Yields
    ------
    GameBatch
        Positions of consecutive games, in source order; ``errors`` lists the games of the
        batch the parser rejected.

    Raises
    ------
    InputKindError
        The source's first bytes hold a NUL byte (binary data: :func:`nnue_infer.inputs.binary_problem`).
    """
    from ..inputs import input_label, open_input

    with open_input(source, binary_what="a PGN text file") as inp:  # (the NUL check of the first 8 KiB as read)
        yield from read_pgn_lines(inp.text, input_label(source), parser=parser, games_per_batch=games_per_batch,
                                  threads=threads)


def evaluate_games(evaluator, batch: GameBatch) -> tuple[GameBatch, np.ndarray, list[PgnProblem]]:
    """Evaluate every position of ``batch`` with an :class:`~nnue_infer.evaluator.Evaluator`, on all cores.

    Returns the batch without the positions the network cannot represent (e.g. a ``[FEN]``
    with 33 pieces), their values (int32, internal units, side to move's point of view,
    exactly :meth:`~nnue_infer.evaluator.Evaluator.evaluate` of each position), and one
    :class:`PgnProblem` per removed position naming its game and ply.
    """
    from ..batch import position_problem

    values, codes = evaluator.evaluate_bitboards(batch.bitboards, batch.stm)
    bad = np.flatnonzero(codes)
    if not bad.size:
        return batch, values, []
    errors = [PgnProblem(batch.source, int(batch.game[i]), int(batch.line[i]),
                         f"{position_problem(codes[i])}: {batch.fen[i]}", {}, int(batch.ply[i])) for i in bad.tolist()]
    keep = codes == 0
    return batch.take(keep), values[keep], errors

"""Matches between chess engines: game pairs from an opening book, adjudication, PGN, pentanomial Elo and SPRT.

A match plays game pairs: each opening twice, the engines swapping colours, so that an opening's bias cancels
and the pair's two results give the pentanomial counts fishtest's statistics use
(:mod:`nnue_infer.search.statistics`).  A player is

* a UCI engine run as a subprocess through python-chess's ``chess.engine`` (``PlayerSpec(uci=...)``: Debian's
  ``stockfish`` with ``UCI_LimitStrength``/``UCI_Elo``, or any other), or
* a network searched in process by :class:`nnue_infer.search.Engine` (``PlayerSpec(network=...)``: no UCI round
  trips).

Each player has its limits (:class:`Limits`: fixed nodes, depth, time per move or a clock that the runner keeps).
Pairs run one after another, on threads (``concurrency``: one game per core; UCI engines are processes of their
own) or as tasks on a Dask cluster; results stream back as each pair ends, and the PGN is written in pair order
(the same file for any concurrency when the games are deterministic, as fixed-node games are).

An engine that crashes, hangs or sends an illegal move loses that game, with the reason recorded in the PGN and
the result; the match goes on (a crashed engine is started again for the next game).  An SPRT stops the match once
decided.  Entry point: :func:`play_match` (``nnue-infer match`` on the command line).
"""

from __future__ import annotations

import asyncio
import datetime
import gzip
import io
import json
import math
import os
import random
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

import chess
import chess.pgn

from ..errors import NnueError
from .statistics import SPRT, logistic_elo, normalized_elo, pair_category

#: Seconds an engine may overstep its clock before it loses on time: the runner measures a move's wall time around
#: the engine's reply, which includes the pipe's and the operating system's delays (a loaded machine's scheduler).
TIME_TOLERANCE = 0.1
#: Seconds given to a UCI engine to start and answer ``uci``/``isready``.
START_TIMEOUT = 30.0
#: Seconds beyond a move's own time budget (movetime, or the clock left) after which a silent engine is declared
#: hung, killed and the game lost; fixed nodes or depth have no budget of their own and get :data:`HANG_TIMEOUT`.
HANG_GRACE = 10.0
HANG_TIMEOUT = 120.0
#: Centipawns a mate score counts as in adjudication.
MATE_CP = 100_000
#: PGN Termination tag values (the PGN standard's, section 9.8.1).
NORMAL, ADJUDICATION, TIME_FORFEIT, RULES_INFRACTION, ABANDONED = (
    "normal", "adjudication", "time forfeit", "rules infraction", "abandoned")


class MatchError(NnueError, ValueError):
    """A match cannot start: a bad engine command, engine option, opening book, limit or setting; the message
    names the engine, file and line, or option."""


# ----------------------------------------------------------------------------------------------- limits, players

@dataclass(frozen=True)
class TimeControl:
    """A clock: ``base`` seconds for the game plus ``increment`` seconds after each move.

    :meth:`parse` reads ``"10+0.1"`` or ``"10"`` (seconds, as fishtest and fastchess write them)."""

    base: float
    increment: float = 0.0

    @classmethod
    def parse(cls, text: str) -> "TimeControl":
        """``"BASE[+INCREMENT]"`` in seconds; ``MatchError`` for anything else."""
        s = str(text).strip()
        base_text, _, inc_text = s.partition("+")
        try:
            base = float(base_text)
            inc = float(inc_text) if inc_text else 0.0
        except ValueError:
            raise MatchError(f"time control {text!r}: expected BASE+INCREMENT in seconds, e.g. 10+0.1") from None
        if not (math.isfinite(base) and math.isfinite(inc)) or base <= 0 or inc < 0:
            raise MatchError(f"time control {text!r}: the base must be > 0 s and the increment >= 0 s")
        return cls(base, inc)

    def __str__(self) -> str:
        return f"{self.base:g}+{self.increment:g}"


@dataclass(frozen=True)
class Limits:
    """How long a player searches each move: exactly one of ``nodes``, ``depth``, ``movetime`` (seconds) or ``tc``
    (a :class:`TimeControl`, the runner keeping both clocks).  ``MatchError`` for none, several or a value <= 0."""

    nodes: int | None = None
    depth: int | None = None
    movetime: float | None = None
    tc: TimeControl | None = None

    def __post_init__(self) -> None:
        given = [n for n in ("nodes", "depth", "movetime", "tc") if getattr(self, n) is not None]
        if len(given) != 1:
            raise MatchError("give exactly one limit per engine: nodes, depth, movetime or a time control "
                             f"(got {', '.join(given) or 'none'})")
        for name in ("nodes", "depth"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                raise MatchError(f"{name} must be a whole number > 0 (got {v!r})")
        if self.movetime is not None and not (math.isfinite(self.movetime) and self.movetime > 0):
            raise MatchError(f"movetime must be > 0 seconds (got {self.movetime!r})")

    def __str__(self) -> str:
        if self.nodes is not None:
            return f"nodes={self.nodes}"
        if self.depth is not None:
            return f"depth={self.depth}"
        if self.movetime is not None:
            return f"movetime={self.movetime * 1000:g}ms"
        return f"tc={self.tc}"


@dataclass(frozen=True)
class PlayerSpec:
    """One engine of a match: a UCI command or a network searched in process (exactly one), its limits and options.

    Parameters
    ----------
    limits : Limits
        Its search limits.
    uci : str or tuple of str, optional
        The engine's command line (a string is split as a shell would, without running a shell).
    network : str, optional
        A network spec as ``--net`` takes (``default``, ``stockfish``, a file), searched by
        :class:`nnue_infer.search.Engine`.
    options : tuple of (str, str)
        UCI options (``UCI_LimitStrength``, ``UCI_Elo``, ``Hash``...) for a UCI engine; for a network only ``Hash``
        (MiB) is known.
    name : str, optional
        The name in the PGN and the result; default: the command's or network's name with its options.
    """

    limits: Limits
    uci: tuple[str, ...] | None = None
    network: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    name: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.uci, str):
            object.__setattr__(self, "uci", tuple(shlex.split(self.uci)))
        elif self.uci is not None:
            object.__setattr__(self, "uci", tuple(str(a) for a in self.uci))
        if (self.uci is None) == (self.network is None):
            raise MatchError("a player is either a UCI command or a network, not both or neither")
        if self.uci is not None and not self.uci:
            raise MatchError("empty UCI engine command")
        object.__setattr__(self, "options", tuple((str(k), str(v)) for k, v in (
            self.options.items() if isinstance(self.options, dict) else self.options)))
        if self.network is not None:
            bad = [k for k, _ in self.options if k.lower() != "hash"]
            if bad:
                raise MatchError(f"network player {self.network}: unknown option(s) {', '.join(bad)} (only Hash)")
        if self.name is None:
            base = os.path.basename(self.uci[0]) if self.uci else os.path.basename(str(self.network))
            extra = " ".join(f"{k}={v}" for k, v in self.options)
            object.__setattr__(self, "name", f"{base} {extra}".strip())

    @property
    def label(self) -> str:
        """The player's name (never ``None`` after construction)."""
        return str(self.name)


@dataclass(frozen=True)
class MoveReport:
    """A player's answer: its move (``None`` when it failed) with its score (side to move's view: centipawns, or
    ``mate`` in moves) and depth; ``error`` and ``termination`` say why it failed."""

    move: chess.Move | None
    score_cp: int | None = None
    mate: int | None = None
    depth: int | None = None
    error: str | None = None
    termination: str | None = None


def _clock_limits(board: chess.Board, clocks: Sequence[float] | None, tc: TimeControl | None):
    if clocks is None or tc is None:
        return None
    return {"wtime": max(clocks[chess.WHITE], 0.001), "btime": max(clocks[chess.BLACK], 0.001),
            "winc": tc.increment, "binc": tc.increment}


class UciPlayer:
    """A UCI engine driven by python-chess (one subprocess, kept across games; ``ucinewgame`` between them)."""

    def __init__(self, spec: PlayerSpec):
        import chess.engine

        self.spec = spec
        self._game = object()
        try:
            self.engine = chess.engine.SimpleEngine.popen_uci(list(spec.uci), timeout=START_TIMEOUT)
        except FileNotFoundError:
            raise MatchError(f"UCI engine {shlex.join(spec.uci)!r}: command not found") from None
        except PermissionError:
            raise MatchError(f"UCI engine {shlex.join(spec.uci)!r}: not executable") from None
        except (chess.engine.EngineError, asyncio.TimeoutError, TimeoutError, OSError) as exc:
            raise MatchError(f"UCI engine {shlex.join(spec.uci)!r}: did not start as a UCI engine "
                             f"({type(exc).__name__}: {exc or 'no uciok within the time-out'})") from None
        try:
            known = {name.lower(): name for name in self.engine.options}
            config = {}
            for k, v in spec.options:
                if k.lower() not in known:
                    raise MatchError(f"UCI engine {shlex.join(spec.uci)!r} has no option {k!r} (it has: "
                                     f"{', '.join(sorted(self.engine.options))})")
                config[known[k.lower()]] = v
            self.engine.configure(config)
        except MatchError:
            self.close()
            raise
        except Exception as exc:  # a value the engine or python-chess refuses
            self.close()
            raise MatchError(f"UCI engine {shlex.join(spec.uci)!r}: bad option value ({exc})") from None

    def new_game(self) -> None:
        """The next move starts a new game (python-chess sends ``ucinewgame`` when the game key changes)."""
        self._game = object()

    def play(self, board: chess.Board, clocks: Sequence[float] | None) -> MoveReport:
        import chess.engine

        lim = self.spec.limits
        timed = _clock_limits(board, clocks, lim.tc)
        if timed is not None:
            limit = chess.engine.Limit(white_clock=timed["wtime"], black_clock=timed["btime"],
                                       white_inc=timed["winc"], black_inc=timed["binc"])
            budget = (timed["wtime"] if board.turn == chess.WHITE else timed["btime"]) + HANG_GRACE
        elif lim.movetime is not None:
            limit, budget = chess.engine.Limit(time=lim.movetime), lim.movetime + HANG_GRACE
        else:
            limit, budget = chess.engine.Limit(nodes=lim.nodes, depth=lim.depth), HANG_TIMEOUT
        protocol = self.engine.protocol
        try:
            future = asyncio.run_coroutine_threadsafe(
                asyncio.wait_for(protocol.play(board, limit, info=chess.engine.INFO_BASIC | chess.engine.INFO_SCORE,
                                               game=self._game), budget), protocol.loop)
            result = future.result()
        except (asyncio.TimeoutError, TimeoutError):
            self.kill()
            return MoveReport(None, error=f"{self.spec.label} sent no move within {budget:g} s (hung; killed)",
                              termination=ABANDONED)
        except chess.engine.EngineTerminatedError as exc:
            self.kill()
            return MoveReport(None, error=f"{self.spec.label} crashed ({exc})", termination=ABANDONED)
        except chess.engine.EngineError as exc:
            return MoveReport(None, error=f"{self.spec.label} sent an illegal move ({exc})",
                              termination=RULES_INFRACTION)
        if result.move is None:
            return MoveReport(None, error=f"{self.spec.label} sent no move (bestmove (none)) with legal moves left",
                              termination=RULES_INFRACTION)
        pov = result.info.get("score")
        cp = mate = None
        if pov is not None:
            score = pov.pov(board.turn)
            mate = score.mate()
            cp = score.score()
        return MoveReport(result.move, cp, mate, result.info.get("depth"))

    def kill(self) -> None:
        """End the subprocess at once (a crashed or hung engine); the player is dead afterwards."""
        self.dead = True
        try:
            self.engine.transport.kill()
        except Exception:  # already gone
            pass
        self.close()

    def close(self) -> None:
        try:
            self.engine.close()
        except Exception:  # a dead engine's quit fails; nothing to keep
            pass


class NetworkPlayer:
    """A network searched in process by :class:`nnue_infer.search.Engine`."""

    def __init__(self, spec: PlayerSpec):
        from . import Engine

        hash_mb = 16
        for k, v in spec.options:
            try:
                hash_mb = int(v)
            except ValueError:
                raise MatchError(f"network player {spec.network}: Hash must be a whole number of MiB, not {v!r}") \
                    from None
        self.spec = spec
        try:
            self.engine = Engine(spec.network, hash_mb=hash_mb)
        except (OSError, ValueError) as exc:
            raise MatchError(f"network {spec.network!r}: {exc}") from None

    def new_game(self) -> None:
        self.engine.new_game()

    def play(self, board: chess.Board, clocks: Sequence[float] | None) -> MoveReport:
        lim = self.spec.limits
        kwargs: dict = {"nodes": lim.nodes, "depth": lim.depth, "movetime": lim.movetime}
        timed = _clock_limits(board, clocks, lim.tc)
        if timed is not None:
            kwargs.update(timed)
        try:
            res = self.engine.search(board, **kwargs)
        except Exception as exc:  # the in-process engine failed: that game is lost, the match goes on
            return MoveReport(None, error=f"{self.spec.label} failed ({type(exc).__name__}: {exc})",
                              termination=ABANDONED)
        if res.move is None or res.move not in board.legal_moves:
            return MoveReport(None, error=f"{self.spec.label} returned {res.move} (not a legal move)",
                              termination=RULES_INFRACTION)
        return MoveReport(res.move, res.score_cp, res.mate, res.depth)

    def close(self) -> None:
        pass


#: Players open in this process, by thread and spec (engines are started once per thread, not per game).
_local = threading.local()
_all_players: list = []
_players_lock = threading.Lock()


def _player(spec: PlayerSpec):
    cache = getattr(_local, "players", None)
    if cache is None:
        cache = _local.players = {}
    p = cache.get(spec)
    if p is None or getattr(p, "dead", False):
        p = cache[spec] = UciPlayer(spec) if spec.uci is not None else NetworkPlayer(spec)
        with _players_lock:
            _all_players.append(p)
    return p


def close_players() -> int:
    """Close every player this process opened (UCI engines quit); returns how many.  Run on the workers of a Dask
    cluster after a match (``client.run(close_players)``)."""
    with _players_lock:
        players = list(_all_players)
        _all_players.clear()
    for p in players:
        p.close()
    cache = getattr(_local, "players", None)
    if cache is not None:
        cache.clear()
    _local.__dict__.pop("players", None)
    return len(players)


class _Unstartable:
    """A player whose engine could not be started again during a match (after a crash): it forfeits its games."""

    def __init__(self, spec: PlayerSpec, error: str):
        self.spec, self.error, self.dead = spec, error, True

    def new_game(self) -> None:
        pass

    def play(self, board: chess.Board, clocks) -> MoveReport:
        return MoveReport(None, error=f"{self.spec.label} could not be started ({self.error})", termination=ABANDONED)

    def close(self) -> None:
        pass


def _player_or_forfeit(spec: PlayerSpec):
    try:
        return _player(spec)
    except MatchError as exc:
        return _Unstartable(spec, str(exc))


def check_players(specs: Sequence[PlayerSpec]) -> None:
    """Start each UCI engine of ``specs`` once (the ``uci`` handshake, its options) and quit it, and load each
    network: a bad command, not a UCI engine, a bad option or a missing or malformed network raises before any
    game (:class:`MatchError`, or the network loader's :class:`~nnue_infer.errors.NnueError`)."""
    from ..resources import network_from_spec

    for spec in specs:
        if spec.uci is not None:
            UciPlayer(spec).close()
        else:
            network_from_spec(spec.network)


# -------------------------------------------------------------------------------------------------- openings

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
    from ..evaluator import evaluate_cp

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


# ------------------------------------------------------------------------------------------------ adjudication

@dataclass(frozen=True)
class Adjudication:
    """When the runner ends a game before its natural end (each rule off when its count is 0 or None).

    Parameters
    ----------
    resign_moves, resign_score : int
        A side loses when, for ``resign_moves`` consecutive moves of each engine, its engine reported a score of
        ``-resign_score`` cp or worse and its opponent's ``+resign_score`` or better (both engines' reports).
    draw_moves, draw_score, draw_after : int
        A draw when, from move number ``draw_after`` on, both engines reported ``|score| <= draw_score`` cp for
        ``draw_moves`` consecutive moves each.
    max_moves : int
        A draw once the game (book moves included) reaches ``max_moves`` moves (of each side).
    """

    resign_moves: int = 0
    resign_score: int = 1000
    draw_moves: int = 0
    draw_score: int = 10
    draw_after: int = 40
    max_moves: int | None = None

    def __post_init__(self) -> None:
        for name in ("resign_moves", "resign_score", "draw_moves", "draw_score", "draw_after"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 0:
                raise MatchError(f"adjudication {name} must be a whole number >= 0 (got {v!r})")
        if self.max_moves is not None and (not isinstance(self.max_moves, int) or self.max_moves <= 0):
            raise MatchError(f"adjudication max_moves must be > 0 (got {self.max_moves!r})")


def game_end(board: chess.Board) -> tuple[str, str] | None:
    """``(result, reason)`` when the game is over by its rules: checkmate, stalemate, insufficient material,
    threefold repetition or the fifty-move rule (both claimed at once, as a match runner does); else ``None``."""
    if board.is_checkmate():
        return ("0-1" if board.turn == chess.WHITE else "1-0"), "checkmate"
    if board.is_stalemate():
        return "1/2-1/2", "stalemate"
    if board.is_insufficient_material():
        return "1/2-1/2", "insufficient material"
    if board.is_repetition(3):
        return "1/2-1/2", "threefold repetition"
    if board.is_fifty_moves():
        return "1/2-1/2", "fifty-move rule"
    return None


def _cp(score_cp: int | None, mate: int | None) -> int | None:
    if mate is not None:
        return MATE_CP if mate > 0 else -MATE_CP
    return score_cp


def adjudicate(board: chess.Board, scores: Sequence[tuple[chess.Color, int | None]],
               rules: Adjudication) -> tuple[str, str] | None:
    """``(result, reason)`` when ``rules`` end the game in ``board`` (after its last move), else ``None``.

    ``scores``: every engine move's report so far, in order, as ``(colour of the mover, centipawns from the mover's
    view)`` (mate scores as +-:data:`MATE_CP`; ``None`` for no score, which breaks every streak)."""
    if rules.resign_moves:
        n = rules.resign_moves
        recent = scores[-2 * n:]
        if len(recent) == 2 * n and all(s is not None for _, s in recent):
            for loser in (chess.WHITE, chess.BLACK):
                own = [s for c, s in recent if c == loser]
                other = [s for c, s in recent if c != loser]
                if len(own) == n and all(s <= -rules.resign_score for s in own) and \
                        all(s >= rules.resign_score for s in other):
                    side = "White" if loser == chess.WHITE else "Black"
                    return ("0-1" if loser == chess.WHITE else "1-0"), \
                        f"{side} resigns (both engines scored it {rules.resign_score} cp or more behind for {n} moves)"
    if rules.draw_moves and board.fullmove_number >= rules.draw_after:
        n = rules.draw_moves
        recent = scores[-2 * n:]
        if len(recent) == 2 * n and all(s is not None and abs(s) <= rules.draw_score for _, s in recent):
            return "1/2-1/2", f"draw adjudicated (|score| <= {rules.draw_score} cp for {n} moves by both engines)"
    if rules.max_moves and len(board.move_stack) >= 2 * rules.max_moves:
        return "1/2-1/2", f"draw adjudicated (game reached {rules.max_moves} moves)"
    return None


# ----------------------------------------------------------------------------------------------------- games

@dataclass
class GameRecord:
    """One game: its pair, which player had White (0: the first), result, PGN termination, reason and the first
    player's points."""

    pair: int
    white: int
    result: str
    termination: str
    reason: str
    plies: int
    pgn: str = field(repr=False)

    @property
    def first_points(self) -> float:
        """The first player's points (1, 0.5 or 0)."""
        white_points = {"1-0": 1.0, "0-1": 0.0, "1/2-1/2": 0.5}[self.result]
        return white_points if self.white == 0 else 1.0 - white_points


@dataclass
class PairResult:
    """A game pair: the opening played twice, the first player White in ``games[0]`` and Black in ``games[1]``."""

    index: int
    opening: Opening
    games: list[GameRecord]

    @property
    def category(self) -> int:
        """Its pentanomial index 0-4 (LL..WW, the first player's view)."""
        return pair_category(self.games[0].first_points, self.games[1].first_points)


def _comment(report: MoveReport, seconds: float | None) -> str:
    if report.mate is not None:
        text = f"{'+' if report.mate > 0 else '-'}M{abs(report.mate)}"
    elif report.score_cp is not None:
        text = f"{report.score_cp / 100:+.2f}"
    else:
        text = "?"
    text += f"/{report.depth if report.depth is not None else 0}"
    if seconds is not None:
        text += f" {seconds:.3f}s"
    return text


def play_game(specs: Sequence[PlayerSpec], white: int, opening: Opening, *, adjudication: Adjudication = Adjudication(),
              pair: int = 0, event: str = "nnue-infer match", round_: str | None = None, date: str | None = None,
              players: Sequence | None = None, time_tolerance: float = TIME_TOLERANCE) -> GameRecord:
    """Play one game of ``specs[white]`` (White) against the other from ``opening``; a failing engine loses it.

    ``players``: open players for ``specs`` (default: this thread's, started on first use).  ``time_tolerance``:
    seconds a side may overstep its clock before it loses on time."""
    players = list(players) if players is not None else [_player_or_forfeit(s) for s in specs]
    by_colour = {chess.WHITE: white, chess.BLACK: 1 - white}
    board = opening.board()
    game = chess.pgn.Game()
    game.headers["Event"] = event
    game.headers["Site"] = "?"
    game.headers["Date"] = date or datetime.date.today().strftime("%Y.%m.%d")
    game.headers["Round"] = round_ or f"{pair + 1}.{white + 1}"
    game.headers["White"] = specs[white].label
    game.headers["Black"] = specs[1 - white].label
    root = chess.Board(opening.fen)
    if opening.fen != chess.STARTING_FEN:
        game.setup(root)
    node = game
    for i, m in enumerate(opening.moves):
        node = node.add_variation(chess.Move.from_uci(m))
        if i == 0:
            node.comment = "book"
    if opening.moves:
        node.comment = (node.comment + " " if node.comment else "") + "end of book"
    for idx in set(by_colour.values()):
        players[idx].new_game()
    tc = {c: specs[by_colour[c]].limits.tc for c in (chess.WHITE, chess.BLACK)}
    clocks = {c: (tc[c].base if tc[c] else 0.0) for c in (chess.WHITE, chess.BLACK)}
    scores: list[tuple[chess.Color, int | None]] = []
    result = reason = None
    termination = NORMAL
    while True:
        ended = game_end(board)
        if ended:
            result, reason = ended
            break
        mover = board.turn
        player = players[by_colour[mover]]
        timed = tc[mover] is not None
        start = time.monotonic()
        report = player.play(board, clocks if timed else None)
        elapsed = time.monotonic() - start
        side = "White" if mover == chess.WHITE else "Black"
        if report.move is None:
            result = "0-1" if mover == chess.WHITE else "1-0"
            reason, termination = f"{side} forfeits: {report.error}", report.termination or RULES_INFRACTION
            break
        if report.move not in board.legal_moves:  # (python-chess checks UCI moves; kept for any player)
            result = "0-1" if mover == chess.WHITE else "1-0"
            reason, termination = f"{side} forfeits: illegal move {report.move.uci()}", RULES_INFRACTION
            break
        if timed:
            clocks[mover] -= elapsed
            if clocks[mover] < -time_tolerance:
                termination = TIME_FORFEIT
                if board.has_insufficient_material(not mover):
                    result = "1/2-1/2"
                    reason = f"{side} lost on time but the opponent cannot mate"
                else:
                    result = "0-1" if mover == chess.WHITE else "1-0"
                    reason = f"{side} loses on time ({-clocks[mover]:.3f} s over, tolerance {time_tolerance:g} s)"
                break
            clocks[mover] += tc[mover].increment
        node = node.add_variation(report.move, comment=_comment(report, elapsed if timed else None))
        board.push(report.move)
        scores.append((mover, _cp(report.score_cp, report.mate)))
        adjudged = adjudicate(board, scores, adjudication)
        if adjudged and not game_end(board):
            (result, reason), termination = adjudged, ADJUDICATION
            break
    game.headers["Result"] = result
    game.headers["Termination"] = termination
    if opening.fen != chess.STARTING_FEN or opening.moves:
        game.headers["Opening"] = opening.source or "book"
    node.comment = (node.comment + " " if node.comment else "") + reason
    if node is game:
        game.comment = reason
    exporter = chess.pgn.StringExporter(headers=True, variations=False, comments=True)
    return GameRecord(pair, white, result, termination, reason, len(board.move_stack) - len(opening.moves),
                      game.accept(exporter))


def play_pair(specs: Sequence[PlayerSpec], opening: Opening, index: int, adjudication: Adjudication = Adjudication(),
              event: str = "nnue-infer match", date: str | None = None,
              time_tolerance: float = TIME_TOLERANCE) -> PairResult:
    """Play ``opening`` twice: the first player White, then Black.  Picklable arguments: runs on a thread, a
    process or a Dask worker (each keeps its engines open for the next pair)."""
    games = [play_game(specs, white, opening, adjudication=adjudication, pair=index, event=event, date=date,
                       time_tolerance=time_tolerance) for white in (0, 1)]
    return PairResult(index, opening, games)


# ----------------------------------------------------------------------------------------------------- result

@dataclass
class MatchResult:
    """A match's outcome, the first player's view.

    Attributes
    ----------
    players : list of str
        The two players' names, first first.
    games, wins, draws, losses : int
        Games played and the first player's wins, draws and losses.
    pentanomial : list of int
        Game pairs by the first player's points: LL, LD, WL+DD, WD, WW (5 counts, summing to ``games / 2``).
    elo, elo_error95, los : float
        Logistic Elo of the first player with half the 95 % interval (from the pentanomial), and the LOS.
    nelo, nelo_error95 : float
        Normalized Elo with half its 95 % interval.
    llr, lower, upper : float or None
        With an SPRT: its LLR and bounds.
    sprt_result : str or None
        With an SPRT: ``"H1"`` (accepted: elo1), ``"H0"`` (elo0) or ``"inconclusive"`` (the games ran out first).
    sprt : dict or None
        The SPRT's settings (elo0, elo1, alpha, beta, model).
    stopped : str
        ``"games"`` (all played), ``"sprt"`` (decided) or ``"interrupted"``.
    forfeits : list of dict
        Games lost by a crash, hang, illegal move or time (pair, white, result, termination, reason).
    """

    players: list[str]
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    pentanomial: list[int] = field(default_factory=lambda: [0] * 5)
    elo: float = 0.0
    elo_error95: float | None = None
    los: float = 0.5
    nelo: float = 0.0
    nelo_error95: float | None = None
    llr: float | None = None
    lower: float | None = None
    upper: float | None = None
    sprt_result: str | None = None
    sprt: dict | None = None
    stopped: str = "games"
    forfeits: list[dict] = field(default_factory=list)

    def add(self, pair: PairResult) -> None:
        """Count a finished pair."""
        for g in pair.games:
            self.games += 1
            p = g.first_points
            self.wins += p == 1.0
            self.draws += p == 0.5
            self.losses += p == 0.0
            if g.termination in (RULES_INFRACTION, ABANDONED, TIME_FORFEIT):
                self.forfeits.append({"pair": g.pair, "white": self.players[g.white], "result": g.result,
                                      "termination": g.termination, "reason": g.reason})
        self.pentanomial[pair.category] += 1
        self._estimate()

    def _estimate(self) -> None:
        est = logistic_elo(self.pentanomial)
        nest = normalized_elo(self.pentanomial)
        self.elo, self.elo_error95, self.los = est.elo, _finite(est.error95), est.los
        self.nelo, self.nelo_error95 = nest.elo, _finite(nest.error95)

    def to_dict(self) -> dict:
        """The result as JSON-ready data (what ``--json`` writes; no infinities: ``null`` instead)."""
        return {k: (_finite(v) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    def summary(self) -> str:
        """The result in a few lines: W/D/L, pentanomial, Elo +- 95 %, nElo, and the SPRT."""
        err = f"{self.elo_error95:.1f}" if self.elo_error95 is not None else "inf"
        nerr = f"{self.nelo_error95:.1f}" if self.nelo_error95 is not None else "inf"
        lines = [f"{self.players[0]} vs {self.players[1]}: {self.games} games, W {self.wins} D {self.draws} "
                 f"L {self.losses} (score {self._score():.1%})",
                 "Ptnml(0-2): " + ", ".join(map(str, self.pentanomial)),
                 f"Elo: {self.elo:.2f} +- {err} (95%) LOS: {self.los:.1%}   nElo: {self.nelo:.2f} +- {nerr} (95%)"]
        if self.sprt is not None:
            s = self.sprt
            lines.append(f"LLR: {self.llr:.2f} ({self.lower:.2f},{self.upper:.2f}) [{s['elo0']:.2f},{s['elo1']:.2f}] "
                         f"{s['model']}: {self.sprt_result}")
        if self.forfeits:
            lines.append(f"{len(self.forfeits)} game(s) forfeited, e.g. pair {self.forfeits[0]['pair'] + 1}: "
                         f"{self.forfeits[0]['reason']}")
        if self.stopped != "games":
            lines.append(f"stopped: {self.stopped}")
        return "\n".join(lines)

    def _score(self) -> float:
        return (self.wins + self.draws / 2) / self.games if self.games else 0.5


def _finite(v: float) -> float | None:
    return v if v is None or math.isfinite(v) else None


# ------------------------------------------------------------------------------------------------- the runner

def play_match(players: Sequence[PlayerSpec], *, games: int, openings: Sequence[Opening] | None = None,
               concurrency: int = 1, scheduler: str | None = None, workers: int | None = None,
               pgn: str | os.PathLike | None = None, sprt: SPRT | None = None,
               adjudication: Adjudication = Adjudication(), seed: int | None = None, progress: bool = False,
               event: str = "nnue-infer match", time_tolerance: float = TIME_TOLERANCE,
               on_pair: Callable[[PairResult, MatchResult], None] | None = None
               ) -> MatchResult:
    """Play ``games`` games (``games / 2`` pairs) between two players and return the first player's result.

    Parameters
    ----------
    players : two PlayerSpec
        The first player's view is the result's.
    games : int
        Games to play, even (each opening twice).
    openings : sequence of Opening, optional
        The book, used in order (shuffled with ``seed`` when given) and cycled when it has fewer openings than pairs;
        default: the start position.
    concurrency : int
        Pairs played at once (one game per core for two single-threaded engines): on threads of this process for
        UCI engines, on worker processes when a network plays (its search holds the interpreter's lock).
    scheduler, workers : optional
        A Dask scheduler's address, or a local Dask cluster of ``workers`` processes: pairs run as tasks there.
    pgn : path, optional
        Written as pairs end, in pair order.
    sprt : SPRT, optional
        Stops the match once the LLR leaves its bounds.
    adjudication : Adjudication
    time_tolerance : float
        Seconds a side may overstep its clock before it loses on time (default :data:`TIME_TOLERANCE`).
    seed : int, optional
        Shuffles the book's order.
    progress : bool
        A tqdm progress line on standard error with the running W/D/L, Elo and LLR.
    on_pair : callable, optional
        Called with each finished pair (in pair order) and the running result.

    Returns
    -------
    MatchResult

    Raises
    ------
    MatchError
        Bad settings, or a UCI engine that does not start or refuses an option (checked before any game).
    """
    if len(players) != 2:
        raise MatchError(f"a match has two players (got {len(players)})")
    if isinstance(games, bool) or not isinstance(games, int) or games <= 0 or games % 2:
        raise MatchError(f"the number of games must be even and > 0: each opening is played twice (got {games})")
    if concurrency < 1:
        raise MatchError(f"concurrency must be >= 1 (got {concurrency})")
    if not (math.isfinite(time_tolerance) and time_tolerance >= 0):
        raise MatchError(f"time tolerance must be >= 0 seconds (got {time_tolerance!r})")
    # a network file named relative to this directory, made absolute for workers that run elsewhere
    specs = [PlayerSpec(s.limits, s.uci, os.path.abspath(s.network), s.options, s.name)
             if s.network is not None and os.path.exists(s.network) else s for s in players]
    names = [s.label for s in specs]
    if names[0] == names[1]:  # told apart by their limits, else by their order
        tags = [str(s.limits) for s in specs] if specs[0].limits != specs[1].limits else ["#1", "#2"]
        specs = [PlayerSpec(s.limits, s.uci, s.network, s.options, f"{s.label} {t}") for s, t in zip(specs, tags)]
        names = [s.label for s in specs]
    check_players(specs)
    book = list(openings) if openings else [Opening(source="start position")]
    if seed is not None and openings:
        random.Random(seed).shuffle(book)
    pairs = games // 2
    date = datetime.date.today().strftime("%Y.%m.%d")
    result = MatchResult(names)
    if sprt is not None:
        result.sprt = {"elo0": sprt.elo0, "elo1": sprt.elo1, "alpha": sprt.alpha, "beta": sprt.beta,
                       "model": sprt.model}
        result.lower, result.upper, result.llr = sprt.lower, sprt.upper, 0.0
    out = open(pgn, "w", encoding="utf-8") if pgn is not None else None
    pending: dict[int, PairResult] = {}
    next_out = 0

    def tasks():
        for i in range(pairs):
            yield i, book[i % len(book)]

    from tqdm import tqdm

    bar = tqdm(total=games, unit="game", disable=not progress, dynamic_ncols=True, leave=True)

    def finished(pr: PairResult) -> bool:
        """Take a pair (any order); write and count the pairs now in order; True when the SPRT decided."""
        nonlocal next_out
        pending[pr.index] = pr
        decided = False
        while next_out in pending:
            p = pending.pop(next_out)
            next_out += 1
            result.add(p)
            if out is not None:
                for g in p.games:
                    out.write(g.pgn + "\n\n")
                out.flush()
            if sprt is not None:
                result.llr = sprt.llr(result.pentanomial)
                d = "H1" if result.llr > result.upper else "H0" if result.llr < result.lower else None
                if d is not None and result.sprt_result is None:
                    result.sprt_result = d
                    decided = True
            if on_pair is not None:
                on_pair(p, result)
            post = f"W{result.wins} D{result.draws} L{result.losses} Elo {result.elo:+.1f}"
            if result.elo_error95 is not None:
                post += f"+-{result.elo_error95:.1f}"
            if result.llr is not None:
                post += f" LLR {result.llr:.2f}"
            bar.set_postfix_str(post, refresh=False)
            bar.update(2)
        return decided

    try:
        if scheduler or workers:
            _run_dask(specs, tasks(), adjudication, event, date, time_tolerance, scheduler, workers, finished, result)
        elif concurrency == 1:
            for i, opening in tasks():
                if finished(play_pair(specs, opening, i, adjudication, event, date, time_tolerance)):
                    result.stopped = "sprt"
                    break
        else:
            _run_pool(specs, tasks(), adjudication, event, date, time_tolerance, concurrency, finished, result)
    except KeyboardInterrupt:
        result.stopped = "interrupted"
    finally:
        bar.close()
        if out is not None:
            out.close()
        if not (scheduler or workers):
            close_players()
    if sprt is not None and result.sprt_result is None:
        result.sprt_result = "inconclusive"
    return result


def _run_pool(specs, tasks, adjudication, event, date, tolerance, concurrency, finished, result) -> None:
    """Play the pairs on ``concurrency`` threads (UCI engines only: each game's engines are processes of their own)
    or, with a network player (its search holds the interpreter), on as many processes started afresh
    (``spawn``: no fork of a process that runs threads)."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait

    in_process = any(s.network is not None for s in specs)
    pool = ProcessPoolExecutor(concurrency, mp_context=multiprocessing.get_context("spawn")) if in_process else \
        ThreadPoolExecutor(concurrency, thread_name_prefix="match")
    todo = iter(tasks)
    with pool:
        running = set()
        stop = False
        try:
            while True:
                while not stop and len(running) < concurrency:
                    item = next(todo, None)
                    if item is None:
                        break
                    running.add(pool.submit(play_pair, specs, item[1], item[0], adjudication, event, date, tolerance))
                if not running:
                    break
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    if finished(f.result()) and not stop:
                        stop, result.stopped = True, "sprt"
        finally:
            for f in running:
                f.cancel()
    # (the threads' engines are closed by play_match's close_players; a worker process's engines end with it)


def _run_dask(specs, tasks, adjudication, event, date, tolerance, scheduler, workers, finished, result) -> None:
    import dask
    from distributed import Client, LocalCluster

    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        with dask.config.set({"distributed.worker.profile.enabled": False}):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
        client = Client(cluster)
    try:
        run_on_client(client, specs, tasks, adjudication, event, date, tolerance, finished, result)
    finally:
        try:
            client.run(close_players)
        except Exception:  # workers gone: their engines went with them
            pass
        client.close()
        if cluster is not None:
            cluster.close()


def run_on_client(client, specs, tasks, adjudication, event, date, tolerance, finished, result) -> None:
    """Submit the pairs of ``tasks`` to a Dask ``client`` (a window of twice its threads at a time) and feed each
    finished pair to ``finished`` as it comes back (``as_completed``); an SPRT decision cancels the rest."""
    from distributed import as_completed

    import uuid

    threads = max(1, sum(client.nthreads().values()))
    run = uuid.uuid4().hex[:12]  # task keys of this match (a scheduler may serve several)
    todo = iter(tasks)
    window = 2 * threads
    futures = []
    for _ in range(window):
        item = next(todo, None)
        if item is None:
            break
        futures.append(client.submit(play_pair, specs, item[1], item[0], adjudication, event, date, tolerance,
                                     pure=False, key=f"match-{run}-pair-{item[0]}"))
    stream = as_completed(futures)
    stop = False
    for f in stream:
        if finished(f.result()) and not stop:
            stop, result.stopped = True, "sprt"
            for other in futures:
                if not other.done():
                    other.cancel()
            break
        item = next(todo, None)
        if item is not None:
            new = client.submit(play_pair, specs, item[1], item[0], adjudication, event, date, tolerance, pure=False,
                                key=f"match-{run}-pair-{item[0]}")
            futures.append(new)
            stream.add(new)


def write_json(result: MatchResult, path: str | os.PathLike) -> None:
    """Write ``result.to_dict()`` to ``path`` as JSON (via a temporary file, renamed: a reader never sees half)."""
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result.to_dict(), f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def parse_uci_options(items: Iterable[str]) -> list[tuple[int | None, str, str]]:
    """``NAME=VALUE`` or ``N:NAME=VALUE`` (for player ``N`` only, counted from 1) -> ``(N or None, NAME, VALUE)``;
    ``MatchError`` for another form."""
    out = []
    for item in items:
        target = None
        text = item
        head, sep, rest = item.partition(":")
        if sep and head.isdigit():
            target, text = int(head), rest
        name, eq, value = text.partition("=")
        if not eq or not name.strip():
            raise MatchError(f"UCI option {item!r}: expected NAME=VALUE (or N:NAME=VALUE for player N)")
        out.append((target, name.strip(), value.strip()))
    return out

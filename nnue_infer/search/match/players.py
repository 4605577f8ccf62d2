"""The players of a match and their limits: a UCI engine run as a subprocess through python-chess's
``chess.engine`` (``PlayerSpec(uci=...)``: Debian's ``stockfish`` with ``UCI_LimitStrength``/``UCI_Elo``, or any
other) or a network searched in process by :class:`nnue_infer.search.Engine` (``PlayerSpec(network=...)``: no UCI
round trips), each with its :class:`Limits` (fixed nodes, depth, time per move or a clock that the runner keeps).

A player that crashes, hangs or sends an illegal move reports it in its :class:`MoveReport` (with the PGN
termination, the PGN standard's section 9.8.1) instead of raising: the game loop makes it a lost game."""

from __future__ import annotations

import asyncio
import math
import os
import shlex
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import chess

from ...errors import MatchError


#: Seconds given to a UCI engine to start and answer ``uci``/``isready``.
START_TIMEOUT = 30.0
#: Seconds beyond a move's own time budget (movetime, or the clock left) after which a silent engine is declared
#: hung, killed and the game lost; fixed nodes or depth have no budget of their own and get :data:`HANG_TIMEOUT`.
HANG_GRACE = 10.0
HANG_TIMEOUT = 120.0
#: PGN Termination tag values (the PGN standard's, section 9.8.1).
NORMAL, ADJUDICATION, TIME_FORFEIT, RULES_INFRACTION, ABANDONED = (
    "normal", "adjudication", "time forfeit", "rules infraction", "abandoned")


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
        except (asyncio.TimeoutError, TimeoutError):
            raise MatchError(f"UCI engine {shlex.join(spec.uci)!r}: did not start as a UCI engine (sent "
                             f"'uci', no 'uciok' within {START_TIMEOUT:g} s)") from None
        except (chess.engine.EngineError, OSError) as exc:
            raise MatchError(f"UCI engine {shlex.join(spec.uci)!r}: did not start as a UCI engine "
                             f"({type(exc).__name__}: {str(exc) or 'it ended before uciok'})") from None
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
        from .. import Engine

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


def close_players(uci_only: bool = False) -> int:
    """Close every player this process opened (UCI engines quit); returns how many.  Run on the workers of a Dask
    cluster after a match (``client.run(close_players)``).  ``uci_only`` closes the UCI engines alone (a worker
    process must: python-chess drives each engine from a non-daemon thread, which keeps the process from exiting)
    and keeps the loaded networks."""
    with _players_lock:
        players = [p for p in _all_players if not uci_only or isinstance(p, UciPlayer)]
        _all_players[:] = [p for p in _all_players if p not in players]
    for p in players:
        p.close()
    cache = getattr(_local, "players", None)
    if cache is not None:
        for spec in [k for k, p in cache.items() if p in players or not uci_only]:
            del cache[spec]
    if not uci_only:
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
    from ...resources import network_from_spec

    for spec in specs:
        if spec.uci is not None:
            UciPlayer(spec).close()
        else:
            network_from_spec(spec.network)


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

"""The Universal Chess Interface (UCI) engine: ``nnue-infer uci`` speaks it to GUIs, match runners and
python-chess's ``chess.engine``.

One :class:`UciSession` reads commands line by line (:meth:`UciSession.run`) and answers on its output
stream.  A search (``go``) runs in a thread of its own, so ``stop``, ``isready`` and ``quit`` are
answered while it thinks; it prints ``info`` lines after each completed iteration and one ``bestmove``,
always a legal move of the position (``(none)`` when the side to move has none, as Stockfish prints).

Commands (the protocol as Stefan-Meyer Kahlen's UCI specification of April 2006 and Stockfish 15.1's
``uci.cpp`` give it): ``uci``, ``debug``, ``isready``, ``setoption name N [value V]``, ``ucinewgame``,
``position startpos|fen <FEN> [moves m1 m2 ...]``, ``go`` (``depth``, ``nodes``, ``movetime``, ``wtime``,
``btime``, ``winc``, ``binc``, ``movestogo``, ``infinite``, ``mate N`` = depth ``2N - 1``, ``perft N``),
``stop``, ``ponderhit``, ``quit``; and Stockfish's extras ``d`` (the board, its FEN and checkers) and
``eval`` (the network's evaluation).  Bad input (an unknown command or option, a value out of range, a bad
FEN, an illegal move, ``go`` before ``position``) is answered by one ``info string`` naming the problem;
the state is then what it was before the command.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import chess
import numpy as np

from ..errors import NnueError
from .perft import PerftStopped, check_perft_position, perft, perft_text

#: ``id name`` / ``id author``.
NAME = "nnue-infer"
AUTHOR = "the nnue-infer developers"
#: The words that start a ``go`` parameter (the UCI specification's list, Stockfish's ``perft``).
GO_WORDS = ("searchmoves", "ponder", "wtime", "btime", "winc", "binc", "movestogo", "depth", "nodes", "mate",
            "movetime", "infinite", "perft")
#: Largest ``Hash`` in MB (Stockfish 15.1 offers 33,554,432 on 64-bit machines; this engine's table is a
#: NumPy array in one process).
MAX_HASH_MB = 65536
#: The flags of python-chess's ``Board.status()`` a position may have (positions no game reaches that the move
#: generator and the search still read as python-chess does); any other (too many pawns or pieces, a side not
#: to move in check, ...) refuses it.
ACCEPTED_STATUS = chess.STATUS_IMPOSSIBLE_CHECK | chess.STATUS_TOO_MANY_CHECKERS | chess.STATUS_INVALID_EP_SQUARE
#: The commands that take no arguments (extra words are said and ignored).
NO_ARGUMENTS = ("uci", "isready", "ucinewgame", "stop", "ponderhit", "quit", "d", "eval")
#: The names of the thread a ``go`` starts.
SEARCH_THREAD, PERFT_THREAD = "nnue-infer search", "nnue-infer perft"


@dataclass(frozen=True)
class Option:
    """One UCI option as ``uci`` announces it: ``kind`` one of ``spin``, ``check``, ``string``, ``button``."""

    name: str
    kind: str
    default: object = None
    low: int | None = None
    high: int | None = None

    def announce(self) -> str:
        """The ``option name ... type ...`` line."""
        text = f"option name {self.name} type {self.kind}"
        if self.kind == "check":
            text += f" default {'true' if self.default else 'false'}"
        elif self.kind == "spin":
            text += f" default {self.default} min {self.low} max {self.high}"
        elif self.kind == "string":
            text += f" default {self.default}"
        return text

    def parse(self, value: str | None) -> object:
        """The option's value from the text of ``setoption ... value``; :class:`UciInputError` when it does
        not fit the option's type or range."""
        if self.kind == "button":
            return None
        if value is None:
            raise UciInputError(f"setoption name {self.name}: no value given (type {self.kind})")
        if self.kind == "check":
            if value.lower() not in ("true", "false"):
                raise UciInputError(f"setoption name {self.name}: value {value!r} is neither true nor false")
            return value.lower() == "true"
        if self.kind == "spin":
            try:
                number = int(value)
            except ValueError:
                raise UciInputError(f"setoption name {self.name}: value {value!r} is not an integer") from None
            if not self.low <= number <= self.high:
                raise UciInputError(f"setoption name {self.name}: value {number} is out of range "
                                    f"{self.low}..{self.high}")
            return number
        return value


#: ``EvalFile``'s value for the bundled network, as Stockfish writes an empty string option (``SyzygyPath``).
EMPTY = "<empty>"

def _eval_file_value(spec: str) -> str:
    """``EvalFile``'s shown value for a network spec: :data:`EMPTY` for the bundled network (``default`` is a word
    of the option line itself: python-chess would read it as '')."""
    return EMPTY if spec in ("", "default", EMPTY) else spec


#: The options ``uci`` announces, in order.  ``EvalFile`` takes any network ``--net`` takes (a file or a
#: name: ``default``, ``stockfish``, ``sf16`` ...; an empty value or ``<empty>`` is ``default``).
OPTIONS = (
    Option("Hash", "spin", 16, 1, MAX_HASH_MB),
    Option("Threads", "spin", 1, 1, 1),
    Option("EvalFile", "string", "default"),
    Option("UCI_Chess960", "check", False),
    Option("MultiPV", "spin", 1, 1, 1),
    Option("Move Overhead", "spin", 10, 0, 5000),
    Option("Clear Hash", "button"),
)


class UciInputError(NnueError, ValueError):
    """A command the engine cannot carry out; its message is sent as ``info string`` and nothing changes."""


def _single_line(text: str) -> str:
    return " ".join(str(text).split())


def uci_line(board: chess.Board, moves: Iterable[chess.Move]) -> list[str]:
    """The UCI notation of ``moves`` played one after the other from ``board`` (castling as ``board.chess960``
    writes it: ``e1g1``, or king-takes-rook ``e1h1`` in Chess960); stops at the first move that is not legal
    where it stands (never sent to a GUI)."""
    board = board.copy(stack=False)
    words = []
    for move in moves:
        if move is None or not board.is_legal(move):
            break
        words.append(board.uci(move))
        board.push(move)
    return words


def info_line(board: chess.Board, info) -> str:
    """The ``info depth ... pv ...`` line of a ``SearchInfo`` (or ``SearchResult``) of ``board``'s search:
    times in milliseconds, ``score mate N`` (N > 0: the side to move mates in N moves) or ``score cp X``."""
    words = ["info", "depth", str(info.depth), "seldepth", str(info.seldepth),
             "multipv", str(getattr(info, "multipv", 1))]
    if info.mate is not None:
        words += ["score", "mate", str(info.mate)]
    elif info.score_cp is not None:
        words += ["score", "cp", str(info.score_cp)]
    time_ms = int(round(info.time * 1000))
    nps = getattr(info, "nps", None)
    if nps is None:
        nps = int(info.nodes / info.time) if info.time > 0 else 0
    words += ["nodes", str(info.nodes), "nps", str(nps), "hashfull", str(info.hashfull), "time", str(time_ms)]
    pv = uci_line(board, info.pv)
    if pv:
        words += ["pv", *pv]
    return " ".join(words)


class _InfoStrings(logging.Handler):
    """The ``nnue_infer`` logger's messages (the first kernel compile's notice, warnings) as ``info string``
    lines while a session runs; the per-kernel compile start and end records are left out."""

    def __init__(self, send: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self._send = send

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "compile", None) is None:
            self._send(f"info string {_single_line(record.getMessage())}")


class UciSession:
    """A UCI engine's state and command loop: the position, the options, the network, the engine, and the
    thread of the running search.

    Parameters
    ----------
    network : Network, str or None
        The network to play with (a :class:`~nnue_infer.network.Network`, any ``--net`` spec, None for the
        bundled default); ``setoption name EvalFile`` replaces it.
    write : callable
        Receives each output line (no newline) and sends it at once (flushed); may be called from the search
        thread (calls are serialised).
    engine_factory : callable, optional
        ``engine_factory(network, hash_mb=..., chess960=...)`` makes the search engine (default:
        :class:`nnue_infer.search.Engine`), on the first ``go``.
    name : str, optional
        The ``--net`` spec a given :class:`~nnue_infer.network.Network` was loaded from: ``EvalFile``'s value
        and announced default (``<empty>`` for the bundled network; ``(given)`` when no name comes with it).

    Raises
    ------
    NetworkNotFoundError, NetworkFormatError
        ``network`` is a spec that names no loadable network.
    """

    def __init__(self, network=None, write: Callable[[str], None] = print, engine_factory=None,
                 name: str | None = None) -> None:
        from ..network import Network
        from ..resources import network_from_spec

        self.network = network if isinstance(network, Network) else network_from_spec(network)
        self._write = write
        self._write_lock = threading.Lock()
        self._engine_factory = engine_factory
        self.engine = None
        self.values = {o.name: o.default for o in OPTIONS}
        spec = network if isinstance(network, str) or network is None else name
        start = "(given)" if spec is None and network is not None else _eval_file_value(spec or "default")
        self.values["EvalFile"] = start
        self._announced = tuple(replace(o, default=start) if o.name == "EvalFile" else o for o in OPTIONS)
        self.board = chess.Board()
        self.position_given = False
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        self._answered = threading.Event()  # the running go's last lines are being sent
        self._perft_stop = np.zeros(1, np.uint8)
        self.quitting = False
        self._infinite = False  # the running go is go infinite
        self._ponder: str | None = None  # the reply the last search expects (its PV's second move)
        self._preparing: threading.Thread | None = None  # see _prepare
        self._handlers = {
            "uci": self._uci, "isready": self._isready, "ucinewgame": self._ucinewgame,
            "setoption": self._setoption, "position": self._position, "go": self._go, "stop": self._stop_command,
            "ponderhit": self._ignore, "debug": self._ignore, "register": self._ignore, "quit": self._quit,
            "d": self._display, "eval": self._eval,
        }

    # -- output --------------------------------------------------------------------------------------------------
    def send(self, line: str) -> None:
        """Write one line (serialised between the reader and the search thread); a reader gone away (a closed
        pipe) ends the session."""
        with self._write_lock:
            try:
                self._write(line)
            except (OSError, ValueError):  # EPIPE, or a closed stream: no one listens any more
                self.quitting = True
                self._stop.set()

    def say(self, message: str) -> None:
        """An ``info string`` line (one line, whatever ``message`` holds)."""
        self.send(f"info string {_single_line(message)}")

    # -- the loop ------------------------------------------------------------------------------------------------
    def run(self, lines: Iterable[str | bytes]) -> None:
        """Answer the commands of ``lines`` (text or bytes: bytes that are not UTF-8 are replaced, never
        fatal) until ``quit`` or the end of the input, then stop any search and return."""
        log = logging.getLogger("nnue_infer")
        handler = _InfoStrings(self.send)
        level = log.level
        log.addHandler(handler)
        if not log.level or log.level > logging.INFO:
            log.setLevel(logging.INFO)
        try:
            for line in lines:
                if isinstance(line, bytes):
                    line = line.decode("utf-8", "replace")
                self.handle(line)
                if self.quitting:
                    break
        finally:
            self.finish()
            log.removeHandler(handler)
            log.setLevel(level)

    def handle(self, line: str) -> None:
        """Carry out one command line; every failure is answered by an ``info string`` and changes nothing."""
        words = line.split()
        if not words:
            return
        handler = self._handlers.get(words[0])
        if handler is None:
            self.say(f"unknown command {_single_line(line)[:80]!r} (known: {', '.join(self._handlers)})")
            return
        if len(words) > 1 and words[0] in NO_ARGUMENTS:
            self.say(f"{words[0]} takes no arguments: {' '.join(words[1:])[:80]!r} ignored")
            words = words[:1]
        try:
            handler(words[1:])
        except UciInputError as exc:
            self.say(str(exc))
        except (NnueError, ValueError, OSError) as exc:
            self.say(f"{words[0]}: {exc}")
        except Exception as exc:  # a bug: said, and the engine keeps running
            self.say(f"{words[0]} failed: {type(exc).__name__}: {exc}")

    def finish(self) -> None:
        """At ``quit`` or the end of the input: stop a running search and wait for its ``bestmove``.  A running
        ``go perft`` is waited for to its end (as Stockfish does: only ``stop`` abandons it), and so is a search
        with limits when the input ended without ``quit`` (``printf 'go depth 12\\n' | nnue-infer uci`` prints
        the whole search; Stockfish stops it at once)."""
        worker = self._worker
        if worker is None:
            return
        if worker.name == PERFT_THREAD or not (self.quitting or self._infinite):
            worker.join()
        else:
            self._request_stop()
            worker.join(timeout=10.0)  # (a daemon thread: a search that does not stop does not hold the exit)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: no limit) for the running ``go`` to end by itself (its limits
        reached, its ``bestmove`` or perft report sent); returns whether none runs any more."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return worker is None or not worker.is_alive()

    # -- commands ------------------------------------------------------------------------------------------------
    def _ignore(self, words: list[str]) -> None:
        pass

    def _uci(self, words: list[str]) -> None:
        self.send(f"id name {NAME}")
        self.send(f"id author {AUTHOR}")
        for option in self._announced:
            self.send(option.announce())
        self.send("uciok")
        if self.engine is None and self._preparing is None:
            self._preparing = threading.Thread(target=self._prepare, name="nnue-infer prepare", daemon=True)
            self._preparing.start()

    def _isready(self, words: list[str]) -> None:
        self.send("readyok")

    def _searching(self) -> bool:
        """Whether a search runs that was not told to stop (one that was is waited for)."""
        worker = self._worker
        if worker is None or not worker.is_alive():
            return False
        if self._stop.is_set() or self._answered.is_set():
            worker.join()
            return False
        return True

    def _answer(self, lines: list[str]) -> None:
        """The last lines of a ``go`` (its ``bestmove`` or perft report): the search counts as ended before the
        GUI can read them, so a ``go`` sent on reading them is not taken for one during the search."""
        self._answered.set()
        for line in lines:
            self.send(line)

    def _refuse_while_searching(self, command: str) -> None:
        """Refuse ``command`` (it changes the engine) during a search; else wait for the engine's preparation."""
        if self._searching():
            raise UciInputError(f"{command} ignored: a search is running (send stop first)")
        self._prepared()

    def _ucinewgame(self, words: list[str]) -> None:
        self._refuse_while_searching("ucinewgame")
        if self.engine is not None:
            self.engine.new_game()

    def _setoption(self, words: list[str]) -> None:
        if not words or words[0].lower() != "name" or len(words) < 2:
            raise UciInputError("setoption needs: setoption name <option> [value <value>]")
        lowered = [w.lower() for w in words]
        split = lowered.index("value") if "value" in lowered[1:] else len(words)
        name = " ".join(words[1:split])
        value = " ".join(words[split + 1:]) if split < len(words) else None
        option = next((o for o in OPTIONS if o.name.lower() == name.lower()), None)
        if option is None:
            raise UciInputError(f"unknown option {name!r} (options: {', '.join(o.name for o in OPTIONS)})")
        parsed = option.parse(value if option.kind != "string" else (value or ""))
        self._refuse_while_searching(f"setoption name {option.name}")
        if option.name == "EvalFile":
            self._set_network(parsed if parsed not in ("", EMPTY) else "default")
            return
        if option.name == "Clear Hash":
            if self.engine is not None:
                self.engine.new_game()
            return
        if option.name == "Hash":
            from .engine import check_hash_mb

            try:  # refused now whatever the order of commands: a stored size every later go fails to make
                check_hash_mb(parsed)
                if self.engine is not None:
                    self.engine.hash_mb = parsed
            except (ValueError, MemoryError) as exc:
                raise UciInputError(f"setoption name Hash value {parsed}: {type(exc).__name__}: "
                                    f"{_single_line(exc)} (Hash stays {self.values['Hash']})") from None
        if option.name == "UCI_Chess960":
            self.board.chess960 = parsed
            if self.engine is not None:
                self.engine.chess960 = parsed
        self.values[option.name] = parsed

    def _set_network(self, spec: str) -> None:
        from ..resources import network_from_spec

        try:
            network = network_from_spec(spec)
        except (NnueError, OSError) as exc:
            raise UciInputError(f"setoption name EvalFile value {spec}: {exc} (the network stays "
                                f"{self.values['EvalFile']!r})") from None
        if self.engine is not None:
            self.engine.network = network
        self.network = network
        self.values["EvalFile"] = _eval_file_value(spec)
        self.say(f"network {spec} loaded")

    def _position(self, words: list[str]) -> None:
        """``position startpos|fen <FEN> [moves ...]``: the new board replaces the old one only when all of it
        is good."""
        if not words or words[0] not in ("startpos", "fen"):
            raise UciInputError("position needs: position startpos|fen <FEN> [moves <move> ...]")
        split = words.index("moves") if "moves" in words else len(words)
        chess960 = bool(self.values["UCI_Chess960"])
        if words[0] == "startpos":
            if split != 1:
                raise UciInputError(f"position startpos: unexpected {' '.join(words[1:split])!r} before 'moves'")
            board = chess.Board(chess960=chess960)
        else:
            fen = " ".join(words[1:split])
            if not fen:
                raise UciInputError("position fen: no FEN given")
            try:
                board = chess.Board(fen, chess960=chess960)
            except ValueError as exc:
                from ..positions import fen_error

                raise UciInputError(f"position refused: {fen_error(fen, exc)}") from None
        try:
            check_perft_position(board)
        except NnueError as exc:
            raise UciInputError(f"position refused: {exc}") from None
        if board.was_into_check():
            raise UciInputError(f"position refused: the side not to move is in check in {board.fen()}")
        board.castling_rights = board.clean_castling_rights()  # (rights python-chess ignores: no rook, king moved)
        bad = board.status() & ~ACCEPTED_STATUS
        if bad:
            names = ", ".join(f.name.lower().replace("_", " ") for f in chess.Status if f and f & bad)
            raise UciInputError(f"position refused: {names} in {board.fen()}")
        for index, text in enumerate(words[split + 1:], start=1):
            try:
                move = board.parse_uci(text)
                if not move:
                    raise ValueError("a null move is no move")
            except ValueError as exc:
                reason = str(exc).replace(f" in {board.fen()}", "")  # (python-chess names the position too)
                raise UciInputError(f"position refused: move {index} {text!r} of the moves is illegal in "
                                    f"{board.fen()} ({reason}); the position stays as it was") from None
            board.push(move)
        self.board = board
        self.position_given = True

    def _go(self, words: list[str]) -> None:
        if self._searching():
            raise UciInputError("go ignored: a search is running (send stop first)")
        limits, perft_depth = self._go_limits(words)
        self._infinite = bool(limits.get("infinite"))
        if not self.position_given:
            self.say("go before any position command: searching the start position")
            self.position_given = True
        board = self.board.copy()
        self._stop.clear()
        self._answered.clear()
        self._perft_stop[0] = 0
        if perft_depth is not None:
            target, args, name = self._run_perft, (board, perft_depth), PERFT_THREAD
        else:
            target, args, name = self._run_search, (board, limits), SEARCH_THREAD
        self._worker = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._worker.start()

    def _go_limits(self, words: list[str]) -> tuple[dict, int | None]:
        """The keyword arguments of ``Engine.search`` from ``go``'s words (times in seconds), and the perft depth
        (None: a search).  A bad or unsupported parameter is said and left out; the search runs with the rest."""
        limits: dict = {}
        perft_depth = None
        i = 0
        while i < len(words):
            word = words[i]
            i += 1
            if word == "infinite":
                limits["infinite"] = True
                continue
            if word == "ponder":
                self.say("go ponder: pondering is not offered (no Ponder option); searching with the other limits")
                continue
            if word == "searchmoves":
                while i < len(words) and words[i] not in GO_WORDS:
                    i += 1
                self.say("go searchmoves is not supported: every legal move is searched")
                continue
            if word not in GO_WORDS:
                self.say(f"go: unknown parameter {word!r} ignored (known: {', '.join(GO_WORDS)})")
                continue
            if i >= len(words) or words[i] in GO_WORDS:
                self.say(f"go {word}: no value given; ignored")
                continue
            text = words[i]
            i += 1
            try:
                value = int(text)
            except ValueError:
                self.say(f"go {word}: {text!r} is not an integer; ignored")
                continue
            if word in ("wtime", "btime"):
                limits[word] = max(value, 0) / 1000  # (some GUIs send a negative time left: none left)
            elif word in ("winc", "binc"):
                limits[word] = max(value, 0) / 1000
            elif word == "movetime":
                if value < 0:
                    self.say(f"go movetime: {value} is negative; ignored")
                    continue
                limits["movetime"] = value / 1000
            elif word in ("depth", "nodes", "movestogo", "mate", "perft"):
                if value < 1:
                    self.say(f"go {word}: {value} is below 1; ignored")
                    continue
                if word == "mate":
                    limits["depth"] = min(limits.get("depth", 2 * value - 1), 2 * value - 1)
                elif word == "perft":
                    perft_depth = value
                else:
                    limits[word] = value
        limits["move_overhead"] = self.values["Move Overhead"] / 1000
        return limits, perft_depth

    def _stop_command(self, words: list[str]) -> None:
        self._request_stop()

    def _request_stop(self) -> None:
        self._stop.set()
        self._perft_stop[0] = 1
        if self.engine is not None:
            self.engine.stop()

    def _quit(self, words: list[str]) -> None:
        self.quitting = True

    def _display(self, words: list[str]) -> None:
        for row in str(self.board).split("\n"):
            self.send(row)
        self.send(f"Fen: {self.board.fen()}")
        checkers = " ".join(chess.SQUARE_NAMES[s] for s in self.board.checkers())
        self.send(f"Checkers: {checkers}")

    def _eval(self, words: list[str]) -> None:
        from ..evaluator import evaluate_cp

        cp = evaluate_cp(self.board, self.network)
        white = cp if self.board.turn else -cp
        self.say(f"network evaluation {cp:+d} cp (side to move), {white:+d} cp (White) of {self.board.fen()}")

    # -- the search thread ---------------------------------------------------------------------------------------
    def _prepare(self) -> None:
        """After ``uciok``, in a thread of its own: make the engine and search the start position to depth 1,
        which loads its kernels from the cache (or compiles them, saying so), so that the first ``go`` of a
        game does not spend its clock on them; ``isready`` is answered meanwhile."""
        try:
            engine = self._new_engine()
            engine.search(chess.Board(chess960=engine.chess960), depth=1)
            engine.new_game()
            self.engine = engine
        except Exception as exc:  # (the first go makes the engine again and says what fails)
            self.say(f"preparing the engine failed: {type(exc).__name__}: {_single_line(exc)}")

    def _prepared(self) -> None:
        """Wait for :meth:`_prepare`, if it runs."""
        preparing = self._preparing
        if preparing is not None:
            preparing.join()
            self._preparing = None

    def _new_engine(self):
        factory = self._engine_factory
        if factory is None:
            from . import Engine as factory
        return factory(self.network, hash_mb=self.values["Hash"], chess960=bool(self.values["UCI_Chess960"]))

    def _make_engine(self):
        self._prepared()
        if self.engine is None:
            self.engine = self._new_engine()
        return self.engine

    def _watch_stop(self, done: threading.Event) -> None:
        """While a search runs: after ``stop`` (or ``quit``), tell the engine to stop until it returns (a
        ``stop`` that came between ``go`` and the search's start would otherwise be lost)."""
        while not done.wait(0.01):
            if self._stop.is_set() and self.engine is not None:
                self.engine.stop()

    def _run_search(self, board: chess.Board, limits: dict) -> None:
        infinite = bool(limits.get("infinite"))
        move = None
        try:
            if not any(board.generate_legal_moves()):
                self.send(f"info depth 0 score {'mate 0' if board.is_check() else 'cp 0'}")
            else:
                move = self._search(board, limits)
        except Exception as exc:  # a bug in the search: said, and a legal move is played
            self.say(f"search failed: {type(exc).__name__}: {exc}")
            move = next(iter(board.legal_moves), None)
        if infinite:  # UCI: the best move of an infinite search is sent after stop only
            self._stop.wait()
        self._answer([f"bestmove {board.uci(move) if move is not None else '(none)'}"
                      + (f" ponder {self._ponder}" if move is not None and self._ponder else "")])

    def _search(self, board: chess.Board, limits: dict) -> chess.Move | None:
        self._ponder = None
        engine = self._make_engine()
        done = threading.Event()
        watcher = threading.Thread(target=self._watch_stop, args=(done,), daemon=True)
        watcher.start()
        try:
            result = engine.search(board, info=lambda info: self.send(info_line(board, info)), **limits)
        finally:
            done.set()
            watcher.join()
        move = result.move
        if move is None or not board.is_legal(move):
            fallback = next(iter(board.legal_moves))
            self.say(f"the search returned {move} which is not legal in {board.fen()}: playing {board.uci(fallback)}")
            return fallback
        pv = uci_line(board, result.pv)
        if len(pv) >= 2 and result.pv[0] == move:
            self._ponder = pv[1]
        return move

    def _run_perft(self, board: chess.Board, depth: int) -> None:
        try:
            counts = perft(board, depth, stop=self._perft_stop)
        except PerftStopped as exc:
            self._answer([f"info string {exc}"])
            return
        except Exception as exc:  # (the position was checked by the position command)
            self._answer([f"info string go perft {depth}: {type(exc).__name__}: {_single_line(exc)}"])
            return
        self._answer(perft_text(board, counts).split("\n"))

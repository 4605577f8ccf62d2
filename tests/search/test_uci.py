"""The UCI engine (nnue_infer.search.uci): the protocol in process, line by line, and through a real UCI
client (python-chess's ``chess.engine``) talking to ``python -m nnue_infer uci``.

Every bad input is answered by one ``info string`` naming the problem, the state stays what it was, and
the engine answers ``isready`` afterwards.  Moves are checked with python-chess; perft against the Python
API (itself checked against the published totals and Stockfish in test_perft.py).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import chess
import chess.engine
import pytest

from nnue_infer.search import perft
from nnue_infer.search.perft import perft_text
from nnue_infer.search.uci import GO_WORDS, UciSession

KIWIPETE = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"


class Session:
    """A :class:`UciSession` whose output lines are collected; ``send(...)`` returns the lines each command
    printed (a running ``go`` waited for first when ``wait``)."""

    def __init__(self, network=None) -> None:
        self.lines: list[str] = []
        self.uci = UciSession(network, self.lines.append)

    def send(self, *commands: str, wait: bool = False) -> list[str]:
        start = len(self.lines)
        for command in commands:
            self.uci.handle(command)
        if wait:
            assert self.uci.wait(timeout=600)
        return self.lines[start:]


@pytest.fixture
def session() -> Session:
    return Session()


def info_strings(lines: list[str]) -> list[str]:
    return [line.removeprefix("info string ") for line in lines if line.startswith("info string ")]


def test_uci_names_the_engine_and_its_options(session):
    lines = session.send("uci")
    assert lines[0] == "id name nnue-infer" and lines[1].startswith("id author ")
    assert lines[-1] == "uciok"
    announced = {line.split(" type ")[0].removeprefix("option name ") for line in lines if line.startswith("option")}
    assert announced == {"Hash", "Threads", "EvalFile", "UCI_Chess960", "MultiPV", "Move Overhead", "Clear Hash"}
    assert "option name Threads type spin default 1 min 1 max 1" in lines


def test_options_reach_the_engine_prepared_after_uci(session, network_path):
    """After uciok the engine is made (and its kernels loaded) in the background; options set later reach it."""
    from nnue_infer.search import Engine

    session.send("uci", "setoption name Hash value 8", "setoption name UCI_Chess960 value true",
                 f"setoption name EvalFile value {network_path}")
    engine = session.uci.engine
    assert isinstance(engine, Engine)
    assert engine.hash_mb == 8 and engine.chess960 and engine.network is session.uci.network


def test_isready_answers_readyok(session):
    assert session.send("isready") == ["readyok"]


@pytest.mark.parametrize("command, message", [
    ("foo", "unknown command 'foo'"),
    ("setoption name Nope value 3", "unknown option 'Nope'"),
    ("setoption name Hash value 0", "Hash: value 0 is out of range 1..65536"),
    ("setoption name Hash value lots", "Hash: value 'lots' is not an integer"),
    ("setoption name Threads value 2", "Threads: value 2 is out of range 1..1"),
    ("setoption name UCI_Chess960 value maybe", "UCI_Chess960: value 'maybe' is neither true nor false"),
    ("setoption name Hash", "Hash: no value given"),
    ("setoption Hash 3", "setoption needs: setoption name <option> [value <value>]"),
    ("position", "position needs: position startpos|fen"),
    ("position startfen", "position needs: position startpos|fen"),
    ("position fen", "position fen: no FEN given"),
    ("position fen 8/8/8 w", "position refused: the placement field does not have 8 ranks"),
    ("position fen 8/8/8/8/8/8/8/K7 w - - 0 1", "Black must have exactly one king, found 0"),
    ("position fen k7/8/8/8/8/8/8/QK6 b - - 0 1", None),  # legal: Black in check, to move
    ("position fen k7/8/8/8/8/8/8/QK6 w - - 0 1", "the side not to move is in check"),
    ("position fen k7/8/8/8/8/8/8/KP6 w - - 0 1", "pawn on the first or last rank: b1"),
    ("position startpos moves e2e4 e7e5 e1e3", "move 3 'e1e3' of the moves is illegal"),
    ("position startpos moves e2e4 e9e5", "move 2 'e9e5' of the moves is illegal"),
    ("position startpos moves 0000", "move 1 '0000' of the moves is illegal"),
    ("position startpos e2e4", "position startpos: unexpected 'e2e4' before 'moves'"),
    ("setoption name EvalFile value /no/such/file.nnue", "'/no/such/file.nnue' is no known network name"),
])
def test_bad_input_is_said_and_changes_nothing(session, command, message):
    session.send("position startpos moves d2d4", "setoption name Hash value 8")
    before = (session.uci.board.fen(), list(session.uci.board.move_stack), dict(session.uci.values),
              session.uci.network)
    lines = session.send(command)
    if message is None:
        assert lines == []
        return
    assert len(lines) == 1 and lines[0].startswith("info string "), lines
    assert message in lines[0]
    assert (session.uci.board.fen(), list(session.uci.board.move_stack), dict(session.uci.values),
            session.uci.network) == before
    assert session.send("isready") == ["readyok"]


@pytest.mark.parametrize("before_uci", [True, False])
def test_hash_larger_than_the_memory_is_refused_in_any_order(session, before_uci):
    from nnue_infer.search.uci import MAX_HASH_MB

    physical_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    huge = 1 << (physical_mb.bit_length())  # a power of two above the memory: the table's exact size
    if huge > MAX_HASH_MB:
        pytest.skip(f"this machine's {physical_mb} MiB exceed the Hash option's maximum")
    commands = ["uci", f"setoption name Hash value {huge}"]
    lines = session.send(*(reversed(commands) if before_uci else commands))
    refused = info_strings(lines)
    assert len(refused) == 1 and f"Hash value {huge}" in refused[0] and "memory" in refused[0], lines
    assert session.uci.values["Hash"] == 16
    lines = session.send("position startpos", "go nodes 500", wait=True)
    assert any(line.startswith("info depth") for line in lines) and not info_strings(lines), lines
    move = chess.Move.from_uci(lines[-1].split()[1])
    assert move in chess.Board().legal_moves


def test_position_with_moves_keeps_the_game_history(session):
    assert session.send("position startpos moves g1f3 g8f6 f3g1 f6g8 g1f3") == []
    board = session.uci.board
    assert board.fen() == "rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 5 3"
    assert len(board.move_stack) == 5  # the search sees the repetitions
    assert session.send(f"position fen {KIWIPETE} moves e1g1") == []
    assert session.uci.board.piece_at(chess.G1) == chess.Piece(chess.KING, chess.WHITE)


def test_options_are_set(session):
    assert session.send("setoption name hash value 64", "setoption name Move Overhead value 100",
                        "setoption name UCI_Chess960 value true", "setoption name Clear Hash") == []
    assert session.uci.values["Hash"] == 64 and session.uci.values["Move Overhead"] == 100
    assert session.uci.values["UCI_Chess960"] is True


def test_chess960_castling_is_king_takes_rook(session):
    """With UCI_Chess960 a FEN's castling and the moves are read as Chess960: the king takes its rook."""
    fen = "1r1k2r1/pppppppp/8/8/8/8/PPPPPPPP/1R1K2R1 w GBgb - 0 1"
    session.send("setoption name UCI_Chess960 value true")
    assert session.send(f"position fen {fen} moves d1g1") == []
    board = session.uci.board
    assert board.chess960 and board.piece_at(chess.G1) == chess.Piece(chess.KING, chess.WHITE)
    assert board.piece_at(chess.F1) == chess.Piece(chess.ROOK, chess.WHITE)


def test_evalfile_changes_the_network(session, network, network_path):
    default = session.uci.network
    lines = session.send(f"setoption name EvalFile value {network_path}")
    assert info_strings(lines) == [f"network {network_path} loaded"]
    assert session.uci.network.architecture == network.architecture != default.architecture
    assert session.uci.values["EvalFile"] == str(network_path)


@pytest.mark.parametrize("fen, depth", [(KIWIPETE, 3), ("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", 4)])
def test_go_perft_prints_the_python_perft(session, fen, depth):
    lines = session.send(f"position fen {fen}", f"go perft {depth}", wait=True)
    board = chess.Board(fen)
    assert "\n".join(lines) == perft_text(board, perft(board, depth))


def test_go_perft_before_position_counts_the_start_position(session):
    lines = session.send("go perft 2", wait=True)
    assert info_strings(lines) == ["go before any position command: searching the start position"]
    assert lines[-2:] == ["Nodes searched: 400", ""]


def test_stop_abandons_a_perft(session):
    session.send("position startpos", "go perft 8")
    lines = session.send("isready", "stop", wait=True)
    assert lines[0] == "readyok"  # answered while counting
    assert info_strings(lines) == ["perft 8 stopped before it finished"]


def test_display_shows_the_board_and_fen(session):
    lines = session.send("position startpos moves e2e4 f7f6 d1h5", "d")
    board = chess.Board()
    for move in ("e2e4", "f7f6", "d1h5"):
        board.push_uci(move)
    assert lines[:8] == str(board).split("\n")
    assert lines[8:] == [f"Fen: {board.fen()}", "Checkers: h5"]


def test_bytes_that_are_not_text_are_said_and_survived():
    lines: list[str] = []
    UciSession(None, lines.append).run([b"\xff\xfe\x00garbage\n", b"isready\n", b"quit\n", b"isready\n"])
    assert lines[0].startswith("info string unknown command") and lines[1:] == ["readyok"]


def test_the_compile_notice_is_an_info_string():
    """The kernel cache's first-compile notice (logger ``nnue_infer``) reaches the GUI as an ``info string``
    while the session runs; the logger's level is restored after it."""
    import logging

    from nnue_infer.kernels.cache import NOTICE

    log = logging.getLogger("nnue_infer")
    level = log.level
    lines: list[str] = []

    def commands():
        yield "isready"
        log.info(NOTICE, "/cache/dir")  # as kernels.cache's compile listener says it
        yield "isready"

    UciSession(None, lines.append).run(commands())
    assert lines == ["readyok", "info string " + NOTICE % "/cache/dir", "readyok"]
    assert log.level == level


def test_pv_and_bestmove_castling_in_each_notation():
    """Castling goes out as the GUI's notation expects: ``e1g1`` in standard chess, king-takes-rook with
    UCI_Chess960."""
    from nnue_infer.search.uci import uci_line

    pv = [chess.Move.from_uci("e1g1"), chess.Move.from_uci("e8c8")]  # as python-chess's legal_moves give them
    assert uci_line(chess.Board(KIWIPETE), pv) == ["e1g1", "e8c8"]
    pv960 = [chess.Move.from_uci("e1h1"), chess.Move.from_uci("e8a8")]
    assert uci_line(chess.Board(KIWIPETE, chess960=True), pv960) == ["e1h1", "e8a8"]


# -- a real UCI client talking to `python -m nnue_infer uci` ----------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def engine_command() -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return [sys.executable, "-m", "nnue_infer", "uci"], env


class Pipe:
    """``nnue-infer uci`` on a plain pipe: :meth:`send` commands, :meth:`until` reads the lines up to the first
    that ``done`` accepts (failing after a generous deadline instead of hanging)."""

    def __init__(self) -> None:
        command, env = engine_command()
        self.proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, *commands: str) -> None:
        self.proc.stdin.write("".join(c + "\n" for c in commands))
        self.proc.stdin.flush()

    def until(self, done, deadline: float = 600) -> list[str]:
        got = []
        while True:
            line = self.lines.get(timeout=deadline)
            assert line is not None, f"the engine exited; it said {got}"
            got.append(line)
            if done(line):
                return got

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send("quit")
            self.proc.wait(timeout=60)
        self.proc.stdin.close()
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def pipe():
    p = Pipe()
    p.send("uci")
    p.until(lambda line: line == "uciok")
    # A first search compiles the kernels on a cold cache; its notice (an info string) comes here, not
    # among the lines a test counts.
    p.send("position startpos", "go depth 1")
    p.until(is_bestmove)
    p.send("ucinewgame", "isready")
    p.until(lambda line: line == "readyok")
    yield p
    p.close()


def bestmove(lines: list[str]) -> str:
    assert lines[-1].startswith("bestmove "), lines
    return lines[-1].split()[1]


def is_bestmove(line: str) -> bool:
    return line.startswith("bestmove")


@pytest.fixture(scope="module")
def client():
    command, env = engine_command()
    engine = chess.engine.SimpleEngine.popen_uci(command, env=env, timeout=120, stderr=subprocess.DEVNULL)
    yield engine
    engine.quit()


def test_python_chess_reads_the_options(client):
    assert client.id["name"] == "nnue-infer"
    assert client.options["Hash"].default == 16 and client.options["Threads"].max == 1
    assert client.options["UCI_Chess960"].type == "check"
    client.configure({"Hash": 4, "Move Overhead": 50})
    client.ping()


def test_evalfile_announces_the_starting_network_as_a_value_python_chess_reads(client, session, stockfish_binary):
    """``default`` is a word of the option line itself: the bundled network is announced as ``<empty>`` (as
    Stockfish announces an empty SyzygyPath), which python-chess reads back and the engine takes; a network
    named at start is announced by its name."""
    assert client.options["EvalFile"].default == "<empty>"
    assert "option name EvalFile type string default <empty>" in session.send("uci")
    named = Session("stockfish")
    assert "option name EvalFile type string default stockfish" in named.send("uci")
    assert repr(named.uci.network) != repr(session.uci.network)
    assert named.send("setoption name EvalFile value <empty>") == ["info string network default loaded"]
    assert named.uci.values["EvalFile"] == "<empty>" and repr(named.uci.network) == repr(session.uci.network)


def test_python_chess_plays_a_full_game_against_stockfish(client, stockfish_binary):
    """A whole game (to its end, or the 160th ply) against Debian's Stockfish 15.1 at its weakest limited
    strength, both at small node counts: every move legal."""
    board = chess.Board()
    client.configure({"Clear Hash": None})
    with chess.engine.SimpleEngine.popen_uci(str(stockfish_binary)) as stockfish:
        stockfish.configure({"UCI_LimitStrength": True, "UCI_Elo": 1350})
        while not board.is_game_over(claim_draw=True) and board.ply() < 160:
            engine = client if board.turn == chess.WHITE else stockfish
            result = engine.play(board, chess.engine.Limit(nodes=600 if engine is client else 2000))
            assert result.move in board.legal_moves, (board.fen(), result.move)
            board.push(result.move)
    assert board.is_game_over(claim_draw=True) or board.ply() == 160


def test_python_chess_analysis_gets_info(client):
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    info = client.analyse(board, chess.engine.Limit(depth=5))
    assert info["depth"] == 5 and info["seldepth"] >= 5 and info["nodes"] > 0
    assert info["score"].relative.score() is not None and "time" in info and "hashfull" in info
    replay = board.copy()
    for move in info["pv"]:
        assert move in replay.legal_moves
        replay.push(move)


def test_python_chess_finds_a_mate(client):
    board = chess.Board("6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1")  # back-rank mate in 1
    info = client.analyse(board, chess.engine.Limit(depth=3))
    assert info["score"].relative == chess.engine.Mate(1) and info["pv"][0] == chess.Move.from_uci("d1d8")


@pytest.mark.parametrize("fen, go", [
    ("4k3/8/8/8/8/8/3r4/K7 w - - 0 1", "go depth 1"),  # depth 1
    ("4k3/8/8/8/8/8/8/K2r4 w - - 0 1", "go nodes 50"),  # in check
    ("7k/8/8/8/8/8/8/K5R1 b - - 0 1", "go depth 6"),  # one legal move
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "go movetime 50"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "go wtime 1000 btime 1000 winc 10 binc 10"),
])
def test_bestmove_is_legal(pipe, fen, go):
    pipe.send(f"position fen {fen}", go)
    move = chess.Move.from_uci(bestmove(pipe.until(is_bestmove)))
    assert move in chess.Board(fen).legal_moves


@pytest.mark.parametrize("nodes", [700, 2000, 3450])
def test_last_info_pv_starts_with_the_bestmove(pipe, nodes):
    pipe.send("ucinewgame", "position startpos", f"go nodes {nodes}")
    lines = pipe.until(is_bestmove)
    last_info = [line for line in lines if line.startswith("info depth")][-1].split()
    assert last_info[last_info.index("pv") + 1] == bestmove(lines), lines


@pytest.mark.parametrize("fen, score", [("R6k/6pp/8/8/8/8/8/K7 b - - 0 1", "mate 0"),
                                        ("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", "cp 0")])
def test_no_legal_move_gives_bestmove_none_as_stockfish_does(pipe, client, stockfish_binary, fen, score):
    pipe.send(f"position fen {fen}", "go depth 5")
    lines = pipe.until(is_bestmove)
    assert lines[-2:] == [f"info depth 0 score {score}", "bestmove (none)"]
    with chess.engine.SimpleEngine.popen_uci(str(stockfish_binary)) as stockfish:
        assert stockfish.play(chess.Board(fen), chess.engine.Limit(depth=5)).move is None
    assert client.play(chess.Board(fen), chess.engine.Limit(depth=5)).move is None


def test_stop_right_after_go_gives_a_legal_move(pipe):
    pipe.send("position startpos moves e2e4 c7c5", "go infinite", "stop")
    assert chess.Move.from_uci(bestmove(pipe.until(is_bestmove))) in chess.Board(
        "rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq c6 0 2").legal_moves


def test_isready_and_stop_are_answered_during_go_infinite(pipe):
    pipe.send("position startpos", "go infinite")
    pipe.until(lambda line: line.startswith("info depth 2 "))
    pipe.send("isready")
    lines = pipe.until(lambda line: line == "readyok")
    assert not any(is_bestmove(line) for line in lines)  # an infinite search waits for stop
    pipe.send("stop")
    assert chess.Move.from_uci(bestmove(pipe.until(is_bestmove))) in chess.Board().legal_moves


def test_settings_wait_for_stop_during_a_search(pipe):
    """setoption, ucinewgame and a second go during a search are refused (said); position is taken, and
    the search goes on with the position it started from."""
    pipe.send("position startpos", "go infinite")
    pipe.until(lambda line: line.startswith("info depth 1 "))
    pipe.send("setoption name Hash value 32", "ucinewgame", "go depth 1", "position startpos moves g1f3", "isready")
    lines = pipe.until(lambda line: line == "readyok")
    assert [line for line in lines if line.startswith("info string")] == [
        "info string setoption name Hash ignored: a search is running (send stop first)",
        "info string ucinewgame ignored: a search is running (send stop first)",
        "info string go ignored: a search is running (send stop first)"]
    pipe.send("stop")
    assert chess.Move.from_uci(bestmove(pipe.until(is_bestmove))) in chess.Board().legal_moves
    pipe.send("setoption name Hash value 32", "go depth 2")  # after the bestmove: taken, from 1. Nf3
    board = chess.Board()
    board.push_uci("g1f3")
    assert chess.Move.from_uci(bestmove(pipe.until(is_bestmove))) in board.legal_moves


def test_bad_input_never_kills_the_engine(pipe):
    """Each bad command gets one info string; the engine then answers isready and still plays legal moves."""
    bad = ["position fen 8/8/8 w", "position startpos moves e2e4 e7e5 e1e3", "setoption name Nope value 1",
           "setoption name Hash value -5", "frobnicate", "ucinewgame now", "position fen 8/8/8/8/8/8/8/8 w - - 0 1",
           "setoption name EvalFile value /no/such.nnue"]
    pipe.send("position startpos moves d2d4", *bad, "isready")
    lines = pipe.until(lambda line: line == "readyok")
    said = [line for line in lines if line.startswith("info string") and "compiling kernels" not in line]
    assert len(said) == len(bad), lines
    pipe.send("go nodes 200")
    lines = pipe.until(is_bestmove)
    board = chess.Board()
    board.push_uci("d2d4")
    assert chess.Move.from_uci(bestmove(lines)) in board.legal_moves  # the position before the bad commands


def test_a_bad_go_parameter_is_said_and_the_search_runs_with_the_rest(pipe):
    pipe.send("position startpos", "go depth x nodes 300 wibble")
    lines = pipe.until(is_bestmove)
    assert [line for line in lines if line.startswith("info string")] == [
        "info string go depth: 'x' is not an integer; ignored",
        "info string go: unknown parameter 'wibble' ignored (known: " + ", ".join(GO_WORDS) + ")"]
    assert chess.Move.from_uci(bestmove(lines)) in chess.Board().legal_moves


def test_go_perft_over_uci_equals_the_python_perft(pipe):
    pipe.send(f"position fen {KIWIPETE}", "go perft 3")
    lines = pipe.until(lambda line: line.startswith("Nodes searched"))
    board = chess.Board(KIWIPETE)
    assert "\n".join(lines) + "\n" == perft_text(board, perft(board, 3))


def test_chess960_self_play_moves_are_in_chess960_notation(pipe):
    """Self-play from Chess960 starts with the pieces between king and rooks gone (castling open at once):
    every bestmove is exactly one of python-chess's Chess960 moves (``Move.from_uci`` of the text, so
    ``e1g1`` for a king-takes-rook castling would not match)."""
    pipe.send("setoption name UCI_Chess960 value true", "ucinewgame")
    for number in (12, 777):
        board = chess.Board.from_chess960_pos(number)
        for square in chess.SquareSet(board.occupied & (chess.BB_RANK_1 | chess.BB_RANK_8)
                                      & ~board.kings & ~board.rooks):
            board.remove_piece_at(square)
        start = board.fen()
        moves: list[str] = []
        while not board.is_game_over() and len(moves) < 16:
            pipe.send(f"position fen {start} moves {' '.join(moves)}".rstrip(), "go nodes 300")
            text = bestmove(pipe.until(is_bestmove))
            move = chess.Move.from_uci(text)
            assert move in list(board.legal_moves), (board.fen(), text)
            board.push(move)
            moves.append(text)
    pipe.send("setoption name UCI_Chess960 value false")

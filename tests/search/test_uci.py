"""The UCI engine (nnue_infer.search.uci): the protocol in process, line by line, and through a real UCI
client (python-chess's ``chess.engine``) talking to ``python -m nnue_infer uci``.

Every bad input is answered by one ``info string`` naming the problem, the state stays what it was, and
the engine answers ``isready`` afterwards.  Moves are checked with python-chess; perft against the Python
API (itself checked against the published totals and Stockfish in test_perft.py).
"""

from __future__ import annotations

import chess
import pytest

from nnue_infer.search import perft
from nnue_infer.search.perft import perft_text
from nnue_infer.search.uci import OPTIONS, UciSession

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

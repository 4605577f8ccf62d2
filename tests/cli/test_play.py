"""``nnue-infer perft`` and ``nnue-infer uci`` (nnue_infer/cli/play.py) through ``nnue_infer.cli.main(argv)``.

Perft's counts are checked against Debian's Stockfish 15.1's ``go perft``; the engine's protocol itself is
tested in tests/search/test_uci.py.
"""

from __future__ import annotations

import io
import sys

import chess
import pytest

from nnue_infer.cli import main


def run(capsys, argv):
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def counts(out: str) -> dict[str, int]:
    lines = out.split("\n")
    assert lines[-3:] == ["", f"Nodes searched: {sum(int(line.split(': ')[1]) for line in lines[:-3])}", ""]
    return {move: int(n) for move, n in (line.split(": ") for line in lines[:-3])}


@pytest.mark.parametrize("fen, chess960", [
    ("r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1", False),
    ("bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9", True),  # Shredder-FEN: Chess960
])
def test_perft_prints_stockfish_counts(capsys, stockfish, fen, chess960):
    status, out, err = run(capsys, ["perft", fen, "3"])
    assert status == 0, err
    assert counts(out) == stockfish.perft(fen, 3, chess960=chess960)


def test_perft_of_the_start_position(capsys):
    status, out, _ = run(capsys, ["perft", "startpos", "4"])
    assert status == 0 and "\nNodes searched: 197281\n" in out


def test_perft_reads_x_fen_as_chess960_when_told(capsys, stockfish):
    fen = "1r1k2r1/pppppppp/8/8/8/8/PPPPPPPP/1R1K2R1 w KQkq - 0 1"  # X-FEN: KQ are the outermost rooks
    status, out, err = run(capsys, ["perft", "--chess960", fen, "2"])
    assert status == 0, err
    assert "d1g1: " in out and counts(out) == stockfish.perft(fen, 2, chess960=True)


@pytest.mark.parametrize("argv, status, message", [
    (["perft", "8/8/8 w", "2"], 1, "error: the placement field does not have 8 ranks"),
    (["perft", "8/8/8/8/8/8/8/K7 w - - 0 1", "2"], 1, "error: Black must have exactly one king"),
    (["perft", "startpos", "0"], 2, "0 is not in the range 1<=x<=64"),
    (["perft", "startpos", "two"], 2, "'two' is not a valid integer"),
    (["uci", "--net", "/no/such/net.nnue"], 1, "error: '/no/such/net.nnue' is no known network name"),
])
def test_bad_arguments_are_named(capsys, argv, status, message):
    got, out, err = run(capsys, argv)
    assert (got, out) == (status, "") and message in err


def test_uci_answers_on_standard_output(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"uci\nisready\nposition startpos\ngo perft 1\n"
                                                                  b"quit\n")))
    status, out, _ = run(capsys, ["uci"])
    lines = out.split("\n")
    assert status == 0 and lines[:2] == ["id name nnue-infer", "id author the nnue-infer developers"]
    assert "uciok" in lines and "readyok" in lines and "Nodes searched: 20" in lines
    assert len([line for line in lines if line.endswith(": 1")]) == len(list(chess.Board().legal_moves))


def test_uci_finishes_a_search_with_limits_at_the_end_of_its_input(capsys, monkeypatch):
    """``printf 'position ...\\ngo nodes N\\n' | nnue-infer uci``: no quit, the whole search is printed."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"position startpos moves e2e4\ngo depth 3\n")))
    status, out, _ = run(capsys, ["uci"])
    lines = out.split("\n")
    assert status == 0 and lines[-1] == ""
    assert lines[-3].startswith("info depth 3 ") and lines[-2].startswith("bestmove ")
    board = chess.Board()
    board.push_uci("e2e4")
    assert chess.Move.from_uci(lines[-2].split()[1]) in board.legal_moves

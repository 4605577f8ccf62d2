"""Perft of the compiled move generator (nnue_infer.search.perft, kernels/chess/perft.py).

Oracles: the published totals of the Chess Programming Wiki's "Perft Results" page
(https://www.chessprogramming.org/Perft_Results: the start position, "Kiwipete" (position 2) and
positions 3, 4 (and its mirror), 5 and 6; the same totals Stockfish's ``tests/perft.sh`` checks),
Debian's Stockfish 15.1 ``go perft`` move by move (standard chess and Chess960), and a plain
python-chess counter on Chess960 starts and on positions reached by random playouts drawn by
hypothesis.
"""

from __future__ import annotations

import threading

import chess
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnue_infer.errors import PositionError
from nnue_infer.search import perft
from nnue_infer.search.perft import PerftStopped, perft_text

#: (FEN, depth, total) from https://www.chessprogramming.org/Perft_Results.
PUBLISHED = [
    pytest.param(chess.STARTING_FEN, 5, 4_865_609, id="start"),
    pytest.param("r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1", 5, 193_690_690,
                 id="kiwipete"),
    pytest.param("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", 6, 11_030_083, id="position3"),
    pytest.param("r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1", 5, 15_833_292, id="position4"),
    pytest.param("r2q1rk1/pP1p2pp/Q4n2/bbp1p3/Np6/1B3NBn/pPPP1PPP/R3K2R b KQ - 0 1", 5, 15_833_292,
                 id="position4-mirrored"),
    pytest.param("rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8", 5, 89_941_194, id="position5"),
    pytest.param("r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10", 5, 164_075_551,
                 id="position6"),
]


def python_chess_perft(board: chess.Board, depth: int) -> int:
    """Leaves ``depth`` plies below ``board`` by python-chess's own legal moves and ``push``."""
    if depth == 1:
        return board.legal_moves.count()
    total = 0
    for move in board.legal_moves:
        board.push(move)
        total += python_chess_perft(board, depth - 1)
        board.pop()
    return total


def python_chess_divide(board: chess.Board, depth: int) -> dict[chess.Move, int]:
    """:func:`python_chess_perft` below each root move."""
    counts = {}
    for move in board.legal_moves:
        board.push(move)
        counts[move] = python_chess_perft(board, depth - 1) if depth > 1 else 1
        board.pop()
    return counts


@pytest.mark.parametrize("fen, depth, total", PUBLISHED)
def test_published_perft_totals(fen, depth, total):
    assert sum(perft(chess.Board(fen), depth).values()) == total


@pytest.mark.parametrize("fen, chess960", [
    ("r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1", False),
    ("8/8/1k6/2b5/2pP4/8/5K2/8 b - d3 0 1", False),  # en passant out of a pawn's check
    ("bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9", True),  # Chess960 with castling
    ("2r1kr2/8/8/8/8/8/8/R3K2R w AHcf - 0 1", True),
])
def test_counts_per_root_move_equal_stockfish(stockfish, fen, chess960):
    """Debian's Stockfish 15.1 ``go perft 3``, move by move (castling as each notation writes it)."""
    board = chess.Board(fen, chess960=chess960)
    ours = {board.uci(move): n for move, n in perft(board, 3).items()}
    assert ours == stockfish.perft(fen, 3, chess960=chess960)


@pytest.mark.parametrize("number", [0, 518, 959, 284])
def test_chess960_starts_against_python_chess(number):
    """Chess960 starts, then the same with the back-rank pieces between kings and rooks removed
    (every castling move open), against python-chess's own count."""
    board = chess.Board.from_chess960_pos(number)
    assert perft(board, 3) == python_chess_divide(board, 3)
    between = board.occupied & (chess.BB_RANK_1 | chess.BB_RANK_8) & ~board.kings & ~board.rooks
    for square in chess.SquareSet(between):
        board.remove_piece_at(square)
    assert perft(board, 2) == python_chess_divide(board, 2)


@st.composite
def playouts(draw):
    """A position after up to 80 random legal plies from the standard start or a Chess960 start."""
    chess960 = draw(st.booleans())
    board = chess.Board.from_chess960_pos(draw(st.integers(0, 959))) if chess960 else chess.Board()
    for _ in range(draw(st.integers(0, 80))):
        moves = list(board.legal_moves)
        if not moves:
            break
        board.push(moves[draw(st.integers(0, len(moves) - 1))])
    return board


@given(playouts(), st.sampled_from([2, 2, 3]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_random_playouts_against_python_chess(board, depth):
    assert perft(board, depth) == python_chess_divide(board, depth)


@pytest.mark.parametrize("fen", ["7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", "R6k/6pp/8/8/8/8/8/K7 b - - 0 1"])
def test_no_legal_move_counts_nothing(fen):
    assert perft(chess.Board(fen), 3) == {}


def test_the_board_is_left_unchanged():
    board = chess.Board()
    board.push_uci("e2e4")
    before = (board.fen(), list(board.move_stack))
    perft(board, 3)
    assert (board.fen(), list(board.move_stack)) == before


@pytest.mark.parametrize("depth", [0, -1, 65, 2.0, "3", True])
def test_a_bad_depth_is_refused(depth):
    with pytest.raises(ValueError, match="perft depth must be an integer from 1 to 64"):
        perft(chess.Board(), depth)


@pytest.mark.parametrize("board, message", [
    (chess.Board("8/8/8/8/8/8/8/K7 w - - 0 1"), "Black must have exactly one king"),
    (chess.Board("kk6/8/8/8/8/8/8/K7 w - - 0 1"), "Black must have exactly one king, found 2"),
    (chess.Board("k7/8/8/8/8/8/8/KP6 w - - 0 1"), "pawn on the first or last rank: b1"),
])
def test_an_unplayable_position_is_refused(board, message):
    with pytest.raises(PositionError, match=message):
        perft(board, 2)


def test_a_variant_board_is_refused():
    import chess.variant

    with pytest.raises(PositionError, match="atomic"):
        perft(chess.variant.AtomicBoard(), 2)


def test_stop_from_another_thread_abandons_the_count():
    """The compiled walk releases the GIL: a flag set from another thread ends a count of 3e9 leaves (minutes)."""
    stop = np.zeros(1, np.uint8)
    timer = threading.Timer(0.5, stop.__setitem__, (0, 1))
    timer.start()
    try:
        with pytest.raises(PerftStopped, match="perft 7 stopped"):
            perft(chess.Board(), 7, stop=stop)
    finally:
        timer.cancel()


def test_report_is_stockfish_text(stockfish):
    """``move: count`` lines, a blank line, ``Nodes searched: N``: the counts Stockfish prints."""
    board = chess.Board()
    text = perft_text(board, perft(board, 2))
    lines = text.split("\n")
    assert lines[-3:] == ["", "Nodes searched: 400", ""]
    assert dict((m, int(n)) for m, n in (line.split(": ") for line in lines[:-3])) == \
        stockfish.perft(chess.STARTING_FEN, 2)


def test_the_kernel_files_of_subfolders_are_stamped():
    """The kernel cache's stamp covers kernels/chess/perft.py: an edit there compiles its kernels again."""
    from nnue_infer.kernels import cache
    from nnue_infer.kernels.chess import perft as kernel

    cache.kernels_stamp()
    assert "chess/perft.py" in cache.STAMPED and "chess/movegen.py" in cache.STAMPED
    assert cache.stamped_as_imported(kernel.__file__)
    assert isinstance(kernel.perft._cache._impl.locator, cache.KernelCacheLocator)

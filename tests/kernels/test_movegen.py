"""The compiled legal move generator (kernels/chess/movegen.py) against python-chess: the same moves in
the same order as ``board.legal_moves``, and the same position after each as ``board.push``.

Positions: random placements drawn by hypothesis (castling rights, en passant squares and
Chess960 included, checks and pins wherever they fall), random games from the standard and
Chess960 starts, the dev corpus, and hand-picked check / pin / en passant / promotion /
castling positions (among them the perft positions of the Chess Programming Wiki).
"""

from __future__ import annotations

import random

import chess
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnue_infer.children import decode_moves, move_code
from nnue_infer.kernels.chess.movegen import MAX_MOVES, legal_moves, play

TRICKY = [
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",  # "kiwipete"
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1",
    "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8",
    "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
    "8/8/8/K2pP2q/8/8/8/7k w - d6 0 2",  # en passant would expose the king along the rank
    "8/8/8/KPp4r/8/8/8/7k w - c6 0 2",  # the same, the other way round
    "8/8/3k4/8/2pP4/8/8/3K1B2 b - d3 0 1",  # en passant captures the checking pawn
    "4k3/8/8/2KpP3/8/8/8/8 w - d6 0 1",  # en passant out of a pawn check
    "8/8/1k6/2b5/2pP4/8/5K2/8 b - d3 0 1",  # en passant by a pinned-looking pawn
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",
    "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1",
    "r3k2r/8/8/8/4q3/8/8/R3K2R w KQkq - 0 1",  # castling out of check refused
    "r3k2r/8/8/8/8/6q1/8/R3K2R w KQkq - 0 1",  # through an attacked square
    "1r2k2r/8/8/8/8/8/8/R3K1R1 w Qk - 0 1",
    "3k4/1P6/8/8/8/8/6p1/3K1N2 w - - 0 1",  # promotions, with and without capture
    "2r1k3/1P6/8/8/8/8/8/4K3 w - - 0 1",
    "4k3/8/8/8/8/8/8/r3K2R w K - 0 1",  # in check from the a1 rook: no castling
    "4k3/8/8/8/1b6/8/3P4/4K3 w - - 0 1",  # pinned pawn
    "4k3/4r3/8/8/8/8/4B3/4K3 w - - 0 1",  # pinned bishop
    "4k3/8/8/8/8/5n2/3r4/4K3 w - - 0 1",  # double check
    "k7/8/8/8/8/8/8/K6R b - - 0 1",
    "7k/8/8/8/8/8/8/K7 w - - 0 1",
    "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1",  # stalemate: no moves
    "R6k/6pp/8/8/8/8/8/K7 b - - 0 1",  # checkmate: no moves
]

CHESS960_TRICKY = [
    "1rk1r3/8/8/8/8/8/8/1RK1R3 w EBeb - 0 1",
    "rk6/8/8/8/8/8/8/RK6 w Aa - 0 1",  # king next to the a-side rook: castling lands on c1
    "5rkr/8/8/8/8/8/8/5RKR w FHfh - 0 1",
    "r5kr/8/8/8/8/8/8/R5KR b AHah - 0 1",
    "2r1kr2/8/8/8/8/8/8/2R1KR2 w CFcf - 0 1",
    "4k3/8/8/8/8/8/8/2RK1R2 w CF - 0 1",
]


def kernel_moves(board: chess.Board) -> tuple[list[chess.Move], np.ndarray, np.ndarray]:
    bitboards = np.array([board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                          board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK]], np.uint64).view(np.int64)
    out = np.empty(MAX_MOVES, np.uint16)
    castling = np.uint64(board.clean_castling_rights()).view(np.int64)
    n = legal_moves(bitboards, 0 if board.turn else 1, castling, board.ep_square or 0, board.chess960, out)
    return decode_moves(out[:n]), bitboards, out[:n]


def assert_same_moves(board: chess.Board, check_children: bool = True) -> None:
    """Moves and order equal to ``board.legal_moves``; each child's bitboards equal ``board.push``'s."""
    got, bitboards, codes = kernel_moves(board)
    expected = list(board.legal_moves)
    assert set(got) == set(expected), board.fen()
    assert got == expected, board.fen()
    if check_children:
        child = np.empty(8, np.int64)
        ep = board.ep_square or 0
        for move, code in zip(expected, codes.tolist()):
            play(bitboards, 0 if board.turn else 1, code, ep, child)
            board.push(move)
            want = [board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                    board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK]]
            board.pop()
            assert child.view(np.uint64).tolist() == want, (board.fen(), move.uci())


@pytest.mark.parametrize("fen", TRICKY)
def test_tricky_positions(fen):
    assert_same_moves(chess.Board(fen))


@pytest.mark.parametrize("fen", CHESS960_TRICKY)
def test_tricky_chess960(fen):
    assert_same_moves(chess.Board(fen, chess960=True))


def test_two_plies_of_the_perft_positions():
    """Every position two plies from each hand-picked one (about 20,000 positions)."""
    for fen in TRICKY[:5]:
        board = chess.Board(fen)
        for move in board.legal_moves:
            board.push(move)
            assert_same_moves(board, check_children=False)
            for reply in board.legal_moves:
                board.push(reply)
                assert_same_moves(board, check_children=False)
                board.pop()
            board.pop()


def test_every_chess960_start():
    for n in range(960):
        board = chess.Board.from_chess960_pos(n)
        assert_same_moves(board)
        # castling becomes possible once the pieces between king and rooks are gone
        for sq in chess.SquareSet(board.occupied & (chess.BB_RANK_1 | chess.BB_RANK_8) & ~board.kings & ~board.rooks):
            board.remove_piece_at(sq)
        assert_same_moves(board)


def test_dev_corpus(corpus):
    for row in corpus:
        assert_same_moves(chess.Board(row["fen"], chess960=row.get("chess960", False)))


def test_random_games():
    rng = random.Random(2026)
    for game in range(60):
        board = chess.Board.from_chess960_pos(rng.randrange(960)) if game % 2 else chess.Board()
        for _ in range(160):
            assert_same_moves(board)
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))


@st.composite
def placements(draw):
    """A board with one king per side, up to 20 other pieces (no pawns on the back ranks), random
    castling rights (python-chess cleans them), en passant square, side to move and Chess960 flag."""
    board = chess.Board(None, chess960=draw(st.booleans()))
    squares = draw(st.lists(st.integers(0, 63), min_size=2, max_size=22, unique=True))
    board.set_piece_at(squares[0], chess.Piece(chess.KING, chess.WHITE))
    board.set_piece_at(squares[1], chess.Piece(chess.KING, chess.BLACK))
    for sq in squares[2:]:
        kind = draw(st.sampled_from([chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN]))
        if kind == chess.PAWN and chess.square_rank(sq) in (0, 7):
            kind = chess.ROOK  # rooks on the back ranks also make castling rights
        board.set_piece_at(sq, chess.Piece(kind, draw(st.booleans())))
    board.turn = draw(st.booleans())
    board.castling_rights = draw(st.integers(0, (1 << 64) - 1)) & (chess.BB_RANK_1 | chess.BB_RANK_8)
    board.ep_square = draw(st.one_of(st.none(), st.integers(16, 23), st.integers(40, 47), st.integers(0, 63)))
    return board


@given(placements())
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_placements(board):
    """Any placement with one king each, checks (also of the side not to move), pins and odd en
    passant squares included: python-chess's moves and children exactly."""
    assert_same_moves(board)


def test_move_codes_round_trip():
    board = chess.Board("r3k2r/1P6/8/8/8/8/6p1/R3K2R w KQkq - 0 1")
    moves = list(board.legal_moves)
    codes = np.array([move_code(m) for m in moves], np.uint16)
    assert decode_moves(codes) == moves
    assert any(m.promotion for m in moves) and board.is_castling(chess.Move.from_uci("e1g1"))

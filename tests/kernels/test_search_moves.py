"""The search's move making (``kernels.search.alphabeta.make_move``) and Zobrist keys
(``kernels.search.zobrist``) against python-chess: after every legal move of random games (standard
chess and Chess960, with castling, en passant and promotions), the bitboards, castling rights, en
passant square, halfmove clock and checkers equal ``Board.push``'s and the key equals
``chess.polyglot.zobrist_hash``."""

from __future__ import annotations

import random

import chess
import chess.polyglot
import numpy as np
import pytest

from nnue_infer.kernels.search import alphabeta as A
from nnue_infer.kernels.search.zobrist import position_key
from nnue_infer.search import Engine


def _int64(x: int) -> int:
    return int(np.array(x, np.uint64).view(np.int64))


def _bitboards(board: chess.Board) -> np.ndarray:
    return np.array([board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                     board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK]], np.uint64).view(np.int64)


def _games(seed: int, n: int):
    """Boards along ``n`` random games (every fifth from a Chess960 start), preferring captures,
    castling, double pushes and promotions so that each kind of move comes up often."""
    rng = random.Random(seed)
    for g in range(n):
        board = chess.Board.from_chess960_pos(rng.randrange(960)) if g % 5 == 4 else chess.Board()
        for _ in range(rng.randrange(10, 120)):
            moves = list(board.legal_moves)
            if not moves:
                break
            special = [m for m in moves if board.is_castling(m) or m.promotion or board.is_capture(m)
                       or (board.piece_type_at(m.from_square) == chess.PAWN and abs(m.to_square - m.from_square) == 16)]
            board.push(rng.choice(special if special and rng.random() < 0.5 else moves))
            yield board


@pytest.fixture(scope="module")
def arena():
    engine = Engine("stockfish")  # make_move also writes the position to the engine's accumulator stack
    return engine, engine._evaluator._address


def test_position_key_equals_polyglot_zobrist_hash():
    for board in _games(1, 40):
        key = position_key(_bitboards(board), 0 if board.turn else 1, _int64(board.clean_castling_rights()),
                           board.ep_square or 0)
        assert key == _int64(chess.polyglot.zobrist_hash(board)), board.fen()


def test_make_move_equals_board_push(arena):
    engine, address = arena
    positions = np.zeros((A.MAX_PLY + 2, A.POS_COLUMNS), np.int64)
    checked = 0
    for board in _games(2, 25):
        row = positions[0]
        row[:8] = _bitboards(board)
        row[A.P_STM] = 0 if board.turn else 1
        row[A.P_CASTLING] = _int64(board.clean_castling_rights())
        row[A.P_EP] = board.ep_square or 0
        row[A.P_RULE50] = board.halfmove_clock
        for move in board.legal_moves:
            code = move.from_square | move.to_square << 6 | (move.promotion or 0) << 12
            A.make_move(positions, 0, code, address)
            child = board.copy(stack=False)
            child.push(move)
            got = positions[1]
            assert list(got[:8]) == list(_bitboards(child)), (board.fen(), move)
            assert got[A.P_STM] == (0 if child.turn else 1)
            assert got[A.P_CASTLING] == _int64(child.clean_castling_rights()), (board.fen(), move)
            assert got[A.P_EP] == (child.ep_square or 0), (board.fen(), move)
            assert got[A.P_RULE50] == child.halfmove_clock, (board.fen(), move)
            assert got[A.P_KEY] == _int64(chess.polyglot.zobrist_hash(child)), (board.fen(), move)
            assert got[A.P_CHECKERS] == _int64(child.checkers_mask()), (board.fen(), move)
            pair = engine._evaluator._stack_base + 1  # stack ply 1: the child, not yet computed
            assert list(engine._evaluator._state[pair, 0, :8]) == list(got[:8])
            assert list(engine._evaluator._state[pair, :, 8]) == [0, 0]
            engine._evaluator._state[pair, :, 8] = 1
            checked += 1
    assert checked > 5000

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
    for board in _games(2, 12):
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
    assert checked > 2000


def test_capture_moves_are_the_legal_captures_and_promotions():
    buffer = np.zeros(A.MAX_MOVES if hasattr(A, "MAX_MOVES") else 1024, np.uint16)
    row = np.zeros(A.POS_COLUMNS, np.int64)
    checked = 0
    for board in _games(3, 30):
        if board.is_check():
            continue
        row[:8] = _bitboards(board)
        row[A.P_STM] = 0 if board.turn else 1
        row[A.P_EP] = board.ep_square or 0
        n = A.capture_moves(row, buffer)
        got = sorted(int(c) for c in buffer[:n])
        want = sorted(m.from_square | m.to_square << 6 | (m.promotion or 0) << 12 for m in board.legal_moves
                      if board.is_capture(m) or m.promotion)
        assert got == want, board.fen()
        checked += n
    assert checked > 500


_VALUES = {chess.PAWN: 100, chess.KNIGHT: 300, chess.BISHOP: 300, chess.ROOK: 500, chess.QUEEN: 900, chess.KING: 20000}


def _exchange(board: chess.BaseBoard, square: int, side: bool) -> int:
    """What ``side`` gains by capturing on ``square`` with its least valuable attacker, then the
    other side likewise, each stopping when it no longer pays (the textbook swap, on python-chess's
    attack sets of the pieces left on the board: x-rays open as pieces leave)."""
    attackers = [s for s in board.attackers(side, square)]
    if not attackers:
        return 0
    frm = min(attackers, key=lambda s: _VALUES[board.piece_type_at(s)])
    captured = _VALUES[board.piece_type_at(square)]
    after = board.copy()
    after.set_piece_at(square, after.remove_piece_at(frm))
    return max(0, captured - _exchange(after, square, not side))


def _see(board: chess.Board, move: chess.Move) -> int:
    base = chess.BaseBoard(board.board_fen())
    victim = _VALUES[chess.PAWN] if board.is_en_passant(move) else _VALUES[board.piece_type_at(move.to_square)]
    if board.is_en_passant(move):
        base.remove_piece_at(move.to_square + (-8 if board.turn else 8))
    piece = base.remove_piece_at(move.from_square)
    if move.promotion:
        victim += _VALUES[move.promotion] - _VALUES[chess.PAWN]
        piece = chess.Piece(move.promotion, board.turn)
    base.set_piece_at(move.to_square, piece)
    return victim - _exchange(base, move.to_square, not board.turn)


def test_see_ge_agrees_with_the_swap_on_the_board():
    from nnue_infer.kernels.search.ordering import see_ge

    checked = 0
    for board in _games(4, 30):
        bitboards = _bitboards(board)
        for move in board.legal_moves:
            if not board.is_capture(move) or board.is_castling(move):
                continue
            code = move.from_square | move.to_square << 6 | (move.promotion or 0) << 12
            value = _see(board, move)
            for threshold in (-400, -1, 0, 1, 100, 200, 300):
                assert see_ge(bitboards, 0 if board.turn else 1, code, board.ep_square or 0, threshold) == (
                    value >= threshold), (board.fen(), move, value, threshold)
            checked += 1
    assert checked > 300

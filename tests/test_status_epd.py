"""Compiled helpers of the file mode: check/checkmate/stalemate flags (against python-chess) and EPD splitting."""

from __future__ import annotations

import random

import chess
import numpy as np

from nnue_infer.batch import fen_buffer
from nnue_infer.epd import read_epd
from nnue_infer.kernels import status as KS

#: Positions where the only legal move is special, or none is: e.p. as the only move, pinned e.p. pawn,
#: smothered mate, stalemates with pins, promotion as the only move.
SPECIAL = [
    "8/8/8/2k5/3Pp3/8/8/3K4 b - d3 0 1",
    "8/8/8/8/k2Pp2Q/8/8/3K4 b - d3 0 1",
    "8/8/8/8/1k1Pp2R/8/8/3K4 b - d3 0 1",
    "6rk/5Npp/8/8/8/8/8/6K1 b - - 0 1",
    "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1",
    "k7/P7/1K6/8/8/8/8/8 b - - 0 1",
    "8/8/8/8/8/5k2/4p3/4K3 w - - 0 1",
    "k7/2Q5/8/8/8/8/8/7K b - - 0 1",
    "8/8/8/8/8/8/p7/k1K5 b - - 0 1",
    "1k6/1P6/1K6/8/8/8/8/8 b - - 0 1",
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "K7/2k5/1p6/8/8/8/8/8 w - - 0 1",
    "8/8/8/8/8/8/1k6/K1q5 w - - 0 1",
]


def random_positions(seed: int, games: int) -> list[str]:
    rng = random.Random(seed)
    fens = []
    for _ in range(games):
        board = chess.Board()
        while not board.is_game_over() and len(board.move_stack) < 250:
            fens.append(board.fen())
            board.push(rng.choice(list(board.legal_moves)))
        fens.append(board.fen())
    return fens


def expected(fen: str) -> tuple[bool, int]:
    b = chess.Board(fen)
    return b.is_check(), KS.CHECKMATE if b.is_checkmate() else KS.STALEMATE if b.is_stalemate() else KS.NONE


def test_status_matches_python_chess():
    fens = SPECIAL + random_positions(7, 40) + ["8/8/8/8/8/8/8/8 w - - 0 1", "not a fen"]
    buf, offsets = fen_buffer(fens)
    check, outcome = np.empty(len(fens), bool), np.empty(len(fens), np.int8)
    KS.status_fens(buf, offsets, 32, check, outcome)
    got = list(zip(check.tolist(), outcome.tolist()))
    assert got[-2:] == [(False, KS.UNKNOWN)] * 2
    assert got[:-2] == [expected(f) for f in fens[:-2]]
    kinds = {o for _, o in got}
    assert {KS.NONE, KS.CHECKMATE, KS.STALEMATE} <= kinds  # the sample covers every outcome


def test_status_from_bitboards():
    from nnue_infer.batch import board_bitboards_batch

    boards = [chess.Board(f) for f in SPECIAL]
    bitboards, stm = board_bitboards_batch(boards)
    ep = np.array([-1 if b.ep_square is None else b.ep_square for b in boards], np.int64)
    check, outcome = np.empty(len(boards), bool), np.empty(len(boards), np.int8)
    KS.status_bitboards(bitboards, stm, ep, check, outcome)
    assert list(zip(check.tolist(), outcome.tolist())) == [expected(f) for f in SPECIAL]


def test_epd_lines_fields_and_operations():
    text = (b'\xef\xbb\xbf# comment\n'
            b'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\n\n'
            b'r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - bm Bb5; id "Petrov; x";\r\n'
            b'   4k3/8/8/8/8/8/8/4K3 b\n'
            b'4k3/8/8/8/8/8/8/4K3 w - - 5\n'
            b'4k3/8/8/8/8/8/8/4K3 w - - noop; id "last"\n'
            b'4k3/8/8/8/8/8/8/4K3 w - - c0 \xff')
    rows = read_epd(text)
    assert rows.line.tolist() == [2, 4, 5, 6, 7, 8]
    assert rows.fen.to_list() == ["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
                                  "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq -",
                                  "4k3/8/8/8/8/8/8/4K3 b", "4k3/8/8/8/8/8/8/4K3 w - - 5",
                                  "4k3/8/8/8/8/8/8/4K3 w - -", "4k3/8/8/8/8/8/8/4K3 w - -"]
    assert [rows.missing_field(i) for i in range(len(rows))] == [None, None, "castling rights", "full-move number",
                                                                 None, None]
    assert {k: v.to_list() for k, v in rows.operations.items()} == {
        "bm": [None, "Bb5", None, None, None, None],
        "id": [None, "Petrov; x", None, None, "last", None],
        "noop": [None, None, None, None, "", None],
        "c0": [None, None, None, None, None, "\ufffd"],
    }
    buf, offsets = rows.fen_buffer()
    assert bytes(buf).decode().split("\n")[:-1] == rows.fen.to_list() and offsets[-1] == buf.size

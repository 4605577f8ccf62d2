"""Compiled helpers of the file mode: check/checkmate/stalemate flags (against python-chess) and EPD splitting."""

from __future__ import annotations

import random

import chess
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nnue_infer.io.epd import read_epd
from nnue_infer.kernels import status as KS
from nnue_infer.io.score import CHECKMATE, NONE, STALEMATE, outcomes, parse_and_flag
from nnue_infer.positions import fen_buffer

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


def play(seed: int, plies: int, chess960: bool) -> list[chess.Board]:
    """Boards along one random legal game (captures, checks and promotions preferred, so that games end)."""
    rng = random.Random(seed)
    board = chess.Board.from_chess960_pos(rng.randrange(960)) if chess960 else chess.Board()
    boards = [board.copy()]
    while len(boards) <= plies and not board.is_game_over():
        moves = list(board.legal_moves)
        forcing = [m for m in moves if board.is_capture(m) or board.gives_check(m) or m.promotion]
        board.push(rng.choice(forcing if forcing and rng.random() < 0.6 else moves))
        boards.append(board.copy())
    return boards


def check_sound(boards: list[chess.Board]) -> tuple[int, int]:
    """The compiled flags of the boards' FENs against python-chess; (rows decided in compiled code, rows)."""
    fens = [b.fen() for b in boards]
    buf, offsets = fen_buffer(fens)
    _, _, codes, _, check, flagged = parse_and_flag(buf, offsets)
    assert not codes.any()
    outcome = outcomes(flagged, np.ones(len(boards), bool), fens, np.array([b.chess960 for b in boards]))
    for b, c, f, o in zip(boards, check.tolist(), flagged.tolist(), outcome.tolist()):
        assert c == b.is_check(), b.fen()
        verdict = CHECKMATE if b.is_checkmate() else STALEMATE if b.is_stalemate() else NONE
        assert o == verdict, b.fen()
        if f != KS.OUTCOME_ASK:
            assert f == verdict, b.fen()  # the filter is sound, the compiled legal-move count right
        else:
            assert not b.is_check() and b.castling_rights, b.fen()  # python-chess only where castling could matter
    return int((flagged != KS.OUTCOME_ASK).sum()), len(boards)


def test_special_positions():
    check_sound([chess.Board(f) for f in SPECIAL])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), plies=st.integers(0, 300), chess960=st.booleans())
def test_status_of_random_games_agrees_with_python_chess(seed, plies, chess960):
    check_sound(play(seed, plies, chess960))


def test_filter_clears_most_positions_and_sees_mates_and_stalemates():
    boards = [b for seed in range(30) for b in play(seed, 400, seed % 5 == 0)]
    boards += [chess.Board(f) for f in SPECIAL]
    decided, n = check_sound(boards)
    assert decided >= 0.9 * n  # python-chess is asked about the few others only
    assert any(b.is_checkmate() for b in boards) and any(b.is_stalemate() for b in boards)


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

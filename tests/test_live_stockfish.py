"""Live comparison with /usr/games/stockfish on positions this test generates itself.

Seeded random legal playouts (uniform and capture-biased, standard and Chess960) and random
placements; for each, Stockfish's ``eval`` text (piece-value board, bucket table, NNUE line)
must equal :meth:`Trace.format_stockfish` byte for byte.  One engine process for all of them.
"""

from __future__ import annotations

import chess
import numpy as np
import pytest

import reference as R
from stockfish_uci import INFO_LINE, nnue_part

SEED = 151


def generated_positions() -> list[tuple[chess.Board, bool]]:
    """(board, chess960) pairs: 160 uniform playouts, 100 capture-biased, 40 Chess960, 40 placements."""
    rng = np.random.default_rng(SEED)
    out = [(R.random_board(rng, max_plies=160), False) for _ in range(160)]
    out += [(R.random_board(rng, max_plies=200, capture_bias=0.8), False) for _ in range(100)]
    out += [(R.random_board(rng, max_plies=80, chess960=True, capture_bias=0.3), True) for _ in range(40)]
    out += [(R.random_placement(rng, int(rng.integers(2, 33))), False) for _ in range(40)]
    return out


def test_engine_identity(stockfish):
    assert "id name Stockfish 15.1" in stockfish.id_lines


def test_live_traces_equal_stockfish(stockfish, evaluator):
    positions = generated_positions()
    compared, in_check, bad = 0, 0, []
    pieces = set()
    for board, chess960 in positions:
        fen = board.fen()
        lines = stockfish.eval_lines(fen, chess960=chess960)
        assert lines[0] == INFO_LINE, (fen, lines[:2])
        want = nnue_part(lines)
        trace = evaluator.trace(board)
        if want is None:
            assert board.is_check(), f"Stockfish says in check, python-chess does not: {fen}"
            in_check += 1
            continue
        assert not board.is_check(), fen
        compared += 1
        pieces.add(chess.popcount(board.occupied))
        got = trace.format_stockfish().split("\n")
        if got != want:
            i = next(i for i, (a, b) in enumerate(zip(got + [""] * 99, want + [""] * 99)) if a != b)
            bad.append(f"{fen} (chess960={chess960}): line {i}: ours {got[i]!r}, Stockfish {want[i]!r}")
    assert not bad, f"{len(bad)} of {compared} positions differ:\n" + "\n".join(bad[:10])
    assert compared >= 250 and in_check < 80, (compared, in_check)
    assert len(pieces) >= 25, f"piece counts covered: {sorted(pieces)}"


@pytest.mark.parametrize("fen", [
    # Chess960 start position no. 0 and a position with Shredder-FEN castling rights.
    "bbqnnrkr/pppppppp/8/8/8/8/PPPPPPPP/BBQNNRKR w HFhf - 0 1",
    "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9",
])
def test_chess960_castling_fields(stockfish, evaluator, fen):
    board = chess.Board(fen, chess960=True)
    want = nnue_part(stockfish.eval_lines(fen, chess960=True))
    assert evaluator.trace(board).format_stockfish().split("\n") == want

"""Result tables of :mod:`nnue_infer.io.score`: where each row came from."""

from __future__ import annotations

import numpy as np
import pytest

from nnue_infer.io.score import empty_table, score_pgn

PGN = """% a comment line before the first game

[Event "first"]
[Site "?"]

1. e4 e5 2. Nf3 *

[Event "second"]

1. d4 d5 2. Kd3 Qxd4 *


[Event "third"]
1. c4 *
"""


def _first_lines(text: str) -> list[int]:
    """Lines (1-based) where each game's first tag stands, counted here by hand."""
    return [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("[Event ")]


def test_pgn_rows_carry_their_games_first_line(evaluator):
    """EPD rows carry their line; PGN rows carried their game and ply only: each row, error rows too, now carries
    its game's first line, as :class:`nnue_infer.io.pgn.PgnError` names it."""
    tables = [t for t, _ in score_pgn(evaluator, PGN.splitlines(keepends=True), source="x.pgn")]
    game = np.concatenate([t["game"] for t in tables])
    line = np.concatenate([t["line"] for t in tables])
    errors = [e for t in tables for e in t["error"].to_list()]
    starts = _first_lines(PGN)
    assert starts == [3, 8, 13]
    assert line.tolist() == [starts[g - 1] for g in game.tolist()]
    assert sum(e is not None for e in errors) == 1  # 2. Kd3 (the king cannot reach d3): an error row, line 8
    assert list(tables[0])[:3] == ["game", "line", "event"]


def test_an_empty_pgn_table_has_the_line_column():
    assert list(empty_table("pgn"))[:2] == ["game", "line"]
    assert empty_table("pgn")["line"].dtype == np.int64

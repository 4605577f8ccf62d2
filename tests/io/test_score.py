"""An input without positions (an empty EPD file, one of comments only, an empty PGN file) written by
``nnue-infer eval`` gets the usual columns with no rows: the CSV header, and a Parquet file of the
same schema as a file with positions (fresh-user trial: the Parquet file had no columns at all, while
the CSV had its header and a dataset's part all its columns)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from nnue_infer.cli import main
from nnue_infer.io.score import empty_table, score_pgn
import chess

pq = pytest.importorskip("pyarrow.parquet")

FEN = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
GAME = '[Event "e"]\n[White "w"]\n[Black "b"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 *\n'


def _run(tmp_path, kind, content, suffix, *options):
    """Score ``content`` as ``--epd`` / ``--pgn`` into a file ending in ``suffix``; that file's path."""
    src = tmp_path / f"in-{abs(hash(content))}.{kind}"
    src.write_text(content)
    out = tmp_path / f"out-{abs(hash(content))}-{len(options)}{suffix}"
    assert main(["eval", f"--{kind}", str(src), "-o", str(out), "-q", *options]) == 0
    return out


@pytest.mark.parametrize("kind,content,full", [("epd", "", FEN + "\n"), ("epd", "# only a comment\n\n", FEN + "\n"),
                                               ("pgn", "", GAME), ("pgn", "\n\n", GAME)])
@pytest.mark.parametrize("options", [(), ("--keep-errors",)])
def test_empty_input_gets_the_usual_columns(tmp_path, kind, content, full, options):
    expected = pq.read_schema(_run(tmp_path, kind, full, ".parquet", *options))
    table = pq.read_table(_run(tmp_path, kind, content, ".parquet", *options))
    assert table.num_rows == 0 and len(expected.names) >= 7
    assert table.schema.remove_metadata() == expected.remove_metadata()
    with open(_run(tmp_path, kind, content, ".csv", *options), newline="") as f:
        assert list(csv.reader(f)) == [expected.names]


# -- hostile input ---------------------------------------------------------------------------------------------------

START = chess.STARTING_FEN


def test_epd_with_invalid_utf8_and_bom_reports_lines(tmp_path, capsys, evaluator):
    """Invalid UTF-8 in an EPD file crashed ``eval --epd`` with a UnicodeDecodeError traceback;
    now that line is a FEN error like any other, and a UTF-8 byte-order mark is skipped."""
    from nnue_infer.cli import main

    path = tmp_path / "bad.epd"
    path.write_bytes(b"\xef\xbb\xbf" + START.encode() + b"\n\xff\xfe garbage\n" + START.encode() + b" bm e4;\n")
    status = main(["eval", "--net", "stockfish", "--epd", str(path)])
    captured = capsys.readouterr()
    assert status == 1
    rows = [line.split(",") for line in captured.out.splitlines()[1:]]  # line,fen,value,...
    assert [(r[0], r[1], int(r[2])) for r in rows] == [("1", START, evaluator.evaluate(START)),
                                                       ("3", START, evaluator.evaluate(START))]
    assert captured.err.startswith(f"error: {path}:2: ") and len(captured.err.splitlines()) == 1


# Where each row came from

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
    its game's first line, as :class:`nnue_infer.io.pgn.PgnProblem` names it."""
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

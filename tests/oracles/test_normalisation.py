"""``wdl(value, material, version)`` against the live engines' ``info ... wdl W D L`` lines.

Each engine (Debian's Stockfish 15.1; Stockfish 16, 17.1, 18 and 19 under Node.js) searches a
few generated positions with ``UCI_ShowWDL`` on; every ``info`` line with a ``score cp`` gives
the printed centipawns and the printed win/draw/loss.  The internal value behind a ``cp`` is one
of the few values that print as it (``tdiv(100 v, pawn)`` for 15.1/16, ``round(100 v / a)`` for
17.1+); the printed ``(w, d, l)`` must be :func:`wdl` of one of them.  With a wrong model (other
coefficients, material instead of ply, no clamp) the triples miss: the test also checks that
each version's coefficients are needed, by requiring another version's model to miss on some
line.
"""

from __future__ import annotations

import re
from pathlib import Path

import chess
import numpy as np
import pytest

from nnue_infer.normalisation import PAWN_VALUE, material, to_cp, wdl, wdl_a

from node_engines import generated_positions
from tests.oracles.test_node_engines import _engine

INFO = re.compile(r"^info .*\bscore cp (-?\d+)\b.*\bwdl (\d+) (\d+) (\d+)\b")
VERSIONS = ["15.1", "16", "17.1", "18", "19"]


def _candidates(cp: int, version: str, mat: int) -> range:
    """Internal values that print as ``cp`` (a superset is harmless: only those that do are used)."""
    per_pawn = PAWN_VALUE.get(version) or wdl_a(version, mat)
    centre = int(cp * per_pawn / 100)
    return range(centre - 10, centre + 11)


def _matches(cp: int, triple: tuple[int, int, int], version: str, board: chess.Board, model: str) -> bool:
    mat = material(board)
    values = [v for v in _candidates(cp, version, mat) if to_cp(v, version, mat) == cp]
    assert values, (cp, version)
    return any(wdl(v, mat, model, ply=board.ply()) == triple for v in values)


def _debian_15_1():
    from stockfish_uci import Stockfish

    if not Path("/usr/games/stockfish").exists():
        pytest.skip("Debian's stockfish (15.1) is not installed: apt-get install stockfish")
    return Stockfish("/usr/games/stockfish")


@pytest.fixture(scope="module")
def positions() -> list[str]:
    fens = [fen for fen, c960 in generated_positions(40, seed=2121) if not c960]
    return ["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "4k3/8/8/8/8/8/8/QQQ1K3 w - - 7 40",
            "8/8/4k3/8/2R5/8/3K4/8 b - - 12 71", *fens[:14]]


@pytest.mark.parametrize("version", VERSIONS)
def test_wdl_matches_engine(version, positions):
    sf = _debian_15_1() if version == "15.1" else _engine(version)
    lines_by_fen = {}
    try:
        for fen in positions:
            lines = sf.search_lines(fen, 8, {"UCI_ShowWDL": "true"})
            assert lines is not None, (version, fen)
            lines_by_fen[fen] = lines
    finally:
        sf.close()
    checked, others_missed = 0, set()
    for fen, lines in lines_by_fen.items():
        board = chess.Board(fen)
        for line in lines:
            m = INFO.match(line)
            if m is None or abs(int(m.group(1))) >= 10000:
                continue
            cp, triple = int(m.group(1)), tuple(int(x) for x in m.group(2, 3, 4))
            assert sum(triple) == 1000
            assert _matches(cp, triple, version, board, version), (version, fen, line)
            checked += 1
            for other in VERSIONS:
                if other != version and not _matches(cp, triple, version, board, other):
                    others_missed.add(other)
    assert checked >= 3 * len(positions), checked
    assert others_missed == set(VERSIONS) - {version}, others_missed


def test_wdl_examples_and_errors():
    """Properties that hold for every version, and the errors."""
    for version in VERSIONS:
        w, d, l = wdl(0, 78, version, ply=0)
        assert w == l and w + d + l == 1000
        assert wdl(40000, 78, version, ply=0) == (1000, 0, 0)
        assert wdl(-40000, 78, version, ply=0) == (0, 0, 1000)
        wins = [wdl(v, 40, version, ply=60)[0] for v in range(-2000, 2001, 50)]
        assert wins == sorted(wins)
    with pytest.raises(ValueError, match="game ply"):
        wdl(100, 40, "16")
    with pytest.raises(ValueError, match="unknown Stockfish version '17'"):
        wdl(100, 40, "17")
    with pytest.raises(ValueError, match="material must be >= 0.*got -1"):  # was taken as 17
        wdl(100, -1, "19")
    for bad in (True, float("nan"), float("inf"), -float("inf"), np.float64("nan"), 1.5):
        # True gave (7, 987, 6), NaN a bare float-conversion error
        with pytest.raises(TypeError, match="value must be an integer"):
            wdl(bad, 58, "19")
    for version in ("19", "15.1"):  # 10**400 was an OverflowError (int too large to convert to float)
        for big in (10**400, -10**400, 2**31, -2**31 - 1, 10**5000):  # (str(10**5000) raises: the bits are named)
            with pytest.raises(ValueError, match=r"value must be within \[-2147483648, 2147483647\]"):
                wdl(big, 58, version, ply=10)
    with pytest.raises(ValueError, match=r"value .* got an integer of 1329 bits"):
        wdl(10**400, 58, "19")
    with pytest.raises(ValueError, match=r"material must be within .* got 2147483648$"):
        wdl(100, 2**31, "19")
    with pytest.raises(ValueError, match=r"ply must be within"):
        wdl(100, 58, "16", ply=10**400)
    assert wdl(2**31 - 1, 58, "19") == (1000, 0, 0) and wdl(-2**31, 58, "16", ply=2**31 - 1) == (0, 0, 1000)
    assert wdl(np.int32(100), np.int64(58), "19") == wdl(100, 58, "19")


def test_cli_trace_json_has_final_and_wdl(tmp_path):
    """``nnue-infer eval --trace --json``: ``final`` and ``wdl`` are Trace.final and Trace.wdl."""
    import json

    from click.testing import CliRunner

    import nnue_infer
    from nnue_infer.cli import cli

    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    result = CliRunner().invoke(cli, ["eval", "--trace", "--json", fen])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)
    trace = nnue_infer.Evaluator(nnue_infer.default_network()).trace(fen)
    board = chess.Board(fen)
    assert row["final"] is None and trace.final is None  # the default network follows Stockfish 15.1
    assert tuple(row["wdl"]) == trace.wdl == wdl(trace.value, material(board), "15.1", ply=board.ply())

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
import nnue_infer
from nnue_infer.cli import main

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


# -- hostile input ---------------------------------------------------------------------------------------------------

def _known(spec: str) -> nnue_infer.Network:
    from nnue_infer.errors import NetworkNotFoundError
    from nnue_infer.resources import known_network

    try:
        return known_network(spec)
    except NetworkNotFoundError as exc:  # no npm tarball in the cache: CI fetches it (.ci/run)
        pytest.skip(str(exc))


#: Issue 26's example: Stockfish 19 prints "NNUE evaluation +0.25 (white side)" here; the one line said +0.23.
KINGS_KNIGHT = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"


def _engine_white_side(lines: list[str]) -> str | None:
    """The figure of the engine's ``NNUE evaluation ... (white side)`` line (None in check)."""
    if any("none (in check)" in line for line in lines):
        return None
    line = next(line for line in lines if line.startswith("NNUE evaluation") and line.endswith("(white side)"))
    return line.split()[-3]


def _cli_white_side(capsys, spec: str, fens: list[str]) -> list[str]:
    assert main(["eval", "--net", spec, *fens]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(fens)
    return [line.split("\t")[3].removesuffix(" (white side)") for line in out]


def _positions() -> list[str]:
    from node_engines import generated_positions

    return [KINGS_KNIGHT, chess.STARTING_FEN] + [fen for fen, c960 in generated_positions(12, seed=2601) if not c960]


def _compare_white_side(capsys, spec: str, eval_lines, fens: list[str]) -> None:
    want = {fen: _engine_white_side(eval_lines(fen)) for fen in fens}
    fens = [fen for fen in fens if want[fen] is not None]
    got = _cli_white_side(capsys, spec, fens)
    # the engine's text, but a negative zero (15.1 and 16 print "-0.00" just below zero) as +0.00
    expected = ["+0.00" if want[fen] == "-0.00" else want[fen] for fen in fens]
    assert got == expected, [(f, g, w) for f, g, w in zip(fens, got, expected) if g != w]
    assert all(g != "-0.00" for g in got)
    for fen in fens[:2]:  # eval --moves: the figure of each child
        assert main(["eval", "--net", spec, "--moves", fen]) == 0
        rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
        board = chess.Board(fen)
        children = {row[1]: row[4].removesuffix(" (white side)") for row in rows}
        assert len(children) == board.legal_moves.count()
        for uci, figure in children.items():
            board.push_uci(uci)
            want = _engine_white_side(eval_lines(board.fen()))
            board.pop()
            if want is not None:
                assert figure == ("+0.00" if want == "-0.00" else want), (fen, uci)


@pytest.mark.parametrize("engine,spec", [("16", "sf16"), ("17.1", "sf17.1"), ("18", "sf18"), ("19", "sf19")])
def test_white_side_figure_is_the_engines(capsys, engine, spec):
    """Against the live npm engines: the figure of their ``NNUE evaluation`` line."""
    import shutil

    from node_engines import ENGINES, NodeEngine, unpacked

    _known(spec)
    if shutil.which("node") is None or unpacked(ENGINES[engine][0]) is None:
        pytest.skip("node or the stockfish npm package is missing; .ci/run installs them")
    sf = NodeEngine(engine)
    try:
        _compare_white_side(capsys, spec, sf.eval_lines, _positions())
    finally:
        sf.close()


def test_white_side_figure_is_stockfish_15_1s(capsys, stockfish, corpus):
    """Against Debian's Stockfish 15.1, with corpus positions where it prints -0.00 (value -1)."""
    near_zero = [r["fen"] for r in corpus if r["sf"]["nnue_eval"] == "-0.00"][:3]
    assert near_zero
    _compare_white_side(capsys, "stockfish", stockfish.eval_lines, _positions()[:6] + near_zero)

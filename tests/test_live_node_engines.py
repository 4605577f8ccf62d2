"""Live comparisons with Stockfish 16, 17.1 and 18 (npm ``stockfish`` under Node.js).

For each engine, one long-lived process evaluates a few hundred generated positions (seeded
playouts with promotions, e.p., castling, a tenth Chess960; see ``node_engines.py``) and the
NNUE part of its ``eval`` text (piece-value board, bucket table, ``NNUE evaluation`` line)
must equal ``Trace.format_stockfish()`` byte for byte.  Positions in check print no numbers
and are only counted.  The engines print their big net's numbers only (17.1/18 lite engines:
their one net); the 17.1 small net is checked through ``Final evaluation`` where only it
decides it (``test_small_net_through_final_evaluation``).

``NNUE_INFER_LIVE_POSITIONS`` (default 200) sets the number of positions per engine.
"""

from __future__ import annotations

import os
import shutil

import chess
import pytest

import nnue_infer
from nnue_infer.errors import NetworkNotFoundError
from nnue_infer.normalisation import material, to_cp
from nnue_infer.trace import tdiv
from nnue_infer.resources import known_network

from node_engines import NodeEngine, generated_positions, unpacked

N = int(os.environ.get("NNUE_INFER_LIVE_POSITIONS", "200"))
CASES = [("16", "sf16"), ("17.1", "sf17.1"), ("17.1-lite", "sf17.1-lite"), ("18-lite", "sf18-lite")]


def _engine(name: str) -> NodeEngine:
    from node_engines import ENGINES

    npm = ENGINES[name][0]
    if shutil.which("node") is None:
        pytest.skip("node (Node.js) is not installed; .ci/run installs it")
    if unpacked(npm) is None:
        pytest.skip(f"stockfish@{npm} missing: npm pack stockfish@{npm} --pack-destination ~/.cache/nnue-infer/npm")
    return NodeEngine(name)


def _net(spec: str) -> nnue_infer.Network:
    try:
        return known_network(spec)
    except NetworkNotFoundError as exc:
        pytest.skip(str(exc))


def engine_nnue_text(lines: list[str]) -> str:
    """The NNUE part of an ``eval`` output; Stockfish 16 prints a ``Classical evaluation`` line
    (and one more blank line) between the table and the NNUE line: dropped."""
    first = next(i for i, l in enumerate(lines) if "NNUE derived piece values" in l or "NNUE network contributions" in l)
    last = next(i for i, l in enumerate(lines) if l.startswith("NNUE evaluation") and "(white side)" in l)
    part = [l for l in lines[first:last + 1] if not l.startswith("Classical evaluation")]
    text = "\n".join(part)
    return text.replace("\n\n\nNNUE evaluation", "\n\nNNUE evaluation")


@pytest.mark.parametrize("engine,spec", CASES)
def test_eval_text_matches_engine(engine, spec):
    net = _net(spec)
    sf = _engine(engine)
    ev = nnue_infer.Evaluator(net)
    compared = in_check = 0
    try:
        for fen, c960 in generated_positions(N, seed=1609):
            lines = sf.eval_lines(fen, c960)
            assert lines is not None, f"{engine}: no answer for {fen}"
            if any("none (in check)" in l for l in lines):
                in_check += 1
                continue
            mine = ev.trace(chess.Board(fen, chess960=c960)).format_stockfish()
            assert mine == engine_nnue_text(lines), f"{engine} {fen}"
            compared += 1
    finally:
        sf.close()
    assert compared >= N * 0.8 and sf.restarts == 0, (compared, in_check)


def _final_17_1(psqt: int, positional: int, board: chess.Board) -> int:
    """Stockfish 17.1's ``Eval::evaluate`` (optimism 0) from one net's (psqt, positional), side
    to move's view.  Source: sf_17.1 ``evaluate.cpp``."""
    nnue = tdiv(125 * psqt + 131 * positional, 128)
    complexity = abs(psqt - positional)
    nnue -= tdiv(nnue * complexity, 18000)
    npm = sum(v * chess.popcount(bb) for v, bb in ((781, board.knights), (825, board.bishops), (1276, board.rooks),
                                                   (2538, board.queens)))
    mat = 535 * chess.popcount(board.pawns) + npm
    v = tdiv(nnue * (77777 + mat), 77777)
    v -= tdiv(v * board.halfmove_clock, 212)
    return max(min(v, 31507 - 1), -31507 + 1)


def _split(ev: nnue_infer.Evaluator, board: chess.Board) -> tuple[int, int]:
    """(tdiv(psqt, 16), tdiv(positional, 16)) of the used bucket."""
    t = ev.trace(board)
    return tdiv(t.psqt[t.bucket], 16), tdiv(t.positional[t.bucket], 16)


def test_small_net_through_final_evaluation():
    """Stockfish 17.1 uses its small net when |simple eval| > 962 and keeps it when the blended
    small-net value has |nnue| >= 236; ``Final evaluation`` then follows from the small net's
    (psqt, positional) alone.  Positions are material-imbalanced playouts; for each one that the
    rule sends to the small net, the printed final must equal the one computed from nnue-infer's
    small-net numbers (and must not equal the big net's, where they differ)."""
    small, big = _net("sf17.1-small"), _net("sf17.1")
    sf = _engine("17.1")
    ev_small, ev_big = nnue_infer.Evaluator(small), nnue_infer.Evaluator(big)
    values = {chess.PAWN: 208, chess.KNIGHT: 781, chess.BISHOP: 825, chess.ROOK: 1276, chess.QUEEN: 2538}
    checked = distinguishing = 0
    try:
        for fen, c960 in generated_positions(4 * N, seed=1711):
            board = chess.Board(fen, chess960=c960)
            if board.is_check():
                continue
            stm = board.turn
            simple = sum(v * (len(board.pieces(p, stm)) - len(board.pieces(p, not stm))) for p, v in values.items())
            if abs(simple) <= 962:
                continue
            p, q = _split(ev_small, board)
            if abs(tdiv(125 * p + 131 * q, 128)) < 236:
                continue  # Stockfish re-evaluates with the big net
            lines = sf.eval_lines(fen, c960)
            assert lines is not None
            final = next(l for l in lines if l.startswith("Final evaluation"))
            def printed(v):
                w = v if stm == chess.WHITE else -v
                return "%+.2f" % (0.01 * to_cp(w, "17.1", material(board)))
            want = printed(_final_17_1(p, q, board))
            assert want in final, (fen, final, want)
            other = printed(_final_17_1(*_split(ev_big, board), board))
            distinguishing += other != want
            checked += 1
            if checked >= N // 2:
                break
    finally:
        sf.close()
    assert checked >= 20 and distinguishing >= checked // 2, (checked, distinguishing)


"""Live comparisons with Stockfish 16, 17.1, 18 and 19 (npm ``stockfish`` under Node.js).

For each engine, one long-lived process evaluates a few hundred generated positions (seeded
playouts with promotions, e.p., castling, a tenth Chess960; see ``node_engines.py``) and the
NNUE part of its ``eval`` text (piece-value board, bucket table, ``NNUE evaluation`` line)
must equal ``Trace.format_stockfish()`` byte for byte.  Positions in check print no numbers
and are only counted.  The engines print their big net's numbers only (17.1/18 lite engines:
their one net); the 17.1 small net is checked through ``Final evaluation`` where only it
decides it (``test_small_net_through_final_evaluation``).  The threat-input nets of 18 and 19
also meet random placements full of threats and real games played through push/pop
(``test_threat_nets_match_engine``).

``NNUE_INFER_LIVE_POSITIONS`` (default 200) sets the number of positions per engine.
"""

from __future__ import annotations

import json
import os
import random
import shutil

import chess
import pytest

import nnue_infer
from nnue_infer.errors import NetworkNotFoundError
from nnue_infer.normalisation import material, to_cp
from nnue_infer.trace import tdiv
from nnue_infer.resources import known_network

from node_engines import NodeEngine, generated_positions, threat_positions, unpacked

N = int(os.environ.get("NNUE_INFER_LIVE_POSITIONS", "200"))
CASES = [("16", "sf16"), ("17.1", "sf17.1"), ("17.1-lite", "sf17.1-lite"), ("18", "sf18"), ("18-lite", "sf18-lite"),
         ("19", "sf19")]


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



def _special_games(data_dir, count: int) -> list[dict]:
    """``count`` dev games (``shared/data/sf19/games-dev-sf19.jsonl``), chosen in file order to
    cover promotions, e.p. captures and castling on both wings first."""
    with open(data_dir / "sf19" / "games-dev-sf19.jsonl") as f:
        games = [json.loads(line) for line in f if line.strip()]
    wanted = {"promotion", "en passant", "O-O", "O-O-O"}
    chosen = []
    for game in games:
        board, kinds = chess.Board(game["start_fen"]), set()
        for uci in game["moves"]:
            move = chess.Move.from_uci(uci)
            if move.promotion:
                kinds.add("promotion")
            if board.is_en_passant(move):
                kinds.add("en passant")
            if board.is_castling(move):
                kinds.add("O-O" if chess.square_file(move.to_square) == 6 else "O-O-O")
            board.push(move)
        if kinds & wanted:
            chosen.append(game)
            wanted -= kinds
        if len(chosen) == count or not wanted:
            break
    return chosen + [g for g in games if g not in chosen][:count - len(chosen)]

@pytest.mark.parametrize("engine,spec", [("18", "sf18"), ("19", "sf19")])
def test_threat_nets_match_engine(engine, spec, data_dir):
    """Stockfish 18's and 19's threat-input nets, every number ``eval`` prints (bucket table;
    18: piece-value board; 19: the raw value line) on ``N / 2`` random placements full of
    threats (many sliders and queens, pins, pawn pairs, castling rights, e.p.), then through
    three dev games played with push/pop: at each ply the incremental ``evaluate()`` must equal
    the trace's value (which the engine's text pins), and after random pops the fresh value;
    ``evaluate_batch`` and ``evaluate_game`` must give the same values."""
    net = _net(spec)
    sf = _engine(engine)
    ev, inc = nnue_infer.Evaluator(net), nnue_infer.Evaluator(net)
    rng = random.Random(1910)
    seen: dict[str, int] = {}
    counts = {"compared": 0, "in_check": 0}

    def check(board: chess.Board, incremental: int | None = None) -> None:
        trace = ev.trace(board)
        seen[board.fen()] = trace.value
        if incremental is not None:
            assert incremental == trace.value, (engine, board.fen(), "incremental")
        lines = sf.eval_lines(board.fen(), board.chess960)
        assert lines is not None, f"{engine}: no answer for {board.fen()}"
        if any("none (in check)" in l for l in lines):
            counts["in_check"] += 1
            return
        assert trace.format_stockfish() == engine_nnue_text(lines), f"{engine} {board.fen()}"
        counts["compared"] += 1

    try:
        for fen, c960 in threat_positions(N // 2, seed=1910):
            check(chess.Board(fen, chess960=c960))
        placements = counts["compared"]
        for game in _special_games(data_dir, 3):
            board = chess.Board(game["start_fen"])
            inc.set_position(board)
            check(board, inc.evaluate())
            for uci in game["moves"]:
                move = chess.Move.from_uci(uci)
                board.push(move)
                inc.push(move)
                check(board, inc.evaluate())
                if rng.random() < 0.1 and len(board.move_stack) > 3:
                    undone = [board.pop() for _ in range(rng.randrange(1, 4))]
                    for _ in undone:
                        inc.pop()
                    assert inc.evaluate() == ev.evaluate(board), (engine, board.fen(), "after pop")
                    for m in reversed(undone):
                        board.push(m)
                        inc.push(m)
            assert nnue_infer.evaluate_game(game["start_fen"], game["moves"], net).tolist() == [
                seen[b] for b in _fens(game)], (engine, game["id"])
    finally:
        sf.close()
    fens = list(seen)
    assert nnue_infer.evaluate_batch(fens, net).tolist() == [seen[f] for f in fens]
    assert placements >= N // 2 * 0.8 and counts["compared"] >= placements + 200 and sf.restarts == 0, counts


def _fens(game: dict) -> list[str]:
    board = chess.Board(game["start_fen"])
    out = [board.fen()]
    for uci in game["moves"]:
        board.push_uci(uci)
        out.append(board.fen())
    return out

"""Live comparisons with Stockfish 16, 17.1, 18 and 19 (npm ``stockfish`` under Node.js).

For each engine, one long-lived process evaluates a few hundred generated positions (seeded
playouts with promotions, e.p., castling, a tenth Chess960; see ``node_engines.py``) and the
NNUE part of its ``eval`` text (piece-value board, bucket table, ``NNUE evaluation`` line)
must equal ``Trace.format_stockfish()`` byte for byte, 17.1-19's ``Final evaluation`` line
included.  Positions in check print no numbers and are only counted.  The engines print their
big net's numbers only (17.1/18 lite engines: their one net); the 17.1 and 18 small net is
checked through ``Final evaluation`` on positions where it decides it
(``test_final_evaluation_branches``).  The threat-input nets of 18 and 19
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
from nnue_infer.normalisation import tdiv
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
    """The NNUE part of an ``eval`` output, with 17.1-19's ``Final evaluation`` line; Stockfish 16
    prints a ``Classical evaluation`` line (and one more blank line) between the table and the
    NNUE line: dropped, and its hybrid final (classical + NNUE) is left out."""
    first = next(i for i, l in enumerate(lines) if "NNUE derived piece values" in l or "NNUE network contributions" in l)
    last = next(i for i, l in enumerate(lines) if l.startswith("NNUE evaluation") and "(white side)" in l)
    if last + 1 < len(lines) and lines[last + 1].startswith("Final evaluation") and "scaled NNUE, ...]" in lines[last + 1]:
        last += 1
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


@pytest.mark.parametrize("engine,big,small", [("17.1", "sf17.1", "sf17.1-small"), ("18", "sf18", "sf18-small")])
def test_final_evaluation_branches(engine, big, small):
    """``final_evaluation`` and ``Trace.final`` equal the ``Final evaluation`` of Stockfish 17.1 and
    18 on positions taking each branch of their ``Eval::evaluate``: the big net alone (balanced
    material), the small net kept (|simple eval| > 962 and its blend at least 236 / 277), and the
    small net tried and replaced by the big net (the rarest: up to ``N / 4`` of each among
    ``8 N`` playouts and random placements); half-move clocks from 0 up to 99 (rule-50
    damping).  Where the small net decides, the big net's final must differ in most positions,
    so the test sees which net was used."""
    from nnue_infer.static_evaluation import small_net_kept, uses_small_net

    net_big, net_small = _net(big), _net(small)
    sf = _engine(engine)
    ev_big, ev_small = nnue_infer.Evaluator(net_big), nnue_infer.Evaluator(net_small)
    branches = {"big": 0, "small kept": 0, "small replaced": 0}
    distinguishing = damped = 0
    rng = random.Random(1717)
    positions = generated_positions(4 * N, seed=1711) + threat_positions(4 * N, seed=1712)
    try:
        for fen, c960 in positions:
            board = chess.Board(fen, chess960=c960)
            if rng.random() < 0.3:
                board.halfmove_clock = rng.randrange(100)
            if board.is_check():
                continue
            if uses_small_net(board):
                t = ev_small.trace(board)
                kept = small_net_kept(tdiv(t.psqt[t.bucket], 16), tdiv(t.positional[t.bucket], 16), engine)
                branch = "small kept" if kept else "small replaced"
            else:
                branch = "big"
            if branches[branch] >= N // 4:
                continue
            lines = sf.eval_lines(board.fen(), c960)
            assert lines is not None
            final = next(l for l in lines if l.startswith("Final evaluation"))
            trace = ev_big.trace(board)
            want = nnue_infer.final_evaluation(board, net_big)
            assert want == trace.final == ev_big.final_evaluation(board, net_small)
            assert trace.format_stockfish().splitlines()[-1] == final, (engine, board.fen(), branch)
            branches[branch] += 1
            damped += board.halfmove_clock > 10
            if branch == "small kept":
                big_only = nnue_infer.final_evaluation(board, net_big, net_big)
                distinguishing += to_cp(big_only, engine, material(board)) != to_cp(want, engine, material(board))
    finally:
        sf.close()
    assert branches["big"] >= 10 and branches["small kept"] >= 10 and branches["small replaced"] >= 5 \
        and damped >= 10, (branches, damped)
    assert distinguishing >= branches["small kept"] // 2, (distinguishing, branches)


def test_final_evaluation_errors():
    """15.1/16 networks have no final evaluation here; in check Stockfish prints none."""
    with pytest.raises(ValueError, match="Stockfish 15.1 network"):
        nnue_infer.final_evaluation(chess.Board(), nnue_infer.default_network())
    net = _net("sf19-lite")
    with pytest.raises(nnue_infer.PositionError, match="in check"):
        nnue_infer.final_evaluation("4k3/8/8/8/8/8/8/4R1K1 b - - 0 1", net)


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

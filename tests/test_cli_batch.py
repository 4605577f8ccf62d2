"""``nnue-infer eval --epd`` / ``--pgn``: file mode (CSV or JSON lines, progress bar, --jobs, --output).

Numbers are checked against single evaluation and against Stockfish 15.1's values in the
dev corpus (``raw``); fixtures ``evaluator``, ``corpus`` and ``data_dir`` come from ``conftest.py``.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import chess
import chess.pgn
import pytest

from nnue_infer.cli import main
from nnue_infer.trace import to_centipawns


def write_epd(path, fens, extra=()):
    lines = ["# positions from the dev corpus", ""]
    lines += [f"{fen} bm e4; id \"row {i}\";" if i % 3 == 0 else fen for i, fen in enumerate(fens)]
    path.write_text("\n".join([*lines, *extra]) + "\n")
    return path


@pytest.fixture(scope="module")
def epd_rows(corpus):
    return corpus[::11]


@pytest.fixture(scope="module")
def games(data_dir):
    """A dozen dev games covering castling, en passant, promotions (with capture, under-), endgame starts."""
    with open(data_dir / "games-dev.jsonl") as f:
        rows = [json.loads(line) for line in f]
    picked, seen = [], set()
    for key in ("en_passant", "promotion_capture", "underpromotion", "castle_queenside", "promotion"):
        for g in rows:
            if g["features"].get(key) and g["id"] not in seen:
                picked.append(g)
                seen.add(g["id"])
                break
    picked += [g for g in rows if g["id"].startswith("sf-eg-")][:2]
    picked += [g for g in rows if g["id"] not in seen][:5]
    return picked


def to_pgn(games) -> str:
    out = []
    for g in games:
        board = chess.Board(g["start_fen"])
        for uci in g["moves"]:
            board.push_uci(uci)
        game = chess.pgn.Game.from_board(board)
        game.headers["Event"] = g["id"]
        out.append(str(game))
    return "\n\n".join(out) + "\n"


def run(capsys, *args):
    status = main(["eval", "--net", "stockfish", *map(str, args)])  # the CLI's default is the bundled network
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_epd_csv_matches_stockfish(tmp_path, capsys, epd_rows):
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in epd_rows])
    status, out, err = run(capsys, "--epd", path)
    assert status == 0 and err == ""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert out.startswith("fen,value,cp,cp_white\n")
    assert len(rows) == len(epd_rows)
    for row, ref in zip(rows, epd_rows):
        board = chess.Board(ref["fen"])
        assert chess.Board(row["fen"]).board_fen() == board.board_fen()
        value = int(row["value"])
        assert value == ref["raw"]["value"]
        assert int(row["cp"]) == to_centipawns(value)
        assert int(row["cp_white"]) == (1 if board.turn else -1) * to_centipawns(value)


def test_epd_json_lines_and_output_file(tmp_path, capsys, epd_rows):
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in epd_rows[:40]])
    target = tmp_path / "out.jsonl"
    status, out, err = run(capsys, "--epd", path, "--json", "--output", target)
    assert (status, out, err) == (0, "", "")
    objs = [json.loads(line) for line in target.read_text().splitlines()]
    assert [o["value"] for o in objs] == [r["raw"]["value"] for r in epd_rows[:40]]
    assert set(objs[0]) == {"fen", "value", "cp", "cp_white"}


def test_jobs_one_gives_the_same_output(tmp_path, capsys, epd_rows):
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in epd_rows])
    _, all_cores, _ = run(capsys, "--epd", path)
    status, one, _ = run(capsys, "--epd", path, "--jobs", "1")
    assert status == 0 and one == all_cores


@pytest.mark.parametrize("jobs", ["0", "100000"])
def test_bad_jobs_is_a_usage_error(tmp_path, capsys, jobs):
    path = write_epd(tmp_path / "p.epd", [chess.STARTING_FEN])
    status, out, err = run(capsys, "--epd", path, "--jobs", jobs)
    assert status == 2 and out == "" and "--jobs" in err


def test_bad_epd_rows_are_reported_by_line_and_skipped(tmp_path, capsys, epd_rows):
    fens = [r["fen"] for r in epd_rows[:20]]
    path = write_epd(tmp_path / "p.epd", fens, extra=["8/8/8/8/8/8/8/8 w - - 0 1", "rnbqkbnr/pppppppp/8/8 w - - 0 1"])
    status, out, err = run(capsys, "--epd", path)
    assert status == 1
    assert len(out.splitlines()) == 1 + len(fens)
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"error: {path}:{len(fens) + 3}: ") and "White must have exactly one king" in lines[0]
    assert lines[1].startswith(f"error: {path}:{len(fens) + 4}: ")


def test_progress_bar_only_when_asked_or_tty(tmp_path, capsys, epd_rows):
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in epd_rows[:30]])
    _, _, quiet = run(capsys, "--epd", path)
    assert quiet == ""  # stderr is not a terminal under pytest
    status, out, bar = run(capsys, "--epd", path, "--progress")
    assert status == 0 and "30/30" in bar and "pos/s" in bar
    assert len(out.splitlines()) == 31


def test_pgn_every_ply_matches_single_evaluation_and_stockfish(tmp_path, capsys, games, corpus, evaluator):
    path = tmp_path / "games.pgn"
    path.write_text(to_pgn(games))
    status, out, err = run(capsys, "--pgn", path)
    assert status == 0 and err == ""
    assert out.startswith("game,ply,move,fen,value,cp,cp_white\n")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == sum(len(g["moves"]) + 1 for g in games)
    raw = {(r["game_id"], r["ply"]): r["raw"]["value"] for r in corpus if r["game_id"]}
    checked_raw = 0
    i = 0
    for number, g in enumerate(games, 1):
        board = chess.Board(g["start_fen"])
        for ply in range(len(g["moves"]) + 1):
            if ply:
                board.push_uci(g["moves"][ply - 1])
            row = rows[i]
            i += 1
            assert (int(row["game"]), int(row["ply"])) == (number, ply)
            assert row["move"] == ("" if ply == 0 else g["moves"][ply - 1])
            assert row["fen"] == board.fen()
            value = int(row["value"])
            assert value == evaluator.evaluate(board)
            assert int(row["cp_white"]) == (1 if board.turn else -1) * to_centipawns(value)
            if (g["id"], ply) in raw:
                assert value == raw[g["id"], ply]
                checked_raw += 1
    assert checked_raw >= 20


def test_pgn_json_lines_and_progress(tmp_path, capsys, games):
    path = tmp_path / "games.pgn"
    path.write_text(to_pgn(games[:2]))
    status, out, bar = run(capsys, "--pgn", path, "--json", "--progress")
    assert "100%" in bar and "B/s" in bar
    objs = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and len(objs) == sum(len(g["moves"]) + 1 for g in games[:2])
    assert set(objs[0]) == {"game", "ply", "move", "fen", "value", "cp", "cp_white"}
    assert objs[0]["ply"] == 0 and objs[0]["move"] == ""


def test_pgn_illegal_move_bad_setup_and_variants(tmp_path, capsys, evaluator):
    path = tmp_path / "bad.pgn"
    path.write_text(
        '[Event "ok"]\n\n1. e4 e5 2. Nf3 *\n\n'
        '[Event "illegal"]\n\n1. e4 e5 2. Ke3 *\n\n'
        '[Event "no king"]\n[SetUp "1"]\n[FEN "8/8/8/8/8/8/8/4K3 w - - 0 1"]\n\n1. Kd2 *\n\n'
        '[Event "crazyhouse"]\n[Variant "Crazyhouse"]\n\n1. e4 d5 2. exd5 Qxd5 3. P@e4 *\n\n'
        '[Event "chess960"]\n[Variant "Chess960"]\n[SetUp "1"]\n'
        '[FEN "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9"]\n\n9. g3 *\n'
    )
    status, out, err = run(capsys, "--pgn", path)
    assert status == 1
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["game"], r["ply"]) for r in rows] == [("1", "0"), ("1", "1"), ("1", "2"), ("1", "3"),
                                                     ("2", "0"), ("2", "1"), ("2", "2"), ("5", "0"), ("5", "1")]
    assert "game 2" in err and "Ke3" in err
    assert "game 3" in err and "Black must have exactly one king" in err
    assert "game 4: variant 'crazyhouse' is not supported" in err
    board = chess.Board("bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9", chess960=True)
    assert int(rows[-2]["value"]) == evaluator.evaluate(board)
    board.push_san("g3")
    assert int(rows[-1]["value"]) == evaluator.evaluate(board)


@pytest.mark.parametrize("args", [
    ["--pgn", "PGN", "--trace"],
    ["--pgn", "PGN", "--epd", "EPD"],
    ["--epd", "EPD", chess.STARTING_FEN],
    ["--epd", "EPD", "--fen", chess.STARTING_FEN],
])
def test_conflicting_inputs_are_usage_errors(tmp_path, capsys, args):
    pgn = tmp_path / "g.pgn"
    pgn.write_text('[Event "x"]\n\n1. e4 *\n')
    epd = write_epd(tmp_path / "p.epd", [chess.STARTING_FEN])
    args = [str(pgn) if a == "PGN" else str(epd) if a == "EPD" else a for a in args]
    status, out, err = run(capsys, *args)
    assert status == 2 and out == "" and "Usage" in err


def test_fen_and_trace_modes_unchanged(tmp_path, capsys, evaluator):
    fen = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
    value = evaluator.evaluate(fen)
    status, out, _ = run(capsys, fen)
    cp = to_centipawns(value)
    assert status == 0 and out == f"{fen}\tvalue {value}\tcp {cp:+d} (side to move)\t{-cp / 100:+.2f} (white side)\n"
    epd = write_epd(tmp_path / "p.epd", [fen])
    status, traced, _ = run(capsys, "--epd", epd, "--trace")
    assert status == 0 and traced == evaluator.trace(fen).format_stockfish() + "\n"


def test_console_script_runs_epd(tmp_path, epd_rows):
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in epd_rows[:5]])
    proc = subprocess.run([sys.executable, "-m", "nnue_infer", "eval", "--net", "stockfish", "--epd", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [int(line.split(",")[1]) for line in proc.stdout.splitlines()[1:]] == [r["raw"]["value"] for r in epd_rows[:5]]

"""``nnue-infer eval --epd`` / ``--pgn``: file mode (CSV or JSON lines, rows that join back, progress, --threads, --output).

Numbers are checked against single evaluation and against Stockfish 15.1's values in the
dev corpus (``raw``); fixtures ``evaluator``, ``corpus`` and ``data_dir`` come from ``conftest.py``.
"""

from __future__ import annotations

import csv
import gzip
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


OPERA = ('[Event "Paris"]\n[Site "Paris FRA"]\n[Date "1858.11.02"]\n[Round "?"]\n[White "Paul Morphy"]\n'
         '[Black "Duke Karl / Count Isouard"]\n[Result "1-0"]\n\n'
         '1. e4 e5 2. Nf3 d6 3. d4 Bg4 4. dxe5 Bxf3 5. Qxf3 dxe5 6. Bc4 Nf6 7. Qb3 Qe7 8. Nc3 c6 9. Bg5 b5 '
         '10. Nxb5 cxb5 11. Bxb5+ Nbd7 12. O-O-O Rd8 13. Rxd7 Rxd7 14. Rd1 Qe6 15. Bxd7+ Nxd7 16. Qb8+ Nxb8 '
         '17. Rd8# 1-0\n')
EPD_COLUMNS = ["line", "fen", "value", "cp", "cp_white", "in_check", "outcome"]


def test_epd_csv_matches_stockfish_and_joins_back(tmp_path, capsys, epd_rows):
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in epd_rows])
    status, out, err = run(capsys, "--epd", path)
    assert status == 0 and err == ""
    assert out.splitlines()[0] == ",".join(EPD_COLUMNS + ["bm", "id"])
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == len(epd_rows)
    for i, (row, ref) in enumerate(zip(rows, epd_rows)):
        board = chess.Board(ref["fen"])
        assert int(row["line"]) == i + 3  # a comment and a blank line come first
        assert row["fen"] == ref["fen"]  # the input's text
        value = int(row["value"])
        assert value == ref["raw"]["value"]
        assert int(row["cp"]) == to_centipawns(value)
        assert int(row["cp_white"]) == (1 if board.turn else -1) * to_centipawns(value)
        assert row["in_check"] == ("true" if ref["in_check"] else "false")
        assert row["outcome"] == "none"
        assert (row["bm"], row["id"]) == (("e4", f"row {i}") if i % 3 == 0 else ("", ""))


def test_epd_json_lines_are_typed_and_output_file(tmp_path, capsys, epd_rows):
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in epd_rows[:40]])
    target = tmp_path / "out.jsonl"
    status, out, err = run(capsys, "--epd", path, "--json", "--output", target)
    assert (status, out, err) == (0, "", "")
    objs = [json.loads(line) for line in target.read_text().splitlines()]
    assert [o["value"] for o in objs] == [r["raw"]["value"] for r in epd_rows[:40]]
    assert list(objs[0]) == EPD_COLUMNS + ["bm", "id"]
    assert all(type(o["value"]) is int and type(o["cp"]) is int and type(o["in_check"]) is bool for o in objs)
    assert objs[0]["id"] == "row 0" and objs[1]["id"] is None


def test_epd_from_stdin_gzip_and_dash_output(tmp_path, capsys, monkeypatch, epd_rows):
    text = "\n".join(r["fen"] for r in epd_rows[:10]) + "\n"
    packed = tmp_path / "p.epd.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    status, from_gzip, _ = run(capsys, "--epd", packed, "-o", "-")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    status2, from_stdin, _ = run(capsys, "--epd", "-")
    assert status == status2 == 0 and from_gzip == from_stdin
    assert [int(r["value"]) for r in csv.DictReader(io.StringIO(from_gzip))] == [r["raw"]["value"] for r in epd_rows[:10]]


def test_threads_one_gives_the_same_output_and_jobs_still_works(tmp_path, capsys, epd_rows):
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in epd_rows])
    _, all_cores, _ = run(capsys, "--epd", path)
    status, one, _ = run(capsys, "--epd", path, "--threads", "1")
    assert status == 0 and one == all_cores
    status, old, err = run(capsys, "--epd", path, "--jobs", "1")
    assert status == 0 and old == all_cores and "--jobs is deprecated; use --threads" in err


@pytest.mark.parametrize("threads", ["0", "100000"])
def test_bad_threads_is_a_usage_error(tmp_path, capsys, threads):
    path = write_epd(tmp_path / "p.epd", [chess.STARTING_FEN])
    status, out, err = run(capsys, "--epd", path, "--threads", threads)
    assert status == 2 and out == "" and "--threads" in err


def test_bad_rows_are_reported_by_line_and_kept_on_request(tmp_path, capsys, epd_rows):
    fens = [r["fen"] for r in epd_rows[:20]]
    extra = ["8/8/8/8/8/8/8/8 w - - 0 1", "rnbqkbnr/pppppppp/8/8 w - - 0 1", "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR"]
    path = write_epd(tmp_path / "p.epd", fens, extra=extra)
    status, out, err = run(capsys, "--epd", path)
    assert status == 1
    assert len(out.splitlines()) == 1 + len(fens)
    lines = err.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"error: {path}:{len(fens) + 3}: ") and "White must have exactly one king" in lines[0]
    assert lines[1].startswith(f"error: {path}:{len(fens) + 4}: ") and "8 ranks" in lines[1]
    assert lines[2].startswith(f"error: {path}:{len(fens) + 5}: ") and "no side to move field" in lines[2]
    status, out, _ = run(capsys, "--epd", path, "--keep-errors")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert status == 1 and len(rows) == len(fens) + 3 and list(rows[0])[-1] == "error"
    assert [r["line"] for r in rows[-3:]] == [str(len(fens) + k) for k in (3, 4, 5)]
    assert all(r["value"] == r["cp"] == r["in_check"] == r["outcome"] == "" and r["error"] for r in rows[-3:])
    assert all(r["error"] == "" for r in rows[:-3])


def test_strict_fen_by_default_lenient_on_request(tmp_path, capsys, evaluator):
    """The 1.e4 position typed without its side to move: an error, not White's 158 (Black to move: -52)."""
    path = tmp_path / "p.epd"
    path.write_text("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR\nrnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b\n"
                    "4k3/8/8/8/8/8/8/4K3 w - - 3\n")
    status, out, err = run(capsys, "--epd", path)
    assert status == 1 and out.splitlines() == [",".join(EPD_COLUMNS)]
    assert "no side to move field" in err and "no castling rights field" in err and "no full-move number field" in err
    status, out, err = run(capsys, "--epd", path, "--lenient")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert status == 0 and err == ""
    assert [int(r["value"]) for r in rows] == [evaluator.evaluate(chess.Board("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR w")),
                                               -52, evaluator.evaluate("4k3/8/8/8/8/8/8/4K3 w - - 3 1")]


def test_in_check_rows_match_stockfish_and_can_be_left_empty(tmp_path, capsys, corpus):
    """Stockfish 15.1 prints 'none (in check)' exactly where the in_check column says true."""
    rows = [r for r in corpus if r["in_check"]][:15] + [r for r in corpus if not r["in_check"]][:15]
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in rows])
    status, out, _ = run(capsys, "--epd", path, "--json", "--empty-in-check")
    got = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and len(got) == 30
    for g, r in zip(got, rows):
        in_check = r["sf"]["final_eval"] == "none (in check)"
        assert g["in_check"] is in_check and g["in_check"] is r["in_check"]
        assert (g["value"] is None) is in_check and (g["cp"] is None) is in_check
        if not in_check:
            assert g["value"] == r["raw"]["value"]


def test_checkmate_and_stalemate_are_flagged(tmp_path, capsys):
    path = tmp_path / "p.epd"
    path.write_text("1n1Rkb1r/p4ppp/4q3/4p1B1/4P3/8/PPP2PPP/2K5 b k - 1 17\n"   # the Opera Game's mate
                    "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1\n"                          # stalemate
                    "8/8/8/2k5/3Pp3/8/8/3K4 b - d3 0 1\n")                       # only e.p. saves it
    status, out, _ = run(capsys, "--epd", path)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert status == 0
    assert [(r["in_check"], r["outcome"]) for r in rows] == [("true", "checkmate"), ("false", "stalemate"),
                                                             ("true", "none")]


def test_progress_bar_only_when_asked_or_tty_and_never_when_quiet(tmp_path, capsys, epd_rows):
    path = write_epd(tmp_path / "p.epd", [r["fen"] for r in epd_rows[:30]])
    _, _, quiet = run(capsys, "--epd", path)
    assert quiet == ""  # stderr is not a terminal under pytest
    status, out, bar = run(capsys, "--epd", path, "--progress")
    assert status == 0 and "30pos" in bar and "pos/s" in bar  # counted as they stream (no total known ahead)
    assert len(out.splitlines()) == 31
    _, _, silent = run(capsys, "--epd", path, "--progress", "--quiet")
    assert silent == ""


def test_pgn_rows_have_tags_san_uci_and_match_stockfish(tmp_path, capsys, games, corpus, evaluator):
    path = tmp_path / "games.pgn"
    path.write_text(to_pgn(games))
    status, out, err = run(capsys, "--pgn", path)
    assert status == 0 and err == ""
    assert out.splitlines()[0] == ("game,line,event,site,date,round,white,black,result,ply,san,uci,fen,value,cp,cp_white,"
                                   "in_check,outcome")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == sum(len(g["moves"]) + 1 for g in games)
    raw = {(r["game_id"], r["ply"]): r["raw"]["value"] for r in corpus if r["game_id"]}
    checked_raw = 0
    i = 0
    for number, g in enumerate(games, 1):
        board = chess.Board(g["start_fen"])
        for ply in range(len(g["moves"]) + 1):
            san = ""
            if ply:
                move = chess.Move.from_uci(g["moves"][ply - 1])
                san = board.san(move)
                board.push(move)
            row = rows[i]
            i += 1
            assert (int(row["game"]), int(row["ply"]), row["event"]) == (number, ply, g["id"])
            assert row["uci"] == ("" if ply == 0 else g["moves"][ply - 1]) and row["san"] == san
            assert row["fen"] == board.fen()
            value = int(row["value"])
            assert value == evaluator.evaluate(board)
            assert int(row["cp_white"]) == (1 if board.turn else -1) * to_centipawns(value)
            assert row["in_check"] == ("true" if board.is_check() else "false")
            if (g["id"], ply) in raw:
                assert value == raw[g["id"], ply]
                checked_raw += 1
    assert checked_raw >= 20


def test_pgn_opera_game_tags_and_final_mate(tmp_path, capsys):
    path = tmp_path / "opera.pgn"
    path.write_text(OPERA)
    status, out, _ = run(capsys, "--pgn", path, "--json")
    objs = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and len(objs) == 34
    last = objs[-1]
    assert (last["white"], last["black"], last["result"], last["date"]) == (
        "Paul Morphy", "Duke Karl / Count Isouard", "1-0", "1858.11.02")
    assert (last["ply"], last["san"], last["uci"]) == (33, "Rd8#", "d1d8")
    assert (last["in_check"], last["outcome"]) == (True, "checkmate")
    assert [o["outcome"] for o in objs[:-1]] == ["none"] * 33
    assert objs[0]["san"] is None and type(objs[0]["value"]) is int


def test_pgn_progress_counts_games_and_positions(tmp_path, capsys, games):
    path = tmp_path / "games.pgn"
    path.write_text(to_pgn(games[:3]))
    status, out, bar = run(capsys, "--pgn", path, "--progress")
    positions = sum(len(g["moves"]) + 1 for g in games[:3])
    assert status == 0 and "3game" in bar.replace(" ", "") and f"{positions} positions" in bar
    assert "B/s" not in bar


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
    assert "game 4, ply 0: variant 'crazyhouse' is not supported" in err
    board = chess.Board("bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9", chess960=True)
    assert int(rows[-2]["value"]) == evaluator.evaluate(board)
    board.push_san("g3")
    assert int(rows[-1]["value"]) == evaluator.evaluate(board)
    status, out, _ = run(capsys, "--pgn", path, "--keep-errors")
    kept = list(csv.DictReader(io.StringIO(out)))
    errors = [(r["game"], r["ply"], r["event"]) for r in kept if r["error"]]
    assert errors == [("2", "3", "illegal"), ("3", "0", "no king"), ("4", "0", "crazyhouse")]


@pytest.mark.parametrize("args", [
    ["--pgn", "PGN", "--trace"],
    ["--pgn", "PGN", "--epd", "EPD"],
    ["--epd", "EPD", chess.STARTING_FEN],
    ["--epd", "EPD", "--fen", chess.STARTING_FEN],
    ["--svg", "x.svg", chess.STARTING_FEN],
])
def test_conflicting_inputs_are_usage_errors(tmp_path, capsys, args):
    pgn = tmp_path / "g.pgn"
    pgn.write_text('[Event "x"]\n\n1. e4 *\n')
    epd = write_epd(tmp_path / "p.epd", [chess.STARTING_FEN])
    args = [str(pgn) if a == "PGN" else str(epd) if a == "EPD" else a for a in args]
    status, out, err = run(capsys, *args)
    assert status == 2 and out == "" and "Usage" in err


def test_fen_and_trace_modes(tmp_path, capsys, evaluator):
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
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [int(r["value"]) for r in rows] == [r["raw"]["value"] for r in epd_rows[:5]]


# -- hostile input ---------------------------------------------------------------------------------------------------

def _lines_before_damage(data: bytes, kind: str) -> int:
    """Complete lines a plain decoder recovers from damaged ``data`` (zlib / zstandard, as
    ``zcat`` / ``zstdcat`` print them before they complain)."""
    import zlib

    import zstandard

    obj = zlib.decompressobj(31) if kind == "gz" else zstandard.ZstdDecompressor().decompressobj()
    return obj.decompress(data).count(b"\n")


@pytest.mark.parametrize("option", [["--lenient"], ["--keep-errors"], ["--empty-in-check"], ["--json"],
                                    ["--threads", "1"], ["--trace"]])
def test_options_a_dask_job_would_drop_are_usage_errors(tmp_path, capsys, option):
    """``--lenient`` with placement-only FENs gave an errors table telling the user to add
    --lenient, which they had; now each such option is refused before anything runs."""
    epd = tmp_path / "a.epd"
    epd.write_text("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR\n")  # placement only
    out = tmp_path / "out"
    assert main(["eval", "--epd", str(epd), *option, "--workers", "1", "-o", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f"error: {option[0]}: not with --scheduler / --workers"), err
    assert not out.exists()


@pytest.mark.parametrize("kind,damage", [("gz", "cut"), ("gz", "junk"), ("zst", "cut")])
def test_rows_before_damage_are_written(tmp_path, capsys, corpus, kind, damage):
    import gzip

    import zstandard

    text = "".join(r["fen"] + "\n" for r in corpus).encode()  # 3,298 lines, about 200 kB
    packed = gzip.compress(text) if kind == "gz" else zstandard.ZstdCompressor().compress(text)
    data = packed[:len(packed) * 9 // 10] if damage == "cut" else packed + b"junkjun"
    path = tmp_path / f"in.epd.{kind}"
    path.write_bytes(data)
    want = _lines_before_damage(data, kind) if damage == "cut" else len(corpus)
    assert 1000 < want
    out = tmp_path / "out.csv"
    assert main(["eval", "--epd", str(path), "-o", str(out), "-q"]) == 1
    rows = out.read_text().splitlines()[1:]
    assert [r.split(",")[1] for r in rows[:want]] == [r["fen"] for r in corpus[:want]]
    assert len(rows) <= want + 1  # and at most the cut line, as an error row
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith(f"error: {path}: ") and "compressed byte" in err and ("corrupt" in err or "truncated" in err)


def test_output_under_a_file_names_it_as_no_directory(capsys, tmp_path):
    """Item 4 (``-o FILE`` opened by its first write, 480d047): ``-o notes.txt/x.csv`` under a regular file
    said "directory .../notes.txt does not exist" while it exists (the open said "Not a directory" before
    the session); now it says the path is not a directory, before any work."""
    (tmp_path / "notes.txt").write_text("mine\n")
    target = tmp_path / "notes.txt" / "x.csv"
    status = main(["eval", "startpos", "-o", str(target)])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err == f"error: cannot write --output {target}: {tmp_path / 'notes.txt'} is not a directory\n"
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("how", ["positions", "trace", "activations"])
def test_every_position_refused_leaves_the_output_file_as_it_was(capsys, tmp_path, how):
    """Item 5 (a refused run leaves no output file, 480d047): with every position refused (a bad FEN on the
    command line; every line of the EPD file of ``--trace`` / ``--activations``), ``-o FILE`` was still
    opened when the run ended, so an earlier file of that name was emptied (``--activations``: replaced
    by an archive of no positions).  Now the run ends with status 1 before any output is opened."""
    epd = tmp_path / "bad.epd"
    epd.write_text("8/8/8/8/8/8/8/4K3 w - -\n")
    target = tmp_path / ("out.npz" if how == "activations" else "out.csv")
    target.write_text("earlier results\n")
    argv = {"positions": ["eval", "rnbqkbnr/pppppppp/8/8"], "trace": ["eval", "--trace", "--epd", str(epd)],
            "activations": ["eval", "--activations", "--epd", str(epd)]}[how]
    status = main([*argv, "-o", str(target)])
    out, err = capsys.readouterr()
    assert status == 1 and out == "" and err.startswith("error: ")
    assert target.read_text() == "earlier results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["bad.epd", target.name])


def test_a_quoted_glob_pattern_in_process_says_it_names_no_file(capsys, tmp_path, monkeypatch):
    """A glob pattern the shell did not expand (quoted) as a position argument was read as a FEN ("invalid
    character 'd' in the placement field"), and as ``--epd PATTERN`` without --workers it said only that the
    file does not exist.  Both now say that no such file exists, that patterns are expanded only by a Dask
    job (or by the shell), and where a file goes; a position argument naming an existing file says to give
    it with --epd / --pgn."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.epd").write_text(f"{chess.STARTING_FEN}\n")
    pattern_help = ("a glob pattern is expanded only by a Dask job (--epd / --pgn PATTERN with --workers N or "
                    "--scheduler ADDRESS, and --output DIR), or by the shell when unquoted")
    status = main(["eval", "data/*.epd"])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err.startswith("error: invalid character 'd' in the placement field at column 1 of 'data/*.epd'; "
                          f"no file 'data/*.epd' exists: {pattern_help}"), err
    assert err.rstrip().endswith("a file goes with --epd FILE (positions) or --pgn FILE (games)"), err
    for option in ("--epd", "--pgn"):
        status = main(["eval", option, f"data/*.{option[2:]}"])
        out, err = capsys.readouterr()
        assert status == 2 and out == ""
        assert f"error: Invalid value for '{option}': File 'data/*.{option[2:]}' does not exist: {pattern_help}" \
            in err, err
    status = main(["eval", "data/a.epd"])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err.rstrip().endswith("; 'data/a.epd' is a file: give it with --epd FILE (positions) or --pgn FILE "
                                 "(games)"), err
    status = main(["eval", "data/missing.pgn"])
    _, err = capsys.readouterr()
    assert status == 1 and "; no file 'data/missing.pgn' exists; a file goes with --epd" in err, err
    status = main(["eval", "8/8/8 w"])  # a FEN's '/' is no path: no file is named
    _, err = capsys.readouterr()
    assert status == 1 and err == "error: the placement field does not have 8 ranks at column 6 of '8/8/8 w'\n"


START = chess.STARTING_FEN


@pytest.mark.parametrize("mode, text", [("--epd", START + "\n"), ("--pgn", '[Event "x"]\n\n1. e4 *\n')])
def test_output_onto_the_input_file_is_refused(tmp_path, capsys, mode, text):
    """``eval --epd a.epd -o a.epd`` opened the output first: the input was emptied, nothing was
    evaluated, and the exit status was 0."""
    from nnue_infer.cli import main

    path = tmp_path / "in.txt"
    path.write_text(text)
    (tmp_path / "link.txt").symlink_to(path)
    for output in (path, tmp_path / "link.txt"):
        assert main(["eval", mode, str(path), "-o", str(output)]) == 2
        assert "is the input file" in capsys.readouterr().err
    assert path.read_text() == text

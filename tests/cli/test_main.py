"""The ``nnue-infer`` command line, through ``nnue_infer.cli.main(argv)`` and one real subprocess."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import chess
import pytest

from nnue_infer import constants, resources
from nnue_infer.cli import main
from stockfish_uci import nnue_part
import os
from pathlib import Path
from nnue_infer.kernels import simd

START = chess.STARTING_FEN
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
SHA256 = "ad9b423546714137916bd38978af6fd68d7b8951bef25ff76bf43da72d6cb786"


@pytest.fixture(scope="module")
def trace_rows(corpus):
    """A few non-check corpus positions: both sides to move, small and full boards, e.p. square."""
    rows = [r for r in corpus if not r["in_check"]]
    picked = [rows[0], next(r for r in rows if r["side_to_move"] == "w" and r["piece_count"] <= 5),
              next(r for r in rows if r["side_to_move"] == "b" and r["piece_count"] == 32),
              next(r for r in rows if any(len(v) == 5 and v[3] != "." for v in r["sf"]["piece_values"] if v))]
    return picked


#: Stockfish 15.1's network: the CLI's default is the bundled network (tests/core/test_resources.py).
SF = ["--net", "stockfish"]


def run(capsys, argv):
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_eval_text(capsys):
    status, out, err = run(capsys, ["eval", *SF, START])
    assert status == 0 and err == ""
    assert out == f"{START}\tvalue 69\tcp +19 (side to move)\t+0.19 (white side)\n"
    status, out, _ = run(capsys, ["eval", *SF, "--fen", AFTER_E4, "--fen", START])
    assert status == 0
    assert out.splitlines() == [f"{AFTER_E4}\tvalue -52\tcp -14 (side to move)\t+0.14 (white side)",
                                f"{START}\tvalue 69\tcp +19 (side to move)\t+0.19 (white side)"]


def test_eval_fen_as_separate_arguments(capsys):
    status, out, _ = run(capsys, ["eval", *SF, *AFTER_E4.split()])
    assert status == 0 and "value -52" in out


def test_eval_json_matches_corpus(capsys, corpus):
    rows = corpus[:40]
    argv = ["eval", *SF, "--json"]
    for r in rows:
        argv += ["--fen", r["fen"]]
    status, out, _ = run(capsys, argv)
    assert status == 0
    got = [json.loads(line) for line in out.splitlines()]
    assert len(got) == len(rows)
    for g, r in zip(got, rows):
        v = r["raw"]["value"]
        cp = int(100 * v / 361)  # |100 v| < 2**53: float truncation is exact here
        assert g == {"fen": r["fen"], "value": v, "cp": cp, "cp_white": cp if r["side_to_move"] == "w" else -cp,
                     "in_check": r["in_check"], "outcome": "none"}


def test_eval_trace_is_stockfish_text(capsys, trace_rows, corpus_raw_lines):
    for r in trace_rows:
        status, out, _ = run(capsys, ["eval", *SF, "--trace", r["fen"]])
        assert status == 0
        assert out == "\n".join(nnue_part(corpus_raw_lines[r["fen"]])) + "\n", r["fen"]


def test_eval_trace_json(capsys, trace_rows):
    r = trace_rows[2]
    status, out, _ = run(capsys, ["eval", *SF, "--trace", "--json", r["fen"]])
    assert status == 0
    d = json.loads(out)
    assert (d["psqt"], d["positional"], d["value"]) == (r["raw"]["psqt"], r["raw"]["positional"], r["raw"]["value"])
    assert d["bucket"] == r["sf"]["bucket_used"] == 7
    board = chess.Board(r["fen"])
    assert set(d["piece_values"]) == {chess.SQUARE_NAMES[s] for s in chess.scan_forward(board.occupied & ~board.kings)}


def test_eval_epd_file(capsys, tmp_path, corpus):
    epd = tmp_path / "positions.epd"
    epd.write_text("# comment\n\n" + "\n".join(
        [corpus[0]["fen"], " ".join(corpus[1]["fen"].split()[:4]) + ' bm e4; id "x";']) + "\n")
    status, out, _ = run(capsys, ["eval", *SF, "--json", "--epd", str(epd)])
    assert status == 0
    values = [json.loads(line)["value"] for line in out.splitlines()]
    assert values == [corpus[0]["raw"]["value"], corpus[1]["raw"]["value"]]


@pytest.mark.parametrize("bad,fragment", [
    ("garbage", "invalid character 'g'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w XYZ - 0 1", "castling"),
    ("8/8/8/8/8/8/8/4K3 w - - 0 1", "Black must have exactly one king"),
    ("4k3/8/8/8/8/8/8/P3K3 w - - 0 1", "a1"),
])
def test_eval_bad_fen_exit_1(capsys, bad, fragment):
    status, out, err = run(capsys, ["eval", *SF, "--fen", bad, "--fen", START])
    assert status == 1
    assert "error:" in err and bad in err and fragment in err, err
    assert "value 69" in out  # the good position is still evaluated


def test_eval_needs_a_position(capsys):
    status, _, err = run(capsys, ["eval"])
    assert status == 2 and "give a position" in err


def test_eval_missing_network_file(capsys, tmp_path):
    missing = tmp_path / "nn-missing.nnue"
    status, out, err = run(capsys, ["eval", "--net", str(missing), START])
    assert status == 1 and out == ""
    assert str(missing) in err and "does not exist" in err and "apt-get install stockfish" in err, err


def test_eval_without_any_network_says_how_to_get_one(capsys, tmp_path, monkeypatch):
    """--net stockfish, no cached copy and no Debian binary: the message says how to get a network."""
    monkeypatch.setattr(resources, "_stockfish", None)
    monkeypatch.setenv("NNUE_INFER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(constants, "DEBIAN_STOCKFISH", str(tmp_path / "no-stockfish"))
    status, out, err = run(capsys, ["eval", *SF, START])
    assert status == 1 and out == ""
    assert "no-stockfish" in err and "apt-get install stockfish" in err and "--net" in err, err


def test_eval_bad_network_file(capsys, tmp_path):
    bad = tmp_path / "bad.nnue"
    bad.write_bytes(b"\x20\x2f\xf3\x7a" + b"\0" * 20)
    status, _, err = run(capsys, ["eval", "--net", str(bad), START])
    assert status == 1 and str(bad) in err and "feature_transformer.hash at offset 12" in err, err


def test_info(capsys, network_path):
    status, out, err = run(capsys, ["info", str(network_path)])
    assert status == 0, err
    assert f"sha256:        {SHA256}" in out
    assert "format:        stockfish" in out
    assert "Network trained with the https://github.com/glinscott/nnue-pytorch trainer." in out
    assert "HalfKAv2_hm" in out and "1024" in out
    assert "0x1C102EF2" in out and "0x7F2344B8" in out and "0x63336A4A" in out


def test_info_prints_the_digest_a_dataset_manifest_records(capsys, tmp_path, network_path):
    """A dataset's ``_nnue_infer.json`` records ``network_sha256``, the digest of the network's parameters
    (``network_digest``), not the file's SHA-256 that ``info`` printed (docs said "the network's SHA-256":
    fresh-user trial); ``info`` prints both, the digest equal to a real manifest's."""
    pytest.importorskip("distributed")
    from nnue_infer.io.distributed import score_files

    epd = tmp_path / "one.epd"
    epd.write_text(chess.STARTING_FEN + "\n")
    score_files([str(epd)], str(tmp_path / "scores"), network=str(network_path))
    recorded = json.loads((tmp_path / "scores" / "_nnue_infer.json").read_text())["network_sha256"]
    status, out, err = run(capsys, ["info", "--json", str(network_path)])
    assert status == 0, err
    shown = json.loads(out)
    assert shown["network_digest"] == recorded and shown["sha256"] == SHA256 != recorded
    status, out, err = run(capsys, ["info", str(network_path)])
    assert f"digest:        {recorded} (parameters: a dataset manifest's network_sha256)" in out.splitlines()


def test_info_takes_the_names_net_takes(capsys, tmp_path, stockfish_binary):
    """``info default`` was refused (info wanted a file), so the ``network_sha256`` of a dataset scored with
    ``network="default"`` could not be checked from the command line: every built-in name (and a known network's
    spec) shows its file and the digest the manifest records."""
    pytest.importorskip("distributed")
    from nnue_infer.io.distributed import score_files
    from nnue_infer.network import network_digest

    epd = tmp_path / "one.epd"
    epd.write_text(chess.STARTING_FEN + "\n")
    score_files([str(epd)], str(tmp_path / "scores"), network="default")
    recorded = json.loads((tmp_path / "scores" / "_nnue_infer.json").read_text())["network_sha256"]
    status, out, err = run(capsys, ["info", "--json", "default"])
    assert status == 0, err
    shown = json.loads(out)
    assert shown["network"] == "default" and shown["network_digest"] == recorded
    assert shown["file"] == str(resources.default_network_path())
    assert shown["sha256"] == hashlib.sha256(resources.default_network_path().read_bytes()).hexdigest()
    for name in resources.BUILT_IN_NAMES[1:]:
        status, out, err = run(capsys, ["info", "--json", name])
        shown = json.loads(out)
        assert status == 0 and shown["sha256"] == SHA256, err
        assert shown["network_digest"] == network_digest(resources.network_from_spec(name))
    status, out, err = run(capsys, ["info", "default"])
    assert status == 0 and out.startswith("network:       default\nfile:          ") and recorded in out
    status, out, err = run(capsys, ["info", str(tmp_path / "nosuch")])
    assert status == 1 and "is no known network name and no file (it does not exist)" in err


def test_info_not_a_network(capsys, tmp_path):
    text = tmp_path / "x.txt"
    text.write_text("hello\n")
    status, _, err = run(capsys, ["info", str(text)])
    assert status == 1 and "unknown network format" in err


def test_extract(capsys, tmp_path, stockfish_binary):
    out_path = tmp_path / "nn-ad9b42354671.nnue"
    status, out, err = run(capsys, ["extract", str(stockfish_binary), "-o", str(out_path)])
    assert status == 0, err
    assert SHA256 in out and "nn-ad9b42354671.nnue" in out
    assert hashlib.sha256(out_path.read_bytes()).hexdigest() == SHA256
    out_path.unlink()


def test_extract_from_non_engine(capsys, tmp_path):
    plain = tmp_path / "plain.bin"
    plain.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    status, _, err = run(capsys, ["extract", str(plain), "-o", str(tmp_path / "out.nnue")])
    assert status == 1 and "no embedded Stockfish network" in err
    assert not (tmp_path / "out.nnue").exists()


def test_subprocess_trace_byte_identical(corpus_raw_lines, trace_rows):
    """A real process, as a user runs it: stdout is Stockfish's NNUE text, byte for byte."""
    fen = trace_rows[2]["fen"]
    proc = subprocess.run([sys.executable, "-m", "nnue_infer", "eval", *SF, "--trace", "--fen", fen],
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == ("\n".join(nnue_part(corpus_raw_lines[fen])) + "\n").encode()
    bad = subprocess.run([sys.executable, "-m", "nnue_infer", "eval", "garbage"], capture_output=True, timeout=300)
    assert bad.returncode == 1 and b"'garbage' is neither a FEN, 'startpos'" in bad.stderr


# -- hostile input ---------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict:
    """This process's environment with this checkout first on the path, plus ``extra``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop(simd.ENV_VAR, None)
    env.update(extra)
    return env


def _run_closed(redirections: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m nnue_infer ARGS`` started by the shell with ``redirections`` (``<&-`` closes stdin)."""
    return subprocess.run(["sh", "-c", f'exec "$0" -m nnue_infer "$@" {redirections}', sys.executable, *args],
                          capture_output=True, text=True, env=_env(), cwd=ROOT)


def test_closed_stdin_or_stdout_is_an_error_line(tmp_path):
    run = _run_closed("<&-", "eval", "--epd", "-")
    assert run.returncode == 1 and run.stderr.splitlines() == [
        "error: standard input is closed (the process was started without it): give a file instead of -"], run.stderr
    run = _run_closed(">&-", "eval", "startpos")
    assert run.returncode == 1 and run.stderr.splitlines() == [
        "error: standard output is closed (the process was started without it): write to a file with -o FILE"], \
        run.stderr
    out = tmp_path / "out.txt"
    run = _run_closed(">&-", "eval", "startpos", "-o", str(out))  # not needed: not an error
    assert run.returncode == 0 and out.read_text().startswith(chess.STARTING_FEN + "\tvalue "), run.stderr


def test_closed_stderr_keeps_the_results_and_the_status(tmp_path):
    run = _run_closed("2>&-", "eval", "startpos")
    assert run.returncode == 0 and run.stdout.startswith(chess.STARTING_FEN + "\tvalue "), run.returncode
    epd = tmp_path / "bad.epd"
    epd.write_text(f"{chess.STARTING_FEN}\nnot a fen\n")
    run = _run_closed("2>&-", "eval", "--epd", str(epd))
    assert run.returncode == 1 and run.stdout.splitlines()[1].startswith(f"1,{chess.STARTING_FEN},"), run.stdout




def test_a_closed_stderr_pipe_with_the_output_in_a_file_is_an_error(tmp_path):
    """``nnue-infer eval --epd x.epd 2>&1 >scores.csv | grep -m1 error`` (the first message shown, the scores kept in
    a file): once grep had gone, the next message failed with EPIPE and the command group took it for the output's
    reader going away (| head): status 0, with scores.csv cut short (here empty) and no word.  Only standard
    output's reader going away ends quietly with 0; standard error's alone ends with 1 (the output is not whole;
    no message can be read)."""
    fen = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
    epd = tmp_path / "x.epd"
    epd.write_text("not a fen\n" + (fen + "\n") * 1000)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r, w = os.pipe()
    os.close(r)  # its reader gone before the first message (a fixed EPIPE)
    try:
        with open(tmp_path / "scores.csv", "wb") as out:
            proc = subprocess.run([sys.executable, "-m", "nnue_infer", "eval", "--epd", str(epd)], stdout=out,
                                  stderr=w, env=env, timeout=300)
    finally:
        os.close(w)
    rows = (tmp_path / "scores.csv").read_text().count("\n")
    assert proc.returncode == 1, (proc.returncode, rows)  # (was 0, with 0 of the 1001 rows written)

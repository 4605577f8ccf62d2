"""``nnue-infer data convert | rescore | info | filter`` on the files Stockfish's tools wrote
(``shared/data/binpack``): outputs byte-identical to the tools', scores equal to evaluate_batch,
errors with the byte offset and the output left alone."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from tests.conftest import shared_dir

from nnue_infer.cli import main
from nnue_infer.io import training_data as td
import os
import signal
import time
from conftest import shared_dir


@pytest.fixture(scope="module")
def bp():
    return shared_dir() / "data" / "binpack"


@pytest.mark.parametrize("src, dst", [("selfplay.binpack", "selfplay.plain"), ("selfplay.plain", "selfplay.binpack"),
                                      ("selfplay.bin", "selfplay.binpack"), ("selfplay.binpack", "selfplay.bin")])
def test_convert_gives_the_tools_files(src, dst, bp, tmp_path, capsys):
    out = tmp_path / dst
    assert main(["data", "convert", str(bp / src), str(out)]) == 0
    assert out.read_bytes() == (bp / dst).read_bytes()
    assert "20000 positions" in capsys.readouterr().err


def test_convert_pipes_and_parquet(bp, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nnue_infer", "data", "convert", "-", "-", "--from", "binpack",
                           "--to", "plain", "-q"], input=(bp / "dev-games.binpack").read_bytes(), capture_output=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == (bp / "dev-games.plain").read_bytes() and proc.stderr == b""
    assert main(["data", "convert", "-q", str(bp / "dev-games.binpack"), str(tmp_path / "d.parquet")]) == 0
    assert main(["data", "convert", "-q", str(tmp_path / "d.parquet"), str(tmp_path / "d.binpack")]) == 0
    assert (tmp_path / "d.binpack").read_bytes() == (bp / "dev-games.binpack").read_bytes()


def test_rescore_is_evaluate_batch(bp, tmp_path, network_path, evaluator):
    out = tmp_path / "r.binpack"
    assert main(["data", "rescore", "-q", str(bp / "selfplay.binpack"), str(out), "--net", str(network_path)]) == 0
    old, new = td.read(bp / "selfplay.binpack"), td.read(out)
    assert new.equals(td.TrainingData(**{**old.__dict__, "score": new.score}))
    assert np.array_equal(new.score.astype(np.int32), evaluator.evaluate_batch(old.fens()))
    assert main(["data", "rescore", "-q", str(bp / "selfplay.binpack"), str(tmp_path / "b.plain"), "--net",
                 str(network_path), "--blend", "0.5"]) == 0
    half = td.read(tmp_path / "b.plain").score.astype(np.float64)
    assert np.array_equal(half, np.rint(0.5 * new.score + 0.5 * old.score))


def test_info_and_filter(bp, tmp_path, capsys):
    assert main(["data", "info", "--json", str(bp / "selfplay.bin")]) == 0
    info = json.loads(capsys.readouterr().out)
    data = td.read(bp / "selfplay.binpack")
    assert info["positions"] == 20000 and info["chains"] == 1128
    assert info["results"]["draw"] == int(np.sum(data.result == 0))
    assert main(["data", "info", str(bp / "dev-games.plain")]) == 0
    text = capsys.readouterr().out
    assert "positions   26333" in text and "chains      264" in text
    out = tmp_path / "f.binpack"
    args = ["--skip-in-check", "--skip-captures", "--min-ply", "20", "--max-score", "3000"]
    assert main(["data", "filter", str(bp / "selfplay.binpack"), str(out), *args]) == 0
    keep = td.select(data, skip_in_check=True, skip_captures=True, min_ply=20, max_abs_score=3000)
    assert f"kept {int(keep.sum())} of 20000 positions" in capsys.readouterr().err
    assert td.read(out).equals(data[keep].with_chains())


def test_errors_name_the_offset_and_leave_the_output(bp, tmp_path, capsys):
    bad = tmp_path / "bad.binpack"
    bad.write_bytes((bp / "selfplay.binpack").read_bytes()[:50000])
    out = tmp_path / "out.plain"
    out.write_text("old")
    assert main(["data", "convert", str(bad), str(out)]) == 1
    assert capsys.readouterr().err.strip() == (f"error: {bad}: byte 50000: truncated block: 49992 of its 75270 "
                                               "bytes")
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["bad.binpack", "out.plain"]
    assert main(["data", "convert", str(bp / "selfplay.binpack"), str(tmp_path / "x.txt")]) == 2
    assert "cannot tell the training-data kind from the extension 'txt'" in capsys.readouterr().err
    assert main(["data", "info", str(tmp_path / "missing.binpack")]) == 1
    assert "missing.binpack" in capsys.readouterr().err


def test_standard_output_without_a_kind_is_named(bp, capsys):
    """'-' as DST without --to names standard output (the message named <stdin>, the source)."""
    assert main(["data", "convert", str(bp / "selfplay.binpack"), "-"]) == 2
    err = capsys.readouterr().err
    assert "error: <stdout>: standard output has no extension" in err and "<stdin>" not in err


@pytest.mark.parametrize("stdout", ["closed", "/dev/full"])
def test_info_to_a_failing_stdout_is_an_error(stdout, bp):
    """'data info' with stdout closed was silent (status 0), into a full device a traceback."""
    import os

    with open(os.devnull if stdout == "closed" else stdout, "wb") as sink:
        proc = subprocess.run([sys.executable, "-m", "nnue_infer", "data", "info", "-q", str(bp / "selfplay.binpack")],
                              stdout=sink, stderr=subprocess.PIPE, timeout=600, check=False,
                              preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err
    assert ("standard output is closed" if stdout == "closed" else "No space left on device") in err


def test_an_output_error_names_the_output(bp, capsys):
    """A full device as DST was reported under the input's name (the writer's OSError had none)."""
    assert main(["data", "convert", "-q", str(bp / "selfplay.binpack"), "/dev/full", "--to", "plain"]) == 1
    err = capsys.readouterr().err
    assert "error: /dev/full: No space left on device" in err and "selfplay" not in err


def test_info_on_an_empty_file(tmp_path, capsys):
    """An empty .plain has no plies: no 'ply None .. None' line, zeros elsewhere."""
    (tmp_path / "empty.plain").write_bytes(b"")
    assert main(["data", "info", str(tmp_path / "empty.plain")]) == 0
    out = capsys.readouterr().out
    assert "positions   0" in out and "chains      0" in out and "None" not in out


def test_more_than_32_pieces_is_refused_for_binpack(tmp_path, capsys):
    """A .binpack position holds at most 32 pieces: 33 were written into a file its own reader
    refused (status 0); now an error naming the row, and the destination as it was."""
    src = tmp_path / "p33.plain"
    src.write_text("fen QQQQQQQQ/QQQQQQQQ/QQQQQQQQ/QQQQQQQK/8/8/8/7k b - - 0 1\nmove h1g1\nscore 5\nply 0\n"
                   "result 0\ne\n")
    out = tmp_path / "p33.binpack"
    out.write_bytes(b"old")
    assert main(["data", "convert", "-q", str(src), str(out)]) == 1
    assert f"error: {src}: line 1 (byte 0): more than 32 occupied squares" in capsys.readouterr().err
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["p33.binpack", "p33.plain"]


def test_plain_without_records_stops_at_the_bound(tmp_path, capsys):
    """/dev/zero as .plain grew memory until MemoryError: the reader stops once an unfinished
    record passes td.MAX_PLAIN_RECORD, naming the byte; the bound itself is enforced exactly."""
    proc = subprocess.run([sys.executable, "-m", "nnue_infer", "data", "info", "--from", "plain", "/dev/zero"],
                          capture_output=True, timeout=600, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err
    assert f"error: /dev/zero: byte 0: a record longer than {td.MAX_PLAIN_RECORD} bytes without a line 'e'" in err
    record = b"fen 8/8/8/8/8/8/8/K6k w - - 0 1\nmove a1a2\nscore 0\nply 0\nresult 0\ne\n"
    path = tmp_path / "x.plain"
    path.write_bytes(record + b"\n" * (td.MAX_PLAIN_RECORD - len(record)) + record)
    assert len(td.TrainingData.concat(list(td.iter_chunks(path, chunk_bytes=4096)))) == 2
    path.write_bytes(record + b"x" * (td.MAX_PLAIN_RECORD + 1))
    with pytest.raises(td.TrainingDataError, match=rf"x\.plain: byte {len(record)}: a record longer than"):
        list(td.iter_chunks(path, chunk_bytes=4096))


def test_an_error_at_close_leaves_no_temporary_file(tmp_path, capsys):
    """The last chain is encoded at close: its unencodable move (a1a8, no piece on a1's line can
    reach it through the pawns) left DST.part-PID behind; a missing directory named that file."""
    src = tmp_path / "unenc.plain"
    src.write_text("fen rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\nmove e2e4\nscore 0\nply 0\n"
                   "result 0\ne\nfen rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1\nmove a1a8\n"
                   "score 0\nply 1\nresult 0\ne\n")
    out = tmp_path / "unenc.binpack"
    assert main(["data", "convert", "-q", str(src), str(out)]) == 1
    assert f"error: {src}: line 7 (byte 96): move cannot be encoded" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unenc.plain"]
    missing = tmp_path / "no" / "x.binpack"
    assert main(["data", "convert", "-q", str(src), str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"{missing}:" in err and ".part-" not in err


START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"


AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"


def _record(fen: str, move: str, score: int, ply: int) -> str:
    return f"fen {fen}\nmove {move}\nscore {score}\nply {ply}\nresult 0\ne\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("kind", ["binpack", "bin", "plain"])
def test_a_full_output_device_is_named_not_the_input(bp, kind, capsys):
    """``data convert dev.plain /dev/full --to binpack`` said ``error: dev.plain: No space left on device``."""
    assert main(["data", "convert", "-q", str(bp / "dev-games.plain"), "/dev/full", "--to", kind]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: /dev/full: No space left on device"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_output_device_is_named_not_standard_input(bp):
    proc = subprocess.run([sys.executable, "-m", "nnue_infer", "data", "convert", "-q", "-", "/dev/full", "--from",
                           "plain", "--to", "binpack"], input=(bp / "dev-games.plain").read_bytes(),
                          capture_output=True, timeout=900, check=False)
    assert proc.returncode == 1
    assert proc.stderr.decode().strip().splitlines()[-1] == "error: /dev/full: No space left on device"


def test_an_unencodable_move_is_reported_at_its_input_line(tmp_path, capsys):
    """A .plain whose second record plays d7d4 from the start position said ``error: out.binpack: row 1: ...``
    (the output, a 0-based row): the input file, the record's line and byte, and nothing written."""
    src = tmp_path / "in.plain"
    first = _record(START, "e2e4", 10, 0)
    src.write_text(first + _record(AFTER_E4, "d7d4", -5, 1))
    out = tmp_path / "out.binpack"
    assert main(["data", "convert", "-q", str(src), str(out)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: {src}: line 7 (byte {len(first)}): move cannot be encoded (not a pseudo-legal move of the side to "
        f"move): d7d4 in {AFTER_E4}")
    assert sorted(os.listdir(tmp_path)) == ["in.plain"]


def test_an_unencodable_move_kept_by_a_filter_is_reported_at_its_input_line(tmp_path, capsys):
    """The rows a filter drops do not shift the place named: the row's own line in the input."""
    src = tmp_path / "in.plain"
    records = [_record(START, "e2e4", 5000, 0), _record(START, "g1f3", 10, 0), _record(START, "e2e4", 10, 0),
               _record(AFTER_E4, "d7d4", -5, 1)]
    src.write_text("".join(records))
    out = tmp_path / "out.binpack"
    assert main(["data", "filter", "-q", str(src), str(out), "--max-score", "3000"]) == 1
    at = sum(len(r) for r in records[:3])
    assert capsys.readouterr().err.strip().startswith(f"error: {src}: line 19 (byte {at}): move cannot be encoded")
    assert not out.exists()


def test_an_unencodable_move_of_a_bin_input_is_reported_at_its_record(tmp_path, capsys):
    plain = tmp_path / "in.plain"
    plain.write_text(_record(START, "e2e4", 10, 0) + _record(AFTER_E4, "d7d4", -5, 1))
    src = tmp_path / "in.bin"
    assert main(["data", "convert", "-q", str(plain), str(src)]) == 0  # a .bin keeps any move
    assert main(["data", "convert", "-q", str(src), str(tmp_path / "out.binpack")]) == 1
    assert capsys.readouterr().err.strip().startswith(f"error: {src}: record 1 (byte 40): move cannot be encoded")


def _own_files(directory) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("output", ["out.binpack", "out.plain.gz", "out.parquet"])
def test_a_convert_stopped_by_a_signal_removes_its_temporary_file(bp, tmp_path, signum, output):
    """SIGTERM or SIGHUP during ``data convert`` left the hidden temporary output behind (one was 242 MB; SIGINT
    cleaned up).  A real conversion reading a pipe that stays open is stopped while its temporary file exists:
    the temporary file goes, the earlier output stays as it was, the status is 128 + the signal's number."""
    if output.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    out = tmp_path / output
    out.write_bytes(b"earlier output")  # the temporary file is made at once beside a file it replaces
    # The command keeps a signal its parent ignores (as under nohup, whose SIGHUP every child inherits ignored):
    # the child starts with the default disposition, which it then handles
    inherited = signal.signal(signum, signal.SIG_DFL)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "nnue_infer", "data", "convert", "-q", "-", str(out), "--from",
                                 "plain"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    finally:
        signal.signal(signum, inherited)
    try:
        proc.stdin.write((bp / "dev-games.plain").read_bytes()[:100_000])  # less than a chunk: it waits for more
        proc.stdin.flush()
        deadline = time.monotonic() + 600  # a deadline, not a timing: start-up under load is slow
        while len(_own_files(tmp_path)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert any(name.startswith(f".{output}.tmp-") for name in _own_files(tmp_path)), proc.stderr.read()
        proc.send_signal(signum)
        assert proc.wait(timeout=600) == 128 + signum
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stderr.close()
    assert _own_files(tmp_path) == [output]
    assert out.read_bytes() == b"earlier output"

"""``nnue-infer data``: where errors point (the file and place at fault) and what a stopped command leaves
behind (nothing: no temporary file, the destination as it was)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import shared_dir

from nnue_infer.cli import main

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"


@pytest.fixture(scope="module")
def bp():
    return shared_dir() / "data" / "binpack"


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
    proc = subprocess.Popen([sys.executable, "-m", "nnue_infer", "data", "convert", "-q", "-", str(out), "--from",
                             "plain"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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

"""Issue 8 items 11 and 13 through the command line: clear errors and exit statuses, no
tracebacks, no hangs, no NaN JSON, short messages for huge bad input, the plain line's pawns as
Stockfish prints them.  Each test failed before its fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

from nnue_infer import Architecture, FloatNetwork, HiddenLayer, quantise, save
from nnue_infer.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FEN = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"


def run(capsys, *args):
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(scope="module")
def small_nets(tmp_path_factory):
    """A float network file and its quantised version (small, Chess768)."""
    d = tmp_path_factory.mktemp("nets")
    arch = Architecture("Chess768", 64, "pairwise", 127, 7, psqt_buckets=0, output_buckets=1,
                        layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")))
    fnet = FloatNetwork.random(arch, seed=13)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qnet = quantise(fnet)
    save(fnet, d / "float.safetensors")
    save(qnet, d / "q.safetensors")
    return d / "float.safetensors", d / "q.safetensors"


# --- item 11 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["/nonexistent-dir/x.csv", "/dev/full"])
def test_item11_unwritable_output_is_a_message(tmp_path, capsys, target):
    """Item 11: ``-o /missing/dir/x.csv`` and ``-o /dev/full`` gave tracebacks."""
    epd = tmp_path / "p.epd"
    epd.write_text(FEN + "\n")
    status, out, err = run(capsys, "eval", "--epd", epd, "-o", target)
    assert status == 1 and out == ""
    assert err.startswith("error: cannot write") and target.split("/")[-1] in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_item11_crosscheck_plot_into_a_missing_directory_fails_before_the_work(tmp_path, capsys, small_nets):
    """Item 11: ``crosscheck --plot /missing/dir/p.png`` raised PIL's traceback after all the work."""
    fpath, qpath = small_nets
    pos = tmp_path / "p.epd"
    pos.write_text(FEN + "\n")
    status, out, err = run(capsys, "crosscheck", "--float", fpath, "--quantised", qpath, "--positions", pos,
                           "--plot", tmp_path / "missing" / "p.png")
    assert status == 2 and out == ""
    assert "Invalid value for --plot" in err and "does not exist" in err


def test_item11_datagen_with_a_float_teacher(tmp_path, capsys, small_nets):
    """Item 11: ``datagen --teacher float.safetensors`` raised ``TypeError``."""
    status, out, err = run(capsys, "datagen", "-o", tmp_path / "p.npz", "-n", 10, "--teacher", small_nets[0])
    assert status == 1
    assert err.strip() == f"error: --teacher {small_nets[0]} holds a float network; the teacher must be quantised " \
                          "(nnue-infer quantise)"


def test_item11_extract_into_a_missing_directory(tmp_path, capsys):
    """Item 11: ``extract -o /missing/n.nnue`` named the temporary ``.part`` file."""
    status, out, err = run(capsys, "extract", "/usr/games/stockfish", "-o", tmp_path / "missing" / "n.nnue")
    assert status == 2 and ".part" not in err and f"directory {tmp_path / 'missing'} does not exist" in err


@pytest.mark.parametrize("what", ["devnull", "directory", "fifo"])
def test_item11_net_that_is_not_a_regular_file(tmp_path, capsys, what):
    """Item 11: ``--net /dev/null`` or a directory said "does not exist"; ``info FIFO`` hung."""
    path = {"devnull": "/dev/null", "directory": str(tmp_path)}.get(what)
    if what == "fifo":
        path = str(tmp_path / "net.fifo")
        os.mkfifo(path)
    status, out, err = run(capsys, "eval", "--net", path, FEN)
    assert status == 1 and err.strip() == (f"error: {path}: not a regular file (a directory, device or FIFO); a network "
                                           "is a .nnue or .safetensors file")
    r = subprocess.run([sys.executable, "-m", "nnue_infer", "info", path], capture_output=True, text=True,
                       timeout=120)  # hung before
    assert r.returncode == 1 and "not a regular file" in r.stderr


def test_item11_missing_net_file_still_says_it_does_not_exist(tmp_path, capsys):
    status, out, err = run(capsys, "eval", "--net", tmp_path / "nope.nnue", FEN)
    assert status == 1 and "does not exist" in err


# --- item 13 ---------------------------------------------------------------------------------

def test_item13_plain_line_prints_what_stockfish_prints(capsys):
    """Item 13: the plain line printed +0.27 (truncated centipawns / 100) under "(white side)"
    where ``--trace`` and Stockfish print +0.28 (value / 361)."""
    status, out, err = run(capsys, "eval", "--net", "stockfish", FEN)
    assert status == 0
    assert out == f"{FEN}\tvalue 100\tcp +27 (side to move)\t+0.28 (white side)\n"
    status, trace, _ = run(capsys, "eval", "--net", "stockfish", "--trace", FEN)
    assert trace.splitlines()[-1] == "NNUE evaluation        +0.28 (white side)"


def test_item13_huge_bad_input_gives_a_short_message(tmp_path, capsys):
    """Item 13: a bad 4 MB EPD line gave an 8 MB error message (quoted twice, in full)."""
    huge = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x " + "K" * 4_000_000
    epd = tmp_path / "p.epd"
    epd.write_text(FEN + "\n" + huge + "\n")
    status, out, err = run(capsys, "eval", "--epd", epd)
    assert status == 1 and len(out.splitlines()) == 2  # the line before is still scored
    assert len(err) < 2000 and f"{epd}:2: line longer than 1048576 bytes" in err  # EPD lines stop at 1 MiB
    status, out, err = run(capsys, "eval", "--fen", huge)
    assert status == 1 and len(err) < 2000 and "more characters" in err
    status, out, err = run(capsys, "eval", huge)  # as words: the bad side to move is named
    assert status == 1 and len(err) < 2000 and "more characters" in err and "found 'x'" in err


@pytest.mark.parametrize("content", ["", "# only a comment\n\n"])
def test_item13_crosscheck_on_an_empty_file(tmp_path, capsys, small_nets, content):
    """Item 13: crosscheck on an empty file exited 0 with NaN statistics and wrote invalid JSON."""
    fpath, qpath = small_nets
    pos = tmp_path / "empty.epd"
    pos.write_text(content)
    status, out, err = run(capsys, "crosscheck", "--float", fpath, "--quantised", qpath, "--positions", pos,
                           "--plot", "", "--json")
    assert status == 1 and out == ""
    assert err.strip() == f"error: {pos}: no positions (the file is empty or holds only comments)"


def test_item13_crosscheck_json_is_valid_even_when_a_statistic_is_undefined(tmp_path, capsys, small_nets):
    """One position: the correlation is undefined; the JSON says null, never NaN."""
    fpath, qpath = small_nets
    pos = tmp_path / "one.epd"
    pos.write_text(FEN + "\n")
    status, out, err = run(capsys, "crosscheck", "--float", fpath, "--quantised", qpath, "--positions", pos,
                           "--plot", "", "--json")
    assert status == 0
    summary = json.loads(out, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c}"))
    assert summary["positions"] == 1 and summary["correlation"] is None


def test_a_closed_stdout_ends_quietly(tmp_path):
    """Hostile pass: ``nnue-infer eval --epd big.epd | head -2`` printed "Error: cannot write to
    stdout: Broken pipe"; the reader going away is no error worth a message."""
    epd = tmp_path / "p.epd"
    epd.write_text((FEN + "\n") * 20000)
    r = subprocess.run(f"{sys.executable} -m nnue_infer eval --epd {epd} | head -2", shell=True, capture_output=True,
                       text=True, executable="/bin/bash", timeout=300)
    assert r.stdout.splitlines()[0] == "line,fen,value,cp,cp_white,in_check,outcome" and len(r.stdout.splitlines()) == 2
    # nothing but, on a cold cache, the first-use compile notice (its own test: test_compile)
    assert [line for line in r.stderr.splitlines() if "compiling kernels for this CPU" not in line] == [], r.stderr


def _run_into_pipe(args: list[str], reader: str, cwd) -> tuple[int, str, bytes]:
    """Run ``python -m nnue_infer ARGS`` with its standard output a real pipe whose reader goes away: ``"closed"``
    before the process starts (its first write fails: the same every run), ``"line"`` after reading one line
    (as ``| head -1``: the process may have written everything by then, or not).  (status, stderr, what was read)."""
    r, w = os.pipe()
    if reader == "closed":
        os.close(r)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "nnue_infer", *args], stdout=w, stderr=subprocess.PIPE, cwd=cwd,
                            env=env)
    os.close(w)
    read = b""
    if reader == "line":
        with os.fdopen(r, "rb") as f:
            read = f.readline()
    try:
        err = proc.communicate(timeout=300)[1].decode()
    finally:
        proc.kill()
    # nothing on stderr but, on a cold cache, the first-use compile notice (its own test: test_compile)
    err = "".join(line for line in err.splitlines(True) if "compiling kernels for this CPU" not in line)
    return proc.returncode, err, read


@pytest.mark.parametrize("args, reader", [
    (["eval", "--moves", "startpos"], "closed"), (["eval", "--moves", "startpos"], "line"),
    (["eval", "--epd", "big.epd"], "closed"), (["eval", "--epd", "big.epd", "-o", "-"], "line"),
    (["data", "info", "selfplay.binpack"], "closed"), (["data", "convert", "selfplay.binpack", "-", "--to", "plain"], "closed"),
    (["--help"], "closed")])
def test_a_reader_going_away_ends_quietly_with_status_0(tmp_path, args, reader):
    """``nnue-infer eval --moves FEN | head -1`` ended with status 1 when the reader had gone before a write (click's
    handler of EPIPE), 0 when everything fit in the pipe first: a status that depended on the timing, and ``-o -``
    said "cannot write to stdout: Broken pipe".  Now a reader going away ends every command (and --help) with
    status 0 and nothing on stderr, as docs/command-line.md says."""
    (tmp_path / "big.epd").write_text((FEN + "\n") * 20000)
    if args[0] == "data":
        from conftest import shared_dir

        (tmp_path / "selfplay.binpack").write_bytes((shared_dir() / "data/binpack/selfplay.binpack").read_bytes())
    for _ in range(2):
        status, err, read = _run_into_pipe(args, reader, tmp_path)
        assert (status, err) == (0, ""), (status, err)
        assert reader == "closed" or read.strip(), read


def test_compressed_network_and_two_stdin_inputs_are_named(tmp_path, capsys):
    """Hostile pass: a gzip-compressed network said "unknown network format (first bytes 1f 8b ...)";
    ``datagen --games - --exclude -`` would read standard input twice."""
    import gzip

    from nnue_infer.resources import default_network_path

    gz = tmp_path / "net.safetensors.gz"
    gz.write_bytes(gzip.compress(default_network_path().read_bytes()[:4096]))
    status, out, err = run(capsys, "info", gz)
    assert status == 1 and "a gzip-compressed file; decompress the network first (gunzip" in err
    status, out, err = run(capsys, "datagen", "-o", tmp_path / "p.npz", "--games", "-", "--exclude", "-")
    assert status == 2 and "cannot both read standard input" in err


#: The first bytes of a PNG image (signature, IHDR chunk: its first NUL at byte offset 8, on line 3), then noise.
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00P\x00\x00\x00P\x08\x06" + bytes(range(1, 256)) * 4


@pytest.mark.parametrize("kind, what", [("pgn", "a PGN text file"), ("epd", "an EPD/FEN text file")])
@pytest.mark.parametrize("how", ["plain", "gzip", "stdin"])
def test_a_binary_file_is_refused_naming_the_byte(tmp_path, capsys, monkeypatch, kind, what, how):
    """An image named ``.pgn`` gave a row of the start position and an error row ("failed to parse SAN at ply 1:
    \\ufffdPNG"); named ``.epd``, error rows up to its first NUL.  A NUL byte among an input's first bytes is binary
    data: refused before any row, naming the file, the byte offset and its line."""
    import gzip
    import io

    path = tmp_path / f"image.{kind}"
    path.write_bytes(gzip.compress(PNG) if how == "gzip" else PNG)
    if how == "stdin":
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(PNG)))
    name = "-" if how == "stdin" else path
    status, out, err = run(capsys, "eval", f"--{kind}", name)
    label = "<stdin>" if how == "stdin" else path
    assert (status, out, err) == (1, "", f"error: {label}: NUL byte at byte offset 8 (line 3): binary data, not {what}\n")


def test_binary_pgn_refused_by_read_pgn_and_latin1_pgn_still_read(tmp_path):
    """The Python reader refuses binary data too; bytes that are not UTF-8 alone are no binary data: a Latin-1 PGN's
    names are read as U+FFFD (the rule of ``inputs.open_input``) and its games scored."""
    from nnue_infer.errors import InputKindError
    from nnue_infer.io.pgn import read_pgn

    image = tmp_path / "image.pgn"
    image.write_bytes(PNG)
    with pytest.raises(InputKindError, match=f"^{image}: NUL byte at byte offset 8 "):
        list(read_pgn(image))
    latin1 = tmp_path / "latin1.pgn"
    latin1.write_bytes('[White "Müller"]\n\n1. e4 e5 *\n'.encode("latin-1"))
    (batch,) = read_pgn(latin1)
    assert batch.headers["White"].tolist() == ["M\ufffdller"] * 3 and batch.san == ["", "e4", "e5"]


def _damaged_gzip() -> bytes:
    import gzip

    return gzip.compress((FEN + "\n").encode() * 3)[:11]  # its header, then nothing that decodes


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("kind, content, says", [
    ("epd", b"x" * (2 << 20), ":1: line longer than"),  # InputError at the first line
    ("epd", None, "corrupt or truncated gzip data found by compressed byte 11"),  # InputError before any line
    ("epd", b'[Event "x"]\n\n1. e4 *\n', ":1: this is PGN"),  # InputKindError
    ("pgn", PNG, "binary data, not a PGN text file"),
])
def test_a_run_refused_before_any_row_leaves_no_output(tmp_path, capsys, suffix, kind, content, says):
    """An input refused at its first line with ``-o x.parquet`` left a Parquet file of no columns (a damaged gzip
    stream, one of the usual columns and no rows), with ``-o x.csv`` an empty file, and an earlier file of that
    name emptied: a refused run leaves no file, and one that was there as it was."""
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    src = tmp_path / f"in.{kind}"
    src.write_bytes(_damaged_gzip() if content is None else content)
    fresh = tmp_path / f"new{suffix}"
    status, out, err = run(capsys, "eval", f"--{kind}", src, "-o", fresh)
    assert status == 1 and says in err and out == ""
    assert not fresh.exists()
    kept = tmp_path / f"old{suffix}"
    kept.write_bytes(b"earlier results\n")
    status, out, err = run(capsys, "eval", f"--{kind}", src, "-o", kept)
    assert status == 1 and says in err and kept.read_bytes() == b"earlier results\n"
    assert sorted(os.listdir(tmp_path)) == sorted([src.name, kept.name])  # no temporary file either


def test_a_run_with_nothing_to_write_still_makes_its_file(tmp_path, capsys):
    """The output file is opened by the first write; a run that succeeds with nothing to write (JSON lines of an
    input without positions) still leaves its (empty) file."""
    src = tmp_path / "empty.epd"
    src.write_text("# no positions\n")
    status, out, err = run(capsys, "eval", "--epd", src, "-o", tmp_path / "out.jsonl")
    assert status == 0 and (tmp_path / "out.jsonl").read_bytes() == b""

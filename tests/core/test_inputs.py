"""``nnue_infer.inputs.open_input`` and the CLI's file inputs: paths, ``-`` (stdin), pipes, gzip, zstd.

Issue 8 item 9: ``nnue-infer eval --pgn /dev/stdin`` from a pipe crashed after the first game
(``OSError: [Errno 29] Illegal seek`` at ``f.buffer.tell()``); compressed files had to be
decompressed by hand.  Every input is now read front to back without seeking.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

import chess
import chess.pgn
import pytest
import zstandard

from nnue_infer.training.crosscheck import read_positions
from nnue_infer.training.datagen import read_exclude, read_games
from nnue_infer.errors import InputError
from nnue_infer.inputs import open_input, replacing
from concurrent.futures import ThreadPoolExecutor
from nnue_infer.cli import main

TEXT = "".join(f"line {i} é\n" for i in range(5000))  # ~50 kB: several decompressor chunks


def zstd_frames(*parts: bytes) -> bytes:
    return b"".join(zstandard.ZstdCompressor().compress(p) for p in parts)


@pytest.fixture
def files(tmp_path):
    data = TEXT.encode()
    half = len(data) // 2
    paths = {
        "plain": tmp_path / "t.txt",
        "gzip": tmp_path / "t.txt.gz",
        "zstd": tmp_path / "t.txt.zst",
        "gzip-misnamed": tmp_path / "t.txt",  # replaced below: detection is by magic bytes, not by name
    }
    paths["plain"].write_bytes(data)
    paths["gzip"].write_bytes(gzip.compress(data[:half]) + gzip.compress(data[half:]))  # two members
    paths["zstd"].write_bytes(zstd_frames(data[:half], data[half:]))  # two frames
    misnamed = tmp_path / "plain-name.epd"
    misnamed.write_bytes(gzip.compress(data))
    paths["gzip-misnamed"] = misnamed
    return paths


@pytest.mark.parametrize("kind", ["plain", "gzip", "zstd", "gzip-misnamed"])
def test_open_input_reads_plain_and_compressed_files(files, kind):
    path = files[kind]
    with open_input(path) as inp:
        assert inp.text.read() == TEXT
        assert inp.size == path.stat().st_size
        assert inp.bytes_read == inp.size
        assert inp.compression == {"plain": None, "gzip-misnamed": "gzip"}.get(kind, kind)
    with open_input(path, text=False) as inp:
        assert inp.binary.read() == TEXT.encode()


@pytest.mark.parametrize("kind", ["plain", "gzip", "zstd"])
def test_open_input_never_seeks_a_pipe(files, kind):
    """A pipe (as ``/dev/stdin`` or ``<(zcat ...)`` gives) delivers a few bytes at a time and cannot seek."""
    data = files[kind].read_bytes()
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb", buffering=0) as f:
            for i in range(0, len(data), 3):  # 3-byte writes: the magic arrives in pieces
                f.write(data[i:i + 3])

    t = threading.Thread(target=feed)
    t.start()
    with open_input(f"/dev/fd/{r}") as inp:
        assert inp.size is None
        assert list(inp.text) == TEXT.splitlines(keepends=True)
        assert inp.bytes_read == len(data)
    t.join()
    os.close(r)


def test_dash_is_stdin():
    data = gzip.compress(TEXT.encode())
    code = ("from nnue_infer.inputs import open_input\n"
            "with open_input('-') as inp:\n"
            "    import sys; sys.stdout.write(inp.text.read())\n"
            "print(inp.name, inp.compression, inp.size, sys.stdin.closed)")
    r = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, check=True)
    assert r.stdout.decode() == TEXT + "<stdin> gzip None False\n"


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_truncated_or_corrupt_compressed_input_raises_naming_the_source(files, tmp_path, kind):
    data = files[kind].read_bytes()
    truncated = tmp_path / f"cut.{kind}"
    truncated.write_bytes(data[:-7])  # zstandard's own stream reader stops silently here
    with pytest.raises(InputError, match=f"cut.{kind}: .*truncated {kind}"), open_input(truncated) as inp:
        inp.text.read()
    corrupt = tmp_path / f"bad.{kind}"
    corrupt.write_bytes(data[:12] + bytes(64) + data[76:])
    with pytest.raises(InputError, match=f"bad.{kind}: corrupt"), open_input(corrupt) as inp:
        inp.text.read()


def test_missing_file_and_directory_raise_oserror_naming_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.pgn"):
        open_input(tmp_path / "nope.pgn")
    with pytest.raises(IsADirectoryError):
        open_input(tmp_path)


def test_empty_input():
    r, w = os.pipe()
    os.close(w)
    with open_input(f"/dev/fd/{r}") as inp:
        assert inp.text.read() == "" and inp.compression is None
    os.close(r)


# --- the CLI's file inputs ---------------------------------------------------------------------

GAMES = [["e2e4", "e7e5", "g1f3"], ["d2d4", "d7d5"], ["c2c4"]]


def pgn_text() -> str:
    out = []
    for i, moves in enumerate(GAMES):
        game = chess.pgn.Game.from_board(_play(moves))
        game.headers["Event"] = f"g{i}"
        out.append(str(game))
    return "\n\n".join(out) + "\n"


def _play(moves):
    board = chess.Board()
    for m in moves:
        board.push_uci(m)
    return board


def cli(*args, stdin: bytes | None = None, shell: str | None = None):
    cmd = shell if shell else [sys.executable, "-m", "nnue_infer", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, shell=bool(shell), executable="/bin/bash" if shell else None)


def test_pgn_from_a_pipe_reads_every_game(tmp_path):
    """Item 9: ``--pgn -`` and ``--pgn /dev/stdin`` from a pipe (crashed with 'Illegal seek' after game 1)."""
    plain = tmp_path / "g.pgn"
    plain.write_text(pgn_text())
    expected = cli("eval", "--pgn", str(plain))
    assert expected.returncode == 0, expected.stderr
    rows = expected.stdout.decode().splitlines()
    assert len(rows) == 1 + sum(len(g) + 1 for g in GAMES)
    for arg in ("-", "/dev/stdin"):
        r = cli("eval", "--pgn", arg, "--progress", stdin=gzip.compress(plain.read_bytes()))
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout == expected.stdout
    zst = tmp_path / "g.pgn.zst"
    zst.write_bytes(zstd_frames(plain.read_bytes()))
    r = cli(shell=f"{sys.executable} -m nnue_infer eval --pgn <(cat {zst})")  # process substitution: a pipe
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == expected.stdout


def test_epd_crosscheck_and_datagen_inputs_accept_stdin_and_compression(tmp_path):
    fens = [_play(g).fen() for g in GAMES]
    epd = tmp_path / "p.epd"
    epd.write_text("\n".join(fens) + "\n")
    expected = cli("eval", "--epd", str(epd))
    assert expected.returncode == 0
    r = cli("eval", "--epd", "-", stdin=zstd_frames(epd.read_bytes()))
    assert (r.returncode, r.stdout) == (0, expected.stdout), r.stderr
    gz = tmp_path / "p.epd.gz"
    gz.write_bytes(gzip.compress(epd.read_bytes()))
    assert read_positions(gz) == fens  # crosscheck --positions
    games = tmp_path / "games.jsonl.zst"
    games.write_bytes(zstd_frames("".join(json.dumps({"id": str(i), "start_fen": chess.STARTING_FEN, "moves": g}) + "\n"
                                          for i, g in enumerate(GAMES)).encode()))
    assert [g["moves"] for g in read_games(games)] == GAMES  # datagen --games
    assert len(read_exclude(gz)) == len(fens)  # datagen --exclude


def test_corrupt_compressed_pgn_is_a_clear_error(tmp_path):
    data = gzip.compress(pgn_text().encode())
    r = cli("eval", "--pgn", "-", stdin=data[:-10])
    assert r.returncode == 1
    assert r.stderr.decode().strip().splitlines()[-1] == (
        f"error: <stdin>: corrupt or truncated gzip data found by compressed byte {len(data) - 10} (Compressed file "
        "ended before the end-of-stream marker was reached); the rows before it were read")


def test_a_file_without_newlines_is_refused_not_read_into_memory(capsys, tmp_path):
    """Hostile pass: ``--pgn /dev/zero`` (or any line reader) read one endless line until the
    memory ran out; lines are capped at ``MAX_LINE`` bytes (``/dev/zero`` itself is binary data, refused
    by its first bytes)."""
    from nnue_infer.cli import main
    from nnue_infer.inputs import MAX_LINE

    assert main(["eval", "--pgn", "/dev/zero"]) == 1
    assert capsys.readouterr().err.strip() == ("error: /dev/zero: NUL byte at byte offset 0 (line 1): binary data, "
                                               "not a PGN text file")
    long_line = tmp_path / "long.pgn"
    long_line.write_bytes(b"x" * (MAX_LINE + 1))
    for option in ("--pgn",):  # (--epd now reads the whole input as bytes first: not line by line)
        assert main(["eval", option, str(long_line)]) == 1
        err = capsys.readouterr().err
        assert err.strip() == (f"error: {long_line}: line 1 is longer than {MAX_LINE} bytes (not a text file "
                               "of positions or games?)")
    with pytest.raises(InputError, match="line 1 is longer"):
        read_positions("/dev/zero")


def _replace_text(path, text):
    with replacing(path) as tmp, open(tmp, "w") as f:
        f.write(text)


def test_replacing_keeps_an_existing_files_permission_bits(tmp_path):
    """The renamed temporary file took the place of the old one with its own mode (0644 under the
    usual umask: a 0600 file became readable by everyone); the old file's bits are kept now."""
    path = tmp_path / "out.txt"
    path.write_text("old")
    for mode in (0o600, 0o751):
        path.chmod(mode)
        _replace_text(path, f"new {mode:o}")
        assert path.read_text() == f"new {mode:o}" and stat.S_IMODE(path.stat().st_mode) == mode
    path.chmod(0o600)
    with replacing(path) as tmp, open(tmp, "w") as f:  # while it is written, others cannot read the new contents
        f.write("secret")
        assert stat.S_IMODE(os.stat(tmp).st_mode) == 0o600
    umask = os.umask(0)
    os.umask(umask)
    _replace_text(tmp_path / "fresh.txt", "x")  # a new file: the umask's bits, as open() gives
    assert stat.S_IMODE((tmp_path / "fresh.txt").stat().st_mode) == 0o666 & ~umask


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write any file (the root variant runs this check as nobody)")
def test_replacing_refuses_a_file_read_only_for_this_user(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    path.chmod(0o444)
    with pytest.raises(PermissionError, match=r"read-only \(mode 0444\), not replaced: .*out\.txt"):
        _replace_text(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_replacing_as_root_keeps_a_read_only_files_mode_and_refuses_it_to_other_users(tmp_path):
    """Root may write a read-only file (as cp does): it is replaced with its mode kept.  The refusal
    a user gets is checked by running the same write as ``nobody`` (setpriv) in a directory
    ``nobody`` may write to, so only the file's own mode stands in the way."""
    path = tmp_path / "out.txt"
    path.write_text("old")
    path.chmod(0o444)
    _replace_text(path, "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o444
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run the write as another user")
    shared = tempfile.mkdtemp(prefix="nnue-infer-ro-")
    try:
        os.chmod(shared, 0o1777)
        target = os.path.join(shared, "out.txt")
        with open(target, "w") as f:
            f.write("old")
        os.chown(target, 65534, 65534)
        os.chmod(target, 0o444)
        code = ("import sys; from nnue_infer.inputs import replacing\n"
                "try:\n    with replacing(sys.argv[1]) as tmp, open(tmp, 'w') as f: f.write('new')\n"
                "except PermissionError as exc: print(exc)\n")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code,
                              target], capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": root},
                             check=True).stdout
        assert out == f"[Errno 13] Permission denied: the file is read-only (mode 0444), not replaced: {target!r}\n"
        with open(target) as f:
            assert f.read() == "old"
        assert os.listdir(shared) == ["out.txt"]
    finally:
        shutil.rmtree(shared)


# -- hostile input ---------------------------------------------------------------------------------------------------

START_E5 = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"


def _feed_in_pieces(fd: int, pieces: list[bytes]) -> None:
    """Write ``pieces`` to the pipe ``fd`` (then close it), each once its reader has read everything before it (the
    pipe is empty: FIONREAD), so that each of the reader's reads gets one piece at most, whatever its start-up time."""
    import fcntl
    import struct
    import termios
    import time

    for i, piece in enumerate(pieces):
        if i:
            deadline = time.monotonic() + 120
            while struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0] and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # the reader is back in its read, waiting
        os.write(fd, piece)
    os.close(fd)


@pytest.mark.parametrize("option", ["--pgn", "--epd"])
def test_a_nul_byte_after_the_first_piece_of_a_slow_pipe_is_found(option):
    """The binary-input check looks for a NUL byte in an input's first 8 KiB (inputs.SNIFF_BYTES), but read
    from a pipe it saw what the first read gave: a PGN on standard input whose NUL bytes came in a later piece
    was scored (status 0, the second game's tags lost to the NUL bytes before them).  The start of a pipe is
    now read until 8 KiB or its end."""
    import subprocess
    import sys

    if option == "--pgn":
        pieces = [b'[Event "x"]\n\n1. e4 e5 *\n', b'\0\0\0[Event "y"]\n\n1. d4 *\n']
    else:
        pieces = [f"{chess.STARTING_FEN}\n".encode(), f"{START_E5}\n\0\n".encode()]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "nnue_infer", "eval", option, "-"], stdin=r,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    os.close(r)
    try:
        with ThreadPoolExecutor(1) as pool:
            fed = pool.submit(_feed_in_pieces, w, pieces)
            out, err = proc.communicate(timeout=300)
            fed.result()
    finally:
        proc.kill()
        proc.wait()
    kind = "a PGN text file" if option == "--pgn" else "an EPD/FEN text file"
    at, line = (len(pieces[0]), 4) if option == "--pgn" else (len(pieces[0]) + len(START_E5) + 1, 3)
    assert proc.returncode == 1 and out == b"", (proc.returncode, out)
    assert f"error: <stdin>: NUL byte at byte offset {at} (line {line}): binary data, not {kind}" in err.decode(), err


def test_a_nul_byte_in_a_later_gzip_member_is_found(tmp_path, capsys):
    """One step of the gzip decoder gives one member's bytes: a NUL byte in the second member of a short
    first one went unseen as from a slow pipe (zstd frames were read on to the chunk's end already)."""
    import gzip

    path = tmp_path / "games.pgn.gz"
    path.write_bytes(gzip.compress(b'[Event "x"]\n\n1. e4 e5 *\n') + gzip.compress(b'\0\0\0[Event "y"]\n\n1. d4 *\n'))
    status = main(["eval", "--pgn", str(path)])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err == f"error: {path}: NUL byte at byte offset 24 (line 4): binary data, not a PGN text file\n"


TWO_ROWS = ("fen rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\nmove e2e4\nscore 35\nply 0\nresult 1\ne\n"
            "fen rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1\nmove c7c5\nscore -40\nply 1\nresult -1\ne\n")


def test_a_zstd_long_window_input_is_not_called_corrupt(tmp_path):
    """A file compressed with ``zstd --long=31`` (a 2 GiB window, common for large datasets) is refused
    by the decompressor's 128 MiB limit, as the ``zstd`` tool refuses it without ``--long``; the
    message said 'corrupt zstd data'.  Now it names the window and how to read the file (a training-data
    reader reports it as damaged training data, the input's error as its cause)."""
    zstandard = pytest.importorskip("zstandard")
    from nnue_infer.errors import InputError, TrainingDataError
    from nnue_infer.io import training_data as td

    params = zstandard.ZstdCompressionParameters(window_log=31, enable_ldm=True, write_content_size=False)
    path = tmp_path / "two.plain.zst"
    with open(path, "wb") as f, zstandard.ZstdCompressor(compression_params=params).stream_writer(f) as w:
        w.write(TWO_ROWS.encode())
    with pytest.raises(TrainingDataError) as refused:
        td.read(path)
    assert isinstance(refused.value.__cause__, InputError)
    message = str(refused.value)
    assert message.startswith(f"{path}: a zstd frame (by compressed byte ")
    assert "needs a 2048 MiB window" in message and "zstd -d --long=31" in message and "corrupt" not in message

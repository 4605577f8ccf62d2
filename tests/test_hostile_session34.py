"""Hostile pass, session 34: the kernel cache, the training-data files and the research API under
odd use (each test failed before its fix)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
from numba.core import config as numba_config

needs_jit = pytest.mark.skipif(numba_config.DISABLE_JIT, reason="NUMBA_DISABLE_JIT is set: nothing compiles")


def _read_only(directory) -> list[str]:
    """A command prefix that runs its command with ``directory`` read-only: its write bits off for a
    user other than root (restored by the caller), a read-only bind mount in a mount namespace of
    its own for root (whom write bits do not stop); skips the test when neither can be had."""
    if os.geteuid() != 0:
        for path in [directory, *directory.rglob("*")]:
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        return []
    prefix = ["unshare", "-m", "sh", "-c",
              'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"', str(directory)]
    if shutil.which("unshare") is None or subprocess.run(
            [*prefix, "sh", "-c", f'! touch "{directory}/probe" 2>/dev/null'], capture_output=True).returncode:
        pytest.skip("no read-only bind mount here (unshare -m)")
    return prefix


@needs_jit
def test_item1_a_read_only_cache_filled_ahead_is_loaded(tmp_path):
    """A cache filled ahead of use and then read-only (``NUMBA_CACHE_DIR=/opt/cache nnue-infer warmup``
    in an image run by another user or on a read-only file system: install.md's Docker advice) was
    ignored: every process compiled every kernel again into a temporary directory of its own (the
    one-FEN ``eval``: 9.9 s of CPU instead of 0.56 s).  Now its kernels are loaded; a kernel it lacks
    compiles for the process, said once by a warning naming the directory."""
    cache = tmp_path / "cache"
    code = """
import json, logging, numpy as np
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
from nnue_infer.kernels.chess.bitboard import popcount
print(popcount(np.int64(0x0F0F)), sum(popcount.stats.cache_hits.values()))
"""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert first.stdout == "8 0\n", first.stderr
    prefix = _read_only(cache)
    try:
        also = code + "from nnue_infer.kernels.nnue.dense import tdiv\nprint(tdiv(-7, 2), tdiv(9, 4))\n"
        proc = subprocess.run([*prefix, sys.executable, "-c", also], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "8 1\n-3 2\n", proc.stderr  # popcount loaded from the read-only cache
        assert proc.stderr.count("WARNING cannot write the kernel cache in") == 1, proc.stderr
        assert f"cached in {cache}/nnue_infer-" in proc.stderr and "read-only" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        report = subprocess.run([*prefix, sys.executable, "-m", "nnue_infer", "info", "--cache", "--json"],
                                capture_output=True, text=True, env=env)
        assert report.returncode == 0, report.stderr
        report = json.loads(report.stdout)
        assert report["directory"].startswith(str(cache)) and report["writable"] is False, report
        assert report["kernels"] == {"bitboard.popcount": 1}, report
    finally:
        for path in [cache, *cache.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@needs_jit
def test_item2_a_full_cache_device_leaves_the_kernels_in_memory(tmp_path):
    """A cache on a full device (a full home directory) made the first kernel that compiled raise
    ``OSError: [Errno 28] No space left on device`` out of the evaluation, in every run until space
    was freed; now one warning names the directory and the error, and the kernels run."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a full file system needs root (a small tmpfs in a mount namespace of its own)")
    full = tmp_path / "full"
    full.mkdir()
    prefix = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=16k tmpfs "$0" && exec "$@"', str(full)]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode:
        pytest.skip("no tmpfs mount here (unshare -m)")
    code = """
import logging, numpy as np
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
from nnue_infer.kernels.chess.bitboard import popcount
from nnue_infer.kernels.nnue.dense import tdiv
print(popcount(np.int64(0x0F0F)), tdiv(-7, 2))
"""
    proc = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(full)})
    assert proc.returncode == 0 and proc.stdout == "8 -3\n", proc.stderr
    assert proc.stderr.count("WARNING cannot write the kernel cache in") == 1, proc.stderr
    assert "No space left on device" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@needs_jit
def test_item3_two_versions_of_a_registered_module_keep_their_own_cache_files(tmp_path):
    """Two checkouts with the same kernels but another ``training/walk.py`` (a module cached with the
    kernels, ``kernels.cache.register``) share one ``NUMBA_CACHE_DIR``'s directory: each version's
    save replaced the other's index file, so every run after the other checkout's compiled again (and
    two saving at once could leave an index of one version naming the other's code).  Now each
    version has files of its own and loads them."""
    import nnue_infer

    package = os.path.dirname(nnue_infer.__file__)
    for name in ("a", "b"):
        shutil.copytree(package, tmp_path / name / "nnue_infer", ignore=shutil.ignore_patterns("__pycache__", "weights"))
    with open(tmp_path / "b" / "nnue_infer" / "training" / "walk.py", "a") as f:
        f.write("# another version of this module\n")
    code = """
import numpy as np
import sys
from nnue_infer.training import walk
walk.rehash(np.zeros((4, 2), np.int64), np.zeros((8, 2), np.int64))
print(sum(walk.rehash.stats.cache_hits.values()), walk.__file__.startswith(sys.argv[1]))
"""

    def hits(name: str) -> str:
        env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
        return subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], capture_output=True, text=True,
                              env=env, check=True, cwd=tmp_path / name).stdout.strip()  # the copy in cwd is imported

    assert [hits("a"), hits("b"), hits("a"), hits("b")] == ["0 True", "0 True", "1 True", "1 True"]


TWO_ROWS = ("fen rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\nmove e2e4\nscore 35\nply 0\nresult 1\ne\n"
            "fen rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1\nmove c7c5\nscore -40\nply 1\nresult -1\ne\n")


@pytest.mark.parametrize("kind", ["plain", "binpack", "bin", "parquet"])
def test_item4_a_replaced_training_data_file_keeps_its_permissions(kind, tmp_path):
    """Writing training data over an existing private file (mode 0600) left it 0644, readable by every
    user (the writer's temporary file got the umask's bits and was renamed over it), where every other
    output of the project keeps the replaced file's bits (``inputs.replacing``, as ``cp`` does)."""
    from nnue_infer.io import training_data as td

    if kind == "parquet":
        pytest.importorskip("pyarrow", reason="Parquet needs the parquet extra (pyarrow)")
    source = tmp_path / "two.plain"
    source.write_text(TWO_ROWS)
    dest = tmp_path / f"private.{kind}"
    dest.write_bytes(b"old contents")
    dest.chmod(0o600)
    td.write(td.read(source), dest)
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert td.read(dest).equals(td.read(source))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["two.plain", dest.name])


def test_item4_a_replaced_parquet_score_file_keeps_its_permissions(tmp_path, capsys):
    """``eval --epd ... -o x.parquet`` over a private file: the same (ParquetTableWriter)."""
    pytest.importorskip("pyarrow", reason="Parquet needs the parquet extra (pyarrow)")
    from nnue_infer.cli import main

    epd = tmp_path / "one.epd"
    epd.write_text("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\n")
    dest = tmp_path / "scores.parquet"
    dest.write_bytes(b"old contents")
    dest.chmod(0o600)
    assert main(["eval", "--quiet", "--epd", str(epd), "-o", str(dest)]) == 0, capsys.readouterr().err
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600 and dest.read_bytes()[:4] == b"PAR1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.epd", "scores.parquet"]


def test_item4_two_writers_of_one_training_data_file_in_one_process(tmp_path):
    """Two ``TrainingDataWriter``s of one destination in one process (two threads converting into one
    name) shared one temporary file, ``DEST.part-PID``: the second's close failed with a
    FileNotFoundError naming that file, after its bytes had gone into the file the first renamed into
    place.  Each now writes a file of its own; the last one closed is the destination, whole."""
    from nnue_infer.io import training_data as td

    source = tmp_path / "two.plain"
    source.write_text(TWO_ROWS)
    rows = td.read(source)
    dest = tmp_path / "out.plain"
    first, second = td.TrainingDataWriter(dest), td.TrainingDataWriter(dest)
    first.write(rows[:1])
    second.write(rows)
    first.close()
    assert dest.read_text() == TWO_ROWS[:TWO_ROWS.index("fen", 1)]
    second.close()
    assert dest.read_text() == TWO_ROWS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.plain", "two.plain"]


@needs_jit
def test_item5_a_kernel_file_changed_after_the_stamp_is_not_cached_under_it(tmp_path):
    """The kernels' stamp (the hash of every kernel file) is read once per process, and a kernel module
    is imported when first needed.  A module changed in between (a ``git checkout`` while a notebook
    runs) was compiled from its new source and saved under the old sources' stamp: every later process
    with the old sources loaded it, and ``text.decimal_length(12345)`` (an entry whose callee
    ``magnitude`` changed) gave 6 instead of 5, with no error.  Now such a module's kernels compile
    for that process only, with a warning naming the file."""
    import nnue_infer

    shutil.copytree(os.path.dirname(nnue_infer.__file__), tmp_path / "nnue_infer",
                    ignore=shutil.ignore_patterns("__pycache__", "weights"))
    changed = """
from pathlib import Path
from nnue_infer.kernels.chess import bitboard# the stamp is read here
path = Path("nnue_infer/kernels/data/text.py")
original = path.read_text()
path.write_text(original.replace("    return np.uint64(v)\\n", "    return np.uint64(v) * np.uint64(10)\\n"))
try:
    from nnue_infer.kernels.data import text
    print(text.decimal_length(12345))
finally:
    path.write_text(original)
"""
    again = "from nnue_infer.kernels.data import text\nprint(text.decimal_length(12345), text.magnitude(12345))\n"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                              cwd=tmp_path)  # the copy in cwd is imported

    first = run(changed)
    assert first.stdout == "6\n"
    assert run(again).stdout == "5 12345\n"  # (was "6 12345")
    assert "text.py changed since this process read the kernel sources" in first.stderr


@needs_jit
def test_item6_index_files_that_cannot_be_read_are_said_once_not_called_damaged(tmp_path):
    """A read-only cache is now read (item 1); one filled by another user with private files (umask 077)
    has index files this user cannot open: each kernel then warned 'damaged kernel cache entry' (a
    PermissionError is no damage).  Now one warning says the cache cannot be read.  (The error is made
    by a patched open of the index: root reads any file.)"""
    code = """
import errno, logging, numpy as np
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
from numba.core import caching
def refused(self):
    raise PermissionError(errno.EACCES, "Permission denied", self._index_path)
caching.IndexDataCacheFile._load_index = refused
from nnue_infer.kernels.chess.bitboard import popcount
from nnue_infer.kernels.nnue.dense import tdiv
print(popcount(np.int64(7)), tdiv(-7, 2))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.stdout == "3 -3\n"
    assert "damaged" not in proc.stderr and proc.stderr.count("WARNING cannot read the kernel cache in") == 1, \
        proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_item7_a_named_pipe_parquet_target_is_written_not_replaced(tmp_path, capsys):
    """``eval --epd ... -o out.parquet`` where ``out.parquet`` is a named pipe (a reader waits on it):
    the Parquet writer renamed its temporary file over the pipe, so the reader waited forever while the
    command said nothing was wrong.  Now the file is put together in memory and written into the pipe
    (as ``data convert`` does for training data)."""
    pa = pytest.importorskip("pyarrow", reason="Parquet needs the parquet extra (pyarrow)")
    import threading

    import chess
    import pyarrow.parquet as pq

    import nnue_infer
    from nnue_infer.cli import main

    epd = tmp_path / "two.epd"
    fens = [chess.STARTING_FEN, "4k3/8/8/8/8/8/4P3/4K3 b - - 0 1"]
    epd.write_text("".join(f + "\n" for f in fens))
    pipe = tmp_path / "out.parquet"
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()), daemon=True)
    reader.start()
    status = main(["eval", "--quiet", "--epd", str(epd), "-o", str(pipe)])
    reader.join(timeout=60)
    assert status == 0 and not reader.is_alive(), capsys.readouterr().err
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    table = pq.read_table(pa.BufferReader(got[0]))
    assert table.column("value").to_pylist() == [nnue_infer.evaluate(f) for f in fens]


def test_item8_a_zstd_long_window_input_is_not_called_corrupt(tmp_path):
    """A file compressed with ``zstd --long=31`` (a 2 GiB window, common for large datasets) is refused
    by the decompressor's 128 MiB limit, as the ``zstd`` tool refuses it without ``--long``; the
    message said 'corrupt zstd data'.  Now it names the window and how to read the file."""
    zstandard = pytest.importorskip("zstandard")
    from nnue_infer.errors import InputError
    from nnue_infer.io import training_data as td

    params = zstandard.ZstdCompressionParameters(window_log=31, enable_ldm=True, write_content_size=False)
    path = tmp_path / "two.plain.zst"
    with open(path, "wb") as f, zstandard.ZstdCompressor(compression_params=params).stream_writer(f) as w:
        w.write(TWO_ROWS.encode())
    with pytest.raises(InputError) as refused:
        td.read(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: a zstd frame (by compressed byte ")
    assert "needs a 2048 MiB window" in message and "zstd -d --long=31" in message and "corrupt" not in message


def test_item9_stockfish_network_with_a_read_only_network_cache(tmp_path, evaluator):
    """``--net stockfish`` extracts Stockfish 15.1's network from Debian's binary into the cache
    (``NNUE_INFER_CACHE``); with a read-only cache it ended with 'error: [Errno 30] Read-only file
    system: .../nn-ad9b42354671.nnue.PID-TID.part' (a temporary file's name, no way out).  Now the
    network is extracted for the process, with a warning naming the cache."""
    import chess

    cache = tmp_path / "networks"
    cache.mkdir()
    prefix = _read_only(cache)
    try:
        proc = subprocess.run([*prefix, sys.executable, "-m", "nnue_infer", "eval", "--net", "stockfish", "startpos"],
                              capture_output=True, text=True, env={**os.environ, "NNUE_INFER_CACHE": str(cache)})
    finally:
        cache.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    assert f"\tvalue {evaluator.evaluate(chess.Board())}\t" in proc.stdout
    assert f"cannot keep nn-ad9b42354671.nnue in the cache {cache}" in proc.stderr and "Traceback" not in proc.stderr
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize(("variables", "expected"), [
    ({"NNUE_INFER_CACHE": "~/nnue-cache"}, "home/nnue-cache"),
    ({"XDG_CACHE_HOME": "~/xdg"}, "home/xdg/nnue-infer"),
    ({"XDG_CACHE_HOME": "relative/xdg"}, "home/.cache/nnue-infer"),
])
def test_item10_cache_variables_with_a_tilde_or_a_relative_xdg_directory(variables, expected, tmp_path):
    """``NNUE_INFER_CACHE=~/nnue-cache`` set where no shell expands it (a Dockerfile's ENV, a systemd
    unit) made a directory named ``~`` in the working directory (``nnue-infer info stockfish`` made
    ``./~/nnue-cache``: one ``rm -rf ~`` away from the home directory); a relative ``XDG_CACHE_HOME``
    put the cache below whatever the working directory was.  Now ``~`` is the home directory and a
    relative ``XDG_CACHE_HOME`` is ignored (XDG Base Directory specification)."""
    import nnue_infer

    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("NNUE_INFER_CACHE", "XDG_CACHE_HOME")}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(nnue_infer.__file__))  # this checkout, from another cwd
    code = "from nnue_infer.resources import cache_dir; print(cache_dir())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path / "work",
                          env={**env, "HOME": str(tmp_path / "home"), **variables})
    assert proc.stdout.strip() == str(tmp_path / expected)

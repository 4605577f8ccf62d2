"""Hostile pass, session 34b: the kernel cache and the command line after the session's changes
(each test failed before its fix)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest
from numba.core import config as numba_config

from test_hostile_session34 import _read_only

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_jit = pytest.mark.skipif(numba_config.DISABLE_JIT, reason="NUMBA_DISABLE_JIT is set: nothing compiles")


@needs_jit
def test_a_filled_user_cache_is_read_beside_a_read_only_package(tmp_path):
    """A package installed read-only (root's site-packages: its ``kernels/__pycache__`` holds Python's
    ``.pyc`` files only) whose kernels were compiled ahead into the user's cache (``nnue-infer warmup``
    as the image's user, ``NNUE_INFER_CACHE`` or ``~/.cache``), then run on a read-only file system
    (``docker run --read-only``, a pod's read-only root): the first readable candidate, the package's
    ``__pycache__``, was taken for the read-only cache, so the filled cache was never read, every
    kernel compiled in every process and each run warned that ``__pycache__`` cannot be written.  A
    read-only cache is now a directory that holds kernel index files."""
    import nnue_infer

    package = tmp_path / "site" / "nnue_infer"
    shutil.copytree(os.path.dirname(nnue_infer.__file__), package,
                    ignore=shutil.ignore_patterns("__pycache__", "weights"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    assert list((package / "kernels" / "__pycache__").glob("*.pyc"))
    cache = tmp_path / "cache"
    code = """
import logging, numpy as np
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
from nnue_infer.kernels.chess.bitboard import popcount
print(popcount(np.int64(0x0F0F)), sum(popcount.stats.cache_hits.values()))
"""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env |= {"NNUE_INFER_CACHE": str(cache), "PYTHONPATH": str(tmp_path / "site"), "PYTHONDONTWRITEBYTECODE": "1"}

    def run(prefix: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, env=env,
                              cwd=tmp_path / "site")

    try:
        first = run(_read_only(package.parent))  # the package read-only: compiled into the user's cache
        assert first.returncode == 0 and first.stdout == "8 0\n", first.stderr
        assert f"cached in {cache}/numba-" in first.stderr, first.stderr
        proc = run(_read_only(tmp_path))  # now everything read-only
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "8 1\n", proc.stderr  # loaded from the user's cache (was "8 0")
        assert "WARNING" not in proc.stderr, proc.stderr  # (was: cannot write the kernel cache in .../__pycache__)
    finally:
        for path in [tmp_path, *tmp_path.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@needs_jit
def test_kernels_compiled_into_a_read_only_package_are_read_beside_a_writable_user_cache(tmp_path):
    """A Docker image built as root (``pip install``, then ``nnue-infer warmup``: the kernels compiled into
    the package's own ``kernels/__pycache__``) and run as another user with a home directory: the
    package's cache cannot be written, the user's can, and the user's (empty) was taken alone: every
    kernel compiled again in every new container (``eval --epd``: about 30 s of CPU).  The kernels a
    read-only candidate before the chosen cache holds are now loaded from it."""
    import nnue_infer

    package = tmp_path / "site" / "nnue_infer"
    shutil.copytree(os.path.dirname(nnue_infer.__file__), package,
                    ignore=shutil.ignore_patterns("__pycache__", "weights"))
    code = """
import logging, numpy as np
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
from nnue_infer.kernels.chess.bitboard import popcount
print(popcount(np.int64(0x0F0F)), sum(popcount.stats.cache_hits.values()))
"""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env |= {"NNUE_INFER_CACHE": str(tmp_path / "home-cache"), "PYTHONPATH": str(tmp_path / "site")}

    def run(prefix: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, env=env,
                              cwd=tmp_path)

    first = run([])  # the image's build: the package writable
    assert first.returncode == 0 and first.stdout == "8 0\n", first.stderr
    assert f"cached in {package}/kernels/__pycache__" in first.stderr, first.stderr
    try:
        proc = run(_read_only(package.parent))  # the container's user: the package read-only, a writable home
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "8 1\n", proc.stderr  # loaded from the package's cache (was "8 0": compiled again)
        assert "compiling" not in proc.stderr and "WARNING" not in proc.stderr, proc.stderr
        info = subprocess.run([*_read_only(package.parent), sys.executable, "-m", "nnue_infer", "info", "--cache"],
                              capture_output=True, text=True, env=env, cwd=tmp_path)
        assert info.returncode == 0, info.stderr
        assert f"also:    {package}/kernels/__pycache__ (holds kernels" in info.stdout, info.stdout
    finally:
        for path in [tmp_path, *tmp_path.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def test_a_closed_stderr_pipe_with_the_output_in_a_file_is_an_error(tmp_path):
    """``nnue-infer eval --epd x.epd 2>&1 >scores.csv | grep -m1 error`` (the first message shown, the scores kept in
    a file): once grep had gone, the next message failed with EPIPE and the command group took it for the output's
    reader going away (| head): status 0, with scores.csv cut short (here empty) and no word.  Only standard
    output's reader going away ends quietly with 0; standard error's alone ends with 1 (the output is not whole;
    no message can be read)."""
    fen = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
    epd = tmp_path / "x.epd"
    epd.write_text("not a fen\n" + (fen + "\n") * 1000)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
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


def test_read_pgn_streams_games_from_a_slow_pipe():
    """``nnue_infer.io.pgn.read_pgn('-', games_per_batch=1)`` gave each game as it came through a pipe (a live
    feed of games); since the binary-input check read a pipe's first 8 KiB (or its end) before looking at them
    (aa6cffa), nothing came until then.  The check now looks at those bytes as they are read: a NUL byte among
    them still refuses the input (test_hostile_session33c), and a game that has arrived is read at once."""
    code = ("from nnue_infer.io.pgn import read_pgn\n"
            "for batch in read_pgn('-', games_per_batch=1):\n"
            "    print(len(batch.fen), flush=True)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    with proc:
        _feed_a_game_at_a_time(proc)


def _feed_a_game_at_a_time(proc: subprocess.Popen) -> None:
    import select
    import time

    try:
        proc.stdin.write(b'[Event "x"]\n\n1. e4 e5 *\n\n')  # one game of 3 positions; the pipe stays open
        proc.stdin.flush()
        deadline, out = time.monotonic() + 60, b""
        while b"\n" not in out and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stdout], [], [], 0.5)[0]:
                out += os.read(proc.stdout.fileno(), 100)
        assert out == b"3\n", (out, proc.poll())  # (was b"": nothing until the pipe's end)
        proc.stdin.write(b'[Event "y"]\n\n1. d4 *\n')
        proc.stdin.close()
        rest, err = proc.stdout.read(), proc.stderr.read()
        assert proc.wait(timeout=120) == 0 and rest == b"2\n", (rest, err)
    finally:
        proc.kill()
        proc.wait()

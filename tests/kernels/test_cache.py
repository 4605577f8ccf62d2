"""What compiles when (issue 19): nothing at import; the one-FEN command line compiles its own
kernels only, says so once on a cold cache and nothing on a warm one.

Each case runs in a subprocess that records every ``Dispatcher.compile`` (a compile or a load
from Numba's cache) by kernel name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import chess
import pytest
from numba.core import config as numba_config

import nnue_infer
import stat

pytestmark = pytest.mark.skipif(numba_config.DISABLE_JIT, reason="NUMBA_DISABLE_JIT is set: nothing compiles")

#: Run in the subprocess before the case: records the name of every kernel compiled or loaded.
RECORD = """
import atexit, json, sys
from numba.core import dispatcher
seen = []
_compile = dispatcher.Dispatcher.compile
def compile(self, sig):
    seen.append(self.py_func.__module__ + "." + self.py_func.__qualname__)
    return _compile(self, sig)
dispatcher.Dispatcher.compile = compile
atexit.register(lambda: print("COMPILED " + json.dumps(seen), file=sys.stderr))
"""

#: The one-FEN ``nnue-infer eval``'s entry kernel with the default network, the stages it calls
#: (``forward.Stages``: compiled on a cold cache, linked from the entry kernel's cache on a warm one)
#: and the leaves it inlines (``forceinline``: compiled on their own on a cold cache; which of them
#: depends on the CPU's instruction-set path); Numba's own helpers and the lambdas of overloads
#: (``refcount.last_use``, ``simd.address_pointer``, ...) aside.
ENTRY = "nnue_infer.kernels.nnue.arena.kernels.<locals>.evaluate_board"
ONE_FEN_KERNELS = {ENTRY} | {f"nnue_infer.kernels.nnue.forward.stages.<locals>.{name}" for name in ("value", "refresh")} | {
    f"nnue_infer.kernels.{name}" for name in (
    "nnue.accumulator.refresh_accumulator", "nnue.accumulator.update_accumulator", "nnue.activation.ft_transform",
    "nnue.activation.ft_activate", "nnue.activation.activate_lanes", "nnue.activation.activate", "nnue.dense.affine_zmm",
    "nnue.dense.affine_rows_zmm", "nnue.dense.affine_ymm", "nnue.dense.affine_ymm_paired", "nnue.dense.affine_portable",
    "nnue.feature_index.active_features", "chess.bitboard.check_bitboards")}


def run(code: str, env: dict | None = None) -> tuple[list[str], str, str]:
    """(kernels compiled, stdout, stderr without the record) of ``code`` run after :data:`RECORD`."""
    proc = subprocess.run([sys.executable, "-c", RECORD + code], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, check=True)
    lines = proc.stderr.splitlines()
    record = [line for line in lines if line.startswith("COMPILED ")]
    assert len(record) == 1, proc.stderr
    return json.loads(record[0][9:]), proc.stdout, "\n".join(line for line in lines if line not in record)


#: Imports every module of the package (and so defines every kernel).
IMPORT_ALL = """
import importlib, pkgutil, nnue_infer
for info in pkgutil.walk_packages(nnue_infer.__path__, "nnue_infer."):
    if info.name != "nnue_infer.__main__":
        importlib.import_module(info.name)
"""


def test_importing_any_module_compiles_no_kernel():
    compiled, _, _ = run(IMPORT_ALL)
    assert compiled == []


def test_importing_the_kernels_makes_no_directory_until_a_kernel_is_saved(tmp_path):
    """Defining the kernels (importing their modules) made a missing ``NUMBA_CACHE_DIR`` (Numba's
    locators make their directory when a kernel is defined) and a temporary directory (the cache of
    last resort, made whether needed or not); now the cache directory is made when the first kernel
    is saved in it."""
    cache, temp = tmp_path / "missing" / "cache", tmp_path / "tmp"
    temp.mkdir()
    code = IMPORT_ALL + f"""
import os
import numpy as np
print(os.path.exists({str(tmp_path / "missing")!r}), os.listdir({str(temp)!r}))
from nnue_infer.kernels.chess.bitboard import popcount
print(popcount(np.int64(0x0F0F)))
"""
    compiled, out, _ = run(code, {"NUMBA_CACHE_DIR": str(cache), "TMPDIR": str(temp)})
    assert out == "False []\n8\n" and compiled == ["nnue_infer.kernels.chess.bitboard.popcount"]
    assert [p.name.split("-")[0] for p in cache.glob("*/*.nbi")] == ["bitboard.popcount"]


def test_one_fen_cli_compiles_its_own_kernels_and_says_so_once(tmp_path):
    code = f"from nnue_infer.cli import main; main(['eval', {chess.STARTING_FEN!r}])"
    cold = tmp_path / "cold"
    compiled, out, err = run(code, {"NUMBA_CACHE_DIR": str(cold)})
    ours = {k for k in compiled if not k.startswith("numba.") and not k.endswith(".<lambda>")}
    assert ours <= ONE_FEN_KERNELS, compiled
    notice = [line for line in err.splitlines() if "compiling kernels for this CPU" in line]
    assert len(notice) == 1 and str(cold) in notice[0], err
    assert f"\tvalue {nnue_infer.evaluate(chess.Board())}\t" in out, out
    compiled, again, err = run(code, {"NUMBA_CACHE_DIR": str(cold)})  # warm: loads the entry kernel, says nothing
    assert compiled == [ENTRY] and again == out and "compiling" not in err, err
    # warmup of that path compiles nothing more; info --cache lists it in that directory
    compiled, out, err = run("from nnue_infer.cli import main; main(['warmup', '--paths', 'board'])",
                             {"NUMBA_CACHE_DIR": str(cold)})
    assert compiled == [ENTRY] and out.startswith("default\tboard\t") and "compiling" not in err, (out, err)
    _, out, _ = run("from nnue_infer.cli import main; main(['info', '--cache', '--json'])",
                    {"NUMBA_CACHE_DIR": str(cold)})
    report = json.loads(out)
    assert report["directory"].startswith(str(cold)) and report["bytes"] > 0
    assert report["kernels"]["arena.kernels.evaluate_board"] == 1, report
    # --quiet: no notice even when a kernel compiles during the command (tdiv: not in the copied cache,
    # compiled when the command loads its network)
    for name in ("quiet", "loud", "api"):
        shutil.copytree(cold, tmp_path / name)
    quiet = ("import nnue_infer.cli.eval as e; from nnue_infer.kernels.nnue.dense import tdiv; load = e.load_network\n"
             "e.load_network = lambda net: (tdiv(7, 2), load(net))[1]\n"
             + code.replace("'eval',", "'eval', '--quiet',"))
    compiled, _, err = run(quiet, {"NUMBA_CACHE_DIR": str(tmp_path / "quiet")})
    assert "nnue_infer.kernels.nnue.dense.tdiv" in compiled and "compiling" not in err, err
    compiled, _, err = run(quiet.replace("'--quiet', ", ""), {"NUMBA_CACHE_DIR": str(tmp_path / "loud")})
    assert "nnue_infer.kernels.nnue.dense.tdiv" in compiled and err.count("compiling kernels for this CPU") == 1, err
    # after the command, the Python API's compiles go to logging only
    compiled, _, err = run(code + "; from nnue_infer.kernels.nnue.dense import tdiv; tdiv(7, 2)",
                           {"NUMBA_CACHE_DIR": str(tmp_path / "api")})
    assert "nnue_infer.kernels.nnue.dense.tdiv" in compiled and "compiling" not in err, err


def test_a_cache_directory_that_cannot_be_made_when_saving_leaves_the_kernel_in_memory(tmp_path):
    """The cache directory is chosen when a kernel is defined and made when it is saved: if it cannot
    be made then (its parent became a file), a warning names it and the kernel still runs."""
    parent = tmp_path / "parent"
    parent.mkdir()
    code = f"""
import numpy as np
from nnue_infer.kernels.chess.bitboard import popcount
import shutil
shutil.rmtree({str(parent)!r})
open({str(parent)!r}, "w").close()
print(popcount(np.int64(7)))
"""
    compiled, out, err = run(code, {"NUMBA_CACHE_DIR": str(parent / "cache")})
    assert out == "3\n" and compiled == ["nnue_infer.kernels.chess.bitboard.popcount"]
    assert f"cannot write the kernel cache in {parent / 'cache'}/nnue_infer-" in err and "Not a directory" in err, err
    assert "popcount is compiled for this process only" in err and "Traceback" not in err


def test_import_and_help_load_no_kernel_module():
    """``import nnue_infer`` and ``nnue-infer --help`` load neither NumPy nor Numba (PEP 562 lazy
    names); the names stay what they were, ``quantise`` the function even after its module (``quantisation``) loads."""
    code = """
import sys, nnue_infer
assert not {"numpy", "numba"} & set(sys.modules), sorted(sys.modules)
from nnue_infer.cli import main
assert main(["--help"]) == 0 and "numba" not in sys.modules
import nnue_infer.quantisation
from nnue_infer import Evaluator, quantise
assert callable(nnue_infer.quantise) and nnue_infer.quantise is quantise and Evaluator is nnue_infer.Evaluator
assert all(hasattr(nnue_infer, name) for name in nnue_infer.__all__) and set(nnue_infer.__all__) <= set(dir(nnue_infer))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


class _Clock:
    """A clock the test moves (seconds): what the counter draws depends on it alone, not on the machine's load."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_command_lines_compile_counter_on_a_terminal(monkeypatch):
    """On a terminal a compile that lasts over a second shows its elapsed time, erased at its end; none is drawn
    before a second has passed (the clock is the test's: the drawing thread, which redraws every half second,
    cannot draw another time than the clock's)."""
    import io
    import logging

    from nnue_infer.cli.common import CompileNotice

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    clock = _Clock()
    notice = CompileNotice(clock=clock)
    log = logging.getLogger("nnue_infer.test")
    monkeypatch.setattr(log, "propagate", False)
    log.addHandler(notice)
    log.setLevel(logging.DEBUG)
    try:
        log.debug("start", extra={"compile": "start"})
        clock.now += 0.9
        notice.redraw()
        assert terminal.getvalue() == ""  # under a second: nothing
        clock.now += 0.3
        notice.redraw()
        assert terminal.getvalue().endswith("\rnnue-infer: compiling 00:01")
        clock.now += 3661
        notice.redraw()
        assert terminal.getvalue().endswith("\rnnue-infer: compiling 1:01:02")
        log.debug("end", extra={"compile": "end", "cpu_seconds": 2.6})
        after = terminal.getvalue()
        clock.now += 5
        notice.redraw()  # ended: nothing more
    finally:
        log.removeHandler(notice)
    assert terminal.getvalue() == after
    assert after.endswith("\r" + " " * len("nnue-infer: compiling 1:01:02") + "\r"), repr(after)


def _on_a_terminal(code: str, env: dict) -> tuple[int, str]:
    """(exit status, stderr) of ``python -c code`` whose stderr is a pty (a terminal)."""
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-c", code], stderr=slave, stdout=subprocess.PIPE, timeout=300,
                              env={**os.environ, **env})
    finally:
        os.close(slave)
    shown = b""
    try:
        while chunk := os.read(master, 4096):
            shown += chunk
    except OSError:  # EIO: the terminal's other side is closed
        pass
    finally:
        os.close(master)
    return proc.returncode, shown.decode("utf-8", "replace")


def test_the_python_api_at_a_terminal_says_it_compiles(tmp_path):
    """A first Python session at a terminal, with no logging set up, says it compiles on stderr, once
    (the INFO record went nowhere: 10-30 s of silence looked like a hang: fresh-user trial); with
    logging set up the record is left to it; captured stderr (not a terminal) stays silent (the
    'after the command' case of the test above)."""
    code = "from nnue_infer.kernels.nnue.dense import tdiv; from nnue_infer.kernels.data.epd import split_lines; tdiv(7, 2)"
    status, shown = _on_a_terminal(code, {"NUMBA_CACHE_DIR": str(tmp_path / "a")})
    assert status == 0 and shown.count("nnue-infer: compiling kernels for this CPU") == 1, shown
    status, shown = _on_a_terminal("import logging; logging.basicConfig(); " + code,
                                   {"NUMBA_CACHE_DIR": str(tmp_path / "b")})
    assert status == 0 and "compiling" not in shown, shown


def test_the_compile_counter_on_a_terminal_that_reports_no_size():
    """A pty reporting 0 x 0 (``script``, an editor's shell: a new pty's size) shows the counter too
    (tqdm cut the line to nothing there: a fresh-user trial saw only the notice)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()  # a new pty: the size _on_a_terminal's gets too
    size = struct.unpack("HHHH", fcntl.ioctl(slave, termios.TIOCGWINSZ, b"\0" * 8))[:2]
    os.close(master), os.close(slave)
    assert size == (0, 0)
    code = """if True:
        import logging
        from nnue_infer.cli.common import CompileNotice
        now = [0.0]
        notice = CompileNotice(clock=lambda: now[0])
        log = logging.getLogger("nnue_infer.test")
        log.propagate = False
        log.addHandler(notice)
        log.setLevel(logging.DEBUG)
        log.debug("start", extra={"compile": "start"})
        now[0] = 1.5  # the test's clock: drawn whatever the machine's load
        notice.redraw()
        log.debug("end", extra={"compile": "end", "cpu_seconds": 1.5})
    """
    status, shown = _on_a_terminal(code, {})
    assert status == 0, shown
    assert "\rnnue-infer: compiling 00:01" in shown, shown


def test_warmup_without_a_path_is_a_usage_error(capsys):
    """``warmup --paths ''`` compiled nothing and said nothing, status 0."""
    from nnue_infer.cli import main

    assert main(["warmup", "--paths", " , "]) == 2
    assert "no path given; known: board" in capsys.readouterr().err


def test_warmup_prints_each_line_as_its_step_finishes(capsys, monkeypatch):
    """``warmup`` printed its lines only when every step was done (a CI log showed nothing for 86 s):
    each step's line is out before the next step starts.  The paths are stand-ins that record what
    was printed when they start (the real ones compile for seconds)."""
    from nnue_infer.cli import main
    from nnue_infer.warmup import PATHS

    printed = []
    for name in ("board", "batch"):
        monkeypatch.setitem(PATHS, name, lambda ev, name=name: printed.append((name, capsys.readouterr().out)))
    assert main(["warmup", "--paths", "board,batch,board", "--net", "default", "--net", "stockfish", "-q"]) == 0
    lines = [(name, out.split("\t")[:2]) for name, out in printed]
    assert lines == [("board", [""]), ("batch", ["default", "board"]), ("board", ["default", "batch"]),
                     ("batch", ["stockfish", "board"])], printed
    assert capsys.readouterr().out.startswith("stockfish\tbatch\t0.0 s CPU\n")


def test_cache_report_names_an_unwritable_cache_directory(tmp_path):
    """``info --cache`` with ``NUMBA_CACHE_DIR`` a file: no cache, said so with the directory tried (was ``cache: None``)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(blocker)}
    proc = subprocess.run([sys.executable, "-m", "nnue_infer", "info", "--cache"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"cache:   none: no writable directory among {blocker}"), proc.stdout
    proc = subprocess.run([sys.executable, "-m", "nnue_infer", "info", "--cache", "--json"], capture_output=True,
                          text=True, env=env, check=True)
    report = json.loads(proc.stdout)
    assert report["directory"] is None and report["candidates"][0].startswith(str(blocker)), report


def test_a_damaged_cache_file_compiles_again_with_a_warning(tmp_path):
    """Truncated cache files (a full disk, a killed process) gave an UnpicklingError traceback on every
    run; now a warning names the kernel and the directory, the kernels compile again and the next run
    is quiet and loads them."""
    cache = tmp_path / "cache"
    code = f"from nnue_infer.cli import main; main(['eval', '--quiet', {chess.STARTING_FEN!r}])"
    _, want, _ = run(code, {"NUMBA_CACHE_DIR": str(cache)})
    damaged = sorted(cache.rglob("*.nbc")) + sorted(cache.rglob("*.nbi"))
    assert damaged
    for path in damaged:
        path.write_bytes(path.read_bytes()[:100])
    compiled, out, err = run(code, {"NUMBA_CACHE_DIR": str(cache)})
    assert out == want and "damaged kernel cache entry of" in err and str(cache) in err, err
    assert "Traceback" not in err
    compiled, out, err = run(code, {"NUMBA_CACHE_DIR": str(cache)})
    assert out == want and "damaged" not in err and compiled == [ENTRY], (compiled, err)


def test_warmup_files_compiles_what_epd_scoring_and_datasets_use(tmp_path):
    """``nnue-infer warmup --paths files`` (a cluster node, a Docker image): afterwards ``eval --epd`` and ``eval --pgn``
    into CSV and Parquet compile nothing (a new user's cluster compiled for 20-30 s after ``warmup``, whose paths
    left these kernels out; PGN rows' writers were left out of the warm-ups until the second hostile pass); and
    after a Dask worker's warm-up (``distributed.warm_up``) a job over EPD and PGN inputs loads no further kernel."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cold")}
    _, out, err = run("from nnue_infer.cli import main; main(['warmup', '--paths', 'files'])", env)
    assert out.startswith("default\tfiles\t") and "compiling kernels for this CPU" in err, (out, err)
    epd = tmp_path / "a.epd"
    epd.write_text(f"{chess.STARTING_FEN}\n8/8/8/4k3/8/8/3PK3/8 w - - 0 1 bm d4; id \"x\";\n")
    pgn = tmp_path / "g.pgn"
    pgn.write_text('[Event "g"]\n[White "Zoë"]\n\n1. d4 d5 2. c4 dxc4 3. e4 e5 4. Nf3 exd4 5. Bxc4 Bb4+ 6. Bd2 Bxd2+ *\n')
    for option, source in (("--epd", epd), ("--pgn", pgn)):
        for output in ("-", str(tmp_path / "a.parquet")):
            _, out, err = run(f"from nnue_infer.cli import main; main(['eval', {option!r}, {str(source)!r}, '-o', "
                              f"{output!r}])", env)
            assert "compiling" not in err, (option, output, err)
    _, out, err = run("from nnue_infer.io import distributed as D\n"
                      "D.warm_up('default'); n = len(seen)\n"
                      f"r = D.score_files([{str(epd)!r}, {str(pgn)!r}], {str(tmp_path / 'ds')!r})\n"
                      "print(r.rows, r.errors, n > 0, seen[n:])", env)
    assert out.strip() == "15 0 True []", (out, err)


def test_a_local_cluster_compiles_once_and_says_so(tmp_path):
    """``eval --epd ... --workers 2`` on a cold cache: the kernels compile once, in the command's process, with its
    notice on stderr (not a terminal); the workers load them (every worker compiled at once, in silence: 30-107 s
    without a word in a new user's trial)."""
    pytest.importorskip("distributed")
    epd = tmp_path / "a.epd"
    epd.write_text(f"{chess.STARTING_FEN}\n")
    code = (f"from nnue_infer.cli import main; main(['eval', '--epd', {str(epd)!r}, '--workers', '2', '-o', "
            f"{str(tmp_path / 'out')!r}])")
    compiled, out, err = run(code, {"NUMBA_CACHE_DIR": str(tmp_path / "cold")})
    assert err.count("compiling kernels for this CPU") == 1, err
    assert "nnue_infer.kernels.chess.status.parse_fens_status" in compiled and "1 positions from 1 input" in err, err


#: Saves a small quantised Chess768 network per feature-transformer activation named after the
#: directory (argv[1]): ``glu.safetensors``, ``crelu.safetensors`` (two configurations of one entry kernel).
SMALL_NETWORKS = """
import sys
from nnue_infer.float_network import FloatNetwork
from nnue_infer.formats import save
from nnue_infer.network import Architecture, HiddenLayer
from nnue_infer.quantisation import SCHEMES, quantise
for act in ("glu", "crelu"):
    arch = Architecture(feature_set="Chess768", ft_width=32, ft_activation=act, ft_clamp=127,
                        ft_shift=SCHEMES["stockfish"].shift_for(act), psqt_buckets=0, output_buckets=1,
                        layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")))
    save(quantise(FloatNetwork.random(arch, seed=5)), f"{sys.argv[1]}/{act}.safetensors")
"""

#: Evaluates two positions with each network named in argv[2:] (files in argv[1]), printing JSON.
EVALUATE_NETWORKS = """
import json, sys
from nnue_infer import Evaluator
fens = ["r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
        "8/5k2/3p4/1p1Pp2p/pP2Pp1P/P4P1K/8/8 b - - 99 50"]
print(json.dumps({net: [Evaluator(f"{sys.argv[1]}/{net}.safetensors").evaluate(f) for f in fens] for net in sys.argv[2:]}))
"""


def test_a_cache_two_processes_filled_gives_each_network_its_own_values(tmp_path):
    """Two processes each compile one network's kernels (same factory, other configuration) into
    caches that are then put together, as pytest-xdist's or Dask's workers fill a shared one; a third
    process loads both.  With Numba's symbol numbers starting at 1 in every process the two compiles
    gave different code the same symbol, and the third process ran the glu network's layers for the
    crelu one (Numba issue #10486): crelu's values were wrong, with no error."""
    subprocess.run([sys.executable, "-c", SMALL_NETWORKS, str(tmp_path)], check=True)

    def evaluate(cache: str, *nets: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", EVALUATE_NETWORKS, str(tmp_path), *nets], stdout=subprocess.PIPE,
                                text=True, env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / cache)})

    alone = [evaluate("a", "glu"), evaluate("b", "crelu")]  # cold caches, at once
    want = {}
    for proc in alone:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0
        want.update(json.loads(out))
    shutil.copytree(tmp_path / "a", tmp_path / "both")
    shutil.copytree(tmp_path / "b", tmp_path / "both", dirs_exist_ok=True)
    proc = evaluate("both", "glu", "crelu")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0 and json.loads(out) == want


def test_symbol_numbers_differ_between_processes_and_after_fork():
    """The counter behind Numba's symbol numbers starts at a random number in each process
    (``nnue_infer.kernels.cache.fresh_symbol_numbers``) and again in a forked child."""
    code = """
import os, sys
import nnue_infer.kernels
from numba.core.bytecode import FunctionIdentity
read, write = os.pipe()
if os.fork() == 0:
    os.write(write, str(next(FunctionIdentity._unique_ids)).encode())
    os._exit(0)
os.wait()
print(next(FunctionIdentity._unique_ids), os.read(read, 100).decode())
"""
    numbers = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
               for _ in range(2)]
    firsts = [int(n) for pair in numbers for n in pair]
    assert len(set(firsts)) == 4, numbers


# -- hostile input ---------------------------------------------------------------------------------------------------

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
def test_a_read_only_cache_filled_ahead_is_loaded(tmp_path):
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
def test_a_full_cache_device_leaves_the_kernels_in_memory(tmp_path):
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
def test_two_versions_of_a_registered_module_keep_their_own_cache_files(tmp_path):
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


@needs_jit
def test_a_kernel_file_changed_after_the_stamp_is_not_cached_under_it(tmp_path):
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
def test_index_files_that_cannot_be_read_are_said_once_not_called_damaged(tmp_path):
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


@pytest.mark.parametrize(("variables", "expected"), [
    ({"NNUE_INFER_CACHE": "~/nnue-cache"}, "home/nnue-cache"),
    ({"XDG_CACHE_HOME": "~/xdg"}, "home/xdg/nnue-infer"),
    ({"XDG_CACHE_HOME": "relative/xdg"}, "home/.cache/nnue-infer"),
])
def test_cache_variables_with_a_tilde_or_a_relative_xdg_directory(variables, expected, tmp_path):
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


#: Run in a subprocess: the one-FEN command line, a session with Stockfish 15.1's network (``sys.argv[1]``)
#: pushing and popping moves and evaluating a batch, and a short search; prints their results and, on
#: stderr, every kernel compiled (Numba's ``numba:compile`` event: a cache miss, Numba's own helpers
#: included; a load from the cache sends none).
WARM_PATHS = """
import json, sys
import chess
from numba.core import event
compiled = []
class Compiles(event.Listener):
    def on_start(self, ev):
        f = ev.data["dispatcher"].py_func
        compiled.append(f.__module__ + "." + f.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", Compiles())
import nnue_infer
from nnue_infer.cli import main
from nnue_infer.search import Engine
FEN = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
assert main(["eval", FEN]) == 0
network = nnue_infer.load(sys.argv[1])
ev = nnue_infer.Evaluator(network)
board = chess.Board(FEN)
values = [ev.evaluate(board)]
ev.set_position(board)
for uci in ("f1b5", "a7a6", "b5c6"):
    ev.push(chess.Move.from_uci(uci))
    values.append(ev.evaluate())
for _ in range(3):
    ev.pop()
values.append(ev.evaluate())
values += ev.evaluate_batch([FEN, chess.STARTING_FEN]).tolist()  # a parallel kernel (its threads started on load)
found = Engine(network, hash_mb=1).search(board, depth=2)
print(json.dumps({"values": values, "move": found.move.uci(), "score": found.score_cp, "nodes": found.nodes}))
print("COMPILED " + json.dumps(compiled), file=sys.stderr)
"""


def test_a_second_process_on_the_same_cache_compiles_nothing(tmp_path, network_path):
    """The entry kernels are closures made per network configuration; their cache entries are keyed
    by their configuration's values (``_index_key``), not by anything made afresh in each process, so
    a second process with the same kernel cache loads every kernel of the command line, of a session
    with Stockfish 15.1's network and of the search, and compiles none; its results are the compiling
    process's."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def run_paths() -> tuple[list[str], str]:
        proc = subprocess.run([sys.executable, "-c", WARM_PATHS, str(network_path)], capture_output=True, text=True,
                              env=env)
        assert proc.returncode == 0, proc.stderr
        record = [line for line in proc.stderr.splitlines() if line.startswith("COMPILED ")]
        assert len(record) == 1, proc.stderr
        return json.loads(record[0][9:]), proc.stdout

    cold, first = run_paths()
    assert {"nnue_infer.kernels.nnue.arena.kernels.<locals>.evaluate_board",
            "nnue_infer.kernels.nnue.arena.kernels.<locals>.evaluate_ply"} <= set(cold), cold  # the counter counts
    assert any(name.startswith("nnue_infer.kernels.search.") for name in cold), cold
    warm, second = run_paths()
    assert warm == [] and second == first, (warm, first, second)
    values = json.loads(first.splitlines()[-1])["values"]
    assert values[0] == values[4] == values[5] and len(set(values)) > 1, values  # popped back; moves counted

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

#: The one-FEN ``nnue-infer eval``'s entry kernel with the default network, and the leaves it
#: inlines (``forceinline``: compiled on their own on a cold cache; which of them depends on the
#: CPU's instruction-set path); Numba's own helpers and the lambdas of overloads (``refcount.last_use``,
#: ``simd.address_pointer``, ...) aside.
ENTRY = "nnue_infer.kernels.arena.kernels.<locals>.evaluate_board"
ONE_FEN_KERNELS = {ENTRY} | {f"nnue_infer.kernels.{name}" for name in (
    "accumulator.refresh_accumulator", "accumulator.update_accumulator", "activation.ft_transform",
    "activation.ft_activate", "activation.activate_lanes", "activation.activate", "dense.affine_zmm",
    "dense.affine_ymm", "dense.affine_ymm_paired", "dense.affine_portable", "features.active_features",
    "features.check_bitboards")}


def run(code: str, env: dict | None = None) -> tuple[list[str], str, str]:
    """(kernels compiled, stdout, stderr without the record) of ``code`` run after :data:`RECORD`."""
    proc = subprocess.run([sys.executable, "-c", RECORD + code], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, check=True)
    lines = proc.stderr.splitlines()
    record = [line for line in lines if line.startswith("COMPILED ")]
    assert len(record) == 1, proc.stderr
    return json.loads(record[0][9:]), proc.stdout, "\n".join(line for line in lines if line not in record)


def test_importing_any_module_compiles_no_kernel():
    code = """
import importlib, pkgutil, nnue_infer
for info in pkgutil.walk_packages(nnue_infer.__path__, "nnue_infer."):
    if info.name != "nnue_infer.__main__":
        importlib.import_module(info.name)
"""
    compiled, _, _ = run(code)
    assert compiled == []


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
    # --quiet: no notice even when a kernel compiles (tdiv: not in the copied cache)
    for name in ("quiet", "loud"):
        shutil.copytree(cold, tmp_path / name)
    quiet = code.replace("'eval',", "'eval', '--quiet',") + "; from nnue_infer.kernels.dense import tdiv; tdiv(7, 2)"
    compiled, _, err = run(quiet, {"NUMBA_CACHE_DIR": str(tmp_path / "quiet")})
    assert "nnue_infer.kernels.dense.tdiv" in compiled and "compiling" not in err, err
    compiled, _, err = run(quiet.replace("'--quiet', ", ""), {"NUMBA_CACHE_DIR": str(tmp_path / "loud")})
    assert "compiling kernels for this CPU" in err

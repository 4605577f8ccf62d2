"""Every instruction-set path gives the same numbers: the kernel tests and end-to-end checks
run again in subprocesses with ``NNUE_INFER_SIMD`` forced to each path.

Paths the CPU lacks are skipped (the kernels do not compile them there; the emulation of
their instructions is checked in ``tests/kernels/test_simd.py``).  The default run covers the
kernel tests, the incremental and batch checks, the int8 threat / pawn-pair rows, the gated and
signed activations against their NumPy reference, and the Stockfish 19 layer stack (lite net:
worked examples and corpus; big net with threat inputs: worked examples and corpus), and the
Stockfish 16 / 17.1 / 18 stacks against the live npm engines on a few positions;
``NNUE_INFER_TEST_ALL_PATHS=1`` runs the whole suite under every path (slow: one full run per
path).  Left out of the default run: ``tests/test_architecture_eval.py``, whose checks compare the
entry paths (board, string, push/pop, game, batch) with each other: they share one compiled
layer stack and refresh (``kernels.forward.Stages``), so under another instruction set they agree
whatever that set computes, and every path's own kernels are checked against NumPy on every
instruction set by ``tests/kernels`` (``ALL_PATHS``) in each run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nnue_infer.kernels import simd

ROOT = Path(__file__).resolve().parent.parent
QUICK = [
    "tests/kernels", "tests/test_incremental.py", "tests/test_batch.py", "tests/test_threat_inputs.py",
    "tests/test_int32_semantics.py", "tests/test_signed_inputs.py",
    "tests/test_stockfish_nets.py::test_worked_examples_of_the_lite_spec",
    "tests/test_stockfish_nets.py::test_lite_corpus_positions_and_extra",
    "tests/test_sf19.py::test_worked_examples", "tests/test_sf19.py::test_dev_positions",
    "tests/test_live_node_engines.py::test_eval_text_matches_engine",
]
#: Positions per engine of the live npm comparisons in the per-path runs.
LIVE_POSITIONS = "40"


def test_select_isa_reads_the_environment():
    native = simd.native_isas()
    assert simd.select_isa({}) == native[-1]
    for code, name in enumerate(simd.ISA_NAMES):
        if code in native:
            assert simd.select_isa({simd.ENV_VAR: name}) == code
            assert simd.select_isa({simd.ENV_VAR: f" {name.upper()} "}) == code
        else:
            with pytest.raises(ValueError, match=rf"NNUE_INFER_SIMD='{name}': this CPU lacks .* \(it runs portable"):
                simd.select_isa({simd.ENV_VAR: name})
    with pytest.raises(ValueError, match=r"NNUE_INFER_SIMD='sse9': expected one of portable, avx2, avxvnni, vnni512"):
        simd.select_isa({simd.ENV_VAR: "sse9"})


def test_native_isas_from_features():
    assert simd.native_isas(frozenset()) == (simd.ISA_PORTABLE,)
    assert simd.native_isas(frozenset({"avx2"})) == (simd.ISA_PORTABLE, simd.ISA_AVX2)
    vnni = frozenset({"avx2", "avx512f", "avx512bw", "avx512vl", "avx512vnni"})
    assert simd.native_isas(vnni) == (simd.ISA_PORTABLE, simd.ISA_AVX2, simd.ISA_VNNI512)
    assert simd.native_isas(vnni | {"avxvnni"})[-1] == simd.ISA_VNNI512


def test_first_layer_isa():
    """AVX2's vpmaddubsw only where the largest byte times the largest weight pair fits int16."""
    assert simd.first_layer_isa(simd.ISA_AVX2, 127, 256) == simd.ISA_AVX2  # any weights
    assert simd.first_layer_isa(simd.ISA_AVX2, 255, 128) == simd.ISA_AVX2  # 32,640
    assert simd.first_layer_isa(simd.ISA_AVX2, 255, 129) == simd.FC0_AVX2_WIDE  # 32,895 would saturate
    assert simd.first_layer_isa(simd.ISA_AVX2, 254, 129) == simd.ISA_AVX2  # 32,766
    for isa in (simd.ISA_PORTABLE, simd.ISA_AVXVNNI, simd.ISA_VNNI512):  # no int16 sums
        assert simd.first_layer_isa(isa, 255, 256) == isa
        assert simd.first_layer_isa(isa, 126, 182, 227) == isa
    # two blocks per vpmaddwd where the int16 sums of four products fit (Stockfish 15.1's fc_0: 126 * 227)
    assert simd.first_layer_isa(simd.ISA_AVX2, 126, 182, 227) == simd.FC0_AVX2_PAIRED
    assert simd.first_layer_isa(simd.ISA_AVX2, 126, 182, 261) == simd.ISA_AVX2  # 32,886: could overflow
    assert simd.first_layer_isa(simd.ISA_AVX2, 255, 200, 261) == simd.FC0_AVX2_WIDE


@pytest.mark.parametrize("name", simd.ISA_NAMES)
def test_suite_passes_on_every_path(name):
    """The tests (kernels and end-to-end, or all with NNUE_INFER_TEST_ALL_PATHS=1) under ``name``."""
    if simd.ISA_NAMES.index(name) not in simd.native_isas():
        pytest.skip(f"this CPU lacks the {name} instructions")
    if name == simd.ISA_NAMES[simd.ISA] and not os.environ.get("NNUE_INFER_TEST_ALL_PATHS"):
        pytest.skip(f"{name} is this run's own path")
    targets = ["tests"] if os.environ.get("NNUE_INFER_TEST_ALL_PATHS") else QUICK
    env = dict(os.environ, NNUE_INFER_SIMD=name, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("NNUE_INFER_TEST_ALL_PATHS", None)  # no recursion
    env.setdefault("NNUE_INFER_LIVE_POSITIONS", LIVE_POSITIONS)
    # two worker processes of its own (pyproject's addopts): a per-path run keeps both cores busy even
    # when it is the last test left of the outer run
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *targets,
           "--deselect", "tests/test_simd_paths.py::test_suite_passes_on_every_path"]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"NNUE_INFER_SIMD={name}: {' '.join(cmd)}\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"

"""Every instruction-set path gives the same numbers as this run's own path, on every kind of network.

``Evaluator(network, isa=NAME)`` runs the kernels of another path in this process (the path is part
of the kernels' compile-time configuration, ``kernels.nnue.forward.Config``), so each path this CPU has
is checked end to end here, against this run's own path, on the networks whose configurations the
suite knows: Stockfish 15.1-19 (threat and pawn-pair inputs, the lite nets), the default network,
the signed first layers at small and extreme fc_0 weights (the AVX2 first-layer variants are chosen
by the weights' size), networks whose int32 sums wrap, and random threat networks: single positions
on each (the refresh and the layer stack), every ply of three dev games on those that differ in the
rows the incremental update adds (king moves through the refresh cache), and every child of a
position on Stockfish 15.1's (``evaluate_moves``: the children's own kernel).  This run's own path is
checked against the engines and NumPy by the rest of the suite; every path's kernels are checked against NumPy one by one in
``tests/kernels`` (``ALL_PATHS``).  Paths the CPU lacks are skipped (the kernels do not compile
them there; the emulation of their instructions is checked in ``tests/kernels/test_simd.py``).

``NNUE_INFER_TEST_ALL_PATHS=1`` also runs the whole suite again in a subprocess under each path
(``NNUE_INFER_SIMD``; slow: one full run per path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import chess
import numpy as np
import pytest

import nnue_infer
from nnue_infer import Evaluator
from nnue_infer.kernels import simd

ROOT = Path(__file__).resolve().parent.parent

#: Networks checked on every path (ids for :func:`make_network`).  The signed first layers' int8
#: inputs (stored as x + 128 with offset biases) and the AVX2 first-layer variants chosen by the weights'
#: size are covered by glu and bilinear at small and extreme fc_0 weights; hswish_glu's and lut_glu's
#: own arithmetic, the feature transformer's, is checked on the portable and SIMD code of
#: ``kernels.nnue.activation.ft_transform`` by tests/kernels/test_ft_activations.py.
NETWORKS = ["sf15.1", "sf16", "sf17.1", "sf17.1-small", "sf18", "sf19", "sf19-lite", "default",
            "glu-127-7-small", "glu-127-7-extreme", "bilinear-255-9-small", "bilinear-255-9-extreme",
            "int32-psqt", "int32-extreme", "threats"]
#: The networks whose game plies are checked too: the incremental update adds and subtracts weight
#: rows on the path (int16 rows, and the int8 threat and pawn-pair rows), whatever the activation and
#: layer stack after them, which the positions check on every network; one more kernel per path.
INCREMENTAL = {"sf15.1", "sf18", "sf19", "int32-extreme", "threats"}
#: The networks whose children are checked too (the children's own kernel: a child is the parent's
#: accumulator plus its feature delta, added on the path by the accumulator kernels that the game
#: plies of the :data:`INCREMENTAL` networks check with threat and pawn-pair rows too).
CHILDREN = {"sf15.1"}


def make_network(name: str, sf15: nnue_infer.Network) -> nnue_infer.Network:
    """The network called ``name`` in :data:`NETWORKS` (skips when an npm network is not cached)."""
    if name == "sf15.1":
        return sf15
    if name == "default":
        return nnue_infer.default_network()
    if name.startswith("sf"):
        from nnue_infer.errors import NetworkNotFoundError
        from nnue_infer.resources import known_network
        try:
            return known_network(name)
        except NetworkNotFoundError as exc:  # no npm tarball in the cache: CI fetches it (.ci/run)
            pytest.skip(str(exc))
    if name.startswith("int32"):
        from test_int32_semantics import crafted, extreme
        return crafted(sf15, 1, 2**30, 2**31 - 3000) if name == "int32-psqt" else extreme(sf15, 4)
    if name == "threats":
        from test_threat_inputs import threat_network
        return threat_network(1)
    from test_signed_inputs import make
    activation, qa, shift, size = name.split("-")
    return make(activation, int(qa), int(shift), size == "extreme")


@pytest.fixture(scope="module")
def positions(sample_boards, corpus) -> list[chess.Board]:
    """Random playouts (some Chess960), random placements and every 40th dev position."""
    return sample_boards[::2] + [chess.Board(r["fen"]) for r in corpus[::40]]


@pytest.fixture(scope="module")
def dev_games(data_dir) -> list[dict]:
    """Three dev games (castling, captures, promotions, king walks)."""
    with open(data_dir / "games-dev.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()][:3]


@pytest.mark.parametrize("name", NETWORKS)
@pytest.mark.parametrize("path", simd.ISA_NAMES)
def test_network_on_every_path(path, name, network, positions, dev_games):
    """``Evaluator(net, isa=path)`` equals this run's own path on positions, on game plies for the
    :data:`INCREMENTAL` networks and on children for the :data:`CHILDREN` ones."""
    code = simd.ISA_NAMES.index(path)
    if code not in simd.native_isas():
        pytest.skip(f"this CPU lacks the {path} instructions")
    if code == simd.ISA:
        pytest.skip(f"{path} is this run's own path")
    net = make_network(name, network)
    own, other = Evaluator(net), Evaluator(net, isa=path)
    assert (own.isa, other.isa) == (simd.ISA_NAMES[simd.ISA], path)
    boards = positions
    want = [own.evaluate(b) for b in boards]
    assert [other.evaluate(b) for b in boards] == want
    assert len(set(want)) > len(want) // 2  # a real spread of values, not one constant
    if name not in INCREMENTAL:
        return
    for game in dev_games:
        moves = game["moves"]
        assert np.array_equal(other.evaluate_game(game["start_fen"], moves, validate=False),
                              own.evaluate_game(game["start_fen"], moves, validate=False)), game["id"]
    if name not in CHILDREN:
        return
    for board in boards[::6]:
        if any(board.legal_moves):
            assert np.array_equal(other.evaluate_moves(board), own.evaluate_moves(board)), board.fen()


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


def test_evaluator_isa_keyword():
    """``Evaluator(isa=...)``: any path the CPU has; an unknown one or one it lacks is a SimdPathError."""
    from nnue_infer.errors import SimdPathError

    assert Evaluator(isa=None).isa == simd.ISA_NAMES[simd.ISA]
    for code in simd.native_isas():
        assert Evaluator(isa=f" {simd.ISA_NAMES[code].upper()}").isa == simd.ISA_NAMES[code]
    with pytest.raises(SimdPathError, match=r"isa='sse9': expected one of portable, avx2, avxvnni, vnni512 "
                                            r"\(this CPU runs .*; leave it out for the best\)"):
        Evaluator(isa="sse9")
    with pytest.raises(TypeError, match=r"isa: expected a path name \(portable, avx2, avxvnni, vnni512\) or None, got int"):
        Evaluator(isa=3)
    with pytest.raises(SimdPathError, match=r"isa='avx2': this CPU lacks avx2 \(it runs portable; leave it out"):
        simd.path_code("avx2", frozenset())


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


@pytest.mark.skipif(not os.environ.get("NNUE_INFER_TEST_ALL_PATHS"), reason="NNUE_INFER_TEST_ALL_PATHS=1 runs it")
@pytest.mark.parametrize("name", simd.ISA_NAMES)
def test_suite_passes_on_every_path(name):
    """The whole suite in a subprocess under ``NNUE_INFER_SIMD=name`` (``NNUE_INFER_TEST_ALL_PATHS=1``)."""
    if simd.ISA_NAMES.index(name) not in simd.native_isas():
        pytest.skip(f"this CPU lacks the {name} instructions")
    env = dict(os.environ, NNUE_INFER_SIMD=name, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("NNUE_INFER_TEST_ALL_PATHS", None)  # no recursion
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests"]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"NNUE_INFER_SIMD={name}: {' '.join(cmd)}\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"

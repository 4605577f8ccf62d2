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

ROOT = Path(__file__).resolve().parents[2]

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
        from tests.core.test_evaluator_int32 import crafted, extreme
        return crafted(sf15, 1, 2**30, 2**31 - 3000) if name == "int32-psqt" else extreme(sf15, 4)
    if name == "threats":
        from tests.features.test_full_threats import threat_network
        return threat_network(1)
    from tests.core.test_evaluator_signed_inputs import make
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


# -- hostile input ---------------------------------------------------------------------------------------------------



def _env(**extra: str) -> dict:
    """This process's environment with this checkout first on the path, plus ``extra``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop(simd.ENV_VAR, None)
    env.update(extra)
    return env


def _known(spec: str) -> nnue_infer.Network:
    from nnue_infer.errors import NetworkNotFoundError
    from nnue_infer.resources import known_network

    try:
        return known_network(spec)
    except NetworkNotFoundError as exc:  # no npm tarball in the cache: CI fetches it (.ci/run)
        pytest.skip(str(exc))


#: Run in a subprocess with NUMBA_DISABLE_JIT=1: the task (JSON on stdin) through every path
#: (evaluate(board), module evaluate, evaluate_batch, evaluate_game, push + evaluate(), trace,
#: evaluate_moves, evaluate_children_batch, nnue-infer eval).
NO_JIT_SCRIPT = r"""
import json, subprocess, sys, warnings
import chess, numba, nnue_infer
from nnue_infer import Evaluator
from nnue_infer.resources import network_from_spec
assert numba.config.DISABLE_JIT
warnings.simplefilter("error")  # an int16 scalar that wraps in Python would be a wrong number
task = json.load(sys.stdin)
net = network_from_spec(task["net"])
ev = Evaluator(net)
fens, start, moves = task["fens"], task["start"], task["moves"]
out = {"board": [int(ev.evaluate(chess.Board(f))) for f in fens],  # NumPy ints from plain-Python kernels
       "module": int(nnue_infer.evaluate(chess.Board(fens[0]), net)),
       "batch": ev.evaluate_batch(fens).tolist(),
       "game": [int(v) for v in ev.evaluate_game(chess.Board(start), moves)]}
ev.set_position(chess.Board(start))
incremental = [ev.evaluate()]
for uci in moves:
    ev.push_uci(uci)
    incremental.append(ev.evaluate())
out["incremental"] = [int(v) for v in incremental]
parent, children = chess.Board(start), [None]
for uci in moves:  # the child of each ply's parent reached by the game's move
    children.append(int(ev.evaluate_moves(parent, [uci])[0]))
    parent.push_uci(uci)
out["children"] = children
parent.pop()  # every child of the last parent (slow without JIT: one parent only)
_, ucis, values = ev.evaluate_children_batch([parent], uci=True)
out["children_batch"] = {len(moves): int(values[list(ucis).index(moves[-1])])}
out["trace"] = int(ev.trace(chess.Board(fens[0])).value)
cli = subprocess.run([sys.executable, "-m", "nnue_infer", "eval", "--net", task["net"], fens[0]],
                     capture_output=True, text=True)
out["cli"] = [cli.returncode, cli.stdout, cli.stderr]
print(json.dumps(out))
"""


def _run_without_jit(net: str, fens: list[str], start: str, moves: list[str]) -> dict:
    task = json.dumps({"net": net, "fens": fens, "start": start, "moves": moves})
    run = subprocess.run([sys.executable, "-c", NO_JIT_SCRIPT], input=task, capture_output=True, text=True,
                         env=_env(NUMBA_DISABLE_JIT="1"), cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def _check_paths(got: dict, fens: list[str], want_fens: list[int], want_game: dict[int, int]) -> None:
    assert got["board"] == want_fens
    assert got["module"] == want_fens[0]
    assert got["batch"] == want_fens
    assert got["trace"] == want_fens[0]
    for path in ("game", "incremental", "children"):
        first = 0 if path != "children" else 1  # the start position is nobody's child
        want = {ply: v for ply, v in want_game.items() if ply >= first}
        assert {ply: got[path][ply] for ply in want} == want, path
    ((ply, value),) = got["children_batch"].items()
    assert value == want_game[int(ply)]
    status, stdout, stderr = got["cli"]
    assert status == 0, stderr
    assert stdout.startswith(f"{chess.Board(fens[0]).fen()}\tvalue {want_fens[0]}\t"), stdout


#: The four path names (the module docstring of ``kernels/simd.py``; written out, not read from it).
PATHS = "portable, avx2, avxvnni, vnni512"


def test_every_path_runs_without_jit_stockfish_15_1(corpus, data_dir, network_path):
    """Stockfish 15.1's net: raw values of the dev corpus (Stockfish's own integers)."""
    games = {g["id"]: g for g in map(json.loads, (data_dir / "games-dev.jsonl").read_text().splitlines())}
    early = {}
    for row in corpus:
        if row["game_id"] in games and 0 < row["ply"] <= 12 and not row["in_check"]:
            early.setdefault(row["game_id"], {})[row["ply"]] = row["raw"]["value"]
    game_id, want_game = max(early.items(), key=lambda kv: (len(kv[1]), kv[0]))
    game = games[game_id]
    fens = [r["fen"] for r in corpus if not r["in_check"]][:3]
    want = {r["fen"]: r["raw"]["value"] for r in corpus}
    got = _run_without_jit(str(network_path), fens, game["start_fen"], game["moves"][:max(want_game)])
    _check_paths(got, fens, [want[f] for f in fens], want_game)


def test_every_path_runs_without_jit_stockfish_19(data_dir):
    """Stockfish 19's net (threat and pawn-pair inputs): its engine's values in ``shared/data/sf19``."""
    _known("sf19")
    sf19 = data_dir / "sf19"
    rows = [json.loads(line) for line in (sf19 / "positions-dev-sf19.jsonl").read_text().splitlines()[:40]]
    rows = [r for r in rows if not r["in_check"]][:1]
    game = json.loads((sf19 / "games-dev-sf19.jsonl").read_text().splitlines()[0])
    plies = 2  # every path in pure Python with threat inputs: about 20 s a ply (children included)
    want_game = {ply: game["values"][ply] for ply in range(plies + 1) if not game["in_check"][ply]}
    got = _run_without_jit("sf19", [r["fen"] for r in rows], game["start_fen"], game["moves"][:plies])
    _check_paths(got, [r["fen"] for r in rows], [r["value"] for r in rows], want_game)


def test_a_misspelt_simd_path_is_one_error_line_and_help_works():
    env = _env(NNUE_INFER_SIMD="avx3")
    helped = subprocess.run([sys.executable, "-m", "nnue_infer", "--help"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "Usage: " in helped.stdout and helped.stderr == "", helped.stderr
    helped = subprocess.run([sys.executable, "-m", "nnue_infer", "eval", "--help"], capture_output=True, text=True,
                            env=env)
    assert helped.returncode == 0 and "--epd" in helped.stdout, helped.stderr
    run = subprocess.run([sys.executable, "-m", "nnue_infer", "eval", "startpos"], capture_output=True, text=True,
                         env=env)
    assert run.returncode == 1 and run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: NNUE_INFER_SIMD='avx3'") and PATHS in lines[0], run.stderr
    api = subprocess.run([sys.executable, "-c", "import chess, nnue_infer\n"
                          "try:\n    nnue_infer.evaluate(chess.Board())\n"
                          "except nnue_infer.SimdPathError as exc:\n    print(type(exc).__mro__[1:3], exc)"],
                         capture_output=True, text=True, env=env)
    assert api.returncode == 0 and "NnueError" in api.stdout and "ValueError" in api.stdout, api.stderr


@pytest.mark.parametrize("forced,features,missing", [
    # Intel's requirements: AVX-VNNI (VEX vpdpbusd) and AVX512_VNNI with AVX512BW/VL (EVEX ymm/zmm)
    ("avxvnni", {"avx2"}, "avxvnni"),
    ("vnni512", {"avx2", "avx512f"}, "avx512bw, avx512vl, avx512vnni"),
    ("avx2", set(), "avx2"),
])
def test_a_path_the_cpu_lacks_names_only_the_missing_features(monkeypatch, forced, features, missing):
    monkeypatch.setattr(simd, "target_features", lambda: frozenset(features))
    with pytest.raises(ValueError) as info:
        simd.select_isa({simd.ENV_VAR: forced})
    assert f"this CPU lacks {missing} (" in str(info.value), str(info.value)
    assert type(info.value).__name__ == "SimdPathError"


def test_the_docstring_says_what_the_code_does():
    """The docstring claimed a forced ``vnni512`` runs emulated on a CPU without AVX-512, which
    the code refuses (the kernels compile only the target's paths: ``simd.TARGET_*``)."""
    doc = " ".join(simd.__doc__.split())
    assert "emulated (slowly)" not in doc and "cannot be forced" in doc

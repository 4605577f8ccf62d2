"""The bundled default network (weights/, model card weights/README.md): shipped, default, accurate."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import chess
import pytest

import nnue_infer
from nnue_infer import resources
from nnue_infer.training import distil
from nnue_infer.cli import main
from nnue_infer import NetworkFormatError, load
import os
import shutil
import stat
from nnue_infer.errors import IllegalMoveError, NetworkNotFoundError
from tests.kernels.test_cache import _read_only

REPO = Path(__file__).resolve().parents[2]
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"


@pytest.fixture(scope="module")
def default():
    return nnue_infer.default_network()


def test_bundled_file_is_small_and_described(default):
    path = nnue_infer.default_network_path()
    assert path.name == resources.DEFAULT_NETWORK_FILE
    assert path.stat().st_size <= 4 * 2**20
    assert path.resolve() == (REPO / "weights" / resources.DEFAULT_NETWORK_FILE).resolve()  # source checkout
    arch = default.architecture
    assert (arch.feature_set, arch.ft_activation, arch.output_buckets, arch.mirror) == ("Chess768", "bilinear", 8, "e-h")
    assert arch.units_per_pawn == 361  # Stockfish 15.1's units: values compare directly
    card = (REPO / "weights" / "README.md").read_text()
    for needle in ("make-default-network.sh", "Licence", "sign agreement", resources.DEFAULT_NETWORK_FILE):
        assert needle in card, needle


def test_default_everywhere(default, capsys):
    board = chess.Board(AFTER_E4)
    expected = nnue_infer.Evaluator(default).evaluate(board)
    assert nnue_infer.Evaluator().network is default
    assert nnue_infer.evaluate(board) == expected
    assert nnue_infer.evaluate_batch([board]).tolist() == [expected]
    assert main(["eval", "--json", AFTER_E4]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == expected
    assert main(["eval", "--json", "--net", "default", AFTER_E4]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == expected
    # Stockfish 15.1's network stays one option away (its value after 1. e4 is -52).
    assert main(["eval", "--json", "--net", "stockfish", AFTER_E4]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == -52


def test_missing_default_network_says_what_to_do(monkeypatch):
    monkeypatch.setattr(resources, "_default", None)
    monkeypatch.setattr(resources, "DEFAULT_NETWORK_FILE", "no-such-network.safetensors")
    with pytest.raises(nnue_infer.NetworkNotFoundError, match="no-such-network.safetensors.*reinstall"):
        nnue_infer.default_network()


#: Issue 5's targets on the whole dev corpus, stated here rather than read from the code under test
#: (measured: 34.9 cp, 99.5 %; weights/README.md): mean absolute error at most 50 cp over positions
#: with |Stockfish| <= 1000 cp, sign agreement at least 95 % over positions with |Stockfish| >= 100 cp.
MAE_BOUND_CP = 50.0
MAE_WINDOW_CP = 1000.0
SIGN_BOUND = 0.95
SIGN_MIN_CP = 100.0
#: Positions not derived from training data miss the MAE target (measured 57.7 cp, 98.5 %):
#: this bound only guards against regressions of the shipped network.
HELD_OUT_MAE_BOUND_CP = 60.0


def test_accuracy_against_stockfish_on_the_dev_corpus(default, data_dir):
    """Against Stockfish 15.1's exact values on the 3,298 dev positions (figures in weights/README.md)."""
    rows = [json.loads(line) for line in (data_dir / "positions-dev.jsonl").read_text().splitlines()]
    assert len(rows) == 3298
    values = nnue_infer.Evaluator(default).evaluate_batch([r["fen"] for r in rows])
    student = [100 * int(v) / 361 for v in values]  # both nets in Stockfish 15.1's units (361 per pawn)
    teacher = [100 * r["raw"]["value"] / 361 for r in rows]
    window = [abs(s - t) for s, t in zip(student, teacher) if abs(t) <= MAE_WINDOW_CP]
    decided = [(s > 0) == (t > 0) and s != 0 for s, t in zip(student, teacher) if abs(t) >= SIGN_MIN_CP]
    assert sum(window) / len(window) <= MAE_BOUND_CP
    assert sum(decided) / len(decided) >= SIGN_BOUND
    acc = distil.corpus_accuracy(default, distil.read_corpus(data_dir / "positions-dev.jsonl"), holdout_fraction=0.25)
    a = acc["all"]
    assert a["positions"] == 3298
    assert a["mae_cp"] == pytest.approx(sum(window) / len(window)), a
    assert a["sign_agreement"] == pytest.approx(sum(decided) / len(decided)), a
    assert a["correlation"] >= 0.9, a
    h = acc["held_out"]
    assert h["positions"] == 1248
    assert h["mae_cp"] <= HELD_OUT_MAE_BOUND_CP and h["sign_agreement"] >= SIGN_BOUND, h


def test_wheel_contains_the_network_and_it_loads(tmp_path):
    """A wheel install has no source checkout: the network must travel as package data."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("nnue_infer-*.whl")
    member = f"nnue_infer/weights/{resources.DEFAULT_NETWORK_FILE}"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert member in names and "nnue_infer/weights/README.md" in names
        z.extract(member, tmp_path / "unpacked")
    net = nnue_infer.load(tmp_path / "unpacked" / member)
    board = chess.Board(AFTER_E4)
    assert nnue_infer.Evaluator(net).evaluate(board) == nnue_infer.evaluate(board)


# -- hostile input ---------------------------------------------------------------------------------------------------

def test_a_damaged_cached_network_is_named_as_such(tmp_path, monkeypatch):
    """Registry: a cached known network cut short or replaced (a disk full during a copy, another file
    under its name) with no npm package in the cache was reported as "nn-61e7af4bb97d.nnue ... is not in
    <cache>", though the file is there: the user looks for a missing file.  Now the message says the
    cached file is damaged or replaced (its size and SHA-256 against the expected ones) and how to
    fetch it again; nothing is deleted."""
    from nnue_infer import NetworkNotFoundError
    from nnue_infer.formats.registry import known_by_spec
    from nnue_infer.resources import known_network_path

    known = known_by_spec("sf19-lite")
    good = known_network_path("sf19-lite").read_bytes()
    monkeypatch.setenv("NNUE_INFER_CACHE", str(tmp_path))
    damaged = tmp_path / known.name
    damaged.write_bytes(good[:1000])
    with pytest.raises(NetworkNotFoundError) as info:
        known_network_path("sf19-lite")
    message = str(info.value)
    assert message.startswith(f"{damaged}: damaged or replaced (1000 bytes, SHA-256 ")
    assert f"expected {known.size} bytes, SHA-256 {known.sha256[:16]}" in message
    assert "nnue-infer fetch sf19-lite" in message and "is not in" not in message
    assert damaged.read_bytes() == good[:1000]


def test_a_directory_named_like_a_network_does_not_shadow_the_name(tmp_path, monkeypatch):
    """Registry: a known network's name is a name "only when no file has it", but a *directory* of that
    name in the working directory (a folder ``sf19-lite/`` of one's own data) shadowed it:
    ``Evaluator("sf19-lite")`` and ``eval --net sf19-lite`` failed with "sf19-lite: not a regular file".
    Now only a regular file takes the name over; the directory is ignored and the known network loads."""
    from nnue_infer import Evaluator
    from nnue_infer.resources import known_network, network_from_spec

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sf19-lite").mkdir()
    assert network_from_spec("sf19-lite") is known_network("sf19-lite")
    assert Evaluator("sf19-lite").network is known_network("sf19-lite")
    from nnue_infer.resources import is_network_name  # the rule, also for nnue-infer info

    assert is_network_name("sf19-lite") and not is_network_name(str(tmp_path / "sf19-lite"))  # a path is a path
    (tmp_path / "sf16").write_bytes(b"not a network")
    assert not is_network_name("sf16")  # a regular file of that name is the file (it is loaded, and refused here)
    with pytest.raises(NetworkFormatError, match="^sf16: unknown network format"):
        network_from_spec("sf16")


def test_module_functions_see_a_network_file_replaced_with_its_old_stamp(tmp_path, monkeypatch):
    """Python API, module-level ``evaluate(board, "ck.nnue")``: the per-thread network cache knew a file by
    its name, size and modification time, so a checkpoint of the same architecture saved over it (same
    size) whose modification time was kept (``cp -p``, ``rsync -t``, ``tar x``, a file system with a
    coarse clock) was evaluated with the old network, a silently wrong number; a relative name
    in another working directory likewise.  The key now has the file's device, inode and
    status-change time, which no copy keeps."""
    import os

    import chess

    import nnue_infer
    from nnue_infer import Evaluator, FloatNetwork, quantise, save, stockfish_15_1_architecture

    nets = [quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=s)) for s in (1, 2)]
    board = chess.Board()
    truth = [Evaluator(n).evaluate(board) for n in nets]
    assert truth[0] != truth[1]
    path = tmp_path / "ck.nnue"
    save(nets[0], path)
    stamp = os.stat(path)
    assert nnue_infer.evaluate(board, str(path)) == truth[0]
    save(nets[1], path)  # same architecture: same size
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert os.stat(path).st_size == stamp.st_size
    assert nnue_infer.evaluate(board, str(path)) == truth[1]
    (tmp_path / "other").mkdir()
    save(nets[0], tmp_path / "other" / "ck.nnue")
    os.utime(tmp_path / "other" / "ck.nnue", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    monkeypatch.chdir(tmp_path)
    assert nnue_infer.evaluate(board, "ck.nnue") == truth[1]
    monkeypatch.chdir(tmp_path / "other")
    assert nnue_infer.evaluate(board, "ck.nnue") == truth[0]


def test_stockfish_network_with_a_read_only_network_cache(tmp_path, evaluator):
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


def test_stockfish_network_from_a_given_binary(tmp_path, monkeypatch, stockfish_binary, network):
    monkeypatch.setattr(resources, "_stockfish", None)
    monkeypatch.setenv("NNUE_INFER_CACHE", str(tmp_path / "cache"))
    net = nnue_infer.stockfish_15_1_network(binary=stockfish_binary)
    assert (tmp_path / "cache" / "nn-ad9b42354671.nnue").is_file()
    assert nnue_infer.Evaluator(net).evaluate(AFTER_E4) == -52
    monkeypatch.setattr(resources, "_stockfish", None)
    monkeypatch.setenv("NNUE_INFER_CACHE", str(tmp_path / "other"))
    with pytest.raises(NetworkNotFoundError, match="no-binary"):
        nnue_infer.stockfish_15_1_network(binary=tmp_path / "no-binary")

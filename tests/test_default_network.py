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

REPO = Path(__file__).resolve().parents[1]
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
    assert (arch.feature_set, arch.ft_activation, arch.output_buckets, arch.mirror) == ("Chess768", "pairwise", 8, "e-h")
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
#: (measured: 37.1 cp, 99.1 %; weights/README.md): mean absolute error at most 50 cp over positions
#: with |Stockfish| <= 1000 cp, sign agreement at least 95 % over positions with |Stockfish| >= 100 cp.
MAE_BOUND_CP = 50.0
MAE_WINDOW_CP = 1000.0
SIGN_BOUND = 0.95
SIGN_MIN_CP = 100.0
#: Positions not derived from training data miss the MAE target (measured 61.8 cp, 97.3 %):
#: this bound only guards against regressions of the shipped network.
HELD_OUT_MAE_BOUND_CP = 65.0


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

"""The default network's training script (research/train_default_network.py) on a toy study:
every position of the mix used once per epoch, the rate and epochs chosen by validation loss,
nothing written into the study, a resumed call that trains nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research"))

import train_default_network as T  # noqa: E402
import training_data_mix as M  # noqa: E402


def test_mix_rows_take_the_largest_exact_selection():
    source = np.repeat(np.array([0, 1, 2, 3], np.uint8), [100, 200, 250, 10])
    rows = T.mix_rows(source, M.MIXES["walk+selfplay"])
    assert len(rows) == 500 and (np.isin(source[rows], (0, 1)).sum(), (source[rows] == 2).sum()) == (250, 250)
    assert len(T.mix_rows(source, M.MIXES["study"])) == 200  # 10 search positions are 5 %


def test_toy_default_network_is_chosen_on_validation(tmp_path, toy_study):
    pytest.importorskip("torch")
    from nnue_infer import load

    study = toy_study
    before = sorted(p.name for p in (study / "data").iterdir())
    out, work = tmp_path / "net.json", tmp_path / "work"
    raw = T.train_default(study, work, out, "walk+selfplay", width=16, lrs=(4e-3, 8e-3), epochs=2, log=lambda *a: None)
    assert sorted(p.name for p in (study / "data").iterdir()) == before
    assert raw["positions"] == 2 * min(raw["by_source"].values()) > 1500
    assert [(r["lr"], r["epochs"]) for r in raw["runs"][:2]] == [(4e-3, 1.0), (8e-3, 1.0)]
    sweep_best = min(raw["runs"][:2], key=lambda r: r["quantised_val_loss"])
    assert raw["runs"][2]["lr"] == sweep_best["lr"] and raw["runs"][2]["epochs"] == 2.0
    assert raw["chosen"]["name"] == min((sweep_best, raw["runs"][2]), key=lambda r: r["quantised_val_loss"])["name"]
    net = load(work / "network.safetensors")
    assert net.architecture.ft_width == 16 and raw["chosen"]["network_bytes"] == (work / "network.safetensors").stat().st_size
    assert raw["chosen"]["dev_held_out_mae_cp"] > 0 and raw["chosen"]["quantised_test_mae_cp"] > 0
    assert json.loads(out.read_text())["chosen"] == raw["chosen"]
    again = T.train_default(study, work, out, "walk+selfplay", width=16, lrs=(4e-3, 8e-3), epochs=2, log=lambda *a: None)
    assert [r["name"] for r in again["runs"]] == [r["name"] for r in raw["runs"]]
    one = T.train_default(study, tmp_path / "one", tmp_path / "one.json", "walk+selfplay", width=16, lrs=(4e-3,),
                          epochs=1, chunks=1, log=lambda *a: None)
    assert one["chunks"] == [0] and one["positions"] == 950 and len(one["runs"]) == 1  # 475 walk + 475 self-play

"""The training-data mix comparison (research/training_data_mix.py): selection by source, the
epoch stream, a toy comparison end to end read-only on a study directory, and its report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research"))

import training_data_mix as M  # noqa: E402


def test_selection_takes_each_sources_share_and_nests_budgets():
    source = np.repeat(np.array([0, 1, 2, 3], np.uint8), [300, 300, 500, 100])
    small = M.select(source, M.MIXES["study"], 400)
    large = M.select(source, M.MIXES["study"], 800)
    assert len(np.unique(small)) == 400 and set(small) <= set(large)
    got = {s: int(np.isin(source[large], c).sum()) for s, c in M.SOURCES.items()}
    assert got == M.source_counts(M.MIXES["study"], 800) == {"walk": 380, "selfplay": 380, "search": 40}
    assert set(np.unique(source[M.select(source, M.MIXES["walk"], 600)])) == {0, 1}
    assert not M.available(source, M.MIXES["search"], 101)
    with pytest.raises(ValueError, match="search: 100 positions, 101 needed"):
        M.select(source, M.MIXES["search"], 101)


def test_epoch_stream_sees_every_row_once_per_epoch():
    pool = {"features": np.arange(20).reshape(10, 2), "buckets": np.arange(10), "values": np.arange(10) * 1.0}
    rows = np.array([1, 3, 5, 7])
    stream = M.Epochs(pool, rows, seed=3)
    seen = np.concatenate([stream.batch(g, 3)[1] for g in range(0, 12, 3)])
    for e in range(3):
        assert sorted(seen[4 * e:4 * e + 4]) == [1, 3, 5, 7]
    assert not np.array_equal(seen[:4], seen[4:8]) or not np.array_equal(seen[4:8], seen[8:12])


def test_toy_comparison_runs_read_only_and_reports(tmp_path, toy_study):
    pytest.importorskip("torch")
    study = toy_study
    before = sorted(p.name for p in (study / "data").iterdir())
    out = tmp_path / "mix.json"
    raw = M.run_mixes(study, tmp_path / "work", out, [50, 400], lrs=(4e-3, 8e-3), min_seen=500, log=lambda *a: None)
    assert sorted(p.name for p in (study / "data").iterdir()) == before  # nothing written into the study
    runs = {(r["mix"], r["budget"]) for r in raw["runs"]}
    assert {(m, 50) for m in M.MIXES} <= runs and ("walk", 400) in runs and ("search", 400) not in runs
    for r in raw["runs"]:
        assert r["lr"] in (4e-3, 8e-3) and len(r["sweep"]) == 2
        assert r["dev_held_out_mae_cp"] > 0 and r["quantised_test_mae_cp"] > 0 and r["dev_held_out_positions"] > 1000
        assert r["cpu_seconds"] == pytest.approx(r["generation_cpu_seconds"] + r["train_cpu_seconds"])
    assert raw["summary"]["best"] in M.MIXES
    assert json.loads(out.read_text())["runs"] == raw["runs"]
    text = M.markdown(raw)
    assert "| walk | 400 |" in text and f"`{raw['summary']['best']}`" in text
    again = M.run_mixes(study, tmp_path / "work", out, [50, 400], lrs=(4e-3, 8e-3), min_seen=500, log=lambda *a: None)
    assert again["runs"] == raw["runs"]  # resumed: nothing trained again

"""Activation study v3 (research/activation_study_v3*.py): the bracketed sweep rule, distinct data
across the whole set, a toy study end to end with the issue's record fields, and the report from a
results file alone."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research"))

import activation_study_v2_report as R2  # noqa: E402
import activation_study_v3 as S  # noqa: E402


def test_sweep_extends_downwards_and_upwards_until_bracketed():
    def loss(best):
        return lambda lr: (np.log2(lr) - np.log2(best)) ** 2

    assert S.sweep_rates([2.0, 4.0, 8.0], loss(4.0), 0.1, 100.0) == ([2.0, 4.0, 8.0], 4.0)
    assert S.sweep_rates([2.0, 4.0, 8.0], loss(0.5), 0.1, 100.0) == ([0.25, 0.5, 1.0, 2.0, 4.0, 8.0], 0.5)
    assert S.sweep_rates([2.0, 4.0, 8.0], loss(32.0), 0.1, 100.0) == ([2.0, 4.0, 8.0, 16.0, 32.0, 64.0], 32.0)
    # a bound stops the sweep: the best rate is then at an edge (reported as unbracketed)
    assert S.sweep_rates([2.0, 4.0, 8.0], loss(1000.0), 0.1, 20.0) == ([2.0, 4.0, 8.0, 16.0], 16.0)
    rates = {2.0: 1.0, 4.0: None}
    assert S.sweep_rates([2.0, 4.0], rates.get, 0.1, 100.0) == ([2.0, 4.0], None)


def test_toy_study_has_distinct_positions_and_the_issues_fields(tmp_path, data_dir, monkeypatch):
    """Data over the whole set distinct (validation, test, chunks, dev corpus), sweeps then paired
    seeds, records with the issue's fields, unique == seen, a resumed call that trains nothing."""
    pytest.importorskip("torch")
    from nnue_infer.training.datagen import load_positions, read_exclude
    from nnue_infer.training.positionset import position_hashes

    monkeypatch.setenv("NNUE_INFER_SHARED", str(data_dir.parent))
    cfg = S.Config(cells=((16, 3000),), baseline_cells=(), seeds=(1, 2), lrs=(2e-3, 4e-3), lr_min=1e-3, lr_max=8e-3,
                   val_positions=400, test_positions=400, chunk_positions=1000, batch_size=500, eval_every=2)
    out, results = tmp_path / "study", tmp_path / "results.json"
    S.run_study(out, cfg, results, log=lambda *a: None)
    raw = json.loads(results.read_text())
    main = [r for r in raw["runs"] if r["role"] == "main"]
    assert len(main) == 3 * 2  # three variants x two seeds
    for r in raw["runs"]:
        assert set(S.RECORD_FIELDS) <= set(r)
        assert r["unique_positions"] == r["positions_seen"] == 3000
        assert 0 < r["ft_nonzero_chunk_share"] <= 1 and r["quantised_test_mae_cp"] > 0
    for v in S.VARIANTS:
        rates, chosen = S.sweep_of(out, cfg, v, (16, 3000))
        assert chosen is not None and {r["lr"] for r in main if r["variant"] == v} == {chosen}
        assert chosen not in (min(rates), max(rates)) or chosen in (1e-3, 8e-3)  # bracketed or at a bound
    files = ["val.npz", "test.npz", *(f"train-{i:04d}.npz" for i in range(3))]
    hashes = [position_hashes(d["bitboards"], d["stm"]) for d in (load_positions(out / "data" / f) for f in files)]
    every = np.concatenate(hashes)
    assert len(np.unique(every)) == len(every)  # no position twice anywhere in the data set
    dev = np.array(sorted(read_exclude(data_dir / "positions-dev.jsonl")), np.uint64).reshape(-1, 9)
    assert not np.isin(position_hashes(dev[:, :8], (dev[:, 8] ^ 1).astype(np.uint8)), every).any()
    assert raw["matches"] == []
    before = results.stat().st_mtime_ns
    S.run_study(out, cfg, results, log=lambda *a: None)
    assert results.stat().st_mtime_ns == before


def test_elo_stage_at_a_finished_cell_before_the_largest_is_an_amendment(tmp_path, data_dir, monkeypatch):
    """The Elo stage refuses the planned (largest) cell while its runs are missing and an unknown
    cell; at a smaller finished cell it plays each gate against pairwise once, records the cell with
    each match and writes one amendment."""
    pytest.importorskip("torch")
    import dataclasses

    monkeypatch.setenv("NNUE_INFER_SHARED", str(data_dir.parent))
    small = (16, 2000)
    cfg = S.Config(cells=(small,), baseline_cells=(), seeds=(1,), lrs=(2e-3, 4e-3), lr_min=1e-3, lr_max=8e-3,
                   val_positions=400, test_positions=400, chunk_positions=1000, batch_size=500, eval_every=2,
                   elo_nodes=50, elo_game_pairs=1)
    out, results = tmp_path / "study", tmp_path / "results.json"
    S.run_study(out, cfg, results, log=lambda *a: None)
    planned = dataclasses.replace(cfg, cells=(small, (16, 4000)))
    with pytest.raises(SystemExit, match="16 x 4,000 are not all finished"):
        S.elo_stage(out, planned, results, log=lambda *a: None)
    with pytest.raises(SystemExit, match="32 x 2,000 is not a cell"):
        S.elo_stage(out, planned, results, cell=(32, 2000), log=lambda *a: None)
    for _ in range(2):  # the second call finds every match played and changes nothing
        S.elo_stage(out, planned, results, cell=small, log=lambda *a: None)
        matches = json.loads(results.read_text())["matches"]
        assert sorted((m["a"], m["b"], tuple(m["cell"]), m["games"]) for m in matches) == [
            ("bilinear", "pairwise", small, 2), ("glu", "pairwise", small, 2)]
        amendments = json.loads((out / "config.json").read_text())["amendments"]
        assert [a["changed"] for a in amendments] == [{"elo_cell": list(small)}]


@pytest.mark.parametrize("cell, problem", [("abc", "'abc' is not WIDTH,POSITIONS"),
                                           ("1024", "'1024' is not WIDTH,POSITIONS"),
                                           ("16,2000,5", "'16,2000,5' is not WIDTH,POSITIONS"),
                                           ("", "'' is not WIDTH,POSITIONS"),
                                           ("16,-1", "'16,-1': the width and the positions must be positive")])
def test_elo_cell_that_is_not_width_and_positions_is_refused_by_name(tmp_path, capsys, cell, problem):
    S.load_config(tmp_path, S.Config())
    with pytest.raises(SystemExit) as exc:
        S.main(["elo", "--out", str(tmp_path), "--results", str(tmp_path / "results.json"), "--cell", cell])
    assert exc.value.code == 2
    assert f"argument --cell: {problem}" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["elo", "collect"])
def test_elo_and_collect_refuse_a_directory_without_a_study(tmp_path, command):
    """A mistyped --out is named; no study (config.json) is started there."""
    out = tmp_path / "no-study"
    with pytest.raises(SystemExit, match=f"{out}: no study there"):
        S.main([command, "--out", str(out), "--results", str(tmp_path / "results.json")])
    assert not out.exists() and not (tmp_path / "results.json").exists()


def test_data_is_the_same_for_the_same_configuration(tmp_path, data_dir, monkeypatch):
    from nnue_infer.training.datagen import load_positions

    monkeypatch.setenv("NNUE_INFER_SHARED", str(data_dir.parent))
    cfg = S.Config(val_positions=300, test_positions=300, chunk_positions=500)
    for name in ("a", "b"):
        S.load_config(tmp_path / name, cfg)
        S.ensure_data(tmp_path / name, cfg, 2, log=lambda *a: None)
    for f in ("val.npz", "test.npz", "train-0000.npz", "train-0001.npz"):
        a, b = load_positions(tmp_path / "a" / "data" / f), load_positions(tmp_path / "b" / "data" / f)
        assert np.array_equal(a["bitboards"], b["bitboards"]) and np.array_equal(a["value"], b["value"])


def _toy_results() -> dict:
    """Two cells of one width (1,000 and 4,000 positions); every sweep's best rate is 4e-3 (bracketed);
    bilinear's MAE is pairwise's minus 2 cp (+- 0.1), glu's pairwise's (+- 0.5, mean 0); pairwise
    gains 4 cp from 1,000 to 4,000 positions (2 cp per doubling)."""
    cfg = S.Config(cells=((16, 1000), (16, 4000)), baseline_cells=(), lrs=(2e-3, 4e-3, 8e-3))
    runs = []
    base = {1000: [50.0, 51.0, 49.0, 50.5, 49.5], 4000: [46.0, 47.0, 45.0, 46.5, 45.5]}
    offsets = {"pairwise": [0.0] * 5, "bilinear": [-2.1, -1.9, -2.0, -2.1, -1.9], "glu": [0.5, -0.5, 0.0, 0.5, -0.5]}
    for w, n in cfg.cells:
        for v in S.VARIANTS:
            for lr in (2e-3, 4e-3, 8e-3):
                runs.append({"run": S.Run(v, 0, n, lr, "sweep", w).name, "variant": v, "seed": 0, "budget": n,
                             "ft_width": w, "cell_ft_width": w, "lr": lr, "role": "sweep", "positions_seen": n,
                             "unique_positions": n, "quantised_val_loss": 1e-3 + abs(math.log2(lr / 4e-3)) * 1e-4,
                             "quantised_test_mae_cp": 60.0, "train_seconds": 1.0})
            for i, s in enumerate(cfg.seeds):
                runs.append({"run": S.Run(v, s, n, 4e-3, ft_width=w).name, "variant": v, "seed": s, "budget": n, "ft_width": w,
                             "cell_ft_width": w, "lr": 4e-3, "role": "main", "positions_seen": n, "unique_positions": n,
                             "quantised_test_mae_cp": base[n][i] + offsets[v][i], "quantised_val_loss": 1e-3,
                             "float_val_loss": 1e-3, "ft_nonzero_chunk_share": 0.5, "inference_us_per_position": 1.0,
                             "train_seconds": 0.01 * n})
    import dataclasses

    return {"config": dataclasses.asdict(cfg), "runs": runs, "matches": [
        {"a": "bilinear", "b": "pairwise", "games": 200, "pentanomial": [5, 20, 40, 25, 10], "elo": 12.0,
         "elo_error95": 30.0}]}


def test_report_primary_analysis_on_a_toy_study(tmp_path):
    pytest.importorskip("matplotlib")
    import activation_study_v3_report as R

    raw = _toy_results()
    rows = {(c["cell"], c["variant"]): c for c in R.primary(R.main_runs(raw), R.config_of(raw))}
    assert len(rows) == 4  # two gates x two cells: the whole Holm family
    b = rows[((16, 4000), "bilinear")]
    assert b["mean"] == pytest.approx(-2.0) and b["verdict"] == "better" and b["doublings"] == pytest.approx(-1.0)
    g = rows[((16, 1000), "glu")]
    assert g["mean"] == pytest.approx(0.0) and g["verdict"] == "no difference shown"
    assert [c["p_holm"] for c in rows.values()] == pytest.approx(R2.holm([c["p"] for c in rows.values()]))
    results = tmp_path / "results.json"
    results.write_text(json.dumps(raw))
    text = R.write_report(results, tmp_path).read_text()
    assert "2.00 cp per doubling of data" in text and "| 16 x 0.004 M | bilinear | pairwise | 200 | 5, 20, 40, 25, 10 | +12.0 +- 30.0" in text
    assert "Every run trained on distinct positions" in text and "{" not in text
    assert (tmp_path / "activation-study-v3" / "differences.png").stat().st_size > 1000


def test_interim_primary_verdicts_adjust_over_the_whole_planned_family():
    """With one of two cells run, Holm steps down over all four planned tests (the missing ones at p = 1)."""
    import activation_study_v3_report as R

    raw = _toy_results()
    raw["runs"] = [r for r in raw["runs"] if r["budget"] == 1000]
    rows = R.primary(R.main_runs(raw), R.config_of(raw))
    assert len(rows) == 2
    assert [c["p_holm"] for c in rows] == pytest.approx(R2.holm([c["p"] for c in rows] + [1.0, 1.0])[:2])


def test_elo_hook_plays_a_match_with_the_issues_fields(tmp_path):
    """The Elo stage's hook against the real match runner: one game pair at 50 nodes."""
    net = Path(__file__).resolve().parents[2] / "weights" / "nnue-infer-default.safetensors"
    result = S.play_match(net, net, S.Config(elo_nodes=50, elo_game_pairs=1), tmp_path / "m.pgn")
    assert set(S.MATCH_FIELDS) - {"a", "b"} <= set(result)
    assert result["games"] == 2 and sum(result["pentanomial"]) == 1 and len(result["pentanomial"]) == 5
    assert result["sprt"]["settings"]["elo1"] == 10.0 and (tmp_path / "m.pgn").read_text().count("[Result ") == 2
    standing = json.loads((tmp_path / "m.pgn.progress.json").read_text())  # kept after every pair
    assert standing["games"] == 2 and standing["pentanomial"] == result["pentanomial"]

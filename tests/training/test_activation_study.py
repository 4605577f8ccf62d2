"""The activation study runner (research/activation_study.py) on a toy budget: training, resuming,
measuring and the report, in seconds (the real study: research/activation-study.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research"))

import activation_study as S  # noqa: E402
from activation_study_report import write_report  # noqa: E402

CFG = S.StudyConfig(ft_width=16, positions=(300, 80, 80), short_steps=4, long_factor=2, batch_size=32, seeds=(1,),
                    eval_every=2)
VARIANTS = ("pairwise", "lut_glu")


@pytest.fixture(scope="module")
def study(tmp_path_factory, data_dir) -> Path:
    """A toy study directory: splits from datagen with the bundled network as teacher (no games)."""
    from nnue_infer.training.datagen import generate, save
    from nnue_infer.resources import default_network

    out = tmp_path_factory.mktemp("study")
    (out / "data").mkdir()
    teacher = default_network()
    for i, (name, n) in enumerate(zip(("train", "val", "test"), CFG.positions)):
        save(out / "data" / f"{name}.npz", generate(n, 10 + i, teacher, progress=False))
    S.load_config(out, CFG)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NNUE_INFER_SHARED", str(data_dir.parent))  # the dev corpus: the second test set
        S.worker(out, 0, 1, VARIANTS, log=lambda *a: None, n_cross=40, n_bound=20, n_sparse=80)
    return out


def test_runs_trained_and_measured(study):
    names = sorted(p.name for p in (study / "runs").iterdir())
    assert names == sorted(r.name for r in S.planned_runs(CFG, VARIANTS))
    for name in names:
        t = json.loads((study / "runs" / name / "train.json").read_text())
        m = json.loads((study / "runs" / name / "measure.json").read_text())
        assert t["steps"] == (4 if name.startswith("short") else 8) and len(t["curve"]) == 2
        assert m["test"]["positions"] == 80 and m["dev"]["all"]["positions"] > 3000
        assert 0 <= m["sparsity"]["zero_fraction"] <= 1 and m["within_error_bound"] == 1.0
    widths = {v: S.study_architecture(v, CFG).ft_output_width for v in S.VARIANTS}
    assert set(widths.values()) == {16}  # the first dense layer reads as many inputs in every variant
    assert S.study_architecture("crelu", CFG).ft_width * 2 == S.study_architecture("glu", CFG).ft_width


def test_resume_gives_the_same_run(study, tmp_path):
    """A run interrupted after its first checkpoint and started again ends bit-identical to one
    trained without interruption."""
    import shutil

    out = tmp_path / "again"
    shutil.copytree(study / "data", out / "data")
    shutil.copy(study / "config.json", out / "config.json")
    run = S.Run("lut_glu", 1, "long")

    def stop(message):
        raise KeyboardInterrupt(message)

    with pytest.raises(KeyboardInterrupt, match="step 4/8"):
        S.train_run(out, run, CFG, log=stop)
    assert (out / "runs" / run.name / "checkpoint.pt").exists()
    resumed = S.train_run(out, run, CFG, log=lambda *a: None)
    straight = json.loads((study / "runs" / run.name / "train.json").read_text())
    assert [p["val_loss"] for p in resumed["curve"]] == [p["val_loss"] for p in straight["curve"]]


def test_speed_ratios(study):
    """The record: what was measured (positions, repeats, one thread), and each ratio the pairwise
    time over the variant's time (> 1: the variant is faster), consistent with the recorded times.
    A second call reads the record back instead of measuring again."""
    s = S.measure_speed(study, CFG, 1, "short", positions=50, repeats=1, variants=VARIANTS, log=lambda *a: None)
    assert (s["seed"], s["budget"], s["positions"], s["repeats"], s["threads"]) == (1, "short", 50, 1, 1)
    for times, ratios in (("us_per_position", "ratio_to_pairwise"),
                          ("activation_ns_per_position", "activation_ratio_to_pairwise")):
        assert set(s[times]) == set(s[ratios]) == set(VARIANTS)
        assert all(0 < t < float("inf") for t in s[times].values())
        for v in VARIANTS:
            assert s[ratios][v] == pytest.approx(s[times]["pairwise"] / s[times][v], rel=1e-9), (ratios, v)
    assert json.loads((study / "speed-short-s1.json").read_text()) == s
    assert S.measure_speed(study, CFG, 1, "short", positions=50, repeats=1, variants=VARIANTS, log=None) == s  # no log: no measuring


def test_sparsity_counts_zero_blocks():
    out = np.zeros((2, 8), np.int16)
    out[0, :3] = 1  # position 0: block 0 has non-zeros, block 1 all zero
    s = S.sparsity(out)
    assert s["zero_fraction"] == pytest.approx((5 / 8 + 1) / 2)
    assert s["zero_block_fraction"] == pytest.approx((1 / 2 + 1) / 2)


def test_report(study, tmp_path):
    (tmp_path / "activation-study.md").write_text("# x\n\n<!-- table -->\nold\n<!-- /table -->\n\ndiscussion\n")
    table = write_report(study, tmp_path, VARIANTS)
    md = (tmp_path / "activation-study.md").read_text()
    assert "old" not in md and table in md and md.endswith("discussion\n")
    main, _, paired = table.split("\n\n")
    assert [line.split("|")[1].strip() for line in main.splitlines()[2:]] == list(VARIANTS)
    assert [line.split("|")[1].strip() for line in paired.splitlines()[2:]] == ["lut_glu"]  # vs pairwise
    raw = json.loads((tmp_path / "activation-study" / "results.json").read_text())
    assert len(raw["runs"]) == 4 and all("measure" in r for r in raw["runs"].values())
    for png in ("loss-curves.png", "sparsity.png"):
        assert (tmp_path / "activation-study" / png).read_bytes()[:4] == b"\x89PNG"


def test_more_seeds_extend_a_study_other_changes_are_refused(tmp_path):
    """A resumed study accepts more seeds (config.json is rewritten, the planned runs grow), refuses any
    other change of settings and fewer seeds."""
    import dataclasses

    S.load_config(tmp_path, CFG)
    more = dataclasses.replace(CFG, seeds=(1, 2))
    assert S.load_config(tmp_path, more) == more
    assert json.loads((tmp_path / "config.json").read_text())["seeds"] == [1, 2]
    assert len(S.planned_runs(more, VARIANTS)) == 2 * len(S.planned_runs(CFG, VARIANTS))
    for bad in (dataclasses.replace(more, short_steps=5), dataclasses.replace(CFG, seeds=(2,))):
        with pytest.raises(SystemExit, match="other settings"):
            S.load_config(tmp_path, bad)

"""Activation study v2 (research/activation_study_v2*.py): the report's statistics on toy studies
with known answers, and the report generated from a results file alone."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import chess
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research"))

import activation_study_v2_report as R  # noqa: E402

#: Two-sided 5 % and 1 % critical values of Student's t (printed tables, 3 decimals).
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 30: 2.042}
T_995 = {2: 9.925, 4: 4.604, 7: 3.499}


def _p_by_integration(t: float, df: int) -> float:
    """Two-sided p of Student's t by integrating its density (Simpson's rule): an independent oracle."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    x = np.linspace(0.0, abs(t), 200_001)
    f = c * (1 + x * x / df) ** (-(df + 1) / 2)
    h = x[1] - x[0]
    inner = h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())
    return 1 - 2 * inner


@pytest.mark.parametrize("df", sorted(T_975))
def test_t_p_values_match_printed_tables(df):
    assert R.t_two_sided_p(T_975[df], df) == pytest.approx(0.05, abs=2e-4)
    assert R.t_quantile(0.975, df) == pytest.approx(T_975[df], abs=1.5e-3)
    if df in T_995:
        assert R.t_two_sided_p(T_995[df], df) == pytest.approx(0.01, abs=1e-4)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 12])
@pytest.mark.parametrize("t", [0.3, 1.0, 2.5, -4.0])
def test_t_p_values_match_numerical_integration(t, df):
    assert R.t_two_sided_p(t, df) == pytest.approx(_p_by_integration(t, df), abs=1e-7)


def test_holm_adjustment_by_hand():
    # sorted 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> monotone 0.06
    assert R.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert R.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert R.holm([]) == []


def _toy_results() -> dict:
    """Five seeds; bilinear's test MAE is pairwise's minus 2.5 cp (+ -0.1, 0.1, 0, -0.2, 0.2),
    glu's is pairwise's with differences that average 0, crelu's move agreement is 2 pp lower on
    every seed but with noise in its MAE; a sweep of two rates where 2e-3 wins for every variant."""
    cfg = {"ft_width": 16, "long_ft_width": 16, "budgets": [["short", 1000], ["long", 2000]], "val_positions": 10,
           "test_positions": 10, "chunk_positions": 500, "children": 3, "batch_size": 100, "lrs": [1e-3, 2e-3],
           "lr_final_fraction": 0.05, "sigmoid_scale_cp": 600.0, "seeds": [1, 2, 3, 4, 5], "sweep_seed": 1,
           "eval_every": 2, "agreement_positions": 10}
    base = [40.0, 42.0, 41.0, 39.0, 43.0]
    offsets = {"pairwise": [0.0] * 5, "bilinear": [-2.4, -2.6, -2.5, -2.3, -2.7], "glu": [0.5, -0.5, 1.0, -1.0, 0.0],
               "crelu": [3.0, -2.0, 1.0, 0.5, -1.5]}
    runs = []
    for v, off in offsets.items():
        for i, s in enumerate(cfg["seeds"]):
            for lr in ([1e-3, 2e-3] if s == 1 else [2e-3]):
                worse = 1.0 if lr == 1e-3 else 0.0
                runs.append({
                    "run": f"short-{v}-s{s}-lr{lr:g}", "variant": v, "seed": s, "budget": "short", "ft_width": 16,
                    "positions_seen": 1000, "unique_positions": 990, "lr": lr,
                    "float_val_loss": 1e-3 + 1e-5 * i + worse * 1e-4,
                    "quantised_val_loss": 1.1e-3 + 1e-5 * i + worse * 1e-4,
                    "quantised_test_mae_cp": base[i] + off[i] + worse,
                    "move_agreement": 0.30 + 0.01 * i - (0.02 if v == "crelu" else 0.0),
                    "train_seconds": 2.0, "role": "sweep" if s == 1 else "main",
                    "curve": [{"positions": 500, "float_val_loss": 2e-3}, {"positions": 1000, "float_val_loss": 1e-3}]})
    return {"config": cfg, "runs": runs}


def test_toy_study_known_answer(tmp_path):
    raw = _toy_results()
    comps = {(c["metric"], c["variant"]): c for c in R.comparisons(R.main_runs(raw), ["pairwise", "bilinear", "glu",
                                                                                         "crelu"], ["short", "long"])}
    assert len(comps) == 3 * 4  # 3 variants x 4 metrics, short budget only (no long runs)
    b = comps[("quantised_test_mae_cp", "bilinear")]
    assert b["n"] == 5 and b["mean"] == pytest.approx(-2.5)
    assert b["sd"] == pytest.approx(math.sqrt(0.1 / 4))
    assert b["t"] == pytest.approx(-2.5 / (math.sqrt(0.025) / math.sqrt(5)))
    assert b["ci"] == pytest.approx((-2.5 - 2.776 * math.sqrt(0.025 / 5), -2.5 + 2.776 * math.sqrt(0.025 / 5)), abs=1e-3)
    assert b["verdict"] == "better" and b["p_holm"] < 0.05
    g = comps[("quantised_test_mae_cp", "glu")]
    assert g["mean"] == pytest.approx(0.0) and g["verdict"] == "no difference shown" and g["p_holm"] == 1.0
    c = comps[("move_agreement", "crelu")]
    assert c["mean"] == pytest.approx(-2.0) and c["verdict"] == "worse"  # constant difference: t = -inf, p = 0
    ps = [x["p"] for x in comps.values()]
    for x, adj in zip(comps.values(), R.holm(ps)):
        assert x["p_holm"] == pytest.approx(adj)
    # the sweep picked 2e-3 for everyone, and its seed-1 run is the main run of seed 1
    assert {r["lr"] for r in R.main_runs(raw)} == {2e-3}
    assert len(R.main_runs(raw)) == 4 * 5


def test_audit_figures_come_from_the_records():
    """The corrections' figures: distinct share per budget, rates, the sweep seed's rank, power and
    the improvement per doubling of data, on a toy file whose answers are known."""
    raw = _toy_results()
    long_runs = []
    for r in R.main_runs(raw):  # a long budget twice the size: every MAE 4 cp lower, 1,900 of 2,000 distinct
        long_runs.append({**r, "run": r["run"].replace("short", "long"), "budget": "long", "role": "main",
                          "positions_seen": 2000, "unique_positions": 1900,
                          "quantised_test_mae_cp": r["quantised_test_mae_cp"] - 4.0})
    raw["runs"] += long_runs
    a = R.audit(raw)
    assert a["unique_share"] == {"short": (0.99, 0.99), "long": (0.95, 0.95)}
    assert set(a["lr"].values()) == {2e-3}
    assert a["worst_seed"]["short"] == {"worst": 5, "sweep_seed_rank": 4, "seeds": 5}  # pairwise MAE 40,42,41,39,43
    assert a["doubling"]["cp_per_doubling"] == pytest.approx(4.0)
    assert a["doubling"]["effects"]["bilinear"] == pytest.approx((-2.5, -0.625))
    p = a["power"]["short"]
    assert p["family"] == a["family"] == 24 and p["t_first_step"] == pytest.approx(R.t_quantile(1 - 0.05 / 48, 4))
    assert R.t_two_sided_p(p["t_first_step"], 4) == pytest.approx(0.05 / 24)
    text = R.corrections(raw)
    assert "99.0 % at 0.001 M, 95.0 % at 0.002 M" in text and "4.0 cp per doubling" in text


def test_sweep_extends_while_its_best_rate_is_its_highest():
    import activation_study_v2 as S

    losses = {1.0: 3.0, 2.0: 2.0, 4.0: 1.0}
    assert S.sweep_choice([2.0, 1.0, 4.0], 0.0, losses.get) == ([1.0, 2.0, 4.0], 4.0)  # no extension planned
    assert S.sweep_choice([1.0, 2.0, 4.0], 16.0, losses.get) == ([1.0, 2.0, 4.0, 8.0], None)  # 8 to run
    losses[8.0] = 0.5
    assert S.sweep_choice([1.0, 2.0, 4.0], 16.0, losses.get) == ([1.0, 2.0, 4.0, 8.0, 16.0], None)
    losses[16.0] = 0.7  # 8 is bracketed now
    assert S.sweep_choice([1.0, 2.0, 4.0], 16.0, losses.get) == ([1.0, 2.0, 4.0, 8.0, 16.0], 8.0)
    assert S.sweep_choice([1.0, 2.0, 4.0], 6.0, losses.get) == ([1.0, 2.0, 4.0], 4.0)  # 8 is past the cap
    assert S.sweep_choice([1.0, 2.0, 4.0], 16.0, {1.0: 1.0, 2.0: 2.0}.get) == ([1.0, 2.0, 4.0], None)


def test_extended_sweep_moves_the_analysis_to_the_new_rate(tmp_path):
    """Every sweep's best (2e-3) was its highest; extended to 4e-3: pairwise's 2e-3 holds, bilinear's
    4e-3 wins (its 2e-3 main runs leave the analysis; until seeds 2-5 are re-run at 4e-3 it has one
    run, no comparison), glu and crelu wait for their 4e-3 runs."""
    raw = _toy_results()
    raw["config"]["lr_extend_to"] = 4e-3
    raw["config"]["amendments"] = [{"utc": "2026-12-02T05:00:00Z", "changed": {"lr_extend_to": [0.0, 4e-3]},
                                    "reason": "the best rate was the highest"}]
    ext = dict(next(r for r in raw["runs"] if r["run"] == "short-bilinear-s1-lr0.002"), lr=4e-3,
               run="short-bilinear-s1-lr0.004")
    ext["quantised_val_loss"] -= 1e-4
    ref = dict(next(r for r in raw["runs"] if r["run"] == "short-pairwise-s1-lr0.002"), lr=4e-3,
               run="short-pairwise-s1-lr0.004")
    ref["quantised_val_loss"] += 1e-4  # pairwise's 2e-3 is bracketed: it stays
    raw["runs"] += [ext, ref]
    plans = R.sweeps(raw)
    assert plans["bilinear"] == ([1e-3, 2e-3, 4e-3], 4e-3) and plans["pairwise"] == ([1e-3, 2e-3, 4e-3], 2e-3)
    assert plans["glu"] == ([1e-3, 2e-3, 4e-3], None)  # its 4e-3 run is missing: no rate chosen yet
    main = R.main_runs(raw)
    assert [r["run"] for r in main if r["variant"] == "bilinear"] == ["short-bilinear-s1-lr0.004"]
    assert not [r for r in main if r["variant"] == "glu"]
    assert {r["run"] for r in R.superseded_runs(raw)} == {f"short-{v}-s{s}-lr0.002" for v in ("bilinear", "glu", "crelu")
                                                         for s in (2, 3, 4, 5)}
    text, pieces = R.render(raw)
    assert "| bilinear | 12.000 | 11.000 | 10.000 | 0.004 (edge of the sweep) |" in text
    assert "| glu | 12.000 | 11.000 | to run | - |" in text  # planned, not finished
    assert "| pairwise | 12.000 | 11.000 | 12.000 | 0.002 |" in text
    assert "`lr_extend_to` 0 -> 0.004. Reason: the best rate was the highest." in text
    assert pieces["comparisons"] == []  # only pairwise has its runs at its rate


def test_amend_records_the_change_and_refuses_what_would_relabel_runs(tmp_path):
    import activation_study_v2 as S

    out = tmp_path / "study"
    with pytest.raises(SystemExit, match="no study there"):
        S.amend(out, "why", long_seeds=(1,))
    S.load_config(out, S.Config())
    with pytest.raises(SystemExit, match="reason"):
        S.amend(out, " ", long_seeds=(1,))
    with pytest.raises(SystemExit, match="unknown or protected"):
        S.amend(out, "why", amendments=())
    cfg = S.amend(out, "time", long_seeds=(1, 2), budgets=(("short", 2_000_000), ("long", 5_000_000)), log=lambda *a: None)
    assert cfg.seeds_of("long") == (1, 2) and cfg.seeds_of("short") == (1, 2, 3, 4, 5) and cfg.budget("long") == 5_000_000
    assert len(cfg.amendments) == 1 and cfg.amendments[0]["reason"] == "time"
    assert cfg.amendments[0]["changed"]["long_seeds"] == [[], [1, 2]]
    assert S.load_config(out) == cfg  # stored, and a resumed study keeps it
    (out / "runs").mkdir()
    (out / "runs" / "long-pairwise-s1-lr0.004.json").write_text("{}")
    before = (out / "config.json").read_text()
    with pytest.raises(SystemExit, match="long runs have finished"):
        S.amend(out, "more", budgets=(("short", 2_000_000), ("long", 10_000_000)))
    assert (out / "config.json").read_text() == before  # a refused change changes nothing
    planned = S.planned_runs(out, cfg, ("pairwise",))
    assert [r.name for r in planned] == ["short-pairwise-s1-lr0.002", "short-pairwise-s1-lr0.004", "short-pairwise-s1-lr0.008"]
    # a bigger budget goes in under a new name, on every seed, after the long runs; the long ones stay as they were
    S.main(["amend", "--out", str(out), "--add-budget", "long10m=10000000", "--reason", "the issue's size"])
    cfg = S.load_config(out)
    assert cfg.budget("long10m") == 10_000_000 and cfg.budget("long") == 5_000_000
    assert cfg.seeds_of("long10m") == (1, 2, 3, 4, 5) and cfg.width("long10m") == cfg.long_ft_width
    for loss, lr in enumerate(cfg.lrs):
        (out / "runs" / f"short-pairwise-s1-lr{lr:g}.json").write_text(json.dumps({"quantised_val_loss": loss}))
    names = [r.name for r in S.planned_runs(out, cfg, ("pairwise",))]
    assert names[-5:] == [f"long10m-pairwise-s{s}-lr0.002" for s in range(1, 6)]
    assert names[-7:-5] == ["long-pairwise-s1-lr0.002", "long-pairwise-s2-lr0.002"]
    with pytest.raises(SystemExit):
        S.main(["amend", "--out", str(out), "--add-budget", "long=1", "--reason", "clash"])


def test_report_from_results_alone(tmp_path):
    pytest.importorskip("matplotlib")
    results = tmp_path / "results.json"
    raw = _toy_results()
    raw["speed"] = {"positions": 100, "repeats": 3, "threads": 1, "clock": "process CPU",
                    "us_per_position": {"pairwise": [1.0, 1.1, 0.9], "bilinear": [2.1, 1.9, 2.0]},
                    "median_ratio_to_pairwise": {"pairwise": 1.0, "bilinear": 0.5}}
    raw["anchors"] = {"move_agreement": {"stockfish-15.1": 0.2445}}
    results.write_text(json.dumps(raw))
    path = R.write_report(results, tmp_path)
    text = path.read_text()
    assert "| bilinear | 2.00 (1.90-2.10) | 0.50x |" in text
    assert "at 1 ply: stockfish-15.1 24.4 %." in text
    assert "| bilinear | short | 5 | 0.002 |" in text
    assert text.count("| 0.50 (0.00) |") == 4  # 1000 positions in 2 s of training for every variant
    assert "- bilinear vs pairwise, short budget, quantised test MAE: -2.50 cp [-2.70, -2.30]" in text
    assert "{" not in text.replace("{}", "")  # every placeholder filled
    for png in ("differences.png", "curves.png", "lr-sweep.png"):
        assert (tmp_path / "activation-study-v2" / png).stat().st_size > 1000


def test_runner_on_a_toy_budget(tmp_path, data_dir, monkeypatch):
    """Data, sweep, main runs, records with the issue's fields, a resumed call that trains nothing."""
    pytest.importorskip("torch")
    import activation_study_v2 as S

    monkeypatch.setenv("NNUE_INFER_SHARED", str(data_dir.parent))
    cfg = S.Config(ft_width=16, long_ft_width=16, budgets=(("short", 3000), ("long", 5000)), val_positions=400,
                   test_positions=400, chunk_positions=2000, batch_size=500, lrs=(1e-3, 4e-3), seeds=(1, 2),
                   eval_every=2, agreement_positions=20)
    out, results = tmp_path / "study", tmp_path / "results.json"
    S.run_study(out, cfg, results, ("pairwise", "glu"), log=lambda *a: None)
    raw = json.loads(results.read_text())
    runs = raw["runs"]
    assert len(runs) == 2 * 2 + 2 * 1 + 2 * 2  # sweep (2 variants x 2 rates), short seed 2, long seeds 1-2
    for r in runs:
        assert set(S.RECORD_FIELDS) <= set(r)
        assert r["positions_seen"] == {"short": 3000, "long": 5000}[r["budget"]]
        assert 0 < r["unique_positions"] <= r["positions_seen"] and 0 <= r["move_agreement"] <= 1
        assert r["quantised_test_mae_cp"] > 0 and r["train_seconds"] > 0
    for v in ("pairwise", "glu"):
        assert {r["lr"] for r in runs if r["variant"] == v and r["role"] == "main"} == {S.best_lr(out, cfg, v)}
    # training and test data: no shared position
    train_keys = np.concatenate([S.split_arrays(out, c, cfg)["keys"] for c in range(3)])
    for split in ("val", "test"):
        assert not np.isin(S.split_arrays(out, split, cfg)["keys"], train_keys).any()
    before = results.stat().st_mtime_ns
    S.run_study(out, cfg, results, ("pairwise", "glu"), log=lambda *a: None)
    assert results.stat().st_mtime_ns == before  # everything was done: nothing trained or rewritten
    assert R.render(raw)[0].count("| pairwise |") >= 2
    assert raw["data_generators"] == {"walk-1": 2 + 3}  # validation, test and the 3 chunks, all the compiled walk's
    assert "5 by the compiled walk" in R.render(raw)[0]
    assert set(raw["anchors"]["move_agreement"]) == {"stockfish-15.1", "bundled default network"}
    # move agreement against python-chess's move generation and one evaluation per child
    from nnue_infer.evaluator import Evaluator
    from nnue_infer.formats import load

    qnet = load(out / "runs" / f"{runs[0]['run']}.safetensors")
    pairs = S.agreement_set(30)
    ev, hits = Evaluator(qnet), 0
    for fen, uci in pairs:
        board = chess.Board(fen)
        legal = list(board.legal_moves)
        children = []
        for move in legal:
            board.push(move)
            children.append(board.copy(stack=False))
            board.pop()
        values = ev.evaluate_batch(children).tolist()
        best = min(range(len(legal)), key=lambda i: (values[i], i))  # first lowest, in python-chess order
        hits += legal[best].uci() == uci
    assert S.move_agreement(qnet, pairs) == hits / len(pairs)
    speed = S.measure_speed(out, cfg, ("pairwise", "glu"), positions=50, repeats=2, log=lambda *a: None)
    assert [len(t) for t in speed["us_per_position"].values()] == [2, 2]
    assert speed["median_ratio_to_pairwise"]["pairwise"] == 1.0 and speed["median_ratio_to_pairwise"]["glu"] > 0
    assert json.loads((out / "speed.json").read_text()) == json.loads(json.dumps(speed))


@pytest.mark.parametrize("content, age, taken", [
    ("", 3600, True),  # its creator died between creating it and writing its id: no one would ever free it
    ("", 0, False),  # its creator is writing its id
    ("-1", 3600, True),  # (os.kill(-1, 0) would find every process alive)
    ("not a pid", 3600, True),
    ("PARENT", 3600, False),  # a live process holds it
    ("DEAD", 0, True),  # its process is gone
])
def test_lock_is_taken_over_only_from_no_live_holder(tmp_path, content, age, taken):
    """A data lock (``_try_lock``, taken per file by study v3's ``ensure_data``) left empty or unreadable by a
    process that died is taken over instead of waited for forever; a live holder's lock is left alone."""
    import activation_study_v2 as V2

    if content == "DEAD":
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait()
        content = str(child.pid)
    content = str(os.getppid()) if content == "PARENT" else content
    lock = tmp_path / "data.lock"
    lock.write_text(content)
    os.utime(lock, (time.time() - age, time.time() - age))
    assert V2._try_lock(lock) is taken
    assert lock.read_text() == (str(os.getpid()) if taken else content)

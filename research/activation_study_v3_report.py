"""Report of the activation study v3: ``research/activation-study-v3.md`` and its plots, generated
from ``research/activation-study-v3/results.json`` alone (every figure of the text comes from it)::

    python research/activation_study_v3_report.py [--results FILE] [--dest DIR]

The analysis is the one fixed in ``research/activation-study-v3-plan.md`` before the runs:

* **primary**: quantised test MAE (cp) of each variant against ``pairwise`` in each cell (FT width x
  training positions), paired by seed (two-sided paired t-test, the seeds both have, n >= 2), Holm's
  correction over these tests only; verdicts ``better`` / ``worse`` / ``no difference shown``;
* effect sizes: the mean paired difference with its 95 % t interval in cp, and in doublings of data
  (divided by ``pairwise``'s MAE gain per doubling at width 1024 between its two budgets);
* **secondary** (no test, no verdict): quantised and float validation loss, the FT output's non-zero
  4-byte chunk share, inference and training speed, as means and paired differences with 95 % intervals;
* **Elo**: results.json's ``matches`` (pentanomial Elo +- 95 %, the SPRT where one was run).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import activation_study_v2_report as R2  # noqa: E402  (paired test, Holm, t quantiles)
import activation_study_v2 as V2  # noqa: E402
import activation_study_v3 as S  # noqa: E402

HERE = Path(__file__).resolve().parent
PRIMARY = ("quantised_test_mae_cp", "quantised test MAE", "cp")
#: (key, label, unit, scale) of the secondary metrics.
SECONDARY = (("quantised_val_loss", "quantised validation loss", "x 1e-4", 1e4),
             ("float_val_loss", "float validation loss", "x 1e-4", 1e4),
             ("ft_nonzero_chunk_share", "FT non-zero 4-byte chunks", "%", 100.0),
             ("inference_us_per_position", "inference", "us/position", 1.0),
             ("train_kpps", "training speed", "k positions/s", 1.0))


def config_of(raw: dict) -> S.Config:
    return S.Config(**{k: V2.tupled(v) for k, v in raw["config"].items()})


def cell_name(cell) -> str:
    return f"{cell[0]} x {cell[1] / 1e6:g} M"


def sweeps(raw: dict) -> dict:
    """(cell, variant) -> (rates so far, chosen rate or None), by the runner's rule on the records."""
    cfg = config_of(raw)
    loss = {r["run"]: r["quantised_val_loss"] for r in raw["runs"]}
    return {(tuple(c), v): S.sweep_of(loss.get, cfg, v, tuple(c)) for c in cfg.cells for v in cfg.variants_of(c)}


def main_runs(raw: dict) -> list[dict]:
    """Runs of the analysis: role ``main`` at the chosen rate of their variant and cell."""
    chosen = {k: v[1] for k, v in sweeps(raw).items()}
    out = []
    for r in raw["runs"]:
        cell = (r.get("cell_ft_width", r["ft_width"]), r["budget"])
        lr = chosen.get((cell, r["variant"]))
        if r["role"] == "main" and lr is not None and f"{lr:g}" == f"{r['lr']:g}":
            out.append({**r, "cell": cell, "train_kpps": r["positions_seen"] / r["train_seconds"] / 1e3})
    return out


def cp_per_doubling(runs: list[dict], cfg: S.Config) -> dict | None:
    """``pairwise``'s MAE gain per doubling of data at the width with two budgets (the plan: 1024)."""
    for w in sorted({c[0] for c in cfg.cells}, reverse=True):
        budgets = sorted(n for c_w, n in cfg.cells if c_w == w)
        if len(budgets) < 2:
            continue
        lo, hi = budgets[0], budgets[-1]
        mae = [[r["quantised_test_mae_cp"] for r in runs if r["variant"] == S.REFERENCE and r["cell"] == (w, n)]
               for n in (lo, hi)]
        if all(mae):
            per = (np.mean(mae[0]) - np.mean(mae[1])) / math.log2(hi / lo)
            return {"ft_width": w, "budgets": (lo, hi), "mae": (float(np.mean(mae[0])), float(np.mean(mae[1]))),
                    "cp": float(per)}
    return None


def primary(runs: list[dict], cfg: S.Config) -> list[dict]:
    """The primary tests (every non-reference variant of every cell with >= 2 paired seeds), Holm-adjusted over
    the plan's whole family (the tests still missing counted at p = 1)."""
    by = {(r["variant"], r["cell"], r["seed"]): r for r in runs}
    per = cp_per_doubling(runs, cfg)
    rows = []
    for cell in cfg.cells:
        cell = tuple(cell)
        for v in cfg.variants_of(cell):
            if v == S.REFERENCE:
                continue
            seeds = sorted(s for (vv, c, s) in by if vv == v and c == cell and (S.REFERENCE, cell, s) in by)
            if len(seeds) < 2:
                continue
            diffs = [by[(v, cell, s)][PRIMARY[0]] - by[(S.REFERENCE, cell, s)][PRIMARY[0]] for s in seeds]
            t = R2.paired_test(diffs)
            rows.append({"cell": cell, "variant": v, "seeds": seeds, **t,
                         "doublings": None if not per or not per["cp"] else t["mean"] / per["cp"]})
    planned = sum(len(cfg.variants_of(tuple(c))) - 1 for c in cfg.cells)  # the plan's whole family
    # tests not run yet enter the step-down at p = 1: an interim verdict is never looser than the final one's rule
    for row, p in zip(rows, R2.holm([r["p"] for r in rows] + [1.0] * (planned - len(rows)))):
        row["p_holm"] = p
        row["verdict"] = ("better" if row["mean"] < 0 else "worse") if p < R2.ALPHA else "no difference shown"
    return rows


def secondary(runs: list[dict], cfg: S.Config) -> list[dict]:
    """Paired differences to ``pairwise`` of every secondary metric (mean and 95 % interval; no test)."""
    by = {(r["variant"], r["cell"], r["seed"]): r for r in runs}
    rows = []
    for key, label, unit, scale in SECONDARY:
        for cell in cfg.cells:
            cell = tuple(cell)
            for v in cfg.variants_of(cell):
                seeds = sorted(s for (vv, c, s) in by if vv == v and c == cell and (S.REFERENCE, cell, s) in by
                               and key in by[(v, c, s)])
                if v == S.REFERENCE or len(seeds) < 2:
                    continue
                t = R2.paired_test([scale * (by[(v, cell, s)][key] - by[(S.REFERENCE, cell, s)][key]) for s in seeds])
                rows.append({"metric": key, "label": label, "unit": unit, "cell": cell, "variant": v,
                             "n": t["n"], "mean": t["mean"], "ci": t["ci"]})
    return rows


def _ms(values) -> str:
    v = np.asarray(values, np.float64)
    return f"{v.mean():.2f} ({v.std(ddof=1):.2f})" if len(v) > 1 else (f"{v.mean():.2f}" if len(v) else "-")


def tables(raw: dict) -> dict:
    """The markdown pieces of the report."""
    cfg = config_of(raw)
    runs = main_runs(raw)
    prim, sec = primary(runs, cfg), secondary(runs, cfg)
    out = {"primary_rows": prim, "runs": runs}
    head = ["| cell | variant | seeds | lr | quantised test MAE (cp) | "
            + " | ".join(f"{label} ({unit})" for _, label, unit, _ in SECONDARY) + " |",
            "|---|---|---|---|---|" + "---|" * len(SECONDARY)]
    for cell in cfg.cells:
        for v in cfg.variants_of(tuple(cell)):
            rs = [r for r in runs if r["cell"] == tuple(cell) and r["variant"] == v]
            if rs:
                head.append(f"| {cell_name(cell)} | {v} | {len(rs)} | {rs[0]['lr']:g} | {_ms([r[PRIMARY[0]] for r in rs])} | "
                            + " | ".join(_ms([scale * r[k] for r in rs if k in r]) for k, _, _, scale in SECONDARY) + " |")
    out["summary_table"] = "\n".join(head)
    lines = ["| cell | variant - pairwise | n | MAE difference (cp) [95 % CI] | in doublings of data | t | p | Holm p | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in prim:
        dbl = "-" if c["doublings"] is None else f"{c['doublings']:+.2f}"
        lines.append(f"| {cell_name(c['cell'])} | {c['variant']} | {c['n']} | {c['mean']:+.2f} [{c['ci'][0]:+.2f}, "
                     f"{c['ci'][1]:+.2f}] | {dbl} | {c['t']:.2f} | {c['p']:.3g} | {c['p_holm']:.3g} | {c['verdict']} |")
    out["primary_table"] = "\n".join(lines) if prim else "No cell has two paired seeds yet."
    lines = ["| metric | cell | variant - pairwise | n | mean difference [95 % CI] |", "|---|---|---|---|---|"]
    lines += [f"| {c['label']} ({c['unit']}) | {cell_name(c['cell'])} | {c['variant']} | {c['n']} | {c['mean']:+.3f} "
              f"[{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] |" for c in sec]
    out["secondary_table"] = "\n".join(lines) if sec else "No cell has two paired seeds yet."
    per = cp_per_doubling(runs, cfg)
    out["doubling"] = (f"`pairwise` at width {per['ft_width']}: {per['mae'][0]:.2f} cp at {per['budgets'][0] / 1e6:g} M, "
                       f"{per['mae'][1]:.2f} cp at {per['budgets'][1] / 1e6:g} M positions: {per['cp']:.2f} cp per "
                       "doubling of data." if per else "Not measured yet (needs `pairwise` in both width-1024 cells).")
    plans = sweeps(raw)
    loss = {r["run"]: r["quantised_val_loss"] for r in raw["runs"]}
    lines = ["| cell | variant | rates tried: quantised validation loss (x 1e-4) | chosen |", "|---|---|---|---|"]
    for (cell, v), (rates, chosen) in plans.items():
        cells = ", ".join(f"{lr:g}: " + (f"{1e4 * loss[n]:.3f}" if (n := S.Run(v, cfg.sweep_seed, cell[1], lr, ft_width=cell[0]).name) in loss
                                          else "to run") for lr in rates)
        edge = chosen is not None and chosen in (min(rates), max(rates))
        lines.append(f"| {cell_name(cell)} | {v} | {cells} | {'-' if chosen is None else f'{chosen:g}'}"
                     + (" (at a bound: not bracketed)" if edge else "") + " |")
    out["sweep_table"] = "\n".join(lines)
    matches = raw.get("matches") or []
    largest = max((tuple(c) for c in cfg.cells), key=lambda c: (c[1], c[0]))
    lines = ["| cell | a | b | games | pentanomial (0, 0.5, 1, 1.5, 2) | Elo of a [95 %] | SPRT |",
             "|---|---|---|---|---|---|---|"]
    for m in matches:
        sprt = m.get("sprt")
        lines.append(f"| {cell_name(tuple(m.get('cell', largest)))} | {m['a']} | {m['b']} | {m['games']} | {', '.join(map(str, m['pentanomial']))} | "
                     f"{m['elo']:+.1f} +- {m['elo_error95']:.1f} | "
                     + (f"{sprt.get('result', '-')} (LLR {sprt.get('llr', float('nan')):.2f})" if isinstance(sprt, dict) else "-")
                     + " |")
    out["elo_table"] = "\n".join(lines) if matches else "No match played yet (`python research/activation_study_v3.py elo --out DIR`)."
    bad = [r["run"] for r in raw["runs"] if r["unique_positions"] != r["positions_seen"]]
    out["distinct"] = ("" if not raw["runs"] else
                       "Every run trained on distinct positions (`unique_positions == positions_seen`)." if not bad
                       else "Runs with repeated positions (a data fault): " + ", ".join(bad) + ".")
    n_main = len(cfg.seeds) * sum(len(cfg.variants_of(tuple(c))) for c in cfg.cells)
    cpu = sum(r["train_seconds"] for r in raw["runs"])
    files = raw.get("data") or {}
    chunks = [name for name in files if name.startswith("train-")]
    data_cpu = sum(m.get("cpu_seconds", 0.0) for m in files.values())
    made = (f" Data: validation, test and {len(chunks)} training chunks of {cfg.chunk_positions:,} positions "
            f"({len(chunks) * cfg.chunk_positions / 1e6:g} M of the {cfg.max_budget / 1e6:g} M planned) in "
            f"{data_cpu / 60:.1f} CPU minutes ({(len(chunks) * cfg.chunk_positions + cfg.val_positions + cfg.test_positions) / data_cpu:,.0f} "
            "positions per CPU second)." if files and data_cpu else "")
    out["status"] = (f"{len(runs)} of {n_main} main runs and {sum(r['role'] == 'sweep' for r in raw['runs'])} sweep "
                     f"runs finished; {cpu / 3600:.2f} core-hours of training (process CPU, one thread).{made}")
    out["verdict"] = summary_sentences(prim, matches, cfg)
    out["amendments"] = "\n".join(f"- {a['utc']}: {json.dumps(a['changed'])}: {a['reason']}"
                                   for a in raw["config"].get("amendments") or []) or "None."
    return out


def summary_sentences(prim: list[dict], matches: list[dict], cfg: S.Config) -> str:
    """A few sentences: what each gate gives against pairwise in cp (largest cell) and in Elo, and
    what is not known."""
    if not prim:
        return "Nothing is known yet: no cell has paired runs."
    largest = max((tuple(c) for c in cfg.cells), key=lambda c: (c[1], c[0]))
    parts = []
    for c in [c for c in prim if c["cell"] == largest] or prim:
        parts.append(f"{c['variant']} against pairwise at {cell_name(c['cell'])}: {c['mean']:+.2f} cp test MAE "
                     f"[{c['ci'][0]:+.2f}, {c['ci'][1]:+.2f}], {c['verdict']} (Holm p {c['p_holm']:.3g})")
    for m in matches:
        parts.append(f"{m['a']} against {m['b']} at {cell_name(tuple(m.get('cell', largest)))}: "
                     f"{m['elo']:+.1f} +- {m['elo_error95']:.1f} Elo in {m['games']} games")
    unknown = [cell_name(c) for c in cfg.cells if not any(p["cell"] == tuple(c) for p in prim)]
    text = "; ".join(parts) + "."
    if unknown:
        text += " Not known yet: the cells " + ", ".join(unknown) + "."
    if not matches:
        text += " Playing strength is not known yet (no match)."
    return text


def plots(raw: dict, pieces: dict, dest: Path) -> None:
    from nnue_infer.training.plotting import pyplot

    plt = pyplot()
    cfg = config_of(raw)
    cells = [tuple(c) for c in cfg.cells]
    fig, axes = plt.subplots(1, len(cells), figsize=(4.5 * len(cells), 3.6), dpi=110, squeeze=False)
    for ax, cell in zip(axes[0], cells):
        cs = [c for c in pieces["primary_rows"] if c["cell"] == cell]
        for i, c in enumerate(cs):
            color = {"better": "tab:green", "worse": "tab:red"}.get(c["verdict"], "tab:gray")
            ax.errorbar(c["mean"], i, xerr=[[c["mean"] - c["ci"][0]], [c["ci"][1] - c["mean"]]], fmt="o", color=color)
        if not cs:
            ax.text(0.5, 0.5, "no paired runs yet", ha="center", transform=ax.transAxes)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(range(len(cs)), [f"{c['variant']} (n={c['n']})" for c in cs])
        ax.set_xlabel("test MAE - pairwise's (cp), 95 % CI")
        ax.set_title(cell_name(cell))
    fig.tight_layout()
    fig.savefig(dest / "differences.png")
    plt.close(fig)
    fig, axes = plt.subplots(1, len(cells), figsize=(4.5 * len(cells), 3.6), dpi=110, squeeze=False)
    for ax, cell in zip(axes[0], cells):
        sweep = [r for r in raw["runs"] if r["role"] == "sweep" and (r.get("cell_ft_width", r["ft_width"]), r["budget"]) == cell]
        for v in sorted({r["variant"] for r in sweep}):
            rs = sorted((r for r in sweep if r["variant"] == v), key=lambda r: r["lr"])
            ax.plot([r["lr"] for r in rs], [r["quantised_val_loss"] for r in rs], marker="o", label=v)
        ax.set_xscale("log")
        ax.set_xlabel("learning rate")
        ax.set_title(f"sweep, {cell_name(cell)}")
        if sweep:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dest / "lr-sweep.png")
    plt.close(fig)


TEMPLATE = """# Feature-transformer activations, version 3: gates at width, on distinct positions

Generated by `python research/activation_study_v3_report.py` from
[`activation-study-v3/results.json`](activation-study-v3/results.json); every number below comes from
that file.  The plan and the analysis were fixed before the runs in
[activation-study-v3-plan.md](activation-study-v3-plan.md); version 2 and its corrections:
[activation-study-v2.md](activation-study-v2.md).

## Answer so far

{verdict}

## Status

{status} {distinct}

## Primary metric: quantised test MAE against Stockfish 15.1 (Holm over the plan's family; tests not run yet at p = 1)

{primary_table}

Effect sizes in doublings of data: {doubling}

![paired differences](activation-study-v3/differences.png)

## Per cell and variant (mean, standard deviation over seeds)

{summary_table}

## Secondary metrics (no test, no verdict)

{secondary_table}

## Learning-rate sweeps (seed {sweep_seed}, not an analysis seed)

{sweep_table}

![learning-rate sweeps](activation-study-v3/lr-sweep.png)

## Playing strength

{elo_table}

## Amendments to the plan

{amendments}
"""


def render(raw: dict) -> tuple[str, dict]:
    pieces = tables(raw)
    text = TEMPLATE.format(**{k: v for k, v in pieces.items() if isinstance(v, str)},
                           sweep_seed=raw["config"]["sweep_seed"])
    return text, pieces


def write_report(results: Path, dest: Path) -> Path:
    """``dest/activation-study-v3.md`` and its plots from ``results``; returns the markdown's path."""
    return R2.write_report(results, dest, "activation-study-v3", render, plots)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=HERE / "activation-study-v3" / "results.json")
    ap.add_argument("--dest", type=Path, default=HERE)
    a = ap.parse_args(argv)
    print(write_report(a.results, a.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Report of the activation study: the table, raw per-run JSON and plots from a study directory.

``python research/activation_study.py report --out study-run`` reads ``study-run/runs/*/train.json``,
``measure.json`` and ``speed-*.json`` (whatever has finished) and writes

* ``research/activation-study/results.json``: every run's raw figures (curves included) and the speed files;
* ``research/activation-study/loss-curves.png``: validation loss against steps, mean and min-max band over seeds;
* ``research/activation-study/sparsity.png``: per-position share of zero outputs and of all-zero 4-byte blocks;
* the table between the ``<!-- table -->`` and ``<!-- /table -->`` markers of ``research/activation-study.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TABLE_START, TABLE_END = "<!-- table -->", "<!-- /table -->"


def collect(out: Path) -> dict:
    """Raw results: ``{"config", "runs": {name: {train..., "measure": {...}}}, "speed": [...]}``."""
    runs = {}
    for d in sorted((out / "runs").glob("*")):
        if (d / "train.json").exists():
            r = json.loads((d / "train.json").read_text())
            if (d / "measure.json").exists():
                r["measure"] = json.loads((d / "measure.json").read_text())
            runs[d.name] = r
    speed = [json.loads(p.read_text()) for p in sorted(out.glob("speed-*.json"))]
    config = json.loads((out / "config.json").read_text()) if (out / "config.json").exists() else {}
    splits = json.loads((out / "data" / "splits.json").read_text()) if (out / "data" / "splits.json").exists() else {}
    for s in splits.get("splits", {}).values():
        s.pop("game_ids", None)
    return {"config": config, "data": splits, "runs": runs, "speed": speed}


def _ms(values: list[float], fmt: str) -> str:
    """'mean (std)' over seeds, with the number of seeds when it is not the planned one."""
    if not values:
        return "-"
    v = np.asarray(values, np.float64)
    std = v.std(ddof=1) if len(v) > 1 else float("nan")
    s = f"{v.mean():{fmt}} ({std:{fmt}})" if len(v) > 1 else f"{v.mean():{fmt}}"
    return s


def summarise(raw: dict, variants) -> list[dict]:
    """One row per variant: lists over seeds of every figure of the table."""
    seeds = raw["config"].get("seeds", [])
    rows = []
    for v in variants:
        row = {"variant": v}
        for budget in ("short", "long"):
            rs = [r for r in raw["runs"].values() if r["variant"] == v and r["budget"] == budget]
            row[f"val_{budget}"] = [r["final_val_loss"] for r in rs]
            m = [r["measure"] for r in rs if "measure" in r]
            row[f"n_{budget}"] = len(rs)
            if budget == "long" or not any(r["budget"] == "long" and "measure" in r for r in raw["runs"].values()):
                row["test_mae"] = [x["test"]["mae_cp"] for x in m]
                row["dev_mae"] = [x["dev"]["all"]["mae_cp"] for x in m]
                row["dev_held_mae"] = [x["dev"]["held_out"]["mae_cp"] for x in m]
                row["fq_mae"] = [x["float_vs_quantised"]["mae_cp"] for x in m]
                row["fq_max"] = [x["float_vs_quantised"]["max_abs_cp"] for x in m]
                row["within_bound"] = [x["within_error_bound"] for x in m]
                row["zeros"] = [x["sparsity"]["zero_fraction"] for x in m]
                row["blocks"] = [x["sparsity"]["zero_block_fraction"] for x in m]
                row["ft_params"] = rs[0]["ft_parameters"] if rs else None
                row["measured_budget"] = budget
        # every speed measurement (seeds and budgets): the work per position does not depend on the weights
        speeds = [s for s in raw["speed"] if v in s["ratio_to_pairwise"]]
        row["speed"] = [s["ratio_to_pairwise"][v] for s in speeds]
        row["kernel_speed"] = [s["activation_ratio_to_pairwise"][v] for s in speeds if "activation_ratio_to_pairwise" in s]
        row["planned_seeds"] = len(seeds)
        rows.append(row)
    return rows


def table_markdown(rows: list[dict], raw: dict) -> str:
    cfg = raw["config"]
    short, long = cfg.get("short_steps"), cfg.get("short_steps", 0) * cfg.get("long_factor", 0)
    mb = next((r["measured_budget"] for r in rows if "measured_budget" in r), "long")
    head = (f"| variant | val loss x1e4, {short} steps | val loss x1e4, {long} steps | test MAE (cp) [{mb}] | "
            f"dev MAE (cp) [{mb}] | dev held-out MAE (cp) [{mb}] | float-vs-quantised mean / max (cp) [{mb}] | "
            f"within ErrorBound [{mb}] | zero outputs [{mb}] | all-zero 4-byte blocks [{mb}] | batch speed vs pairwise | "
            "activation kernel speed vs pairwise | "
            "FT params | seeds (short/long) |")
    lines = [head, "| --- |" + " ---: |" * (head.count("|") - 2)]
    for r in rows:
        s = lambda key, fmt, k=1.0: _ms([x * k for x in r.get(key, [])], fmt)  # noqa: E731
        lines.append(
            f"| {r['variant']} | {s('val_short', '.3f', 1e4)} | {s('val_long', '.3f', 1e4)} | {s('test_mae', '.2f')} | "
            f"{s('dev_mae', '.2f')} | {s('dev_held_mae', '.1f')} | {s('fq_mae', '.2f')} / "
            f"{_ms(r.get('fq_max', []), '.1f').split(' ')[0] if r.get('fq_max') else '-'} | "
            f"{s('within_bound', '.3f')} | {s('zeros', '.3f')} | {s('blocks', '.3f')} | {s('speed', '.2f')} | "
            f"{s('kernel_speed', '.2f')} | "
            f"{r.get('ft_params') or '-'} | {r['n_short']}/{r['n_long']} |")
    return "\n".join(lines)


#: Two-sided 5 % critical values of Student's t by degrees of freedom (standard tables; 1.96 beyond).
T_CRITICAL_5 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
                10: 2.228}


def differences_markdown(raw: dict, variants) -> str:
    """Validation loss of each variant minus ``pairwise``, paired by seed (same batch order), per budget:
    mean (std) over seeds x 1e4 and t = mean / (std / sqrt(n)), marked ``*`` when |t| exceeds the 5 %
    two-sided critical value of Student's t with n - 1 degrees of freedom (:data:`T_CRITICAL_5`);
    min..max of the paired differences shows the spread."""
    lines = ["| variant | short: loss - pairwise x1e4 | t | min..max | long: loss - pairwise x1e4 | t | min..max |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    by = {(r["variant"], r["budget"], r["seed"]): r["final_val_loss"] for r in raw["runs"].values()}
    for v in variants:
        if v == "pairwise":
            continue
        cells = [v]
        for budget in ("short", "long"):
            d = [1e4 * (by[v, budget, s] - by["pairwise", budget, s]) for s in raw["config"].get("seeds", [])
                 if (v, budget, s) in by and ("pairwise", budget, s) in by]
            if len(d) >= 2:
                m, sd = float(np.mean(d)), float(np.std(d, ddof=1))
                t = m / (sd / np.sqrt(len(d))) if sd > 0 else float("inf")
                star = "*" if abs(t) > T_CRITICAL_5.get(len(d) - 1, 1.96) else ""
                cells += [f"{m:+.3f} ({sd:.3f}), n={len(d)}", f"{t:+.1f}{star}", f"{min(d):+.3f}..{max(d):+.3f}"]
            elif d:
                cells += [f"{d[0]:+.3f}, n=1", "-", "-"]
            else:
                cells += ["-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_curves(raw: dict, variants, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), dpi=110)
    colours = plt.get_cmap("tab10")
    for ax, budget in zip(axes, ("short", "long")):
        for i, v in enumerate(variants):
            rs = [r for r in raw["runs"].values() if r["variant"] == v and r["budget"] == budget]
            if not rs:
                continue
            n = min(len(r["curve"]) for r in rs)
            steps = [p["step"] for p in rs[0]["curve"][:n]]
            vals = np.array([[p["val_loss"] for p in r["curve"][:n]] for r in rs]) * 1e4
            ax.plot(steps, vals.mean(0), color=colours(i), label=f"{v} ({len(rs)} seeds)",
                    linestyle="--" if v in ("crelu", "screlu") else "-")
            ax.fill_between(steps, vals.min(0), vals.max(0), color=colours(i), alpha=0.18)
        ax.set_title(f"{budget} budget: validation loss (mean, band = min..max over seeds)", fontsize=10)
        ax.set_xlabel("optimiser step")
        ax.set_ylabel("MSE of sigmoid(cp / 600) x 1e4")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_sparsity(raw: dict, variants, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), dpi=110)
    centres = (np.arange(20) + 0.5) / 20
    colours = plt.get_cmap("tab10")
    for ax, key, title in ((axes[0], "zero_fraction_hist", "zero outputs"),
                           (axes[1], "zero_block_fraction_hist", "all-zero 4-byte blocks")):
        for i, v in enumerate(variants):
            ms = [r["measure"]["sparsity"][key] for r in raw["runs"].values()
                  if r["variant"] == v and r["budget"] == "long" and "measure" in r]
            if not ms:
                ms = [r["measure"]["sparsity"][key] for r in raw["runs"].values() if r["variant"] == v and "measure" in r]
            if not ms:
                continue
            h = np.sum(ms, axis=0).astype(np.float64)
            ax.plot(centres, h / h.sum(), color=colours(i), marker="o", markersize=3, label=v,
                    linestyle="--" if v in ("crelu", "screlu") else "-")
        ax.set_title(f"fc_0 input: {title} per test position (long budget)", fontsize=10)
        if key == "zero_block_fraction_hist":
            ax.set_xlim(0, 0.3)
        ax.set_xlabel(f"share of {title}")
        ax.set_ylabel("share of positions")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(out: Path, dest: Path, variants) -> str:
    """Write results.json, the plots and the table (see the module docstring); returns the table."""
    raw = collect(out)
    figs = dest / "activation-study"
    figs.mkdir(parents=True, exist_ok=True)
    (figs / "results.json").write_text(json.dumps(raw, indent=1))
    plot_curves(raw, variants, figs / "loss-curves.png")
    plot_sparsity(raw, variants, figs / "sparsity.png")
    table = table_markdown(summarise(raw, variants), raw) + "\n\nPaired by seed (same initialisation seed and batch order):\n\n" + \
        differences_markdown(raw, variants)
    md = dest / "activation-study.md"
    if md.exists():
        text = md.read_text()
        if TABLE_START in text and TABLE_END in text:
            head, rest = text.split(TABLE_START, 1)
            _, tail = rest.split(TABLE_END, 1)
            md.write_text(f"{head}{TABLE_START}\n{table}\n{TABLE_END}{tail}")
    else:
        md.write_text(f"# Activation study\n\n{TABLE_START}\n{table}\n{TABLE_END}\n")
    print(table)
    return table

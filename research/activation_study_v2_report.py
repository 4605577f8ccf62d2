"""Report of the activation study v2: ``research/activation-study-v2.md`` and its plots, generated
from ``research/activation-study-v2/results.json`` alone (every figure in the text comes from here).

``python research/activation_study_v2.py report`` writes

* ``research/activation-study-v2.md`` (the whole file: the prose is this module's template);
* ``research/activation-study-v2/differences.png``: paired differences to ``pairwise`` with 95 % intervals;
* ``research/activation-study-v2/curves.png``: float validation loss against positions seen;
* ``research/activation-study-v2/lr-sweep.png``: quantised validation loss against the learning rate.

The analysis was fixed before the runs (issue 25):

* integer metrics first: the quantised network's test MAE against Stockfish 15.1 (centipawns),
  its validation loss and its move agreement; the float model's validation loss last;
* every comparison is a variant against ``pairwise`` at the same budget, paired by seed
  (difference per seed, two-sided paired t-test on the seeds both have, n >= 2);
* Holm's correction over every comparison of every metric and budget made (one family);
* effect sizes as the mean paired difference with its 95 % t interval, in centipawns for the MAE,
  percentage points for the move agreement.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

#: (key, label, unit, scale, better): metrics in the order of the analysis, integer network first.
METRICS = (
    ("quantised_test_mae_cp", "quantised test MAE", "cp", 1.0, "lower"),
    ("quantised_val_loss", "quantised validation loss", "x 1e-4", 1e4, "lower"),
    ("move_agreement", "move agreement", "pp", 100.0, "higher"),
    ("float_val_loss", "float validation loss", "x 1e-4", 1e4, "lower"),
)
REFERENCE = "pairwise"
ALPHA = 0.05


# -- statistics (no SciPy in the environment: Student's t for integer degrees of freedom) ---------

def t_two_sided_p(t: float, df: int) -> float:
    """Two-sided p-value of Student's t with ``df`` (integer >= 1) degrees of freedom.

    Closed forms of ``A(t|df) = P(|T| <= |t|)`` (Abramowitz & Stegun 26.7.3 and 26.7.4, with
    theta = atan(|t| / sqrt(df))); returns ``1 - A``.
    """
    if df < 1 or df != int(df):
        raise ValueError(f"df must be a positive integer, got {df}")
    if math.isinf(t):
        return 0.0
    theta = math.atan(abs(t) / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):  # 1 + (2/3) c^2 + (2*4)/(3*5) c^4 + ... up to c^(df-3)
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        a = 2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0))
    else:
        term, total = 1.0, 1.0
        for k in range(1, df // 2):  # 1 + (1/2) c^2 + (1*3)/(2*4) c^4 + ... up to c^(df-2)
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        a = math.sin(theta) * total
    return max(0.0, min(1.0, 1.0 - a))


def t_quantile(q: float, df: int) -> float:
    """Upper quantile: the t with P(T <= t) = q (0.5 < q < 1), by bisection on :func:`t_two_sided_p`."""
    target = 2 * (1 - q)
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > target:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, df) > target else (lo, mid)
    return (lo + hi) / 2


def paired_test(diffs) -> dict:
    """Mean of paired differences, its 95 % t interval, t and the two-sided p (n >= 2 differences)."""
    d = np.asarray(diffs, np.float64)
    n = len(d)
    if n < 2:
        raise ValueError(f"a paired test needs at least 2 pairs, got {n}")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    t = mean / se if se > 0 else (math.copysign(math.inf, mean) if mean else 0.0)
    half = t_quantile(0.975, n - 1) * se
    return {"n": n, "mean": mean, "sd": sd, "t": t, "p": t_two_sided_p(t, n - 1), "ci": (mean - half, mean + half)}


def holm(pvalues) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order (monotone, capped at 1)."""
    p = np.asarray(pvalues, np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


# -- the study's records ---------------------------------------------------------------------------

def sweeps(raw: dict) -> dict:
    """Per variant with sweep runs: (rates of its sweep so far, chosen rate or ``None``), by the
    runner's rule (``activation_study_v2_rules.sweep_choice``: lowest quantised validation loss, the sweep
    extended upwards while its best rate is its highest, up to ``lr_extend_to``)."""
    from activation_study_v2_rules import sweep_choice

    cfg = raw["config"]
    sweep = [r for r in raw["runs"] if r.get("role") == "sweep"]
    out = {}
    for v in dict.fromkeys(r["variant"] for r in sweep):
        loss = {f"{r['lr']:g}": r["quantised_val_loss"] for r in sweep if r["variant"] == v}
        out[v] = sweep_choice(cfg["lrs"], cfg.get("lr_extend_to", 0.0), lambda lr: loss.get(f"{lr:g}"))
    return out


def main_runs(raw: dict) -> list[dict]:
    """Runs of the analysis: the sweep run at each variant's chosen rate (the sweep seed's short
    run) and the ``main`` runs at that rate (a main run at a rate the extended sweep superseded is
    left out, see :func:`superseded_runs`)."""
    chosen = {v: f"{lr:g}" for v, (_, lr) in sweeps(raw).items() if lr is not None}
    return ([r for r in raw["runs"] if r.get("role") == "sweep" and f"{r['lr']:g}" == chosen.get(r["variant"])]
            + [r for r in raw["runs"] if r.get("role") == "main" and f"{r['lr']:g}" == chosen.get(r["variant"])])


def superseded_runs(raw: dict) -> list[dict]:
    """Main runs whose rate is not (or not yet) their variant's chosen one: kept in the raw file,
    out of the analysis."""
    chosen = {v: f"{lr:g}" for v, (_, lr) in sweeps(raw).items() if lr is not None}
    return [r for r in raw["runs"] if r.get("role") == "main" and f"{r['lr']:g}" != chosen.get(r["variant"])]


def comparisons(runs: list[dict], variants, budgets) -> list[dict]:
    """Every variant-vs-reference comparison with at least 2 paired seeds, Holm-adjusted as one family."""
    by = {(r["variant"], r["budget"], r["seed"]): r for r in runs}
    rows = []
    for key, label, unit, scale, better in METRICS:
        for budget in budgets:
            for v in variants:
                if v == REFERENCE:
                    continue
                seeds = sorted(s for (vv, b, s) in by if vv == v and b == budget and (REFERENCE, budget, s) in by)
                if len(seeds) < 2:
                    continue
                diffs = [scale * (by[(v, budget, s)][key] - by[(REFERENCE, budget, s)][key]) for s in seeds]
                rows.append({"metric": key, "label": label, "unit": unit, "better": better, "budget": budget,
                             "variant": v, "seeds": seeds, **paired_test(diffs)})
    for row, p in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = p
        improves = row["mean"] < 0 if row["better"] == "lower" else row["mean"] > 0
        row["verdict"] = ("better" if improves else "worse") if p < ALPHA else "no difference shown"
    return rows


def _plain(value) -> str:
    """A config value as text: budgets as ``short 2 M, long 5 M``, sequences comma-separated."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(x, (list, tuple)) for x in value):
        return ", ".join(f"{b} {n / 1e6:g} M" for b, n in value)
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "(all seeds)"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _fmt(x: float, digits: int = 2) -> str:
    return f"{x:+.{digits}f}"


def _mean_sd(values) -> str:
    v = np.asarray(values, np.float64)
    return f"{v.mean():.2f} ({v.std(ddof=1):.2f})" if len(v) > 1 else (f"{v.mean():.2f}" if len(v) else "-")


def tables(raw: dict) -> dict:
    """The markdown pieces of the report (every number of the text)."""
    cfg = raw["config"]
    variants = _variants(raw)
    budgets = [b for b, _ in cfg["budgets"]]
    runs = main_runs(raw)
    comps = comparisons(runs, variants, budgets)
    out = {"comparisons": comps, "runs": runs}
    lines = ["| variant | budget | seeds | lr | " + " | ".join(f"{label} ({'%' if unit == 'pp' else unit})"
                                                         for _, label, unit, _, _ in METRICS)
             + " | training speed (k positions/s per core) |", "|---|---|---|---|" + "---|" * (len(METRICS) + 1)]
    for budget in budgets:
        for v in variants:
            rs = sorted((r for r in runs if r["variant"] == v and r["budget"] == budget), key=lambda r: r["seed"])
            if not rs:
                continue
            cells = [_mean_sd([m[3] * r[m[0]] for r in rs]) for m in METRICS]
            cells.append(_mean_sd([r["positions_seen"] / r["train_seconds"] / 1e3 for r in rs]))
            lines.append(f"| {v} | {budget} | {len(rs)} | {rs[0]['lr']:g} | " + " | ".join(cells) + " |")
    out["summary_table"] = "\n".join(lines)
    lines = ["| metric | budget | variant - pairwise | n | mean difference [95 % CI] | t | p | Holm p | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in comps:
        lines.append(f"| {c['label']} ({c['unit']}) | {c['budget']} | {c['variant']} | {c['n']} | "
                     f"{_fmt(c['mean'])} [{_fmt(c['ci'][0])}, {_fmt(c['ci'][1])}] | {c['t']:.2f} | {c['p']:.3g} | "
                     f"{c['p_holm']:.3g} | {c['verdict']} |")
    out["comparison_table"] = "\n".join(lines)
    sweep = [r for r in raw["runs"] if r.get("role") == "sweep"]
    plans = sweeps(raw)
    rates = sorted({f"{lr:g}": lr for lr in [*cfg["lrs"], *(r["lr"] for r in sweep)]}.values())
    lines = ["| variant | " + " | ".join(f"lr {lr:g}" for lr in rates) + " | chosen |",
             "|---|" + "---|" * (len(rates) + 1)]
    for v in variants:
        by_lr = {f"{r['lr']:g}": r["quantised_val_loss"] for r in sweep if r["variant"] == v}
        if by_lr:
            tried, chosen = plans[v]
            cells = [f"{1e4 * by_lr[f'{lr:g}']:.3f}" if f"{lr:g}" in by_lr
                     else ("to run" if lr in tried else "not run") for lr in rates]
            lines.append(f"| {v} | " + " | ".join(cells) + f" | {'-' if chosen is None else f'{chosen:g}'}"
                         + (" (edge of the sweep)" if chosen in (min(tried), max(tried)) else "") + " |")
    out["sweep_table"] = "\n".join(lines)
    out["sweep_rule"] = (f"{', '.join(f'{x:g}' for x in cfg['lrs'])}, extended at twice the rate while a variant's "
                         f"best rate was its highest, up to {cfg['lr_extend_to']:g}"
                         if cfg.get("lr_extend_to") else ", ".join(f"{x:g}" for x in cfg["lrs"]))
    old = superseded_runs(raw)
    out["superseded"] = (f"{len(old)} main runs at a rate that is not their variant's chosen one (the sweep's "
                         f"best rate moved when it was extended, or the sweep is not finished) are kept in "
                         f"`results.json` and left out of the analysis: "
                         + ", ".join(f"`{r['run']}`" for r in old) + "." if old else "")
    amendments = cfg.get("amendments") or []
    out["amendments"] = "\n".join(
        f"- {a['utc']}: " + "; ".join(f"`{k}` {_plain(o)} -> {_plain(n)}" for k, (o, n) in a["changed"].items())
        + f". Reason: {a['reason']}." for a in amendments) or "- none"
    holds = [c for c in comps if c["p_holm"] < ALPHA]
    fails = [c for c in comps if c["p_holm"] >= ALPHA and c["p"] < ALPHA]
    out["holds"] = "\n".join(f"- {c['variant']} vs pairwise, {c['budget']} budget, {c['label']}: {_fmt(c['mean'])} "
                             f"{c['unit']} [{_fmt(c['ci'][0])}, {_fmt(c['ci'][1])}], Holm p = {c['p_holm']:.3g} "
                             f"({c['verdict']})" for c in holds) or "- none (of the comparisons made so far)"
    out["fails"] = "\n".join(f"- {c['variant']} vs pairwise, {c['budget']} budget, {c['label']}: p = {c['p']:.3g} "
                             f"unadjusted, Holm p = {c['p_holm']:.3g}" for c in fails) or "- none"
    seeds_of = {b: (cfg.get("long_seeds") or cfg["seeds"]) if b == "long" else cfg["seeds"] for b in budgets}
    planned = (sum(len(variants) * len(seeds_of[b]) for b in budgets)
               + sum(len(tried) - 1 for tried, _ in plans.values()))
    cpu = sum(r["train_seconds"] for r in raw["runs"])
    out["progress"] = (f"{len(raw['runs'])} of {planned} planned runs finished ({len(sweep)} sweep runs); "
                       f"{cpu / 3600:.2f} h of training CPU time (process CPU, one thread), "
                       f"{sum(r['positions_seen'] for r in raw['runs']) / 1e6:.1f} M positions trained on; "
                       f"{len(comps)} comparisons in the Holm family so far")
    missing = []
    for b in budgets:
        want = {(v, s) for v in variants for s in seeds_of[b]}
        have = {(r["variant"], r["seed"]) for r in runs if r["budget"] == b}
        if want - have:
            short_of = sorted({v for v, s in want - have}, key=variants.index)
            missing.append(f"- {b} budget: {len(want - have)} of {len(want)} planned runs not finished "
                           f"(variants short of seeds {', '.join(map(str, seeds_of[b]))}: {', '.join(short_of)})")
    # issue 25: >= 2 M / >= 10 M positions, 5 seeds; a long budget of 10 M on 5 seeds under any name meets the latter
    issue = {"short": (2_000_000, 5), "long": (10_000_000, 5)}
    met_long = any(b != "short" and n >= 10_000_000 and len(seeds_of[b]) >= 5 for b, n in cfg["budgets"])
    for b, n in cfg["budgets"]:
        size, k = issue.get(b, issue["long"])
        if (n < size or len(seeds_of[b]) < k) and not (b == "long" and met_long):
            missing.append(f"- {b} budget as issue 25 asks it ({size / 1e6:g} M positions, {k} seeds): not run; "
                           f"this study's {b} budget is {n / 1e6:g} M positions on {len(seeds_of[b])} seeds "
                           f"(see the changes to the plan above)")
    if not raw.get("speed"):
        missing.append("- the speed measurement (`speed`)")
    out["not_done"] = "\n".join(missing) or "- nothing: every planned run finished"
    counts = ["| variant | " + " | ".join(budgets) + " |", "|---|" + "---|" * len(budgets)]
    for v in variants:
        counts.append(f"| {v} | " + " | ".join(str(sum(r["variant"] == v and r["budget"] == b for r in runs))
                                              for b in budgets) + " |")
    out["count_table"] = "\n".join(counts)
    anchor = raw.get("anchors", {}).get("move_agreement")
    out["anchors"] = ("For reference, on the same positions and also at 1 ply: " + ", ".join(
        f"{name} {100 * value:.1f} %" for name, value in anchor.items()) + "." if anchor else "")
    mae = raw.get("anchors", {}).get("quantised_test_mae_cp")
    out["anchors"] += (" Test MAE on the same test positions: " + ", ".join(
        f"{name} {value:.2f} cp" for name, value in mae.items())
        + " (not a held-out figure for it: it was trained on datagen positions from every dev game outside"
          " datagen's 25 % hold-out, this test split's games included, many epochs; its data:"
          " [weights/README.md](../weights/README.md))."
        if mae else "")
    speed = raw.get("speed")
    if speed:
        when = (f" Measured {speed['utc']} UTC on commit {speed['engine_commit']} (load average "
                f"{speed['load_average']:.1f})." if "utc" in speed else " (Date and commit of the measurement not recorded.)")
        lines = [f"`Evaluator.evaluate_batch` of {speed['positions']:,} test positions, one Numba thread, "
                 f"{speed['clock']} time, {speed['repeats']} rounds (networks in turn), seed-1 short networks.{when}", "",
                 "| variant | us per position: median (min-max) | ratio of medians to pairwise |", "|---|---|---|"]
        for v in variants:
            if v in speed["us_per_position"]:
                t = speed["us_per_position"][v]
                lines.append(f"| {v} | {np.median(t):.2f} ({min(t):.2f}-{max(t):.2f}) | "
                             f"{speed['median_ratio_to_pairwise'][v]:.2f}x |")
        out["speed_table"] = "\n".join(lines)
    else:
        out["speed_table"] = "Not measured yet (`python research/activation_study_v2.py speed --out DIR` after the sweep)."
    return out


def power(n: int, family: int, alpha: float = ALPHA) -> dict:
    """What a paired test of ``n`` seeds can show in a Holm family of ``family`` tests: the |t| needed
    at Holm's first step (two-sided p < alpha / family) and at its last (p < alpha), and the minimal
    detectable difference at 80 % power in units of the paired differences' standard deviation
    (``(t_crit + t_0.8) / sqrt(n)``, the usual normal-shift approximation with t quantiles)."""
    df = n - 1
    first = t_quantile(1 - alpha / family / 2, df)
    return {"n": n, "family": family, "t_first_step": first, "t_last_step": t_quantile(1 - alpha / 2, df),
            "mdd_sd_units": (first + t_quantile(0.8, df)) / math.sqrt(n)}


def audit(raw: dict) -> dict:
    """The facts behind the corrections of issue 38, each computed from ``raw`` (results.json).

    Keys: ``unique_share`` (budget -> (min, max) of unique_positions / positions_seen),
    ``lr`` (variant -> chosen rate), ``signed`` (variants whose FT biases started at 0),
    ``sweep_budget``/``sweep_seed``, ``worst_seed`` (budget -> pairwise's seed of highest MAE, with
    its rank), ``power`` (budget -> :func:`power` and the largest |t| of its tests), ``agreement``
    (range of the per-variant mean move agreement, the paired differences' pooled SD and the
    minimal detectable difference in points at the family's first step, the binomial SE of one
    network's share), ``only_better`` (comparisons judged better), ``doubling`` (pairwise's MAE
    gain per doubling of data between the smallest and largest budget, and every primary effect at
    the largest budget in doublings), ``generators``.
    """
    from activation_study_v2 import SIGNED

    cfg = raw["config"]
    runs = main_runs(raw)
    budgets = [b for b, _ in cfg["budgets"]]
    comps = comparisons(runs, _variants(raw), budgets)
    out: dict = {"family": len(comps), "generators": raw.get("data_generators") or {}}
    shares: dict = {}
    for r in raw["runs"]:
        shares.setdefault(r["budget"], []).append(r["unique_positions"] / r["positions_seen"])
    out["unique_share"] = {b: (min(v), max(v)) for b, v in shares.items()}
    out["lr"] = {r["variant"]: r["lr"] for r in runs}
    out["signed"] = [v for v in _variants(raw) if v in SIGNED]
    out["sweep_seed"], out["sweep_budget"] = cfg["sweep_seed"], budgets[0]
    worst = {}
    for b in budgets:
        ref = sorted((r for r in runs if r["variant"] == REFERENCE and r["budget"] == b),
                     key=lambda r: -r["quantised_test_mae_cp"])
        if ref:
            rank = [r["seed"] for r in ref].index(cfg["sweep_seed"]) + 1 if cfg["sweep_seed"] in [r["seed"] for r in ref] else None
            worst[b] = {"worst": ref[0]["seed"], "sweep_seed_rank": rank, "seeds": len(ref)}
    out["worst_seed"] = worst
    out["power"] = {}
    for b in budgets:
        cs = [c for c in comps if c["budget"] == b]
        if cs:
            out["power"][b] = {**power(cs[0]["n"], len(comps)), "tests": len(cs),
                               "max_abs_t": max(abs(c["t"]) for c in cs if math.isfinite(c["t"])),
                               "passed": sum(c["p_holm"] < ALPHA for c in cs)}
    ma = [c for c in comps if c["metric"] == "move_agreement"]
    if ma:
        means = {}
        for r in runs:
            means.setdefault((r["variant"], r["budget"]), []).append(100 * r["move_agreement"])
        pooled = math.sqrt(sum(c["sd"] ** 2 * (c["n"] - 1) for c in ma) / sum(c["n"] - 1 for c in ma))
        n = max(c["n"] for c in ma)
        share = float(np.mean([v for vs in means.values() for v in vs])) / 100
        out["agreement"] = {"mean_range": (min(np.mean(v) for v in means.values()), max(np.mean(v) for v in means.values())),
                            "pooled_sd_pp": pooled, "n": n, "mdd_pp": power(n, len(comps))["mdd_sd_units"] * pooled,
                            "positions": cfg["agreement_positions"],
                            "binomial_se_pp": 100 * math.sqrt(share * (1 - share) / cfg["agreement_positions"])}
    out["only_better"] = [c for c in comps if c["verdict"] == "better"]
    sizes = {b: n for b, n in cfg["budgets"] if any(r["variant"] == REFERENCE and r["budget"] == b for r in runs)}
    if len(set(sizes.values())) >= 2:
        small, large = min(sizes, key=sizes.get), max(sizes, key=sizes.get)
        mae = {b: float(np.mean([r["quantised_test_mae_cp"] for r in runs if r["variant"] == REFERENCE
                                 and r["budget"] == b])) for b in (small, large)}
        per = (mae[small] - mae[large]) / math.log2(sizes[large] / sizes[small])
        out["doubling"] = {"small": small, "large": large, "positions": (sizes[small], sizes[large]),
                           "mae": (mae[small], mae[large]), "cp_per_doubling": per,
                           "effects": {c["variant"]: (c["mean"], c["mean"] / per if per else math.nan) for c in comps
                                       if c["metric"] == "quantised_test_mae_cp" and c["budget"] == large}}
    return out


def corrections(raw: dict) -> str:
    """The report's section on what the first version of this text got wrong and what confounds
    its comparisons (issue 38); every figure from :func:`audit`."""
    a = audit(raw)
    sizes = dict(raw["config"]["budgets"])
    share = ", ".join(f"{100 * lo:.1f} % at {sizes[b] / 1e6:g} M" if abs(hi - lo) < 5e-4 else
                      f"{100 * lo:.1f}-{100 * hi:.1f} % at {sizes[b] / 1e6:g} M"
                      for b, (lo, hi) in sorted(a["unique_share"].items(), key=lambda kv: sizes[kv[0]]))
    lrs: dict = {}
    for v, lr in a["lr"].items():
        lrs.setdefault(f"{lr:g}", []).append(v)
    lr_text = "; ".join(f"{lr} for {', '.join(vs)}" for lr, vs in sorted(lrs.items()))
    gens = ", ".join(f"{n} by {g}" for g, n in sorted(a["generators"].items())) or "not recorded"
    lines = [
        f"- **Positions are not all distinct.** Each row of the training chunks is used once, but the chunks "
        f"are not de-duplicated against each other: `unique_positions` / `positions_seen` is {share}. "
        "\"Every training position is seen once\" (the first version of this text) is true of rows, not of positions.",
        "- **Disjoint games hold for half the data only.** The perturbation half of every split starts from its "
        "own dev games; the playout half of every split (validation and test included) consists of random "
        "openings from the standard start position, so the splits share that half's opening distribution "
        "(identical positions are kept out of training, not similar ones).",
        f"- **The data cannot be regenerated from the seeds on today's checkout.** Data files by generator: {gens}; "
        "the current `datagen` (the compiled walk) follows the same data definition with other random draws, "
        "so a new `DIR` gives other positions (the runs are reproducible given the data files, which are not "
        "kept).",
        f"- **Learning rate**: chosen at the {a['sweep_budget']} budget on seed {a['sweep_seed']} and carried to "
        f"the larger budgets without a sweep there: {lr_text}. Every gate-against-`pairwise` comparison "
        "therefore also compares two learning rates.",
        f"- **Initialisation**: the feature-transformer biases start at 0 for the signed gates "
        f"({', '.join(a['signed'])}) and at the model's default (0.5 + 0.05 N(0, 1)) for every other variant, "
        "`pairwise` included: \"gate vs pairwise\" also varies the initialisation.",
    ]
    ws = a["worst_seed"]
    if ws:
        lines.append("- **The sweep seed is in the analysis**: seed " + str(a["sweep_seed"]) + " chose the rates and "
                     "is one of the paired seeds; for `pairwise` it was " + "; ".join(
                         (f"the worst of {w['seeds']} seeds by test MAE at the {b} budget" if w["sweep_seed_rank"] == 1
                          else f"rank {w['sweep_seed_rank']} of {w['seeds']} from the worst at the {b} budget")
                         for b, w in ws.items() if w["sweep_seed_rank"]) + ".")
    for b, p in a["power"].items():
        lines.append(f"- **Power at the {b} budget** ({p['tests']} of the {p['family']} tests, {p['n']} seeds): "
                     f"Holm's first step needs |t| > {p['t_first_step']:.1f} (p < 0.05 / {p['family']}), its last "
                     f"|t| > {p['t_last_step']:.2f}; the largest |t| of these tests was {p['max_abs_t']:.1f} and "
                     f"{p['passed']} passed. A true "
                     f"difference is detected with 80 % power at the first step when it is about "
                     f"{p['mdd_sd_units']:.1f} standard deviations of the paired differences.")
    if "agreement" in a:
        g = a["agreement"]
        lines.append(f"- **Move agreement cannot tell the variants apart**: every variant's mean is "
                     f"{g['mean_range'][0]:.1f}-{g['mean_range'][1]:.1f} %; one network's share on "
                     f"{g['positions']:,} positions has a binomial standard error of {g['binomial_se_pp']:.2f} points; "
                     f"the paired differences' pooled SD is {g['pooled_sd_pp']:.2f} points, so the minimal detectable "
                     f"difference with {g['n']} seeds at the family's first step is about {g['mdd_pp']:.1f} points.")
    if a["only_better"]:
        lines.append("- **One metric carries the only \"better\" verdict**: " + "; ".join(
            f"{c['variant']}, {c['budget']} budget, {c['label']} (Holm p {c['p_holm']:.3g})" for c in a["only_better"])
            + ". No primary metric was named, all 4 metrics shared one Holm family, and the test MAE of the same "
              "comparison did not pass.")
    d = a.get("doubling")
    lines.append("- **Scale**: one budget only; no rate of improvement per doubling of data." if d is None else f"- **Scale**: `pairwise`'s test MAE fell from {d['mae'][0]:.2f} cp at {d['positions'][0] / 1e6:g} M "
                 f"to {d['mae'][1]:.2f} cp at {d['positions'][1] / 1e6:g} M positions, {d['cp_per_doubling']:.1f} cp "
                 f"per doubling of data; at the {d['large']} budget the variants' MAE differences to `pairwise` are "
                 + ", ".join(f"{v} {m:+.2f} cp ({x:+.2f} doublings)" for v, (m, x) in d["effects"].items())
                 + ". The networks are 2 x 256 wide and still learning at the largest budget.")
    return "\n".join(lines)


def _variants(raw: dict) -> list[str]:
    from activation_study_v2_rules import VARIANTS

    return [v for v in VARIANTS if any(r["variant"] == v for r in raw["runs"])]


def plots(raw: dict, pieces: dict, dest: Path) -> None:
    from nnue_infer.training.plotting import pyplot

    plt = pyplot()
    budgets = [b for b, _ in raw["config"]["budgets"]]
    comps = [c for c in pieces["comparisons"] if c["metric"] == "quantised_test_mae_cp"]
    fig, axes = plt.subplots(1, len(budgets), figsize=(5 * len(budgets), 4), dpi=110, squeeze=False)
    for ax, budget in zip(axes[0], budgets):
        cs = [c for c in comps if c["budget"] == budget]
        for i, c in enumerate(cs):
            color = "tab:green" if c["verdict"] == "better" else "tab:red" if c["verdict"] == "worse" else "tab:gray"
            ax.errorbar(c["mean"], i, xerr=[[c["mean"] - c["ci"][0]], [c["ci"][1] - c["mean"]]], fmt="o", color=color)
        if not cs:
            ax.text(0.5, 0.5, "no paired runs yet", ha="center", transform=ax.transAxes)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(range(len(cs)), [f"{c['variant']} (n={c['n']})" for c in cs])
        ax.set_xlabel("quantised test MAE - pairwise's (cp), 95 % CI")
        ax.set_title(f"{budget} budget")
    fig.tight_layout()
    fig.savefig(dest / "differences.png")
    plt.close(fig)
    fig, axes = plt.subplots(1, len(budgets), figsize=(5 * len(budgets), 4), dpi=110, squeeze=False)
    for ax, budget in zip(axes[0], budgets):
        by_v: dict = {}
        for r in pieces["runs"]:
            if r["budget"] == budget:
                by_v.setdefault(r["variant"], []).append(r["curve"])
        for v, curves in by_v.items():
            n = min(len(c) for c in curves)
            x = [p["positions"] / 1e6 for p in curves[0][:n]]
            y = np.mean([[p["float_val_loss"] for p in c[:n]] for c in curves], axis=0)
            ax.plot(x, y, label=f"{v} ({len(curves)})")
        if by_v:
            ax.set_yscale("log")
        else:
            ax.text(0.5, 0.5, "no runs yet", ha="center", transform=ax.transAxes)
        ax.set_xlabel("positions seen (M)")
        ax.set_ylabel("float validation loss (mean over seeds)")
        ax.set_title(f"{budget} budget")
        if by_v:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dest / "curves.png")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    sweep = [r for r in raw["runs"] if r.get("role") == "sweep"]
    for v in sorted({r["variant"] for r in sweep}):
        rs = sorted((r for r in sweep if r["variant"] == v), key=lambda r: r["lr"])
        ax.plot([r["lr"] for r in rs], [r["quantised_val_loss"] for r in rs], marker="o", label=v)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("quantised validation loss")
    ax.set_title("learning-rate sweep (short budget, one seed)")
    if sweep:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dest / "lr-sweep.png")
    plt.close(fig)


TEMPLATE = """# Feature-transformer activations, version 2: fresh data, integer metrics, a strength proxy

Generated by `python research/activation_study_v2.py report` from
[`activation-study-v2/results.json`](activation-study-v2/results.json); every number below comes
from that file.  Version 1 ([activation-study.md](activation-study.md)) trained on 1 M positions
seen about 4 times and ranked variants by the float model's loss; this version trains on fresh
rows, each used once (positions repeat across chunks: see the corrections below), and ranks by the
quantised (integer) network.  Version 3 ([activation-study-v3-plan.md](activation-study-v3-plan.md))
removes the confounds listed below.

## Corrections and confounds (issue 38)

An independent recomputation found every number of this report right; these sentences of its first
version were not, and these confounds were not named (figures computed from `results.json` by
`activation_study_v2_report.audit`):

{corrections}

## Status

{progress}.

Runs per variant in the analysis (main runs; the sweep seed's run at the chosen rate counts):

{count_table}

{superseded}

Changes to the plan made after the study started (`config.json`'s `amendments`):

{amendments}

Not done:

{not_done}

## Setup

- Network: the bundled default network's shape (Chess768, 4 mirrored king buckets, 8 PSQT, 8 layer
  stacks of 16 -> 32 -> 1), accumulator {ft_width} per perspective ({long_ft_width} for the long
  budget); `crelu`/`screlu` with half the accumulator (same first-layer inputs as the paired
  variants), `crelu_wide` with the full one (same feature-transformer parameters).
- Data: positions generated by datagen (perturbations of the dev games' positions and playouts,
  {children} random children recorded per visited position) labelled by Stockfish 15.1's network;
  validation ({val_positions} positions) and test ({test_positions}): the perturbation half from
  dev games disjoint from the training games, the playout half from the standard position in every
  split; training positions exclude every validation, test, dev-corpus and move-agreement position.
  Budgets: {budgets}; every training row is used once (not de-duplicated across chunks). {generators}
- Training: the fast trainer (`nnue_infer.training.fast`), Adam, batch {batch_size}, cosine decay
  to {lr_final_fraction} of the rate, loss MSE of sigmoid(cp / {sigmoid_scale_cp:g}); initial
  feature-transformer biases 0 for the signed gates only (the default 0.5 + 0.05 N(0, 1) for the
  others); learning rate per variant from a sweep of {lrs} on seed {sweep_seed} at the short budget
  (lowest quantised validation loss), then used on every seed and every budget (short budget:
  {seeds}; long budget: {long_seeds}).
- Metrics: quantised (Stockfish scheme) network's test MAE against Stockfish 15.1 in cp, its
  validation loss, move agreement on {agreement_positions} held-out self-play positions (share of
  positions where the 1-ply choice of the integer network is Stockfish's depth-4 move), and the
  float model's validation loss.

## Analysis (fixed before the runs)

Each variant against `pairwise` at the same budget, paired by seed; two-sided paired t-tests;
Holm's correction over every comparison of every metric and budget (one family); effect sizes as
mean paired differences with 95 % t intervals (cp for the MAE, percentage points for the move
agreement, 1e-4 for the losses).  Integer metrics come first.

## Results

{summary_table}

Mean (standard deviation over seeds).  Training speed: positions seen / `train_seconds` (process
CPU time of the training steps on one thread, validation and data loading excluded).  {anchors}

### Comparisons with `pairwise`

{comparison_table}

![paired differences](activation-study-v2/differences.png)

### What holds after Holm's correction

{holds}

Significant before the correction but not after it:

{fails}

### Learning-rate sweep (quantised validation loss x 1e-4)

{sweep_table}

![learning-rate sweep](activation-study-v2/lr-sweep.png)

![validation curves](activation-study-v2/curves.png)

## Speed on the current engine

{speed_table}

## Reproducing and resuming

    python research/activation_study_v2.py data --out DIR --chunks 20   # optional: data ahead, in parallel
    python research/activation_study_v2.py run --out DIR                # one or two processes; resumes
    python research/activation_study_v2.py amend --out DIR --lr-extend-to 0.032 --reason TEXT
    python research/activation_study_v2.py amend --out DIR --long-budget 5000000 --long-seeds 1,2,3 --reason TEXT
    python research/activation_study_v2.py speed --out DIR              # after the sweep
    python research/activation_study_v2.py report                       # this file, from results.json

`run` skips finished runs (`DIR/runs/NAME.json`), resumes a started one from its checkpoint
(`DIR/runs/NAME.pt`, every tenth of the run) and re-collects `results.json` after each run.
Everything is seeded (datagen chunk `i` with seed 1000 + i, the validation and test splits with
seeds 1 and 2, each run's order and initialisation with its seed), but a new `DIR` regenerates the
same data only with the generator that made it (see the corrections above: the current datagen
draws other positions for the same seeds); given the data files, the runs are reproducible.
"""


def render(raw: dict) -> tuple[str, dict]:
    """The report's markdown and its pieces."""
    cfg = raw["config"]
    pieces = tables(raw)
    text = TEMPLATE.format(
        **{k: v for k, v in pieces.items() if isinstance(v, str)}, corrections=corrections(raw),
        ft_width=cfg["ft_width"], long_ft_width=cfg["long_ft_width"], children=cfg["children"],
        val_positions=f"{cfg['val_positions']:,}", test_positions=f"{cfg['test_positions']:,}",
        budgets=", ".join(f"{b} {n / 1e6:g} M positions" for b, n in cfg["budgets"]),
        batch_size=f"{cfg['batch_size']:,}", lr_final_fraction=cfg["lr_final_fraction"],
        sigmoid_scale_cp=cfg["sigmoid_scale_cp"], lrs=pieces["sweep_rule"],
        sweep_seed=cfg["sweep_seed"], seeds=", ".join(map(str, cfg["seeds"])),
        long_seeds=", ".join(map(str, cfg.get("long_seeds") or cfg["seeds"])),
        agreement_positions=f"{cfg['agreement_positions']:,}", generators=_generators(raw.get("data_generators")))
    return text, pieces


def _generators(counts: dict | None) -> str:
    """Which datagen made the data files (``data_generators`` of the raw file: generator -> files)."""
    if not counts:
        return ""
    names = {"python-chess": "the python-chess generator", "walk-1": "the compiled walk (`walk-1`)"}
    return ("Data files (validation, test, training chunks) by generator: " + ", ".join(
        f"{n} by {names.get(g, g)}" for g, n in sorted(counts.items())) + " (one data definition, other random draws).")


def write_report(results: Path, dest: Path, stem: str = "activation-study-v2", render_fn=None, plots_fn=None) -> Path:
    """Write ``dest/STEM.md`` and its plots (in ``dest/STEM/``) from ``results``; returns the markdown's
    path.  ``render_fn(raw) -> (text, pieces)`` and ``plots_fn(raw, pieces, dir)``: a study's own
    (default: this report's :func:`render` and :func:`plots`)."""
    raw = json.loads(Path(results).read_text())
    text, pieces = (render_fn or render)(raw)
    fig_dir = dest / stem
    fig_dir.mkdir(parents=True, exist_ok=True)
    (plots_fn or plots)(raw, pieces, fig_dir)
    path = dest / f"{stem}.md"
    path.write_text(text)
    return path

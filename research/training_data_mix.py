"""Which training data buys the most held-out accuracy per CPU hour (issue 38): walk, self-play,
engine games or a mix of them, selected by ``source`` from activation study v3's chunks::

    python research/training_data_mix.py run --study /work/study-data/v3 --work DIR \\
        [--budgets 125000,250000,500000,1000000,2000000] [--json research/training-data-mix.json]
    python research/training_data_mix.py report [--json research/training-data-mix.json]   # the Markdown section

``run`` reads only the study's finished data files (those listed in ``data/seen.json``; features
from the study's caches where they exist, else computed and cached in ``--work``); it never writes
into the study's directory.  For every mix (:data:`MIXES`) and budget of distinct positions that
the chunks hold, a 2 x 256 ``pairwise`` network (the study's shape and trainer:
:func:`activation_study_v3.Run`'s architecture, Adam, batch 4,096, cosine decay to 0.05 of the
rate, loss MSE of sigmoid(cp / 600), one thread) is trained at each rate of :data:`LRS` and the
rate with the lowest quantised validation loss (the study's validation split) is kept; that
network's quantised MAE is measured on the study's test split and on the dev corpus's 1,248
held-out positions (the model card's metric, :mod:`default_network_data`).  Every run sees at
least :data:`MIN_SEEN` positions (small budgets are repeated in epochs, each a new permutation),
so that small budgets are not merely under-trained; larger budgets are seen once.

The cost of a run is its data's generation CPU (the measured positions per CPU second of each
source, ``activation-study-v3/datagen-speed.json``) plus its training CPU (measured, the chosen
rate's run; the rate sweep's other runs are not counted, as a fixed recipe would not need them).
Accuracy per CPU hour is compared as the held-out MAE each mix reaches at equal CPU: per mix a
least-squares line of MAE against log2(CPU seconds) over its budgets, evaluated at common CPU
budgets; its slope is the cp bought per doubling of CPU.  Results are appended to the JSON after
every run (a new call resumes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import activation_study_v2 as V2  # noqa: E402
import activation_study_v3 as S  # noqa: E402

HERE = Path(__file__).resolve().parent
#: Data-file ``source`` codes of each generator (datagen: perturbation 0, playout 1; self-play 2;
#: engine games, written through ``positions_from_training_data``: 3).
SOURCES = {"walk": (0, 1), "selfplay": (2,), "search": (3,)}
#: The mixes compared: each source alone, datagen + self-play half and half (the previous default
#: network's data) and the study's own mix.
MIXES = {"walk": {"walk": 1.0}, "selfplay": {"selfplay": 1.0}, "search": {"search": 1.0},
         "walk+selfplay": {"walk": 0.5, "selfplay": 0.5},
         "study": {"walk": 0.475, "selfplay": 0.475, "search": 0.05}}
#: Rates tried per run (the lowest quantised validation loss is kept).
LRS = (2e-3, 4e-3, 8e-3)
#: Positions seen by every run at least (budgets below it are repeated in epochs).
MIN_SEEN = 2_000_000
#: Generation rate of each source in ``datagen-speed.json``'s ``median``.
RATE_KEYS = {"walk": "compiled", "selfplay": "selfplay", "search": "search-400"}
WIDTH, VARIANT, SEED = 256, "pairwise", 1
#: Float validation points per run (the curve only; the choice uses the quantised network).
EVAL_POINTS = 2


def listed_chunks(study: Path) -> list[int]:
    """Indices of the study's training chunks that are finished (listed in ``data/seen.json``)."""
    files = json.loads((study / "data" / "seen.json").read_text())["files"]
    return sorted(int(f[6:10]) for f in files if f.startswith("train-") and (study / "data" / f).exists())


def load_pool(study: Path, chunks, cfg, work: Path, log=print) -> dict:
    """Features, buckets, values, position hashes and ``source`` of the given chunks, concatenated.

    Raises
    ------
    RuntimeError
        A chunk's features cache does not hold the chunk's positions (other hashes or count).
    """
    from nnue_infer.training.positionset import position_hashes

    parts = []
    for c in chunks:
        a = S.arrays(study, c, cfg, log, cache_dir=work)
        with np.load(study / "data" / S.file_name(c)) as z:
            src, keys = z["source"], position_hashes(z["bitboards"], z["stm"])
        if not np.array_equal(keys, a["keys"]):
            raise RuntimeError(f"{S.file_name(c)}: its features cache holds other positions")
        parts.append({**{k: a[k] for k in ("features", "buckets", "values", "keys")}, "source": src})
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def source_counts(mix: dict, n: int) -> dict:
    """Positions of each source among ``n`` of ``mix`` (shares rounded; the last source takes the rest)."""
    names = list(mix)
    counts = {s: round(mix[s] * n) for s in names}
    counts[names[-1]] = n - sum(counts[s] for s in names[:-1])
    return counts


def select(source: np.ndarray, mix: dict, n: int, seed: int = 0) -> np.ndarray:
    """Row indices of ``n`` positions of ``mix`` (:func:`source_counts` per source), a seeded random
    subset of each source's rows; a larger ``n`` extends a smaller one's subset (nested budgets).

    Raises
    ------
    ValueError
        A source has fewer rows than ``n`` needs.
    """
    take = []
    for s, k in source_counts(mix, n).items():
        rows = np.flatnonzero(np.isin(source, SOURCES[s]))
        if len(rows) < k:
            raise ValueError(f"{s}: {len(rows)} positions, {k} needed for {n} of this mix")
        take.append(rows[np.random.default_rng([seed, *SOURCES[s]]).permutation(len(rows))[:k]])
    return np.sort(np.concatenate(take))


def available(source: np.ndarray, mix: dict, n: int) -> bool:
    return all(int(np.isin(source, SOURCES[s]).sum()) >= k for s, k in source_counts(mix, n).items())


class Epochs:
    """Run positions ``g`` = row ``perm_e[g % n]`` of ``rows`` in epoch ``e = g // n`` (``perm_e``
    seeded by the seed and the epoch): the stream :func:`activation_study_v2.fit` reads."""

    def __init__(self, pool: dict, rows: np.ndarray, seed: int) -> None:
        self.pool, self.rows, self.seed, self.data_seconds = pool, rows, seed, 0.0
        self._epoch, self._perm = -1, None

    def batch(self, start: int, size: int):
        n, out, g = len(self.rows), [], start
        while g < start + size:
            e, k = divmod(g, n)
            if e != self._epoch:
                self._epoch, self._perm = e, self.rows[np.random.default_rng([self.seed, e]).permutation(n)]
            take = self._perm[k:k + min(n - k, start + size - g)]
            out.append(tuple(self.pool[key][take] for key in ("features", "buckets", "values")))
            g += len(take)
        return tuple(np.concatenate([p[i] for p in out]) for i in range(3))


def dev_corpus() -> dict:
    """The dev corpus's boards, teacher cp and the held-out mask within |teacher| <= 1000 cp (the
    model card's metric, :func:`default_network_data.corpus`)."""
    import default_network_data as D

    from nnue_infer.training.distil import MAE_WINDOW_CP

    boards, teacher, masks = D.corpus(S.shared_dir() / "data" / "positions-dev.jsonl")
    window = np.abs(teacher) <= MAE_WINDOW_CP
    return {"boards": boards, "teacher": teacher, "held_out": masks["held_out"] & window, "all": window}


def network_errors(qnet, test: dict, dev: dict) -> dict:
    """Quantised network's MAE (cp) on the study's test split and on the dev corpus (held out, all)."""
    from nnue_infer.evaluator import Evaluator

    ev = Evaluator(qnet)
    q_test = ev.evaluate_batch(list(test["fens"])).astype(np.float64)
    d = ev.evaluate_batch(dev["boards"]).astype(np.float64) * 100 / qnet.architecture.units_per_pawn
    err = np.abs(d - dev["teacher"])
    return {"quantised_test_mae_cp": float(np.mean(np.abs(q_test - test["values"])) * 100.0 / 361.0),
            "dev_held_out_mae_cp": float(err[dev["held_out"]].mean()), "dev_all_mae_cp": float(err[dev["all"]].mean()),
            "dev_held_out_positions": int(dev["held_out"].sum())}


def quantised_val_loss(qnet, val: dict, cfg) -> float:
    import torch

    from nnue_infer.evaluator import Evaluator
    from nnue_infer.training.model import win_probability_mse

    q = Evaluator(qnet).evaluate_batch(list(val["fens"])).astype(np.float32)
    return float(win_probability_mse(torch.from_numpy(q), torch.from_numpy(val["values"]), qnet.architecture, 361.0,
                                     cfg.sigmoid_scale_cp))


def train(pool: dict, rows: np.ndarray, lr: float, seen: int, cfg, val: dict, ckpt: Path, width: int = WIDTH,
          variant: str = VARIANT, seed: int = SEED, log=print):
    """(float model, quantised network, curve, training CPU seconds) of one run: ``seen`` positions
    (whole batches of ``cfg.batch_size``) drawn epoch by epoch from ``rows`` of ``pool``."""
    from nnue_infer.quantisation import SCHEMES, quantise_with_report
    from nnue_infer.training.fast import FastModel, make_optimizer
    from nnue_infer.training.model import model_to_float_network

    import numba
    import torch

    torch.set_num_threads(1)
    numba.set_num_threads(1)
    arch = V2.study_architecture(variant, width)
    model = FastModel(arch, seed)
    opt = make_optimizer(model, lr)
    total = max(1, seen // cfg.batch_size)
    curve, cpu, _ = V2.fit(model, opt, arch, lr, total, cfg.batch_size, Epochs(pool, rows, seed), val, ckpt,
                           cfg.eval_every, cfg.lr_final_fraction, cfg.sigmoid_scale_cp, ckpt.stem, log)
    ckpt.unlink(missing_ok=True)
    qnet, _ = quantise_with_report(model_to_float_network(model, f"training data mix {ckpt.stem}"),
                                   SCHEMES["stockfish"])
    return model, qnet, curve, cpu


def run_mixes(study: Path, work: Path, out_json: Path, budgets, mixes=None, lrs=LRS, min_seen: int = MIN_SEEN,
              datagen: Path = HERE / "activation-study-v3" / "datagen-speed.json", log=print) -> dict:
    """Train and measure every (mix, budget) the listed chunks hold, resuming from ``out_json``."""
    cfg = S.load_config(study) if (study / "config.json").exists() else S.Config()
    cfg = dataclasses.replace(cfg, eval_every=EVAL_POINTS)
    work.mkdir(parents=True, exist_ok=True)
    raw = json.loads(out_json.read_text()) if out_json.exists() else {"runs": []}
    chunks = listed_chunks(study)
    pool = load_pool(study, chunks, cfg, work, log)
    val, test = (S.arrays(study, s, cfg, log, cache_dir=work) for s in ("val", "test"))
    dev = dev_corpus()
    rates = json.loads(datagen.read_text())["median"]
    raw.update({"what": "training data mix: held-out accuracy per CPU hour (issue 38)", "study": str(study),
                "chunks": chunks, "available": {s: int(np.isin(pool["source"], c).sum()) for s, c in SOURCES.items()},
                "generation_positions_per_cpu_second": {s: rates[k] for s, k in RATE_KEYS.items()},
                "datagen_file": str(datagen.relative_to(HERE.parent)) if datagen.is_relative_to(HERE.parent) else str(datagen),
                "settings": {"ft_width": WIDTH, "variant": VARIANT, "seed": SEED, "lrs": list(lrs), "min_seen": min_seen,
                             "batch_size": cfg.batch_size, "lr_final_fraction": cfg.lr_final_fraction,
                             "sigmoid_scale_cp": cfg.sigmoid_scale_cp, "val_positions": len(val["values"]),
                             "test_positions": len(test["values"]), "dev_held_out_positions": int(dev["held_out"].sum())},
                "mixes": {m: MIXES[m] for m in (mixes or MIXES)}})
    done = {(r["mix"], r["budget"]) for r in raw["runs"]}
    for n in budgets:
        for m in mixes or MIXES:
            if (m, n) in done or not available(pool["source"], MIXES[m], n):
                continue
            rows = select(pool["source"], MIXES[m], n)
            assert len(np.unique(pool["keys"][rows])) == n  # distinct positions (the study's hash set)
            seen = max(n, min_seen)
            tries, best = [], None
            for lr in lrs:
                t0 = time.perf_counter()
                model, qnet, curve, cpu = train(pool, rows, lr, seen, cfg, val, work / f"{m}-{n}-{lr:g}.pt", log=log)
                vl = quantised_val_loss(qnet, val, cfg)
                tries.append({"lr": lr, "quantised_val_loss": vl, "train_cpu_seconds": cpu,
                              "final_float_val_loss": curve[-1]["float_val_loss"]})
                log(f"{m} {n}: lr {lr:g} quantised val loss {vl:.6f} ({cpu:.0f} s CPU, {time.perf_counter() - t0:.0f} s)")
                if best is None or vl < best[0]:
                    best = (vl, lr, qnet, cpu)
            counts = source_counts(MIXES[m], n)
            gen = sum(k / raw["generation_positions_per_cpu_second"][s] for s, k in counts.items())
            rec = {"mix": m, "budget": n, "positions_seen": (seen // cfg.batch_size) * cfg.batch_size,
                   "epochs": seen / n, "by_source": counts, "lr": best[1], "lr_at_edge": best[1] in (min(lrs), max(lrs)),
                   "sweep": tries, "quantised_val_loss": best[0], **network_errors(best[2], test, dev),
                   "generation_cpu_seconds": gen, "train_cpu_seconds": best[3], "cpu_seconds": gen + best[3]}
            raw["runs"].append(rec)
            log(f"{m} {n}: dev held out {rec['dev_held_out_mae_cp']:.1f} cp, test {rec['quantised_test_mae_cp']:.1f} cp, "
                f"{rec['cpu_seconds']:.0f} CPU s")
            raw["summary"] = summarise(raw)
            tmp = out_json.with_suffix(".tmp")
            tmp.write_text(json.dumps(raw, indent=1) + "\n")
            os.replace(tmp, out_json)
    return raw


def fit_line(x, y) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line of ``y`` on ``x`` (one point: slope 0)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2:
        return float(y[0]), 0.0
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def summarise(raw: dict, metric: str = "dev_held_out_mae_cp") -> dict:
    """Per mix: least-squares lines of the MAE against log2(positions) and log2(CPU seconds) (cp per
    doubling, descriptive), and at CPU budgets of 16, 32, ... seconds the lowest MAE a run of the
    mix bought with at most that CPU (its measured frontier: no extrapolation) and the mix with the
    lowest.  ``best``: the winner at the largest budget (every mix's largest run fits in it)."""
    by_mix = {}
    for r in raw["runs"]:
        by_mix.setdefault(r["mix"], []).append(r)
    lines = {}
    for m, rs in by_mix.items():
        rs = sorted(rs, key=lambda r: r["budget"])
        a, b = fit_line([math.log2(r["cpu_seconds"]) for r in rs], [r[metric] for r in rs])
        _, b2 = fit_line([math.log2(r["budget"]) for r in rs], [r[metric] for r in rs])
        lines[m] = {"intercept": a, "cp_per_cpu_doubling": b, "cp_per_data_doubling": b2, "points": len(rs),
                    "cpu_range": [min(r["cpu_seconds"] for r in rs), max(r["cpu_seconds"] for r in rs)]}
    top = max([r["cpu_seconds"] for r in raw["runs"]] + [16.0])
    budgets = [16.0 * 2 ** k for k in range(math.ceil(math.log2(top / 16.0)) + 1)]
    at = []
    for c in budgets:
        bought = {m: min((r[metric] for r in rs if r["cpu_seconds"] <= c), default=None) for m, rs in by_mix.items()}
        bought = {m: v for m, v in bought.items() if v is not None}
        at.append({"cpu_seconds": c, "mae_cp": bought, "best": min(bought, key=bought.get) if bought else None})
    return {"metric": metric, "lines": lines, "at_equal_cpu": at, "best": at[-1]["best"] if at else None}

def markdown(raw: dict) -> str:
    """The Markdown section (for docs/training.md and the model card) from the JSON alone."""
    s, sets = summarise(raw), raw["settings"]
    rates = raw["generation_positions_per_cpu_second"]
    out = ["## Which training data buys the most held-out accuracy per CPU hour", "",
           f"Generated by `python research/training_data_mix.py report` from "
           f"[research/training-data-mix.json](../research/training-data-mix.json) (issue 38). "
           f"Networks: 2 x {sets['ft_width']} `{sets['variant']}`, activation study v3's shape and trainer (batch "
           f"{sets['batch_size']:,}, cosine decay to {sets['lr_final_fraction']} of the rate, sigmoid scale "
           f"{sets['sigmoid_scale_cp']:g} cp, seed {sets['seed']}), trained on distinct positions of the study's "
           f"training chunks selected by `source`, each run seeing at least {sets['min_seen']:,} positions "
           f"(smaller budgets in epochs), the rate chosen among {', '.join(f'{x:g}' for x in sets['lrs'])} by "
           f"quantised validation loss on the study's {sets['val_positions']:,} validation positions. MAE of the "
           f"quantised network against Stockfish 15.1's network: **dev held out** = the model card's "
           f"{sets['dev_held_out_positions']:,} dev positions not derived from training data (|SF| <= 1000 cp), "
           f"test = the study's {sets['test_positions']:,} test positions. CPU = generation (measured rates: walk "
           f"{rates['walk']:,.0f}, self-play {rates['selfplay']:,.0f}, engine games at 400 nodes "
           f"{rates['search']:,.0f} positions per CPU second, `{raw['datagen_file']}`) + training (measured, "
           f"process CPU of the chosen rate's run).", "",
           "| data | distinct positions | seen | rate | dev held out (cp) | test (cp) | generation CPU s | training CPU s |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(raw["runs"], key=lambda r: (list(raw["mixes"]).index(r["mix"]), r["budget"])):
        out.append(f"| {r['mix']} | {r['budget']:,} | {r['positions_seen']:,} | {r['lr']:g}{' (edge)' if r['lr_at_edge'] else ''} | "
                   f"{r['dev_held_out_mae_cp']:.1f} | {r['quantised_test_mae_cp']:.1f} | "
                   f"{r['generation_cpu_seconds']:,.0f} | {r['train_cpu_seconds']:,.0f} |")
    out += ["", "Least-squares lines of the dev held-out MAE per mix (cp per doubling; negative = better):", "",
            "| data | per doubling of distinct positions | per doubling of CPU | CPU range (s) |",
            "| --- | ---: | ---: | --- |"]
    for m, ln in s["lines"].items():
        out.append(f"| {m} | {ln['cp_per_data_doubling']:+.2f} | {ln['cp_per_cpu_doubling']:+.2f} | "
                   f"{ln['cpu_range'][0]:,.0f} - {ln['cpu_range'][1]:,.0f} |")
    out += ["", "Lowest dev held-out MAE (cp) each mix bought with at most this much CPU (its measured runs; "
            "- = no run that cheap):", "",
            "| CPU s | " + " | ".join(s["lines"]) + " | lowest |", "| ---: |" + " ---: |" * len(s["lines"]) + " --- |"]
    for a in s["at_equal_cpu"]:
        cells = [f"{a['mae_cp'][m]:.1f}" if m in a["mae_cp"] else "-" for m in s["lines"]]
        out.append(f"| {a['cpu_seconds']:,.0f} | " + " | ".join(cells) + f" | {a['best']} |")
    winners = [a["best"] for a in s["at_equal_cpu"] if a["best"]]
    order = [w for i, w in enumerate(winners) if i == 0 or winners[i - 1] != w]
    out += ["", f"**Most held-out accuracy per CPU hour at the largest budget: `{s['best']}`** (the winner by "
            f"CPU budget, cheapest first: {' -> '.join(f'`{w}`' for w in order)}). Every run sees the same "
            "number of positions, so the cheap sources' gains stop once their variety is used up at that "
            "training length, while the mix with engine games still gains per doubling of data. One seed per "
            "point, one teacher, budgets up to 2 M distinct positions."]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train and measure every mix and budget (resumes)")
    r.add_argument("--study", type=Path, required=True, help="activation study v3 directory (read only)")
    r.add_argument("--work", type=Path, required=True, help="checkpoints and features caches")
    r.add_argument("--budgets", default="125000,250000,500000,1000000,2000000")
    r.add_argument("--mixes", default=",".join(MIXES))
    r.add_argument("--min-seen", type=int, default=MIN_SEEN)
    r.add_argument("--lrs", default=",".join(f"{x:g}" for x in LRS))
    rp = sub.add_parser("report", help="print the Markdown section from the JSON")
    for p in (r, rp):
        p.add_argument("--json", type=Path, default=HERE / "training-data-mix.json")
    rp.add_argument("--md", type=Path, default=None, help="also write the section to this file")
    a = ap.parse_args(argv)
    if a.command == "run":
        run_mixes(a.study, a.work, a.json, [int(x) for x in a.budgets.split(",")], a.mixes.split(","),
                  tuple(float(x) for x in a.lrs.split(",")), a.min_seen)
    else:
        text = markdown(json.loads(a.json.read_text()))
        if a.md:
            a.md.write_text(text)
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The default network of issue 38: trained on activation study v3's distinct training positions
with the data mix chosen by ``research/training_data_mix.py``, rate and epochs chosen on the
study's validation split::

    python research/train_default_network.py --study /work/study-data/v3 --work DIR --mix walk+selfplay \\
        [--width 512] [--variant pairwise] [--lrs 2e-3,4e-3,8e-3] [--sweep-epochs 1] [--epochs 3] \\
        [--chunks N] [--json research/default-network-v3.json]

Reads only the study's finished data files (listed in ``data/seen.json``); every position of the
mix's sources in them is used (each distinct: the study's hash set), none of validation or test.
The rate is the lowest quantised validation loss of ``--sweep-epochs`` runs at each of ``--lrs``;
then one run of ``--epochs`` at that rate; of the sweep's best and that run, the one with the
lower quantised validation loss is the network (``WORK/network.safetensors``, its float model
``WORK/float.safetensors``).  Its quantised MAE is then measured on the study's test split and on
the dev corpus's held-out positions (the model card's metric), neither of which chose anything.
The JSON holds every run (rate, epochs, losses, CPU seconds) and the data's make-up and generation
CPU (measured rates of ``activation-study-v3/datagen-speed.json``).  Runs already in the JSON are
not trained again (their networks are kept in ``WORK``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import activation_study_v3 as S  # noqa: E402
import training_data_mix as M  # noqa: E402

HERE = Path(__file__).resolve().parent


def mix_rows(source: np.ndarray, mix: dict) -> np.ndarray:
    """The largest selection of ``mix`` (its shares exact) that the rows of ``source`` hold."""
    n = min(int(np.isin(source, M.SOURCES[s]).sum() / share) for s, share in mix.items() if share > 0)
    while not M.available(source, mix, n):
        n -= 1
    return M.select(source, mix, n)


def train_default(study: Path, work: Path, out_json: Path, mix_name: str, width: int = 512,
                  variant: str = "pairwise", lrs=(2e-3, 4e-3, 8e-3), sweep_epochs: float = 1.0, epochs: float = 3.0,
                  seed: int = 1, datagen: Path = HERE / "activation-study-v3" / "datagen-speed.json",
                  max_positions: int | None = None, chunks: int | None = None, log=print) -> dict:
    """Train, choose on validation, save and measure the network; returns (and writes) the record.
    ``chunks``: only the first that many training chunks (to repeat a run on a grown data set)."""
    from nnue_infer.formats import save
    from nnue_infer.training.model import model_to_float_network

    cfg = S.load_config(study) if (study / "config.json").exists() else S.Config()
    cfg = dataclasses.replace(cfg, eval_every=M.EVAL_POINTS)
    work.mkdir(parents=True, exist_ok=True)
    raw = json.loads(out_json.read_text()) if out_json.exists() else {"runs": []}
    chunks = [c for c in M.listed_chunks(study) if chunks is None or c < chunks]
    pool = M.load_pool(study, chunks, cfg, work, log)
    val, test = (S.arrays(study, s, cfg, log, cache_dir=work) for s in ("val", "test"))
    rows = mix_rows(pool["source"], M.MIXES[mix_name])
    if max_positions is not None and len(rows) > max_positions:
        rows = M.select(pool["source"], M.MIXES[mix_name], max_positions)
    n = len(rows)
    if len(np.unique(pool["keys"][rows])) != n:
        raise RuntimeError("the training positions are not distinct")
    rates = json.loads(datagen.read_text())["median"]
    counts = {s: int(np.isin(pool["source"][rows], M.SOURCES[s]).sum()) for s in M.MIXES[mix_name]}
    gen = sum(k / rates[M.RATE_KEYS[s]] for s, k in counts.items())
    raw.update({"what": "default network (issue 38)", "study": str(study), "chunks": chunks, "mix": mix_name,
                "shares": M.MIXES[mix_name], "positions": n, "by_source": counts, "generation_cpu_seconds": gen,
                "generation_positions_per_cpu_second": {s: rates[M.RATE_KEYS[s]] for s in counts},
                "ft_width": width, "variant": variant, "seed": seed, "batch_size": cfg.batch_size,
                "lr_final_fraction": cfg.lr_final_fraction, "sigmoid_scale_cp": cfg.sigmoid_scale_cp})

    def run(lr: float, ep: float) -> dict:
        name = f"w{width}-{variant}-{n}-lr{lr:g}-e{ep:g}"
        done = [r for r in raw["runs"] if r["name"] == name and (work / f"{name}.safetensors").exists()]
        if done:
            return done[0]
        t0 = time.perf_counter()
        model, qnet, curve, cpu = M.train(pool, rows, lr, int(ep * n), cfg, val, work / f"{name}.pt", width, variant,
                                          seed, log)
        save(qnet, work / f"{name}.safetensors")
        save(model_to_float_network(model, f"nnue-infer default network ({name})"), work / f"{name}-float.safetensors")
        rec = {"name": name, "lr": lr, "epochs": ep, "positions_seen": curve[-1]["positions"],
               "quantised_val_loss": M.quantised_val_loss(qnet, val, cfg), "float_val_loss": curve[-1]["float_val_loss"],
               "train_cpu_seconds": cpu, "wall_seconds": time.perf_counter() - t0, "curve": curve}
        raw["runs"].append(rec)
        _write(out_json, raw)
        log(f"{name}: quantised val loss {rec['quantised_val_loss']:.6f} ({cpu:.0f} s CPU)")
        return rec

    sweep = [run(lr, sweep_epochs) for lr in lrs]
    best = min(sweep, key=lambda r: r["quantised_val_loss"])
    final = run(best["lr"], epochs) if epochs != sweep_epochs else best
    chosen = min((best, final), key=lambda r: r["quantised_val_loss"])
    from nnue_infer import load

    qnet = load(work / f"{chosen['name']}.safetensors")
    shutil.copyfile(work / f"{chosen['name']}.safetensors", work / "network.safetensors")
    shutil.copyfile(work / f"{chosen['name']}-float.safetensors", work / "float.safetensors")
    raw["chosen"] = {"name": chosen["name"], "lr": chosen["lr"], "epochs": chosen["epochs"],
                     "lr_at_edge": chosen["lr"] in (min(lrs), max(lrs)),
                     "network_bytes": (work / "network.safetensors").stat().st_size,
                     **M.network_errors(qnet, test, M.dev_corpus())}
    raw["train_cpu_seconds"] = sum(r["train_cpu_seconds"] for r in raw["runs"])
    raw["cpu_hours"] = {"generation": gen / 3600, "training_all_runs": raw["train_cpu_seconds"] / 3600,
                        "training_chosen_run": chosen["train_cpu_seconds"] / 3600}
    _write(out_json, raw)
    c = raw["chosen"]
    log(f"chosen {c['name']}: dev held out {c['dev_held_out_mae_cp']:.1f} cp, test {c['quantised_test_mae_cp']:.1f} cp, "
        f"{c['network_bytes']:,} bytes")
    return raw


def _write(path: Path, raw: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(raw, indent=1) + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", type=Path, required=True, help="activation study v3 directory (read only)")
    ap.add_argument("--work", type=Path, required=True, help="networks, checkpoints and features caches")
    ap.add_argument("--mix", required=True, choices=sorted(M.MIXES))
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--variant", default="pairwise")
    ap.add_argument("--lrs", default="2e-3,4e-3,8e-3")
    ap.add_argument("--sweep-epochs", type=float, default=1.0)
    ap.add_argument("--epochs", type=float, default=3.0)
    ap.add_argument("--max-positions", type=int, default=None)
    ap.add_argument("--chunks", type=int, default=None, help="only training chunks 0 .. N-1 (default: all finished)")
    ap.add_argument("--json", type=Path, default=HERE / "default-network-v3.json")
    a = ap.parse_args(argv)
    train_default(a.study, a.work, a.json, a.mix, a.width, a.variant, tuple(float(x) for x in a.lrs.split(",")),
                  a.sweep_epochs, a.epochs, max_positions=a.max_positions, chunks=a.chunks)
    return 0


if __name__ == "__main__":
    sys.exit(main())

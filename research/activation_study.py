"""The feature-transformer activation study (issue 14): gated activations of the GLU family
trained at equal budget, quantised and measured.  One command runs (and resumes) it all::

    python research/activation_study.py run --out study-run        # data, training, measurement
    python research/activation_study.py report --out study-run      # table, plots -> research/

Stages (each skips what is already on disk, so an interrupted run resumes where it stopped;
a training run resumes from its last checkpoint):

1. **data**: the dev games (``games-dev.jsonl``) not held out by datagen's 25 % hash rule are
   split by game id into training / validation / test games; ``nnue-infer datagen`` generates
   each split from its own games and seed (labels: Stockfish 15.1's network); validation and test
   positions that also occur in an earlier split are dropped, so the splits share neither source
   games nor positions.  The dev corpus (``positions-dev.jsonl``) is the second test set.
2. **train**: every variant x seed x budget, same feature set, accumulator, width after the
   activation, data order, optimiser, schedule and number of steps (see :func:`study_architecture`
   and :class:`StudyConfig`); one JSON file per run under ``runs/``.
3. **measure**: per run, quantise (Stockfish scheme), float-vs-quantised error, test MAE against
   the teacher (test split and dev corpus), sparsity of the activation output, batch speed of the
   quantised network relative to ``pairwise`` of the same seed, measured in the same process.

Needs the ``train`` extra (PyTorch) and matplotlib; nothing in ``nnue_infer``'s inference path
imports this file.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from nnue_infer.kernels.nnue.activation import ft_activate



def shared_dir() -> Path:
    """The project's ``shared/`` folder: ``$NNUE_INFER_SHARED``, else beside the checkout, else ``/work/shared``."""
    if os.environ.get("NNUE_INFER_SHARED"):
        return Path(os.environ["NNUE_INFER_SHARED"])
    for cand in (Path(__file__).resolve().parents[1].parent / "shared", Path("/work/shared")):
        if (cand / "data" / "games-dev.jsonl").is_file():
            return cand
    raise FileNotFoundError("shared data not found: set NNUE_INFER_SHARED to the folder holding data/games-dev.jsonl")


#: Variants in table order: ungated baselines, the two-branch gates, one-branch, none, smooth gates.
VARIANTS = ("crelu", "screlu", "pairwise", "pairwise_screlu", "glu", "bilinear", "hswish_glu", "lut_glu")
#: Share of the non-held-out dev games per split, by a hash of the game id.
SPLITS = (("train", 0.70), ("val", 0.15), ("test", 0.15))


@dataclass(frozen=True)
class StudyConfig:
    """Everything that is equal across variants (stored in every run's JSON).

    Attributes
    ----------
    ft_width : int
        Accumulator width L1 per perspective of the paired activations; the element-wise
        ``crelu``/``screlu`` get ``ft_width // 2`` so the first dense layer reads ``ft_width``
        inputs in every variant.
    positions : tuple of int
        Positions generated for training, validation and test.
    short_steps : int
        Optimiser steps of the short budget; the long budget is ``long_factor`` times more.
    long_factor : int
        Ratio of the budgets (separate runs, each with its full cosine schedule).
    batch_size, lr, lr_final_fraction, sigmoid_scale_cp : training hyper-parameters
        Adam, cosine decay from ``lr`` to ``lr * lr_final_fraction`` over the run's steps.
    seeds : tuple of int
        Seeds (initialisation and batch order; the data is the same for every seed).
    eval_every : int
        Validation-loss points per run (loss curves).
    """

    ft_width: int = 128
    positions: tuple[int, int, int] = (1_000_000, 40_000, 40_000)
    short_steps: int = 1000
    long_factor: int = 4
    batch_size: int = 1024
    lr: float = 2e-3
    lr_final_fraction: float = 0.05
    sigmoid_scale_cp: float = 600.0
    seeds: tuple[int, ...] = (1, 2, 3)
    eval_every: int = 10
    data_seed: int = 1

    @property
    def budgets(self) -> dict[str, int]:
        return {"short": self.short_steps, "long": self.short_steps * self.long_factor}


def split_of(game_id: str) -> str:
    """Split of a dev game by a SHA-1 hash of its id (stable; independent of datagen's hold-out)."""
    h = int.from_bytes(hashlib.sha1(f"activation-study:{game_id}".encode()).digest()[:4], "little") / 2**32
    acc = 0.0
    for name, share in SPLITS:
        acc += share
        if h < acc:
            return name
    return SPLITS[-1][0]


def _keys(data: dict) -> np.ndarray:
    """One row per position: what a network sees (bitboards + side to move), as a void view for set tests."""
    rows = np.concatenate([data["bitboards"], data["stm"].astype(np.int64)[:, None]], axis=1)
    return np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


def _subset(data: dict, mask: np.ndarray) -> dict:
    out = {k: (v[mask] if isinstance(v, np.ndarray) and v.ndim and len(v) == len(mask) else v) for k, v in data.items()}
    return out


def make_data(out: Path, cfg: StudyConfig, log=print) -> dict[str, Path]:
    """Stage 1: games split by id, ``nnue-infer datagen`` per split, cross-split de-duplication.

    Writes ``data/games-{split}.jsonl``, ``data/{split}-raw.npz`` (datagen's output),
    ``data/{split}.npz`` (de-duplicated) and ``data/splits.json``; returns the split paths.
    """
    from nnue_infer.training.datagen import is_held_out, load_positions, save

    d = out / "data"
    d.mkdir(parents=True, exist_ok=True)
    games = [json.loads(line) for line in open(shared_dir() / "data" / "games-dev.jsonl") if line.strip()]
    usable = [g for g in games if not is_held_out(str(g["id"]), 0.25)]
    paths = {}
    info = {"games_total": len(games), "games_usable": len(usable), "splits": {}}
    for i, ((name, _), n) in enumerate(zip(SPLITS, cfg.positions)):
        gpath = d / f"games-{name}.jsonl"
        subset = [g for g in usable if split_of(str(g["id"])) == name]
        gpath.write_text("".join(json.dumps(g) + "\n" for g in subset))
        raw = d / f"{name}-raw.npz"
        if not raw.exists():
            t0 = time.perf_counter()
            cmd = ["nnue-infer", "datagen", "-o", str(raw) + ".tmp", "-n", str(n), "--seed", str(100 * cfg.data_seed + i),
                   "--games", str(gpath), "--exclude", str(shared_dir() / "data" / "positions-dev.jsonl"), "--quiet"]
            log("$ " + " ".join(cmd))
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            os.replace(str(raw) + ".tmp", raw)
            log(f"  {name}: {n} positions in {time.perf_counter() - t0:.0f} s")
        info["splits"][name] = {"games": len(subset), "game_ids": [g["id"] for g in subset]}
        paths[name] = raw
    seen = None
    for name, _ in SPLITS:
        final = d / f"{name}.npz"
        data = load_positions(paths[name])
        keys = _keys(data)
        keep = np.ones(len(keys), bool) if seen is None else ~np.isin(keys, seen)
        info["splits"][name].update(positions_raw=int(len(keys)), positions=int(keep.sum()),
                                    dropped_as_seen_in_earlier_split=int((~keep).sum()))
        if not final.exists():
            sub = _subset(data, keep)
            sub["meta"] = json.dumps({**data["meta"], "activation_study_split": name})
            save(final, sub)
        seen = keys if seen is None else np.concatenate([seen, keys[keep]])
        paths[name] = final
    (d / "splits.json").write_text(json.dumps(info, indent=1))
    return paths


# -- architecture and runs ----------------------------------------------------------------------

def study_architecture(variant: str, cfg: StudyConfig):
    """The network of one variant: the bundled default network's shape with ``cfg.ft_width``.

    Chess768 with 4 mirrored king buckets -> feature transformer (+8 PSQT) -> activation ->
    ``cfg.ft_width`` inputs -> 8 layer stacks of 16 ([SqrClippedReLU | ClippedReLU] on 15, one
    forward skip) -> 32 ClippedReLU -> 1.  ``crelu``/``screlu`` act element-wise, so their
    accumulator is ``ft_width // 2`` wide (same number of inputs for the first dense layer, half
    the feature-transformer parameters); every paired variant has the same accumulator.
    """
    from nnue_infer.network import FT_ACTIVATIONS
    from nnue_infer.quantisation import SCHEMES
    from nnue_infer.training.train import default_architecture

    width = cfg.ft_width if FT_ACTIVATIONS[variant].paired else cfg.ft_width // 2
    return dataclasses.replace(default_architecture(width), ft_activation=variant,
                               ft_shift=SCHEMES["stockfish"].shift_for(variant))


@dataclass(frozen=True)
class Run:
    variant: str
    seed: int
    budget: str

    @property
    def name(self) -> str:
        return f"{self.budget}-{self.variant}-s{self.seed}"


#: Order of the long runs within a seed: the reference first, then the gated variants, the ungated last.
LONG_ORDER = ("pairwise", "bilinear", "glu", "lut_glu", "hswish_glu", "pairwise_screlu", "crelu", "screlu")


def planned_runs(cfg: StudyConfig, variants=VARIANTS) -> list[Run]:
    """All runs in the order they are trained: every short run first, then the long runs seed by seed,
    each seed in :data:`LONG_ORDER` (so that an interrupted study has complete short-budget results,
    whole seeds of the long one, and the comparisons with ``pairwise`` paired by seed first)."""
    runs = [Run(v, s, "short") for s in cfg.seeds for v in variants]
    runs += [Run(v, s, "long") for s in cfg.seeds for v in sorted(variants, key=LONG_ORDER.index)]
    return runs


def _features(out: Path, split: str, arch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features int[n, 2, 32], buckets int64[n], teacher values float32[n]) of a split, cached on disk."""
    from nnue_infer.training.datagen import load_positions
    from nnue_infer.training.model import prepare_features

    cache = out / "data" / f"{split}-features.npz"
    if cache.exists():
        with np.load(cache) as z:
            return z["features"], z["buckets"], z["values"]
    data = load_positions(out / "data" / f"{split}.npz")
    feats, buckets = prepare_features(data, arch)
    values = data["value"].astype(np.float32)
    with open(str(cache) + ".tmp", "wb") as f:
        np.savez(f, features=feats, buckets=buckets, values=values)
    os.replace(str(cache) + ".tmp", cache)
    return feats, buckets, values


def train_run(out: Path, run: Run, cfg: StudyConfig, log=print) -> dict:
    """Stage 2 for one run: train (resuming from ``runs/NAME/checkpoint.pt``), write ``float.safetensors``
    and ``runs/NAME/train.json`` (configuration, validation-loss curve, times)."""
    import torch

    from nnue_infer.formats import save
    from nnue_infer.training.model import FloatModel, model_to_float_network, win_probability_mse

    d = out / "runs" / run.name
    done = d / "train.json"
    if done.exists():
        return json.loads(done.read_text())
    d.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    arch = study_architecture(run.variant, cfg)
    f_tr, b_tr, v_tr = (torch.from_numpy(a) for a in _features(out, "train", arch))
    f_va, b_va, v_va = (torch.from_numpy(a) for a in _features(out, "val", arch))
    total = cfg.budgets[run.budget]
    model = FloatModel(arch, run.seed, fused=False)
    dense = list(model.layer_weights) + list(model.layer_biases)
    opt = torch.optim.Adam([{"params": [model.ft_weights, model.ft_biases, model.psqt_weights]},
                            {"params": dense}], lr=cfg.lr)
    step, curve, seconds = 0, [], 0.0
    ckpt = d / "checkpoint.pt"
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, curve, seconds = state["step"], state["curve"], state["seconds"]
        log(f"{run.name}: resumed at step {step}")
    n = len(v_tr)
    per_epoch = n // cfg.batch_size
    order = None

    @torch.no_grad()
    def validate() -> tuple[float, float]:
        model.eval()
        loss = err = 0.0
        for s in range(0, len(v_va), 8192):
            pred = model(f_va[s:s + 8192].long(), b_va[s:s + 8192])
            loss += float(win_probability_mse(pred, v_va[s:s + 8192], arch, 361.0, cfg.sigmoid_scale_cp)) * len(pred)
            err += float((pred - v_va[s:s + 8192]).abs().sum()) * 100.0 / 361.0
        model.train()
        return loss / len(v_va), err / len(v_va)

    every = max(1, total // cfg.eval_every)
    t0 = time.perf_counter()
    train_loss, count = 0.0, 0
    while step < total:
        epoch, k = divmod(step, per_epoch)
        if order is None or k == 0 or order[0] != epoch:
            g = torch.Generator().manual_seed(run.seed * 1_000_003 + epoch)  # batch order: a function of seed and epoch
            order = (epoch, torch.randperm(n, generator=g))
        idx = order[1][k * cfg.batch_size:(k + 1) * cfg.batch_size]
        t = step / max(total - 1, 1)
        lr = cfg.lr * (cfg.lr_final_fraction + (1 - cfg.lr_final_fraction) * 0.5 * (1 + np.cos(np.pi * t)))
        for group in opt.param_groups:
            group["lr"] = lr
        pred = model(f_tr[idx].long(), b_tr[idx])
        loss = win_probability_mse(pred, v_tr[idx], arch, 361.0, cfg.sigmoid_scale_cp)
        if not torch.isfinite(loss):
            raise RuntimeError(f"{run.name}: loss {float(loss)} at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        model.clip_weights()
        step += 1
        train_loss += float(loss.detach())
        count += 1
        if step % every == 0 or step == total:
            val_loss, val_mae = validate()
            seconds += time.perf_counter() - t0
            t0 = time.perf_counter()
            curve.append({"step": step, "lr": lr, "train_loss": train_loss / count, "val_loss": val_loss,
                          "val_mae_cp": val_mae, "seconds": seconds})
            train_loss, count = 0.0, 0
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "curve": curve, "seconds": seconds}, str(ckpt) + ".tmp")
            os.replace(str(ckpt) + ".tmp", ckpt)
            log(f"{run.name}: step {step}/{total} val loss {val_loss:.6f} MAE {val_mae:.1f} cp ({seconds:.0f} s)")
    fnet = model_to_float_network(model, f"activation study {run.name}")
    save(fnet, d / "float.safetensors")
    result = {"run": run.name, "variant": run.variant, "seed": run.seed, "budget": run.budget, "steps": total,
              "config": dataclasses.asdict(cfg), "architecture": json.loads(arch.to_json()),
              "ft_parameters": int(fnet.ft_weights.size + fnet.ft_biases.size),
              "train_seconds": seconds, "curve": curve, "final_val_loss": curve[-1]["val_loss"],
              "final_val_mae_cp": curve[-1]["val_mae_cp"]}
    done.write_text(json.dumps(result, indent=1))
    ckpt.unlink()
    return result


# -- measurement --------------------------------------------------------------------------------

def test_fens(out: Path) -> list[str]:
    """FENs of the test split (cached in ``data/test-fens.txt``)."""
    from nnue_infer.training.datagen import load_positions, to_board

    path = out / "data" / "test-fens.txt"
    if not path.exists():
        test = load_positions(out / "data" / "test.npz")
        path.write_text("".join(to_board(test, i).fen() + "\n" for i in range(len(test["value"]))))
    return path.read_text().splitlines()


@njit(cache=True)
def activate_positions(acc, code, clamp_max, shift, table, out):
    """The engine's ``ft_activate`` over many positions: ``acc`` int16[n, 2, L1] (side to move first),
    ``out`` int16[n, W]; for timing the activation alone."""
    for i in range(acc.shape[0]):
        ft_activate(acc[i], 0, code, clamp_max, shift, table, out[i])


def accumulators(qnet, feats: np.ndarray) -> np.ndarray:
    """int16[n, 2, L1] accumulators (side to move first) of positions ``feats`` int[n, 2, 32], summed
    in int64 and checked to fit int16."""
    arch = qnet.architecture
    w = np.concatenate([qnet.ft_weights.astype(np.int64), np.zeros((1, arch.ft_width), np.int64)])
    acc = qnet.ft_biases.astype(np.int64) + w[feats.astype(np.int64)].sum(axis=2)
    if np.abs(acc).max() > 32767:
        raise OverflowError("accumulator beyond int16")
    return acc.astype(np.int16)


def ft_outputs(qnet, feats: np.ndarray) -> np.ndarray:
    """The quantised feature-transformer activation of positions, computed by the engine's kernel.

    ``feats`` int[n, 2, 32] (side to move first, padded with the number of features); returns
    int16[n, ft_output_width] (values in int8/uint8 range, side to move's half first), i.e. the
    first dense layer's input.  Accumulators are summed in int64 and checked to fit int16.
    """
    arch = qnet.architecture
    out = np.empty((len(feats), arch.ft_output_width), np.int16)
    activate_positions(accumulators(qnet, feats), arch.ft.code, arch.ft_clamp, arch.ft_shift, qnet.compute_layout[1], out)
    return out


def sparsity(out: np.ndarray) -> dict:
    """Zero outputs and all-zero 4-byte blocks (4 consecutive int8/uint8 inputs of fc_0: the unit a
    sparse first layer skips, Stockfish's ``find_nnz`` over int32 chunks); per-position shares."""
    zero = out == 0
    per_pos = zero.mean(axis=1)
    blocks = zero.reshape(len(out), -1, 4).all(axis=2)
    per_pos_blocks = blocks.mean(axis=1)
    return {"zero_fraction": float(per_pos.mean()), "zero_block_fraction": float(per_pos_blocks.mean()),
            "zero_fraction_hist": np.histogram(per_pos, bins=20, range=(0, 1))[0].tolist(),
            "zero_block_fraction_hist": np.histogram(per_pos_blocks, bins=20, range=(0, 1))[0].tolist(),
            "negative_fraction": float((out < 0).mean()), "saturated_fraction": float((np.abs(out) >= 120).mean())}


@functools.lru_cache(maxsize=1)
def _dev_corpus(shared: str) -> list:
    """The dev corpus (Stockfish 15.1's values of real positions), read once per process."""
    from nnue_infer.training.distil import read_corpus

    return read_corpus(Path(shared) / "data" / "positions-dev.jsonl")


def measure_run(out: Path, run: Run, cfg: StudyConfig, n_cross: int = 1000, n_bound: int = 200,
                n_sparse: int = 4000, log=print) -> dict:
    """Stage 3 for one trained run: ``runs/NAME/measure.json`` and ``runs/NAME/network.safetensors``.

    * quantisation with the Stockfish scheme (QA 127, QB 64, output scale 16), clipped parameters;
    * float-vs-quantised error (cp) on ``n_cross`` test positions, and the share of ``n_bound``
      positions within :class:`~nnue_infer.quantisation.ErrorBound`;
    * test MAE vs the teacher (Stockfish 15.1's network) in cp of the quantised network on the
      whole test split and on the dev corpus (all, and positions not derived from training games);
    * sparsity of the activation output on ``n_sparse`` test positions.
    """
    from nnue_infer.training.crosscheck import crosscheck
    from nnue_infer.training.datagen import load_positions
    from nnue_infer.training.distil import agreement, corpus_accuracy
    from nnue_infer.evaluator import Evaluator
    from nnue_infer.float_network import forward_float
    from nnue_infer.formats import load, save
    from nnue_infer.quantisation import SCHEMES, ErrorBound, quantise_with_report

    d = out / "runs" / run.name
    done = d / "measure.json"
    if done.exists():
        return json.loads(done.read_text())
    fnet = load(d / "float.safetensors")
    qnet, report = quantise_with_report(fnet, SCHEMES["stockfish"])
    save(qnet, d / "network.safetensors")
    test = load_positions(out / "data" / "test.npz")
    fens = test_fens(out)
    ev = Evaluator(qnet)
    q_values = ev.evaluate_batch(fens).astype(np.float64)
    teacher_cp = test["value"].astype(np.float64) * 100.0 / 361.0
    test_acc = agreement(q_values * 100.0 / 361.0, teacher_cp)
    cc = crosscheck(fnet, qnet, fens[:n_cross]).summary()
    bound = ErrorBound(fnet, qnet)
    within = [abs(ev.evaluate(f) - forward_float(fnet, f)) <= bound(f) for f in fens[:n_bound]]
    feats, _, _ = _features(out, "test", qnet.architecture)
    sp = sparsity(ft_outputs(qnet, feats[:n_sparse]))
    dev = corpus_accuracy(qnet, _dev_corpus(str(shared_dir())), 361.0, 0.25)
    result = {"run": run.name, "quantisation": str(report), "clipped": [str(c) for c in report.clipped],
              "test": test_acc, "dev": dev, "float_vs_quantised": cc,
              "within_error_bound": float(np.mean(within)), "sparsity": sp,
              "network_bytes": (d / "network.safetensors").stat().st_size}
    done.write_text(json.dumps(result, indent=1))
    log(f"{run.name}: test MAE {test_acc['mae_cp']:.1f} cp, dev MAE {dev['all']['mae_cp']:.1f} cp, "
        f"float-vs-quantised {cc['mae_cp']:.2f} cp, zeros {sp['zero_fraction']:.2f}, blocks {sp['zero_block_fraction']:.2f}")
    return result


def measure_speed(out: Path, cfg: StudyConfig, seed: int, budget: str = "long", positions: int = 20000,
                  repeats: int = 7, variants=VARIANTS, log=print) -> dict | None:
    """Batch evaluation speed of the quantised networks of one seed, interleaved in one process
    (``evaluate_batch`` on one thread over test FENs, best of ``repeats``), as ratios to ``pairwise``;
    and the activation kernel alone (``ft_activate`` over 4,000 test positions' accumulators).

    Writes ``speed-{budget}-s{seed}.json``; ``None`` when a network is missing.
    """
    import numba

    from nnue_infer.evaluator import Evaluator
    from nnue_infer.formats import load

    path = out / f"speed-{budget}-s{seed}.json"
    if path.exists():
        return json.loads(path.read_text())
    nets = {}
    for v in variants:
        p = out / "runs" / Run(v, seed, budget).name / "network.safetensors"
        if not p.exists():
            return None
        nets[v] = Evaluator(load(p))
    fens = test_fens(out)[:positions]
    numba.set_num_threads(1)
    for ev in nets.values():
        ev.evaluate_batch(fens[:100])  # compile
    feats = _features(out, "test", nets["pairwise"].network.architecture)[0][:4000]
    kernel_args = {}
    for v, ev in nets.items():
        q = ev.network
        a = q.architecture
        kernel_args[v] = (accumulators(q, feats), a.ft.code, a.ft_clamp, a.ft_shift, q.compute_layout[1],
                          np.empty((len(feats), a.ft_output_width), np.int16))
        activate_positions(*kernel_args[v])
    best = {v: float("inf") for v in nets}
    kernel = {v: float("inf") for v in nets}
    for _ in range(repeats):
        for v, ev in nets.items():
            t0 = time.perf_counter()
            ev.evaluate_batch(fens)
            best[v] = min(best[v], time.perf_counter() - t0)
            t0 = time.perf_counter()
            activate_positions(*kernel_args[v])
            kernel[v] = min(kernel[v], time.perf_counter() - t0)
    result = {"seed": seed, "budget": budget, "positions": len(fens), "repeats": repeats, "threads": 1,
              "us_per_position": {v: 1e6 * t / len(fens) for v, t in best.items()},
              "ratio_to_pairwise": {v: best["pairwise"] / t for v, t in best.items()},
              "activation_ns_per_position": {v: 1e9 * t / len(feats) for v, t in kernel.items()},
              "activation_ratio_to_pairwise": {v: kernel["pairwise"] / t for v, t in kernel.items()}}
    path.write_text(json.dumps(result, indent=1))
    log(f"speed s{seed}: " + ", ".join(f"{v} {r:.2f}x (activation {result['activation_ratio_to_pairwise'][v]:.2f}x)"
                                      for v, r in result["ratio_to_pairwise"].items()))
    return result


# -- driver ---------------------------------------------------------------------------------------

def load_config(out: Path, cfg: StudyConfig | None) -> StudyConfig:
    """The study's configuration: ``out/config.json`` when it exists (a resumed study keeps its
    settings; a different explicit one is refused, except more seeds: ``--seeds 1,2,3,4,5`` extends a
    study of seeds 1,2,3 and is written back), else ``cfg`` (written there)."""
    path = out / "config.json"
    if path.exists():
        stored = json.loads(path.read_text())
        stored = StudyConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()})
        if (cfg is not None and cfg.seeds[:len(stored.seeds)] == stored.seeds
                and dataclasses.replace(cfg, seeds=stored.seeds) == stored and cfg != stored):
            path.write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
            return cfg
        if cfg is not None and cfg != stored:
            raise SystemExit(f"{path}: the study there was started with other settings:\n  {stored}\n"
                             f"asked for\n  {cfg}\nuse another --out or the same settings")
        return stored
    cfg = cfg or StudyConfig()
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    return cfg


def worker(out: Path, shard: int, jobs: int, variants=VARIANTS, log=print, **measure) -> None:
    """Train and measure the planned runs with index % jobs == shard, in order (``measure``: keyword
    arguments of :func:`measure_run`)."""
    cfg = load_config(out, None)
    for i, run in enumerate(planned_runs(cfg, variants)):
        if i % jobs == shard:
            train_run(out, run, cfg, log)
            measure_run(out, run, cfg, log=log, **measure)


def run_study(out: Path, cfg: StudyConfig | None, jobs: int = 1, variants=VARIANTS, log=print) -> None:
    """Everything: data, then ``jobs`` worker processes (training + measurement), then speed per seed."""
    cfg = load_config(out, cfg)
    make_data(out, cfg, log)
    arch = study_architecture("pairwise", cfg)
    for split in ("train", "val", "test"):
        _features(out, split, arch)
    test_fens(out)
    if jobs == 1:
        worker(out, 0, 1, variants, log)
    else:
        procs = [subprocess.Popen([sys.executable, __file__, "worker", "--out", str(out), "--shard", str(k),
                                   "--jobs", str(jobs), "--variants", ",".join(variants)]) for k in range(jobs)]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"worker exit codes {codes}")
    for budget in cfg.budgets:
        for seed in cfg.seeds:
            measure_speed(out, cfg, seed, budget, variants=variants, log=log)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="data, training, measurement (resumes)")
    w = sub.add_parser("worker", help="(internal) one shard of the runs")
    rep = sub.add_parser("report", help="table, raw JSON and plots from what has finished")
    for p in (r, w, rep):
        p.add_argument("--out", type=Path, default=Path("study-run"), help="working directory (default: study-run)")
        p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated activations")
    r.add_argument("--jobs", type=int, default=1, help="training processes (one torch thread each)")
    r.add_argument("--ft-width", type=int, default=StudyConfig.ft_width)
    r.add_argument("--positions", default=",".join(map(str, StudyConfig.positions)), help="train,val,test positions")
    r.add_argument("--short-steps", type=int, default=StudyConfig.short_steps)
    r.add_argument("--long-factor", type=int, default=StudyConfig.long_factor)
    r.add_argument("--batch-size", type=int, default=StudyConfig.batch_size)
    r.add_argument("--seeds", default=",".join(map(str, StudyConfig.seeds)))
    w.add_argument("--shard", type=int, required=True)
    w.add_argument("--jobs", type=int, required=True)
    rep.add_argument("--dest", type=Path, default=Path(__file__).resolve().parent,
                     help="where activation-study.md lives; raw JSON and plots go to DEST/activation-study/")
    a = ap.parse_args(argv)
    variants = tuple(a.variants.split(","))
    unknown = set(variants) - set(VARIANTS)
    if unknown or "pairwise" not in variants:
        ap.error(f"--variants: unknown {sorted(unknown)} (known: {', '.join(VARIANTS)}); pairwise is the reference")
    if a.command == "run":
        cfg = StudyConfig(ft_width=a.ft_width, positions=tuple(int(x) for x in a.positions.split(",")),
                          short_steps=a.short_steps, long_factor=a.long_factor, batch_size=a.batch_size,
                          seeds=tuple(int(x) for x in a.seeds.split(",")))
        run_study(a.out, cfg, a.jobs, variants)
    elif a.command == "worker":
        worker(a.out, a.shard, a.jobs, variants)
    else:
        from activation_study_report import write_report

        write_report(a.out, a.dest, variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())

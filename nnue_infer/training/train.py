"""Distillation trainer: fit a float network of any :class:`~nnue_infer.network.Architecture` to
teacher values (a positions file from :mod:`nnue_infer.training.datagen`), with PyTorch on the CPU.
The model and its loss are :mod:`nnue_infer.training.model`; :class:`Trainer` trains its Numba
form, :class:`nnue_infer.training.fast.FastModel`.

Needs the optional extra ``train`` (``pip install 'nnue-infer[train]'``: PyTorch); the rest of
the package never imports torch.

Schedule and outputs
--------------------
Adam with a cosine learning-rate decay from ``lr`` to ``lr * lr_final_fraction`` over all epochs;
a held-out validation split (a seeded random ``val_fraction`` of the positions); after every
epoch a checkpoint (``checkpoint.pt``, resumable), a line in ``loss.jsonl`` and the plot
``loss.png`` (training and validation loss per epoch).

Source: nnue-pytorch ``model.py`` (sparse feature transformer, bucketed layer stacks, weight
clipping to the quantisable range, sigmoid-scaled loss), Stockfish 15.1 ``nnue/``.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import TrainingError
from ..network import Architecture

try:
    import torch
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("nnue_infer.training.train needs PyTorch: pip install 'nnue-infer[train]'") from _exc

from .fast import FastModel  # noqa: E402 (after the extra's check)
from .model import model_to_float_network, prepare_features, win_probability_mse  # noqa: E402


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of a training run (stored with checkpoints and in ``loss.jsonl``).

    Attributes
    ----------
    epochs : int
        Passes over the training split.
    batch_size : int
        Positions per optimiser step.
    lr : float
        Initial Adam learning rate.
    lr_final_fraction : float
        The cosine schedule ends at ``lr * lr_final_fraction``.
    weight_decay : float
        Adam weight decay on the dense layers (not on the feature transformer).
    val_fraction : float
        Share of positions held out for validation (at most ``max_val`` positions); it must
        leave at least :data:`MIN_VALIDATION` validation positions and one training position.
    max_val : int
        Cap on the validation split.
    sigmoid_scale_cp : float
        S of the loss: win probability = sigmoid(centipawns / S).
    seed : int
        Seeds the split, the initialisation and the batch order.
    threads : int
        PyTorch intra-op threads.
    """

    epochs: int = 10
    batch_size: int = 16384
    lr: float = 1e-3
    lr_final_fraction: float = 0.02
    weight_decay: float = 0.0
    val_fraction: float = 0.01
    max_val: int = 50_000
    sigmoid_scale_cp: float = 400.0
    seed: int = 1
    threads: int = 1


#: Fewest validation positions a run accepts: the summary's correlation and spread need two.
MIN_VALIDATION = 2


def validation_size(n: int, config: TrainConfig) -> int:
    """Validation positions of a run over ``n`` positions: ``round(n * val_fraction)``, at most ``max_val``.

    Raises
    ------
    TrainingError
        (``field`` ``"val_fraction"``) fewer than :data:`MIN_VALIDATION` validation positions, or
        none left for training; the message gives the counts and a fraction that works.
    """
    c = config
    n_val = min(c.max_val, int(round(n * c.val_fraction)))
    if n_val < MIN_VALIDATION:
        raise TrainingError(f"{c.val_fraction!r} of {n} positions leaves {n_val} validation position"
                            f"{'' if n_val == 1 else 's'}; need at least {MIN_VALIDATION} (the summary's correlation "
                            f"and spread are undefined below): use {_significant(MIN_VALIDATION / n, math.ceil)} "
                            "or more", field="val_fraction")
    if n_val >= n:
        raise TrainingError(f"{c.val_fraction!r} of {n} positions leaves no training position: "
                            f"use {_significant((n - 1) / n, math.floor)} or less", field="val_fraction")
    return n_val


def _significant(x: float, rounding) -> str:
    """``x`` (> 0) to 3 significant digits, rounded by ``rounding`` (``math.ceil`` or ``math.floor``)."""
    scale = 10.0 ** (math.floor(math.log10(x)) - 2)
    return f"{rounding(x / scale) * scale:.3g}"


def _plot(log: list[dict], path: Path) -> None:
    from .plotting import pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    ep = [r["epoch"] for r in log]
    ax.plot(ep, [r["train_loss"] for r in log], marker="o", label="training")
    ax.plot(ep, [r["val_loss"] for r in log], marker="o", label="validation")
    ax.set_xlabel("epoch")
    ax.set_ylabel("MSE of sigmoid(cp / S)")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(ep, [r["val_mae_cp"] for r in log], color="tab:green", linestyle="--", label="validation MAE (cp)")
    ax2.set_ylabel("validation MAE vs teacher (cp)")
    lines = ax.get_lines() + ax2.get_lines()
    ax.legend(lines, [l.get_label() for l in lines], loc="upper right")
    ax.set_title("nnue-infer train: loss per epoch")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


class Trainer:
    """Trains a :class:`~nnue_infer.training.model.FloatModel` of ``arch`` on a positions file's arrays.

    Parameters
    ----------
    arch : Architecture
        What to train (feature set, widths, activations, layer stacks, buckets).
    data : dict
        Arrays of a positions file (:func:`nnue_infer.training.datagen.load_positions`): ``bitboards``
        int64[n, 8], ``stm`` uint8[n], ``value`` int32[n] (teacher, internal units, side to move).
    config : TrainConfig
        Hyper-parameters.
    out_dir : path
        Where ``checkpoint.pt``, ``loss.jsonl`` and ``loss.png`` go (made, with its parents, when
        the first epoch ends).
    teacher_units_per_pawn : float
        Internal units per pawn of the teacher's values (361: Stockfish 15.1).

    Raises
    ------
    TrainingError
        Fewer than 3 positions, a bad configuration (a ``val_fraction`` leaving fewer than
        :data:`MIN_VALIDATION` validation positions or no training position: :func:`validation_size`)
        or unrepresentable positions.
    """

    def __init__(self, arch: Architecture, data: dict, config: TrainConfig, out_dir, teacher_units_per_pawn: float = 361.0,
                 progress: bool = True) -> None:
        c = config
        problems = [f"{name} = {value!r}: {rule}" for name, value, ok, rule in (
            ("epochs", c.epochs, c.epochs >= 1, "need >= 1"),
            ("batch_size", c.batch_size, c.batch_size >= 1, "need >= 1"),
            ("threads", c.threads, c.threads >= 1, "need >= 1"),
            ("lr", c.lr, math.isfinite(c.lr) and c.lr > 0, "need a finite number > 0"),
            ("lr_final_fraction", c.lr_final_fraction, 0 <= c.lr_final_fraction <= 1, "need 0 .. 1"),
            ("val_fraction", c.val_fraction, 0 < c.val_fraction < 1, "need 0 < val_fraction < 1"),
            ("max_val", c.max_val, c.max_val >= MIN_VALIDATION, f"need >= {MIN_VALIDATION}"),
            ("sigmoid_scale_cp", c.sigmoid_scale_cp, math.isfinite(c.sigmoid_scale_cp) and c.sigmoid_scale_cp > 0,
             "need a finite number > 0 (the loss divides by it)"),
            ("seed", c.seed, c.seed >= 0, "need >= 0")) if not ok]
        if problems:
            raise TrainingError("config: " + "; ".join(problems))
        n = len(data["value"])
        if n < MIN_VALIDATION + 1:
            raise TrainingError(f"positions: need at least {MIN_VALIDATION + 1} ({MIN_VALIDATION} to validate, "
                                f"1 to train), got {n}")
        n_val = validation_size(n, c)
        torch.set_num_threads(c.threads)
        self.arch, self.config, self.progress = arch, c, progress
        self.teacher_units_per_pawn = float(teacher_units_per_pawn)
        self.out_dir = Path(out_dir)
        feats, buckets = prepare_features(data, arch)
        self.features = torch.from_numpy(feats)
        self.buckets = torch.from_numpy(buckets)
        self.values = torch.from_numpy(np.asarray(data["value"], np.float32))
        perm = np.random.default_rng(c.seed).permutation(n)
        self.val_idx = torch.from_numpy(np.sort(perm[:n_val]))
        self.train_idx = torch.from_numpy(perm[n_val:])
        self.model = FastModel(arch, c.seed)  # FloatModel's parameters and semantics, Numba first layer
        dense = list(self.model.layer_weights) + list(self.model.layer_biases)
        self.optimizer = torch.optim.Adam([
            {"params": [self.model.ft_weights, self.model.ft_biases, self.model.psqt_weights], "weight_decay": 0.0},
            {"params": dense, "weight_decay": c.weight_decay},
        ], lr=c.lr)
        self.steps_per_epoch = max(1, math.ceil(len(self.train_idx) / c.batch_size))
        self.total_steps = self.steps_per_epoch * c.epochs
        self.step = 0
        self.epoch = 0
        self.checkpoints_saved = 0  # by this trainer (run() keeps a failed run's directory only when > 0)
        self.log: list[dict] = []
        self.generator = torch.Generator().manual_seed(c.seed)

    def lr_at(self, step: int) -> float:
        """Cosine decay from ``lr`` to ``lr * lr_final_fraction`` over all steps."""
        c = self.config
        t = min(step / max(self.total_steps - 1, 1), 1.0)
        return c.lr * (c.lr_final_fraction + (1 - c.lr_final_fraction) * 0.5 * (1 + math.cos(math.pi * t)))

    def _batch(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.features[idx].long(), self.buckets[idx], self.values[idx]

    @torch.no_grad()
    def validate(self) -> tuple[float, float]:
        """(loss, mean absolute error in centipawns against the teacher) on the validation split."""
        self.model.eval()
        losses, errs, n = 0.0, 0.0, 0
        for start in range(0, len(self.val_idx), 65536):
            f, b, v = self._batch(self.val_idx[start:start + 65536])
            pred = self.model(f, b)
            losses += float(win_probability_mse(pred, v, self.arch, self.teacher_units_per_pawn, self.config.sigmoid_scale_cp)) * len(v)
            cp_pred = pred * (100.0 / self.arch.units_per_pawn)
            cp_true = v * (100.0 / self.teacher_units_per_pawn)
            errs += float((cp_pred - cp_true).abs().sum())
            n += len(v)
        self.model.train()
        return losses / n, errs / n

    def train_epoch(self) -> dict:
        """One pass over the training split; returns (and logs) the epoch's figures."""
        from tqdm import tqdm

        c = self.config
        t0 = time.perf_counter()
        order = self.train_idx[torch.randperm(len(self.train_idx), generator=self.generator)]
        total, count = 0.0, 0
        bar = tqdm(range(self.steps_per_epoch), desc=f"epoch {self.epoch + 1}/{c.epochs}", unit="step",
                   disable=not self.progress, leave=False)
        for s in bar:
            idx = order[s * c.batch_size:(s + 1) * c.batch_size]
            f, b, v = self._batch(idx)
            lr = self.lr_at(self.step)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            pred = self.model(f, b)
            loss = win_probability_mse(pred, v, self.arch, self.teacher_units_per_pawn, c.sigmoid_scale_cp)
            if not torch.isfinite(loss):
                raise TrainingError(f"the training loss became {float(loss.detach())} at step {self.step} "
                                    f"(epoch {self.epoch + 1}); lower the learning rate (lr = {c.lr:.3g})")
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            self.model.clip_weights()
            self.step += 1
            total += float(loss.detach()) * len(idx)
            count += len(idx)
            if s % 20 == 0:
                bar.set_postfix(loss=f"{total / count:.5f}", lr=f"{lr:.2e}")
        bar.close()
        val_loss, val_mae = self.validate()
        if not (math.isfinite(val_loss) and math.isfinite(val_mae)):
            raise TrainingError(f"the validation loss became {val_loss} after step {self.step} (epoch {self.epoch + 1}); "
                                f"lower the learning rate (lr = {self.config.lr:.3g})")
        self.epoch += 1
        record = {"epoch": self.epoch, "step": self.step, "lr": self.lr_at(self.step - 1), "train_loss": total / count,
                  "val_loss": val_loss, "val_mae_cp": val_mae, "seconds": time.perf_counter() - t0}
        self.log.append(record)
        self.save_checkpoint()  # first: the checkpoint holds the log the other two files show
        (self.out_dir / "loss.jsonl").write_text("".join(json.dumps(r) + "\n" for r in self.log))
        _plot(self.log, self.out_dir / "loss.png")
        return record

    def fit(self, on_epoch=None) -> list[dict]:
        """Train the remaining epochs; ``on_epoch(record)`` is called after each.  Returns the log."""
        while self.epoch < self.config.epochs:
            record = self.train_epoch()
            if on_epoch is not None:
                on_epoch(record)
        return self.log

    def save_checkpoint(self) -> Path:
        """Write ``checkpoint.pt`` (whole or not at all: the previous one stays until the new one is
        complete): model, optimiser, step, epoch, log, config and architecture."""
        from ..inputs import replacing

        path = self.out_dir / "checkpoint.pt"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with replacing(path) as tmp:
            torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step,
                        "epoch": self.epoch, "log": self.log, "config": dataclasses.asdict(self.config),
                        "architecture": self.arch.to_json(), "generator": self.generator.get_state()}, tmp)
        self.checkpoints_saved += 1
        return path

    def load_checkpoint(self, path) -> None:
        """Resume from a checkpoint of the same architecture (raises :class:`TrainingError` otherwise)."""
        state = torch.load(path, weights_only=False)
        if state["architecture"] != self.arch.to_json():
            raise TrainingError(f"{path}: checkpoint is for another architecture")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.epoch, self.log = state["step"], state["epoch"], state["log"]
        self.generator.set_state(state["generator"])

    def float_network(self, description: str = ""):
        """The trained :class:`~nnue_infer.float_network.FloatNetwork`."""
        return model_to_float_network(self.model, description)

    @torch.no_grad()
    def predict(self, idx: torch.Tensor) -> np.ndarray:
        """Float model values (internal units, side to move) of positions ``idx`` of the data."""
        self.model.eval()
        out = [self.model(*self._batch(idx[s:s + 65536])[:2]) for s in range(0, len(idx), 65536)]
        self.model.train()
        return torch.cat(out).numpy().astype(np.float64)


def default_king_buckets() -> tuple[int, ...]:
    """King-bucket table of the bundled default network (4 buckets, with mirroring to files e-h).

    By the own king's oriented square (rank 1 = own back rank, files e-h after mirroring):
    0 on g1/h1 (castled short), 1 on e1/f1 (home), 2 on ranks 2-3, 3 on ranks 4-8 (active
    king: endgames).  Files a-d carry the mirror image (unused with mirroring).
    """
    table = []
    for sq in range(64):
        rank, file = sq // 8, max(sq % 8, 7 - sq % 8)
        table.append(0 if rank == 0 and file >= 6 else 1 if rank == 0 else 2 if rank <= 2 else 3)
    return tuple(table)


def default_architecture(ft_width: int = 256) -> Architecture:
    """The ``default`` preset: the bundled network's architecture at width 256 with ``pairwise``
    (the bundled network itself is this preset at width 512 with ``bilinear``, see ``weights/README.md``).

    Chess768 with :func:`default_king_buckets` and horizontal mirroring (own king on files e-h)
    -> 2 x ``ft_width`` feature transformer with pairwise multiplication (+8 PSQT) -> 8 layer
    stacks (by piece count) of 16 (15 as [SqrClippedReLU | ClippedReLU], 1 forward skip) -> 32
    ClippedReLU -> 1, in Stockfish 15.1's units (600 per float 1.0, 361 per pawn).
    """
    from ..network import HiddenLayer

    return Architecture(
        feature_set="Chess768", ft_width=ft_width, ft_activation="pairwise", ft_clamp=127, ft_shift=7,
        psqt_buckets=8, output_buckets=8,
        layers=(HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"), HiddenLayer(1, "none")),
        skip_index=15, king_buckets=default_king_buckets(), mirror="e-h",
    )


def architecture_from_spec(spec: str, ft_width: int | None = None, ft_activation: str | None = None) -> Architecture:
    """An architecture from a preset name (``default``, ``stockfish-15.1``) or a JSON file
    (:meth:`Architecture.to_json`); ``ft_width`` overrides the width, ``ft_activation`` the feature
    transformer's activation (a name of :data:`nnue_infer.network.FT_ACTIVATIONS`; the bundled default
    network is ``default`` with width 512 and ``bilinear``).  A different activation gets the
    feature-transformer shift the quantiser gives it at the architecture's QA
    (:meth:`nnue_infer.quantisation.QuantisationScheme.shift_for`: at QA = 127, 0 for crelu, 7 for
    pairwise and bilinear, 14 for hswish_glu, 21 for pairwise_screlu), since the preset's shift is
    its own activation's.

    Raises :class:`TrainingError` for an unknown preset or activation, or an unreadable file.
    """
    from ..network import FT_ACTIVATIONS, stockfish_15_1_architecture
    from ..quantisation import QuantisationScheme

    presets = {"default": default_architecture, "stockfish-15.1": stockfish_15_1_architecture}
    if ft_activation is not None and ft_activation not in FT_ACTIVATIONS:
        raise TrainingError(f"ft_activation {ft_activation!r}: not one of {', '.join(FT_ACTIVATIONS)}",
                            field="ft_activation")
    if spec in presets:
        arch = presets[spec]()
    else:
        try:
            arch = Architecture.from_json(Path(spec).read_text())
        except OSError as exc:
            raise TrainingError(f"architecture {spec!r}: not a preset ({', '.join(presets)}) and not readable: {exc}") from exc
    changes = {"ft_width": ft_width, "ft_activation": ft_activation}
    if ft_activation and ft_activation != arch.ft_activation:
        changes["ft_shift"] = QuantisationScheme(qa=arch.ft_clamp).shift_for(ft_activation)
    return dataclasses.replace(arch, **{k: v for k, v in changes.items() if v is not None})


def describe_seeds(seed) -> str:
    """The data's seeds for a network's description: ``seed 3``; for concatenated files (a list,
    :func:`nnue_infer.training.datagen.concatenate`, nested one level) each distinct seed once, in
    order, and how many files carry none (training-data files, a study's chunks):
    ``seeds 1, 2 and 64 files without one``.
    """
    if not isinstance(seed, list):
        return "no seed" if seed is None else f"seed {seed}"
    seed = [s for item in seed for s in (item if isinstance(item, list) else [item])]  # files of files
    known = list(dict.fromkeys(s for s in seed if s is not None))
    missing = seed.count(None)
    parts = [f"seed{'s' if len(known) > 1 else ''} {', '.join(map(str, known))}"] if known else []
    if missing:
        parts.append(f"{missing} file{'s' if missing > 1 else ''} without {'one' if known else 'a seed'}")
    return " and ".join(parts) or "no seed"


#: The file a failed run that kept its checkpoint leaves in its directory (:func:`run`).
FAILED = "failed.json"


def run(data_path, out_dir, arch: Architecture, config: TrainConfig, eval_positions=None, resume: bool = False,
        progress: bool = True, crosscheck_positions: int = 2000, log=print) -> dict:
    """Train, quantise and check: what ``nnue-infer train`` does.

    ``data_path`` is one positions file or a list of them (concatenated in order).

    Writes to ``out_dir`` (made, with its parents, when the first epoch ends): ``checkpoint.pt``,
    ``loss.jsonl``, ``loss.png``, ``float.safetensors`` (the float network), ``network.safetensors``
    (quantised with the Stockfish scheme: QA 127, shift 7, QB 64, output scale 16) and
    ``summary.json`` (configuration, times, the quantisation report, the float-vs-quantised
    cross-check on validation positions, and, with ``eval_positions``,
    :func:`nnue_infer.training.distil.corpus_accuracy` on that corpus).  ``summary.json`` is strict
    JSON: a figure that is undefined (a correlation over equal values, a mean over no positions) is
    ``null``, never ``NaN``.

    A run that fails (an exception, an interrupt) before its first checkpoint leaves ``out_dir`` as
    it found it (nothing is made).  One that fails later keeps its checkpoint (``resume`` continues
    from it) and writes :data:`FAILED` (``failed.json``: the error, its type, the stage, the epoch and
    step reached), which a later successful run in the directory removes.

    Returns the summary dict as written (undefined figures ``None``).

    Raises
    ------
    TrainingError
        A bad configuration or data (before anything is written), or a diverged loss.
    ValueError, OSError
        Unreadable positions files or ``eval_positions`` (read before training starts), an
        ``out_dir`` that cannot be written or made (checked first), or an output that cannot be
        written.
    """
    from .crosscheck import crosscheck
    from .datagen import concatenate, load_training_positions, to_board
    from .distil import corpus_accuracy, read_corpus
    from ..formats import save
    from ..quantisation import SCHEMES, quantise_with_report

    out_dir = Path(out_dir)
    _check_run_dir(out_dir)
    t0 = time.perf_counter()
    paths = [data_path] if isinstance(data_path, (str, Path)) else list(data_path)
    data = concatenate([load_training_positions(p) for p in paths])
    corpus = read_corpus(eval_positions) if eval_positions else None  # a bad corpus fails now, not after training
    teacher_upp = float(data["meta"].get("teacher_units_per_pawn", 361))
    trainer = Trainer(arch, data, config, out_dir, teacher_units_per_pawn=teacher_upp, progress=progress)
    made = next((d for d in reversed([out_dir, *out_dir.parents]) if not d.exists()), None)
    stage = "training"
    try:
        if resume and (out_dir / "checkpoint.pt").is_file():
            trainer.load_checkpoint(out_dir / "checkpoint.pt")
            log(f"resumed at epoch {trainer.epoch}")
        log(f"{len(trainer.train_idx)} training and {len(trainer.val_idx)} validation positions, "
            f"{trainer.steps_per_epoch} steps per epoch; features ready in {time.perf_counter() - t0:.1f} s")
        t_train = time.perf_counter()
        trainer.fit(lambda r: log(json.dumps({k: round(v, 6) if isinstance(v, float) else v for k, v in r.items()})))
        train_seconds = time.perf_counter() - t_train
        stage = "export"
        description = (f"nnue-infer distilled network: {len(data['value'])} positions "
                       f"({describe_seeds(data['meta'].get('seed'))}), {config.epochs} epochs")
        fnet = trainer.float_network(description)
        save(fnet, out_dir / "float.safetensors")
        qnet, report = quantise_with_report(fnet, SCHEMES["stockfish"])
        save(qnet, out_dir / "network.safetensors")
        rows = trainer.val_idx[: crosscheck_positions].tolist()
        fens = [to_board(data, i).fen() for i in rows]
        cc = crosscheck(fnet, qnet, fens).summary()
        summary = {
            "data": [str(p) for p in paths], "positions": int(len(data["value"])), "data_meta": data["meta"],
            "architecture": json.loads(arch.to_json()), "config": dataclasses.asdict(config),
            "train_seconds": train_seconds, "final": trainer.log[-1] if trainer.log else None,
            "quantisation": str(report), "crosscheck_float_vs_quantised": cc,
            "network": str(out_dir / "network.safetensors"), "network_bytes": (out_dir / "network.safetensors").stat().st_size,
        }
        if corpus is not None:
            holdout = data["meta"].get("settings", {}).get("holdout_fraction")
            summary["accuracy"] = corpus_accuracy(qnet, corpus, teacher_upp, holdout)
        summary = finite_or_null(summary)
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, allow_nan=False))
    except BaseException as exc:
        _record_failure(out_dir, made, trainer, stage, exc)
        raise
    (out_dir / FAILED).unlink(missing_ok=True)
    return summary


def _check_run_dir(out_dir: Path) -> None:
    """Raise ``NotADirectoryError`` / ``PermissionError`` naming ``out_dir`` when it cannot be written or
    made (its nearest existing ancestor is a file, or not writable): before training, not when the
    first checkpoint is saved."""
    existing = next(d for d in [out_dir, *out_dir.parents] if d.exists() or d == d.parent)
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{existing} is not a directory: no run directory can be made there",
                                 str(out_dir))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"Permission denied: {existing} is not writable", str(out_dir))


def finite_or_null(value):
    """``value`` with every float that is not finite (NaN, infinities) replaced by ``None``, through
    dicts, lists and tuples: what strict JSON (``json.dumps(allow_nan=False)``) accepts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


def _record_failure(out_dir: Path, made: Path | None, trainer: Trainer, stage: str, exc: BaseException) -> None:
    """After a failed :func:`run`: remove the directories it made if it saved no checkpoint, else
    write :data:`FAILED` beside the checkpoint.  Best effort: the run's own error is what is raised."""
    import shutil

    if not trainer.checkpoints_saved:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        return
    record = {"error": str(exc) or type(exc).__name__, "type": type(exc).__name__, "stage": stage,
              "epoch": trainer.epoch, "step": trainer.step, "checkpoint": "checkpoint.pt"}
    try:
        (out_dir / FAILED).write_text(json.dumps(record, indent=1) + "\n")
    except OSError:
        pass


def failure_message(out_dir, exc: BaseException) -> str:
    """``str(exc)``, plus where :func:`run` recorded it when it did (for ``nnue-infer train``)."""
    path = Path(out_dir) / FAILED
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return str(exc)
    if record.get("error") != str(exc):
        return str(exc)
    return (f"{exc} [{path} records the failure; the checkpoint of epoch {record['epoch']} is kept, "
            "--resume continues from it]")

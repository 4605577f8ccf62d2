"""The feature-transformer activation study, version 3 (issue 38): gated activations at width, on
distinct positions, with one primary metric and an Elo stage.  The analysis is fixed in
``research/activation-study-v3-plan.md`` before any run; this file carries it out::

    python research/activation_study_v3.py data --out DIR [--cells all]    # data (resumes; optional)
    python research/activation_study_v3.py run --out DIR                   # sweeps, runs -> results.json (resumes)
    python research/activation_study_v3.py elo --out DIR                   # the Elo stage (match runner hook)
    python research/activation_study_v3.py collect --out DIR               # results.json from the finished runs
    python research/activation_study_v3.py measure-training --json FILE    # training speed by width (sizing)
    python research/activation_study_v3.py estimate --training FILE --datagen FILE   # core-hours of the plan
    python research/activation_study_v3_report.py                          # the .md and plots from results.json

Reuses version 2's machinery by import (:mod:`activation_study_v2`): the network shape
(:func:`activation_study_v2.study_architecture`), the bracketed-sweep rule's bookkeeping, the
checkpointed training loop's pieces (fast trainer, cosine schedule, lock files) and the metrics.
What differs from v2 (each a confound or inaccuracy of v2 named in issue 38):

* **Distinct positions**: the training set of a cell is de-duplicated across all its chunks and
  against validation, test and the dev corpus (64-bit hash of placement and side to move, one
  table over the whole set: :func:`ensure_chunk` excludes every earlier chunk's keys), so
  ``unique_positions == positions_seen`` in every run; :func:`train_run` checks it.
* **Disjoint games in every source**: real-game starts come from the dev games of the split (by
  :func:`activation_study.split_of`); generated games (playouts, self-play, search games) are new
  games made for one split only (seeds differ per split), and no position occurs in two splits
  (the global table).  The standard start position's random openings are shared *as a
  distribution*, not as games.
* **Per-cell learning rates on their own seed**: every variant and cell (FT width x budget) has a
  bracketed sweep on seed :attr:`Config.sweep_seed` (0), which is not an analysis seed; the rate
  with the lowest *validation* loss is used on seeds 1-5 (test positions are never used to choose).
* **Same initialisation for every variant**: the model's default FT biases (``ft_bias_init``).
* **One primary metric**: quantised test MAE in cp; Holm over the primary tests only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import activation_study_v2 as V2  # noqa: E402
from activation_study import shared_dir, split_of  # noqa: E402

HERE = Path(__file__).resolve().parent
#: Variants of the study: the reference, the two gates of v2's best results; ``screlu`` (v2's best
#: ungated baseline at the same first-layer inputs) is added where it fits (:attr:`Config.baseline_cells`).
VARIANTS = ("pairwise", "glu", "bilinear")
BASELINE = "screlu"
REFERENCE = "pairwise"
#: Fields every run record has (issue 38).
RECORD_FIELDS = ("run", "variant", "seed", "budget", "ft_width", "lr", "positions_seen", "unique_positions",
                 "quantised_test_mae_cp", "ft_nonzero_chunk_share", "train_seconds")
#: Fields of each entry of results.json's ``matches`` (issue 38).
MATCH_FIELDS = ("a", "b", "games", "pentanomial", "elo", "elo_error95")


@dataclass(frozen=True)
class Config:
    """Everything fixed across variants (``DIR/config.json``; a resumed study keeps it).

    Attributes
    ----------
    cells : tuple of (int, int)
        (feature-transformer width per perspective, training positions) of every cell.
    baseline_cells : tuple of (int, int)
        Cells that also run :data:`BASELINE`.
    seeds : tuple of int
        Analysis seeds of every cell.
    sweep_seed : int
        Seed of the learning-rate sweeps (not an analysis seed).
    lrs : tuple of float
        First rates of every sweep; while the best rate is the lowest or highest tried, the sweep
        goes on at half or twice it (:func:`sweep_rates`), between ``lr_min`` and ``lr_max``.
    lr_min, lr_max : float
        Bounds of the bracketing (a best rate still at a bound is reported as unbracketed).
    val_positions, test_positions, chunk_positions : int
        Split sizes; training positions come in chunks of this size.
    sources : tuple of (str, float)
        Data sources and their shares of every split (``walk``: datagen's perturbations and
        playouts, 3 children per visited position; ``selfplay``: the teacher's one-ply softmax
        games from the split's dev games, random endgames and the start position; ``search``:
        games of :class:`nnue_infer.search.Engine` at ``search_nodes`` nodes, see
        :mod:`nnue_infer.training.searchplay`).
    search_nodes : int
        Node limit per move of the ``search`` source.
    batch_size, lr_final_fraction, sigmoid_scale_cp
        Adam, cosine decay from ``lr`` to ``lr * lr_final_fraction``; the loss's scale.
    ft_bias_init : str
        ``"default"``: the model's initial FT biases (0.5 + 0.05 N(0, 1)) for every variant.
    eval_every : int
        Validation points (and checkpoints) per run.
    elo_nodes, elo_game_pairs : int
        The Elo stage: nodes per move and game pairs per match.
    amendments : tuple of dict
        Changes made to the plan after it started (``utc``, ``changed``, ``reason``).
    """

    cells: tuple = ((256, 10_000_000), (512, 10_000_000), (1024, 10_000_000), (1024, 40_000_000))
    baseline_cells: tuple = ((256, 10_000_000), (512, 10_000_000))
    seeds: tuple = (1, 2, 3, 4, 5)
    sweep_seed: int = 0
    lrs: tuple = (2e-3, 4e-3, 8e-3)
    lr_min: float = 2.5e-4
    lr_max: float = 6.4e-2
    val_positions: int = 40_000
    test_positions: int = 40_000
    chunk_positions: int = 250_000
    sources: tuple = (("walk", 0.475), ("selfplay", 0.475), ("search", 0.05))
    search_nodes: int = 400
    batch_size: int = 4096
    lr_final_fraction: float = 0.05
    sigmoid_scale_cp: float = 600.0
    ft_bias_init: str = "default"
    eval_every: int = 10
    elo_nodes: int = 2000
    elo_game_pairs: int = 500
    amendments: tuple = ()

    def variants_of(self, cell: tuple) -> tuple:
        """Variants run in ``cell`` (with the baseline where it fits)."""
        return VARIANTS + ((BASELINE,) if tuple(cell) in {tuple(c) for c in self.baseline_cells} else ())

    @property
    def max_budget(self) -> int:
        return max(n for _, n in self.cells)


def load_config(out: Path, cfg: Config | None = None) -> Config:
    """``out/config.json`` if it exists (a different explicit ``cfg`` is refused), else ``cfg`` written there."""
    return V2.load_config(out, cfg, Config)


def study_config(out: Path) -> Config:
    """The configuration of the study in ``out``, for the commands that read a study (``elo``, ``collect``);
    SystemExit naming ``out`` when none is there (a mistyped ``--out`` would otherwise start a new study)."""
    if not (out / "config.json").is_file():
        raise SystemExit(f"{out}: no study there (no config.json); `run --out {out}` starts one")
    return load_config(out)


def cell_arg(text: str) -> tuple[int, int]:
    """``elo --cell WIDTH,POSITIONS`` as a cell ``(width, positions)``; argparse's error naming the text
    when it is not two positive integers."""
    try:
        width, positions = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTH,POSITIONS (two integers, e.g. 1024,10000000)") from None
    if width < 1 or positions < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the width and the positions must be positive")
    return width, positions


# -- data ----------------------------------------------------------------------------------------

SPLIT_CODES = {"val": 1, "test": 2, "train": 3}


def split_games(split: str) -> list[dict]:
    """Dev games of a split (``val``, ``test``, ``train``: :func:`activation_study.split_of`), those
    datagen's 25 % rule does not hold out."""
    from nnue_infer.training.datagen import is_held_out, read_games

    games = read_games(shared_dir() / "data" / "games-dev.jsonl")
    return [g for g in games if not is_held_out(str(g["id"]), 0.25) and split_of(str(g["id"])) == split]


def source_seed(split: str, index: int, source: int, attempt: int) -> int:
    """Seed of one generator call: distinct for every split, chunk, source and attempt."""
    return int(np.random.SeedSequence([SPLIT_CODES[split], index, source, attempt]).generate_state(1)[0])


def generate_source(name: str, n: int, seed: int, games: list[dict], cfg: Config, seen) -> dict:
    """About ``n`` positions (datagen's arrays) of source ``name`` labelled by Stockfish 15.1's network.
    ``search`` emits only positions not in ``seen`` (and adds them); the others ignore ``seen``."""
    import nnue_infer
    from nnue_infer.training import datagen, selfplay

    teacher = nnue_infer.stockfish_15_1_network()
    if name == "walk":
        return datagen.generate(n, seed, teacher, games, None, datagen.GenerationSettings(children=3), progress=False)
    if name == "selfplay":
        return selfplay.generate(n, seed, teacher, None, selfplay.SelfPlaySettings(start_fraction=0.4,
                                                                                   endgame_fraction=0.2),
                                 progress=False, games=games)
    if name == "search":
        from nnue_infer.training import searchplay

        data, summary = searchplay.generate(n, seed, teacher, games=games, seen=seen, progress=False,
                                            settings=searchplay.SearchPlaySettings(nodes=cfg.search_nodes))
        return datagen.positions_from_training_data(data, summary)
    raise ValueError(f"unknown data source {name!r} (walk, selfplay, search)")


def make_part(split: str, index: int, n: int, cfg: Config, seen, log=print) -> dict:
    """``n`` positions of a split's file, distinct from each other and from ``seen`` (which grows by
    them): every source its share (:attr:`Config.sources`), each generated with headroom and
    filtered, called again with the next attempt's seed while short."""
    from nnue_infer.training.positionset import position_hashes

    games = split_games(split)
    parts, meta = [], []
    shares = [(name, share) for name, share in cfg.sources if share > 0]
    counts = [round(share * n) for _, share in shares]
    counts[-1] = n - sum(counts[:-1])
    for src, ((name, _), want) in enumerate(zip(shares, counts)):
        attempt, got = 0, 0
        while got < want:
            ask = want - got if name == "search" else int(1.1 * (want - got)) + 1000
            data = generate_source(name, ask, source_seed(split, index, src, attempt), games, cfg, seen)
            h = position_hashes(data["bitboards"], data["stm"])
            keep = np.ones(len(h), bool) if name == "search" else seen.new_rows(h)
            take = np.flatnonzero(keep)[: want - got]
            if name != "search":
                seen.add(h[take])
            parts.append({k: data[k][take] for k in ("bitboards", "stm", "castling", "ep_square", "value", "source")})
            meta.append({"source": name, "attempt": attempt, "asked": ask, "kept": int(len(take)),
                         "generator": (data["meta"] if isinstance(data["meta"], dict)
                                       else json.loads(str(data["meta"]))).get("generator")})
            got += len(take)
            attempt += 1
    from nnue_infer.training.datagen import FORMAT

    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["format"] = np.array(FORMAT)
    out["meta"] = np.array(json.dumps({"study": "activation-study-v3", "split": split, "index": index, "parts": meta}))
    return out


def _data_dir(out: Path) -> Path:
    d = out / "data"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _seen(out: Path):
    """The data set's position-hash set (``data/seen.npy``) and the files it covers (``data/seen.json``);
    starts with the dev corpus's positions."""
    from nnue_infer.training.datagen import read_exclude
    from nnue_infer.training.positionset import PositionSet, position_hashes

    d = _data_dir(out)
    if (d / "seen.npy").exists():
        return PositionSet.load(d / "seen.npy"), json.loads((d / "seen.json").read_text())
    keys = np.array(sorted(read_exclude(shared_dir() / "data" / "positions-dev.jsonl")), np.uint64).reshape(-1, 9)
    return PositionSet(position_hashes(keys[:, :8], (keys[:, 8] ^ 1).astype(np.uint8))), {"files": []}


def _save_seen(out: Path, seen, covered: dict) -> None:
    d = _data_dir(out)
    seen.save(d / "seen.npy")
    tmp = d / "seen.json.tmp"
    tmp.write_text(json.dumps(covered))
    os.replace(tmp, d / "seen.json")


def file_name(name) -> str:
    return f"train-{name:04d}.npz" if isinstance(name, int) else f"{name}.npz"


def ensure_data(out: Path, cfg: Config, upto: int, log=print) -> None:
    """Validation, test and training chunks ``0 .. upto - 1``, in that order (each excludes every
    earlier file's positions: one hash set over the whole set), resuming where a previous call
    stopped.  One file at a time (lock ``data/data.lock``, taken per file so that ``run`` and ``data``
    processes interleave)."""
    from nnue_infer.training.datagen import load_positions, save
    from nnue_infer.training.positionset import position_hashes

    d = _data_dir(out)
    lock = d / "data.lock"
    for name in ["val", "test", *range(upto)]:
        path = d / file_name(name)
        if path.exists():
            continue
        locked = False  # per file: `run` and `data` processes interleave, neither waits for the other's
        while not path.exists() and not (locked := V2._try_lock(lock)):  # whole list
            time.sleep(2)
        if not locked:  # the other process made it meanwhile
            continue
        try:
            seen, covered = _seen(out)  # read under the lock: the other process may have added files
            for done in sorted(d.glob("*.npz")):
                if done.name not in covered["files"] and not done.name.endswith("-features.npz") \
                        and ".tmp" not in done.name:  # made, then stopped before the set was saved
                    data = load_positions(done)
                    seen.add(position_hashes(data["bitboards"], data["stm"]))
                    covered["files"].append(done.name)
                    _save_seen(out, seen, covered)
            if path.exists():
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            split = name if isinstance(name, str) else "train"
            n = {"val": cfg.val_positions, "test": cfg.test_positions}.get(name, cfg.chunk_positions)
            data = make_part(split, 0 if isinstance(name, str) else name, n, cfg, seen, log)
            meta = json.loads(str(data["meta"]))
            meta["cpu_seconds"] = time.process_time() - c0
            data["meta"] = np.array(json.dumps(meta))
            save(str(path) + ".tmp.npz", data)
            os.replace(str(path) + ".tmp.npz", path)
            covered["files"].append(file_name(name))
            _save_seen(out, seen, covered)
            log(f"data: {file_name(name)} ({n} positions) in {time.perf_counter() - t0:.0f} s, "
                f"{meta['cpu_seconds']:.0f} s CPU; {len(seen)} positions in the set")
        finally:
            lock.unlink(missing_ok=True)


def arrays(out: Path, name, cfg: Config, log=print, cache_dir: Path | None = None) -> dict:
    """Features, buckets, teacher values, position hashes (and FENs for val/test) of a data file,
    cached beside it as ``NAME-features.npz`` (the data made first when missing); ``cache_dir``:
    a cache there instead when none is beside the file (a reader that must not write into ``out``)."""
    from nnue_infer.training.datagen import load_positions, to_board
    from nnue_infer.training.model import prepare_features
    from nnue_infer.training.positionset import position_hashes
    from nnue_infer.training.train import default_architecture

    src = _data_dir(out) / file_name(name)
    if not src.exists():
        ensure_data(out, cfg, name + 1 if isinstance(name, int) else 0, log)
    cache = Path(str(src).replace(".npz", "-features.npz"))
    if cache_dir is not None and not cache.exists():
        cache = Path(cache_dir) / cache.name
    if not cache.exists():
        data = load_positions(src)
        feats, buckets = prepare_features(data, default_architecture())
        extra = {"fens": np.array([to_board(data, i).fen() for i in range(len(data["value"]))])} \
            if isinstance(name, str) else {}
        tmp = f"{cache}.{os.getpid()}.tmp"  # processes sharing the directory may build the same cache
        with open(tmp, "wb") as f:
            np.savez(f, features=feats, buckets=buckets, values=data["value"].astype(np.float32),
                     keys=position_hashes(data["bitboards"], data["stm"]), **extra)
        os.replace(tmp, cache)
    with np.load(cache) as z:
        return {k: z[k] for k in z.files}


class Stream(V2.Stream):
    """v2's run order (chunk by chunk, a seeded permutation within each) over v3's chunks."""

    def _load(self, c: int) -> None:
        if c != self._chunk:
            t0 = time.process_time()
            self._arrays = arrays(self.out, c, self.cfg, self.log)
            self.data_seconds += time.process_time() - t0
            self._perm = np.random.default_rng([self.seed, c]).permutation(len(self._arrays["values"]))
            self._chunk = c


def unique_positions(out: Path, cfg: Config, n: int) -> int:
    """Distinct position hashes among the first ``n`` training positions."""
    C = cfg.chunk_positions
    keys = [arrays(out, c, cfg)["keys"][: n - c * C] for c in range(math.ceil(n / C))]
    return int(len(np.unique(np.concatenate(keys))))


# -- runs ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run(V2.Run):
    """A run of v3: v2's fields (``budget`` in positions) plus the cell's FT width."""

    ft_width: int = 256

    @property
    def name(self) -> str:
        return f"w{self.ft_width}-{self.budget / 1e6:g}m-{self.variant}-s{self.seed}-lr{self.lr:g}"

    @property
    def cell(self) -> tuple:
        return (self.ft_width, self.budget)


def sweep_rates(lrs, loss_of, lr_min: float, lr_max: float) -> tuple[list[float], float | None]:
    """A bracketed sweep: (rates so far, chosen rate or ``None`` while one is unmeasured).

    Starts at ``lrs``; while the best measured rate (lowest ``loss_of(lr)``) is the lowest tried, half
    of it joins (if >= ``lr_min``), while it is the highest, twice it (if <= ``lr_max``); the chosen
    rate is the best once it is bracketed or a bound stops the sweep."""
    return V2.sweep_choice(lrs, lr_max, loss_of, lr_min)


def first_rates(lookup, cfg: Config, variant: str, cell: tuple) -> tuple:
    """The rates a sweep starts with: around the chosen rate of the same variant in the largest
    smaller-budget cell of the same width (half, it, twice) once that is chosen, else :attr:`Config.lrs`."""
    smaller = [c for c in cfg.cells if c[0] == cell[0] and c[1] < cell[1]]
    if smaller:
        _, lr = sweep_of(lookup, cfg, variant, max(smaller, key=lambda c: c[1]))
        if lr is not None:
            return (lr / 2, lr, lr * 2)
    return tuple(cfg.lrs)


def run_files(out: Path):
    """``lookup(run name)``: the quantised validation loss of a finished run in ``out``, else ``None``."""
    def lookup(name):
        p = out / "runs" / f"{name}.json"
        return json.loads(p.read_text())["quantised_val_loss"] if p.exists() else None

    return lookup


def sweep_of(lookup, cfg: Config, variant: str, cell: tuple) -> tuple[list[float], float | None]:
    """:func:`sweep_rates` of ``variant`` in ``cell`` from the finished sweep runs (validation loss).
    ``lookup``: a study directory, or a function from run name to validation loss (``None``: not run)."""
    if isinstance(lookup, Path):
        lookup = run_files(lookup)

    def loss_of(lr):
        return lookup(Run(variant, cfg.sweep_seed, cell[1], lr, ft_width=cell[0]).name)

    return sweep_rates(first_rates(lookup, cfg, variant, cell), loss_of, cfg.lr_min, cfg.lr_max)


def planned_runs(out: Path, cfg: Config) -> list[Run]:
    """Cell by cell in :attr:`Config.cells` order: the sweeps of every variant (interleaved), then
    seed by seed every variant at its chosen rate (so a stopped study has paired runs)."""
    runs, lookup = [], run_files(out)
    for cell in cfg.cells:
        variants = cfg.variants_of(cell)
        sweeps = {v: sweep_of(lookup, cfg, v, cell) for v in variants}
        runs += [Run(v, cfg.sweep_seed, cell[1], lr, "sweep", cell[0]) for v in variants for lr in sweeps[v][0]]
        runs += [Run(v, s, cell[1], sweeps[v][1], ft_width=cell[0]) for s in cfg.seeds for v in variants
                 if sweeps[v][1] is not None]
    return runs


def ft_nonzero_chunk_share(qnet, fens) -> float:
    """Share of the 4-byte chunks of the feature-transformer output (both perspectives) holding a
    non-zero byte: what sparse first-layer inference skips when it is low."""
    from nnue_infer.evaluator import Evaluator

    ft = np.ascontiguousarray(Evaluator(qnet).activations_batch(list(fens)).ft_output).view(np.uint8)
    return float((ft.reshape(len(ft), -1, 4) != 0).any(axis=2).mean())


def inference_us(qnet, fens, repeats: int = 3) -> float:
    """``Evaluator.evaluate_batch`` microseconds per position, process CPU, one Numba thread, best of ``repeats``."""
    import numba

    from nnue_infer.evaluator import Evaluator

    numba.set_num_threads(1)
    ev = Evaluator(qnet)
    ev.evaluate_batch(list(fens[:100]))
    best = math.inf
    for _ in range(repeats):
        t0 = time.process_time()
        ev.evaluate_batch(list(fens))
        best = min(best, time.process_time() - t0)
    return 1e6 * best / len(fens)


def measure(model, arch, cfg: Config, val: dict, test: dict) -> dict:
    """Primary: quantised test MAE (cp).  Secondary: quantised and float validation loss, the FT
    output's non-zero 4-byte chunk share and the integer network's batch speed (10,000 test positions)."""
    import torch

    from nnue_infer.evaluator import Evaluator
    from nnue_infer.quantisation import SCHEMES, quantise_with_report
    from nnue_infer.training.fast import predict
    from nnue_infer.training.model import model_to_float_network, win_probability_mse

    def loss(pred, target):
        return float(win_probability_mse(torch.from_numpy(np.asarray(pred, np.float32)), torch.from_numpy(target),
                                         arch, 361.0, cfg.sigmoid_scale_cp))

    qnet, report = quantise_with_report(model_to_float_network(model, "activation study v3"), SCHEMES["stockfish"])
    ev = Evaluator(qnet)
    q_val = ev.evaluate_batch(list(val["fens"])).astype(np.float32)
    q_test = ev.evaluate_batch(list(test["fens"])).astype(np.float64)
    return {"quantised_test_mae_cp": float(np.mean(np.abs(q_test - test["values"])) * 100.0 / 361.0),
            "quantised_val_loss": loss(q_val, val["values"]),
            "float_val_loss": loss(predict(model, val["features"], val["buckets"]), val["values"]),
            "ft_nonzero_chunk_share": ft_nonzero_chunk_share(qnet, test["fens"][:4000]),
            "inference_us_per_position": inference_us(qnet, test["fens"][:10000]),
            "quantisation": str(report), "qnet": qnet}


def train_run(out: Path, run: Run, cfg: Config, log=print) -> dict:
    """Train and measure one run (resuming from ``runs/NAME.pt``); writes and returns ``runs/NAME.json``.

    Raises
    ------
    RuntimeError
        The run's training positions are not all distinct (``unique_positions != positions_seen``).
    """
    from nnue_infer.formats import save
    from nnue_infer.training.fast import FastModel, make_optimizer

    d, record = V2.start_run(out, run)
    if record is not None:
        return record
    arch = V2.study_architecture(run.variant, run.ft_width)
    B = cfg.batch_size
    total = run.budget // B
    seen = total * B
    unique = unique_positions(out, cfg, seen)
    if unique != seen:
        raise RuntimeError(f"{run.name}: {unique} distinct positions among the first {seen}: the data set is "
                           "not de-duplicated (remake DIR/data)")
    val, test = arrays(out, "val", cfg, log), arrays(out, "test", cfg, log)
    model = FastModel(arch, run.seed)  # ft_bias_init "default": the model's own initial biases, every variant
    opt = make_optimizer(model, run.lr)
    curve, cpu, wall = V2.fit(model, opt, arch, run.lr, total, B, Stream(out, cfg, run.seed, log), val,
                              d / f"{run.name}.pt", cfg.eval_every, cfg.lr_final_fraction, cfg.sigmoid_scale_cp,
                              run.name, log)
    m = measure(model, arch, cfg, val, test)
    qnet = m.pop("qnet")
    net_path = d / f"{run.name}.safetensors"
    save(qnet, net_path)
    record = {"run": run.name, "variant": run.variant, "seed": run.seed, "budget": run.budget,
              "ft_width": arch.ft_width, "cell_ft_width": run.ft_width, "lr": run.lr, "positions_seen": seen,
              "unique_positions": unique, **m, "train_seconds": cpu, "role": run.role, "wall_seconds": wall,
              "steps": total, "batch_size": B, "ft_activation": arch.ft_activation,
              "network_bytes": net_path.stat().st_size, "val_positions": len(val["values"]),
              "test_positions": len(test["values"]), "curve": curve}
    (d / f"{run.name}.json").write_text(json.dumps(record, indent=1))
    (d / f"{run.name}.pt").unlink()
    log(f"{run.name}: test MAE {record['quantised_test_mae_cp']:.2f} cp, val loss {record['quantised_val_loss']:.6f}")
    return record


# -- the Elo stage (hook for nnue_infer.search.match) ------------------------------------------------

def elo_candidates(out: Path, cfg: Config, cell: tuple | None = None) -> dict:
    """Per variant of ``cell`` (default: the largest cell), the network of its seed-median run by the
    primary metric (``None`` while a seed is missing)."""
    cell = tuple(cell) if cell is not None else largest_cell(cfg)
    picks = {}
    for v in cfg.variants_of(cell):
        _, lr = sweep_of(out, cfg, v, cell)
        recs = [json.loads(p.read_text()) for s in cfg.seeds
                if lr is not None and (p := out / "runs" / f"{Run(v, s, cell[1], lr, ft_width=cell[0]).name}.json").exists()]
        if len(recs) < len(cfg.seeds):
            picks[v] = None
            continue
        median = sorted(recs, key=lambda r: r["quantised_test_mae_cp"])[len(recs) // 2]
        picks[v] = out / "runs" / f"{median['run']}.safetensors"
    return picks


def largest_cell(cfg: Config) -> tuple:
    """The cell of the plan's Elo stage: the largest budget, then the widest."""
    return tuple(max(cfg.cells, key=lambda c: (c[1], c[0])))


def play_match(net_a: Path, net_b: Path, cfg: Config, pgn: Path | None = None) -> dict:
    """``net_a`` against ``net_b`` (:func:`nnue_infer.search.match.play_match`), each searched by :class:`nnue_infer.search.Engine` at ``elo_nodes`` nodes per move, game
    pairs (colours swapped) from balanced openings (``generate_openings``: 8 random plies, |static
    eval| <= 100 cp, seed 38), up to ``elo_game_pairs`` pairs with an SPRT (elo0 0, elo1 10, alpha =
    beta = 0.05, normalized Elo) that stops the match at its decision.  Returns ``games``,
    ``pentanomial`` (pairs by ``a``'s points: LL, LD, WL+DD, WD, WW), ``elo`` and ``elo_error95``
    (logistic, from the pentanomial), and the SPRT's ``sprt`` (``result``, ``llr``, bounds).  With ``pgn``, the
    standing so far is kept in ``PGN.progress.json`` after every pair."""
    from nnue_infer.search import match as M
    from nnue_infer.search.statistics import SPRT

    limits = M.Limits(nodes=cfg.elo_nodes)
    specs = [M.PlayerSpec(limits, network=str(net_a), name=Path(net_a).stem),
             M.PlayerSpec(limits, network=str(net_b), name=Path(net_b).stem)]
    openings = M.generate_openings(cfg.elo_game_pairs, plies=8, seed=38, network=str(net_b))
    progress = Path(str(pgn) + ".progress.json") if pgn is not None else None
    standing = (lambda pair, result: M.write_json(result, progress)) if progress is not None else None  # after every pair
    result = M.play_match(specs, games=2 * cfg.elo_game_pairs, openings=openings, pgn=pgn,
                          sprt=SPRT(0.0, 10.0, 0.05, 0.05), concurrency=max(1, (os.cpu_count() or 2) // 2),
                          on_pair=standing)
    r = result.to_dict()
    return {"games": r["games"], "pentanomial": r["pentanomial"], "elo": r["elo"], "elo_error95": r["elo_error95"],
            "sprt": {"result": r["sprt_result"], "llr": r["llr"], "lower": r["lower"], "upper": r["upper"],
                     "settings": r["sprt"]}, "wins": r["wins"], "draws": r["draws"], "losses": r["losses"],
            "forfeits": r["forfeits"], "stopped": r["stopped"]}


def elo_stage(out: Path, cfg: Config, results: Path, cell: tuple | None = None, log=print) -> None:
    """Every gate (and the baseline where it runs) against ``pairwise`` in ``cell`` (default: the
    largest cell, as planned); matches already in ``DIR/matches.json`` are kept (resumable).  A match
    in another cell is an interim result: it is recorded as an amendment in ``config.json``."""
    cell = tuple(cell) if cell is not None else largest_cell(cfg)
    if cell not in {tuple(c) for c in cfg.cells}:
        raise SystemExit(f"elo: {cell[0]} x {cell[1]:,} is not a cell of the study ({cfg.cells})")
    picks = elo_candidates(out, cfg, cell)
    if any(p is None for p in picks.values()):
        raise SystemExit(f"elo: the runs of the cell {cell[0]} x {cell[1]:,} are not all finished: "
                         + ", ".join(v for v, p in picks.items() if p is None))
    if cell != largest_cell(cfg):
        record_interim_elo_cell(out, cfg, cell)
    path = out / "matches.json"
    matches = json.loads(path.read_text()) if path.exists() else []
    for v, net in picks.items():
        if v == REFERENCE or any(m["a"] == v and m["b"] == REFERENCE and tuple(m.get("cell", largest_cell(cfg))) == cell
                                 for m in matches):
            continue
        m = {"a": v, "b": REFERENCE, "cell": list(cell), "net_a": str(net), "net_b": str(picks[REFERENCE]),
             "nodes": cfg.elo_nodes,
             **play_match(net, picks[REFERENCE], cfg, out / f"match-{cell[0]}x{cell[1]}-{v}-{REFERENCE}.pgn")}
        matches.append(m)
        path.write_text(json.dumps(matches, indent=1))
        log(f"elo: {v} vs {REFERENCE} at {cell[0]} x {cell[1]:,}: {m['elo']:+.1f} +- {m['elo_error95']:.1f}")
    collect(out, cfg, results)


def record_interim_elo_cell(out: Path, cfg: Config, cell: tuple) -> None:
    """Append to ``config.json``'s amendments (once per cell) that the Elo stage also ran at ``cell``."""
    stored = json.loads((out / "config.json").read_text())
    if any(a.get("changed", {}).get("elo_cell") == list(cell) for a in stored.get("amendments", [])):
        return
    planned = largest_cell(cfg)
    stored["amendments"] = [*stored.get("amendments", []), {
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "changed": {"elo_cell": list(cell)},
        "reason": f"interim Elo stage at {cell[0]} x {cell[1]:,} while the runs of the planned cell "
                  f"{planned[0]} x {planned[1]:,} are not finished; the same protocol"}]
    tmp = out / "config.json.tmp"
    tmp.write_text(json.dumps(stored, indent=1))
    os.replace(tmp, out / "config.json")


# -- driver --------------------------------------------------------------------------------------

def collect(out: Path, cfg: Config, results: Path) -> dict:
    """Finished runs' records, the data files' make-up and the matches, written to ``results``."""
    runs = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))]
    data = {}
    for p in sorted(_data_dir(out).glob("*.npz")):
        if not p.name.endswith("-features.npz") and ".tmp" not in p.name:  # finished data files only
            with np.load(p) as z:
                data[p.name] = json.loads(str(z["meta"]))
    config = dataclasses.asdict(cfg)
    if (out / "config.json").exists():  # amendments another process wrote since this one started
        config["amendments"] = json.loads((out / "config.json").read_text()).get("amendments", [])
    raw = {"config": config, "runs": runs, "data": data,
           "matches": json.loads((out / "matches.json").read_text()) if (out / "matches.json").exists() else []}
    results.parent.mkdir(parents=True, exist_ok=True)
    tmp = results.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(raw, indent=1))
    os.replace(tmp, results)
    return raw


def run_study(out: Path, cfg: Config | None, results: Path, max_runs: int | None = None, log=print) -> None:
    """Train every planned run not yet finished (re-planning after each: sweeps extend and choose),
    the data made as the runs need it; two processes may share ``out`` (lock files)."""
    cfg = load_config(out, cfg)
    V2.work_through(out, lambda: planned_runs(out, cfg), lambda run: train_run(out, run, cfg, log),
                    lambda: collect(out, cfg, results), max_runs)


# -- sizing: training speed -----------------------------------------------------------------------

def measure_training_speed(widths=(256, 512, 1024), variants=VARIANTS, positions: int = 120_000, steps: int = 12,
                           rounds: int = 3, batch_size: int = 4096, log=print) -> dict:
    """Training speed of the fast trainer (positions per process-CPU second, one PyTorch and one
    Numba thread) for each variant at each FT width, v3's batch size and step (gather, bucket sort,
    forward, backward, Adam, clipping; validation excluded).

    ``positions`` datagen positions (seed 7, the study's settings) are featurised once; each round
    times ``steps`` steps of every configuration in turn (load changes hit all alike), after one
    untimed step each (kernels compiled or loaded).  Returns the raw per-round rates."""
    import numba
    import torch

    import nnue_infer
    from nnue_infer.training.datagen import GenerationSettings, generate, read_games
    from nnue_infer.training.fast import FastModel, make_optimizer, sort_by_bucket, train_step
    from nnue_infer.training.model import prepare_features
    from nnue_infer.training.train import default_architecture

    torch.set_num_threads(1)
    numba.set_num_threads(1)
    games = read_games(shared_dir() / "data" / "games-dev.jsonl")
    data = generate(positions, 7, nnue_infer.stockfish_15_1_network(), games, None,
                    GenerationSettings(children=3), progress=False)
    feats, buckets = prepare_features(data, default_architecture())
    values = data["value"].astype(np.float32)
    rng = np.random.default_rng(7)
    configs = {}
    for w in widths:
        for v in variants:
            arch = V2.study_architecture(v, w)
            model = FastModel(arch, 1)
            configs[(v, w)] = (arch, model, make_optimizer(model, 1e-3))
    rates = {f"{v}-{w}": [] for v, w in configs}

    def step(arch, model, opt):
        take = rng.integers(0, len(values), batch_size)
        train_step(model, opt, sort_by_bucket(feats[take], buckets[take], values[take], arch.output_buckets),
                   361.0, 600.0, 1e-3)

    for cfg in configs.values():
        step(*cfg)
    for r in range(rounds):
        for (v, w), cfg in configs.items():
            t0 = time.process_time()
            for _ in range(steps):
                step(*cfg)
            rates[f"{v}-{w}"].append(steps * batch_size / (time.process_time() - t0))
        log(f"round {r + 1}: " + ", ".join(f"{k} {x[-1] / 1e3:.0f}k" for k, x in rates.items()))
    return {"what": "fast trainer positions per process-CPU second, 1 torch + 1 numba thread",
            "batch_size": batch_size, "steps_per_round": steps, "rounds": rounds, "positions_pool": positions,
            "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_average": os.getloadavg()[0],
            "commit": _head(), "positions_per_cpu_second": rates,
            "median": {k: float(np.median(x)) for k, x in rates.items()}}


def estimate(cfg: Config, training: dict, datagen: dict, sweep_runs: int = 4, overhead_s: float = 40.0) -> dict:
    """Core-hours of the plan from measured rates (:func:`measure_training_speed`'s and
    ``benchmarks/bench_datagen.py --json``'s medians).

    Per cell and variant: ``len(seeds) + sweep_runs`` runs (3 sweep rates plus one extension
    expected; each further extension adds a run), each ``budget / rate`` CPU seconds of training
    plus ``overhead_s`` (validation points, quantisation, metrics); data: the largest budget and the
    validation and test splits at the mix's rate (a source's share over its rate, summed)."""
    speed = {**training["median"]}
    cells = []
    for w, n in cfg.cells:
        for v in cfg.variants_of((w, n)):
            rate = speed.get(f"{v}-{w}")
            runs = len(cfg.seeds) + sweep_runs
            cells.append({"ft_width": w, "budget": n, "variant": v, "runs": runs, "rate": rate,
                          "cpu_seconds": None if rate is None else runs * (n / rate + overhead_s)})
    rates = datagen["median"]
    names = {"walk": "compiled", "selfplay": "selfplay", "search": f"search-{cfg.search_nodes}"}
    per_position = sum(share / rates[names[src]] for src, share in cfg.sources if share > 0)
    positions = cfg.max_budget + cfg.val_positions + cfg.test_positions
    train_s = sum(c["cpu_seconds"] or 0 for c in cells)
    by_cell = {}
    for c in cells:
        key = f"{c['ft_width']} x {c['budget'] / 1e6:g} M"
        by_cell[key] = by_cell.get(key, 0.0) + (c["cpu_seconds"] or 0) / 3600
    return {"runs": cells, "training_core_hours": train_s / 3600, "training_core_hours_by_cell": by_cell,
            "missing_rates": [f"{c['variant']}-{c['ft_width']}" for c in cells if c["rate"] is None],
            "data_positions": positions, "data_positions_per_cpu_second": 1 / per_position,
            "data_core_hours": positions * per_position / 3600,
            "data_core_hours_10m": (10_000_000 + cfg.val_positions + cfg.test_positions) * per_position / 3600,
            "assumptions": {"sweep_runs_per_variant_and_cell": sweep_runs, "overhead_seconds_per_run": overhead_s,
                            "sources": cfg.sources, "search_nodes": cfg.search_nodes}}


def primary_power(cfg: Config, v2_results: Path) -> dict:
    """What the primary family can detect: its size (every non-reference variant of every cell),
    the |t| Holm's first step needs with ``len(seeds)`` seeds, and the minimal detectable MAE
    difference (80 % power) taking v2's pooled SD of paired test-MAE differences at its largest
    budget as the SD to expect."""
    import activation_study_v2_report as R2

    family = sum(len(cfg.variants_of(c)) - 1 for c in cfg.cells)
    raw = json.loads(v2_results.read_text())
    sizes = dict(raw["config"]["budgets"])
    large = max(sizes, key=sizes.get)
    comps = [c for c in R2.comparisons(R2.main_runs(raw), R2._variants(raw), [large])
             if c["metric"] == "quantised_test_mae_cp"]
    pooled = math.sqrt(sum(c["sd"] ** 2 * (c["n"] - 1) for c in comps) / sum(c["n"] - 1 for c in comps))
    p = R2.power(len(cfg.seeds), family)
    return {"family": family, "seeds": len(cfg.seeds), "t_first_step": p["t_first_step"],
            "mdd_sd_units": p["mdd_sd_units"], "v2_pooled_sd_cp": pooled, "v2_budget": sizes[large],
            "mdd_cp": p["mdd_sd_units"] * pooled}


def _head() -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    mt = sub.add_parser("measure-training", help="training speed by variant and FT width (sizing)")
    mt.add_argument("--json", type=Path, required=True)
    mt.add_argument("--widths", default="256,512,1024")
    mt.add_argument("--variants", default=",".join(VARIANTS))
    mt.add_argument("--steps", type=int, default=12)
    mt.add_argument("--rounds", type=int, default=3)
    here = HERE / "activation-study-v3" / "results.json"
    r = sub.add_parser("run", help="sweeps and runs, data as needed (resumes)")
    dp = sub.add_parser("data", help="validation, test and training chunks ahead (resumes)")
    el = sub.add_parser("elo", help="the Elo stage: matches of the largest cell's seed-median networks")
    el.add_argument("--cell", type=cell_arg, default=None,
                    help="WIDTH,POSITIONS of another finished cell (an interim result)")
    co = sub.add_parser("collect", help="results.json from the finished runs")
    for p in (r, dp, el, co):
        p.add_argument("--out", type=Path, required=True, help="working directory (data, runs, checkpoints)")
        p.add_argument("--results", type=Path, default=here)
    r.add_argument("--max-runs", type=int, default=None)
    dp.add_argument("--positions", type=int, default=None,
                    help="training positions to make (default: the largest cell's budget)")
    es = sub.add_parser("estimate", help="core-hours of the plan from measured rates")
    es.add_argument("--training", type=Path, nargs="+", required=True, help="measure-training JSON file(s)")
    es.add_argument("--datagen", type=Path, required=True, help="bench_datagen.py --json file")
    es.add_argument("--json", type=Path, required=True)
    a = ap.parse_args(argv)
    if a.command == "estimate":
        training = {"median": {}}
        for p in a.training:
            training["median"].update(json.loads(p.read_text())["median"])
        result = estimate(Config(), training, json.loads(a.datagen.read_text()))
        result["primary_power"] = primary_power(Config(), HERE / "activation-study-v2" / "results.json")
        result["command"] = "python research/activation_study_v3.py " + " ".join(argv or sys.argv[1:])
        a.json.write_text(json.dumps(result, indent=1))
        print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    elif a.command == "run":
        run_study(a.out, None, a.results, a.max_runs)
    elif a.command == "data":
        cfg = load_config(a.out)
        ensure_data(a.out, cfg, math.ceil((a.positions or cfg.max_budget) / cfg.chunk_positions))
    elif a.command == "elo":
        elo_stage(a.out, study_config(a.out), a.results, a.cell)
    elif a.command == "collect":
        collect(a.out, study_config(a.out), a.results)
    elif a.command == "measure-training":
        result = measure_training_speed(tuple(int(x) for x in a.widths.split(",")), tuple(a.variants.split(",")),
                                        steps=a.steps, rounds=a.rounds)
        result["command"] = "python research/activation_study_v3.py " + " ".join(argv or sys.argv[1:])
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

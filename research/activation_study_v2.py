"""The feature-transformer activation study, version 2 (issue 25): fresh positions seen once,
the fast trainer, integer metrics and a strength proxy.  One command runs (and resumes) it::

    python research/activation_study_v2.py run --out DIR        # data, sweep, runs -> results.json
    python research/activation_study_v2.py data --out DIR       # (optional) data chunks ahead, in parallel
    python research/activation_study_v2.py speed --out DIR      # batch speed of the networks (after the sweep)
    python research/activation_study_v2.py report               # figures + tables of activation-study-v2.md
    python research/activation_study_v2.py collect --out DIR    # results.json from the finished runs (as run does)
    python research/activation_study_v2.py amend --out DIR ... --reason TEXT   # change the plan, on record

Two ``run`` processes may share a directory (each takes the first run no other holds, lock files
``runs/NAME.lock``).  Everything is resumable: data chunks, finished runs (``DIR/runs/NAME.json``) and the running
run's checkpoint (``DIR/runs/NAME.pt``, every ``eval_every``-th of the run) are kept; ``run`` again
continues where it stopped.  After every finished run the raw records are collected into
``research/activation-study-v2/results.json`` (``--results``).

Data (:func:`ensure_split`, :func:`ensure_chunk`)
    The dev games not held out by datagen's 25 % rule are split by a hash of their id
    (:func:`activation_study.split_of`: 70 / 15 / 15 %).  Validation and test positions come
    from datagen episodes on their own games; training positions from the training games in
    chunks of ``chunk_positions`` (datagen seed ``1000 + chunk``), each excluding every
    validation and test position, the dev corpus and the self-play positions of the
    move-agreement set.  Labels: Stockfish 15.1's network (nnue-infer's evaluation).  A run of
    budget P trains on the first P training positions, each once, in an order that depends on
    the seed only within a chunk; ``unique_positions`` counts distinct (placement, side to move)
    among them (different chunks can repeat a position, e.g. an early opening one).

Runs (:func:`planned_runs`)
    1. the learning-rate sweep: every variant at each of ``lrs`` on seed ``sweep_seed``, short budget;
       while a variant's best rate is the highest it tried, its sweep goes on at twice that rate (up
       to ``lr_extend_to``; :func:`sweep_choice`);
    2. every variant x seed x budget at the variant's best sweep rate (lowest quantised validation
       loss; the sweep's own run is reused for that seed), short budget first (seed by seed), then
       long (seeds ``long_seeds``, variant by variant in :data:`LONG_ORDER`).

Amendments (:func:`amend`): a change of plan after the study started (a wider sweep, another long
budget, fewer long seeds) is written into ``config.json`` with its date and reason, and the report
prints it.  A finished run is never re-labelled: a budget cannot change once one of its runs has
finished (a bigger one is added under a new name, ``amend --add-budget long10m=10000000``, and runs on
every seed after the others), and a started run whose checkpoint was made for another number of
steps starts over.

Record (one JSON per run): ``run, variant, seed, budget, ft_width, positions_seen,
unique_positions, lr, float_val_loss, quantised_val_loss, quantised_test_mae_cp, move_agreement,
train_seconds`` (process CPU seconds of the training loop, data loading and generation excluded), plus ``role`` (sweep / main),
``wall_seconds``, ``steps``, the validation curve and the network's size.

Metrics (:func:`measure`): loss = MSE of sigmoid(cp / 600) against the teacher, on the float model
and on the quantised (Stockfish scheme) network's integer values; test MAE in centipawns of the
integer network; ``move_agreement``: on held-out self-play positions (``selfplay.plain`` of
``shared/data/binpack``, plies >= 24, past the random opening moves), the share where the move
whose child the integer network rates best (1 ply, push/evaluate/pop) is Stockfish's depth-4 move.
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
from activation_study import shared_dir, split_of  # noqa: E402
from activation_study_v2_rules import VARIANTS, sweep_choice  # noqa: E402

#: Gates whose value branch is signed: their initial feature-transformer biases are 0.
SIGNED = ("glu", "bilinear", "hswish_glu", "lut_glu")
#: Order of the long runs (all long seeds of a variant, then the next): the reference, then the gates.
LONG_ORDER = ("pairwise", "bilinear", "glu", "lut_glu", "hswish_glu", "pairwise_screlu", "crelu_wide", "crelu", "screlu")
#: Fields every run record has (issue 25).
RECORD_FIELDS = ("run", "variant", "seed", "budget", "ft_width", "positions_seen", "unique_positions", "lr",
                 "float_val_loss", "quantised_val_loss", "quantised_test_mae_cp", "move_agreement", "train_seconds")


@dataclass(frozen=True)
class Config:
    """Everything equal across variants (``DIR/config.json``; a resumed study keeps it).

    Attributes
    ----------
    ft_width, long_ft_width : int
        Accumulator width per perspective (short, long budget) of the paired variants and of
        ``crelu_wide``; ``crelu``/``screlu`` get half.
    budgets : dict
        Training positions per run, by budget name.
    val_positions, test_positions, chunk_positions : int
        Split sizes; training positions are generated in chunks of this size.
    children : int
        Datagen's ``children`` setting (children recorded per visited position).
    batch_size, lrs, lr_final_fraction, sigmoid_scale_cp
        Adam with a cosine decay from ``lr`` to ``lr * lr_final_fraction``; the loss's scale.
    seeds, sweep_seed : seeds of the runs and of the learning-rate sweep.
    long_seeds : tuple
        Seeds of the long budget (empty: ``seeds``).
    lr_extend_to : float
        While a variant's best sweep rate is the highest it tried, the sweep adds twice that rate,
        up to this one (0: the sweep is ``lrs`` only).
    amendments : tuple of dict
        Changes made to the plan after it started (``utc``, ``changed``: field -> [old, new],
        ``reason``), oldest first.
    eval_every : int
        Validation points (and checkpoints) per run.
    agreement_positions : int
        Self-play positions of the move-agreement set.
    """

    ft_width: int = 256
    long_ft_width: int = 256
    budgets: tuple = (("short", 2_000_000), ("long", 10_000_000))
    val_positions: int = 40_000
    test_positions: int = 40_000
    chunk_positions: int = 250_000
    children: int = 3
    batch_size: int = 4096
    lrs: tuple = (2e-3, 4e-3, 8e-3)
    lr_final_fraction: float = 0.05
    sigmoid_scale_cp: float = 600.0
    seeds: tuple = (1, 2, 3, 4, 5)
    sweep_seed: int = 1
    eval_every: int = 10
    agreement_positions: int = 2000
    long_seeds: tuple = ()
    lr_extend_to: float = 0.0
    amendments: tuple = ()

    def budget(self, name: str) -> int:
        return dict(self.budgets)[name]

    def seeds_of(self, budget: str) -> tuple:
        """Seeds of a budget: ``long_seeds`` (or ``seeds``) for ``long``, ``seeds`` for the others."""
        return tuple(self.long_seeds or self.seeds) if budget == "long" else tuple(self.seeds)

    def width(self, budget: str) -> int:
        """Accumulator width of a budget's paired variants: ``ft_width`` for ``short``, else ``long_ft_width``."""
        return self.ft_width if budget == "short" else self.long_ft_width


def tupled(value):
    """JSON lists as tuples, nested ones too (a frozen dataclass's fields compare equal after a round trip)."""
    return tuple(tupled(x) for x in value) if isinstance(value, list) else value


def load_config(out: Path, cfg=None, config_class=None):
    """``out/config.json`` if it exists (a different explicit ``cfg`` is refused), else ``cfg`` written
    there; ``config_class``: the study's configuration dataclass (default :class:`Config`)."""
    config_class = config_class or Config
    path = out / "config.json"
    if path.exists():
        stored = config_class(**{k: tupled(v) for k, v in json.loads(path.read_text()).items()})
        if cfg is not None and cfg != stored:
            raise SystemExit(f"{path}: the study there has other settings:\n  {stored}\nasked for\n  {cfg}")
        return stored
    cfg = cfg or config_class()
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    return cfg


def amend(out: Path, reason: str, log=print, **changes) -> Config:
    """Change the plan of the study in ``out`` (fields of :class:`Config`), recording the change.

    Raises
    ------
    SystemExit
        No study in ``out``, an unknown field, no reason given, or a long budget changed after a
        long run finished (its record would no longer match the plan).
    """
    if not (out / "config.json").exists():
        raise SystemExit(f"{out / 'config.json'}: no study there to amend")
    cfg = load_config(out)
    unknown = set(changes) - {f.name for f in dataclasses.fields(Config)} | ({"amendments"} & set(changes))
    if unknown:
        raise SystemExit(f"amend: unknown or protected field(s) {sorted(unknown)}")
    if not reason.strip():
        raise SystemExit("amend: give the reason of the change (--reason)")
    new = dataclasses.replace(cfg, **changes)
    changed = {k: [getattr(cfg, k), getattr(new, k)] for k in changes if getattr(cfg, k) != getattr(new, k)}
    if not changed:
        log("amend: nothing changes")
        return cfg
    old_sizes, new_sizes = dict(cfg.budgets), dict(new.budgets)
    for name, size in old_sizes.items():
        if new_sizes.get(name) != size and any((out / "runs").glob(f"{name}-*.json")):
            raise SystemExit(f"amend: {name} runs have finished with the current {name} budget; it cannot change now "
                             "(add a budget under another name instead)")
    record = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "changed": changed, "reason": reason.strip()}
    new = dataclasses.replace(new, amendments=(*cfg.amendments, record))
    tmp = out / "config.json.tmp"
    tmp.write_text(json.dumps(dataclasses.asdict(new), indent=1))
    os.replace(tmp, out / "config.json")
    log(f"amend: {changed}")
    return load_config(out)


# -- data ------------------------------------------------------------------------------------------

def _games(split: str) -> list[dict]:
    from nnue_infer.training.datagen import is_held_out, read_games

    games = read_games(shared_dir() / "data" / "games-dev.jsonl")
    return [g for g in games if not is_held_out(str(g["id"]), 0.25) and split_of(str(g["id"])) == split]


def agreement_set(n: int) -> list[tuple[str, str]]:
    """(FEN, Stockfish's move in UCI) of ``n`` self-play positions at plies >= 24, evenly spaced over
    ``selfplay.plain`` (depth-4 search moves, Stockfish 15.1's network)."""
    rows, fen, move = [], None, None
    with open(shared_dir() / "data" / "binpack" / "selfplay.plain") as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition(" ")
            if key == "fen":
                fen = value
            elif key == "move":
                move = value
            elif key == "ply" and int(value) >= 24:
                rows.append((fen, move))
    step = max(1, len(rows) // n)
    return rows[::step][:n]


def _key_hashes(data: dict) -> np.ndarray:
    """uint64 hash per position of (bitboards, side to move): what a network sees."""
    bb = np.ascontiguousarray(data["bitboards"]).view(np.uint64)
    h = np.full(len(bb), np.uint64(0xCBF29CE484222325))
    with np.errstate(over="ignore"):
        for col in range(bb.shape[1]):
            h = (h ^ bb[:, col]) * np.uint64(0x100000001B3)
            h ^= h >> np.uint64(29)
        h = (h ^ data["stm"].astype(np.uint64)) * np.uint64(0x100000001B3)
    return h


def _exclusions(out: Path) -> set:
    """Position keys no training position may have: validation, test, dev corpus, move-agreement set."""
    import chess

    from nnue_infer.training.datagen import load_positions, position_key, read_exclude, to_board

    keys = read_exclude(shared_dir() / "data" / "positions-dev.jsonl")
    keys |= {position_key(chess.Board(fen)) for fen, _ in agreement_set(10**9)}
    for split in ("val", "test"):
        data = load_positions(out / "data" / f"{split}.npz")
        keys |= {position_key(to_board(data, i)) for i in range(len(data["value"]))}
    return keys


def _generate(path: Path, n: int, seed: int, split: str, cfg: Config, exclude: set) -> None:
    import nnue_infer
    from nnue_infer.training.datagen import GenerationSettings, generate, save

    data = generate(n, seed, nnue_infer.stockfish_15_1_network(), _games(split), exclude,
                    GenerationSettings(children=cfg.children), progress=False)
    meta = json.loads(str(data["meta"]))
    data["meta"] = np.array(json.dumps({**meta, "activation_study_v2_split": split}))
    save(str(path) + ".tmp.npz", data)
    os.replace(str(path) + ".tmp.npz", path)


#: Seconds an empty lock file may stay empty: its creator writes its process id right after creating it,
#: so an older empty lock is one whose creator died in between.
LOCK_WRITE_SECONDS = 30


def _try_lock(lock: Path) -> bool:
    """Create ``lock`` holding this process's id; ``False`` if another live process holds it (a lock
    whose process is gone, or that stayed empty or unreadable longer than :data:`LOCK_WRITE_SECONDS`,
    is taken over)."""
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                text, age = lock.read_text(), time.time() - lock.stat().st_mtime
            except FileNotFoundError:  # released meanwhile
                continue
            pid = int(text) if text.strip().isdigit() else 0
            if pid > 0:
                try:
                    os.kill(pid, 0)
                    return False
                except PermissionError:  # alive, another user's process
                    return False
                except ProcessLookupError:
                    pass
            elif age < LOCK_WRITE_SECONDS:  # (os.kill(0) would test this process's own group)
                return False
            lock.unlink(missing_ok=True)  # stale
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True


def _locked(path: Path, make) -> None:
    """Run ``make()`` unless ``path`` exists, with a lock file so two processes never make the same
    file; wait while another process holds it."""
    lock = Path(str(path) + ".lock")
    while not path.exists():
        if not _try_lock(lock):
            time.sleep(5)
            continue
        try:
            if not path.exists():
                make()
        finally:
            lock.unlink(missing_ok=True)


def ensure_split(out: Path, split: str, cfg: Config, log=print) -> Path:
    """``DIR/data/{val,test}.npz``: validation / test positions from their own games (datagen seeds
    1, 2; test excludes validation positions and both exclude the dev corpus and the agreement set)."""
    import chess

    from nnue_infer.training.datagen import load_positions, position_key, read_exclude, to_board

    path = out / "data" / f"{split}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)

    def make():
        t0 = time.perf_counter()
        exclude = read_exclude(shared_dir() / "data" / "positions-dev.jsonl")
        exclude |= {position_key(chess.Board(fen)) for fen, _ in agreement_set(10**9)}
        if split == "test":
            val = load_positions(ensure_split(out, "val", cfg, log))
            exclude |= {position_key(to_board(val, i)) for i in range(len(val["value"]))}
        n = cfg.val_positions if split == "val" else cfg.test_positions
        _generate(path, n, 1 if split == "val" else 2, split, cfg, exclude)
        log(f"data: {split} ({n} positions) in {time.perf_counter() - t0:.0f} s")

    _locked(path, make)
    return path


def ensure_chunk(out: Path, i: int, cfg: Config, log=print) -> Path:
    """``DIR/data/train-NNNN.npz``: training chunk ``i`` (datagen seed 1000 + i, training games)."""
    path = out / "data" / f"train-{i:04d}.npz"

    def make():
        t0 = time.perf_counter()
        _generate(path, cfg.chunk_positions, 1000 + i, "train", cfg, _cached_exclusions(out))
        log(f"data: chunk {i} ({cfg.chunk_positions} positions) in {time.perf_counter() - t0:.0f} s")

    ensure_split(out, "val", cfg, log)
    ensure_split(out, "test", cfg, log)
    _locked(path, make)
    return path


_EXCLUSIONS: dict = {}


def _cached_exclusions(out: Path) -> set:
    if out not in _EXCLUSIONS:
        _EXCLUSIONS[out] = _exclusions(out)
    return _EXCLUSIONS[out]


def split_arrays(out: Path, name: str, cfg: Config, log=print) -> dict:
    """Features, buckets, teacher values, key hashes (and FENs for val/test) of a data file, cached
    beside it as ``NAME-features.npz``.  ``name``: ``val``, ``test`` or a chunk index."""
    from nnue_infer.training.datagen import load_positions, to_board
    from nnue_infer.training.model import prepare_features
    from nnue_infer.training.train import default_architecture

    src = ensure_chunk(out, name, cfg, log) if isinstance(name, int) else ensure_split(out, name, cfg, log)
    cache = Path(str(src).replace(".npz", "-features.npz"))
    if not cache.exists():
        data = load_positions(src)
        feats, buckets = prepare_features(data, default_architecture())  # every variant has this feature set
        extra = {}
        if not isinstance(name, int):
            extra["fens"] = np.array([to_board(data, i).fen() for i in range(len(data["value"]))])
        with open(str(cache) + ".tmp", "wb") as f:
            np.savez(f, features=feats, buckets=buckets, values=data["value"].astype(np.float32),
                     keys=_key_hashes(data), **extra)
        os.replace(str(cache) + ".tmp", cache)
    with np.load(cache) as z:
        return {k: z[k] for k in z.files}


# -- runs ----------------------------------------------------------------------------------------

def study_architecture(variant: str, width: int):
    """The network of a variant: the bundled default network's shape (Chess768, 4 mirrored king
    buckets, 8 PSQT, 8 layer stacks of 16 -> 32 -> 1) with accumulator ``width`` (half for
    ``crelu``/``screlu``, so the first dense layer reads as many inputs as the paired variants';
    ``crelu_wide`` is ``crelu`` with the full width: the paired variants' feature-transformer
    parameters, twice their first-layer inputs)."""
    from nnue_infer.network import FT_ACTIVATIONS
    from nnue_infer.quantisation import SCHEMES
    from nnue_infer.training.train import default_architecture

    act = "crelu" if variant == "crelu_wide" else variant
    paired = FT_ACTIVATIONS[act].paired
    w = width if paired or variant == "crelu_wide" else width // 2
    return dataclasses.replace(default_architecture(w), ft_activation=act, ft_shift=SCHEMES["stockfish"].shift_for(act))


@dataclass(frozen=True)
class Run:
    variant: str
    seed: int
    budget: str
    lr: float
    role: str = "main"

    @property
    def name(self) -> str:
        return f"{self.budget}-{self.variant}-s{self.seed}-lr{self.lr:g}"


def sweep_of(out: Path, cfg: Config, variant: str) -> tuple[list[float], float | None]:
    """:func:`sweep_choice` of ``variant`` from the finished runs in ``out``."""
    def loss_of(lr):
        p = out / "runs" / f"{Run(variant, cfg.sweep_seed, 'short', lr).name}.json"
        return json.loads(p.read_text())["quantised_val_loss"] if p.exists() else None

    return sweep_choice(cfg.lrs, cfg.lr_extend_to, loss_of)


def best_lr(out: Path, cfg: Config, variant: str) -> float | None:
    """The sweep's best learning rate of ``variant`` (lowest quantised validation loss), ``None``
    while a sweep run is missing."""
    return sweep_of(out, cfg, variant)[1]


def planned_runs(out: Path, cfg: Config, variants=VARIANTS, budgets=None) -> list[Run]:
    """The sweep, then (for variants whose sweep is complete) short runs seed by seed, then long runs
    variant by variant in :data:`LONG_ORDER`, every long seed of a variant before the next variant
    (so a study stopped early has paired long runs of the reference and the first gates, not one
    seed of each); budgets added by an amendment (e.g. ``long10m``) follow, in the same order, on
    every seed of ``seeds``.  A main run at the sweep seed and best rate is the sweep's run.
    ``budgets``: only the runs of these budgets (the sweep counts as short)."""
    sweeps = {v: sweep_of(out, cfg, v) for v in variants}
    runs = [Run(v, cfg.sweep_seed, "short", lr, "sweep") for v in variants for lr in sweeps[v][0]]
    best = {v: sweeps[v][1] for v in variants}
    runs += [Run(v, s, "short", best[v]) for s in cfg.seeds_of("short") for v in variants
             if best[v] is not None and s != cfg.sweep_seed]
    for budget, _ in cfg.budgets:
        if budget != "short":
            runs += [Run(v, s, budget, best[v]) for v in sorted(variants, key=LONG_ORDER.index)
                     for s in cfg.seeds_of(budget) if best[v] is not None]
    return [r for r in runs if budgets is None or r.budget in budgets]


class Stream:
    """The training positions in a run's order: position ``g`` of the run is position
    ``perm[g % C]`` of chunk ``g // C`` (C = chunk size, ``perm`` a permutation seeded by the
    run's seed and the chunk), so any batch can be rebuilt after a restart."""

    def __init__(self, out: Path, cfg: Config, seed: int, log=print) -> None:
        self.out, self.cfg, self.seed, self.log = out, cfg, seed, log
        self._chunk, self._arrays, self._perm = -1, None, None
        self.data_seconds = 0.0  # process CPU time spent loading (or generating) chunks

    def _load(self, c: int) -> None:
        if c != self._chunk:
            t0 = time.process_time()
            self._arrays = split_arrays(self.out, c, self.cfg, self.log)
            self.data_seconds += time.process_time() - t0
            n = len(self._arrays["values"])
            if n != self.cfg.chunk_positions:
                raise RuntimeError(f"chunk {c}: {n} positions, expected {self.cfg.chunk_positions}")
            self._perm = np.random.default_rng([self.seed, c]).permutation(n)
            self._chunk = c

    def batch(self, start: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(features, buckets, values) of run positions ``start .. start + size - 1``."""
        C = self.cfg.chunk_positions
        parts = []
        g = start
        while g < start + size:
            c, k = divmod(g, C)
            self._load(c)
            take = self._perm[k:k + min(C - k, start + size - g)]
            parts.append(tuple(self._arrays[key][take] for key in ("features", "buckets", "values")))
            g += len(take)
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def unique_positions(out: Path, cfg: Config, n: int) -> int:
    """Distinct positions (hash of placement + side to move) among the first ``n`` training positions."""
    C = cfg.chunk_positions
    keys = [split_arrays(out, c, cfg)["keys"][: n - c * C] for c in range(math.ceil(n / C))]
    return int(len(np.unique(np.concatenate(keys))))


def move_agreement(qnet, pairs: list[tuple[str, str]]) -> float:
    """Share of positions where the legal move whose child ``qnet`` rates best for the mover (1 ply:
    the lowest child value, children valued from their side to move) is the given move.

    The children of all positions are valued in one ``evaluate_batch`` call (FENs): the same values
    as ``Evaluator.evaluate_children_batch``, whose first (cold) compile is minutes of CPU.
    """
    import chess

    from nnue_infer.evaluator import Evaluator

    moves, fens = [], []
    for fen, _ in pairs:
        board = chess.Board(fen)
        legal = list(board.legal_moves)
        moves.append(legal)
        for move in legal:
            board.push(move)
            fens.append(board.fen())
            board.pop()
    values = Evaluator(qnet).evaluate_batch(fens)
    hits, start = 0, 0
    for (_, uci), legal in zip(pairs, moves):
        if legal:
            hits += legal[int(np.argmin(values[start:start + len(legal)]))].uci() == uci
        start += len(legal)
    return hits / len(pairs)


def measure(model, arch, cfg: Config, val: dict, test: dict, pairs) -> dict:
    """Float and quantised validation loss, quantised test MAE (cp) and move agreement of a model."""
    import torch

    from nnue_infer.evaluator import Evaluator
    from nnue_infer.quantisation import SCHEMES, quantise_with_report
    from nnue_infer.training.model import model_to_float_network, win_probability_mse
    from nnue_infer.training.fast import predict

    def loss(pred, target):
        return float(win_probability_mse(torch.from_numpy(np.asarray(pred, np.float32)), torch.from_numpy(target), arch, 361.0,
                           cfg.sigmoid_scale_cp))

    fnet = model_to_float_network(model, "activation study v2")
    qnet, report = quantise_with_report(fnet, SCHEMES["stockfish"])
    ev = Evaluator(qnet)
    q_val = ev.evaluate_batch(list(val["fens"])).astype(np.float32)
    q_test = ev.evaluate_batch(list(test["fens"])).astype(np.float64)
    return {"float_val_loss": loss(predict(model, val["features"], val["buckets"]), val["values"]),
            "quantised_val_loss": loss(q_val, val["values"]),
            "quantised_test_mae_cp": float(np.mean(np.abs(q_test - test["values"])) * 100.0 / 361.0),
            "move_agreement": move_agreement(qnet, pairs),
            "quantisation": str(report), "qnet": qnet}


def fit(model, opt, arch, lr0: float, total: int, batch_size: int, stream, val: dict, ckpt: Path, eval_every: int,
        lr_final_fraction: float, sigmoid_scale_cp: float, name: str, log=print) -> tuple[list, float, float]:
    """The training loop of a run (v2 and v3): ``total`` Adam steps of ``batch_size`` positions from
    ``stream`` (position ``g`` of the run at step ``g // batch_size``), a cosine decay from ``lr0`` to
    ``lr0 * lr_final_fraction``; every ``total // eval_every`` steps the float validation loss joins the
    curve and a checkpoint is written to ``ckpt`` (resumed from when it exists and was made for
    ``total`` steps, else started over).  Returns (curve, process-CPU seconds of the steps with data
    loading excluded, wall seconds)."""
    import torch

    from nnue_infer.training.fast import predict, sort_by_bucket, train_step
    from nnue_infer.training.model import win_probability_mse

    B = batch_size
    step, curve, cpu, wall = 0, [], 0.0, 0.0
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        if state.get("total") != total:  # made for another budget (an amended plan): start over
            log(f"{name}: checkpoint of {state.get('total')} steps, the run has {total}: starting over")
        else:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            step, curve, cpu, wall = state["step"], state["curve"], state["cpu"], state["wall"]
            log(f"{name}: resumed at step {step}/{total}")
    every = max(1, total // eval_every)
    c0, w0, tl, tn = time.process_time(), time.perf_counter(), 0.0, 0
    while step < total:
        t = step / max(total - 1, 1)
        lr = lr0 * (lr_final_fraction + (1 - lr_final_fraction) * 0.5 * (1 + math.cos(math.pi * t)))
        f, b, v = stream.batch(step * B, B)
        tl += train_step(model, opt, sort_by_bucket(f, b, v, arch.output_buckets), 361.0, sigmoid_scale_cp, lr)
        tn += 1
        step += 1
        if step % every == 0 or step == total:
            cpu += time.process_time() - c0 - stream.data_seconds
            stream.data_seconds = 0.0
            wall += time.perf_counter() - w0
            with torch.no_grad():
                vl = float(win_probability_mse(torch.from_numpy(predict(model, val["features"], val["buckets"])),
                                               torch.from_numpy(val["values"]), arch, 361.0, sigmoid_scale_cp))
            curve.append({"step": step, "positions": step * B, "lr": lr, "train_loss": tl / tn, "float_val_loss": vl,
                          "train_seconds": cpu})
            tl, tn = 0.0, 0
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "total": total,
                        "curve": curve, "cpu": cpu, "wall": wall}, str(ckpt) + ".tmp")
            os.replace(str(ckpt) + ".tmp", ckpt)
            log(f"{name}: step {step}/{total} float val loss {vl:.6f} ({cpu:.0f} s CPU)")
            c0, w0 = time.process_time(), time.perf_counter()
    return curve, cpu, wall


def start_run(out: Path, run) -> tuple[Path, dict | None]:
    """(``out/runs``, the finished record of ``run`` or ``None``); before a new run, one PyTorch and one
    Numba thread (the studies' speed figures are per core)."""
    import numba
    import torch

    d = out / "runs"
    done = d / f"{run.name}.json"
    if done.exists():
        return d, json.loads(done.read_text())
    d.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    return d, None


def train_run(out: Path, run: Run, cfg: Config, log=print) -> dict:
    """Train and measure one run (resuming from ``runs/NAME.pt``); writes and returns ``runs/NAME.json``."""
    import torch

    from nnue_infer.formats import save
    from nnue_infer.training.fast import FastModel, make_optimizer

    d, record = start_run(out, run)
    if record is not None:
        return record
    arch = study_architecture(run.variant, cfg.width(run.budget))
    val, test = split_arrays(out, "val", cfg, log), split_arrays(out, "test", cfg, log)
    model = FastModel(arch, run.seed)
    if run.variant in SIGNED:
        with torch.no_grad():
            model.ft_biases.zero_()
    opt = make_optimizer(model, run.lr)
    B = cfg.batch_size
    total = cfg.budget(run.budget) // B
    ckpt = d / f"{run.name}.pt"
    curve, cpu, wall = fit(model, opt, arch, run.lr, total, B, Stream(out, cfg, run.seed, log), val, ckpt,
                           cfg.eval_every, cfg.lr_final_fraction, cfg.sigmoid_scale_cp, run.name, log)
    m = measure(model, arch, cfg, val, test, agreement_set(cfg.agreement_positions))
    qnet = m.pop("qnet")
    net_path = d / f"{run.name}.safetensors"
    save(qnet, net_path)
    seen = total * B
    record = {"run": run.name, "variant": run.variant, "seed": run.seed, "budget": run.budget,
              "ft_width": arch.ft_width, "positions_seen": seen, "unique_positions": unique_positions(out, cfg, seen),
              "lr": run.lr, **{k: m[k] for k in ("float_val_loss", "quantised_val_loss", "quantised_test_mae_cp",
                                                  "move_agreement")},
              "train_seconds": cpu, "role": run.role, "wall_seconds": wall, "steps": total, "batch_size": B,
              "ft_activation": arch.ft_activation, "quantisation": m["quantisation"],
              "network_bytes": net_path.stat().st_size, "val_positions": len(val["values"]),
              "test_positions": len(test["values"]), "agreement_positions": cfg.agreement_positions, "curve": curve}
    (d / f"{run.name}.json").write_text(json.dumps(record, indent=1))
    ckpt.unlink()
    log(f"{run.name}: quantised val loss {record['quantised_val_loss']:.6f}, test MAE "
        f"{record['quantised_test_mae_cp']:.2f} cp, move agreement {record['move_agreement']:.3f}")
    return record


def measure_speed(out: Path, cfg: Config, variants=VARIANTS, positions: int = 20000, repeats: int = 7,
                  log=print) -> dict | None:
    """Batch evaluation speed of each variant's integer network (seed ``sweep_seed``, short budget,
    chosen rate) on the current engine: ``Evaluator.evaluate_batch`` of ``positions`` test FENs on one
    Numba thread, process CPU time, ``repeats`` rounds with the networks taking turns in each (load
    changes hit all alike).  Writes ``DIR/speed.json``; ``None`` while a network is missing."""
    import numba

    from nnue_infer.evaluator import Evaluator
    from nnue_infer.formats import load

    nets = {}
    for v in variants:
        lr = best_lr(out, cfg, v)
        path = out / "runs" / f"{Run(v, cfg.sweep_seed, 'short', lr or 0.0).name}.safetensors"
        if lr is None or not path.exists():
            return None
        nets[v] = Evaluator(load(path))
    fens = list(split_arrays(out, "test", cfg)["fens"][:positions])
    numba.set_num_threads(1)
    for ev in nets.values():
        ev.evaluate_batch(fens[:100])  # compile or load the kernels
    times = {v: [] for v in nets}
    for _ in range(repeats):
        for v, ev in nets.items():
            t0 = time.process_time()
            ev.evaluate_batch(fens)
            times[v].append(1e6 * (time.process_time() - t0) / len(fens))
    ref = float(np.median(times["pairwise"]))
    import subprocess

    head = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"
    result = {"utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "engine_commit": head,
              "load_average": os.getloadavg()[0], "positions": len(fens), "repeats": repeats, "threads": 1,
              "clock": "process CPU",
              "us_per_position": times, "median_ratio_to_pairwise": {v: ref / float(np.median(t)) for v, t in times.items()}}
    (out / "speed.json").write_text(json.dumps(result, indent=1))
    log("speed: " + ", ".join(f"{v} {r:.2f}x" for v, r in result["median_ratio_to_pairwise"].items()))
    return result


def anchors(out: Path, cfg: Config, log=print) -> dict:
    """Reference points on the same positions (``DIR/anchors.json``): the move agreement of the
    teacher (Stockfish 15.1's network) and of the bundled default network, 1 ply like the
    variants, and the default network's test MAE (cp) against the teacher."""
    import nnue_infer
    from nnue_infer.evaluator import Evaluator
    from nnue_infer.resources import default_network

    path = out / "anchors.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    if "move_agreement" not in result:
        pairs = agreement_set(cfg.agreement_positions)
        result["move_agreement"] = {"stockfish-15.1": move_agreement(nnue_infer.stockfish_15_1_network(), pairs),
                                    "bundled default network": move_agreement(default_network(), pairs)}
    if "quantised_test_mae_cp" not in result:
        test = split_arrays(out, "test", cfg, log)
        values = Evaluator(default_network()).evaluate_batch(list(test["fens"])).astype(np.float64)
        result["quantised_test_mae_cp"] = {
            "bundled default network": float(np.mean(np.abs(values - test["values"])) * 100.0 / 361.0)}
    if not path.exists() or json.loads(path.read_text()) != result:
        path.write_text(json.dumps(result, indent=1))
        log(f"anchors: {result}")
    return result


def data_generators(out: Path) -> dict:
    """Number of data files (validation, test, training chunks) by the generator in their ``meta``
    (``python-chess`` for files of the generator before the compiled walk, which wrote none)."""
    counts: dict = {}
    for path in (out / "data").glob("*.npz"):
        if path.name.endswith("-features.npz"):
            continue
        with np.load(path) as z:
            name = json.loads(str(z["meta"])).get("generator", "python-chess")
        counts[name] = counts.get(name, 0) + 1
    return counts


def collect(out: Path, cfg: Config, results: Path) -> dict:
    """Every finished run's record (curves included) and the configuration, written to ``results``."""
    runs = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))]
    data = {"config": dataclasses.asdict(cfg), "runs": runs, "data_generators": data_generators(out)}
    for name in ("speed", "anchors"):
        if (out / f"{name}.json").exists():
            data[name] = json.loads((out / f"{name}.json").read_text())
    results.parent.mkdir(parents=True, exist_ok=True)
    tmp = results.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, results)
    return data


def run_study(out: Path, cfg: Config | None, results: Path, variants=VARIANTS, max_runs: int | None = None,
              log=print, budgets=None) -> None:
    """Train every planned run not yet finished (re-planning after each, as the sweep decides rates;
    ``budgets``: only runs of these budgets, see :func:`planned_runs`)."""
    cfg = load_config(out, cfg)
    anchors(out, cfg, log)
    work_through(out, lambda: planned_runs(out, cfg, variants, budgets), lambda run: train_run(out, run, cfg, log),
                 lambda: collect(out, cfg, results), max_runs)


def work_through(out: Path, plan, train, after, max_runs: int | None = None) -> None:
    """Train the planned runs not yet finished (``out/runs/NAME.json``), re-planning after each
    (``plan()``: the runs in order), each the first one no other worker holds (lock files
    ``runs/NAME.lock``: ``run`` may go in two processes), ``after()`` once it is done; at most
    ``max_runs``."""
    done = 0
    while max_runs is None or done < max_runs:
        todo = [r for r in plan() if not (out / "runs" / f"{r.name}.json").exists()]
        if not todo:
            break
        for run in todo:
            lock = out / "runs" / f"{run.name}.lock"
            lock.parent.mkdir(parents=True, exist_ok=True)
            if _try_lock(lock):
                try:
                    train(run)
                finally:
                    lock.unlink(missing_ok=True)
                after()
                done += 1
                break
        else:
            time.sleep(10)  # every remaining run is held by another worker (or waits for the sweep)


def make_data(out: Path, cfg: Config | None, chunks: int, log=print) -> None:
    """Generate the validation and test splits and training chunks ``0 .. chunks - 1`` (with their
    feature caches) ahead of the runs; safe beside a ``run`` process (lock files)."""
    cfg = load_config(out, cfg)
    for name in ["val", "test", *range(chunks)]:
        split_arrays(out, name, cfg, log)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="data, sweep and runs (resumes)")
    dp = sub.add_parser("data", help="generate data chunks ahead (resumes)")
    sp = sub.add_parser("speed", help="batch speed of the seed-1 short networks (after the sweep)")
    rep = sub.add_parser("report", help="figures and tables of activation-study-v2.md from results.json")
    co = sub.add_parser("collect", help="gather the finished runs' records into results.json (as run does)")
    am = sub.add_parser("amend", help="change the plan of a started study, with the reason on record")
    here = Path(__file__).resolve().parent
    for p in (r, dp, sp, am, co):
        p.add_argument("--out", type=Path, required=True, help="working directory (data, runs, checkpoints)")
    r.add_argument("--results", type=Path, default=here / "activation-study-v2" / "results.json")
    r.add_argument("--variants", default=",".join(VARIANTS))
    r.add_argument("--max-runs", type=int, default=None, help="stop after this many runs")
    r.add_argument("--budget", default=None,
                   help="only runs of this budget (short, long or an added one; the sweep counts as short)")
    am.add_argument("--long-budget", type=int, help="positions per long run")
    am.add_argument("--long-seeds", help="seeds of the long runs, e.g. 1,2,3")
    am.add_argument("--add-budget", metavar="NAME=POSITIONS",
                    help="a further budget run on every seed at the long width, e.g. long10m=10000000")
    am.add_argument("--lr-extend-to", type=float, help="extend a sweep whose best rate is its highest, up to this rate")
    am.add_argument("--reason", required=True, help="why the plan changes (kept in config.json and the report)")
    dp.add_argument("--chunks", type=int, required=True)
    sp.add_argument("--results", type=Path, default=here / "activation-study-v2" / "results.json")
    co.add_argument("--results", type=Path, default=here / "activation-study-v2" / "results.json")
    rep.add_argument("--results", type=Path, default=here / "activation-study-v2" / "results.json")
    rep.add_argument("--dest", type=Path, default=here, help="where activation-study-v2.md lives")
    a = ap.parse_args(argv)
    if a.command == "run":
        variants = tuple(a.variants.split(","))
        if set(variants) - set(VARIANTS) or "pairwise" not in variants:
            ap.error(f"--variants: known {', '.join(VARIANTS)}; pairwise is the reference")
        run_study(a.out, None, a.results, variants, a.max_runs, budgets=None if a.budget is None else (a.budget,))
    elif a.command == "amend":
        cfg = load_config(a.out) if (a.out / "config.json").exists() else Config()
        changes = {}
        if a.long_budget is not None:
            changes["budgets"] = tuple((b, a.long_budget if b == "long" else n) for b, n in cfg.budgets)
        if a.add_budget is not None:
            name, _, size = a.add_budget.partition("=")
            if not name or name in dict(cfg.budgets) or not size.isdigit():
                ap.error(f"--add-budget {a.add_budget!r}: give NAME=POSITIONS with a new name")
            changes["budgets"] = (*changes.get("budgets", cfg.budgets), (name, int(size)))
        if a.long_seeds is not None:
            changes["long_seeds"] = tuple(int(x) for x in a.long_seeds.split(","))
        if a.lr_extend_to is not None:
            changes["lr_extend_to"] = a.lr_extend_to
        amend(a.out, a.reason, **changes)
    elif a.command == "data":
        make_data(a.out, None, a.chunks)
    elif a.command == "collect":
        collect(a.out, load_config(a.out), a.results)
    elif a.command == "speed":
        cfg = load_config(a.out)
        if measure_speed(a.out, cfg) is None:
            raise SystemExit("speed: a variant's seed-1 short network is missing (finish the sweep first)")
        collect(a.out, cfg, a.results)
    else:
        from activation_study_v2_report import write_report

        write_report(a.results, a.dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())

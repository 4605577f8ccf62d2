"""Training positions for distillation: diverse positions labelled by a teacher network.

:func:`generate` plays *episodes* and records every position it visits:

* **perturbation** episodes start from a position of a real game (a JSONL games file, e.g.
  the project's dev games), play one uniformly random legal move (the perturbation), then
  up to ``max_walk - 1`` more moves of the playout policy;
* **playout** episodes start from the standard position, play 2..``opening_plies`` uniformly
  random moves (the randomised opening), then follow the playout policy until the game ends
  (mate, stalemate, insufficient material, 50-move rule) or ``max_game_plies`` plies.

The **playout policy** is a cheap, capture-aware move chooser (no search):
with probability ``greedy`` it takes the move with the best crude material score (value
captured or promoted, minus the mover's value if the target square is attacked, plus half
the mover's value if it leaves an attacked square; ties broken at random), otherwise a
uniformly random legal move.  Material therefore stays roughly balanced for a while, as in
real games, yet every phase, both sides to move, checks, castling and en-passant rights occur.

Positions are de-duplicated on (piece placement, side to move), the only inputs of an NNUE
network; positions the network cannot represent are skipped, as are positions listed in an
``exclude`` file (so an evaluation corpus stays unseen).  Games whose id falls in the
held-out fraction (:func:`is_held_out`) are never used as starting points.  A position whose
teacher value is lopsided may be dropped by the balance filter (``keep_below_cp``).

The episodes run in compiled code (:mod:`nnue_infer.training.walk`: python-chess's rules through
the compiled legal move generator, no ``chess.Board`` per move); each source (perturbation,
playout) plays rounds of whole episodes until a round holds about twice the positions that source
still needs (at most 65,536), then the round's new positions are labelled in one batch
(``Evaluator.evaluate_bitboards``) and filtered, the first ones kept, so the file holds
``round(perturbation_fraction * n)`` perturbation positions (all ``n`` playouts without games),
rounds of the two sources alternating.  Everything is deterministic for a given seed and inputs:
each source walks with its own SplitMix64 stream seeded by ``SeedSequence([seed, source])``, the
balance filter draws from ``default_rng([seed, 2])``.  (Files of the ``python-chess`` generator
of earlier versions, ``meta`` without ``generator``, follow the same definition with other random
draws.)

File format (``.npz``, written by :func:`save`, read by :func:`load_positions`)
-------------------------------------------------------------------------------
A NumPy ``.npz`` archive (uncompressed; 74 bytes per position) with arrays of length ``n``:

==============  ============  ===========================================================
key             dtype, shape  meaning
==============  ============  ===========================================================
``format``      str, ()       ``"nnue-infer-positions-1"``
``bitboards``   int64 [n, 8]  pawns, knights, bishops, rooks, queens, kings, white, black:
                              python-chess bitboards (a1 = bit 0) viewed as int64
``stm``         uint8 [n]     side to move: 0 White, 1 Black
``castling``    uint8 [n]     castling rights: bit 0 K, 1 Q, 2 k, 3 q
``ep_square``   int8 [n]      square of a legal en-passant capture, -1 if none
``value``       int32 [n]     teacher's value, internal units (Stockfish 15.1: 361 = one
                              pawn), **side to move's** point of view
``source``      uint8 [n]     0 perturbation of a game position, 1 playout, 2 the
                              teacher's self-play (:mod:`nnue_infer.training.selfplay`)
``meta``        str, ()       JSON: format version, seed, generator settings, teacher
                              (``teacher_sha256``: SHA-256 of the teacher's integer
                              parameters, not of its file), counts
==============  ============  ===========================================================

Halfmove clock and move number are not stored (networks do not read them).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass

import chess
import numpy as np

from ..errors import DatasetFormatError
from ..inputs import numbered_lines
from ..network import network_digest

FORMAT = "nnue-infer-positions-1"
#: ``meta["generator"]`` of files made by this version (compiled walk, SplitMix64 streams).
GENERATOR = "walk-1"
SOURCE_PERTURBATION, SOURCE_PLAYOUT = 0, 1


@dataclass(frozen=True)
class GenerationSettings:
    """Knobs of :func:`generate` (stored in the file's ``meta``).

    Attributes
    ----------
    perturbation_fraction : float
        Target share of positions from perturbation episodes (0 without a games file).
    max_walk : int
        Moves per perturbation episode: uniform in 1..max_walk.
    opening_plies : int
        Random opening of playout episodes: uniform in 2..opening_plies plies.
    max_game_plies : int
        Playout episodes stop after this many plies.
    greedy : float
        Probability that the playout policy takes its best-scored move instead of a random one.
    holdout_fraction : float
        Share of games (by :func:`is_held_out` on the game id) never used as starting points.
    keep_below_cp, keep_decay_cp : float
        Balance filter: a position whose teacher value v (in centipawns, 100 * v / 361) has
        |v| > keep_below_cp is kept only with probability exp(-(|v| - keep_below_cp) / keep_decay_cp),
        so lopsided playout positions do not swamp the balanced ones real games are made of.
        ``keep_decay_cp = inf`` keeps everything.
    children : int
        After each visited position, also record up to this many of its children (distinct random
        legal moves, not walked further): about ``children + 1`` positions for one policy move, the
        generator's main cost (0: only visited positions).
    """

    perturbation_fraction: float = 0.5
    max_walk: int = 6
    opening_plies: int = 10
    max_game_plies: int = 200
    greedy: float = 0.9
    holdout_fraction: float = 0.25
    keep_below_cp: float = 200.0
    keep_decay_cp: float = 500.0
    children: int = 0


def is_held_out(game_id: str, fraction: float) -> bool:
    """Whether game ``game_id`` belongs to the held-out share ``fraction`` (stable SHA-1 rule)."""
    h = int.from_bytes(hashlib.sha1(game_id.encode()).digest()[:4], "little")
    return h < fraction * 2**32


def position_key(board: chess.Board) -> tuple[int, ...]:
    """What a network sees of ``board``: piece bitboards, colour bitboards and side to move."""
    return (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
            board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK], int(board.turn))


def read_games(path: str | os.PathLike[str]) -> list[dict]:
    """Games from a JSONL file with ``id``, ``start_fen`` and ``moves`` (UCI) per line.

    ``path`` may be ``-`` (stdin), a pipe, or gzip/zstd-compressed (:func:`nnue_infer.inputs.open_input`).
    Each game is a dict with ``id``, ``start_fen``, ``moves`` and ``where`` (file and line, for
    messages).  Raises ``ValueError`` naming the line for malformed JSON or a missing field;
    :func:`game_positions` names it for a bad start FEN or an illegal move.
    """
    games = []
    for label, lineno, line in numbered_lines(path):
        try:
            g = json.loads(line)
            games.append({"id": str(g["id"]), "start_fen": g["start_fen"], "moves": list(g["moves"]),
                          "where": f"{label}: line {lineno}"})
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{label}: line {lineno}: not a game record ({exc})") from exc
    return games


def game_positions(games: list[dict], holdout_fraction: float) -> list[chess.Board]:
    """Every position (ply 0 included) of the games not held out, as boards without move stacks.

    Raises ``ValueError`` naming the file, line and game (``where`` from :func:`read_games`) for a
    start FEN python-chess cannot read or whose position is not legal chess (no king, pawns on the
    back rank, ...), and for a bad or illegal move (with its ply).
    """
    out = []
    for g in games:
        if is_held_out(g["id"], holdout_fraction):
            continue
        where = f"{g['where']}: game {g['id']}" if "where" in g else f"game {g['id']}"
        try:
            board = chess.Board(g["start_fen"])
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{where}: bad start_fen {g['start_fen']!r}: {exc}") from exc
        if not board.is_valid():
            status = board.status()
            problems = ", ".join(f.name.lower().replace("_", " ") for f in chess.Status if f and f in status)
            raise ValueError(f"{where}: start_fen {g['start_fen']!r} is not a legal position ({problems})")
        out.append(board.copy(stack=False))
        for ply, uci in enumerate(g["moves"], 1):
            try:
                move = chess.Move.from_uci(uci)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{where}: ply {ply}: bad move {uci!r}") from exc
            if not board.is_legal(move):
                raise ValueError(f"{where}: ply {ply}: illegal move {uci} in {board.fen()}")
            board.push(move)
            out.append(board.copy(stack=False))
    return out


def read_exclude(path: str | os.PathLike[str]) -> set[tuple[int, ...]]:
    """Position keys (:func:`position_key`) of a JSONL file with a ``fen`` field, or a FEN-per-line file
    (``-`` for stdin, pipes, gzip/zstd: :func:`nnue_infer.inputs.open_input`)."""
    keys = set()
    for label, lineno, line in numbered_lines(path):
        try:
            fen = json.loads(line)["fen"] if line.startswith("{") else line
            keys.add(position_key(chess.Board(fen)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{label}: line {lineno}: no FEN ({exc})") from exc
    return keys


def _start_arrays(boards: list[chess.Board]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """States of ``boards`` as :func:`nnue_infer.training.walk.walk` reads them: bitboards int64[S, 8],
    side to move uint8[S], castling rights (``clean_castling_rights``) int64[S], en passant square int64[S]."""
    n = max(len(boards), 1)  # one (unused) row without games: the kernel takes arrays of one type
    bitboards = np.zeros((n, 8), np.uint64)
    stm = np.zeros(n, np.uint8)
    castling = np.zeros(n, np.uint64)
    ep = np.zeros(n, np.int64)
    for i, b in enumerate(boards):
        bitboards[i] = (b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings, b.occupied_co[chess.WHITE],
                        b.occupied_co[chess.BLACK])
        stm[i] = 0 if b.turn == chess.WHITE else 1
        castling[i] = b.clean_castling_rights()
        ep[i] = b.ep_square or 0
    return bitboards.view(np.int64), stm, castling.view(np.int64), ep


class _KeyTable:
    """The walk's de-duplication table (:func:`nnue_infer.training.walk.insert`), grown to stay at most half full."""

    def __init__(self, expected: int) -> None:
        self.table = np.zeros((1 << max(12, (4 * expected).bit_length()), 2), np.uint64)
        self.count = 0

    def room(self, more: int) -> None:
        """Grow (rehash into a table twice as big, repeatedly) so that ``more`` further keys fit."""
        from .walk import rehash

        while 2 * (self.count + more) > len(self.table):
            bigger = np.zeros((2 * len(self.table), 2), np.uint64)
            rehash(self.table, bigger)
            self.table = bigger


def _exclude_arrays(exclude: set[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
    keys = np.array(sorted(exclude), np.uint64).reshape(-1, 9)
    return np.ascontiguousarray(keys[:, :8]).view(np.int64), keys[:, 8].astype(np.uint8) ^ 1  # turn True = White


def generate(n: int, seed: int, teacher, games: list[dict] | None = None,
             exclude: set[tuple[int, ...]] | None = None, settings: GenerationSettings = GenerationSettings(),
             progress: bool = True) -> dict[str, np.ndarray]:
    """Generate ``n`` distinct labelled positions (see the module docstring).

    Parameters
    ----------
    n : int
        Number of positions.
    seed : int
        Seed of the random streams: same seed and inputs, same positions in the same order.
    teacher : Network
        Network whose values label the positions (normally Stockfish 15.1's).
    games : list of dict, optional
        Games from :func:`read_games` for perturbation episodes; ``None``: playouts only.
    exclude : set, optional
        Position keys (:func:`position_key`) never to emit, e.g. an evaluation corpus.
    settings : GenerationSettings
        Generator knobs.
    progress : bool
        Show a tqdm progress bar on stderr.

    Returns
    -------
    dict of str to ndarray
        The arrays of the file format (module docstring), ``meta`` as a JSON string.

    Raises
    ------
    ValueError
        ``n`` not positive, a bad setting, a games file that yields no usable position, or a
        generator that stalls (100,000 episodes in a row without a new position).
    """
    from tqdm import tqdm

    from ..evaluator import Evaluator
    from . import walk as W

    if n <= 0:
        raise ValueError(f"n: number of positions must be positive, got {n}")
    s = settings
    problems = [f"{name} = {value!r}: {rule}" for name, value, ok, rule in (
        ("perturbation_fraction", s.perturbation_fraction, 0 <= s.perturbation_fraction <= 1, "need 0 .. 1"),
        ("greedy", s.greedy, 0 <= s.greedy <= 1, "need 0 .. 1"),
        ("holdout_fraction", s.holdout_fraction, 0 <= s.holdout_fraction < 1, "need 0 <= holdout_fraction < 1"),
        ("keep_below_cp", s.keep_below_cp, 0 <= s.keep_below_cp, "need >= 0"),
        ("keep_decay_cp", s.keep_decay_cp, 0 < s.keep_decay_cp, "need > 0"),
        ("children", s.children, s.children >= 0, "need >= 0"),
        ("max_walk", s.max_walk, s.max_walk >= 1, "need >= 1"),
        ("opening_plies", s.opening_plies, 2 <= s.opening_plies <= s.max_game_plies, "need 2 .. max_game_plies"),
    ) if not ok]  # comparisons with NaN are false: NaN is refused too
    if problems:
        raise ValueError("settings: " + "; ".join(problems))
    if seed < 0:
        raise ValueError(f"seed = {seed}: need >= 0")
    starts = game_positions(games, s.holdout_fraction) if games else []
    if games and not starts:
        raise ValueError("games: every game is held out; lower holdout_fraction")
    start_arrays = _start_arrays(starts)
    frac = s.perturbation_fraction if starts else 0.0
    want = [round(frac * n), n - round(frac * n)]  # positions per source
    rngs = [np.random.SeedSequence([seed, src]).generate_state(1, np.uint64) for src in (0, 1)]
    keep_rng = np.random.default_rng([seed, 2])
    table = _KeyTable(n * (s.children + 1))
    if exclude:
        bb, stm = _exclude_arrays(exclude)
        table.room(len(bb))
        table.count += W.insert_all(table.table, bb, stm)
    evaluator = Evaluator(teacher)
    episode_rows = (max(s.max_walk, s.max_game_plies) + 1) * (s.children + 1)
    parts: list[tuple] = []
    skipped = {"duplicate": 0, "unrepresentable": 0, "balance_filter": 0}
    episodes = [0, 0]
    keep_below, keep_decay = s.keep_below_cp * 361 / 100, s.keep_decay_cp * 361 / 100
    bar = tqdm(total=n, unit="pos", smoothing=0.05, disable=not progress)
    try:
        while want[0] or want[1]:
            for src in (0, 1):
                if not want[src]:
                    continue
                target = min(1 << 16, max(256, 2 * want[src]))
                rows = target + episode_rows
                table.room(rows)
                out = (np.empty((rows, 8), np.int64), np.empty(rows, np.uint8), np.empty(rows, np.uint8),
                       np.empty(rows, np.int8), np.empty(rows, np.uint8), np.empty(rows, np.uint8))
                counters = np.zeros(3, np.int64)
                W.walk(src, target, 100_000, *start_arrays, s.max_walk, s.opening_plies, s.max_game_plies, s.greedy,
                       s.children, rngs[src], table.table, *out, counters)
                r = int(counters[W.C_RECORDS])
                table.count += r
                episodes[src] += int(counters[W.C_EPISODES])
                skipped["duplicate"] += int(counters[W.C_DUPLICATE])
                if r == 0:
                    raise ValueError(f"generator stalled at {n - sum(want)} positions: every new position is a duplicate")
                bitboards, stm, castling, ep, source, check = (a[:r] for a in out)
                values, codes = evaluator.evaluate_bitboards(bitboards, stm)
                excess = np.abs(values.astype(np.float64)) - keep_below
                draws = keep_rng.random(r)
                balanced = (excess <= 0) | (draws < np.exp(-np.maximum(excess, 0) / keep_decay))
                ok = codes == 0
                take = np.flatnonzero(ok & balanced)[:want[src]]
                last = take[-1] + 1 if len(take) == want[src] else r  # rows after the last one taken: unused
                skipped["unrepresentable"] += int((~ok[:last]).sum())
                skipped["balance_filter"] += int((ok & ~balanced)[:last].sum())
                parts.append((bitboards[take], stm[take], castling[take], ep[take], values[take], source[take],
                              check[take]))
                want[src] -= len(take)
                bar.update(len(take))
    finally:
        bar.close()
    bitboards, stm, castling, ep, value, source, check = (np.concatenate(a) for a in zip(*parts))
    meta = {
        "format": FORMAT,
        "generator": GENERATOR,
        "seed": seed,
        "n": n,
        "settings": asdict(s),
        "teacher": teacher.description or repr(teacher),
        "teacher_sha256": network_digest(teacher),
        "games": len(games or []),
        "start_positions": len(starts),
        "excluded_positions": len(exclude or ()),
        "positions_by_source": {"perturbation": int((source == 0).sum()), "playout": int((source == 1).sum())},
        "episodes_by_source": {"perturbation": episodes[0], "playout": episodes[1]},
        "skipped": skipped,
        "in_check": int(check.sum()),
    }
    return {"format": np.array(FORMAT), "bitboards": bitboards, "stm": stm, "castling": castling,
            "ep_square": ep, "value": value.astype(np.int32), "source": source, "meta": np.array(json.dumps(meta))}


_SCHEMA = {
    "bitboards": (np.int64, 2),
    "stm": (np.uint8, 1),
    "castling": (np.uint8, 1),
    "ep_square": (np.int8, 1),
    "value": (np.int32, 1),
    "source": (np.uint8, 1),
}


def save(path: str | os.PathLike[str], data: dict[str, np.ndarray]) -> None:
    """Write ``data`` (as returned by :func:`generate`) to ``path`` in the ``.npz`` format above."""
    _validate(data, str(path))
    with open(path, "wb") as f:  # an open file keeps numpy from appending ".npz"
        np.savez(f, **data)


def load_positions(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read a positions file written by :func:`save`.

    Returns the arrays of the format (module docstring); ``meta`` is decoded to a dict.

    Raises
    ------
    DatasetFormatError
        Not an ``.npz`` archive, unknown ``format``, a missing key, or a dtype/shape mismatch
        (the message names the key).
    """
    path = str(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise DatasetFormatError(f"{path}: not a positions file (.npz): {exc}") from exc
    _validate(data, path)
    data["meta"] = json.loads(str(data["meta"]))
    return data


#: ``source`` of positions read from Stockfish training data (:func:`load_training_positions`).
SOURCE_TRAINING_DATA = 3


def positions_from_training_data(data, meta: dict | None = None) -> dict[str, np.ndarray]:
    """Stockfish training data's rows (:class:`nnue_infer.io.training_data.TrainingData`) as the
    arrays of a positions file (module docstring): ``value`` is the row's ``score`` (internal
    units, side to move), ``source`` :data:`SOURCE_TRAINING_DATA`; the move, clocks and result are
    not kept (the distillation trainer reads placement, side to move and value).  ``meta``
    becomes the dict's ``meta``."""
    return {"format": np.array(FORMAT), "bitboards": np.ascontiguousarray(data.bitboards, np.int64),
            "stm": data.stm.astype(np.uint8), "castling": data.castling.astype(np.uint8),
            "ep_square": data.ep.astype(np.int8), "value": data.score.astype(np.int32),
            "source": np.full(len(data), SOURCE_TRAINING_DATA, np.uint8), "meta": dict(meta or {})}


def load_training_positions(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """A positions file (``.npz``, :func:`load_positions`) or Stockfish training data (``.binpack``,
    ``.bin``, ``.plain``, optionally ``.gz`` / ``.zst``; ``.parquet``: :func:`nnue_infer.io.training_data.read`)
    as positions arrays (:func:`positions_from_training_data` for the latter; ``meta`` holds the file name).

    Raises
    ------
    DatasetFormatError, nnue_infer.errors.TrainingDataError
        A malformed file (names the file and the key or byte offset).
    """
    from ..io.training_data import KINDS, kind_of, read

    name = os.fspath(path).lower()
    if any(name.removesuffix(c).endswith("." + k) for k in KINDS for c in ("", ".gz", ".zst", ".zstd")):
        return positions_from_training_data(read(path, kind_of(path)), {"training_data": os.fspath(path)})
    return load_positions(path)


def _validate(data: dict, path: str) -> None:
    fmt = str(data.get("format", ""))
    if fmt != FORMAT:
        raise DatasetFormatError(f"{path}: key 'format' is {fmt!r}, expected {FORMAT!r}")
    if "meta" not in data:
        raise DatasetFormatError(f"{path}: key 'meta' missing")
    n = None
    for key, (dtype, ndim) in _SCHEMA.items():
        if key not in data:
            raise DatasetFormatError(f"{path}: key {key!r} missing")
        arr = data[key]
        if arr.dtype != dtype or arr.ndim != ndim or (ndim == 2 and arr.shape[1] != 8):
            raise DatasetFormatError(f"{path}: key {key!r}: dtype {arr.dtype} shape {arr.shape}, "
                                     f"expected {np.dtype(dtype)} with {ndim} dimension(s)")
        if n is None:
            n = arr.shape[0]
        elif arr.shape[0] != n:
            raise DatasetFormatError(f"{path}: key {key!r}: {arr.shape[0]} rows, 'bitboards' has {n}")


def concatenate(parts: list[dict]) -> dict:
    """Several positions files' arrays (from :func:`load_positions`) as one, in order.

    ``meta`` becomes ``{"parts": [meta, ...]}`` plus the first part's ``settings`` (and hence its
    ``holdout_fraction``), so every file's provenance is kept.  Positions present in several
    parts stay duplicated (files generated with different seeds rarely share any).

    Raises ``ValueError`` for an empty list or parts with different held-out fractions (parts
    read from Stockfish training data record none and join any).
    """
    if not parts:
        raise ValueError("concatenate: no positions files given")
    if len(parts) == 1:
        return parts[0]
    fractions = {p["meta"].get("settings", {}).get("holdout_fraction") for p in parts} - {None}  # None: training data
    if len(fractions) > 1:
        raise ValueError(f"concatenate: the files hold out different shares of games: {sorted(map(str, fractions))}")
    out = {key: np.concatenate([p[key] for p in parts]) for key in _SCHEMA}
    out["format"] = np.array(FORMAT)
    out["meta"] = {"parts": [p["meta"] for p in parts],
                   "settings": next((p["meta"]["settings"] for p in parts if "settings" in p["meta"]), {}),
                   "seed": [p["meta"].get("seed") for p in parts]}
    return out


def to_board(data: dict[str, np.ndarray], i: int) -> chess.Board:
    """Rebuild position ``i`` of a positions file as a ``chess.Board`` (clocks 0 and 1)."""
    bb = data["bitboards"][i].view(np.uint64).tolist()
    board = chess.Board.empty()
    for pt, mask in enumerate(bb[:6], 1):
        for sq in chess.scan_forward(mask):
            board.set_piece_at(sq, chess.Piece(pt, bool(bb[6] >> sq & 1)))
    board.turn = chess.WHITE if data["stm"][i] == 0 else chess.BLACK
    c = int(data["castling"][i])
    board.castling_rights = ((chess.BB_H1 if c & 1 else 0) | (chess.BB_A1 if c & 2 else 0)
                             | (chess.BB_H8 if c & 4 else 0) | (chess.BB_A8 if c & 8 else 0))
    ep = int(data["ep_square"][i])
    board.ep_square = ep if ep >= 0 else None
    return board


def summary(data: dict[str, np.ndarray]) -> dict:
    """Coverage figures of a positions file: counts by source, side to move, piece count, rights."""
    bb = data["bitboards"].view(np.uint64)
    pieces = np.bitwise_count(bb[:, 6] | bb[:, 7]) if hasattr(np, "bitwise_count") else np.array(
        [bin(int(x)).count("1") for x in (bb[:, 6] | bb[:, 7])])
    v = data["value"].astype(np.int64)
    return {
        "positions": int(len(v)),
        "by_source": {"perturbation": int((data["source"] == 0).sum()), "playout": int((data["source"] == 1).sum()),
                      "selfplay": int((data["source"] == 2).sum())},
        "black_to_move": int(data["stm"].sum()),
        "with_castling_rights": int((data["castling"] != 0).sum()),
        "with_legal_en_passant": int((data["ep_square"] >= 0).sum()),
        "piece_count_histogram": {int(k): int(c) for k, c in zip(*np.unique(pieces, return_counts=True))},
        "value_abs_percentiles_cp": {p: int(np.percentile(np.abs(v), p) * 100 / 361) for p in (25, 50, 75, 90, 99)},
    }


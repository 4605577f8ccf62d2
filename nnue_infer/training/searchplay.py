"""Training positions from engine games: self-play of the compiled search at a fixed node count.

This is how Stockfish's own training data is made (its ``tools`` branch ``generate_training_data``:
games of the engine at a small search limit from varied openings, every position written with the
search's score, the move played and the game's result).  :func:`generate` plays games of
:class:`nnue_infer.search.Engine` against itself, ``nodes`` nodes per move (node-limited searches
are deterministic), from three kinds of openings:

* a share ``start_fraction`` from a uniformly drawn position of the given games (those not held
  out: :func:`nnue_infer.training.datagen.game_positions`), then 0 .. ``random_plies`` // 2
  uniformly random legal moves;
* a share ``endgame_fraction`` from a random endgame
  (:func:`nnue_infer.training.selfplay.random_endgame`: both kings and 1 .. ``endgame_pieces``
  other pieces);
* the rest from the standard position after 2 .. ``random_plies`` uniformly random legal moves.

Positions reached by random moves are not recorded; every position the engine moves from is,
with the move it played (the principal variation's first move), its label and the game's result
from the side to move's point of view (1 win, 0 draw, -1 loss).  A game ends at mate or
stalemate, insufficient material, the 50-move rule, a threefold repetition, ``max_game_plies``
plies (a draw), or when the search's score stays beyond ``adjudicate_cp`` (or is a mate score) for
``adjudicate_plies`` plies in a row (a win for the side ahead).

Labels (``label``): ``"search"``, the search's score in the network's internal units (mate scores
as +-``MATE_SCORE``); ``"teacher"``, the static evaluation of a teacher network (normally
Stockfish 15.1's: the distillation target of :mod:`nnue_infer.training.train`).

Rows are de-duplicated on placement and side to move (:mod:`nnue_infer.training.positionset`)
within the output and against a given :class:`~nnue_infer.training.positionset.PositionSet`
(earlier chunks of the same data set, evaluation corpora), which :func:`generate` extends; a
position the teacher cannot evaluate is dropped.  Everything is deterministic for a seed: game
``g`` draws its opening from ``numpy.random.default_rng([seed, g])`` and every search starts from a
cleared engine (``Engine.new_game`` per game).  The result is a
:class:`nnue_infer.io.training_data.TrainingData` (write it with
:func:`nnue_infer.io.training_data.write` as ``.binpack``, ``.bin`` or ``.plain``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import chess
import numpy as np

from ..io.training_data import TrainingData
from .positionset import PositionSet, position_hashes

GENERATOR = "searchplay-1"
#: Score written for a mate found by the search (int16 side to move; Stockfish's VALUE_MATE is 32000).
MATE_SCORE = 32000
#: Score written for an evaluation beyond int16 (never reached by the networks here).
SCORE_LIMIT = 32767
LABELS = ("teacher", "search")


@dataclass(frozen=True)
class SearchPlaySettings:
    """Knobs of :func:`generate` (kept with the output's summary).

    Attributes
    ----------
    nodes : int
        Node limit of each search (>= 1).
    random_plies : int
        Games from the standard position play 2 .. random_plies uniformly random moves first (>= 2);
        games from a game position 0 .. random_plies // 2.
    start_fraction, endgame_fraction : float
        Shares of games starting at a game position and at a random endgame (sum <= 1).
    endgame_pieces : int
        Random endgames have the kings and 1 .. endgame_pieces other pieces.
    max_game_plies : int
        Games are drawn after this many plies of the engine.
    adjudicate_cp, adjudicate_plies : int
        A game is won by the side ahead once |score| >= adjudicate_cp (or a mate score) for this
        many plies in a row (centipawns; 0 plies: never adjudicated).
    label : str
        ``"teacher"`` or ``"search"`` (module docstring).
    holdout_fraction : float
        Share of the games (by :func:`nnue_infer.training.datagen.is_held_out`) never used as starts.
    hash_mb : int
        The engine's transposition table.
    """

    nodes: int = 400
    random_plies: int = 8
    start_fraction: float = 0.4
    endgame_fraction: float = 0.2
    endgame_pieces: int = 6
    max_game_plies: int = 400
    adjudicate_cp: int = 1500
    adjudicate_plies: int = 4
    label: str = "teacher"
    holdout_fraction: float = 0.25
    hash_mb: int = 4

    def problems(self) -> list[str]:
        """What is wrong with the settings (empty when nothing)."""
        checks = (
            ("nodes", self.nodes >= 1, "need >= 1"),
            ("random_plies", self.random_plies >= 2, "need >= 2"),
            ("start_fraction", 0 <= self.start_fraction <= 1, "need 0 .. 1"),
            ("endgame_fraction", 0 <= self.endgame_fraction <= 1 - self.start_fraction,
             "need 0 .. 1 - start_fraction"),
            ("endgame_pieces", self.endgame_pieces >= 1, "need >= 1"),
            ("max_game_plies", self.max_game_plies >= 1, "need >= 1"),
            ("adjudicate_cp", self.adjudicate_cp > 0, "need > 0"),
            ("adjudicate_plies", self.adjudicate_plies >= 0, "need >= 0"),
            ("label", self.label in LABELS, f"need one of {', '.join(LABELS)}"),
            ("holdout_fraction", 0 <= self.holdout_fraction < 1, "need 0 <= holdout_fraction < 1"),
            ("hash_mb", self.hash_mb >= 1, "need >= 1"),
        )
        return [f"{name} = {getattr(self, name)!r}: {rule}" for name, ok, rule in checks if not ok]


def compress_move(board: chess.Board, move: chess.Move) -> int:
    """``move`` of ``board``'s side to move in the tools' ``CompressedMove`` layout (type in bits
    14-15: 0 normal, 1 promotion, 2 castling as king takes own rook, 3 en passant; from square in
    bits 8-13, to square in 2-7, promotion piece 0 knight .. 3 queen in 0-1; the layout of
    :mod:`nnue_infer.kernels.data.records`, from Stockfish's ``tools`` ``nnue_data_binpack_format.h``)."""
    if board.is_castling(move):
        rook_file = 7 if board.is_kingside_castling(move) else 0
        to = chess.square(rook_file, chess.square_rank(move.from_square))
        return (2 << 14) | (move.from_square << 8) | (to << 2)
    if board.is_en_passant(move):
        return (3 << 14) | (move.from_square << 8) | (move.to_square << 2)
    if move.promotion:
        return (1 << 14) | (move.from_square << 8) | (move.to_square << 2) | (move.promotion - chess.KNIGHT)
    return (move.from_square << 8) | (move.to_square << 2)


def _castling_bits(board: chess.Board) -> int:
    rights = board.clean_castling_rights()
    return ((1 if rights & chess.BB_H1 else 0) | (2 if rights & chess.BB_A1 else 0)
            | (4 if rights & chess.BB_H8 else 0) | (8 if rights & chess.BB_A8 else 0))


def _bitboards(board: chess.Board) -> list[int]:
    return [board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
            board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK]]


def _opening(rng: np.random.Generator, starts: list[chess.Board], s: SearchPlaySettings) -> chess.Board:
    """A game's first position (module docstring): a game position, a random endgame or the standard
    position, then random legal moves (never ending the game)."""
    from .selfplay import random_endgame

    u = rng.random()
    if starts and u < s.start_fraction:
        board, plies = starts[int(rng.integers(len(starts)))].copy(stack=False), int(rng.integers(0, s.random_plies // 2 + 1))
    elif u < (s.start_fraction if starts else 0.0) + s.endgame_fraction:
        stream = np.array([rng.integers(0, 2**63)], np.uint64)
        return random_endgame(stream, s.endgame_pieces)  # a SplitMix64 stream (training.walk) seeded from rng
    else:
        board, plies = chess.Board(), int(rng.integers(2, s.random_plies + 1))
    for _ in range(plies):
        moves = list(board.legal_moves)
        if not moves:
            break
        board.push(moves[int(rng.integers(len(moves)))])
        if board.is_game_over():
            board.pop()
            break
    return board


def _finished(board: chess.Board) -> float | None:
    """The game's result for White (1, 0.5, 0) if it is over by the rules, else ``None``."""
    if board.is_checkmate():
        return 0.0 if board.turn == chess.WHITE else 1.0
    if (board.is_stalemate() or board.is_insufficient_material() or board.halfmove_clock >= 100
            or board.is_repetition(3)):
        return 0.5
    return None


def play_game(engine, board: chess.Board, s: SearchPlaySettings, units_per_pawn: float) -> tuple[list, float]:
    """One engine game from ``board`` (its move stack is the repetition history).

    Returns
    -------
    rows : list of tuple
        Per engine move: (bitboards list[8], stm, castling bits, legal en passant square or -1,
        rule-50 counter, full-move number, compressed move, search score (internal units, side to
        move), ply of the game).
    white_result : float
        1, 0.5 or 0 for White.
    """
    engine.new_game()
    rows, ahead, ply = [], 0, 0
    while True:
        over = _finished(board)
        if over is not None:
            return rows, over
        if ply >= s.max_game_plies:
            return rows, 0.5
        result = engine.search(board, nodes=s.nodes)
        if result.move is None:  # no legal move: _finished saw it; kept for safety
            return rows, 0.5
        if result.mate is not None:
            score = MATE_SCORE if result.mate > 0 else -MATE_SCORE
        else:
            score = int(np.clip(round((result.score_cp or 0) * units_per_pawn / 100), -SCORE_LIMIT, SCORE_LIMIT))
        ep = board.ep_square if board.ep_square is not None and board.has_legal_en_passant() else -1
        rows.append((_bitboards(board), int(board.turn == chess.BLACK), _castling_bits(board), ep,
                     min(board.halfmove_clock, 255), board.fullmove_number, compress_move(board, result.move), score,
                     2 * (board.fullmove_number - 1) + int(board.turn == chess.BLACK)))
        decisive = result.mate is not None or abs(score) * 100 / units_per_pawn >= s.adjudicate_cp
        ahead = ahead + 1 if decisive else 0
        if s.adjudicate_plies and ahead >= s.adjudicate_plies:
            white_ahead = (score > 0) == (board.turn == chess.WHITE)
            return rows, 1.0 if white_ahead else 0.0
        board.push(result.move)
        ply += 1


def generate(n: int, seed: int, teacher=None, *, engine=None, games: list[dict] | None = None,
             seen: PositionSet | None = None, settings: SearchPlaySettings = SearchPlaySettings(),
             progress: bool = True, first_game: int = 0) -> tuple[TrainingData, dict]:
    """Generate ``n`` distinct positions from engine games (module docstring).

    Parameters
    ----------
    n : int
        Number of rows (>= 1).
    seed : int
        Seed of the openings (>= 0).
    teacher : Network, optional
        Network whose static evaluation labels the rows (``label="teacher"``; default Stockfish
        15.1's) and, when ``engine`` is not given, the engine's network.
    engine : nnue_infer.search.Engine, optional
        The player (default: ``Engine(teacher, hash_mb=settings.hash_mb)``).
    games : list of dict, optional
        Games (:func:`nnue_infer.training.datagen.read_games`) whose positions start a share
        ``start_fraction`` of the games.
    seen : PositionSet, optional
        Positions never to emit; the emitted ones are added to it when the call succeeds.
    settings : SearchPlaySettings
    progress : bool
        A tqdm progress bar on stderr.
    first_game : int
        Number of the first game (games draw their openings from ``[seed, game]``): a generator
        continued in another call passes the previous call's ``summary["next_game"]``.

    Returns
    -------
    data : TrainingData
        ``n`` rows, each game's rows in order (the ``.binpack`` writer chains consecutive ones).
    summary : dict
        Settings, games played, rows dropped as duplicates or unrepresentable, ``next_game``.

    Raises
    ------
    ValueError
        ``n`` < 1, ``seed`` < 0, a bad setting (all problems named), every game held out, or 1,000
        games in a row without a new position.
    """
    from tqdm import tqdm

    from ..evaluator import Evaluator
    from .datagen import game_positions

    s = settings
    problems = s.problems() + ([f"n = {n}: need >= 1"] if n < 1 else []) + ([f"seed = {seed}: need >= 0"] if seed < 0 else [])
    if problems:
        raise ValueError("searchplay: " + "; ".join(problems))
    if teacher is None:
        from ..resources import stockfish_15_1_network

        teacher = stockfish_15_1_network()
    if engine is None:
        from ..search import Engine

        engine = Engine(teacher, hash_mb=s.hash_mb)
    upp = float(engine.network.architecture.units_per_pawn) if hasattr(engine, "network") else 361.0
    starts = game_positions(games, s.holdout_fraction) if games else []
    if games and not starts:
        raise ValueError("games: every game is held out; lower holdout_fraction")
    seen = seen if seen is not None else PositionSet()
    evaluator = Evaluator(teacher) if s.label == "teacher" else None
    parts, have, game, idle, emitted = [], 0, first_game, 0, set()
    dropped = {"duplicate": 0, "unrepresentable": 0}
    results = {"1-0": 0, "1/2-1/2": 0, "0-1": 0}
    bar = tqdm(total=n, unit="pos", smoothing=0.05, disable=not progress)
    try:
        while have < n:
            board = _opening(np.random.default_rng([seed, game]), starts, s)
            rows, white = play_game(engine, board, s, upp)
            game += 1
            results[{1.0: "1-0", 0.5: "1/2-1/2", 0.0: "0-1"}[white]] += 1
            if not rows:
                idle += 1
                if idle >= 1000:
                    raise ValueError(f"searchplay stalled at {have} positions: 1,000 games without a new position")
                continue
            bb = np.array([r[0] for r in rows], np.uint64).view(np.int64)
            stm = np.array([r[1] for r in rows], np.uint8)
            hashes = position_hashes(bb, stm)
            keep = seen.new_rows(hashes) & np.array([int(h) not in emitted for h in hashes.tolist()], bool)
            dropped["duplicate"] += int((~keep).sum())
            if evaluator is not None:
                values, codes = evaluator.evaluate_bitboards(bb, stm)
                ok = codes == 0
                dropped["unrepresentable"] += int((keep & ~ok).sum())
                keep &= ok
                score = np.clip(values.astype(np.int64), -SCORE_LIMIT, SCORE_LIMIT)
            else:
                score = np.array([r[7] for r in rows], np.int64)
            idx = np.flatnonzero(keep)[: n - have]
            idle = 0 if len(idx) else idle + 1
            if idle >= 1000:
                raise ValueError(f"searchplay stalled at {have} positions: 1,000 games without a new position")
            if not len(idx):
                continue
            emitted.update(hashes[idx].tolist())  # added to ``seen`` at the end: one merge, not one per game
            result = np.array([0 if white == 0.5 else (1 if (white == 1.0) == (r[1] == 0) else -1) for r in rows],
                              np.int16)
            parts.append(TrainingData._trusted({
                "bitboards": np.ascontiguousarray(bb[idx]), "stm": stm[idx],
                "castling": np.array([r[2] for r in rows], np.uint8)[idx],
                "ep": np.array([r[3] for r in rows], np.int8)[idx],
                "rule50": np.array([r[4] for r in rows], np.uint8)[idx],
                "fullmove": np.array([r[5] for r in rows], np.uint16)[idx],
                "move": np.array([r[6] for r in rows], np.uint16)[idx],
                "score": score[idx].astype(np.int16), "ply": np.array([r[8] for r in rows], np.uint16)[idx],
                "result": result[idx], "chain": np.zeros(len(idx), np.int64)}))
            have += len(idx)
            bar.update(len(idx))
    finally:
        bar.close()
    seen.add(np.fromiter(emitted, np.uint64, len(emitted)))  # only once every row is made
    data = TrainingData.concat(parts).with_chains()
    summary = {"generator": GENERATOR, "seed": seed, "n": n, "settings": asdict(s), "first_game": first_game,
               "next_game": game, "games_played": game - first_game, "results": results, "dropped": dropped,
               "teacher": getattr(teacher, "description", None) or repr(teacher), "units_per_pawn": upp,
               "start_positions": len(starts)}
    return data, summary

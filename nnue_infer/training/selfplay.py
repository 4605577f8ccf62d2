"""Training positions from the teacher's own games: self-play with a one-ply softmax policy.

:func:`generate` plays many games at once from the standard position (or, for a share
``start_fraction`` of them, from a random position of given games).  At every move the
teacher (normally Stockfish 15.1's network) values every legal child of every game in one batch
(``Evaluator.evaluate_bitboards``), and each game plays a child drawn with probability
proportional to ``exp(-v / T)`` (``v`` the child's value in centipawns from the opponent's point of
view, so better moves are likelier): ``T = opening_temperature_cp`` for the game's first
``0 .. opening_plies`` plies (uniform), which makes the openings varied, then ``temperature_cp``.
The result looks like games of a weak but sensible player (material is not given away for
nothing, pieces develop, kings castle), much closer to real games than datagen's capture-aware
random playouts, at no extra labelling cost: the children are valued anyway.

Recorded per move and game: the position reached (the chosen child) and up to ``children`` other
random children (one-ply deviations, as real positions after a mistake), each with the value
the policy computed.  A game ends at mate or stalemate, insufficient material, the 50-move rule,
``max_game_plies`` or when the side to move's value exceeds ``adjudicate_cp`` in absolute value;
a new game starts in its place.  De-duplication, the balance filter and ``exclude`` work as in
:mod:`nnue_infer.training.datagen`, and the file has its format (``source`` 2 for these positions;
``meta["generator"]`` ``"selfplay-1"``).  Deterministic for a seed: the policy and the choice of
children draw from one SplitMix64 stream seeded by ``SeedSequence([seed, 3])``, the balance filter
from ``default_rng([seed, 4])``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import chess
import numpy as np

from ..network import network_digest
from .datagen import FORMAT, _exclude_arrays, _KeyTable, _start_arrays, game_positions

GENERATOR = "selfplay-1"
SOURCE_SELFPLAY = 2


@dataclass(frozen=True)
class SelfPlaySettings:
    """Knobs of :func:`generate` (stored in the file's ``meta``).

    Attributes
    ----------
    games : int
        Games played at once (one batch of children per move of all of them).
    temperature_cp, opening_temperature_cp : float
        Softmax temperatures in centipawns (> 0), after and during the opening.
    opening_plies : int
        A game's opening lasts uniformly 0 .. opening_plies plies.
    children : int
        Other random children recorded per move (0: only the games' positions).
    max_game_plies : int
        Games stop after this many plies.
    adjudicate_cp : float
        Games stop once |value| of the position reached exceeds this (centipawns).
    keep_below_cp, keep_decay_cp : float
        Balance filter, as :class:`nnue_infer.training.datagen.GenerationSettings`.
    holdout_fraction : float
        Share of ``games`` (by :func:`nnue_infer.training.datagen.is_held_out`) never used as
        starting points; also recorded so that the file concatenates with datagen's files of the
        same hold-out and the training summary reports the held-out positions.
    start_fraction : float
        With ``games``: share of games that start from a uniformly drawn position of those games
        (halfmove clock 0) instead of the standard position.
    endgame_fraction, endgame_pieces : float, int
        Share of games that start from a random endgame (:func:`random_endgame`: the two kings
        and 1 .. endgame_pieces other pieces); ``start_fraction + endgame_fraction <= 1``.
    """

    games: int = 1024
    temperature_cp: float = 25.0
    opening_temperature_cp: float = 150.0
    opening_plies: int = 12
    children: int = 2
    max_game_plies: int = 300
    adjudicate_cp: float = 1000.0
    keep_below_cp: float = 200.0
    keep_decay_cp: float = 500.0
    holdout_fraction: float = 0.25
    start_fraction: float = 0.5
    endgame_fraction: float = 0.0
    endgame_pieces: int = 6


#: Piece types of :func:`random_endgame` and their weights (pawns and rooks commonest, as in real endings).
ENDGAME_TYPES = (chess.PAWN, chess.PAWN, chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.ROOK, chess.QUEEN)


def random_endgame(rng, pieces: int) -> chess.Board:
    """A random legal endgame (``chess.Board.is_valid``): both kings and 1 .. ``pieces`` other pieces
    (types drawn from :data:`ENDGAME_TYPES`, colours at random) on random empty squares, pawns not on
    the first or last rank, a random side to move, no castling rights or en passant square.  Draws
    from the SplitMix64 stream ``rng`` (uint64[1]) of :mod:`nnue_infer.training.walk`."""
    from . import walk as W

    while True:
        board = chess.Board.empty()
        squares = [W.below(rng, 64), W.below(rng, 64)]
        for _ in range(1 + W.below(rng, pieces)):
            squares.append(W.below(rng, 64))
        if len(set(squares)) < len(squares):
            continue
        board.set_piece_at(squares[0], chess.Piece(chess.KING, chess.WHITE))
        board.set_piece_at(squares[1], chess.Piece(chess.KING, chess.BLACK))
        for sq in squares[2:]:
            board.set_piece_at(sq, chess.Piece(ENDGAME_TYPES[W.below(rng, len(ENDGAME_TYPES))], bool(W.below(rng, 2))))
        board.turn = bool(W.below(rng, 2))
        if board.is_valid():
            return board


def generate(n: int, seed: int, teacher, exclude: set[tuple[int, ...]] | None = None,
             settings: SelfPlaySettings = SelfPlaySettings(), progress: bool = True,
             games: list[dict] | None = None) -> dict[str, np.ndarray]:
    """Generate ``n`` distinct labelled positions from the teacher's self-play (module docstring).

    Parameters
    ----------
    n : int
        Number of positions.
    seed : int
        Seed: same seed, teacher and settings, same positions in the same order.
    teacher : Network
        Quantised network that plays and labels (normally Stockfish 15.1's).
    exclude : set, optional
        Position keys (:func:`nnue_infer.training.datagen.position_key`) never to emit.
    settings : SelfPlaySettings
    progress : bool
        Show a tqdm progress bar on stderr.
    games : list of dict, optional
        Games (:func:`nnue_infer.training.datagen.read_games`) whose positions (those of games not
        held out) start a share ``start_fraction`` of the games.

    Returns
    -------
    dict of str to ndarray
        The arrays of datagen's file format, ``meta`` as a JSON string.

    Raises
    ------
    ValueError
        ``n`` not positive, a bad setting, every game held out, or 1,000 moves of all games in a row without a new position.
    """
    from tqdm import tqdm

    from ..evaluator import Evaluator
    from ..kernels.chess.movegen import MAX_MOVES
    from . import walk as W

    s = settings
    if n <= 0:
        raise ValueError(f"n: number of positions must be positive, got {n}")
    if s.games < 1 or s.children < 0 or s.opening_plies < 0 or s.max_game_plies < 1:
        raise ValueError(f"settings: need games >= 1, children >= 0, opening_plies >= 0, max_game_plies >= 1: {s}")
    if not s.temperature_cp > 0 or not s.opening_temperature_cp > 0 or not s.adjudicate_cp > 0:
        raise ValueError(f"settings: temperatures and adjudicate_cp must be positive: {s}")
    if not s.keep_below_cp >= 0 or not s.keep_decay_cp > 0:
        raise ValueError(f"settings: need keep_below_cp >= 0 and keep_decay_cp > 0: {s}")
    if (not 0 <= s.start_fraction <= 1 or not 0 <= s.endgame_fraction <= 1 - s.start_fraction
            or not 0 <= s.holdout_fraction < 1 or s.endgame_pieces < 1):
        raise ValueError("settings: need 0 <= start_fraction, endgame_fraction, start_fraction + endgame_fraction <= 1, "
                         f"0 <= holdout_fraction < 1 and endgame_pieces >= 1: {s}")
    boards = game_positions(games, s.holdout_fraction) if games else []
    if games and not boards:
        raise ValueError("games: every game is held out; lower holdout_fraction")
    start_bb, start_stm, start_castling, start_ep = _start_arrays(boards)
    start_fraction = s.start_fraction if boards else 0.0
    upp = float(teacher.architecture.units_per_pawn)
    rng = np.random.SeedSequence([seed, 3]).generate_state(1, np.uint64)
    keep_rng = np.random.default_rng([seed, 4])
    table = _KeyTable(n)
    if exclude:
        bb, stm = _exclude_arrays(exclude)
        table.room(len(bb))
        table.count += W.insert_all(table.table, bb, stm)
    evaluator = Evaluator(teacher)
    G = s.games
    bb = np.tile(W.START, (G, 1))
    stm = np.zeros(G, np.uint8)
    castling = np.full(G, W.START_CASTLING, np.int64)
    ep = np.zeros(G, np.int64)
    halfmove = np.zeros(G, np.int64)
    ply = np.zeros(G, np.int64)
    opening = np.empty(G, np.int64)

    def restart(g):
        u = W.uniform(rng) if start_fraction or s.endgame_fraction else 1.0
        if u < s.endgame_fraction:
            e_bb, e_stm, e_castling, e_ep = _start_arrays([random_endgame(rng, s.endgame_pieces)])
            bb[g], stm[g], castling[g], ep[g] = e_bb[0], e_stm[0], e_castling[0], e_ep[0]
        elif u < s.endgame_fraction + start_fraction:
            i = W.below(rng, len(boards))
            bb[g], stm[g], castling[g], ep[g] = start_bb[i], start_stm[i], start_castling[i], start_ep[i]
        else:
            bb[g], stm[g], castling[g], ep[g] = W.START, 0, W.START_CASTLING, 0
        halfmove[g] = ply[g] = 0
        opening[g] = W.below(rng, s.opening_plies + 1)

    for g in range(G):
        restart(g)
    M = G * MAX_MOVES
    c_bb, c_stm = np.empty((M, 8), np.int64), np.empty(M, np.uint8)
    c_castling, c_ep, c_halfmove, c_legal_ep = (np.empty(M, np.int64), np.empty(M, np.int64), np.empty(M, np.int64),
                                                np.empty(M, np.uint8))
    offsets, picks = np.empty(G + 1, np.int64), np.empty(G, np.int64)
    sampled = np.empty(G * s.children, np.int64)
    keep_below, keep_decay = s.keep_below_cp * upp / 100, s.keep_decay_cp * upp / 100
    parts: list[tuple] = []
    have = 0
    skipped = {"duplicate": 0, "balance_filter": 0}
    games_done = moves_played = idle = 0
    bar = tqdm(total=n, unit="pos", smoothing=0.05, disable=not progress)
    try:
        while have < n:
            m = W.expand(bb, stm, castling, ep, halfmove, offsets, c_bb, c_stm, c_castling, c_ep, c_halfmove,
                         c_legal_ep)
            values, codes = evaluator.evaluate_bitboards(c_bb[:m], c_stm[:m])
            cp = values.astype(np.float64) * (100.0 / upp)
            cp[codes != 0] = np.inf
            temps = np.where(ply < opening, s.opening_temperature_cp, s.temperature_cp)
            W.choose(cp, offsets, temps, rng, picks)
            k = W.sample_children(offsets, picks, s.children, rng, sampled) if s.children else 0
            rows = np.concatenate([picks[picks >= 0], sampled[:k]])
            rows = rows[codes[rows] == 0]
            new = np.empty(len(rows), np.uint8)
            table.room(len(rows))
            W.insert_rows(table.table, c_bb, c_stm, rows, new)
            table.count += int(new.sum())
            skipped["duplicate"] += int(len(rows) - new.sum())
            rows = rows[new.astype(bool)]
            excess = np.abs(values[rows].astype(np.float64)) - keep_below
            balanced = (excess <= 0) | (keep_rng.random(len(rows)) < np.exp(-np.maximum(excess, 0) / keep_decay))
            skipped["balance_filter"] += int((~balanced).sum())
            rows = rows[balanced][:n - have]
            idle = 0 if len(rows) else idle + 1
            if idle >= 1000:
                raise ValueError(f"generator stalled at {have} positions: every new position is a duplicate")
            if len(rows):
                cb = c_castling[rows].view(np.uint64)
                bits = (((cb >> np.uint64(7)) & np.uint64(1)) | (((cb >> np.uint64(0)) & np.uint64(1)) << np.uint64(1))
                        | (((cb >> np.uint64(63)) & np.uint64(1)) << np.uint64(2))
                        | (((cb >> np.uint64(56)) & np.uint64(1)) << np.uint64(3))).astype(np.uint8)
                parts.append((c_bb[rows], c_stm[rows], bits, np.where(c_legal_ep[rows] != 0, c_ep[rows], -1).astype(np.int8),
                              values[rows], np.full(len(rows), SOURCE_SELFPLAY, np.uint8)))
                have += len(rows)
                bar.update(len(rows))
            # advance every game; restart finished ones
            alive = picks >= 0
            p = picks[alive]
            bb[alive], stm[alive], castling[alive], ep[alive], halfmove[alive] = (c_bb[p], c_stm[p], c_castling[p],
                                                                                   c_ep[p], c_halfmove[p])
            ply[alive] += 1
            moves_played += int(alive.sum())
            value = np.zeros(G)
            value[alive] = cp[p]
            for g in range(G):
                if (not alive[g] or halfmove[g] >= 100 or ply[g] >= s.max_game_plies or abs(value[g]) > s.adjudicate_cp
                        or W.insufficient_material(bb[g])):
                    restart(g)
                    games_done += 1
    finally:
        bar.close()
    bitboards, stm_o, castling_o, ep_o, value_o, source = (np.concatenate(a) for a in zip(*parts))
    pieces = np.bitwise_count((bitboards[:, 6] | bitboards[:, 7]).view(np.uint64))
    meta = {
        "format": FORMAT,
        "generator": GENERATOR,
        "seed": seed,
        "n": n,
        "settings": asdict(s),
        "teacher": teacher.description or repr(teacher),
        "teacher_sha256": network_digest(teacher),
        "games": len(games or []),
        "start_positions": len(boards),
        "games_finished": games_done,
        "moves_played": moves_played,
        "positions_by_source": {"selfplay": int(len(value_o))},
        "skipped": skipped,
        "mean_piece_count": float(pieces.mean()),
    }
    return {"format": np.array(FORMAT), "bitboards": bitboards, "stm": stm_o, "castling": castling_o,
            "ep_square": ep_o, "value": value_o.astype(np.int32), "source": source, "meta": np.array(json.dumps(meta))}

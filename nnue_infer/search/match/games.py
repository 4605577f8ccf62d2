"""One game and one game pair of a match: the players move in turn from an opening, the runner keeps the
clocks, checks every move and adjudicates; the game is written as PGN with the engines' scores as comments.
The pair plays the opening twice, the engines swapping colours, so that the opening's bias cancels."""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import chess
import chess.pgn

from ..statistics import pair_category
from .adjudication import Adjudication, _cp, adjudicate, game_end
from .openings import Opening
from .players import (ADJUDICATION, NORMAL, RULES_INFRACTION, TIME_FORFEIT, MoveReport, PlayerSpec,
                      _player_or_forfeit)


#: Seconds an engine may overstep its clock before it loses on time: the runner measures a move's wall time around
#: the engine's reply, which includes the pipe's and the operating system's delays (a loaded machine's scheduler).
TIME_TOLERANCE = 0.1


@dataclass
class GameRecord:
    """One game: its pair, which player had White (0: the first), result, PGN termination, reason and the first
    player's points."""

    pair: int
    white: int
    result: str
    termination: str
    reason: str
    plies: int
    pgn: str = field(repr=False)

    @property
    def first_points(self) -> float:
        """The first player's points (1, 0.5 or 0)."""
        white_points = {"1-0": 1.0, "0-1": 0.0, "1/2-1/2": 0.5}[self.result]
        return white_points if self.white == 0 else 1.0 - white_points


@dataclass
class PairResult:
    """A game pair: the opening played twice, the first player White in ``games[0]`` and Black in ``games[1]``."""

    index: int
    opening: Opening
    games: list[GameRecord]

    @property
    def category(self) -> int:
        """Its pentanomial index 0-4 (LL..WW, the first player's view)."""
        return pair_category(self.games[0].first_points, self.games[1].first_points)


def _comment(report: MoveReport, seconds: float | None) -> str:
    if report.mate is not None:
        text = f"{'+' if report.mate > 0 else '-'}M{abs(report.mate)}"
    elif report.score_cp is not None:
        text = f"{report.score_cp / 100:+.2f}"
    else:
        text = "?"
    text += f"/{report.depth if report.depth is not None else 0}"
    if seconds is not None:
        text += f" {seconds:.3f}s"
    return text


def play_game(specs: Sequence[PlayerSpec], white: int, opening: Opening, *, adjudication: Adjudication = Adjudication(),
              pair: int = 0, event: str = "nnue-infer match", round_: str | None = None, date: str | None = None,
              players: Sequence | None = None, time_tolerance: float = TIME_TOLERANCE) -> GameRecord:
    """Play one game of ``specs[white]`` (White) against the other from ``opening``; a failing engine loses it.

    ``players``: open players for ``specs`` (default: this thread's, started on first use).  ``time_tolerance``:
    seconds a side may overstep its clock before it loses on time."""
    players = list(players) if players is not None else [_player_or_forfeit(s) for s in specs]
    by_colour = {chess.WHITE: white, chess.BLACK: 1 - white}
    board = opening.board()
    game = chess.pgn.Game()
    game.headers["Event"] = event
    game.headers["Site"] = "?"
    game.headers["Date"] = date or datetime.date.today().strftime("%Y.%m.%d")
    game.headers["Round"] = round_ or f"{pair + 1}.{white + 1}"
    game.headers["White"] = specs[white].label
    game.headers["Black"] = specs[1 - white].label
    root = chess.Board(opening.fen)
    if opening.fen != chess.STARTING_FEN:
        game.setup(root)
    node = game
    for i, m in enumerate(opening.moves):
        node = node.add_variation(chess.Move.from_uci(m))
        if i == 0:
            node.comment = "book"
    if opening.moves:
        node.comment = (node.comment + " " if node.comment else "") + "end of book"
    for idx in set(by_colour.values()):
        players[idx].new_game()
    tc = {c: specs[by_colour[c]].limits.tc for c in (chess.WHITE, chess.BLACK)}
    clocks = {c: (tc[c].base if tc[c] else 0.0) for c in (chess.WHITE, chess.BLACK)}
    scores: list[tuple[chess.Color, int | None]] = []
    result = reason = None
    termination = NORMAL
    while True:
        ended = game_end(board)
        if ended:
            result, reason = ended
            break
        mover = board.turn
        player = players[by_colour[mover]]
        timed = tc[mover] is not None
        start = time.monotonic()
        report = player.play(board, clocks if timed else None)
        elapsed = time.monotonic() - start
        side = "White" if mover == chess.WHITE else "Black"
        if report.move is None:
            result = "0-1" if mover == chess.WHITE else "1-0"
            reason, termination = f"{side} forfeits: {report.error}", report.termination or RULES_INFRACTION
            break
        if report.move not in board.legal_moves:  # (python-chess checks UCI moves; kept for any player)
            result = "0-1" if mover == chess.WHITE else "1-0"
            reason, termination = f"{side} forfeits: illegal move {report.move.uci()}", RULES_INFRACTION
            break
        if timed:
            clocks[mover] -= elapsed
            if clocks[mover] < -time_tolerance:
                termination = TIME_FORFEIT
                if board.has_insufficient_material(not mover):
                    result = "1/2-1/2"
                    reason = f"{side} lost on time but the opponent cannot mate"
                else:
                    result = "0-1" if mover == chess.WHITE else "1-0"
                    reason = f"{side} loses on time ({-clocks[mover]:.3f} s over, tolerance {time_tolerance:g} s)"
                break
            clocks[mover] += tc[mover].increment
        node = node.add_variation(report.move, comment=_comment(report, elapsed if timed else None))
        board.push(report.move)
        scores.append((mover, _cp(report.score_cp, report.mate)))
        adjudged = adjudicate(board, scores, adjudication)
        if adjudged and not game_end(board):
            (result, reason), termination = adjudged, ADJUDICATION
            break
    game.headers["Result"] = result
    game.headers["Termination"] = termination
    if opening.fen != chess.STARTING_FEN or opening.moves:
        game.headers["Opening"] = opening.source or "book"
    node.comment = (node.comment + " " if node.comment else "") + reason
    if node is game:
        game.comment = reason
    exporter = chess.pgn.StringExporter(headers=True, variations=False, comments=True)
    return GameRecord(pair, white, result, termination, reason, len(board.move_stack) - len(opening.moves),
                      game.accept(exporter))


def play_pair(specs: Sequence[PlayerSpec], opening: Opening, index: int, adjudication: Adjudication = Adjudication(),
              event: str = "nnue-infer match", date: str | None = None,
              time_tolerance: float = TIME_TOLERANCE) -> PairResult:
    """Play ``opening`` twice: the first player White, then Black.  Picklable arguments: runs on a thread, a
    process or a Dask worker (each keeps its engines open for the next pair)."""
    games = [play_game(specs, white, opening, adjudication=adjudication, pair=index, event=event, date=date,
                       time_tolerance=time_tolerance) for white in (0, 1)]
    return PairResult(index, opening, games)

"""How a game ends: by the rules of chess (:func:`game_end`), or adjudicated from the scores both engines
report (:class:`Adjudication`: resignation, draw, a move limit; :func:`adjudicate`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import chess

from ...errors import MatchError


#: Centipawns a mate score counts as in adjudication.
MATE_CP = 100_000


@dataclass(frozen=True)
class Adjudication:
    """When the runner ends a game before its natural end (each rule off when its count is 0 or None).

    Parameters
    ----------
    resign_moves, resign_score : int
        A side loses when, for ``resign_moves`` consecutive moves of each engine, its engine reported a score of
        ``-resign_score`` cp or worse and its opponent's ``+resign_score`` or better (both engines' reports).
    draw_moves, draw_score, draw_after : int
        A draw when, from move number ``draw_after`` on, both engines reported ``|score| <= draw_score`` cp for
        ``draw_moves`` consecutive moves each.
    max_moves : int
        A draw once the game (book moves included) reaches ``max_moves`` moves (of each side).
    """

    resign_moves: int = 0
    resign_score: int = 1000
    draw_moves: int = 0
    draw_score: int = 10
    draw_after: int = 40
    max_moves: int | None = None

    def __post_init__(self) -> None:
        for name in ("resign_moves", "resign_score", "draw_moves", "draw_score", "draw_after"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 0:
                raise MatchError(f"adjudication {name} must be a whole number >= 0 (got {v!r})")
        if self.max_moves is not None and (not isinstance(self.max_moves, int) or self.max_moves <= 0):
            raise MatchError(f"adjudication max_moves must be > 0 (got {self.max_moves!r})")


def game_end(board: chess.Board) -> tuple[str, str] | None:
    """``(result, reason)`` when the game is over by its rules: checkmate, stalemate, insufficient material,
    threefold repetition or the fifty-move rule (both claimed at once, as a match runner does); else ``None``."""
    if board.is_checkmate():
        return ("0-1" if board.turn == chess.WHITE else "1-0"), "checkmate"
    if board.is_stalemate():
        return "1/2-1/2", "stalemate"
    if board.is_insufficient_material():
        return "1/2-1/2", "insufficient material"
    if board.is_repetition(3):
        return "1/2-1/2", "threefold repetition"
    if board.is_fifty_moves():
        return "1/2-1/2", "fifty-move rule"
    return None


def _cp(score_cp: int | None, mate: int | None) -> int | None:
    if mate is not None:
        return MATE_CP if mate > 0 else -MATE_CP
    return score_cp


def adjudicate(board: chess.Board, scores: Sequence[tuple[chess.Color, int | None]],
               rules: Adjudication) -> tuple[str, str] | None:
    """``(result, reason)`` when ``rules`` end the game in ``board`` (after its last move), else ``None``.

    ``scores``: every engine move's report so far, in order, as ``(colour of the mover, centipawns from the mover's
    view)`` (mate scores as +-:data:`MATE_CP`; ``None`` for no score, which breaks every streak)."""
    if rules.resign_moves:
        n = rules.resign_moves
        recent = scores[-2 * n:]
        if len(recent) == 2 * n and all(s is not None for _, s in recent):
            for loser in (chess.WHITE, chess.BLACK):
                own = [s for c, s in recent if c == loser]
                other = [s for c, s in recent if c != loser]
                if len(own) == n and all(s <= -rules.resign_score for s in own) and \
                        all(s >= rules.resign_score for s in other):
                    side = "White" if loser == chess.WHITE else "Black"
                    return ("0-1" if loser == chess.WHITE else "1-0"), \
                        f"{side} resigns (both engines scored it {rules.resign_score} cp or more behind for {n} moves)"
    if rules.draw_moves and board.fullmove_number >= rules.draw_after:
        n = rules.draw_moves
        recent = scores[-2 * n:]
        if len(recent) == 2 * n and all(s is not None and abs(s) <= rules.draw_score for _, s in recent):
            return "1/2-1/2", f"draw adjudicated (|score| <= {rules.draw_score} cp for {n} moves by both engines)"
    if rules.max_moves and len(board.move_stack) >= 2 * rules.max_moves:
        return "1/2-1/2", f"draw adjudicated (game reached {rules.max_moves} moves)"
    return None

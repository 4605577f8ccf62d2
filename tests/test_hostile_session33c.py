"""Findings of session 33's hostile passes, mended (third round).

Each test is a way an adversarial user broke the program: the standard is a clear error naming the
problem, never a traceback, a hang or a silent wrong number, and a refused operation changes nothing.
"""

from __future__ import annotations

import threading

import chess
import pytest

import nnue_infer
from nnue_infer.errors import ConcurrentUseError

START_E5 = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"


class _InterruptedBoard(chess.Board):
    """A board whose ``parse_uci`` / ``parse_san`` first run ``interrupt`` (once): another thread acting on
    the evaluator while the parse reads the board (``Board.copy`` keeps the class, so the evaluator's own
    copy is one too)."""

    interrupt = None

    def _run_interrupt(self):
        hook, type(self).interrupt = type(self).interrupt, None
        if hook is not None:
            hook()

    def parse_uci(self, uci):
        self._run_interrupt()
        return super().parse_uci(uci)

    def parse_san(self, san):
        self._run_interrupt()
        return super().parse_san(san)


@pytest.mark.parametrize("method, text", [("push_uci", "e2e4"), ("push_san", "e4")])
def test_push_text_parses_under_the_in_use_token(method, text):
    """``push_uci`` / ``push_san`` parsed the move before taking the in-use token: a push from another
    thread could run during the parse (reading a board half pushed), and the move parsed for one position was
    then played on another (here refused as illegal; a move legal in both was played silently).  The parse
    now holds the token: the other thread's push is refused with ConcurrentUseError and the board has only
    the parsed move."""
    ev = nnue_infer.Evaluator()
    ev.set_position(_InterruptedBoard())
    other: list = []

    def push_from_another_thread():
        def run():
            try:
                ev.push(chess.Move.from_uci("g1f3"))
                other.append("pushed")
            except ConcurrentUseError as exc:
                other.append(exc)

        t = threading.Thread(target=run)
        t.start()
        t.join()

    _InterruptedBoard.interrupt = push_from_another_thread
    move = getattr(ev, method)(text)
    assert move == chess.Move.from_uci("e2e4")
    assert len(other) == 1 and isinstance(other[0], ConcurrentUseError), other
    assert ev.board.move_stack == [chess.Move.from_uci("e2e4")]
    after = chess.Board()
    after.push_uci("e2e4")
    assert ev.evaluate() == nnue_infer.evaluate(after)


def test_push_text_errors_still_name_the_move_and_change_nothing():
    ev = nnue_infer.Evaluator()
    ev.set_position(chess.Board())
    with pytest.raises(nnue_infer.IllegalMoveError, match="e2e5"):
        ev.push_uci("e2e5")
    with pytest.raises(nnue_infer.IllegalMoveError, match="Ke2"):
        ev.push_san("Ke2")
    with pytest.raises(TypeError, match="expected a UCI move string, got int"):
        ev.push_uci(7)
    assert ev.board.move_stack == [] and ev._free == [None]  # the token is back after each error

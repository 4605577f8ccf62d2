"""The Evaluator calls its per-position kernels' compiled functions directly, without Numba's
dispatcher (``evaluator._entry_index``): the same numbers as a dispatcher call and as Stockfish
15.1, one compiled signature per kernel, and pickled evaluators look the functions up again."""

from __future__ import annotations

import pickle

import chess
import numba
import pytest
from numba.core.dispatcher import Dispatcher

from nnue_infer import Evaluator
from nnue_infer import evaluator as E
from nnue_infer.kernels.forward import evaluate_fresh, evaluate_stack

GAME = ["e2e4", "c7c5", "g1f3", "d7d6", "d2d4", "c5d4", "f3d4", "g8f6", "b1c3", "a7a6"]


def test_direct_calls_equal_dispatcher_calls_and_stockfish(network, corpus):
    ev = Evaluator(network)
    rows = corpus[::50]
    for row in rows:
        board = chess.Board(row["fen"])
        got = ev.evaluate(board)
        assert got == row["raw"]["value"], row["fen"]
        # the same kernel through the dispatcher, on the state evaluate(board) left
        assert evaluate_fresh(0 if board.turn else 1, *ev._kernel_args) == got
    ev.set_position(chess.Board())
    for uci in GAME:
        ev.push(chess.Move.from_uci(uci))
        got = ev.evaluate()
        assert got == Evaluator(network).evaluate(ev.board)
        ply = len(ev.board.move_stack)
        # dispatcher call of the incremental kernel on the same (already computed) ply
        assert evaluate_stack(ply, 0 if ev.board.turn else 1, ply + 1, *ev._kernel_args) == got


def test_entry_points_have_the_dispatchers_signature(network):
    ev = Evaluator(network)
    ev.evaluate(chess.Board())
    ev.evaluate()
    if not isinstance(evaluate_stack, Dispatcher):
        pytest.skip("NUMBA_DISABLE_JIT is set")
    for kernel, n_ints, index in ((evaluate_stack, 3, ev._stack_entry), (evaluate_fresh, 1, ev._fresh_entry)):
        types = (numba.types.int64,) * n_ints + tuple(numba.typeof(a) for a in ev._kernel_args)
        assert E._ENTRY_INDEX[(kernel, types)] == index
        assert E._ENTRIES[index] is kernel.overloads[types].entry_point
        assert kernel.signatures == [types]


def test_pickled_evaluators_look_the_entry_points_up_again(network):
    ev = Evaluator(network)
    for uci in GAME[:4]:
        ev.push(chess.Move.from_uci(uci))
    want = ev.evaluate()
    state = ev.__getstate__()
    assert "_stack_entry" not in state and "_fresh_entry" not in state  # indices are this process's
    clone = pickle.loads(pickle.dumps(ev))
    assert (clone._stack_entry, clone._fresh_entry) == (ev._stack_entry, ev._fresh_entry)
    assert clone.evaluate() == want
    clone.push(chess.Move.from_uci(GAME[4]))
    assert clone.evaluate() == Evaluator(network).evaluate(clone.board)

"""Stockfish's static evaluation from a network's terms (``nnue_infer.static_evaluation``): the rules
of sf_17.1 / sf_18 ``evaluate.cpp`` that hold for any terms.  The values themselves are checked
against the engines' ``Final evaluation`` in ``tests/oracles/test_node_engines.py``."""

from __future__ import annotations

import chess
import pytest

from nnue_infer.static_evaluation import (EVALUATE, EVALUATE_LIMIT, SMALL_NET_KEEP, small_net_kept,
                                          stockfish_evaluate, uses_small_net)

MIDDLE_GAME = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"


@pytest.mark.parametrize("version", ["15.1", "16", "20"])
def test_a_version_without_a_formula_is_refused_naming_those_with_one(version):
    with pytest.raises(ValueError) as err:
        stockfish_evaluate(100, 100, chess.Board(), version)
    assert version in str(err.value) and all(v in str(err.value) for v in EVALUATE)


@pytest.mark.parametrize("version", list(EVALUATE))
def test_the_value_stays_within_the_tablebase_win_bound(version):
    board = chess.Board("4k3/8/8/8/8/8/8/QQQ1K3 w - - 0 40")
    for psqt, positional in ((10**6, 10**6), (-(10**6), -(10**6)), (2**30, -(2**30)), (31000, 31000)):
        v = stockfish_evaluate(psqt, positional, board, version)
        assert -EVALUATE_LIMIT <= v <= EVALUATE_LIMIT


@pytest.mark.parametrize("version", list(EVALUATE))
def test_the_rule50_counter_damps_toward_zero_without_changing_sign(version):
    values = [stockfish_evaluate(600, 300, chess.Board(MIDDLE_GAME.replace(" 4 4", f" {clock} 40")), version)
              for clock in range(0, 100, 11)]
    assert values[0] > 0 and all(v >= 0 for v in values)
    assert values == sorted(values, reverse=True) and values[-1] < values[0]


@pytest.mark.parametrize("version", list(EVALUATE))
def test_the_value_is_antisymmetric_in_the_terms(version):
    board = chess.Board(MIDDLE_GAME)
    for psqt, positional in ((40, 15), (700, -120), (3000, 2500)):
        assert stockfish_evaluate(-psqt, -positional, board, version) == -stockfish_evaluate(psqt, positional, board, version)


def test_more_material_scales_the_same_terms_up():
    bare = chess.Board("4k3/8/8/8/8/8/8/4K3 w - - 0 40")
    full = chess.Board()
    for version in EVALUATE:
        assert stockfish_evaluate(500, 200, full, version) > stockfish_evaluate(500, 200, bare, version) > 0


@pytest.mark.parametrize("fen, small", [
    (chess.STARTING_FEN, False),
    ("rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", True),   # a queen up (2538)
    ("rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 0 1", True),   # the same, the side behind to move
    ("r1bqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", False),  # a knight up (781)
    ("r1bqkb1r/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", True),   # two knights up (1562)
])
def test_the_small_net_is_tried_when_the_material_is_unbalanced(fen, small):
    assert uses_small_net(chess.Board(fen)) is small


@pytest.mark.parametrize("version", list(SMALL_NET_KEEP))
def test_the_small_nets_value_is_kept_from_its_threshold_on(version):
    keep = SMALL_NET_KEEP[version]
    # the blend (125 psqt + 131 positional) / 128 of positional-only terms, truncated toward zero
    kept = [q for q in range(0, 400) if small_net_kept(0, q, version)]
    assert kept and (131 * kept[0]) // 128 == keep and (131 * (kept[0] - 1)) // 128 == keep - 1
    assert kept == list(range(kept[0], 400))
    assert small_net_kept(0, -kept[0], version) and not small_net_kept(0, -(kept[0] - 1), version)

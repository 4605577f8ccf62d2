"""Networks with int8 threat and pawn-pair inputs (Stockfish 19's input layer) on random weights.

The accumulator of a full refresh equals an independent sum (python-chess features from
tests/reference.py and tests/threat_reference.py, int64 NumPy, then int16 wrap-around), and the
incremental paths (push/pop/evaluate, evaluate_game) equal a full refresh accumulator for
accumulator, over random games with every kind of move, Chess960, null moves and pops.
Weights are large enough that the int16 sums wrap.
"""

from __future__ import annotations

import dataclasses
import random

import chess
import numpy as np
import pytest
import reference as R
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import threat_reference as TR

import nnue_infer
from nnue_infer import Evaluator, NetworkFormatError

SETS = ("FullThreats", "PP_3Wide")


def threat_network(seed: int, ft_width: int = 32, sets: tuple[str, ...] = SETS) -> nnue_infer.Network:
    """A small network: HalfKAv2_hm int16 rows plus int8 threat / pair rows, 15.1-style layer stack."""
    rng = np.random.default_rng(seed)
    arch = dataclasses.replace(nnue_infer.stockfish_15_1_architecture(ft_width=ft_width), int8_feature_sets=sets)
    n8 = (TR.N_THREATS if "FullThreats" in sets else 0) + (TR.N_PAIRS if "PP_3Wide" in sets else 0)
    weights, biases = [], []
    for layer, n_in in zip(arch.layers, arch.layer_inputs()):
        weights.append(rng.integers(-60, 60, (arch.output_buckets, layer.outputs, n_in), dtype=np.int8))
        biases.append(rng.integers(-3000, 3000, (arch.output_buckets, layer.outputs), dtype=np.int32))
    return nnue_infer.Network(
        arch,
        ft_biases=rng.integers(-100, 100, ft_width, dtype=np.int16),
        ft_weights=rng.integers(-9000, 9000, (22528, ft_width), dtype=np.int16),  # sums wrap in int16
        psqt_weights=rng.integers(-3000, 3000, (22528, arch.psqt_buckets), dtype=np.int32),
        layer_weights=tuple(weights),
        layer_biases=tuple(biases),
        int8_weights=rng.integers(-127, 128, (n8, ft_width), dtype=np.int8),
        int8_psqt_weights=rng.integers(-4762, 4763, (n8, arch.psqt_buckets), dtype=np.int32),
    )


@pytest.fixture(scope="module")
def net() -> nnue_infer.Network:
    return threat_network(10)


def reference_accumulator(net: nnue_infer.Network, board: chess.Board) -> tuple[np.ndarray, np.ndarray]:
    """int16[2, L1] and int32[2, 8] (White, Black) from python-chess features and int64 sums."""
    accs, psqts = [], []
    for colour in (chess.WHITE, chess.BLACK):
        half = R.features(board, colour)
        sets = net.architecture.int8_feature_sets
        rel = TR.threat_features(board, colour) if "FullThreats" in sets else []
        if "PP_3Wide" in sets:  # pair rows follow the threat rows, or start at 0 without them
            offset = TR.N_THREATS if "FullThreats" in sets else 0
            rel += [i - TR.N_THREATS + offset for i in TR.pair_features(board, colour)]
        acc = net.ft_biases.astype(np.int64) + net.ft_weights[half].astype(np.int64).sum(0)
        acc += net.int8_weights[rel].astype(np.int64).sum(0)
        psqt = net.psqt_weights[half].astype(np.int64).sum(0) + net.int8_psqt_weights[rel].astype(np.int64).sum(0)
        accs.append(acc.astype(np.int16))  # wraps modulo 2**16
        psqts.append(psqt.astype(np.int32))
    return np.array(accs), np.array(psqts)


def boards(n: int, seed: int) -> list[chess.Board]:
    rng = np.random.default_rng(seed)
    out = [R.random_board(rng, chess960=i % 4 == 3, capture_bias=0.3 * (i % 3)) for i in range(n)]
    out += [R.random_placement(rng, k) for k in range(2, 33, 3)]
    return out + [chess.Board(), chess.Board("4k3/8/8/3r4/4P3/2N5/8/4K3 w - - 0 1")]


def refreshed(ev: Evaluator, board: chess.Board) -> tuple[np.ndarray, np.ndarray]:
    ev._refresh(board)
    return ev._acc.copy(), ev._psqt.copy()


@pytest.mark.parametrize("sets", [SETS, ("FullThreats",), ("PP_3Wide",)])
def test_refresh_equals_independent_sum(sets):
    net = threat_network(3, sets=sets)
    ev = Evaluator(net)
    for board in boards(40, 5):
        acc, psqt = refreshed(ev, board)
        want_acc, want_psqt = reference_accumulator(net, board)
        np.testing.assert_array_equal(acc, want_acc, err_msg=board.fen())
        np.testing.assert_array_equal(psqt, want_psqt, err_msg=board.fen())


def test_int8_rows_stay_int8(net):
    assert net.int8_weights.dtype == np.int8 and net.int8_weights.shape == (TR.N_THREATS + TR.N_PAIRS, 32)
    assert net.int8_psqt_weights.dtype == np.int32
    assert "FullThreats+PP_3Wide+HalfKAv2_hm" in repr(net)


def test_architecture_rejects_bad_int8_sets():
    base = nnue_infer.stockfish_15_1_architecture(ft_width=32)
    for sets, why in ((("PP_3Wide", "FullThreats"), "order"), (("Threats",), "unknown"),
                      (("FullThreats", "FullThreats"), "distinct")):
        with pytest.raises(NetworkFormatError, match="int8_feature_sets"):
            dataclasses.replace(base, int8_feature_sets=sets)
    arch = dataclasses.replace(base, int8_feature_sets=SETS)
    assert nnue_infer.Architecture.from_json(arch.to_json()) == arch
    assert "int8_feature_sets" not in base.to_json()  # files of other networks stay as they were


def play_random(board: chess.Board, rnd: random.Random) -> chess.Move:
    """A random legal move, preferring special ones (castling, e.p., promotion, capture) half the time."""
    moves = list(board.legal_moves)
    special = [m for m in moves if board.is_castling(m) or board.is_en_passant(m) or m.promotion
               or board.is_capture(m)]
    if special and rnd.random() < 0.5:
        return rnd.choice(special)
    return rnd.choice(moves)


@pytest.mark.parametrize("seed", range(6))
def test_incremental_equals_refresh(net, seed):
    """push / pop / null moves / evaluate(): every accumulator equals a full refresh's."""
    kinds = walk(net, seed, 160)
    assert min(kinds["null"], kinds["pop"]) > 0 and sum(kinds.values()) > 20, kinds


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(6, 2**32 - 1), steps=st.integers(1, 80))
def test_incremental_equals_refresh_property(net, seed, steps):
    """The same over hypothesis-chosen random legal sequences (standard and Chess960 starts)."""
    walk(net, seed, steps)


def walk(net: nnue_infer.Network, seed: int, steps: int) -> dict[str, int]:
    """A random walk of ``steps`` pushes (castling, e.p., promotions preferred half the time),
    null moves and pops from a start chosen by ``seed``; at a random 70 % of the plies (so
    several plies are often applied at once) the incremental value and both accumulators must
    equal a full refresh's.  Returns how many moves of each special kind were made."""
    rnd = random.Random(seed)
    ev, fresh = Evaluator(net), Evaluator(net)
    start = chess.Board.from_chess960_pos(rnd.randrange(960)) if seed % 2 else chess.Board()
    if seed == 4:
        start = chess.Board("r3k2r/pPp2ppp/8/3pP3/8/8/P1PP1PpP/R3K2R w KQkq d6 0 1")
    ev.set_position(start)
    board = start.copy()
    kinds = {"castling": 0, "ep": 0, "promotion": 0, "null": 0, "pop": 0}
    for step in range(steps):
        r = rnd.random()
        if board.move_stack and r < 0.15:
            ev.pop()
            board.pop()
            kinds["pop"] += 1
        elif r < 0.2 and not board.is_check():
            ev.push(chess.Move.null())
            board.push(chess.Move.null())
            kinds["null"] += 1
        else:
            if board.is_game_over():
                board = start.copy()
                ev.set_position(board)
                continue
            move = play_random(board, rnd)
            kinds["castling"] += board.is_castling(move)
            kinds["ep"] += board.is_en_passant(move)
            kinds["promotion"] += bool(move.promotion)
            ev.push(move)
            board.push(move)
        if rnd.random() < 0.7:  # lazily: several plies may be applied at once
            value = ev.evaluate()
            assert value == fresh.evaluate(board), board.fen()
            pair = ev._stack_base + len(board.move_stack)
            acc, psqt = refreshed(fresh, board)
            np.testing.assert_array_equal(ev._accs[pair], acc, err_msg=board.fen())
            np.testing.assert_array_equal(ev._psqts[pair], psqt, err_msg=board.fen())
    return kinds


def test_evaluate_game_and_batch(net):
    rnd = random.Random(77)
    fresh = Evaluator(net)
    for k in range(8):
        board = chess.Board.from_chess960_pos(rnd.randrange(960)) if k % 2 else chess.Board()
        start = board.copy()
        moves, want = [], [fresh.evaluate(board)]
        for _ in range(120):
            if board.is_game_over():
                break
            move = play_random(board, rnd)
            moves.append(move)
            board.push(move)
            want.append(fresh.evaluate(board))
        got = nnue_infer.evaluate_game(start, moves, network=net)
        assert got.tolist() == want
        boards_ = _positions(start, moves)
        assert nnue_infer.evaluate_batch(boards_, net).tolist() == want
        fens = [f"{b.board_fen()} {'w' if b.turn else 'b'} - - 0 1" for b in boards_]  # castling is irrelevant
        assert nnue_infer.evaluate_batch(fens, net).tolist() == want


def _positions(start: chess.Board, moves: list[chess.Move]) -> list[chess.Board]:
    b = start.copy()
    out = [b.copy(stack=False)]
    for m in moves:
        b.push(m)
        out.append(b.copy(stack=False))
    return out


def test_native_round_trip(net, tmp_path):
    """The int8 rows go through nnue-infer's safetensors format unchanged (and stay int8)."""
    path = tmp_path / "threats.safetensors"
    nnue_infer.save(net, path)
    back = nnue_infer.load(path)
    assert back.architecture == net.architecture
    assert back.int8_weights.dtype == np.int8
    np.testing.assert_array_equal(back.int8_weights, net.int8_weights)
    np.testing.assert_array_equal(back.int8_psqt_weights, net.int8_psqt_weights)

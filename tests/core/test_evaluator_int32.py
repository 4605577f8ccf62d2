"""Issue 8 items 3 and 4: Stockfish's int32 arithmetic for the PSQT term and the value, on every path.

Stockfish 15.1 computes ``psqt = (psqt_stm - psqt_opp) / 2`` and ``(psqt + positional) / 16``
in wrapping int32 (``FeatureTransformer::transform``, ``NNUE::evaluate``).  nnue-infer used
int64: a ``.nnue`` with PSQT weights near 2**30 evaluated to +232370.97 instead of Stockfish's
-139423.29, and ``evaluate`` (Python int, 4294967294) disagreed with ``evaluate_batch`` /
``evaluate_game`` (int32 arrays, -2).  The oracle here is the real ``/usr/games/stockfish``
loading crafted networks with ``setoption name EvalFile``.
"""

from __future__ import annotations

import chess
import numpy as np
import pytest

import nnue_infer
import reference as R
from stockfish_uci import Stockfish, nnue_part

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def crafted(network, seed: int, psqt_range: int, output_bias: int | None) -> nnue_infer.Network:
    """Stockfish 15.1's network with random PSQT weights in ``[-psqt_range, psqt_range)`` and,
    optionally, every layer stack's output bias set to ``output_bias`` (positional near the int32 edge)."""
    rng = np.random.default_rng(seed)
    psqt = rng.integers(-psqt_range, psqt_range, size=network.psqt_weights.shape, dtype=np.int64).astype(np.int32)
    biases = network.layer_biases
    if output_bias is not None:
        biases = (*biases[:-1], np.full_like(biases[-1], output_bias))
    return nnue_infer.Network(network.architecture, network.ft_biases, network.ft_weights, psqt,
                              network.layer_weights, biases, description=f"crafted int32 test net {seed}")


def extreme(network, seed: int) -> nnue_infer.Network:
    """Every tensor of Stockfish 15.1's architecture uniformly random over its whole integer range
    (int16 accumulators, int32 dense sums, skip and PSQT all wrap somewhere)."""
    rng = np.random.default_rng(seed)

    def full(a):
        info = np.iinfo(a.dtype)
        return rng.integers(info.min, info.max + 1, size=a.shape, dtype=np.int64).astype(a.dtype)

    return nnue_infer.Network(network.architecture, full(network.ft_biases), full(network.ft_weights),
                              full(network.psqt_weights), tuple(map(full, network.layer_weights)),
                              tuple(map(full, network.layer_biases)), description="extreme weights")


@pytest.fixture(scope="module")
def crafted_nets(network, tmp_path_factory):
    """(network, .nnue path) pairs: PSQT sums that overflow int32, a positional term near 2**31,
    and every weight anywhere in its integer range."""
    out = []
    for seed, psqt_range, bias in [(1, 2**30, None), (2, 2**30, INT32_MAX - 3000), (3, 2**24, INT32_MIN + 2000),
                                   (4, None, None)]:
        net = crafted(network, seed, psqt_range, bias) if psqt_range else extreme(network, seed)
        path = tmp_path_factory.mktemp("int32") / f"crafted-{seed}.nnue"
        nnue_infer.save(net, path)
        assert nnue_infer.load(path).psqt_weights.tolist() == net.psqt_weights.tolist()
        out.append((net, path))
    return out


def positions(sample_boards) -> list[chess.Board]:
    boards = [b for b in sample_boards if not b.is_check() and b.uci_variant == "chess" and not b.chess960]
    return boards[::4][:40]


def test_traces_equal_stockfish_on_overflowing_networks(crafted_nets, sample_boards, stockfish_binary):
    """Items 3/4: Stockfish 15.1's ``eval`` text (bucket table, NNUE line, piece values) on crafted
    networks whose PSQT difference and psqt + positional overflow int32."""
    boards = positions(sample_boards)
    wrapped = 0
    for net, path in crafted_nets:
        engine = Stockfish(stockfish_binary)
        try:
            engine._command(f"setoption name EvalFile value {path}\nisready", "readyok")
            ev = nnue_infer.Evaluator(net)
            for board in boards:
                lines = engine.eval_lines(board.fen())
                assert lines[0] == f"info string NNUE evaluation using {path} enabled", lines[:2]
                trace = ev.trace(board)
                assert trace.format_stockfish().split("\n") == nnue_part(lines), board.fen()
                ref = R.evaluate(net, board)
                assert (trace.psqt, trace.positional, trace.value) == (tuple(ref.psqt), tuple(ref.positional),
                                                                        ref.value)
                k = trace.bucket
                wrapped += not (INT32_MIN <= trace.psqt[k] + trace.positional[k] <= INT32_MAX)
        finally:
            engine.close()
    assert wrapped >= 10  # the sum did overflow int32 in many positions (and Stockfish agreed)


def native_net_with_output_scale_1() -> nnue_infer.Network:
    """A native network whose value is ``psqt + positional`` itself (output_scale 1): with PSQT
    near 2**30 and the output bias near 2**31 the sum leaves int32 (was 4294967294 from
    ``evaluate``, -2 from ``evaluate_batch``)."""
    arch = nnue_infer.Architecture("Chess768", 32, "pairwise", 127, 7, psqt_buckets=1, output_buckets=1,
                                   layers=(nnue_infer.HiddenLayer(1, "none"),), output_scale=1)
    net = nnue_infer.quantise(nnue_infer.FloatNetwork.random(arch, seed=4))
    rng = np.random.default_rng(4)
    psqt = rng.integers(2**28, 2**29, size=net.psqt_weights.shape, dtype=np.int64).astype(np.int32)
    psqt[rng.random(psqt.shape) < 0.5] *= -1
    biases = (np.full_like(net.layer_biases[0], INT32_MAX - 50),)
    return nnue_infer.Network(arch, net.ft_biases, net.ft_weights, psqt, net.layer_weights, biases)


def test_every_path_gives_the_same_int32_values(crafted_nets, sample_boards):
    """Item 4: evaluate, the incremental path, evaluate_batch (FENs and boards), evaluate_game,
    the module functions and trace agree; every value is int32-representable."""
    boards = [b for b in sample_boards if b.uci_variant == "chess"][:60]
    native = native_net_with_output_scale_1()
    single = [nnue_infer.Evaluator(native).evaluate(b) for b in boards]
    assert sum(v < 0 for v in single) >= 10  # psqt + positional wrapped past 2**31 - 1 in many positions
    game = chess.Board()
    moves = []
    for uci in ["e2e4", "e7e5", "g1f3", "b8c6", "f1b5", "a7a6", "b5c6", "d7c6", "e1g1", "f7f6"]:
        moves.append(chess.Move.from_uci(uci))
    for net in [native] + [net for net, _ in crafted_nets]:
        ev = nnue_infer.Evaluator(net)
        single = [ev.evaluate(b) for b in boards]
        assert all(INT32_MIN <= v <= INT32_MAX for v in single)
        assert ev.evaluate_batch(boards).tolist() == single
        assert ev.evaluate_batch([b.fen() for b in boards]).tolist() == single
        assert nnue_infer.evaluate_batch(boards, net).tolist() == single
        assert [nnue_infer.evaluate(b, net) for b in boards] == single
        assert [ev.trace(b).value for b in boards[:10]] == single[:10]
        assert ev.evaluate_batch(boards).tolist() == [ev.evaluate(b) for b in boards]
        along = ev.evaluate_game(game, moves).tolist()
        board = game.copy()
        expect = [ev.evaluate(board)]
        ev.set_position(board)
        incremental = [ev.evaluate()]
        for m in moves:
            board.push(m)
            expect.append(ev.evaluate(board))
            ev.push(m)
            incremental.append(ev.evaluate())
        assert along == expect == incremental

"""The smooth gates ``hswish_glu`` and ``lut_glu``: float definitions, the gate table stored with
the network, quantisation, and the PyTorch model agreeing with the NumPy float reference."""

from __future__ import annotations

import dataclasses

import chess
import numpy as np
import pytest

from nnue_infer import Evaluator
from nnue_infer.errors import NetworkFormatError
from nnue_infer.features import architecture_features
from nnue_infer.float_network import FloatNetwork, forward_float, ft_activation_float
from nnue_infer.formats import load, save
from nnue_infer.network import Architecture, HiddenLayer, default_gate_table
from nnue_infer.quantisation import SCHEMES, dequantise, quantise

FENS = ["r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
        "8/5k2/3p4/1p1Pp2p/pP2Pp1P/P4P1K/8/8 b - - 99 50",
        "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"]


def arch(activation: str) -> Architecture:
    return Architecture(feature_set="Chess768", ft_width=32, ft_activation=activation, ft_clamp=127,
                        ft_shift=SCHEMES["stockfish"].shift_for(activation), psqt_buckets=0, output_buckets=1,
                        layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")))


def test_float_definitions():
    """hswish_glu = hard-swish(3x)/3 * clamp(b): zero at x = -1 and 0, -1/8 at -1/2, 1 at 1;
    lut_glu = the default table's gate u * sigmoid(4u), linearly interpolated, times clamp(b)."""
    a = np.array([-2.0, -1.0, -0.5, 0.0, 1.0, 3.0])
    acc = np.concatenate([a, np.full(6, 0.5)])
    got = ft_activation_float("hswish_glu", acc, acc)[:6]
    np.testing.assert_allclose(got, [0, 0, -0.0625, 0, 0.5, 0.5])
    t = default_gate_table()
    got = ft_activation_float("lut_glu", acc, acc, t)[:6]
    u = np.clip(a, -1, 1)
    np.testing.assert_allclose(got, 0.5 * u / (1 + np.exp(-4 * u)), atol=1e-6)
    with pytest.raises(ValueError, match="table"):
        ft_activation_float("lut_glu", acc, acc)


def test_table_saved_loaded_and_quantised(tmp_path):
    fn = FloatNetwork.random(arch("lut_glu"), seed=3)
    assert fn.ft_table.shape == (257,)
    save(fn, tmp_path / "f.safetensors")
    back = load(tmp_path / "f.safetensors")
    np.testing.assert_array_equal(back.ft_table, fn.ft_table)
    q = quantise(fn)
    assert q.ft_table.dtype == np.int16 and q.ft_table.shape == (255,)
    u = np.arange(-127, 128) / 127
    np.testing.assert_array_equal(q.ft_table, np.rint(127 * np.interp(u, np.linspace(-1, 1, 257), fn.ft_table)))
    save(q, tmp_path / "q.safetensors")
    qb = load(tmp_path / "q.safetensors")
    np.testing.assert_array_equal(qb.ft_table, q.ft_table)
    assert [Evaluator(qb).evaluate(f) for f in FENS] == [Evaluator(q).evaluate(f) for f in FENS]
    np.testing.assert_array_equal(quantise(dequantise(q)).ft_table, q.ft_table)  # integers reproduced


def test_table_checked():
    fn = FloatNetwork.random(arch("lut_glu"), seed=3)
    with pytest.raises(NetworkFormatError, match="ft.table.*missing"):
        dataclasses.replace(fn, ft_table=None)
    with pytest.raises(NetworkFormatError, match=r"outside \[-1, 1\]"):
        dataclasses.replace(fn, ft_table=fn.ft_table * 2)
    with pytest.raises(NetworkFormatError, match="odd"):
        dataclasses.replace(fn, ft_table=fn.ft_table[:-1])
    q = quantise(fn)
    with pytest.raises(NetworkFormatError, match="exceeds QA=127 by 1"):
        dataclasses.replace(q, ft_table=np.full(255, 128, np.int16))
    with pytest.raises(NetworkFormatError, match="has no gate table"):
        dataclasses.replace(quantise(FloatNetwork.random(arch("glu"), seed=3)), ft_table=q.ft_table)


def test_changing_the_table_changes_the_evaluation():
    """The engine reads the network's table (not a built-in gate)."""
    q = quantise(FloatNetwork.random(arch("lut_glu"), seed=3))
    flipped = dataclasses.replace(q, ft_table=np.ascontiguousarray(-q.ft_table))
    assert [Evaluator(q).evaluate(f) for f in FENS] != [Evaluator(flipped).evaluate(f) for f in FENS]


@pytest.mark.parametrize("activation", ["hswish_glu", "lut_glu"])
def test_torch_model_matches_float_reference(activation):
    """The trainer's PyTorch activation computes the float semantics of float_network."""
    pytest.importorskip("torch")
    import torch

    from nnue_infer.training.model import FloatModel, model_to_float_network

    model = FloatModel(arch(activation), seed=2, fused=False)
    with torch.no_grad():
        model.ft_weights.mul_(4)  # spread the accumulators over the whole clamp range
    fn = model_to_float_network(model)
    fs = architecture_features(fn.architecture)
    feats = np.full((len(FENS), 2, 32), fs.num_features, np.int64)
    for i, fen in enumerate(FENS):
        board = chess.Board(fen)
        white, black = fs.active(board)
        stm, opp = (white, black) if board.turn else (black, white)
        feats[i, 0, :len(stm)], feats[i, 1, :len(opp)] = stm, opp
    with torch.no_grad():
        got = model(torch.from_numpy(feats), torch.zeros(len(FENS), dtype=torch.long)).numpy()
    np.testing.assert_allclose(got, [forward_float(fn, f) for f in FENS], rtol=1e-4, atol=1e-2)

"""Every feature-transformer activation: a seeded random float network with realistic scales,
quantised with both named schemes, agrees with ``forward_float`` on the dev corpus within the
derived bound of :class:`nnue_infer.quantisation.ErrorBound` (the derivation is in its docstring)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nnue_infer import Evaluator
from nnue_infer.float_network import FloatNetwork, forward_float
from nnue_infer.network import FT_ACTIVATIONS, Architecture, HiddenLayer
from nnue_infer.quantisation import SCHEMES, ErrorBound, quantise

LAYERS_SF = (HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"), HiddenLayer(1, "none"))


def arch_for(activation: str, feature_set: str = "HalfKAv2_hm", **kw) -> Architecture:
    shift = {1: 0, 2: 7, 3: 14, 4: 21}[FT_ACTIVATIONS[activation].degree]
    base = dict(feature_set=feature_set, ft_width=128, ft_activation=activation, ft_clamp=127, ft_shift=shift,
                psqt_buckets=8, output_buckets=8, layers=LAYERS_SF, skip_index=15)
    base.update(kw)
    return Architecture(**base)


@pytest.fixture(scope="module")
def fens(corpus):
    return [r["fen"] for r in corpus[::3]]


def errors_and_bounds(fn, q, fens, evaluated=None):
    ev, bound = Evaluator(evaluated or q), ErrorBound(fn, q)
    err = np.array([ev.evaluate(f) - forward_float(fn, f) for f in fens])
    return err, np.array([bound(f) for f in fens])


@pytest.mark.parametrize("scheme", ["stockfish", "qa255-qb64"])
@pytest.mark.parametrize("activation", list(FT_ACTIVATIONS))
def test_quantised_within_derived_bound(activation, scheme, fens):
    fn = FloatNetwork.random(arch_for(activation), seed=20261130)
    q = quantise(fn, SCHEMES[scheme])
    err, bound = errors_and_bounds(fn, q, fens)
    assert np.all(np.abs(err) <= bound), (np.abs(err) / bound).max()
    # the network is not degenerate: its evaluations spread well beyond the error bound
    assert np.std([forward_float(fn, f) for f in fens[:200]]) > np.median(bound) / 2


@pytest.mark.parametrize("activation", ["pairwise", "glu", "crelu"])
def test_chess768_mirrored_buckets_within_bound(activation, fens):
    arch = arch_for(activation, "Chess768", king_buckets=tuple(sq // 16 for sq in range(64)), mirror="a-d",
                    psqt_buckets=0, output_buckets=1, skip_index=-1,
                    layers=(HiddenLayer(16, "crelu"), HiddenLayer(1, "none")), output_units=400, units_per_pawn=100)
    fn = FloatNetwork.random(arch, seed=5)
    q = quantise(fn, SCHEMES["qa255-qb64"])
    err, bound = errors_and_bounds(fn, q, fens[::2])
    assert np.all(np.abs(err) <= bound)


def test_bound_catches_a_wrong_shift(fens):
    """The test above can fail: evaluating with a feature-transformer shift off by one (halving the
    first layer's input) leaves the bound on most positions."""
    fn = FloatNetwork.random(arch_for("pairwise"), seed=20261130)
    q = quantise(fn, SCHEMES["stockfish"])
    wrong = dataclasses.replace(q, architecture=dataclasses.replace(q.architecture, ft_shift=8))
    err, bound = errors_and_bounds(fn, q, fens[::4], evaluated=wrong)
    assert np.mean(np.abs(err) > bound) > 0.2


@pytest.mark.parametrize("layers", [
    (HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "screlu", precision="float32"),
     HiddenLayer(1, "none", precision="float32")),
    (HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "relu", precision="float32"),
     HiddenLayer(1, "none", precision="float32")),
    (HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"), HiddenLayer(1, "none", precision="float32")),
], ids=["screlu-float", "relu-float", "float-output"])
def test_float_hidden_layers_within_bound(layers, fens):
    """Float hidden layers after the integer first layer: parameters kept as float32, the boundary
    activation computed in float, so the error comes from the feature transformer and layer 0."""
    fn = FloatNetwork.random(arch_for("pairwise", layers=layers), seed=3)
    q = quantise(fn, SCHEMES["qa255-qb64"])
    for i, layer in enumerate(layers):
        assert q.layer_weights[i].dtype == (np.float32 if layer.is_float else np.int8)
        if layer.is_float:
            assert np.array_equal(q.layer_weights[i], fn.layer_weights[i])
    err, bound = errors_and_bounds(fn, q, fens[::2])
    assert np.all(np.abs(err) <= bound)

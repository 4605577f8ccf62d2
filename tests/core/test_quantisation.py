"""Quantiser: Stockfish round trip, scheme checks and float-vs-quantised agreement."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnue_infer import Evaluator
from nnue_infer.errors import QuantisationRangeError
from nnue_infer.float_network import FloatNetwork, forward_float, network_tensors
from nnue_infer.network import Architecture, HiddenLayer
from nnue_infer.quantisation import SCHEMES, QuantisationScheme, dequantise, quantise, quantise_with_report, tensor_scales
from nnue_infer import Architecture, FloatNetwork, HiddenLayer, NetworkFormatError, load, quantise, save
from nnue_infer.quantisation import quantise_with_report


def test_stockfish_dequantise_quantise_reproduces_every_integer(network):
    q, report = quantise_with_report(dequantise(network), SCHEMES["stockfish"])
    assert q.architecture == network.architecture
    assert not report.clipped
    for (name, a), b in zip(network_tensors(network).items(), network_tensors(q).values()):
        assert a.dtype == b.dtype and np.array_equal(a, b), name


def test_stockfish_float_semantics_match_integers(network, corpus):
    # The dequantised Stockfish net in float agrees with the integer evaluation up to truncations.
    fn = dequantise(network)
    ev = Evaluator(network)
    floats = np.array([forward_float(fn, f) for f in [r["fen"] for r in corpus[:60]]])
    ints = np.array([ev.evaluate(f) for f in [r["fen"] for r in corpus[:60]]])
    assert np.corrcoef(floats, ints)[0, 1] > 0.999
    assert np.abs(floats - ints).mean() < 0.02 * np.abs(ints).mean()


def arch_for(activation: str, **kw) -> Architecture:
    base = dict(feature_set="HalfKAv2_hm", ft_width=128, ft_activation=activation, ft_clamp=127, ft_shift=7,
                psqt_buckets=8, output_buckets=8,
                layers=(HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"), HiddenLayer(1, "none")),
                skip_index=15)
    if activation == "crelu":
        base["ft_shift"] = 0
    if activation == "pairwise_screlu":
        base["ft_shift"] = 21
    base.update(kw)
    return Architecture(**base)


@pytest.mark.parametrize("scheme", ["stockfish", "qa255-qb64"])
def test_named_schemes(scheme):
    fn = FloatNetwork.random(arch_for("pairwise"), seed=3)
    q = quantise(fn, SCHEMES[scheme])
    assert (q.architecture.ft_clamp, q.architecture.ft_shift) == {"stockfish": (127, 7), "qa255-qb64": (255, 9)}[scheme]
    assert q.architecture.skip_numerator * 127 * 64 == q.architecture.skip_denominator * 600 * 16


def test_activation_overflow_scheme_rejected():
    fn = FloatNetwork.random(arch_for("glu"), seed=3)
    with pytest.raises(QuantisationRangeError, match=r"'glu'.*exceeding the int8 input of layers\[0\] \(127\) by 381"):
        quantise(fn, QuantisationScheme(qa=255, ft_shift=7))
    with pytest.raises(QuantisationRangeError, match="QA=40000"):
        quantise(fn, QuantisationScheme(qa=40000))


def test_accumulator_overflow_rejected():
    fn = FloatNetwork.random(arch_for("pairwise"), seed=3)
    w = fn.ft_weights.copy()
    w[:, 5] = 9.0  # 32 pieces * 9 * 127 = 36576 > 32767
    bad = dataclasses.replace(fn, ft_weights=w)
    with pytest.raises(QuantisationRangeError, match=r"feature transformer: .* column 5 exceeds int16 max 32767 by"):
        quantise(bad)


def test_clipped_parameters_reported():
    fn = FloatNetwork.random(arch_for("pairwise"), seed=3)
    w = [x.copy() for x in fn.layer_weights]
    w[1][2, 3, 4] = 5.0   # 5 * 64 = 320 > 127
    w[1][0, 0, 0] = -7.0
    bad = dataclasses.replace(fn, layer_weights=tuple(w))
    q, report = quantise_with_report(bad)
    assert [(c.tensor, c.count, c.worst) for c in report.clipped] == [("layers.1.weights", 2, -7.0)]
    assert q.layer_weights[1][2, 3, 4] == 127 and q.layer_weights[1][0, 0, 0] == -128
    with pytest.raises(QuantisationRangeError, match="layers.1.weights: 2 clipped"):
        quantise_with_report(bad, clip="error")


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), qa=st.sampled_from([127, 255]), scale=st.floats(0.01, 0.5))
def test_dequantise_quantise_within_half_a_step(seed, qa, scale):
    """Without clipping, every dequantised parameter is within half a quantisation step of the float one,
    and quantising the dequantised network gives the same integers back."""
    arch = Architecture(feature_set="Chess768", ft_width=32, ft_activation="pairwise", ft_clamp=127, ft_shift=7,
                        psqt_buckets=2, output_buckets=2, layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")))
    fn = FloatNetwork.random(arch, seed=seed, ft_std=scale, first_gain=1.0)
    q, report = quantise_with_report(fn, QuantisationScheme(qa=qa))
    back = dequantise(q)
    scales = tensor_scales(q.architecture)
    for name, f in fn.tensors().items():
        d = np.abs(back.tensors()[name].astype(np.float64) - f.astype(np.float64))
        if not report.clipped:
            assert d.max(initial=0) <= 0.5 / scales[name] * (1 + 1e-6) + 1e-7, name
    again = quantise(back, QuantisationScheme(qa=qa))
    for a, b in zip(network_tensors(q).values(), network_tensors(again).values()):
        assert np.array_equal(a, b)


# -- hostile input ---------------------------------------------------------------------------------------------------

def test_quantise_never_clips_silently():
    """quantise() saturated out-of-range parameters and dropped the report: a hidden weight of
    1e6 became 127 without a word."""
    import numpy as np

    from nnue_infer import FloatNetwork, QuantisationRangeError, QuantisationWarning, quantise
    from nnue_infer import stockfish_15_1_architecture
    from nnue_infer.quantisation import quantise_with_report

    net = FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)
    weights = [w.copy() for w in net.layer_weights]
    weights[1][2, 3, 4] = 1e6
    bad = FloatNetwork(net.architecture, net.ft_biases, net.ft_weights, net.psqt_weights, tuple(weights),
                       net.layer_biases)
    with pytest.warns(QuantisationWarning, match=r"layers\.1\.weights.*1 "):
        q = quantise(bad)
    assert q.layer_weights[1][2, 3, 4] == 127 and np.array_equal(q.layer_weights[0], quantise(net).layer_weights[0])
    with pytest.raises(QuantisationRangeError, match=r"layers\.1\.weights"):
        quantise_with_report(bad, clip="error")


@pytest.mark.parametrize("fields, name", [
    ({"qa": 127.5}, "qa"), ({"qa": 0}, "qa"), ({"ft_shift": -1}, "ft_shift"), ({"weight_scale_bits": -1}, "weight_scale_bits"),
    ({"weight_scale_bits": 31}, "weight_scale_bits"), ({"output_scale": 1.5}, "output_scale"), ({"output_scale": 0}, "output_scale"),
])
def test_bad_scheme_fields_are_named(fields, name):
    """A float QA raised TypeError, a negative shift a bare 'negative shift count', QA=0
    'over by -32767', and weight_scale_bits=-1 blamed skip_denominator."""
    from nnue_infer import QuantisationRangeError, QuantisationScheme

    with pytest.raises(QuantisationRangeError, match=f"scheme field '{name}'"):
        QuantisationScheme(**fields)


@pytest.mark.parametrize("clip", ["error", "saturate"])
def test_nan_written_after_construction_is_named_at_quantisation(clip):
    """Item 8: NaN written into a FloatNetwork's arrays after construction became 0 ("no parameter
    clipped"), a NaN bias was blamed on an int32 worst-case sum; now the tensor is named."""
    net = FloatNetwork.random(Architecture("Chess768", 64, "pairwise", 127, 7, psqt_buckets=0, output_buckets=1,
                                           layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none"))), seed=8)
    net.layer_biases[0][0, 2] = np.nan
    with pytest.raises(NetworkFormatError, match=r"tensor 'layers.0.biases': 1 value\(s\) NaN or infinity, the first "
                                                 r"nan at index \[0, 2\]"):
        quantise_with_report(net, clip=clip)
    net.layer_biases[0][0, 2] = 0.0
    net.ft_weights[700, 5] = np.inf
    with pytest.raises(NetworkFormatError, match="tensor 'ft.weights'.*inf at index \\[700, 5\\]"):
        quantise_with_report(net, clip=clip)

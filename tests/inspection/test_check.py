"""``check``: worst-case ranges that hold on data and are reached where they can be, networks built to
overflow named as such, values at the limits, sparsity and a float network's quantisation error."""

from __future__ import annotations

import dataclasses

import chess
import numpy as np
import pytest

from nnue_infer import Evaluator
from nnue_infer.float_network import FloatNetwork
from nnue_infer.inspection.check import check, limit_shares, worst_case
from nnue_infer.inspection.positions import read_positions
from nnue_infer.network import Architecture, HiddenLayer
from nnue_infer.quantisation import quantise
from nnue_infer.training.crosscheck import crosscheck


def _small(activation: str = "pairwise", seed: int = 2):
    arch = Architecture(feature_set="Chess768", ft_width=32, ft_activation=activation, ft_clamp=127, ft_shift=7,
                        psqt_buckets=8, output_buckets=8, layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")),
                        output_units=400, units_per_pawn=100)
    return FloatNetwork.random(arch, seed=seed)


@pytest.fixture(scope="module")
def corpus_positions(data_dir):
    return read_positions(data_dir / "positions-dev.jsonl")


def test_stockfish_15_1_is_safe_and_its_accumulators_stay_within_the_worst_case(network, corpus_positions):
    report = check(network, corpus_positions)
    assert report.safe and report.int16_overflow == [] and report.psqt_overflow == []
    acc = Evaluator(network).activations_bitboards(corpus_positions.bitboards, corpus_positions.stm).accumulator
    assert (acc.min(axis=(0, 1)) >= report.accumulator_low).all()
    assert (acc.max(axis=(0, 1)) <= report.accumulator_high).all()
    # the spec's bound over any 32 rows (no square or king-bucket rule) is 32,657: one position's is below it
    assert report.accumulator_high.max() < 32657
    assert report.data["dead_neurons"] == [] and 0.3 < report.data["zero_chunk_share"] < report.data["zero_byte_share"]


def test_the_worst_case_is_reached_by_a_full_board():
    """Chess768 without king buckets: every row of neuron 3 is +900, so 32 pieces give bias + 32 * 900 exactly,
    and the accumulator of a 32-piece position is that bound; one more unit of bias overflows int16."""
    net = quantise(_small())
    w = net.ft_weights.copy()
    w[:, 3] = 900
    net = dataclasses.replace(net, ft_weights=w)
    low, high = worst_case(net)
    assert high[3] == int(net.ft_biases[3]) + 32 * 900
    acc = Evaluator(net).activations(chess.Board()).accumulator
    assert acc[0, 3] == high[3] and acc[1, 3] == high[3]
    assert check(net).safe
    b = net.ft_biases.copy()
    b[3] = 32767 - 32 * 900 + 1
    over = check(dataclasses.replace(net, ft_biases=b))
    assert over.int16_overflow == [3] and not over.safe
    assert "INT16 OVERFLOW POSSIBLE in 1 neuron(s): 3 (" in str(over)


def test_negative_overflow_and_psqt_overflow_are_named():
    net = quantise(_small())
    w = net.ft_weights.copy()
    w[:, [5, 17]] = -1100
    p = net.psqt_weights.copy()
    p[:, 6] = 2**26
    report = check(dataclasses.replace(net, ft_weights=w, psqt_weights=p))
    assert report.int16_overflow == [5, 17] and report.psqt_overflow == [6]
    assert int(report.accumulator_low[5]) < -32768
    assert "INT32 OVERFLOW POSSIBLE in PSQT bucket(s) [6]" in str(report)


def test_threat_rows_count_up_to_their_most_active_features(corpus_positions):
    """Stockfish 19's int8 threat and pawn-pair rows add at most 128 rows each to the worst case, and
    its accumulators on real positions stay within it."""
    from nnue_infer.errors import NetworkNotFoundError
    from nnue_infer.resources import known_network

    try:
        sf19 = known_network("sf19")
    except NetworkNotFoundError as exc:
        pytest.skip(str(exc))
    low, high = worst_case(sf19)
    plain = dataclasses.replace(sf19, int8_weights=np.zeros_like(sf19.int8_weights))
    low0, high0 = worst_case(plain)
    extra = high - high0
    assert (extra >= 0).all() and (extra <= 2 * 128 * 127).all() and extra.max() > 0
    rows = corpus_positions[:400]
    acc = Evaluator(sf19).activations_bitboards(rows.bitboards, rows.stm).accumulator
    assert (acc.min(axis=(0, 1)) >= low).all() and (acc.max(axis=(0, 1)) <= high).all()


def test_values_at_the_quantisation_limits_are_counted(network):
    w0 = network.layer_weights[0].copy()
    w0[0, 0, :100] = 127
    w0[1, 0, :50] = -128
    shares = {t["tensor"]: t for t in limit_shares(dataclasses.replace(network, layer_weights=(w0, *network.layer_weights[1:])))}
    before = {t["tensor"]: t for t in limit_shares(network)}
    assert shares["layers.0.weights"]["at_limit"] >= 150
    assert shares["layers.0.weights"]["at_limit"] - before["layers.0.weights"]["at_limit"] == \
        150 - int(np.isin(network.layer_weights[0][0, 0, :100], [127, -127, -128]).sum()) \
        - int(np.isin(network.layer_weights[0][1, 0, :50], [127, -127, -128]).sum())
    assert shares["ft.weights"]["at_limit"] == 0


def test_dead_neurons_are_found(corpus_positions):
    """A neuron whose accumulator never rises above 0 gives no output: dead, and named."""
    net = quantise(_small())
    b = net.ft_biases.copy()
    w = net.ft_weights.copy()
    b[[2, 2 + 16]] = -3000  # both halves of output neuron 2 (pairwise: 2 and 2 + L1/2)
    w[:, [2, 18]] = 0
    report = check(dataclasses.replace(net, ft_biases=b, ft_weights=w), corpus_positions[:500])
    assert 2 in report.data["dead_neurons"]


def test_a_float_network_is_compared_with_its_quantisation(corpus_positions):
    fn = _small(seed=4)
    rows = corpus_positions[:300]
    report = check(fn, rows)
    assert report.quantised_from_float
    f = report.float_error
    direct = crosscheck(fn, quantise(fn), rows.fens).summary()
    assert f["mae_cp"] == direct["mae_cp"] and f["positions"] == direct["positions"] == 300
    assert 0.9 < f["r2"] <= 1.0
    bands = f["sigma_bands_cp"]
    assert bands[0] <= bands[1] <= bands[2] <= f["max_abs_cp"]
    assert abs(f["worst"][0]["error_cp"]) == f["max_abs_cp"]

"""The feature-transformer permutation: bit-identical evaluations on every network family, more
all-zero chunks, and the search's objective against a NumPy count."""

from __future__ import annotations

import dataclasses
import json

import chess
import numpy as np
import pytest

from nnue_infer import Evaluator
from nnue_infer.float_network import FloatNetwork
from nnue_infer.inspection.permutation import (find_order, half_width, permute, permute_network, zero_bits,
                                               zero_chunk_share)
from nnue_infer.inspection.positions import Positions, read_positions
from nnue_infer.kernels.nnue import permutation as KP
from nnue_infer.network import Architecture, HiddenLayer
from nnue_infer.quantisation import SCHEMES, quantise


def _known(spec: str):
    from nnue_infer.errors import NetworkNotFoundError
    from nnue_infer.resources import known_network

    try:
        return known_network(spec)
    except NetworkNotFoundError as exc:  # no npm tarball in the cache: CI fetches it (.ci/run)
        pytest.skip(str(exc))


def _gated(activation: str, width: int = 64, seed: int = 5):
    arch = Architecture(feature_set="Chess768", king_buckets=tuple(sq // 16 for sq in range(64)), mirror="a-d",
                        ft_width=width, ft_activation=activation, ft_clamp=127,
                        ft_shift=SCHEMES["stockfish"].shift_for(activation), psqt_buckets=0, output_buckets=8,
                        layers=(HiddenLayer(16, "crelu"), HiddenLayer(1, "none")), output_units=400,
                        units_per_pawn=100)
    return quantise(FloatNetwork.random(arch, seed=seed))


@pytest.fixture(scope="module")
def selfplay(data_dir) -> Positions:
    return read_positions(data_dir / "binpack" / "selfplay.binpack", limit=6000)


@pytest.fixture(scope="module")
def corpus_positions(data_dir) -> Positions:
    return read_positions(data_dir / "positions-dev.jsonl")


def _same_everywhere(original, permuted, positions: Positions, game_moves: list[str]) -> None:
    """evaluate_bitboards (refresh) on every position, and a game through push/evaluate (incremental)."""
    a, codes_a = Evaluator(original).evaluate_bitboards(positions.bitboards, positions.stm)
    b, codes_b = Evaluator(permuted).evaluate_bitboards(positions.bitboards, positions.stm)
    np.testing.assert_array_equal(codes_a, codes_b)
    np.testing.assert_array_equal(a, b)
    ea, eb = Evaluator(original), Evaluator(permuted)
    for move in game_moves:
        ea.push(chess.Move.from_uci(move))
        eb.push(chess.Move.from_uci(move))
        assert ea.evaluate() == eb.evaluate(), move


@pytest.fixture(scope="module")
def game_moves(data_dir) -> list[str]:
    with open(data_dir / "games-dev.jsonl") as f:
        game = next(g for g in map(json.loads, f) if g["start_fen"] == chess.STARTING_FEN and len(g["moves"]) > 80)
    return game["moves"]


FAMILIES = {
    "sf15.1": lambda network: network,  # HalfKAv2_hm, pairwise, 1024
    "sf18-lite": lambda network: _known("sf18-lite"),  # HalfKAv2_hm, 256
    "sf19-lite": lambda network: _known("sf19-lite"),  # Chess768 (P_hm), 1024, Stockfish 19's layer stack
    "sf19": lambda network: _known("sf19"),  # threat and pawn-pair inputs (int8 rows)
    "sf18": lambda network: _known("sf18"),  # Stockfish 18's threat inputs
    "glu": lambda network: _gated("glu"),  # gated, signed output
    "lut_glu": lambda network: _gated("lut_glu"),  # gate table stored with the network
    "crelu": lambda network: _gated("crelu"),  # element-wise: L1 neurons per half, not L1 / 2
}


@pytest.mark.parametrize("family", FAMILIES)
def test_permuted_network_evaluates_bit_identically(family, network, selfplay, corpus_positions, game_moves):
    net = FAMILIES[family](network)
    fit = selfplay[:1500]
    result = permute(net, fit.bitboards, fit.stm, max_rounds=5)
    assert not np.array_equal(result.order, np.arange(half_width(net)))  # something moved
    assert result.share_after >= result.share_before
    _same_everywhere(net, result.network, corpus_positions, game_moves)
    held = selfplay[4000:]
    _same_everywhere(net, result.network, held, [])


def test_more_zero_chunks_on_held_out_positions(network, selfplay):
    """Stockfish 15.1's net: fitted on 4,000 self-play positions, measured on the 2,000 after them."""
    fit, held = selfplay[:4000], selfplay[4000:]
    result = permute(network, fit.bitboards, fit.stm)
    before = zero_chunk_share(network, held.bitboards, held.stm)
    after = zero_chunk_share(result.network, held.bitboards, held.stm)
    assert result.share_after > result.share_before + 0.05
    assert after > before + 0.05, (before, after)


def test_the_search_counts_what_the_output_shows(network, selfplay):
    """The kernels' objective after the search equals the all-zero chunks counted with NumPy on the
    permuted network's own output (both halves of every position)."""
    fit = selfplay[:800]
    bits = zero_bits(network, fit.bitboards, fit.stm)
    order, counts = find_order(bits, max_rounds=3)
    assert counts == sorted(counts) and counts[-1] == KP.all_zero_chunks(bits, order)
    permuted = permute_network(network, order)
    out = Evaluator(permuted).activations_bitboards(fit.bitboards, fit.stm).ft_output
    numpy_count = int((~(out.reshape(len(fit), -1, 4) != 0).any(axis=2)).sum())
    assert numpy_count == counts[-1]
    assert zero_chunk_share(permuted, fit.bitboards, fit.stm) == numpy_count / (len(fit) * out.shape[1] // 4)


def test_the_search_finds_groups_of_identical_neurons():
    """Four groups of four neurons with the same zeros, scattered: the best order puts each group in
    one chunk, and the search reaches that optimum."""
    rng = np.random.default_rng(7)
    patterns = rng.random((4, 640)) < 0.6
    zeros = np.repeat(patterns, 4, axis=0)[rng.permutation(16)]  # neuron -> its group's pattern
    bits = np.packbits(zeros, axis=1, bitorder="little").view(np.int64)
    order, counts = find_order(np.ascontiguousarray(bits))
    assert counts[-1] == int(patterns.sum())
    groups = [{tuple(zeros[n]) for n in order[4 * c:4 * c + 4]} for c in range(4)]
    assert all(len(g) == 1 for g in groups)


def test_moving_only_the_feature_transformer_changes_the_evaluation(network, corpus_positions):
    """The control: the permutation is exact only with the first dense layer's columns moved too."""
    order = np.roll(np.arange(half_width(network)), 1)
    permuted = permute_network(network, order)
    wrong = dataclasses.replace(permuted, layer_weights=network.layer_weights)
    rows = corpus_positions[:200]
    a, _ = Evaluator(network).evaluate_bitboards(rows.bitboards, rows.stm)
    b, _ = Evaluator(permuted).evaluate_bitboards(rows.bitboards, rows.stm)
    c, _ = Evaluator(wrong).evaluate_bitboards(rows.bitboards, rows.stm)
    np.testing.assert_array_equal(a, b)
    assert (a != c).mean() > 0.9


@pytest.mark.parametrize("order, message", [
    (np.arange(511), "expected 512 integers"),
    (np.arange(512.0), "expected 512 integers"),
    (np.r_[np.arange(511), 0], "neuron 511 is missing"),
])
def test_an_order_that_is_not_a_permutation_is_refused(network, order, message):
    with pytest.raises(ValueError, match=message):
        permute_network(network, order)


def test_no_positions_is_refused(network):
    with pytest.raises(ValueError, match="no positions"):
        permute(network, np.zeros((0, 8), np.int64), np.zeros(0, np.uint8))

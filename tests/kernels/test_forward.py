"""Whole-network kernels against the reference, and the spec's worked example (section 8)."""

from __future__ import annotations

import chess
import numpy as np

import reference as R
from nnue_infer.features import board_bitboards
from nnue_infer.kernels.nnue import forward as K
from nnue_infer.kernels.nnue.forward import forward_bucket

from .conftest import make_buffers


def run(board, network, halfka, params, layout):
    """Kernels for one board: (value, buffers, per-bucket (psqt, positional) int64[8, 2])."""
    weights, biases, layers = layout
    buf = make_buffers(layers)
    stm = 0 if board.turn else 1
    kernels = K.kernels(K.config(params, layers))
    pieces = kernels.refresh_both(board_bitboards(board, buf.bb), halfka.slot_table, halfka.king_buckets, params,
                                  network.ft_weights, network.ft_biases, network.psqt_weights, network.int8_weights,
                                  network.int8_psqt_weights, buf.feats, buf.counts, buf.acc, buf.psqt)
    per_bucket = np.empty((8, 2), np.int64)
    kernels.trace_buckets(buf.acc, buf.psqt, stm, params, buf.scratch, weights, biases, layers, per_bucket)
    psqt, positional = per_bucket[(pieces - 1) // params[K.P_BUCKET_DIVISOR]]
    value = K.bucket_value(psqt, positional, params)
    kernels.trace_buckets(buf.acc, buf.psqt, stm, params, buf.scratch, weights, biases, layers, per_bucket[:0])
    return value, buf, per_bucket


def test_kernels_match_reference(network, halfka, params, layout, sample_boards):
    for board in sample_boards:
        e = R.evaluate(network, board)
        value, buf, per_bucket = run(board, network, halfka, params, layout)
        assert value == e.value, board.fen()
        assert per_bucket[:, 0].tolist() == e.psqt, board.fen()
        assert per_bucket[:, 1].tolist() == e.positional, board.fen()
        for p in range(2):
            np.testing.assert_array_equal(buf.acc[p], e.acc[p])
            np.testing.assert_array_equal(buf.psqt[p], e.psqt_acc[p])


def test_refresh_both_and_forward_bucket(network, halfka, params, layout, sample_boards):
    weights, biases, layers = layout
    config = K.config(params, layers)
    for board in sample_boards[::10]:
        buf = make_buffers(layers)
        n = K.kernels(config).refresh_both(board_bitboards(board, buf.bb), halfka.slot_table, halfka.king_buckets, params,
                         network.ft_weights, network.ft_biases, network.psqt_weights, network.int8_weights,
                         network.int8_psqt_weights, buf.feats, buf.counts,
                         buf.acc, buf.psqt)
        assert n == chess.popcount(board.occupied) == buf.counts[1]
        e = R.evaluate(network, board)
        stm = 0 if board.turn else 1
        for k in (0, e.bucket, 7):
            assert forward_bucket(buf.acc, buf.psqt, stm, k, params, buf.scratch, weights, biases, layers, config.isa,
                                  config.fc0_isa, config.ft_activation, config.float_tail) == (e.psqt[k], e.positional[k])
        np.testing.assert_array_equal(buf.ft_out, e.transformed)


def test_spec_worked_example_start_position(network, halfka, params, layout):
    """Spec section 8: exact intermediate integers of the start position (printed ones match Stockfish)."""
    board = chess.Board()
    value, buf, per_bucket = run(board, network, halfka, params, layout)
    for p in range(2):
        assert buf.acc[p, :8].tolist() == [67, 9, -143, -149, -78, -346, -331, 83]
        assert buf.acc[p, 512:520].tolist() == [603, 229, 109, 123, -35, -1160, -343, -6]
        assert buf.psqt[p].tolist() == [17845, -5505, -2312, 11177, 12277, 6729, 3333, -258]
    assert buf.ft_out[:2].tolist() == [66, 8]
    assert int(buf.ft_out.astype(np.int64).sum()) == 4482 and np.count_nonzero(buf.ft_out) == 168
    st = R.layer_stack(network, 7, buf.ft_out)
    assert st.z.tolist() == [6064, -5515, -4551, -2131, -6313, -2654, -136, 3277, 2605, 10312, 2184, -576, -6443,
                             830, -2384, 1665]
    assert st.fc1_in[:15].tolist() == [70, 58, 39, 8, 76, 13, 0, 20, 12, 127, 9, 0, 79, 1, 10]
    assert st.fc1_in[15:30].tolist() == [94, 0, 0, 0, 0, 0, 0, 51, 40, 127, 34, 0, 0, 12, 0]
    assert st.y[:3].tolist() == [1294, -4138, -5777]
    assert st.a.tolist() == [20, 0, 0, 0, 0, 24, 0, 0, 0, 0, 0, 12, 0, 0, 24, 0, 1, 0, 0, 0, 0, 13, 0, 0, 3, 0, 21,
                             17, 0, 0, 0, 0]
    assert (st.o, st.fwd, st.positional) == (-848, 1966, 1118)
    assert per_bucket[:, 1].tolist() == [7202, 977, 536, 2444, 2008, 1877, 1889, 1118]
    assert per_bucket[:, 0].tolist() == [0] * 8
    assert value == 69


def test_spec_worked_example_after_e4(network, halfka, params, layout):
    board = chess.Board()
    board.push_san("e4")
    value, buf, per_bucket = run(board, network, halfka, params, layout)
    assert (buf.psqt[0, 7], buf.psqt[1, 7]) == (-1015, -606)
    assert per_bucket[7].tolist() == [204, -1038]
    st = R.layer_stack(network, 7, buf.ft_out)
    assert (st.o, int(st.z[15]), st.fwd) == (361, -1185, -1399)
    assert value == -52


def test_spec_worked_example_perft3(network, halfka, params, layout):
    board = chess.Board("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1")
    value, buf, per_bucket = run(board, network, halfka, params, layout)
    assert per_bucket[2].tolist() == [187, 1455] and value == 102

"""The spec's pitfalls (``stockfish-15.1-nnue.md`` section 10), each pinned.

Each test shows two things: the package agrees with Stockfish's exact numbers, and the
tempting wrong variant (floor division, int32 square, no wrap, 30-column rows, kings left
out, one mirror for both perspectives) disagrees with Stockfish on real positions, so the
test would catch it.  Stockfish's numbers come from the dev corpus (``raw``, ``sf``) or
from the live engine.
"""

from __future__ import annotations

import chess
import numpy as np
import pytest

import nnue_infer
import reference as R
from nnue_infer.trace import format_cp_compact
from stockfish_uci import nnue_line, nnue_part

# Positions with many queens (material reachable by promotions, python-chess ``is_valid``)
# where fc_0 neuron 15 of the used layer stack exceeds 223,696, so z[15] * 9600 overflows
# int32.  Found by a hill-climbing search over placements (scored with tests/reference.py).
OVERFLOW_FENS = [
    "1nR5/1n6/r7/n1R1B2Q/7K/n2QBQQ1/nQQ2R2/n3k3 w - - 0 1",
    "5B2/R2QQ3/2QN3n/8/1k1B1KQ1/q1R1N3/n1QQ2Q1/4Q1Q1 w - - 0 1",
    "1N6/3q1qq1/3qqrn1/3bnk1K/2b1qq1Q/N5qq/8/7r b - - 0 1",
    "3K3B/1q3q2/Qrq1q1n1/q1q1q1k1/1q1N1bb1/4n3/8/3rr3 b - - 0 1",
]


@pytest.fixture(scope="module")
def sample(corpus, network):
    """Every 4th corpus position with the reference's intermediate numbers (825 positions)."""
    out = []
    for row in corpus[::4]:
        board = chess.Board(row["fen"])
        out.append((row, board, R.evaluate(network, board)))
    return out


def raw_of(row):
    return row["raw"]["psqt"], row["raw"]["positional"], row["raw"]["value"]


def test_reference_matches_stockfish_on_sample(sample, evaluator):
    """The numbers the other tests take apart are Stockfish's (and ours)."""
    for row, board, e in sample:
        assert (e.psqt, e.positional, e.value) == raw_of(row), row["fen"]
        t = evaluator.trace(board)
        assert (list(t.psqt), list(t.positional), t.value) == raw_of(row), row["fen"]


def test_truncating_division_psqt_half(sample):
    """psqt = tdiv(Psi_stm - Psi_opp, 2): flooring a negative odd difference is off by one."""
    hits = 0
    for row, board, e in sample:
        stm, opp = (0, 1) if board.turn == chess.WHITE else (1, 0)
        for k in range(8):
            d = int(e.psqt_acc[stm][k]) - int(e.psqt_acc[opp][k])
            assert row["raw"]["psqt"][k] == R.tdiv(d, 2)
            if d < 0 and d % 2:
                assert d // 2 != row["raw"]["psqt"][k]
                hits += 1
    assert hits > 100


def test_truncating_division_output_scale(sample, evaluator):
    """value = tdiv(psqt + positional, 16), and every table cell is tdiv(x, 16) too."""
    hits = 0
    for row, board, e in sample:
        b = e.bucket
        s = e.psqt[b] + e.positional[b]
        if s < 0 and s % 16:
            assert s // 16 != row["raw"]["value"] == R.tdiv(s, 16) == evaluator.evaluate(board)
            hits += 1
    assert hits > 50


def test_truncating_division_skip_term(sample):
    """fwd = tdiv(z[15] * 9600, 8128): flooring a negative product changes positional."""
    hits = 0
    for row, board, e in sample:
        for k, st in enumerate(e.stacks):
            p = int(st.z[15]) * 9600
            if p < 0 and p % 8128:
                assert st.o + p // 8128 != row["raw"]["positional"][k] == st.o + R.tdiv(p, 8128)
                hits += 1
    assert hits > 100


def test_truncating_division_centipawns(corpus, evaluator):
    """Piece values print tdiv(100 * v, 361): flooring negative values changes printed cells."""
    floor_wrong = 0
    for row in corpus[::8]:
        if row["in_check"]:
            continue
        t = evaluator.trace(chess.Board(row["fen"]))
        for sq, v in t.piece_values.items():
            cell = row["sf"]["piece_values"][(7 - chess.square_rank(sq)) * 8 + chess.square_file(sq)]
            assert format_cp_compact(v).strip() == cell
            cp_floor = abs(100 * v // 361)
            if cp_floor != abs(R.tdiv(100 * v, 361)) and cp_floor < 1000 and f"{cp_floor // 100}.{cp_floor % 100:02d}" != cell[1:]:
                floor_wrong += 1
    assert floor_wrong > 100
    # the spec's example: black rook a8 at the start position, -2637 units -> -730 cp -> "-7.30"
    t = evaluator.trace(chess.Board())
    assert t.piece_values[chess.A8] == -2637 and format_cp_compact(-2637) == "-7.30"
    assert evaluator.evaluate_cp(chess.Board(), white_pov=True) == 19
    b = chess.Board("1k1r3r/pb2n1p1/1q3pP1/1pp1n3/1Pp1PN2/4B3/P1Q2PB1/1K1R2R1 b - b3 0 23")  # raw value 419, Black to move
    assert evaluator.evaluate_cp(b, white_pov=True) == -116 != (100 * -419) // 361


def test_sqr_clipped_relu_needs_64_bit_square(sample, network):
    """|z| > 46,340 occurs in real positions; an int32 square would change Stockfish's numbers."""
    big = [(row, board, e) for row, board, e in sample
           if max(int(np.abs(st.z[:15]).max()) for st in e.stacks) > 46_340]
    assert len(big) > 50, len(big)
    changed = 0
    for row, board, e in big[:40]:
        wrong = R.evaluate(network, board, int32_square=True)
        changed += (wrong.psqt, wrong.positional) != (row["raw"]["psqt"], row["raw"]["positional"])
    assert changed > 30


@pytest.mark.parametrize("fen", OVERFLOW_FENS)
def test_skip_term_wraps_int32(fen, network, evaluator, stockfish):
    """z[15] * 9600 overflows int32 in these legal positions; Stockfish wraps, and so do we."""
    board = chess.Board(fen)
    assert board.is_valid() and not board.is_check()
    e = R.evaluate(network, board)
    z15 = int(e.stacks[e.bucket].z[15])
    assert abs(z15) > 223_696 and z15 * 9600 != R.wrap32(z15 * 9600)
    unwrapped = R.evaluate(network, board, wrap_skip=False)
    assert unwrapped.value != e.value
    lines = stockfish.eval_lines(fen)
    assert evaluator.evaluate(board) == e.value
    assert nnue_line(lines) == "NNUE evaluation".ljust(23) + "%+.2f (white side)" % (
        (e.value if board.turn else -e.value) / 361)
    assert nnue_line(lines) != "NNUE evaluation".ljust(23) + "%+.2f (white side)" % (
        (unwrapped.value if board.turn else -unwrapped.value) / 361)
    assert evaluator.trace(board).format_stockfish().split("\n") == nnue_part(lines)


def test_fc1_padding_columns(network, net_bytes, evaluator):
    """fc_1 rows have 32 entries, 2 of them zero padding; reading 30 per row shifts every weight."""
    assert network.layer_weights[1].shape == (8, 32, 32)
    assert not network.layer_weights[1][:, :, 30:].any()  # all zero in this file (spec 2)
    # fc_1 weights of layer stack 7, straight from the file (spec 2 offsets).
    off = 46_860_379 + 7 * 17_640 + 16_580
    block = np.frombuffer(net_bytes, np.int8, 1024, off).reshape(32, 32)
    np.testing.assert_array_equal(block, network.layer_weights[1][7])
    misread = np.zeros((32, 32), np.int64)
    misread[:, :30] = np.frombuffer(net_bytes, np.int8, 960, off).reshape(32, 30)
    x = R.evaluate(network, chess.Board()).transformed
    st = R.layer_stack(network, 7, x)
    y_wrong = network.layer_biases[1][7].astype(np.int64) + misread @ st.fc1_in
    assert not np.array_equal(y_wrong, st.y)


def test_fc1_padding_inputs_are_zero(network, sample_boards):
    """The two padding inputs of fc_1 are zero: non-zero padding weights must not change anything."""
    w1 = network.layer_weights[1].copy()
    w1[:, :, 30:] = 100
    padded = nnue_infer.Network(network.architecture, network.ft_biases, network.ft_weights, network.psqt_weights,
                                (network.layer_weights[0], w1, network.layer_weights[2]), network.layer_biases,
                                network.description)
    ev = nnue_infer.Evaluator(padded)
    base = nnue_infer.Evaluator(network)
    for board in sample_boards[::4]:
        assert ev.trace(board).positional == base.trace(board).positional, board.fen()


def test_both_kings_are_features(sample, network, halfka_active):
    """Each perspective has one feature per piece, both kings included (slot 10, shared)."""
    dropped_wrong = 0
    for row, board, e in sample[:60]:
        n = chess.popcount(board.occupied)
        white, black = halfka_active(board)
        assert len(white) == len(black) == n
        for persp, feats in ((chess.WHITE, white), (chess.BLACK, black)):
            kings = {R.feature_index(sq, board.piece_at(sq), board.king(persp), persp)
                     for sq in (board.king(chess.WHITE), board.king(chess.BLACK))}
            assert kings <= set(feats)
            assert {(f % 704) // 64 for f in kings} == {10}

        def no_own_king(b, persp):
            return [f for f in R.features(b, persp)
                    if f != R.feature_index(b.king(persp), chess.Piece(chess.KING, persp), b.king(persp), persp)]

        wrong = R.evaluate(network, board, features_fn=no_own_king)
        dropped_wrong += wrong.value != row["raw"]["value"]
    assert dropped_wrong > 50


def test_per_perspective_mirroring(corpus, network, evaluator, halfka_active):
    """Each perspective mirrors by its OWN king's file; kings on different halves differ."""
    mixed = [row for row in corpus
             if (chess.square_file(chess.Board(row["fen"]).king(chess.WHITE)) < 4)
             != (chess.square_file(chess.Board(row["fen"]).king(chess.BLACK)) < 4)][:60]
    assert len(mixed) == 60

    def white_kings_mirror(b, persp):
        # wrong: squares of both perspectives mirrored by White's king file (king bucket right)
        m = (7 if chess.square_file(b.king(chess.WHITE)) < 4 else 0) ^ (56 if persp == chess.BLACK else 0)
        kb = R.king_bucket(b.king(persp), persp)
        return sorted((sq ^ m) + 64 * (10 if p.piece_type == chess.KING else R.SLOT[p.piece_type] + (p.color != persp))
                      + 704 * kb for sq, p in b.piece_map().items())

    wrong_count = 0
    for row in mixed:
        board = chess.Board(row["fen"])
        assert evaluator.evaluate(board) == row["raw"]["value"]
        assert list(halfka_active(board)) == [R.features(board, chess.WHITE), R.features(board, chess.BLACK)]
        wrong = R.evaluate(network, board, features_fn=white_kings_mirror)
        wrong_count += (wrong.psqt, wrong.positional) != (row["raw"]["psqt"], row["raw"]["positional"])
    assert wrong_count == 60
    # Perft position 3: White's king a5 (mirrored), Black's king h4 (not): spec 8 worked example.
    board = chess.Board("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1")
    white, _ = halfka_active(board)
    assert 8457 in white and R.orientation_mask(board.king(chess.WHITE), chess.WHITE) == 7
    assert R.orientation_mask(board.king(chess.BLACK), chess.BLACK) == 56
    assert evaluator.evaluate(board) == 102


@pytest.fixture(scope="module")
def halfka_active():
    from nnue_infer.features import feature_set

    return feature_set("HalfKAv2_hm").active

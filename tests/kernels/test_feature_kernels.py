"""HalfKAv2_hm feature kernels against the reference's python-chess index computation."""

from __future__ import annotations

import chess
import pytest

import reference as R
from nnue_infer.features import board_bitboards
from nnue_infer.kernels.nnue.feature_index import active_features, feature_index, orientation
from nnue_infer.kernels.chess.bitboard import king_square

from .conftest import make_buffers

START = chess.Board()
PERFT3 = chess.Board("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1")


def kernel_features(board, halfka):
    buf = make_buffers()
    active_features(board_bitboards(board, buf.bb), halfka.slot_table, halfka.king_buckets, halfka.mirror, 11,
                    buf.feats, buf.counts)
    return [sorted(buf.feats[p, : buf.counts[p]].tolist()) for p in range(2)]


# Spec section 3 and 8, worked examples: (board, perspective, square, expected index).
SPEC_EXAMPLES = [
    (START, chess.WHITE, chess.E1, 22468),
    (START, chess.WHITE, chess.E8, 22524),
    (START, chess.WHITE, chess.D1, 22339),
    (START, chess.WHITE, chess.D8, 22459),
    (START, chess.WHITE, chess.A2, 21832),
    (START, chess.WHITE, chess.A7, 21936),
    (START, chess.BLACK, chess.A7, 21832),
    (START, chess.BLACK, chess.E1, 22524),
    (PERFT3, chess.WHITE, chess.G2, 8457),
]


@pytest.mark.parametrize("board,perspective,square,expected", SPEC_EXAMPLES)
def test_spec_worked_examples(board, perspective, square, expected, halfka):
    king = board.king(perspective)
    piece = board.piece_at(square)
    assert R.feature_index(square, piece, king, perspective) == expected
    assert expected in kernel_features(board, halfka)[0 if perspective == chess.WHITE else 1]


def test_spec_king_buckets():
    """Spec 3: the king-bucket table, White's perspective by real square; Black's upside down."""
    assert R.king_bucket(chess.E1, chess.WHITE) == 31 == R.king_bucket(chess.D1, chess.WHITE)
    assert R.king_bucket(chess.A8, chess.WHITE) == 0 == R.king_bucket(chess.A1, chess.BLACK)
    assert R.king_bucket(chess.E8, chess.BLACK) == 31
    assert R.king_bucket(chess.A5, chess.WHITE) == 12  # perft position 3: K' = h5


def test_start_position_perspectives_identical(halfka):
    white, black = kernel_features(START, halfka)
    assert white == black and len(white) == 32


def test_feature_set_tables(halfka):
    for sq in range(64):
        m = R.orientation_mask(sq, chess.WHITE)
        assert halfka.king_buckets[sq ^ m] == R.king_bucket(sq, chess.WHITE)
    assert halfka.num_features == 22528


def test_active_features_match_reference(sample_boards, halfka):
    for board in sample_boards:
        got = kernel_features(board, halfka)
        want = [R.features(board, chess.WHITE), R.features(board, chess.BLACK)]
        assert got == want, board.fen()


def test_feature_set_active_method(sample_boards, halfka):
    for board in sample_boards[:20]:
        assert list(halfka.active(board)) == [R.features(board, chess.WHITE), R.features(board, chess.BLACK)]


def test_scalar_feature_kernels(halfka):
    bb = board_bitboards(PERFT3)
    assert king_square(bb, 0) == chess.A5 and king_square(bb, 1) == chess.H4
    for ksq in range(64):
        for p, color in ((0, chess.WHITE), (1, chess.BLACK)):
            assert orientation(ksq, p, 1) == R.orientation_mask(ksq, color)
    assert orientation(chess.A1, 1, 0) == 56  # no mirroring: rank flip only
    assert orientation(chess.G1, 0, 2) == 7 and orientation(chess.B1, 0, 2) == 0  # bullet: king to files a-d
    # Pg2 from White's view in perft position 3: square g2, pawn, own, mask 7, bucket 12.
    assert feature_index(chess.G2, 0, 1, 7, 12 * 704, halfka.slot_table) == 8457
    # any king (own or not) takes slot 10
    assert feature_index(chess.E8, 5, 0, 0, 31 * 704, halfka.slot_table) == 22524

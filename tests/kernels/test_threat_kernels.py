"""FullThreats and PP_3Wide index kernels against the spec's worked examples and an independent
python-chess reference (tests/threat_reference.py), on seeded playouts and crowded placements."""

from __future__ import annotations

import chess
import numpy as np
import pytest
import reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import threat_reference as TR

from nnue_infer.features import board_bitboards
from nnue_infer.kernels.nnue import threats as T


def kernel_features(board: chess.Board) -> list[list[int]]:
    out = np.empty((2, T.MAX_RELATIONS), np.int32)
    counts = np.empty(2, np.int64)
    T.active_relation_features(board_bitboards(board), np.int64(1), np.int64(1), np.int64(T.NUM_THREAT_FEATURES),
                               out, counts)
    return [sorted(out[p, :counts[p]].tolist()) for p in range(2)]


def crowded(rng: np.random.Generator, n_queens: int) -> chess.Board:
    """Kings plus many sliders (queens, rooks, bishops) and some knights and pawns, at random."""
    while True:
        b = chess.Board(None)
        squares = rng.permutation(64).tolist()
        b.set_piece_at(squares.pop(), chess.Piece(chess.KING, chess.WHITE))
        b.set_piece_at(squares.pop(), chess.Piece(chess.KING, chess.BLACK))
        kinds = [chess.QUEEN] * n_queens + [chess.ROOK] * 4 + [chess.BISHOP] * 4 + [chess.KNIGHT] * 3 + [chess.PAWN] * 6
        for kind in kinds:
            s = squares.pop()
            if kind == chess.PAWN and chess.square_rank(s) in (0, 7):
                continue
            b.set_piece_at(s, chess.Piece(kind, bool(rng.integers(2))))
        b.turn = bool(rng.integers(2))
        return b


def test_tables_match_the_spec():
    assert T.THREAT_STRIDE.tolist() == [84, 336, 560, 896, 1456, 420]
    assert T.THREAT_OFFSET[0, :, 0].tolist() == [0, 336, 3696, 8176, 15344, 29904, 29904, 30240, 33600, 38080, 45248,
                                                 59808]
    assert T.THREAT_OFFSET[0, 1, 21] - 336 == 98  # F(knight, f3), spec 4.3


def test_worked_example_section_4_3():
    b = chess.Board("4k3/8/8/3r4/4P3/2N5/8/4K3 w - - 0 1")
    white, black = kernel_features(b)
    assert white == [286, 438, 3128]
    assert black == [30036, 31502, 32176]


def test_start_position_counts():
    white, black = kernel_features(chess.Board())
    for feats in (white, black):
        threats = [i for i in feats if i < T.NUM_THREAT_FEATURES]
        assert (len(threats), len(feats) - len(threats)) == (28, 36)


def positions():
    rng = np.random.default_rng(1919)
    boards = [reference.random_board(rng, chess960=i % 5 == 4) for i in range(60)]
    boards += [reference.random_placement(rng, n) for n in range(2, 33)]
    boards += [crowded(rng, q) for q in (1, 3, 5, 8, 10) for _ in range(4)]
    return boards


def kernel_features_18(board: chess.Board) -> list[list[int]]:
    out = np.empty((2, T.MAX_RELATIONS), np.int32)
    counts = np.empty(2, np.int64)
    T.active_relation_features(board_bitboards(board), np.int64(T.THREATS_SF18), np.int64(0), np.int64(0), out, counts)
    return [sorted(out[p, :counts[p]].tolist()) for p in range(2)]


def test_sf18_tables():
    assert T.THREAT_STRIDE[5] == 420
    assert T.THREAT_SLOTS[1].tolist() == [3, 6, 5, 5, 6, 4]  # numValidTargets / 2 at sf_18
    assert T.THREAT_OFFSET[1, 11, 63] + T.THREAT_PATTERN[11, 63].item().bit_count() + 7 * 420 == 79_856


@pytest.mark.parametrize("board", positions()[::2], ids=lambda b: b.fen())
def test_sf18_kernel_matches_reference(board):
    got = kernel_features_18(board)
    for p, colour in enumerate((chess.WHITE, chess.BLACK)):
        assert got[p] == TR.threat_features(board, colour, sf18=True), chess.COLOR_NAMES[colour]
        assert all(0 <= i < TR.N_THREATS_18 for i in got[p])


@pytest.mark.parametrize("board", positions(), ids=lambda b: b.fen())
def test_kernel_matches_reference(board):
    got = kernel_features(board)
    for p, colour in enumerate((chess.WHITE, chess.BLACK)):
        want = TR.threat_features(board, colour) + TR.pair_features(board, colour)
        assert got[p] == want, chess.COLOR_NAMES[colour]
        assert all(0 <= i < T.NUM_THREAT_FEATURES + T.NUM_PAIR_FEATURES for i in got[p])


def test_attack_tables_match_python_chess():
    from nnue_infer.kernels.chess import attacks as A

    rng = np.random.default_rng(7)
    for sq in range(64):
        assert int(A.KNIGHT_ATTACKS[sq]) & (2**64 - 1) == chess.BB_KNIGHT_ATTACKS[sq]
        assert int(A.KING_ATTACKS[sq]) & (2**64 - 1) == chess.BB_KING_ATTACKS[sq]
        for colour in (chess.WHITE, chess.BLACK):
            assert int(A.PAWN_ATTACKS[0 if colour else 1, sq]) & (2**64 - 1) == chess.BB_PAWN_ATTACKS[colour][sq]
    for _ in range(200):
        occ = int(rng.integers(0, 2**63)) | (int(rng.integers(0, 2)) << 63)
        occ &= int(rng.integers(0, 2**63))  # sparser
        sq = int(rng.integers(64))
        b = chess.Board(None)
        for s in chess.scan_forward(occ):
            b.set_piece_at(s, chess.Piece(chess.PAWN, chess.WHITE))
        occ64 = np.array([occ], np.uint64).view(np.int64)[0]
        for pt, lo, hi in ((chess.ROOK, 0, 4), (chess.BISHOP, 4, 8), (chess.QUEEN, 0, 8)):
            b.set_piece_at(sq, chess.Piece(pt, chess.WHITE))
            assert int(A.line_attacks(sq, occ64 | A.SQUARE_BB[sq], lo, hi)) & (2**64 - 1) == int(b.attacks_mask(sq))


def _full_difference(old: np.ndarray, new: np.ndarray, threats: int, pairs: int) -> tuple[list[int], list[int]]:
    """(added, removed) entries between the two positions' complete relation lists."""
    lists = []
    for bb in (old, new):
        out = np.empty(T.MAX_RELATIONS, np.int64)
        n = T.relation_list(bb, np.int64(threats), np.int64(pairs), np.int64(-1), out)
        assert list(out[:n]) == sorted(out[:n])
        lists.append(set(out[:n].tolist()))
    return sorted(lists[1] - lists[0]), sorted(lists[0] - lists[1])


def _changes(old: np.ndarray, new: np.ndarray, threats: int, pairs: int) -> tuple[list[int], list[int]]:
    buf = np.empty((4, T.MAX_RELATIONS), np.int64)
    na, nr = T.relation_changes(old, new, np.int64(threats), np.int64(pairs), buf[0], buf[1], buf[2], buf[3])
    return buf[2, :na].tolist(), buf[3, :nr].tolist()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), plies=st.integers(1, 120), back=st.integers(1, 4),
       start=st.sampled_from(["standard", "chess960", "crowded"]))
def test_changes_near_the_move_equal_the_full_difference(seed, plies, back, start):
    """The incremental delta (relation lists near the changed squares only) equals the difference
    of the complete lists, for both threat variants with pawn pairs, after every ply of a random
    legal sequence (castling, e.p., promotions, captures, null moves) and across ``back`` plies
    at once (a lazily updated stack or the refresh cache starts from an older position)."""
    rng = np.random.default_rng(seed)
    if start == "crowded":
        board = crowded(rng, int(rng.integers(1, 6)))
        if not board.is_valid():
            board = chess.Board()
    else:
        board = chess.Board.from_chess960_pos(int(rng.integers(960))) if start == "chess960" \
            else chess.Board()
    history = [board_bitboards(board).copy()]
    for _ in range(plies):
        moves = list(board.legal_moves)
        if not moves:
            break
        special = [m for m in moves if m.promotion or board.is_capture(m) or board.is_castling(m)]
        if rng.random() < 0.05 and not board.is_check():
            move = chess.Move.null()
        else:
            pool = special if special and rng.random() < 0.5 else moves
            move = pool[int(rng.integers(len(pool)))]
        board.push(move)
        history.append(board_bitboards(board).copy())
        old = history[max(0, len(history) - 1 - back)]
        for threats, pairs in ((T.THREATS_SF19, 1), (T.THREATS_SF18, 0), (0, 1)):
            assert _changes(old, history[-1], threats, pairs) == _full_difference(old, history[-1], threats, pairs), \
                (board.fen(), move.uci(), threats, pairs)


def test_changes_between_unrelated_positions():
    """From any piece set to any other (the refresh cache's case), and from the empty board."""
    boards = [board_bitboards(b).copy() for b in positions()] + [np.zeros(8, np.int64)]
    for old, new in zip(boards, boards[1:] + boards[:1]):
        for threats, pairs in ((T.THREATS_SF19, 1), (T.THREATS_SF18, 1)):
            assert _changes(old, new, threats, pairs) == _full_difference(old, new, threats, pairs)

"""``features_batch`` against nnue-pytorch's own feature definitions, re-derived here.

The oracle below restates, with python-chess, the index math of nnue-pytorch's data loader
(official-stockfish/nnue-pytorch ``data_loader/cpp/training_data_loader.cpp``: HalfKAv2_hm with
12 piece types and 768 planes per king bucket, Full_Threats with its per-piece offset table and
the ``map`` of (attacker, attacked) slots, PP_3Wide's pawn ids, and the composed set's offsets),
written from reading it, not translated line by line and sharing nothing with the package's
kernels.  It runs on the dev corpus (``shared/data``) and on random threat-rich placements.
"""

from __future__ import annotations

import gzip
import json

import chess
import numpy as np
import pytest

from nnue_infer.errors import FenError, PositionError
from nnue_infer.training.feature_indices import COMPONENTS, features_batch, torch_halfka

from node_engines import generated_positions, threat_positions

# --- HalfKAv2_hm as nnue-pytorch's loader numbers it ------------------------------------------


def oriented(sq: int, perspective: chess.Color, king: int) -> int:
    """Flip ranks for Black, mirror files when the perspective's king is on files a-d."""
    if perspective == chess.BLACK:
        sq ^= 56
    if chess.square_file(king) < 4:
        sq ^= 7
    return sq


def torch_king_bucket(osq: int) -> int:
    """nnue-pytorch's KingBuckets: files e-h only, e1=31 .. h1=28, e2=27 .. h8=0."""
    return 4 * (7 - chess.square_rank(osq)) + (7 - chess.square_file(osq))


def halfka(board: chess.Board, perspective: chess.Color) -> list[int]:
    king = board.king(perspective)
    bucket = torch_king_bucket(oriented(king, perspective, king))
    out = []
    for sq, piece in board.piece_map().items():
        plane = 2 * (piece.piece_type - 1) + (piece.color != perspective)
        out.append(oriented(sq, perspective, king) + 64 * plane + 768 * bucket)
    return sorted(out)


# --- Full_Threats ----------------------------------------------------------------------------

TARGETS = {chess.PAWN: 4, chess.KNIGHT: 10, chess.BISHOP: 8, chess.ROOK: 8, chess.QUEEN: 10}
# slot of the attacked type in the attacker's block, None: no feature (kings: never)
SLOTS = {
    chess.PAWN: {chess.KNIGHT: 0, chess.ROOK: 1},
    chess.KNIGHT: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.QUEEN: 4},
    chess.BISHOP: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3},
    chess.ROOK: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3},
    chess.QUEEN: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.QUEEN: 4},
}
ATTACKERS = [(c, t) for c in (chess.WHITE, chess.BLACK) for t in (chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK,
                                                                    chess.QUEEN)]


def empty_board_attacks(colour: chess.Color, ptype: int, sq: int) -> int:
    if ptype == chess.PAWN:
        return chess.BB_PAWN_ATTACKS[colour][sq] if 8 <= sq < 56 else 0
    board = chess.BaseBoard.empty()
    board.set_piece_at(sq, chess.Piece(ptype, colour))
    return int(board.attacks_mask(sq))


def _tables():
    """Per attacker (White P..Q, Black P..Q): its first index, its squares' running start, its
    block size (features per attacked slot), and the empty-board attack sets."""
    first, starts, block, attacks = {}, {}, {}, {}
    total = 0
    for attacker in ATTACKERS:
        running = 0
        starts[attacker] = []
        attacks[attacker] = []
        for sq in range(64):
            starts[attacker].append(running)
            a = empty_board_attacks(*attacker, sq)
            attacks[attacker].append(a)
            running += chess.popcount(a)
        first[attacker], block[attacker] = total, running
        total += TARGETS[attacker[1]] * running
    assert total == COMPONENTS["Full_Threats"]
    return first, starts, block, attacks


FIRST, STARTS, BLOCK, ATTACKS = _tables()


def threat_feature(perspective, attacker: chess.Piece, frm: int, attacked: chess.Piece, to: int, king: int):
    mask = (7 if chess.square_file(king) >= 4 else 0) ^ (56 if perspective == chess.BLACK else 0)
    frm, to = frm ^ mask, to ^ mask
    a_colour = attacker.color if perspective == chess.WHITE else not attacker.color  # White = "own"
    d_colour = attacked.color if perspective == chess.WHITE else not attacked.color
    slot = SLOTS[attacker.piece_type].get(attacked.piece_type)
    if slot is None:
        return None
    same = attacker.piece_type == attacked.piece_type
    if same and (a_colour != d_colour or attacker.piece_type != chess.PAWN) and frm < to:
        return None
    key = (a_colour, attacker.piece_type)
    below = chess.popcount(ATTACKS[key][frm] & ((1 << to) - 1))
    colour_index = 0 if d_colour == chess.WHITE else 1
    return (FIRST[key] + (colour_index * (TARGETS[attacker.piece_type] // 2) + slot) * BLOCK[key] + STARTS[key][frm]
            + below)


def threats(board: chess.Board, perspective: chess.Color) -> list[int]:
    king = board.king(perspective)
    pawns = board.pawns
    targets = board.occupied & ~board.kings
    out = []
    for frm, attacker in board.piece_map().items():
        if attacker.piece_type == chess.KING:
            continue
        if attacker.piece_type == chess.PAWN:
            hit = chess.BB_PAWN_ATTACKS[attacker.color][frm] & targets & ~pawns
        else:
            hit = int(board.attacks_mask(frm)) & targets
        for to in chess.scan_forward(hit):
            f = threat_feature(perspective, attacker, frm, board.piece_at(to), to, king)
            if f is not None:
                out.append(f)
    return sorted(out)


# --- PP_3Wide --------------------------------------------------------------------------------


def pawn_pairs(board: chess.Board, perspective: chess.Color) -> list[int]:
    king = board.king(perspective)
    mask = (7 if chess.square_file(king) >= 4 else 0) ^ (56 if perspective == chess.BLACK else 0)
    out = []
    squares = list(chess.scan_forward(board.pawns))
    for a in squares:
        for b in squares:
            if b >= a or abs(chess.square_file(a) - chess.square_file(b)) > 1:
                continue
            ids = []
            for sq in (a, b):
                own = board.color_at(sq) == perspective
                ids.append(48 * (0 if own else 1) + (sq ^ mask) - 8)
            hi, lo = max(ids), min(ids)
            out.append(hi * (hi - 1) // 2 + lo)
    return sorted(out)


ORACLES = {"HalfKAv2_hm": halfka, "Full_Threats": threats, "PP_3Wide": pawn_pairs}


def composed(board: chess.Board, perspective: chess.Color, names: list[str]) -> list[int]:
    out, offset = [], 0
    for name in names:
        out += [offset + f for f in ORACLES[name](board, perspective)]
        offset += COMPONENTS[name]
    return out


@pytest.fixture(scope="module")
def boards(data_dir) -> list[chess.Board]:
    out = []
    with gzip.open(data_dir / "sf19" / "positions-dev-sf19-lite-raw.jsonl.gz", "rt") as f:
        for k, line in enumerate(f):
            if k % 25 == 0:
                r = json.loads(line)
                out.append(chess.Board(r["fen"], chess960=r["chess960"]))
    out += [chess.Board(fen, chess960=c960) for fen, c960 in generated_positions(150, seed=31)]
    out += [chess.Board(fen) for fen, _ in threat_positions(150, seed=32)]
    return out


@pytest.mark.parametrize("names", [["HalfKAv2_hm"], ["Full_Threats"], ["PP_3Wide"],
                                   ["Full_Threats", "PP_3Wide", "HalfKAv2_hm"]])
def test_indices_equal_nnue_pytorch(boards, names):
    got = features_batch([b.fen() for b in boards], "+".join(names))
    assert got.num_inputs == sum(COMPONENTS[n] for n in names) and len(got) == len(boards)
    nonempty = 0
    for i, board in enumerate(boards):
        for p, perspective in enumerate((chess.WHITE, chess.BLACK)):
            want = composed(board, perspective, names)
            assert got.row(i, perspective).tolist() == want, (names, board.fen(), perspective)
            assert got.indices[p].dtype == np.int32
            nonempty += bool(want)
    assert nonempty > len(boards)


def test_halfka_conversion_and_network_numbering(boards):
    """The network numbering (Stockfish's 704 per bucket) maps to nnue-pytorch's by torch_halfka;
    a network's threat rows follow its piece-square rows."""
    import nnue_infer
    from nnue_infer.network import stockfish_15_1_architecture

    arch = stockfish_15_1_architecture()
    sf = features_batch(boards, arch)
    torch = features_batch(boards, "HalfKAv2_hm")
    assert sf.num_inputs == 22528 and sf.feature_set == "network:HalfKAv2_hm"
    for i in range(len(boards)):
        for c in (chess.WHITE, chess.BLACK):
            assert sorted(torch_halfka(sf.row(i, c)).tolist()) == torch.row(i, c).tolist()
    default = features_batch(boards[:5], nnue_infer.default_network())
    assert default.num_inputs == nnue_infer.default_network().ft_weights.shape[0]


def test_errors():
    with pytest.raises(ValueError, match="unknown feature component 'HalfKP'"):
        features_batch([chess.Board()], "HalfKP")
    with pytest.raises(ValueError, match="repeated"):
        features_batch([chess.Board()], "PP_3Wide+PP_3Wide")
    with pytest.raises(FenError, match="row 1"):
        features_batch([chess.Board().fen(), "not a fen"], "PP_3Wide")
    with pytest.raises(PositionError, match="row 0"):
        features_batch(["8/8/8/8/8/8/8/4K3 w - - 0 1"], "PP_3Wide")
    with pytest.raises(TypeError, match="row 0"):
        features_batch([42], "PP_3Wide")
    empty = features_batch([], "HalfKAv2_hm^")
    assert len(empty) == 0 and empty.offsets.tolist() == [[0], [0]]


def test_network_numbering_with_int8_sets_and_chess768_equal_the_per_board_sets(boards):
    """The batch kernels against each feature set's own per-board ``active`` (python-chess board
    in, one position at a time): a network's piece-square rows then its threat and pawn-pair rows,
    and nnue-pytorch's Chess768; FENs and boards mixed in one list."""
    import dataclasses

    from nnue_infer.features import architecture_features, feature_set, full_threats, pawn_pairs as pp
    from nnue_infer.network import stockfish_15_1_architecture

    arch = dataclasses.replace(stockfish_15_1_architecture(), int8_feature_sets=(full_threats.NAME, pp.NAME))
    mixed = [b.fen() if i % 2 else b for i, b in enumerate(boards)]
    got = features_batch(mixed, arch)
    chess768 = features_batch(boards, "Chess768")
    n_ps = architecture_features(arch).num_features
    for i, board in enumerate(boards):
        ps, threats, pairs = architecture_features(arch).active(board), full_threats.active(board), pp.active(board)
        plain = feature_set("Chess768").active(board)
        for p, colour in enumerate((chess.WHITE, chess.BLACK)):
            want = (sorted(ps[p]) + [n_ps + f for f in threats[p]]
                    + [n_ps + full_threats.NUM_FEATURES + f for f in pairs[p]])
            assert got.row(i, colour).tolist() == want, (board.fen(), colour)
            assert chess768.row(i, colour).tolist() == sorted(plain[p])

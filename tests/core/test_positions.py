"""Positions the network cannot represent, malformed FENs, Chess960, and symmetry properties."""

from __future__ import annotations

import chess
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnue_infer
import reference as R
from nnue_infer import PositionError
from stockfish_uci import nnue_part
from nnue_infer import FenError, PositionError

START = chess.STARTING_FEN


@pytest.mark.parametrize("fen,fragments", [
    ("8/8/8/8/8/8/8/4K3 w - - 0 1", ["Black", "king", "none"]),
    ("4k3/8/8/8/8/8/8/8 w - - 0 1", ["White", "king", "none"]),
    ("4k3/8/8/8/8/8/8/K3K3 w - - 0 1", ["White", "king", "2", "a1", "e1"]),
    ("k3k3/8/8/8/8/8/8/4K3 b - - 0 1", ["Black", "king", "2", "a8", "e8"]),
    ("rnbqkbnr/pppppppp/8/8/8/N7/PPPPPPPP/RNBQKBNR w KQkq - 0 1", ["33 pieces", "32"]),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1".replace("8/8/8/8", "QQQQ4/qqqq4/QQQQ4/qqqq4"),
     ["48 pieces"]),
    ("4k3/8/8/8/8/8/8/P3K3 w - - 0 1", ["pawn", "a1"]),
    ("4k2p/8/8/8/8/8/8/4K3 w - - 0 1", ["pawn", "h8"]),
    ("p3k3/8/8/8/8/8/8/3PK2P w - - 0 1", ["pawn", "d1", "h1", "a8"]),
])
def test_unrepresentable_positions(evaluator, fen, fragments):
    board = chess.Board(fen)
    for call in (evaluator.evaluate, evaluator.trace, evaluator.evaluate_cp, nnue_infer.evaluate):
        with pytest.raises(PositionError) as info:
            call(board)
        for fragment in fragments:
            assert fragment in str(info.value), (fragment, str(info.value))
        assert isinstance(info.value, ValueError)
    with pytest.raises(PositionError):
        evaluator.evaluate(fen)  # the same from a FEN string
    assert evaluator.evaluate(START) == 69  # no corrupted state after the error


@pytest.mark.parametrize("fen,fragment", [
    ("garbage", "invalid character 'g' in the placement field at column 1"),
    ("", "empty FEN"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP w KQkq - 0 1", "the placement field does not have 8 ranks"),
    ("rnbqkbnr/pppppppp/9/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "invalid character '9'"),
    ("rnbqkxnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "invalid character 'x'"),
    (START + " extra", "more than 6 fields, found 'extra'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1", "side to move must be 'w' or 'b', found 'x'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w XYZ - 0 1", "invalid castling field 'XYZ'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq e9 0 1", "invalid en passant field 'e9'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - -1 1", "half-move clock"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN\u00e9 w KQkq - 0 1", "invalid FEN"),  # python-chess's words
])
def test_malformed_fen_strings(evaluator, fen, fragment):
    """Every FEN string goes through one rule (positions.board_from_fen): the field or character, where it
    stands and the FEN are named (the compiled parser's words for ASCII text, python-chess's otherwise)."""
    for call in (evaluator.evaluate, evaluator.trace, evaluator.evaluate_cp, nnue_infer.evaluate):
        with pytest.raises(ValueError) as info:
            call(fen)
        assert fragment in str(info.value) and repr(fen) in str(info.value), str(info.value)
    assert evaluator.evaluate(START) == 69


def test_wrong_argument_type(evaluator):
    with pytest.raises(TypeError, match="chess.Board or a FEN"):
        evaluator.evaluate(12345)


def test_fen_string_and_board_agree(evaluator, corpus):
    for row in corpus[::50]:
        assert evaluator.evaluate(row["fen"]) == evaluator.evaluate(chess.Board(row["fen"])) == row["raw"]["value"]


def test_only_placement_and_side_to_move_matter(evaluator):
    """Spec 3: castling rights, e.p. square, counters never influence any NNUE number."""
    a = chess.Board("r3k2r/8/8/3pP3/8/8/8/R3K2R w KQkq d6 0 1")
    b = chess.Board("r3k2r/8/8/3pP3/8/8/8/R3K2R w - - 99 150")
    assert evaluator.trace(a).psqt == evaluator.trace(b).psqt
    assert evaluator.trace(a).positional == evaluator.trace(b).positional


@pytest.mark.parametrize("n", [0, 1, 100, 518, 959])
def test_chess960_start_positions(evaluator, network, stockfish, n):
    """Chess960 boards (X-FEN/Shredder castling) evaluate right: reference and live Stockfish."""
    board = chess.Board.from_chess960_pos(n)
    e = R.evaluate(network, board)
    assert evaluator.evaluate(board) == e.value
    assert evaluator.evaluate(board.fen()) == e.value
    assert evaluator.trace(board).format_stockfish().split("\n") == nnue_part(
        stockfish.eval_lines(board.fen(), chess960=True))


def boards_from_seeds():
    return st.integers(0, 2**32 - 1).map(lambda s: R.random_board(np.random.default_rng(s), max_plies=120))


def placements():
    return st.tuples(st.integers(0, 2**32 - 1), st.integers(2, 32)).map(
        lambda t: R.random_placement(np.random.default_rng(t[0]), t[1]))


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(board=st.one_of(boards_from_seeds(), placements()))
def test_colour_mirror_evaluates_identically(evaluator, board):
    """board.mirror() swaps colours, flips ranks and the side to move: same value, stm's view."""
    assert evaluator.evaluate(board) == evaluator.evaluate(board.mirror())


@FAST
@given(board=st.one_of(boards_from_seeds(), placements()))
def test_horizontal_flip_evaluates_identically(evaluator, board):
    """HalfKAv2_hm mirrors files so the own king is on e-h: a file flip changes no feature."""
    flipped = board.transform(chess.flip_horizontal)
    assert evaluator.evaluate(board) == evaluator.evaluate(flipped)


@FAST
@given(board=placements())
def test_random_placements_match_reference(evaluator, network, board):
    t = evaluator.trace(board)
    e = R.evaluate(network, board)
    assert (list(t.psqt), list(t.positional), t.value) == (e.psqt, e.positional, e.value)
    assert t.piece_values == R.piece_values(network, board)


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(st.text(max_size=80),
                      st.text(alphabet="pnbrqkPNBRQK12345678/ wb-KQkqa1h8e3e6", max_size=90)))
def test_arbitrary_text_gives_value_or_value_error(evaluator, text):
    try:
        v = evaluator.evaluate(text)
    except ValueError:
        return
    assert isinstance(v, int) and abs(v) < 2**31


@pytest.mark.parametrize("scharnagl", [0, 518, 959])
def test_chess960_castling_fields_keep_their_rights(evaluator, scharnagl):
    """A FEN string whose castling field names rook files (Shredder-FEN) that only Chess960 can
    castle with is read as Chess960: the castling moves stay among the children (read as standard
    chess they were dropped with the rights)."""
    from nnue_infer.positions import board_from_fen

    start = chess.Board.from_chess960_pos(scharnagl)
    # clear the back ranks between king and rooks so that castling is legal
    for square in list(start.pieces(chess.KNIGHT, chess.WHITE) | start.pieces(chess.BISHOP, chess.WHITE)
                       | start.pieces(chess.QUEEN, chess.WHITE) | start.pieces(chess.KNIGHT, chess.BLACK)
                       | start.pieces(chess.BISHOP, chess.BLACK) | start.pieces(chess.QUEEN, chess.BLACK)):
        start.remove_piece_at(square)
    fen = start.fen(shredder=True)
    board = board_from_fen(fen)
    assert board.castling_rights == start.castling_rights and board.chess960 == (scharnagl != 518), fen
    assert any(board.is_castling(m) for m in board.legal_moves)
    assert len(evaluator.evaluate_moves(fen)) == board.legal_moves.count(), fen
    assert list(evaluator.evaluate_moves(fen)) == list(evaluator.evaluate_moves(start)), fen


@pytest.mark.parametrize("fen, castles", [
    # stale kq after Black's king left e8: standard chess, White castles as e1g1 / e1c1, Black not at all
    ("r2k3r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1", {"e1g1", "e1c1"}),
    ("r2k3r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R b KQkq - 0 1", set()),
    # Shredder-FEN with one right that has no rook: the others are kept (Chess960), as python-chess does
    ("1k5r/8/8/8/8/8/8/RK5R w HAha - 0 1", {"b1h1", "b1a1"}),
])
def test_castling_fields_read_as_the_rules_allow(fen, castles):
    from nnue_infer.positions import board_from_fen

    board = board_from_fen(fen)
    assert {m.uci() for m in board.legal_moves if board.is_castling(m)} == castles, board.fen()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f/18KQkq-wéx\u2003", max_size=14), max_size=40))
def test_field_counts_equal_a_byte_level_reference(rows):
    """``field_counts`` (the batch path's check for missing FEN fields) counts the fields a split of each
    row's UTF-8 bytes at ASCII white space gives (it was rewritten to search the field starts instead of
    summing an int64 copy of the buffer: evaluate_batch on 640,000 FENs varied 1.3-2.1 s)."""
    import re

    from nnue_infer.positions import fen_buffer, field_counts

    buf, offsets = fen_buffer(rows)
    want = [len([f for f in re.split(rb"[ \t\n\x0b\x0c\r\x1c-\x1f]", row.encode("utf-8", "surrogatepass")) if f])
            for row in rows]
    assert field_counts(buf, offsets).tolist() == want


# -- hostile input ---------------------------------------------------------------------------------------------------

def _typeless_square(board):  # a Black-occupied square without a piece type
    board.occupied_co[chess.BLACK] |= chess.BB_E5
    board.occupied |= chess.BB_E5


def _both_colours(board):
    board.occupied_co[chess.BLACK] |= chess.BB_E1


def _two_types(board):
    board.knights |= chess.BB_E1


@pytest.mark.parametrize("tamper", [_typeless_square, _both_colours, _two_types])
def test_tampered_boards_are_refused_by_every_path(evaluator, tamper):
    """A board whose internals were edited directly: the feature kernel read past the six piece
    types (out of bounds) for a square without a type, and single, incremental and batch paths
    gave three different numbers (-242 / -5 / error for a typeless square)."""
    board = chess.Board("4k3/8/8/8/8/8/8/4K3 w - - 0 1")
    tamper(board)
    runs = {
        "evaluate": lambda: evaluator.evaluate(board),
        "batch": lambda: evaluator.evaluate_batch([board]),
        "set_position": lambda: evaluator.set_position(board),
        "evaluate_game": lambda: evaluator.evaluate_game(board, []),
        "trace": lambda: evaluator.trace(board),
    }
    for name, run in runs.items():
        with pytest.raises(PositionError, match="e1|e5"):
            run()
    # tampered after set_position, then pushed: the incremental kernel refuses it as well
    evaluator.set_position(chess.Board("4k3/8/8/8/8/8/8/4K3 w - - 0 1"))
    try:
        evaluator._board.push(chess.Move.from_uci("e1d1"))
        tamper(evaluator._board)
        with pytest.raises(PositionError):
            evaluator.evaluate()
    finally:
        evaluator.set_position(chess.Board())

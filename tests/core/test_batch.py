"""Batch evaluation: ``Evaluator.evaluate_batch`` / ``nnue_infer.evaluate_batch``.

The batch path (compiled FEN parser or board bitboards, parallel kernel) must give exactly
the numbers of single evaluation and of Stockfish 15.1 (the corpus' ``raw`` values), and
reject every bad row with an error naming it.  Fixtures ``evaluator`` and ``corpus`` come
from ``conftest.py``.
"""

from __future__ import annotations

import random

import chess
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnue_infer
from nnue_infer import FenError, PositionError
import json


def random_boards(seed: int, count: int, chess960: bool = False) -> list[chess.Board]:
    """Positions of seeded random legal playouts (all move kinds occur: castling, e.p., promotions)."""
    rng = random.Random(seed)
    boards = []
    for _ in range(count):
        board = chess.Board.from_chess960_pos(rng.randrange(960)) if chess960 else chess.Board()
        for _ in range(rng.randrange(0, 160)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        boards.append(board)
    return boards


def test_dev_corpus_equals_stockfish_and_single(evaluator, corpus):
    fens = [row["fen"] for row in corpus]
    expected = np.array([row["raw"]["value"] for row in corpus], np.int32)
    from_fens = evaluator.evaluate_batch(fens)
    from_boards = evaluator.evaluate_batch([chess.Board(f) for f in fens])
    assert from_fens.dtype == np.int32 and from_fens.shape == (len(fens),)
    np.testing.assert_array_equal(from_fens, expected)
    np.testing.assert_array_equal(from_boards, expected)
    single = np.array([evaluator.evaluate(f) for f in fens[::7]], np.int32)
    np.testing.assert_array_equal(single, expected[::7])


def test_module_function_matches_evaluator(evaluator, corpus):
    fens = [row["fen"] for row in corpus[:50]]
    default = nnue_infer.Evaluator(nnue_infer.default_network())  # the module functions' default
    np.testing.assert_array_equal(nnue_infer.evaluate_batch(fens), default.evaluate_batch(fens))
    np.testing.assert_array_equal(nnue_infer.evaluate_batch(fens, network=evaluator.network),
                                  evaluator.evaluate_batch(fens))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), chess960=st.booleans())
def test_random_games_equal_single_evaluation(evaluator, seed, chess960):
    boards = random_boards(seed, 12, chess960)
    single = [evaluator.evaluate(b) for b in boards]
    assert evaluator.evaluate_batch(boards).tolist() == single
    assert evaluator.evaluate_batch([b.fen() for b in boards]).tolist() == single


@pytest.mark.parametrize("threads", [1, 2])
def test_thread_counts_give_the_same_numbers(evaluator, threads):
    import numba

    boards = random_boards(7, 300)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        got = evaluator.evaluate_batch(boards)
    finally:
        numba.set_num_threads(before)
    assert got.tolist() == [evaluator.evaluate(b) for b in boards]


def test_inputs_of_any_size_and_iterables(evaluator):
    empty = evaluator.evaluate_batch([])
    assert empty.dtype == np.int32 and empty.shape == (0,)
    start = evaluator.evaluate(chess.Board())
    assert evaluator.evaluate_batch([chess.STARTING_FEN]).tolist() == [start]
    assert evaluator.evaluate_batch(iter([chess.Board()] * 3)).tolist() == [start] * 3
    assert evaluator.evaluate_batch((f for f in [chess.STARTING_FEN] * 5)).tolist() == [start] * 5


@pytest.mark.parametrize("fen", [
    "  rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR\tb  KQkq -  0 1 ",
    "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w HAha - 17 42",
    "rnbqkbnr~/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w Kq - 0 0",  # '~' marks a promoted piece
    "4k3/8/8/8/8/8/8/4K3 b - - 100 200",
    "4k3/8/8/8/8/8/8/4K3 b - - 1_0 +2",  # counters as int() reads them
    "4k3/8/8/8/8/8/8/4K3 b - - -0 1",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR\u00a0b\u3000KQkq - 0 1",  # Unicode white space
    "4k3/8/8/8/8/8/8/4\u212a3 w - - \u0661 1",  # Kelvin sign (a White king to python-chess), Arabic-Indic 1
])
def test_unusual_but_valid_fens_match_python_chess(evaluator, fen):
    assert evaluator.evaluate_batch([chess.STARTING_FEN, fen]).tolist() == [
        evaluator.evaluate(chess.STARTING_FEN), evaluator.evaluate(chess.Board(fen))]


GOOD = chess.STARTING_FEN


@pytest.mark.parametrize("fen, field", [
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR", "no side to move field"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b", "no castling rights field"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR\u00a0b\u3000KQkq", "no en passant square field"),  # python-chess reads it
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 0", "half-move clock but no full-move number"),
])
def test_fen_strings_are_strict_everywhere(evaluator, fen, field):
    """One rule for FEN strings (the command line's): python-chess reads them, a missing field is
    an error naming it in evaluate, evaluate_batch and the module functions; chess.Board(fen) is the
    lenient reading."""
    for call in (evaluator.evaluate, nnue_infer.evaluate, lambda f: evaluator.evaluate_batch([GOOD, f]),
                 lambda f: nnue_infer.evaluate_batch([GOOD, f])):
        with pytest.raises(FenError, match=field) as info:
            call(fen)
        assert "chess.Board(fen)" in str(info.value)
    assert evaluator.evaluate_batch([chess.Board(fen)]).tolist() == [evaluator.evaluate(chess.Board(fen))]


@pytest.mark.parametrize("fen, message", [
    ("", "empty FEN"),
    ("   ", "empty FEN"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNX w KQkq - 0 1", "invalid character 'X' in the placement field at column 43"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN\u00e9 w - - 0 1", "invalid character in position part"),
    ("\ud800", "expected 8 rows"),
    ("rnbqkbnr/pppppppp/44/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1", "two digits in a row"),
    ("rnbqkbnr/pppppppp/~8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1", "'~' not after a piece"),
    ("rnbqkbnr/ppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1", "rank 7 of the placement field does not have 8 squares"),
    ("rnbqkbnr/pppppppp/9/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1", "invalid character '9'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNRR w - - 0 1", "rank 1 of the placement field does not have 8 squares"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP w - - 0 1", "does not have 8 ranks"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR/8 w - - 0 1", "does not have 8 ranks"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1", "side to move must be 'w' or 'b', found 'x'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR white - - 0 1", "side to move must be 'w' or 'b', found 'white'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkqK - 0 1", "invalid castling field 'KQkqK'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w kK - 0 1", "invalid castling field 'kK'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq e9 0 1", "invalid en passant field 'e9'"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - x 1", "half-move clock"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 -1", "full-move number"),
    ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 extra", "more than 6 fields, found 'extra'"),
])
def test_bad_fen_names_row_and_problem(evaluator, fen, message):
    with pytest.raises(FenError) as info:
        evaluator.evaluate_batch([GOOD, GOOD, fen, GOOD])
    assert str(info.value).startswith("row 2: ")
    assert message in str(info.value)
    with pytest.raises(ValueError):  # python-chess agrees the FEN is bad
        chess.Board(fen)


@pytest.mark.parametrize("fen, message", [
    ("8/8/8/8/8/8/8/8 w - - 0 1", "White must have exactly one king"),
    ("4k3/8/8/8/8/8/8/8 w - - 0 1", "White must have exactly one king"),
    ("4k3/8/8/8/8/8/8/3KK3 w - - 0 1", "White must have exactly one king, found 2 (d1, e1)"),
    ("8/8/8/8/8/8/8/4K3 b - - 0 1", "Black must have exactly one king"),
    ("4k3/8/8/8/8/8/8/P3K3 w - - 0 1", "pawn on the first or last rank: a1"),
    ("4k2p/8/8/8/8/8/8/4K3 w - - 0 1", "pawn on the first or last rank: h8"),
    ("rnbqkbnr/pppppppp/pppppppp/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1", "40 pieces on the board"),
])
def test_unrepresentable_position_names_row(evaluator, fen, message):
    for rows in ([GOOD, fen], [chess.Board(GOOD), chess.Board(fen)]):
        with pytest.raises(PositionError) as info:
            evaluator.evaluate_batch(rows)
        assert str(info.value).startswith("row 1: ")
        assert message in str(info.value)


def test_first_bad_row_is_reported(evaluator):
    rows = [GOOD] * 10
    rows[7] = "8/8/8/8/8/8/8/8 w - - 0 1"
    rows[4] = "8/8/8/8/8/8/8/8 w - - 0 1"
    with pytest.raises(PositionError, match=r"^row 4: "):
        evaluator.evaluate_batch(rows)
    rows[2] = "rnbqkbnr/pppppppp/8/8 w - - 0 1"  # a malformed FEN before them
    with pytest.raises(FenError, match=r"^row 2: "):
        evaluator.evaluate_batch(rows)
    rows[2], rows[7] = GOOD, "rnbqkbnr/pppppppp/8/8 w - - 0 1"  # after them
    with pytest.raises(PositionError, match=r"^row 4: "):
        evaluator.evaluate_batch(rows)


def test_mixed_or_wrong_types_raise_type_error(evaluator):
    with pytest.raises(TypeError, match=r"row 1: expected a FEN string.*Board"):
        evaluator.evaluate_batch([GOOD, chess.Board()])
    with pytest.raises(TypeError, match=r"row 2: expected a chess.Board.*str"):
        evaluator.evaluate_batch([chess.Board(), chess.Board(), GOOD])
    with pytest.raises(TypeError, match=r"row 0"):
        evaluator.evaluate_batch([42])


def test_evaluator_usable_after_errors(evaluator):
    with pytest.raises(FenError):
        evaluator.evaluate_batch(["garbage"])
    with pytest.raises(PositionError):
        evaluator.evaluate_batch(["8/8/8/8/8/8/8/8 w - - 0 1"])
    assert evaluator.evaluate_batch([GOOD]).tolist() == [evaluator.evaluate(GOOD)]


FEN_ALPHABET = "pnbrqkPNBRQK12345678/ wb-KQkqaceh~09x_+\t\x00\x1c\x85\u00a0\u212a\u0661\ud800"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_fens_agree_with_python_chess(evaluator, data):
    """Random edits of real FENs: the compiled parser accepts exactly what python-chess accepts
    (with a representable position), with the same value."""
    base = data.draw(st.sampled_from([GOOD, "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
                                      "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", "4k3/8/8/8/8/8/8/4K3 b - e3 5 9"]))
    chars = list(base)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(chars)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        c = data.draw(st.sampled_from(FEN_ALPHABET))
        if op == "insert":
            chars.insert(i, c)
        elif chars and i < len(chars):
            if op == "delete":
                del chars[i]
            else:
                chars[i] = c
    fen = "".join(chars)
    try:
        expected = evaluator.evaluate(chess.Board(fen))
    except ValueError:
        expected = None
    if len(fen.split()) in (1, 2, 3, 5):  # python-chess reads it, the strict rule refuses it (missing field)
        expected = None
    if expected is None:
        with pytest.raises((FenError, PositionError), match=r"^row 0: "):
            evaluator.evaluate_batch([fen])
    else:
        assert evaluator.evaluate_batch([fen]).tolist() == [expected]


def test_concurrent_batches_from_threads(evaluator, corpus):
    from concurrent.futures import ThreadPoolExecutor

    fens = [row["fen"] for row in corpus[:400]]
    expected = evaluator.evaluate_batch(fens)
    network = evaluator.network
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda k: nnue_infer.evaluate_batch(fens[k:] + fens[:k], network), range(8)))
    for k, got in enumerate(results):
        np.testing.assert_array_equal(got, np.roll(expected, -k))


def test_batch_kernels_compile_once(evaluator):
    from nnue_infer.batch import batch_kernels

    evaluator.evaluate_batch([GOOD, GOOD])
    evaluator.evaluate_batch([chess.Board()])
    kernels = batch_kernels(evaluator._batch_args[0])
    assert len(kernels.evaluate_batch.signatures) == 1
    assert len(kernels.evaluate_fens.signatures) == 1


def test_evaluate_bitboards_equals_evaluate_batch_and_checks_its_arrays(evaluator, corpus):
    """``Evaluator.evaluate_bitboards`` (the array API the training-data and Dask paths use) gives
    evaluate_batch's values for uint64 or int64 bitboards and int or bool sides to move, and refuses
    arrays of the wrong shape, type or side-to-move value before the kernel runs (a short ``stm``
    returned garbage values with code 0 or crashed the process, a side to move of 2 crashed it:
    hostile pass)."""
    from nnue_infer.features import board_bitboards

    boards = [chess.Board(row["fen"]) for row in corpus[:200]]
    bb = np.array([board_bitboards(b) for b in boards], np.uint64)
    stm = np.array([b.turn == chess.BLACK for b in boards])
    want = evaluator.evaluate_batch(boards)
    for bits, side in ((bb, stm), (bb.view(np.int64), stm.astype(np.int64)), (bb[:, :], stm.astype(np.uint8)),
                       (bb.astype(">u8"), stm), (bb.view(np.int64).astype(">i8"), stm)):  # big-endian too
        values, codes = evaluator.evaluate_bitboards(bits, side)
        np.testing.assert_array_equal(values, want)
        assert not codes.any()
    wrong = [((bb, stm[:1]), ValueError, r"stm: expected shape \[200\] \(one side to move per bitboards row\), got \[1\]"),
             ((bb, np.where(stm, 2, 0)), ValueError, r"stm: row \d+: side to move 2 is neither 0 \(White\) nor 1"),
             ((bb, np.full(200, -1)), ValueError, r"stm: row 0: side to move -1"),
             ((bb[:, :7], stm), ValueError, r"bitboards: expected shape \[n, 8\] .* got \[200, 7\]"),
             ((bb[0], stm[:1]), ValueError, r"bitboards: expected shape \[n, 8\]"),
             ((bb.astype(np.int32), stm), TypeError, "bitboards: expected 64-bit integers .* got int32"),
             ((bb, stm.astype(np.float64)), TypeError, "stm: expected integers .* got float64")]
    for (bits, side), error, message in wrong:
        with pytest.raises(error, match=message):
            evaluator.evaluate_bitboards(bits, side)


def test_fens_in_chunks_give_the_values_and_errors_of_one_call(evaluator, corpus, monkeypatch):
    """``evaluate_batch`` on FEN strings works chunk by chunk (``batch.FEN_CHUNK_ROWS``): the values are those
    of one chunk, an error names its row in the whole list, and a row of the wrong type is a ``TypeError``
    even after a bad FEN in an earlier chunk (as when the list was one chunk)."""
    from nnue_infer import batch

    fens = [row["fen"] for row in corpus][:40]
    whole = evaluator.evaluate_batch(fens)
    monkeypatch.setattr(batch, "FEN_CHUNK_ROWS", 3)
    assert np.array_equal(evaluator.evaluate_batch(fens), whole)
    bad = list(fens)
    bad[25] = "rnbqkbnr/pppppppp/8/8 w - - 0 1"
    bad[31] = "8/8/8/8/8/8/8/8 w - - 0 1"
    with pytest.raises(FenError, match=r"^row 25: "):
        evaluator.evaluate_batch(bad)
    bad[25] = fens[25]
    with pytest.raises(PositionError, match=r"^row 31: "):
        evaluator.evaluate_batch(bad)
    bad[4] = "rnbqkbnr/pppppppp/8/8 w - - 0 1"
    bad[37] = chess.Board()
    with pytest.raises(TypeError, match=r"^row 37: expected a FEN string like the rows before, got Board"):
        evaluator.evaluate_batch(bad)
    bad[4], bad[31], bad[37] = fens[4], fens[31], fens[37]
    bad[30] = fens[30].replace(" ", "\u3000", 1)  # read by python-chess, not by the compiled parser
    assert np.array_equal(evaluator.evaluate_batch(bad), whole)


# -- hostile input ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fens(data_dir):
    with open(data_dir / "positions-dev.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["fen"] for line in f][:40]


def test_fen_chunks_name_rows_of_the_whole_list(evaluator, fens, monkeypatch):
    """Over 131,072 rows (three chunks of ``batch.FEN_CHUNK_ROWS``), and with 7-row chunks: the values of each FEN
    alone; a bad FEN, a FEN python-chess reads (Unicode spaces) that lacks a field, and a wrong-typed element at
    and around chunk boundaries are named by their row in the whole list; a row python-chess reads is evaluated
    in any chunk; a wrong-typed row is the error even after a bad FEN of an earlier chunk (as the docstring says)."""
    import chess
    import numpy as np

    from nnue_infer import FenError, batch

    alone = np.array([evaluator.evaluate(f) for f in fens], np.int32)
    many = (fens * (131_072 // len(fens) + 3))[:131_100]
    want = np.resize(alone, len(many))
    assert np.array_equal(evaluator.evaluate_batch(tuple(many)), want)
    for size, rows in ((batch.FEN_CHUNK_ROWS, (65_535, 65_536, 131_072, 131_099)), (7, (0, 6, 7, 13, 14))):
        monkeypatch.setattr(batch, "FEN_CHUNK_ROWS", size)
        for i in rows:
            bad = list(many)
            bad[i] = many[i].replace(" ", "\u2003")
            assert np.array_equal(evaluator.evaluate_batch(f for f in bad), want)
            bad[i] = "\u2003".join(many[i].split()[:3])
            with pytest.raises(FenError, match=rf"^row {i}: FEN .* has no en passant square field"):
                evaluator.evaluate_batch(bad)
            bad[i] = many[i][:-1] + "x"
            with pytest.raises(FenError, match=rf"^row {i}: "):
                evaluator.evaluate_batch(bad)
            if i + 1 < len(bad):  # (a board in row 0 would make it a list of boards)
                bad[i + 1] = chess.Board()
                with pytest.raises(TypeError, match=rf"^row {i + 1}: expected a FEN string like the rows before"):
                    evaluator.evaluate_batch(bad)


START = chess.STARTING_FEN


#: Text python-chess reads but an ASCII parser would not: Unicode white space (split() splits on
#: it), Unicode digits and '_' in counters (int() reads them), the Kelvin sign 'K' (its lower()
#: is 'k', so python-chess reads a White king).
UNUSUAL_BUT_VALID = [
    START.replace(" w ", "\u00a0w\u3000"),
    START.replace(" 0 1", " \u0661\u0662 1"),
    START.replace(" 0 1", " 1_0 1"),
    START.replace(" 0 1", " 0 \uff11"),
    START + "\u2003",
    "4k3/8/8/8/8/8/8/4\u212a3 w - - 0 1",
]


FUZZ_ALPHABET = ("pnbrqkPNBRQK0123456789/ wb-~_+x\t\n\x0b\x1c\x00"
                 "\u00a0\u2003\u3000\x85\u212a\u0661\uff11\uff2b\u00e9\ud800")


@pytest.mark.parametrize("fen", UNUSUAL_BUT_VALID)
def test_batch_accepts_what_python_chess_accepts(evaluator, fen):
    """The compiled parser refused these (FenError) although evaluate() accepts them."""
    expected = evaluator.evaluate(fen)
    assert evaluator.evaluate_batch([START, fen]).tolist() == [evaluator.evaluate(START), expected]


@pytest.mark.parametrize("fen", ["\ud800", START + "\udfff", START.replace("w", "\ud83d")])
def test_lone_surrogates_are_fen_errors_naming_the_row(evaluator, fen):
    """Encoding the batch raised UnicodeEncodeError naming no row."""
    with pytest.raises(FenError):
        evaluator.evaluate(fen)
    with pytest.raises(FenError, match=r"^row 1: "):
        evaluator.evaluate_batch([START, fen])


def test_single_evaluation_raises_fen_error(evaluator):
    """evaluate() and forward_float() raised python-chess's bare ValueError for a bad FEN."""
    from nnue_infer import FloatNetwork, forward_float, stockfish_15_1_architecture

    float_net = FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)
    for fen in ["", "garbage", "8/8/8/8/8/8/8/8/8 w - - 0 1", START.replace(" w ", " x "), START.split()[0]]:
        with pytest.raises(FenError) as info:
            evaluator.evaluate(fen)
        with pytest.raises(FenError) as float_info:
            forward_float(float_net, fen)
        assert str(info.value) == str(float_info.value) and repr(fen) in str(info.value)  # one FEN rule


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_fens_with_unicode_agree_with_single_evaluation(evaluator, data):
    """Random edits (Unicode included) of real FENs: batch and single evaluation agree on
    value, FenError or PositionError."""
    base = data.draw(st.sampled_from([START, "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
                                      "4k3/8/8/8/8/8/8/4K3 b - e3 5 9"]))
    chars = list(base)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(chars)))
        c = data.draw(st.sampled_from(FUZZ_ALPHABET))
        op = data.draw(st.sampled_from(["insert", "delete", "replace", "truncate"]))
        if op == "insert":
            chars.insert(i, c)
        elif op == "truncate":
            del chars[i:]
        elif i < len(chars):
            chars[i : i + 1] = [] if op == "delete" else [c]
    fen = "".join(chars)
    outcomes = []
    for run in (lambda: evaluator.evaluate(fen), lambda: int(evaluator.evaluate_batch([fen])[0])):
        try:
            outcomes.append(run())
        except (FenError, PositionError) as exc:
            outcomes.append(type(exc))
    assert outcomes[0] == outcomes[1], fen


@pytest.mark.parametrize("single", [START, START.encode(), chess.Board()])
def test_batch_of_a_single_fen_or_board_is_a_type_error(evaluator, single):
    """A FEN string given instead of a list was read letter by letter ('row 0: rank 8 of the
    placement field does not have 8 squares ... of 'r'')."""
    with pytest.raises(TypeError, match="wrap it in a list"):
        evaluator.evaluate_batch(single)

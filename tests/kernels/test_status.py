"""Compiled helpers of the file mode: check/checkmate/stalemate flags (against python-chess) and EPD splitting."""

from __future__ import annotations

import random

import chess
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnue_infer.io.epd import UNICODE_SPACES, read_epd
from nnue_infer.kernels.chess import status as KS
from nnue_infer.io.score import CHECKMATE, NONE, STALEMATE, outcomes, parse_and_flag
from nnue_infer.positions import fen_buffer

#: Positions where the only legal move is special, or none is: e.p. as the only move, pinned e.p. pawn,
#: smothered mate, stalemates with pins, promotion as the only move.
SPECIAL = [
    "8/8/8/2k5/3Pp3/8/8/3K4 b - d3 0 1",
    "8/8/8/8/k2Pp2Q/8/8/3K4 b - d3 0 1",
    "8/8/8/8/1k1Pp2R/8/8/3K4 b - d3 0 1",
    "6rk/5Npp/8/8/8/8/8/6K1 b - - 0 1",
    "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1",
    "k7/P7/1K6/8/8/8/8/8 b - - 0 1",
    "8/8/8/8/8/5k2/4p3/4K3 w - - 0 1",
    "k7/2Q5/8/8/8/8/8/7K b - - 0 1",
    "8/8/8/8/8/8/p7/k1K5 b - - 0 1",
    "1k6/1P6/1K6/8/8/8/8/8 b - - 0 1",
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "K7/2k5/1p6/8/8/8/8/8 w - - 0 1",
    "8/8/8/8/8/8/1k6/K1q5 w - - 0 1",
]


def play(seed: int, plies: int, chess960: bool) -> list[chess.Board]:
    """Boards along one random legal game (captures, checks and promotions preferred, so that games end)."""
    rng = random.Random(seed)
    board = chess.Board.from_chess960_pos(rng.randrange(960)) if chess960 else chess.Board()
    boards = [board.copy()]
    while len(boards) <= plies and not board.is_game_over():
        moves = list(board.legal_moves)
        forcing = [m for m in moves if board.is_capture(m) or board.gives_check(m) or m.promotion]
        board.push(rng.choice(forcing if forcing and rng.random() < 0.6 else moves))
        boards.append(board.copy())
    return boards


def check_sound(boards: list[chess.Board]) -> tuple[int, int]:
    """The compiled flags of the boards' FENs against python-chess; (rows decided in compiled code, rows)."""
    fens = [b.fen() for b in boards]
    buf, offsets = fen_buffer(fens)
    _, _, codes, _, check, flagged = parse_and_flag(buf, offsets)
    assert not codes.any()
    outcome = outcomes(flagged, np.ones(len(boards), bool), fens, np.array([b.chess960 for b in boards]))
    for b, c, f, o in zip(boards, check.tolist(), flagged.tolist(), outcome.tolist()):
        assert c == b.is_check(), b.fen()
        verdict = CHECKMATE if b.is_checkmate() else STALEMATE if b.is_stalemate() else NONE
        assert o == verdict, b.fen()
        if f != KS.OUTCOME_ASK:
            assert f == verdict, b.fen()  # the filter is sound, the compiled legal-move count right
        else:
            assert not b.is_check() and b.castling_rights, b.fen()  # python-chess only where castling could matter
    return int((flagged != KS.OUTCOME_ASK).sum()), len(boards)


def test_special_positions():
    check_sound([chess.Board(f) for f in SPECIAL])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), plies=st.integers(0, 300), chess960=st.booleans())
def test_status_of_random_games_agrees_with_python_chess(seed, plies, chess960):
    check_sound(play(seed, plies, chess960))


def test_filter_clears_most_positions_and_sees_mates_and_stalemates():
    boards = [b for seed in range(30) for b in play(seed, 400, seed % 5 == 0)]
    boards += [chess.Board(f) for f in SPECIAL]
    decided, n = check_sound(boards)
    assert decided >= 0.9 * n  # python-chess is asked about the few others only
    assert any(b.is_checkmate() for b in boards) and any(b.is_stalemate() for b in boards)


def test_epd_lines_fields_and_operations():
    text = (b'\xef\xbb\xbf# comment\n'
            b'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\n\n'
            b'r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - bm Bb5; id "Petrov; x";\r\n'
            b'   4k3/8/8/8/8/8/8/4K3 b\n'
            b'4k3/8/8/8/8/8/8/4K3 w - - 5\n'
            b'4k3/8/8/8/8/8/8/4K3 w - - noop; id "last"\n'
            b'4k3/8/8/8/8/8/8/4K3 w - - c0 \xff')
    rows = read_epd(text)
    assert rows.line.tolist() == [2, 4, 5, 6, 7, 8]
    assert rows.fen.to_list() == ["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
                                  "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq -",
                                  "4k3/8/8/8/8/8/8/4K3 b", "4k3/8/8/8/8/8/8/4K3 w - - 5",
                                  "4k3/8/8/8/8/8/8/4K3 w - -", "4k3/8/8/8/8/8/8/4K3 w - -"]
    assert [rows.missing_field(i) for i in range(len(rows))] == [None, None, "castling rights", "full-move number",
                                                                 None, None]
    assert {k: v.to_list() for k, v in rows.operations.items()} == {
        "bm": [None, "Bb5", None, None, None, None],
        "id": [None, "Petrov; x", None, None, "last", None],
        "noop": [None, None, None, None, "", None],
        "c0": [None, None, None, None, None, "\ufffd"],
    }
    buf, offsets = rows.fen_buffer()
    assert bytes(buf).decode().split("\n")[:-1] == rows.fen.to_list() and offsets[-1] == buf.size


#: White space as the splitter (and Python's ``str.split`` on ASCII) sees it.
_SPACE = b" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"


def _reference_split(data: bytes, max_line: int) -> tuple[list[tuple], tuple[int, int, int]]:
    """:func:`nnue_infer.kernels.data.epd.split_lines` in Python, from its docstring: per position (line number, line
    start, FEN range, fields, operations range), and the problem (kind, line, column) that stops it."""
    out, pos = [], 0
    for number, line in enumerate(data.split(b"\n")[:data.count(b"\n") + (not data.endswith(b"\n"))], 1):
        first, pos = pos, pos + len(line) + 1
        if b"\0" in line:
            return out, (2, number, line.index(b"\0") + 1)
        if len(line) > max_line:
            return out, (1, number, 0)
        text = line.strip(_SPACE)
        if not text or text.startswith(b"#"):
            continue
        end = first + len(line.rstrip(_SPACE))
        tokens, k = [], first + len(line) - len(line.lstrip(_SPACE))
        while len(tokens) < 6 and k < end:
            start = k
            while k < end and data[k] not in _SPACE:
                k += 1
            tokens.append((start, k))
            while k < end and data[k] in _SPACE:
                k += 1
        fields = min(len(tokens), 4)
        if len(tokens) >= 5 and data[tokens[4][0]:tokens[4][1]].isdigit():
            fields = 6 if len(tokens) == 6 and data[tokens[5][0]:tokens[5][1]].isdigit() else 5
        ops = tokens[fields - 1][1]
        while ops < end and data[ops] in _SPACE:
            ops += 1
        out.append((number, first, tokens[0][0], tokens[fields - 1][1], fields, ops, end))
    return out, (0, 0, 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b" ", b"\t", b"\r", b"\n", b"\n", b"\x0b", b"\x1c", b"#", b";", b'"', b"\0", b"\xe9",
                                 b"8", b"12", b"k", b"K/", b"w", b"-", b"pP"]), max_size=40),
       st.sampled_from([4, 12, 1 << 20]))
def test_epd_split_lines_agrees_with_a_python_reference(parts, max_line):
    """The one-pass line splitter (a byte-class table) finds the lines, fields, FEN and operation ranges and the
    first refused line that the docstring's rules give, on text of every kind of white space, comments and NULs."""
    from nnue_infer.kernels.data import epd as KE

    data = b"".join(parts)
    buf = np.frombuffer(bytearray(data), np.uint8)
    size = KE.count_lines(buf)
    arrays = [np.empty(size, np.int64) for _ in range(4)] + [np.empty(size, np.int8)] + [np.empty(size, np.int64)
                                                                                          for _ in range(2)]
    problem = np.zeros(3, np.int64)
    n = KE.split_lines(buf, max_line, *arrays, problem)
    got = list(zip(*(a[:n].tolist() for a in arrays)))
    assert (got, tuple(problem.tolist())) == _reference_split(data, max_line)


def test_unicode_spaces_are_every_white_space_of_str_split():
    assert UNICODE_SPACES == "".join(c for c in map(chr, range(0x80, 0x110000)) if c.isspace())


@pytest.mark.parametrize("space", list(UNICODE_SPACES))
def test_fen_fields_separated_by_unicode_white_space_are_read_as_python_chess_reads_them(space, evaluator):
    """A FEN whose fields are separated by a Unicode space (a no-break space copied from a web page), which
    ``nnue_infer.evaluate`` and python-chess read, is scored the same from a file, its FEN column as the line gives
    it; it was an error row saying the FEN had "a half-move clock but no full-move number" (or, the space between
    the counters, an EPD opcode '0\\u20031')."""
    from nnue_infer.io.score import score_epd

    base = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3".split(" ")
    fens = [space.join(base)] + [" ".join(base[:k]) + space + " ".join(base[k:]) for k in range(1, 6)]
    fens.append(" ".join(base[:4]) + space + 'id "a' + space + 'b";')  # an EPD line: the operand keeps its text
    rows = read_epd(("\n".join(fens) + "\n").encode())
    assert rows.fen.to_list() == fens[:-1] + [" ".join(base[:4])]
    assert rows.fields.tolist() == [6] * 6 + [4]
    table = next(score_epd(evaluator, rows))
    expected = evaluator.evaluate(chess.Board(" ".join(base)))
    assert table["error"].to_list() == [None] * 7
    assert table["value"].tolist() == [expected] * 7
    assert table["id"].to_list() == [None] * 6 + ["a" + space + "b"]


def test_a_unicode_space_inside_epd_operations_is_named():
    line = '4k3/8/8/8/8/8/8/4K3 w - - bm\u00a0Kd2; id "x";\n'
    rows = read_epd(line.encode())
    assert rows.problem(0) == (f"column {line.index('bm') + 1}: EPD opcode 'bm\\xa0Kd2' is not a name (a letter, then letters, digits or "
                               "'_', at most 15) (U+00A0 NO-BREAK SPACE is not white space in EPD operations: "
                               "separate opcodes and operands with ASCII spaces)")


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 40),
       st.lists(st.sampled_from([" ", "  ", "\t", " \t", *UNICODE_SPACES]), min_size=5, max_size=5))
def test_fen_lines_with_any_white_space_score_as_evaluate_reads_them(evaluator, seed, plies, separators):
    """A FEN line whose fields are separated by any white space, ASCII or Unicode, scores from a file exactly as
    ``Evaluator.evaluate`` scores that text (python-chess reads it), its ``fen`` cell the line as written."""
    from nnue_infer.io.score import score_epd

    board = play(seed, plies, False)[-1]
    fields = board.fen().split(" ")
    line = fields[0] + "".join(s + f for s, f in zip(separators, fields[1:]))
    table = next(score_epd(evaluator, read_epd((line + "\n").encode())))
    assert table["fen"].to_list() == [line] and table["error"].to_list() == [None]
    assert table["value"].tolist() == [evaluator.evaluate(line)]

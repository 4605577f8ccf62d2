"""Hostile inputs to the training-data readers, writers and ``nnue-infer data`` (findings of a
hostile trial): each must give an error naming the file and the byte offset or row and the
problem (no traceback, no crash, no silent wrong data) and leave no output behind."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import shared_dir

from nnue_infer.cli import main
from nnue_infer.errors import TrainingDataError
from nnue_infer.io import training_data as td


@pytest.fixture(scope="module")
def bp():
    return shared_dir() / "data" / "binpack"


def test_a_ply_count_beyond_the_block_is_named(bp, tmp_path, capsys):
    """A chain head declaring 65,535 plies in a 134-byte block raised AssertionError ('more rows
    than the format allows') with a traceback: now the truncation at the ply count's offset."""
    head = bytearray((bp / "dev-games.binpack").read_bytes()[8:42])
    head[32:34] = b"\xff\xff"
    payload = bytes(head) + bytes(100)
    path = tmp_path / "big-plies.binpack"
    path.write_bytes(b"BINP" + len(payload).to_bytes(4, "little") + payload)
    message = "byte 40: truncated: the chain declares 65535 plies, more than the 100 bytes left in its block can hold"
    with pytest.raises(TrainingDataError, match=rf"big-plies\.binpack: {message}"):
        td.read(path)
    assert main(["data", "info", str(path)]) == 1
    assert capsys.readouterr().err.strip() == f"error: {path}: {message}"


@pytest.mark.parametrize("kind", ["binpack", "bin", "plain"])
@pytest.mark.parametrize("chunk_bytes", [-1, 0, 1.5, True])
def test_chunk_bytes_must_be_positive(kind, chunk_bytes, bp):
    """chunk_bytes=-1 yielded no rows from a .binpack (silently) and a raw ValueError from a .bin."""
    with pytest.raises(ValueError, match=rf"chunk_bytes must be a positive integer \(bytes per chunk\), "
                                         rf"got {chunk_bytes!r}"):
        list(td.iter_chunks(bp / f"selfplay.{kind}", chunk_bytes=chunk_bytes))
    assert len(td.TrainingData.concat(list(td.iter_chunks(bp / f"selfplay.{kind}", chunk_bytes=1 << 20)))) == 20000


def test_parquet_text_that_is_not_utf8_names_the_row(tmp_path, capsys):
    """Invalid UTF-8 in the fen column was a click usage error (status 2) quoting Python's codec
    message, naming neither the file nor the row."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    start = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
    bad = b"\xff" + start[1:].encode()
    fen = pa.array([start.encode(), bad], pa.binary()).view(pa.string())
    path = tmp_path / "badutf8.parquet"
    pq.write_table(pa.table({"fen": fen, "move": ["e2e4", "e2e4"], "score": pa.array([0, 0], pa.int16()),
                             "ply": pa.array([0, 0], pa.uint16()), "result": pa.array([0, 0], pa.int16())}), path)
    assert main(["data", "info", str(path)]) == 1
    assert capsys.readouterr().err.strip() == (f"error: {path}: row 1: fen is not UTF-8 text (invalid start byte at "
                                               f"byte 0): {bad!r}")
    out = tmp_path / "out.binpack"
    assert main(["data", "convert", str(path), str(out)]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["badutf8.parquet"]


def test_a_damaged_parquet_footer_is_a_training_data_error(bp, tmp_path):
    """Flipping bits of a Parquet footer gave pyarrow's ArrowNotImplementedError, OSError and
    UnicodeDecodeError with tracebacks (only ArrowInvalid was caught): every damage now reads or
    raises TrainingDataError naming the file."""
    pytest.importorskip("pyarrow")
    src = tmp_path / "good.parquet"
    td.write(td.read(bp / "selfplay.binpack")[:300], src)
    good = src.read_bytes()
    footer = int.from_bytes(good[-8:-4], "little")
    path = tmp_path / "bad.parquet"
    others = []
    for i in range(len(good) - 8 - footer, len(good) - 8):
        for flip in (0xFF, 0x01):
            path.write_bytes(good[:i] + bytes([good[i] ^ flip]) + good[i + 1:])
            try:
                td.read(path)
            except TrainingDataError as exc:
                assert str(exc).startswith(f"{path}: ")
            except Exception as exc:  # noqa: BLE001 (counted, then reported)
                others.append(f"byte {i} ^ {flip}: {type(exc).__name__}: {exc}")
    assert others == []


def test_only_kind_errors_are_usage_errors(bp, monkeypatch):
    """Any ValueError inside 'nnue-infer data' was reported as a usage error (status 2): only a
    kind the extension does not tell is one now; another ValueError is not hidden as bad usage."""
    def broken(*args, **kwargs):
        raise ValueError("an internal fault")
        yield

    monkeypatch.setattr(td, "iter_chunks", broken)
    with pytest.raises(ValueError, match="an internal fault"):
        main(["data", "info", str(bp / "selfplay.binpack")])


def test_a_bin_result_outside_minus_one_to_one_is_refused(bp, tmp_path, capsys):
    """A .bin record with result 5 converted to .plain 'result 5' (status 0), which the .plain
    reader refuses; to .binpack it became 1 silently."""
    record = bytearray((bp / "selfplay.bin").read_bytes()[:80])
    record[40 + 38] = 5
    src = tmp_path / "res5.bin"
    src.write_bytes(bytes(record))
    for dst in ("res5.plain", "res5.binpack"):
        assert main(["data", "convert", str(src), str(tmp_path / dst)]) == 1
        assert capsys.readouterr().err.strip() == f"error: {src}: byte 78: record 1: result 5 outside -1 .. 1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res5.bin"]


TWO_CHAINS = ("fen 4k3/8/8/8/8/8/8/4K3 w - - 0 1\nmove e1e2\nscore 0\nply 0\nresult 1\ne\n"
              "fen 4k3/8/8/8/8/8/8/3K4 b - - 0 1\nmove e8e7\nscore 5\nply 1\nresult 0\ne\n"
              "fen 8/4k3/8/8/8/8/8/3K4 w - - 1 2\nmove d1d2\nscore 7\nply 2\nresult 0\ne\n")


def test_a_binpack_result_of_minus_two_is_refused(tmp_path):
    """The 2 result bits of a chain's first entry can hold 3, read as result -2 (and 2, -2, ...
    along the chain) and written on as such: now refused at the field's byte offset."""
    (tmp_path / "two.plain").write_text(TWO_CHAINS)
    td.write(td.read(tmp_path / "two.plain"), tmp_path / "two.binpack")
    data = bytearray((tmp_path / "two.binpack").read_bytes())
    assert len(td.read(tmp_path / "two.binpack")) == 3
    data[8 + 34 + 28] |= 0xC0  # the second chain (the first has no plies: 34 bytes)
    (tmp_path / "bad.binpack").write_bytes(bytes(data))
    with pytest.raises(TrainingDataError, match=r"bad\.binpack: byte 70: result -2 outside -1 \.\. 1 \(ply and result "
                                                r"field\)"):
        td.read(tmp_path / "bad.binpack")


def test_a_parquet_result_outside_minus_one_to_one_is_refused(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "two.plain").write_text(TWO_CHAINS)
    table = td.read(tmp_path / "two.plain").to_arrow()
    table = table.set_column(4, "result", pa.array([1, 0, 5], pa.int16()))
    pq.write_table(table, tmp_path / "r.parquet")
    with pytest.raises(TrainingDataError, match=r"r\.parquet: row 2: result 5 outside -1 \.\. 1"):
        td.read(tmp_path / "r.parquet")


@pytest.mark.parametrize("dst, fen, ply, message", [
    ("x.binpack", "4k3/8/8/8/8/8/8/4K3 w - - 0 1", 20000,
     "line 1 (byte 0): ply 20000 does not fit a chain's first entry (at most 16383; the .binpack field keeps 14 bits)"),
    ("x.bin", "4k3/8/8/8/8/8/8/4K3 w - - 200 1", 0,
     "line 1 (byte 0): half-move clock 200 does not fit a .bin record (at most 127; the tools keep 7 bits)"),
])
def test_values_a_format_cannot_hold_are_refused(dst, fen, ply, message, tmp_path, capsys):
    """A first-entry ply over 14 bits ran into the .binpack result bits (read back as another ply
    and result), a half-move clock over 7 bits lost its top bit in .bin: the tools do so silently."""
    src = tmp_path / "x.plain"
    src.write_text(f"fen {fen}\nmove e1e2\nscore 0\nply {ply}\nresult 1\ne\n")
    assert main(["data", "convert", str(src), str(tmp_path / dst)]) == 1
    assert capsys.readouterr().err.strip() == f"error: {src}: {message}"  # the row's place in the input
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.plain"]


@pytest.fixture(scope="module")
def rows(bp):
    return td.read(bp / "selfplay.binpack")[:5000]


def _with(data, **columns):
    return td.TrainingData(**{**{name: getattr(data, name) for name in td.TrainingData.DTYPES}, **columns})


def _changed(column, i, value):
    column = column.copy()
    column[i] = value
    return column


@pytest.mark.parametrize("change, message", [
    (lambda d: {"stm": d.stm[:1]}, r"column 'stm' has shape \(1,\), expected \(5000,\)"),
    (lambda d: {"bitboards": d.bitboards[:, :6]}, r"column 'bitboards' has shape \(5000, 6\), expected \(5000, 8\)"),
    (lambda d: {"score": d.score.astype(np.int64)}, r"column 'score' holds int64, expected int16"),
    (lambda d: {"ep": _changed(d.ep, 7, 100)}, r"column 'ep' row 7: en passant square neither -1 nor on the side "
                                               r"to move's en passant rank: 100"),
    (lambda d: {"ep": _changed(d.ep, 7, 20 if d.stm[7] == 0 else 44)}, r"column 'ep' row 7"),
    (lambda d: {"stm": _changed(d.stm, 9, 2)}, r"column 'stm' row 9: side to move not 0 \(White\) or 1 \(Black\): 2"),
    (lambda d: {"castling": _changed(d.castling, 3, 16)}, r"column 'castling' row 3: castling rights beyond"),
    (lambda d: {"result": _changed(d.result, 4999, -2)}, r"column 'result' row 4999: result outside -1 \.\. 1: -2"),
    (lambda d: {"bitboards": _changed(d.bitboards, 5, [0] * 8)}, r"column 'bitboards' row 5: not exactly one king"),
    (lambda d: {"bitboards": _changed(d.bitboards, 6, d.bitboards[6] | [0, 0, 0, 0, 0, 0, 1 << 40, 0])},
     r"column 'bitboards' row 6: pieces or colours overlap or differ"),
])
def test_training_data_checks_its_columns(change, message, rows, tmp_path):
    """TrainingData took any columns: stm of 1 entry beside 5000 rows aborted the process on
    writing a .binpack ('corrupted double-linked list') and read out of bounds for .plain; ep 100
    gave the FEN field 'e='.  Construction now names the column and the first bad row."""
    with pytest.raises(ValueError, match=rf"^TrainingData: {message}"):
        _with(rows, **change(rows))


def test_checked_columns_are_kept_and_made_contiguous(rows, tmp_path):
    back = _with(rows)
    assert back.equals(rows)
    strided = td.TrainingData.concat([rows, rows])
    picked = _with(strided, **{name: getattr(strided, name)[::2] for name in td.TrainingData.DTYPES})
    assert all(getattr(picked, name).flags.c_contiguous for name in td.TrainingData.DTYPES)
    assert picked.equals(strided[::2])
    td.write(picked, tmp_path / "p.plain")
    assert td.read(tmp_path / "p.plain").equals(strided[::2].with_chains())


def test_filtered_chains_follow_the_continuation_rule(bp, tmp_path, capsys, monkeypatch):
    """'data filter --skip-captures' to .parquet kept the source's chain numbers, so rows that no
    longer continued the previous one shared its chain ('data info' said 962 chains, the same
    rows as .binpack 3110).  Chains now follow the continuation rule, across chunks too (chunks of
    1000 rows here)."""
    pytest.importorskip("pyarrow")
    monkeypatch.setattr(td, "READ_BYTES", 1000 * 40)
    src = bp / "selfplay.bin"
    assert len(list(td.iter_chunks(src))) == 20
    data = td.read(src)
    kept = data[td.select(data, skip_captures=True)].with_chains()
    counts = {}
    for kind in ("parquet", "binpack", "plain"):
        out = tmp_path / f"q.{kind}"
        assert main(["data", "filter", "-q", str(src), str(out), "--skip-captures"]) == 0
        back = td.read(out)
        assert back.equals(kept, chains=False)
        if kind == "parquet":
            assert np.array_equal(back.chain, kept.chain)  # as written, not recomputed by the reader
        assert main(["data", "info", "--json", str(out)]) == 0
        counts[kind] = json.loads(capsys.readouterr().out)["chains"]
    assert counts["parquet"] == counts["binpack"] == counts["plain"] == len(np.unique(kept.chain))


def _one_row(fen, castling=0, ep=-1, fullmove=1, move=0):
    """One TrainingData row of ``fen``'s board and side to move, the other columns as given (ply
    consistent with ``fullmove``, so that a .binpack, which keeps the ply, reads the same row)."""
    import chess

    board = chess.Board(fen)
    bb = [int(board.pawns), int(board.knights), int(board.bishops), int(board.rooks), int(board.queens),
          int(board.kings), int(board.occupied_co[chess.WHITE]), int(board.occupied_co[chess.BLACK])]
    stm = 0 if board.turn == chess.WHITE else 1
    return td.TrainingData(bitboards=np.array([bb], np.uint64).view(np.int64), stm=np.array([stm], np.uint8),
                           castling=np.array([castling], np.uint8), ep=np.array([ep], np.int8),
                           rule50=np.zeros(1, np.uint8), fullmove=np.array([fullmove], np.uint16),
                           move=np.array([move], np.uint16), score=np.zeros(1, np.int16),
                           ply=np.array([(2 * (fullmove - 1) + stm) & 0xFFFF], np.uint16),
                           result=np.zeros(1, np.int16), chain=np.zeros(1, np.int64))


def _round_trips(data, tmp_path, kinds=("binpack", "bin", "plain")):
    """Each format of ``kinds`` reads ``data`` back as it was written."""
    for kind in kinds:
        td.write(data, tmp_path / f"r.{kind}")
        assert td.read(tmp_path / f"r.{kind}").equals(data), kind
    return True


@pytest.mark.parametrize("fen, status", [
    ("P3k3/8/8/8/8/8/8/4K3 w - - 0 1", "STATUS_PAWNS_ON_BACKRANK"),
    ("4k3/8/8/8/8/8/8/p3K3 b - - 0 1", "STATUS_PAWNS_ON_BACKRANK"),
    ("4k3/4Q3/8/8/8/8/8/4K3 w - - 0 1", "STATUS_OPPOSITE_CHECK"),
    ("4k3/8/8/8/8/8/3p4/4K3 b - - 0 1", "STATUS_OPPOSITE_CHECK"),
    ("4k3/8/8/8/8/5n2/8/4K3 b - - 0 1", "STATUS_OPPOSITE_CHECK"),
])
def test_positions_the_plain_reader_refuses_are_refused(fen, status, tmp_path, capsys):
    """A pawn on rank 1 or 8, or the side not to move in check (python-chess says the same: the
    status), was accepted and written; the .plain written ('data convert' exit 0) failed to read
    ('bad FEN').  Construction now refuses the row with its FEN."""
    import chess

    assert chess.Board(fen).status() & getattr(chess, status)
    problem = "pawn on the first or last rank" if "BACKRANK" in status else "the side not to move is in check"
    with pytest.raises(ValueError, match=rf"^TrainingData: column 'bitboards' row 0: {problem}: {re.escape(fen)}$"):
        _one_row(fen)


def _castling_cases():
    fens = ["r3k2r/8/8/8/8/8/8/R3K2R w - - 0 1", "4k3/8/8/8/8/8/8/4K3 w - - 0 1", "r3k3/8/8/8/8/8/8/4K2R w - - 0 1",
            "r2k3r/8/8/8/8/8/8/R4K1R w - - 0 1", "1r2k1r1/8/8/8/8/8/8/R3K2R b - - 0 1",
            "r3k2r/8/8/8/8/8/8/r3K2R w - - 0 1"]
    return [(fen, rights) for fen in fens for rights in range(16)]


@pytest.mark.parametrize("fen, rights", _castling_cases())
def test_castling_rights_need_their_king_and_rook(fen, rights, tmp_path):
    """Rights 15 with no rooks were written to a .binpack, which marks rights on the rooks, and
    read back as none (silently).  A right is kept exactly when python-chess's
    clean_castling_rights (king and that rook on their start squares) keeps it, and kept rows
    round-trip through every format."""
    import chess

    board = chess.Board(fen)
    corners = (chess.BB_H1, chess.BB_A1, chess.BB_H8, chess.BB_A8)  # the bits 1, 2, 4, 8
    board.castling_rights = sum(c for bit, c in enumerate(corners) if rights >> bit & 1)
    if board.clean_castling_rights() == board.castling_rights:
        assert _round_trips(_one_row(fen, castling=rights), tmp_path)
    else:
        with pytest.raises(ValueError, match=rf"^TrainingData: column 'castling' row 0: castling right without the "
                                             rf"king and that rook on their start squares: {rights} \("):
            _one_row(fen, castling=rights)


@pytest.mark.parametrize("fen, square", [
    ("4k3/8/8/3pP3/8/8/8/4K3 w - - 0 2", "d6"),      # capture possible: kept
    ("4k3/8/8/8/8/8/8/4K3 w - - 0 1", "e6"),         # no pawn at all
    ("4k3/8/8/3p4/8/8/8/4K3 w - - 0 2", "d6"),       # the pawn, no capturer
    ("4k3/8/8/4pP2/8/8/8/4K3 w - - 0 2", "d6"),      # a capturer, no pawn in front of d6
    ("4k3/3n4/8/3pP3/8/8/8/4K3 w - - 0 2", "d6"),    # its start square occupied
    ("8/8/8/K2pP2r/8/8/8/7k w - - 0 2", "d6"),       # the capture would expose the king
    ("4k3/8/8/8/3Pp3/8/8/4K3 b - - 0 1", "d3"),      # Black captures: kept
    ("4k3/8/8/8/3P4/8/8/4K3 b - - 0 1", "d3"),       # no capturer
])
def test_en_passant_squares_no_capture_uses_are_refused(fen, square, tmp_path):
    """An en passant square with no pawn that could have just moved past it was written and
    dropped by every reader (each keeps it only when a capture is possible, the tools' rule).
    A square is kept exactly when python-chess has a legal en passant capture on it and the
    pawn's start square is empty (the tools' Position::isEpPossible asks that too)."""
    import chess

    board = chess.Board(fen)
    board.ep_square = chess.parse_square(square)
    start = board.ep_square + (8 if board.turn == chess.WHITE else -8)
    if board.has_legal_en_passant() and board.piece_at(start) is None:
        assert _round_trips(_one_row(fen, ep=board.ep_square), tmp_path)
    else:
        with pytest.raises(ValueError, match=r"^TrainingData: column 'ep' row 0: en passant square (without the pawn"
                                             r"|no pawn of the side to move can legally capture)"):
            _one_row(fen, ep=board.ep_square)


@pytest.mark.parametrize("fullmove", [0, 1, 2, 32767, 32768, 32769, 65535])
@pytest.mark.parametrize("stm", ["w", "b"])
def test_full_move_numbers_the_formats_keep(fullmove, stm, tmp_path):
    """Full-move 0 was written '... 0 0' and read back '... 0 32768' (.plain and .bin keep the
    game ply 2 * (fullmove - 1) + stm in 16 bits): 1 .. 32768 round-trip through both, the rest
    are refused.  (A .binpack keeps no full-move number: its reader gives ply // 2 + 1.)"""
    fen = f"4k3/8/8/8/8/8/8/4K3 {stm} - - 0 1"
    if 1 <= fullmove <= 32768:
        assert _round_trips(_one_row(fen, fullmove=fullmove), tmp_path, ("bin", "plain"))
    else:
        with pytest.raises(ValueError, match=rf"^TrainingData: column 'fullmove' row 0: full-move number outside "
                                             rf"1 \.\. 32768 .*: {fullmove}$"):
            _one_row(fen, fullmove=fullmove)


@pytest.mark.parametrize("move, problem", [
    (0xFFFF, "from-square equal to the to-square"),
    ((4 << 8) | (4 << 2), "from-square equal to the to-square"),
    ((4 << 8) | (12 << 2) | 3, "promotion-piece bits set in a move that is not a promotion"),
])
def test_moves_no_format_holds_are_refused(move, problem):
    """Move 0xFFFF was written as h8h8 and read back as a1a1 (the null move 0); promotion bits on
    a move of another type are lost the same way."""
    with pytest.raises(ValueError, match=rf"^TrainingData: column 'move' row 0: {problem}"):
        _one_row("4k3/8/8/8/8/8/8/4K3 w - - 0 1", move=move)
    assert _one_row("4k3/8/8/8/8/8/8/4K3 w - - 0 1", move=0).move[0] == 0


@pytest.mark.parametrize("fen, castling, column, problem", [
    ("P3k3/8/8/8/8/8/8/4K3 w - - 0 1", 0, "bitboards", "pawn on the first or last rank"),
    ("4k3/4Q3/8/8/8/8/8/4K3 w - - 0 1", 0, "bitboards", "the side not to move is in check"),
    ("4k3/8/8/8/8/8/8/4K3 w KQkq - 0 1", 15, "castling",
     "castling right without the king and that rook on their start squares"),
])
def test_writers_refuse_rows_a_reader_gave_unchecked(fen, castling, column, problem, tmp_path, capsys):
    """A .bin record (the tools' packer writes these) with a pawn on rank 8 converted to .plain
    with status 0, and the .plain did not read ('bad FEN'); rights without rooks went to a
    .binpack without them.  Readers do not check rows (speed), so the writers do."""
    import chess

    good = _one_row("4k3/8/8/8/8/8/8/4K3 w - - 0 1")
    board = chess.Board(fen)
    bb = [int(board.pawns), int(board.knights), int(board.bishops), int(board.rooks), int(board.queens),
          int(board.kings), int(board.occupied_co[chess.WHITE]), int(board.occupied_co[chess.BLACK])]
    bad = td.TrainingData._trusted({**{name: getattr(good, name) for name in td.TrainingData.DTYPES},
                                    "bitboards": np.array([bb], np.uint64).view(np.int64),
                                    "castling": np.array([castling], np.uint8)})
    src = tmp_path / "x.bin"
    src.write_bytes(td.encode_bin(bad))
    assert td.read(src).equals(bad)
    value = fen if column == "bitboards" else f"{castling} ({fen})"
    for dst in ("x.plain", "x.binpack", "y.bin"):
        assert main(["data", "convert", str(src), str(tmp_path / dst)]) == 1
        message = f"record 0 (byte 0): column {column!r}: {problem}: {value}"
        assert capsys.readouterr().err.strip() == f"error: {src}: {message}"  # the row's place in the input
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.bin"]

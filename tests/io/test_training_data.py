"""Stockfish training data (.binpack, .bin, .plain) read and written byte for byte as the tools do.

The oracle is ``shared/data/binpack/``: files written by Stockfish's ``tools`` branch (its
``convert`` and ``generate_training_data``; see that folder's README).  Reading each file must give
the tools' ``.plain`` text byte for byte, and writing the rows back must give the tools' files
byte for byte.  Beyond those, round trips over python-chess games made by hypothesis (castling,
promotions, en passant, scores at the int16 limits, broken chains) and damaged inputs, whose
errors must name the byte offset.
"""

from __future__ import annotations

import gzip
import io
import itertools
import os
import stat
import subprocess
import sys
import threading

import chess
import numpy as np
import pytest
import zstandard
from tests.conftest import shared_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnue_infer.errors import TrainingDataError
from nnue_infer.io import training_data as td
from nnue_infer.io.training_data import reading
from nnue_infer.kernels.chess import make_move as KMM
from nnue_infer.kernels.data import binpack as KBP
import json
import re
from nnue_infer.cli import main
from conftest import shared_dir

NAMES = ("dev-games", "selfplay")


@pytest.fixture(scope="module")
def bp_dir():
    return shared_dir() / "data" / "binpack"


@pytest.fixture(scope="module")
def files(bp_dir):
    """name -> {kind: bytes} for the shared files."""
    return {n: {k: (bp_dir / f"{n}.{k}").read_bytes() for k in ("binpack", "bin", "plain")} for n in NAMES}


@pytest.fixture(scope="module")
def rows(bp_dir):
    """name -> rows read from the tools' .binpack."""
    return {n: td.read(bp_dir / f"{n}.binpack") for n in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_binpack_reads_as_the_tools_plain(name, rows, files):
    data = rows[name]
    assert len(data) == files[name]["plain"].count(b"\ne\n")
    assert td.encode_plain(data) == files[name]["plain"]


@pytest.mark.parametrize("name", NAMES)
def test_plain_writes_the_tools_binpack(name, bp_dir, files, tmp_path):
    data = td.read(bp_dir / f"{name}.plain")
    assert data.equals(rows_of(files[name]["binpack"]))
    td.write(data, tmp_path / "out.binpack")
    assert (tmp_path / "out.binpack").read_bytes() == files[name]["binpack"]


def rows_of(binpack: bytes) -> td.TrainingData:
    return td.TrainingData.concat([rows for rows, _ in reading._iter_binpack(io.BytesIO(binpack), "<bytes>", False, None)])


@pytest.mark.parametrize("name", NAMES)
def test_bin_both_ways(name, bp_dir, rows, files, tmp_path):
    assert td.encode_bin(rows[name]) == files[name]["bin"]
    from_bin = td.read(bp_dir / f"{name}.bin")
    assert from_bin.equals(rows[name])  # chains too: .bin rows are chained by the continuation rule
    td.write(from_bin, tmp_path / "x.binpack")
    assert (tmp_path / "x.binpack").read_bytes() == files[name]["binpack"]


def test_columns_agree_with_python_chess(rows, files):
    """FENs, moves and bitboards against python-chess on the dev games (every 7th row)."""
    data = rows["dev-games"][::7]
    fens, ucis = data.fens(), data.uci()
    for i in range(len(data)):
        board = chess.Board(fens[i])
        assert board.is_legal(chess.Move.from_uci(ucis[i])), (fens[i], ucis[i])
        expect = [int(np.int64(np.uint64(bb))) for bb in (board.pawns, board.knights, board.bishops, board.rooks,
                                                            board.queens, board.kings, board.occupied_co[chess.WHITE],
                                                            board.occupied_co[chess.BLACK])]
        assert data.bitboards[i].tolist() == expect
        assert data.stm[i] == (0 if board.turn else 1)
    text = files["dev-games"]["plain"].decode().split("\ne\n")
    assert text[7].startswith(f"fen {fens[1]}\nmove {ucis[1]}\n")


def test_chains_and_blocks(rows, files):
    data = rows["selfplay"]
    assert np.array_equal(np.flatnonzero(np.diff(data.chain)) + 1, np.flatnonzero(~data.continuations())[1:])
    assert data.chain[0] == 0 and data.chain[-1] == len(np.unique(data.chain)) - 1


def test_multi_block_file_round_trip(rows, tmp_path):
    """Over 1 MiB of chains: blocks close at the first chain boundary at or past 1 MiB, every block
    decodes on its own (in parallel), and reading gives the rows back; also in small chunks."""
    base = rows["selfplay"]
    data = td.TrainingData.concat([base] * 16)  # copies do not continue one another (ply restarts)
    path = tmp_path / "big.binpack"
    with td.TrainingDataWriter(path) as w:
        for k in range(0, len(data), 70_001):  # chains cut across write() calls
            w.write(data[k:k + 70_001])
    raw = path.read_bytes()
    sizes, o = [], 0
    while o < len(raw):
        assert raw[o:o + 4] == b"BINP"
        sizes.append(int.from_bytes(raw[o + 4:o + 8], "little"))
        o += 8 + sizes[-1]
    assert len(sizes) >= 2 and all(s >= KBP.BLOCK_TARGET for s in sizes[:-1])
    back = td.read(path)
    assert back.equals(data.with_chains())
    chunked = td.TrainingData.concat(list(td.iter_chunks(path, chunk_bytes=1)))
    assert chunked.equals(back)
    td.write(back, tmp_path / "again.binpack")
    assert (tmp_path / "again.binpack").read_bytes() == raw


def test_compressed_and_stdin(bp_dir, files, tmp_path):
    gz = tmp_path / "d.binpack.gz"
    gz.write_bytes(gzip.compress(files["selfplay"]["binpack"]))
    zs = tmp_path / "d.plain.zst"
    zs.write_bytes(zstandard.ZstdCompressor().compress(files["selfplay"]["plain"]))
    a, b = td.read(gz), td.read(zs)
    assert a.equals(b)
    out = tmp_path / "o.plain.gz"
    td.write(a, out)
    assert gzip.decompress(out.read_bytes()) == files["selfplay"]["plain"]
    code = ("import sys; from nnue_infer.io import training_data as td; "
            "td.write(td.read('-', 'binpack'), '-', 'plain')")
    proc = subprocess.run([sys.executable, "-c", code], input=files["selfplay"]["binpack"], capture_output=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == files["selfplay"]["plain"]


def test_parquet_round_trip(rows, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = rows["selfplay"]
    path = tmp_path / "d.parquet"
    td.write(data, path)
    table = pq.read_table(path)
    assert table.column_names == ["fen", "move", "score", "ply", "result", "chain"]
    assert table.column("fen")[5].as_py() == data[5:6].fens()[0]
    back = td.read(path)
    assert back.equals(data)
    td.write(back, tmp_path / "d.binpack")
    assert (tmp_path / "d.binpack").read_bytes() == (shared_dir() / "data" / "binpack" / "selfplay.binpack").read_bytes()
    fens = table.column("fen").to_pylist()
    bad = table.set_column(0, "fen", pa.array(fens[:3] + ["8/8/8 w - - 0 1"] + fens[4:]))
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(TrainingDataError, match=r"bad\.parquet: row 3: bad FEN"):
        td.read(tmp_path / "bad.parquet")


START = chess.STARTING_FEN


@pytest.mark.parametrize("column, values, message", [
    ("fen", [START, START + "\ne" * 100_000], r"row 1: fen holds a line break"),  # wrote past the record arrays
    ("move", ["e2e4\nscore 7", "e2e4"], r"row 0: move holds a line break"),
    ("score", [0, 40_000], r"row 1: score 40000 outside -32768 \.\. 32767"),  # was -25536
    ("ply", [-1, 0], r"row 0: ply -1 outside 0 \.\. 65535"),  # was 65535
    ("result", [0, 1 << 20], r"row 1: result 1048576 outside"),
    ("score", ["12", "0"], r"column 'score' holds string, not integers"),
    ("score", [1.7, 0.0], r"column 'score' holds double, not integers"),  # was 1
    ("chain", [0, None], r"column 'chain' has 1 null value"),  # was -2**63
])
def test_parquet_bad_cells_are_named(column, values, message, tmp_path):
    """Parquet is this project's own format: a cell the tools' records cannot hold is refused
    with its row, never wrapped, truncated or allowed to shift the rows after it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {"fen": [START, START], "move": ["e2e4", "d2d4"], "score": [0, 0], "ply": [0, 0], "result": [0, 0],
            "chain": [0, 1]}
    cols[column] = values
    pq.write_table(pa.table({k: pa.array(v, pa.int64() if k == "chain" else None) for k, v in cols.items()}),
                   tmp_path / "x.parquet")
    with pytest.raises(TrainingDataError, match=r"x\.parquet: " + message):
        td.read(tmp_path / "x.parquet")


def test_not_a_parquet_file_is_named(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"fen 8/8/8/8/8/8/8/8 w - - 0 1\n")
    with pytest.raises(TrainingDataError, match=r"x\.parquet: not a Parquet file"):
        td.read(tmp_path / "x.parquet")


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-5], r"byte 75273: truncated block: 75265 of its 75270 bytes"),
    (lambda b: b"BINQ" + b[4:], r"byte 0: block magic b'BINQ', expected b'BINP'"),
    (lambda b: b[:4] + (200 << 20).to_bytes(4, "little") + b[8:], r"byte 4: block size 209715200 over the limit"),
    (lambda b: b[:8] + b"\xff" * 8 + b[16:], r"byte 8: more than 32 occupied squares"),
    (lambda b: b[:4] + (len(b) - 8 + 10).to_bytes(4, "little") + b[8:] + bytes(10), r"byte 75278: truncated: the data"),
    (lambda b: b + b"BIN", r"byte 75278: truncated block header"),
])
def test_damaged_binpack_names_the_offset(damage, message, files, tmp_path):
    path = tmp_path / "bad.binpack"
    path.write_bytes(damage(files["selfplay"]["binpack"]))
    with pytest.raises(TrainingDataError, match=rf"bad\.binpack: {message}"):
        td.read(path)


def test_damaged_movetext_is_refused_or_read_in_bounds(files, tmp_path):
    """Every single-byte corruption of the first chain's movetext either raises with an offset
    inside the block or decodes rows in bounds (the bits still name moves): never a crash."""
    raw = bytearray(files["selfplay"]["binpack"])
    refused = 0
    for at in range(8 + 34, 8 + 34 + 60):
        bad = bytearray(raw)
        bad[at] ^= 0xA5
        try:
            rows_of(bytes(bad))
        except TrainingDataError as exc:
            offset = int(str(exc).split("byte ")[1].split(":")[0])
            assert 8 <= offset < len(raw)
            refused += 1
    assert refused > 0


def test_damaged_bin_and_plain(files, tmp_path):
    path = tmp_path / "bad.bin"
    path.write_bytes(files["selfplay"]["bin"][:-1])
    with pytest.raises(TrainingDataError, match=r"byte 799960: truncated record: 39 of 40 bytes"):
        td.read(path)
    bin_ = bytearray(files["selfplay"]["bin"])
    bin_[40 * 3] &= 1  # bits 1-6 (White king) and 7-12 (Black king): both on a1
    bin_[40 * 3 + 1] &= 0xE0
    path.write_bytes(bytes(bin_))
    with pytest.raises(TrainingDataError, match=r"byte 120: record 3: a position without exactly one king"):
        td.read(path)
    text = files["selfplay"]["plain"].decode()
    records = text.split("\ne\n")
    plain = tmp_path / "bad.plain"
    broken = records[2].replace("fen ", "fen rnbqkbnr/ppp", 1)
    plain.write_text("\ne\n".join(records[:2] + [broken] + records[3:]))
    start = len("\ne\n".join(records[:2])) + 3
    with pytest.raises(TrainingDataError, match=r"bad\.plain: byte \d+: bad FEN") as err:
        td.read(plain)
    assert start + len("fen rnbqkbnr/ppp") <= int(str(err.value).split("byte ")[1].split(":")[0]) < start + 40
    plain.write_text(text.replace("move ", "move z", 1))
    with pytest.raises(TrainingDataError, match=r"byte \d+: bad UCI move \(at 'z"):
        td.read(plain)
    plain.write_text(text[:-2])
    with pytest.raises(TrainingDataError, match=r"unterminated record"):
        td.read(plain)


def test_unencodable_move_is_refused(rows, tmp_path):
    """Row 1 continues row 0's game, so its move goes into the movetext, which cannot hold a king
    move four ranks away: an error naming the row, not a silently different move.  (A move to its
    own square is refused before, as no format holds it.)"""
    data = rows["dev-games"][:3]
    assert data.continuations()[1]
    stm = int(data.stm[1])
    king = int(np.flatnonzero([(int(data.bitboards[1, 5]) & int(data.bitboards[1, 6 + stm])) >> s & 1
                               for s in range(64)])[0])
    data.move[1] = (king << 8) | ((king ^ 32) << 2)
    uci = "abcdefgh"[king & 7] + str(1 + (king >> 3)) + "abcdefgh"[king & 7] + str(1 + ((king ^ 32) >> 3))
    with pytest.raises(TrainingDataError, match=rf"x\.binpack: row 1: move cannot be encoded .*: {uci} in "):
        td.write(data, tmp_path / "x.binpack")


# -- round trips over random games -------------------------------------------------------------

INT16 = st.one_of(st.integers(-32768, 32767), st.sampled_from([-32768, -32767, -1, 0, 1, 32766, 32767]))


@st.composite
def games(draw):
    """Rows of 1-3 random games (moves biased to castling, promotion, en passant)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = []
    for _ in range(draw(st.integers(1, 3))):
        board = chess.Board()
        ply = draw(st.sampled_from([0, 1, 200, 16383, 65534]))
        result = draw(st.sampled_from([-1, 0, 1]))
        for k in range(draw(st.integers(1, 150))):
            moves = list(board.legal_moves)
            if not moves:
                break
            special = [m for m in moves if board.is_castling(m) or m.promotion or board.is_en_passant(m)]
            pawns = [m for m in moves if board.piece_type_at(m.from_square) == chess.PAWN]
            pool = special if special and rng.random() < 0.8 else (pawns if pawns and rng.random() < 0.5 else moves)
            move = pool[rng.integers(len(pool))]
            rows.append((board.fen(), move.uci(), draw(INT16), (ply + k) % 65536, result if k % 2 == 0 else -result))
            board.push(move)
    return rows


def plain_text(rows) -> bytes:
    return "".join(f"fen {f}\nmove {m}\nscore {s}\nply {p}\nresult {r}\ne\n" for f, m, s, p, r in rows).encode()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(games())
def test_round_trips_random_games(tmp_path, game_rows):
    text = plain_text(game_rows)
    src = tmp_path / "g.plain"
    src.write_bytes(text)
    data = td.read(src)
    assert len(data) == len(game_rows)
    assert data.uci() == [r[1] for r in game_rows]
    assert td.encode_plain(data) == text
    assert data.score.tolist() == [r[2] for r in game_rows]
    heads = np.flatnonzero(~data.continuations())
    for kind in ("binpack", "bin"):
        path = tmp_path / f"g.{kind}"
        path.unlink(missing_ok=True)  # hypothesis shares tmp_path between examples
        if kind == "binpack" and np.any(data.ply[heads] > 0x3FFF):  # a chain's first ply keeps 14 bits
            with pytest.raises(TrainingDataError, match=r"ply \d+ does not fit a chain's first entry"):
                td.write(data, path)
            assert not path.exists()
            continue
        td.write(data, path)
        back = td.read(path)
        if kind == "bin":
            assert back.equals(data)
        else:  # the binpack rebuilds later rows' counters
            assert back.uci() == data.uci() and np.array_equal(back.score, data.score)
            assert np.array_equal(back.ply[heads], data.ply[heads])
            assert np.array_equal(back.result, data.result)
            assert back.fens()[-1].split()[:4] == data.fens()[-1].split()[:4]
            td.write(back, tmp_path / "again.binpack")
            assert (tmp_path / "again.binpack").read_bytes() == path.read_bytes()


# -- rescoring, filters, summary, failed writes ---------------------------------------------------

def test_rescore_equals_evaluate_batch(rows, evaluator):
    data = rows["selfplay"][:3000]
    ref = evaluator.evaluate_batch(data.fens())
    out = td.rescore(data, evaluator)
    assert np.array_equal(out.score.astype(np.int32), ref)
    assert out.equals(td.TrainingData(**{**data.__dict__, "score": out.score}))
    half = td.rescore(data, evaluator, blend=0.25)
    expect = np.clip(np.rint(0.25 * ref + 0.75 * data.score.astype(np.float64)), -32768, 32767)
    assert np.array_equal(half.score, expect.astype(np.int16))
    broken = data[:2]
    broken.bitboards[1, 6:] &= ~broken.bitboards[1, 5]  # no kings
    broken.bitboards[1, 5] = 0
    with pytest.raises(TrainingDataError, match=r"<data>: row 1: .*king"):
        td.rescore(broken, evaluator)


def test_flags_and_filters_agree_with_python_chess(rows):
    data = rows["selfplay"][:4000]
    in_check, capture = td.flags(data)
    for fen, uci, c, x in zip(data.fens(), data.uci(), in_check, capture):
        board = chess.Board(fen)
        move = chess.Move.from_uci(uci)
        assert c == board.is_check()
        assert x == (board.is_capture(move) and not board.is_en_passant(move))
    keep = td.select(data, skip_in_check=True, skip_captures=True, min_ply=30, max_abs_score=1000)
    expect = ~in_check & ~capture & (data.ply >= 30) & (np.abs(data.score.astype(np.int32)) <= 1000)
    assert np.array_equal(keep, expect) and 0 < keep.sum() < len(data)


def test_summary_counts(rows):
    data = rows["selfplay"]
    whole = td.Summary()
    whole.add(data)
    parts = td.Summary()
    for k in range(0, len(data), 3001):
        parts.add(data[k:k + 3001])
    d = whole.as_dict()
    assert d == parts.as_dict()
    assert d["positions"] == 20000 and d["chains"] == len(np.unique(data.chain))
    assert sum(d["results"].values()) == 20000 and sum(d["score"]["histogram"].values()) == 20000
    assert d["results"]["win"] == int(np.sum(data.result == 1))


def test_failed_write_leaves_the_destination_alone(rows, tmp_path):
    dest = tmp_path / "out.binpack"
    dest.write_bytes(b"old")
    data = rows["dev-games"][:3]
    data.move[1] = 0  # a null move inside a chain cannot be encoded
    with pytest.raises(TrainingDataError):
        td.write(data, dest)
    assert dest.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.binpack"]


@pytest.mark.parametrize("kind", ["binpack", "plain", "parquet"])
def test_a_fifo_destination_is_written_not_replaced(kind, rows, tmp_path):
    """A named pipe (or a device such as /dev/stdout) is written in place: a temporary file
    renamed over it would replace the pipe (as root, even a device node) by a regular file."""
    data = rows["selfplay"][:50]
    td.write(data, tmp_path / f"plain-file.{kind}")
    fifo = tmp_path / f"pipe.{kind}"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    td.write(data, fifo)
    reader.join(60)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"pipe.{kind}", f"plain-file.{kind}"]
    assert got == [(tmp_path / f"plain-file.{kind}").read_bytes()]


def test_file_output_does_not_touch_stdout(rows, tmp_path, monkeypatch):
    """Writing a file never looks at sys.stdout (replaced here by an object without .buffer, as
    doctest and some notebooks do)."""
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    td.write(rows["selfplay"][:50], tmp_path / "x.plain")
    assert (tmp_path / "x.plain").read_bytes() == td.encode_plain(rows["selfplay"][:50])


def test_plain_edge_layouts(files, tmp_path):
    """A last 'e' without its newline, CRLF line ends, blank lines and unknown keys read as the tools
    read them; a record split across read chunks too."""
    text = files["selfplay"]["plain"]
    ref = rows_of(files["selfplay"]["binpack"])
    path = tmp_path / "x.plain"
    path.write_bytes(text[:-1])
    assert td.read(path).equals(ref)
    path.write_bytes(text.replace(b"\n", b"\r\n").replace(b"\r\ne\r\n", b"\r\nweight 1\r\n\r\ne\r\n"))
    assert td.read(path).equals(ref)
    assert td.TrainingData.concat(list(td.iter_chunks(path, chunk_bytes=1000))).equals(ref)


def test_block_ranges_cover_the_file(rows, tmp_path):
    path = tmp_path / "big.binpack"
    td.write(td.TrainingData.concat([rows["selfplay"]] * 30), path)
    ranges = td.block_ranges(path, target_bytes=1)
    assert len(ranges) >= 2 and ranges[0][0] == 0 and ranges[-1][1] == path.stat().st_size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    parts = [td.TrainingData.concat(list(td.read_range(path, a, b))) for a, b in ranges]
    whole = td.read(path)
    assert td.TrainingData.concat(parts).equals(whole, chains=False)
    assert td.block_ranges(path) == [(0, path.stat().st_size)]


@pytest.mark.parametrize(("move", "castles"), [("e1h1", "e1g1"), ("e1g1", "e1g1"), ("e1a1", "e1c1"),
                                               ("e1c1", "e1c1")])
def test_plain_castling_in_both_forms(move, castles, tmp_path):
    """King to its castling square (the tools' form) and king onto its own rook both castle on
    that rook's side; the move type agrees with python-chess."""
    fen = "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1"
    path = tmp_path / "c.plain"
    path.write_text(f"fen {fen}\nmove {move}\nscore 0\nply 0\nresult 0\ne\n")
    data = td.read(path)
    assert data.uci() == [castles]
    assert int(data.move[0]) >> 14 == KMM.CASTLE
    assert chess.Board(fen).is_castling(chess.Move.from_uci(castles))


@pytest.mark.parametrize(("line", "problem"), [("score 40000", "score outside -32768 .. 32767"),
                                               ("score -32769", "score outside -32768 .. 32767"),
                                               ("ply 70000", "ply outside 0 .. 65535"),
                                               ("ply -1", "ply outside 0 .. 65535"),
                                               ("result 5", r"result outside -1 \.\. 1"),
                                               ("score 12x", "bad integer")])
def test_plain_numbers_out_of_range_are_refused(line, problem, tmp_path):
    """They wrapped silently (score 40000 read as -25536, ply -1 as 65535, 'score 12x' as 12); now
    the error names the byte of the line and the field.  The limits themselves still read."""
    head = "fen 8/8/8/8/8/8/8/K6k w - - 0 1\nmove a1a2\n"
    fields = {"score": "score 0", "ply": "ply 0", "result": "result 0"}
    key = line.split()[0]
    path = tmp_path / "x.plain"
    text = head + "\n".join({**fields, key: line}.values()) + "\ne\n"
    path.write_text(text)
    offset = text.index(line)
    with pytest.raises(TrainingDataError, match=rf"x\.plain: byte {offset}: {problem} \(at '{line}'\)"):
        td.read(path)
    path.write_text(head + "score -32768\nply 65535\nresult -1\ne\n")
    data = td.read(path)
    assert (int(data.score[0]), int(data.ply[0]), int(data.result[0])) == (-32768, 65535, -1)


# -- hostile input ---------------------------------------------------------------------------------------------------

TWO_ROWS = ("fen rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\nmove e2e4\nscore 35\nply 0\nresult 1\ne\n"
            "fen rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1\nmove c7c5\nscore -40\nply 1\nresult -1\ne\n")


@pytest.mark.parametrize("kind", ["plain", "binpack", "bin", "parquet"])
def test_a_replaced_training_data_file_keeps_its_permissions(kind, tmp_path):
    """Writing training data over an existing private file (mode 0600) left it 0644, readable by every
    user (the writer's temporary file got the umask's bits and was renamed over it), where every other
    output of the project keeps the replaced file's bits (``inputs.replacing``, as ``cp`` does)."""
    from nnue_infer.io import training_data as td

    if kind == "parquet":
        pytest.importorskip("pyarrow", reason="Parquet needs the parquet extra (pyarrow)")
    source = tmp_path / "two.plain"
    source.write_text(TWO_ROWS)
    dest = tmp_path / f"private.{kind}"
    dest.write_bytes(b"old contents")
    dest.chmod(0o600)
    td.write(td.read(source), dest)
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert td.read(dest).equals(td.read(source))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["two.plain", dest.name])


def test_two_writers_of_one_training_data_file_in_one_process(tmp_path):
    """Two ``TrainingDataWriter``s of one destination in one process (two threads converting into one
    name) shared one temporary file, ``DEST.part-PID``: the second's close failed with a
    FileNotFoundError naming that file, after its bytes had gone into the file the first renamed into
    place.  Each now writes a file of its own; the last one closed is the destination, whole."""
    from nnue_infer.io import training_data as td

    source = tmp_path / "two.plain"
    source.write_text(TWO_ROWS)
    rows = td.read(source)
    dest = tmp_path / "out.plain"
    first, second = td.TrainingDataWriter(dest), td.TrainingDataWriter(dest)
    first.write(rows[:1])
    second.write(rows)
    first.close()
    assert dest.read_text() == TWO_ROWS[:TWO_ROWS.index("fen", 1)]
    second.close()
    assert dest.read_text() == TWO_ROWS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.plain", "two.plain"]


@pytest.fixture(scope="module")
def bp():
    return shared_dir() / "data" / "binpack"


TWO_CHAINS = ("fen 4k3/8/8/8/8/8/8/4K3 w - - 0 1\nmove e1e2\nscore 0\nply 0\nresult 1\ne\n"
              "fen 4k3/8/8/8/8/8/8/3K4 b - - 0 1\nmove e8e7\nscore 5\nply 1\nresult 0\ne\n"
              "fen 8/4k3/8/8/8/8/8/3K4 w - - 1 2\nmove d1d2\nscore 7\nply 2\nresult 0\ne\n")


@pytest.fixture(scope="module")
def selfplay_rows(bp):
    return td.read(bp / "selfplay.binpack")[:5000]


def _with(data, **columns):
    return td.TrainingData(**{**{name: getattr(data, name) for name in td.TrainingData.DTYPES}, **columns})


def _changed(column, i, value):
    column = column.copy()
    column[i] = value
    return column


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


def _castling_cases():
    fens = ["r3k2r/8/8/8/8/8/8/R3K2R w - - 0 1", "4k3/8/8/8/8/8/8/4K3 w - - 0 1", "r3k3/8/8/8/8/8/8/4K2R w - - 0 1",
            "r2k3r/8/8/8/8/8/8/R4K1R w - - 0 1", "1r2k1r1/8/8/8/8/8/8/R3K2R b - - 0 1",
            "r3k2r/8/8/8/8/8/8/r3K2R w - - 0 1"]
    return [(fen, rights) for fen in fens for rights in range(16)]


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
def test_training_data_checks_its_columns(change, message, selfplay_rows, tmp_path):
    """TrainingData took any columns: stm of 1 entry beside 5000 rows aborted the process on
    writing a .binpack ('corrupted double-linked list') and read out of bounds for .plain; ep 100
    gave the FEN field 'e='.  Construction now names the column and the first bad row."""
    with pytest.raises(ValueError, match=rf"^TrainingData: {message}"):
        _with(selfplay_rows, **change(selfplay_rows))


def test_checked_columns_are_kept_and_made_contiguous(selfplay_rows, tmp_path):
    back = _with(selfplay_rows)
    assert back.equals(selfplay_rows)
    strided = td.TrainingData.concat([selfplay_rows, selfplay_rows])
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
    monkeypatch.setattr(reading, "READ_BYTES", 1000 * 40)
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


FEN = "4k3/8/8/8/8/8/8/4K3 w - - 0 {}"


def _one_record(fullmove) -> bytes:
    return f"fen {FEN.format(fullmove)}\nmove e1e2\nscore 0\nply 0\nresult 0\ne\n".encode()


@pytest.mark.parametrize("fullmove", ["0", "40000", "32769", "65536", "-1"])
def test_a_plain_full_move_number_the_formats_cannot_keep_is_refused(fullmove, tmp_path):
    """40,000 was read as 7,232 and 0 as 32,768 (the game ply wrapped in 16 bits, as the tools' parser does),
    though every writer refuses such a number: the reader refuses it, naming the byte of the field."""
    path = tmp_path / "x.plain"
    path.write_bytes(_one_record(fullmove))
    at = len("fen 4k3/8/8/8/8/8/8/4K3 w - - 0 ")
    with pytest.raises(TrainingDataError, match=rf"^{path}: byte {at}: full-move number outside 1 \.\. 32768 .*"
                                                rf"\(at '{fullmove}'\)$"):
        td.read(path)


@pytest.mark.parametrize("fullmove", [1, 2, 32767, 32768])
def test_a_plain_full_move_number_the_formats_keep_is_read(fullmove, tmp_path):
    path = tmp_path / "x.plain"
    path.write_bytes(_one_record(fullmove))
    data = td.read(path)
    assert data.fullmove.tolist() == [fullmove] and data.fens() == [FEN.format(fullmove)]


def test_gzip_damage_after_the_rows_is_a_training_data_error(bp, tmp_path):
    """Junk after a gzip member raised InputError (an OSError, not the documented ValueError) saying "the rows
    before it were read" while read() returned nothing."""
    path = tmp_path / "y.plain.gz"
    text = (bp / "dev-games.plain").read_bytes()[:2000].rsplit(b"\ne\n", 1)[0] + b"\ne\n"
    path.write_bytes(gzip.compress(text) + b"junk")
    with pytest.raises(TrainingDataError, match=rf"^{path}: corrupt or truncated gzip data found by compressed byte "
                                                r"\d+ \(Not a gzipped file \(b'ju'\)\)$"):
        td.read(path)
    chunks = td.iter_chunks(path)
    assert len(next(chunks)) == text.count(b"\ne\n")  # the rows before the damage, then the error
    with pytest.raises(TrainingDataError, match="corrupt or truncated gzip data"):
        next(chunks)


def test_gzip_cut_inside_a_record_names_the_damage_not_the_record(bp, tmp_path):
    """Compressed data cut short ends the text inside a record: the error is the truncated gzip stream (what is
    wrong with the file), not 'unterminated record'."""
    whole = gzip.compress((bp / "dev-games.plain").read_bytes()[:5000])
    path = tmp_path / "cut.plain.gz"
    path.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(TrainingDataError, match=rf"^{path}: corrupt or truncated gzip data found by compressed byte "
                                                r"\d+ \(Compressed file ended before the end-of-stream marker"):
        td.read(path)


@pytest.mark.parametrize("name", ["o.plain.gz", "o.binpack.gz", "o.bin.GZ"])
def test_a_gzip_output_names_the_destination_in_its_header(bp, tmp_path, name):
    """The header held the temporary file's name (.o.plain.gz.tmp-PID-0), which gunzip -N restores."""
    out = tmp_path / name
    data = td.read(bp / "dev-games.binpack")
    td.write(data, out)
    raw = out.read_bytes()
    assert raw[3] & gzip.FNAME
    stored = raw[10: raw.index(b"\0", 10)]
    assert stored == name[:-3].encode()
    assert td.read(out).equals(data)
    assert os.listdir(tmp_path) == [name]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("kind", ["binpack", "bin", "plain"])
def test_a_full_output_names_the_output(bp, kind):
    """Writing a .binpack to /dev/full raised an OSError without a file name (the failed flush came again when the
    writer dropped its file), so the command line blamed the input."""
    data = td.read(bp / "dev-games.binpack")
    with pytest.raises(OSError, match="No space left on device") as caught:
        with td.TrainingDataWriter("/dev/full", kind) as writer:
            writer.write(data)
    assert caught.value.filename == "/dev/full"

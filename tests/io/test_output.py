"""``nnue_infer.io.output``: compiled CSV / JSON-lines writing against Python's ``csv`` and ``json`` modules."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nnue_infer.io.output import TableWriter, TextColumn, encode, header, take
import os
import stat

STRINGS = ["plain", "comma,inside", 'q"uo"te', "new\nline", "cr\rhere", "", "ünïcödé ♞", "ctl\x01\x1f\t\b\f", "back\\slash"]


def table():
    n = len(STRINGS)
    ints = np.array([0, -1, 9, 10, -10, 2**63 - 1, -2**63, 12345, -99], np.int64)
    masked = np.ma.masked_array(np.arange(n, dtype=np.int32) - 4, mask=[i % 3 == 1 for i in range(n)])
    flags = np.array([i % 2 == 0 for i in range(n)])
    nullable = TextColumn.from_strings([None if i % 4 == 0 else s for i, s in enumerate(STRINGS)])
    return {"s": TextColumn.from_strings(STRINGS), "i": ints, "m": masked, "b": flags, "n": nullable}, ints, masked, flags


def test_csv_matches_the_csv_module():
    t, ints, masked, flags = table()
    got = list(csv.reader(io.StringIO(encode(t, "csv").decode(), newline="")))
    expected = [[s, str(v), "" if m is np.ma.masked else str(m), "true" if f else "false", "" if i % 4 == 0 else s]
                for i, (s, v, m, f) in enumerate(zip(STRINGS, ints.tolist(), masked, flags))]
    assert got == expected
    # byte-identical quoting (Python's writer with "\n" line ends leaves a lone CR unquoted; RFC 4180 quotes it)
    keep = np.array(["\r" not in s for s in STRINGS])
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator="\n").writerows([[r[0], r[1]] for r, k in zip(expected, keep) if k])
    assert encode(take({"s": t["s"], "i": ints}, keep), "csv").decode() == buf.getvalue()


def test_json_lines_are_typed_and_escaped():
    t, ints, masked, flags = table()
    lines = encode(t, "jsonl").decode().splitlines()
    assert len(lines) == len(STRINGS)
    for i, line in enumerate(lines):
        obj = json.loads(line)
        assert list(obj) == ["s", "i", "m", "b", "n"]
        assert obj["s"] == STRINGS[i] and obj["i"] == int(ints[i]) and type(obj["i"]) is int
        assert obj["m"] == (None if i % 3 == 1 else int(masked.data[i]))
        assert obj["b"] is bool(flags[i]) and obj["n"] == (None if i % 4 == 0 else STRINGS[i])


def test_header_writer_chunks_and_take():
    out = io.BytesIO()
    w = TableWriter(out, "csv")
    t = {"fen": TextColumn.from_strings(["a", "b", "c"]), "value, cp": np.array([1, 2, 3])}
    w.write(take(t, np.array([0, 2])))
    w.write(take(t, np.array([False, True, False])))
    assert out.getvalue() == b'fen,"value, cp"\na,1\nc,3\nb,2\n' and w.rows == 3
    with pytest.raises(ValueError, match="differ"):
        w.write({"fen": t["fen"]})
    assert header(["x"]) == b"x\n"
    empty = io.BytesIO()
    TableWriter(empty, "csv", columns=["a", "b"])
    assert empty.getvalue() == b"a,b\n"


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="column 'b' has 2 rows"):
        encode({"a": np.arange(3), "b": np.arange(2)}, "csv")
    with pytest.raises(TypeError, match="float64"):
        encode({"a": np.zeros(2)}, "csv")
    with pytest.raises(ValueError, match="unknown output format"):
        encode({"a": np.arange(2)}, "xml")


def test_codes_and_empty_table():
    col = TextColumn.from_codes(np.array([2, 0, 1]), ["none", "checkmate", "stalemate"])
    assert col.to_list() == ["stalemate", "none", "checkmate"]
    assert encode({"a": np.zeros(0, np.int64)}, "jsonl") == b""


_CELLS = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12), max_size=40)


@settings(max_examples=150, deadline=None)
@given(_CELLS, st.sampled_from([b"\n", b";", b"\xff"]), st.booleans(), st.booleans())
def test_parquet_text_array_equals_the_cells(cells, separator, trailing, gap):
    """``io.parquet.text_array`` gives the cells' strings: cells one byte apart (a FEN file's lines: Arrow slices a
    view of the buffer), with a wider gap or none after the last (copied cell by cell), and null cells."""
    pa = pytest.importorskip("pyarrow")
    from nnue_infer.io.parquet import text_array

    encoded = [c.encode() for c in cells]
    between = separator + (b" " if gap else b"")
    buf = b"#" + between.join(encoded) + (separator if trailing else b"")
    starts, pos = [], 1
    for e in encoded:
        starts.append(pos)
        pos += len(e) + len(between)
    starts_a = np.array(starts, np.int64)
    ends_a = starts_a + np.array([len(e) for e in encoded], np.int64)
    column = TextColumn(np.frombuffer(buf, np.uint8), starts_a, ends_a)
    got = text_array(column)
    assert got.type == pa.string() and got.to_pylist() == cells
    if cells:
        valid = np.arange(len(cells)) % 3 != 1
        got = text_array(TextColumn(column.buf, starts_a, ends_a, valid))
        assert got.to_pylist() == [c if v else None for c, v in zip(cells, valid)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["none", "checkmate", "stalemate", "", "é"]), min_size=0, max_size=200),
       st.booleans(), st.booleans())
@example(["checkmate"] * 100, False, True)
@example(["none", "stalemate"] * 50, True, False)
def test_parquet_text_array_of_labels(cells, nulls, clash):
    """A column of a few labels (``TextColumn.from_codes``, the ``outcome`` column) gives its cells, with null
    cells, and cells that share a start but not an end (``clash``: the cells are copied instead)."""
    pytest.importorskip("pyarrow")
    from nnue_infer.io.parquet import text_array

    labels = ["none", "checkmate", "stalemate", "", "é"]
    codes = np.array([labels.index(c) for c in cells], np.int64)
    column = TextColumn.from_codes(codes, labels)
    ends = column.ends.copy()
    if clash and len(cells) > 1 and cells[0] == cells[1] == "checkmate":
        ends[1] -= 1  # "checkmat"
        cells = [cells[0], "checkmat", *cells[2:]]
    valid = (np.arange(len(cells)) % 4 != 2) if nulls else None
    got = text_array(TextColumn(column.buf, column.starts, ends, valid))
    assert got.to_pylist() == [c if valid is None or v else None for c, v in zip(cells, valid if nulls else cells)]


# -- hostile input ---------------------------------------------------------------------------------------------------

def test_text_array_gives_the_cells_of_any_layout():
    """``io.parquet.text_array`` (its fast paths: cells one byte apart, a few labels) against the cells' own strings,
    over random layouts: cells one byte apart, overlapping, empty, sharing a start, at the buffer's end, non-ASCII,
    null, none at all."""
    import random

    import numpy as np

    from nnue_infer.io.output import TextColumn
    from nnue_infer.io.parquet import text_array

    rng = random.Random(32)
    for _ in range(1500):
        text = "".join(rng.choice("ab\n é€😀") for _ in range(rng.choice([0, 1, 5, 30, 64, 65, 200])))
        bounds = [0]
        for ch in text:
            bounds.append(bounds[-1] + len(ch.encode()))
        n, layout, cells = rng.choice([0, 1, 2, 65, 100, 300]), rng.choice(["lines", "any", "labels", "end"]), []
        k = 0
        for _ in range(n):
            if layout == "lines":  # each cell a run of characters, the next one character after it
                if k >= len(bounds) - 1:
                    break
                end = rng.randint(k, len(bounds) - 2)
                cells.append((bounds[k], bounds[end]))
                if bounds[end] + 1 != bounds[end + 1]:
                    break
                k = end + 1
            elif layout == "labels":
                cells.append(rng.choice([(0, 0), (0, bounds[min(1, len(bounds) - 1)]), (bounds[-1], bounds[-1])]))
            else:
                a = rng.randrange(len(bounds))
                cells.append((bounds[a], bounds[-1] if layout == "end" else bounds[rng.randrange(a, len(bounds))]))
        starts = np.array([c[0] for c in cells], np.int64)
        ends = np.array([c[1] for c in cells], np.int64)
        valid = np.array([rng.random() < 0.7 for _ in cells], bool) if cells and rng.random() < 0.3 else None
        column = TextColumn(np.frombuffer(bytearray(text.encode()), np.uint8), starts, ends, valid)
        array = text_array(column)
        assert str(array.type) == "string" and array.to_pylist() == column.to_list(), (text, cells, valid)


def test_a_replaced_parquet_score_file_keeps_its_permissions(tmp_path, capsys):
    """``eval --epd ... -o x.parquet`` over a private file: the same (ParquetTableWriter)."""
    pytest.importorskip("pyarrow", reason="Parquet needs the parquet extra (pyarrow)")
    from nnue_infer.cli import main

    epd = tmp_path / "one.epd"
    epd.write_text("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\n")
    dest = tmp_path / "scores.parquet"
    dest.write_bytes(b"old contents")
    dest.chmod(0o600)
    assert main(["eval", "--quiet", "--epd", str(epd), "-o", str(dest)]) == 0, capsys.readouterr().err
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600 and dest.read_bytes()[:4] == b"PAR1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.epd", "scores.parquet"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_parquet_target_is_written_not_replaced(tmp_path, capsys):
    """``eval --epd ... -o out.parquet`` where ``out.parquet`` is a named pipe (a reader waits on it):
    the Parquet writer renamed its temporary file over the pipe, so the reader waited forever while the
    command said nothing was wrong.  Now the file is put together in memory and written into the pipe
    (as ``data convert`` does for training data)."""
    pa = pytest.importorskip("pyarrow", reason="Parquet needs the parquet extra (pyarrow)")
    import threading

    import chess
    import pyarrow.parquet as pq

    import nnue_infer
    from nnue_infer.cli import main

    epd = tmp_path / "two.epd"
    fens = [chess.STARTING_FEN, "4k3/8/8/8/8/8/4P3/4K3 b - - 0 1"]
    epd.write_text("".join(f + "\n" for f in fens))
    pipe = tmp_path / "out.parquet"
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()), daemon=True)
    reader.start()
    status = main(["eval", "--quiet", "--epd", str(epd), "-o", str(pipe)])
    reader.join(timeout=60)
    assert status == 0 and not reader.is_alive(), capsys.readouterr().err
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    table = pq.read_table(pa.BufferReader(got[0]))
    assert table.column("value").to_pylist() == [nnue_infer.evaluate(f) for f in fens]

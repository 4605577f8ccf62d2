"""Messages and input rules found by the fresh-user trial (issue 12, session 3), one test each.

An invalid FEN field is named with its value (not called missing); ``--output DIR/``; one FEN
rule for the command line and the Python API; a PGN given to ``--epd`` and an EPD file given
to ``--pgn``; illegal moves naming the position once; ``error:`` everywhere; a bad character
named with its offset and the FEN; rejected EPD lines contributing nothing but their error;
``extract`` naming its file once; a clean ``Trace.svg``; EPD input read in bounded chunks with
over-long lines and binary data refused; EPD operations checked (line and column named).
"""

from __future__ import annotations

import csv
import io
import json

import chess
import numpy as np
import pytest

import nnue_infer
from nnue_infer.io import epd
from nnue_infer.cli import main
from nnue_infer.errors import FenError, InputError
from nnue_infer.inputs import SNIFF_BYTES
import os
import subprocess
import sys
import warnings
from nnue_infer import Architecture, FloatNetwork, HiddenLayer, quantise, save

SF = ["--net", "stockfish"]
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
PLACEMENT = AFTER_E4.split()[0]


def run(capsys, *argv):
    status = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return status, out, err


def test_invalid_side_to_move_is_named_with_its_value_not_called_missing(capsys):
    fen = f"{PLACEMENT} x KQkq - 0 1"
    status, out, err = run(capsys, "eval", *SF, fen)
    assert status == 1 and out == ""
    assert "side to move must be 'w' or 'b', found 'x'" in err and f"'{fen}'" in err
    assert "no side to move" not in err and "--lenient" not in err
    status, _, err = run(capsys, "eval", *SF, f"{PLACEMENT} w KQkq e9 0 1")
    assert status == 1 and "invalid en passant field 'e9'" in err


def test_bad_character_names_the_character_its_offset_and_the_fen(capsys):
    fen = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNX w KQkq - 0 1"
    for argv in ([fen], ["--fen", fen]):
        status, out, err = run(capsys, "eval", *SF, *argv)
        assert status == 1 and out == ""
        assert f"invalid character 'X' in the placement field at column 45 of '{fen}'" in err
    with pytest.raises(FenError, match="invalid character 'X' in the placement field at column 45"):
        nnue_infer.evaluate(fen)


@pytest.mark.parametrize("fen", [
    PLACEMENT, f"{PLACEMENT} b", f"{PLACEMENT} b KQkq", f"{PLACEMENT} b KQkq - 0", AFTER_E4,
    f"{PLACEMENT} b KQkq -", f"{PLACEMENT} b KQkq - 0 1 extra", f"{PLACEMENT} x KQkq - 0 1",
])
def test_command_line_and_python_accept_the_same_fens(capsys, evaluator, fen):
    """One FEN rule: python-chess reads, every field required; the CLI and every API function agree."""
    status, out, err = run(capsys, "eval", *SF, "--fen", fen)
    try:
        values = {evaluator.evaluate(fen), nnue_infer.evaluate(fen, evaluator.network),
                  int(evaluator.evaluate_batch([fen])[0])}
    except FenError as exc:
        assert status == 1 and out == "", (fen, out)
        assert str(exc).split(" (")[0] in err  # the same message, up to the hint
    else:
        assert status == 0 and values == {int(out.split("\tvalue ")[1].split("\t")[0])}


def test_a_word_that_is_no_position_is_named_without_guessing(capsys):
    status, out, err = run(capsys, "eval", *SF, "hello world")
    assert status == 1 and out == "" and err.strip() == (
        "error: 'hello' is neither a FEN, 'startpos', 'fen FEN' nor 'moves ...'")  # no cryptic "(... field?)"
    status, out, err = run(capsys, "eval", *SF, "startpos", "e4")
    assert status == 1 and "'e4' is neither" in err and "after 'startpos' moves need the word 'moves'" in err


def test_output_directory_without_workers_names_the_path(capsys, tmp_path):
    target = f"{tmp_path / 'scores'}/"
    status, out, err = run(capsys, "eval", *SF, "--epd", "examples/demo.epd", "--output", target)
    assert status == 2 and "Traceback" not in err and "Is a directory" not in err
    assert f"error: Invalid value for --output: {target} is a directory" in err and "--workers" in err
    status, _, err = run(capsys, "eval", *SF, "startpos", "-o", tmp_path)
    assert status == 2 and f"{tmp_path} is a directory" in err
    assert list(tmp_path.iterdir()) == []


def test_a_second_epd_or_pgn_file_is_refused_in_process(capsys, tmp_path):
    """click keeps only the last value of an option given twice: in process, a second --epd / --pgn is
    an error naming both files (it scored the last one only, silently); a Dask job takes them all."""
    for option in ("--epd", "--pgn"):
        status, out, err = run(capsys, "eval", *SF, option, "examples/demo.epd", option, "examples/demo.epd")
        assert status == 2 and out == "" and "Traceback" not in err
        assert f"{option} given 2 times (examples/demo.epd, examples/demo.epd): one file at a time" in err
        assert "--workers" in err


def test_pgn_and_epd_files_given_to_the_wrong_option_are_named(capsys, tmp_path):
    fens = tmp_path / "p.epd"
    fens.write_text("\n# positions\n" + AFTER_E4 + "\n")
    status, out, err = run(capsys, "eval", *SF, "--pgn", fens)
    assert status == 1 and out == ""  # no junk start-position row
    assert err.strip() == f"error: {fens}:3: this is a FEN/EPD line, not PGN (tag pairs and moves): use --epd for positions"
    pgn = tmp_path / "g.pgn"
    pgn.write_text('\n[Event "x"]\n[Result "*"]\n\n1. e4 *\n')
    status, out, err = run(capsys, "eval", *SF, "--epd", pgn)
    assert status == 1 and out == ""
    assert err.strip() == f"error: {pgn}:2: this is PGN (a tag pair or moves), not a FEN/EPD line: use --pgn for games"
    status, out, err = run(capsys, "eval", *SF, "--pgn", pgn)  # the right option still works
    assert status == 0 and len(out.splitlines()) == 3


def test_illegal_move_message_names_the_position_once(capsys):
    start = chess.STARTING_FEN
    for move in ("e2e5", "Ke2"):
        status, out, err = run(capsys, "eval", *SF, "startpos", "moves", move)
        assert status == 1 and err.count(start) == 1 and f"'{move}'" in err
    ev = nnue_infer.Evaluator()
    for push, move in ((ev.push_uci, "e2e5"), (ev.push_san, "Ke2")):
        with pytest.raises(nnue_infer.IllegalMoveError) as info:
            push(move)
        assert str(info.value).count(start) == 1


def test_every_command_says_error_in_lower_case(capsys, tmp_path):
    cases = [["eval", "--net", "stokfish", "startpos"],  # a ClickException
             ["eval", "--epd", tmp_path / "nosuch.epd"],  # a usage error
             ["eval", "startpos", "moves", "e2e5"],  # a message of our own
             ["info", tmp_path],
             ["convert", tmp_path / "nosuch.nnue", tmp_path / "x.nnue"],
             ["eval", "--bogus"]]
    for argv in cases:
        status, _, err = run(capsys, *argv)
        assert status in (1, 2) and "error: " in err and "Error:" not in err, (argv, err)


def test_rejected_epd_lines_give_only_their_error(capsys, tmp_path):
    """'not a fen at all' was refused but its word 'all' became a column of every row."""
    path = tmp_path / "p.epd"
    path.write_text(f"not a fen at all\n{chess.STARTING_FEN} \n{PLACEMENT} b KQkq - bm e5; id \"ok\";\n"
                    f"{PLACEMENT} b KQkq - pv 7; id \"a\"; id \"b\";\n8/8/8/8/8/8/8/8 w - - ce 0;\n")
    status, out, err = run(capsys, "eval", *SF, "--epd", path)
    assert status == 1
    header, *rows = out.splitlines()
    assert header == "line,fen,value,cp,cp_white,in_check,outcome,bm,id"  # no 'all', 'pv', 'ce' columns
    assert [r.split(",")[0] for r in rows] == ["2", "3"]
    assert [line.split(":")[2] for line in err.splitlines()] == ["1", "4", "5"]
    status, out, err = run(capsys, "eval", *SF, "--epd", path, "--keep-errors", "--json")
    objs = [json.loads(line) for line in out.splitlines()]
    assert [o["line"] for o in objs] == [1, 2, 3, 4, 5] and list(objs[0]) == [
        "line", "fen", "value", "cp", "cp_white", "in_check", "outcome", "bm", "id", "error"]
    for o in (objs[0], objs[3], objs[4]):  # explicit error rows: values and operations null
        assert o["error"] and o["value"] is None and o["bm"] is None and o["id"] is None
    assert objs[2]["id"] == "ok" and objs[2]["error"] is None


def test_extract_prints_the_name_once(capsys, tmp_path, monkeypatch, stockfish_binary):
    monkeypatch.chdir(tmp_path)
    status, out, _ = run(capsys, "extract", stockfish_binary)
    assert status == 0 and out.count("nn-ad9b42354671.nnue") == 1
    status, out, _ = run(capsys, "extract", stockfish_binary, "-o", "sf15.nnue")
    assert status == 0 and "wrote sf15.nnue (" in out and out.count("nn-ad9b42354671.nnue") == 1


def test_trace_svg_has_no_namespace_prefixes(evaluator):
    svg = evaluator.trace(chess.Board(AFTER_E4)).svg()
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" ')
    assert "ns0:" not in svg and "ns1:" not in svg and "<svg" in svg[1:]  # python-chess's board nested as it is


def test_epd_is_read_in_bounded_chunks_across_line_boundaries():
    lines = [f"{chess.STARTING_FEN}" if i % 2 else f'4k3/8/8/8/8/8/8/4K3 w - - id "n{i}";' for i in range(200)]
    data = ("\n".join(lines) + "\n").encode()
    whole = epd.read_epd(data)
    chunks = list(epd.iter_epd(io.BytesIO(data), chunk_bytes=1000, max_line=500))
    assert len(chunks) >= 5
    assert np.concatenate([c.line for c in chunks]).tolist() == whole.line.tolist() == list(range(1, 201))
    assert sum((c.fen.to_list() for c in chunks), []) == whole.fen.to_list()
    ids = sum((c.operation_columns(["id"])[0]["id"].to_list() for c in chunks), [])
    assert ids == [None if i % 2 else f"n{i}" for i in range(200)]


class Endless(io.RawIOBase):
    """A stream of ``fill`` bytes after ``head`` that counts what was read (``/dev/zero`` with a meter, or
    of another byte: NUL bytes among the first are binary data, refused before any line is split)."""

    def __init__(self, head: bytes = b"", fill: bytes = b"\0") -> None:
        self.head, self.fill, self.served = head, fill, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = len(b)
        data = self.head[self.served:self.served + n]
        b[:n] = data + self.fill * (n - len(data))
        self.served += n
        return n


def test_an_endless_line_is_refused_with_its_number_in_bounded_memory():
    head = (chess.STARTING_FEN + "\n") * 3
    stream = io.BufferedReader(Endless(head.encode(), b"x"))
    with pytest.raises(InputError, match=r"^<x>:4: line longer than 100 bytes"):
        for _ in epd.iter_epd(stream, "<x>", chunk_bytes=1000, max_line=100):
            pass
    assert stream.raw.served <= 3 * 1000 + 8192  # a few chunks, not the whole endless input


def test_dev_zero_and_binary_files_are_named(capsys, tmp_path):
    zeros = tmp_path / "zero.epd"  # /dev/zero without its endlessness (code that reads it whole fills the memory)
    zeros.write_bytes(bytes(20 << 20))
    status, out, err = run(capsys, "eval", *SF, "--epd", zeros)
    assert status == 1 and out == "" and err.strip() == f"error: {zeros}: NUL byte at byte offset 0 (line 1): " \
        "binary data, not an EPD/FEN text file"
    zeros.write_bytes(b"x" * (20 << 20))
    status, out, err = run(capsys, "eval", *SF, "--epd", zeros)
    assert status == 1 and out == "" and err.strip() == f"error: {zeros}:1: line longer than {epd.MAX_LINE_BYTES} " \
        "bytes (not an EPD/FEN file?)"
    binary = tmp_path / "b.epd"  # binary data after the first bytes (there: refused at once, test_a_binary_file_is_refused_naming_the_byte)
    lines = 1 + SNIFF_BYTES // len(chess.STARTING_FEN)
    binary.write_bytes(f"{chess.STARTING_FEN}\n".encode() * lines + b"\x7fELF\x00\x01 id x;\n")
    status, out, err = run(capsys, "eval", *SF, "--epd", binary)
    assert status == 1 and f"{binary}:{lines + 1}: NUL byte at column 5: binary data" in err
    assert len(out.splitlines()) == lines + 1  # the lines before it are scored, nothing of the binary line


@pytest.mark.parametrize("ops, column, message", [
    ('c0 "say \\"hi\\" \\\\ now"; id "x";', None, None),
    ('id "x;', 5, "string operand without its closing"),
    ('id "x"; bm e4; id "y";', 17, "opcode 'id' given twice"),
    ('"id" "x";', 2, "opcode '\"id\"' is not a name"),
    ('9x 1;', 2, "opcode '9x' is not a name"),
    ('averyveryverylongopcode 1;', 2, "is not a name"),
])
def test_epd_operations_are_checked(capsys, tmp_path, ops, column, message):
    fen4 = "4k3/8/8/8/8/8/8/4K3 w - -"
    path = tmp_path / "p.epd"
    path.write_text(f"{fen4}\n{fen4} {ops}\n")
    status, out, err = run(capsys, "eval", *SF, "--epd", path)
    if message is None:
        assert status == 0 and err == ""
        rows = list(csv.DictReader(io.StringIO(out)))
        assert rows[1]["c0"] == 'say "hi" \\ now' and rows[1]["id"] == "x" and rows[0]["c0"] == ""
        return
    assert status == 1 and len(out.splitlines()) == 2 and out.splitlines()[0].endswith(",outcome")
    assert err.strip().startswith(f"error: {path}:2: column {len(fen4) + column}: EPD ") and message in err


def test_an_opcode_first_seen_after_the_first_chunk_is_an_error_not_a_new_column(evaluator):
    from nnue_infer.io.score import score_epd

    lines = [f'{chess.STARTING_FEN} id "{i}";' for i in range(50)] + [f'{chess.STARTING_FEN} id "z"; bm e4;']
    data = ("\n".join(lines) + "\n").encode()
    tables = list(score_epd(evaluator, epd.iter_epd(io.BytesIO(data), chunk_bytes=500)))
    assert all(list(t) == ["line", "fen", "value", "cp", "cp_white", "in_check", "outcome", "id", "error"]
               for t in tables)
    errors = [(int(t["line"][i]), t["error"][i]) for t in tables for i in range(len(t["line"])) if t["error"][i]]
    assert len(errors) == 1 and errors[0][0] == 51 and "EPD opcode 'bm' first appears after" in errors[0][1]


# --- adversarial pass 2 (notes/adv2.md) ------------------------------------------------------------


def test_extract_refuses_a_fifo_or_device_without_reading_it(capsys, tmp_path):
    """``extract /dev/zero`` read the endless source into memory (OOM); a FIFO blocked."""
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for source in (fifo, "/dev/zero"):
        status, out, err = run(capsys, "extract", source, "-o", tmp_path / "x.nnue")
        assert status == 1 and out == "" and f"error: {source}: not a regular file" in err
    status, out, err = run(capsys, "extract", "--list", fifo)
    assert status == 1 and "not a regular file" in err


def test_extract_caps_what_it_reads_from_a_file(capsys, tmp_path, monkeypatch):
    from nnue_infer.formats import extract

    monkeypatch.setattr(extract, "MAX_SOURCE_BYTES", 1000, raising=False)
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * 1001)
    status, out, err = run(capsys, "extract", big, "-o", tmp_path / "x.nnue")
    assert status == 1 and f"error: {big}: 1001 bytes, more than any engine file" in err


@pytest.mark.parametrize("option, example", [("--epd", "demo.epd"), ("--pgn", "demo.pgn")])
def test_output_that_is_the_standard_input_file_is_refused(capsys, tmp_path, option, example):
    """``eval --epd - -o d.epd < d.epd`` emptied d.epd before reading it (exit 0, input lost)."""
    import os
    import shutil
    from pathlib import Path

    path = tmp_path / example
    shutil.copy(Path(__file__).parents[2] / "examples" / example, path)
    before = path.read_bytes()
    saved = os.dup(0)
    try:
        with open(path, "rb") as f:
            os.dup2(f.fileno(), 0)
        status, out, err = run(capsys, "eval", *SF, option, "-", "-o", path)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    assert status == 2 and f"--output {path} is the standard input file" in err
    assert path.read_bytes() == before


def test_parquet_output_of_a_run_stopped_early(capsys, tmp_path, monkeypatch):
    """``-o X.parquet`` of a run stopped by a refused line truncated X.parquet to 0 bytes and left
    ``.X.parquet.tmp-PID``.  Now: a refused line keeps the rows before it (as CSV does); an interrupted
    run leaves an existing file untouched; no temporary file remains."""
    pq = pytest.importorskip("pyarrow.parquet")
    from pathlib import Path

    from nnue_infer.io import score

    demo = Path(__file__).parents[2] / "examples" / "demo.epd"
    good = tmp_path / "keep.parquet"
    assert run(capsys, "eval", *SF, "--epd", demo, "-o", good)[0] == 1  # demo.epd has one bad line
    before = good.read_bytes()
    bad = tmp_path / "nulmid.epd"
    good_lines = b"".join(demo.read_bytes().splitlines(keepends=True)[:3])  # (a NUL among the first bytes: refused)
    copies = 1 + SNIFF_BYTES // len(good_lines)
    bad.write_bytes(good_lines * copies + b"abc\0\n")
    status, out, err = run(capsys, "eval", *SF, "--epd", bad, "-o", good)
    assert status == 1 and f"{bad}:{3 * copies + 1}: NUL byte" in err
    csv_rows = run(capsys, "eval", *SF, "--epd", bad)[1].splitlines()[1:]
    assert pq.read_table(good).num_rows == len(csv_rows) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.parquet", "nulmid.epd"]

    good.write_bytes(before)
    real = score.score_epd

    def interrupted(*args, **kwargs):
        yield next(real(*args, **kwargs))
        raise KeyboardInterrupt

    monkeypatch.setattr(score, "score_epd", interrupted)  # as io.score.score_epd_file calls it
    status, out, err = run(capsys, "eval", *SF, "--epd", demo, "-o", good)
    assert status == 1 and "Aborted!" in err
    assert good.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.parquet", "nulmid.epd"]


@pytest.mark.parametrize("cut", [0.5, 0.05])
def test_extract_of_a_truncated_tarball_names_it(capsys, tmp_path, cut):
    """A half-downloaded npm tarball printed only click's "Aborted!" (the gzip EOFError escaped)."""
    import tarfile

    member = tmp_path / "stockfish.wasm"
    member.write_bytes(np.random.default_rng(1).integers(0, 256, 200_000, dtype=np.uint8).tobytes())
    whole = tmp_path / "whole.tgz"
    with tarfile.open(whole, "w:gz") as tar:
        tar.add(member, arcname="package/bin/stockfish.wasm")
    data = whole.read_bytes()
    trunc = tmp_path / "trunc.tgz"
    trunc.write_bytes(data[: int(len(data) * cut)])
    for args in (["extract", trunc, "-o", tmp_path / "ex"], ["extract", "--list", trunc]):
        status, out, err = run(capsys, *args)
        assert status == 1 and f"error: {trunc}: truncated or corrupt archive (" in err and "Aborted" not in err


def test_extract_into_a_new_directory_with_a_trailing_slash(capsys, tmp_path, stockfish_binary):
    """``extract SRC -o newdir/`` wrote a FILE named newdir."""
    target = tmp_path / "newdir"
    status, out, err = run(capsys, "extract", stockfish_binary, "-o", f"{target}/")
    assert status == 0 and target.is_dir() and (target / "nn-ad9b42354671.nnue").is_file()
    status, out, err = run(capsys, "extract", stockfish_binary, "-o", f"{tmp_path}/missing/newdir/")
    assert status == 2 and "does not exist" in err and not (tmp_path / "missing").exists()


def test_evaluator_network_setter_takes_a_name_like_the_constructor(evaluator):
    """``ev.network = "stockfish"`` raised TypeError while ``Evaluator("stockfish")`` takes the name."""
    ev = nnue_infer.Evaluator("stockfish")
    ref = ev.evaluate(chess.Board(AFTER_E4))
    ev.network = "default"
    ev.network = "stockfish"
    assert ev.evaluate(chess.Board(AFTER_E4)) == ref


def test_missing_network_file_lists_every_known_net(capsys, tmp_path):
    """The "does not exist" message listed the known nets without sf18 and sf19."""
    from nnue_infer.formats.registry import specs

    status, out, err = run(capsys, "eval", "--net", tmp_path / "x.nnue", "startpos")
    assert status == 1 and "does not exist" in err
    assert all(s in err for s in specs()) and "sf18," in err and "sf19," in err


@pytest.mark.parametrize("name", ["out.json", "out.jsonl"])
def test_output_named_json_is_json_lines(capsys, tmp_path, name):
    """``-o out.json`` wrote CSV (only .parquet followed the name)."""
    path = tmp_path / name
    status, out, err = run(capsys, "eval", *SF, "-o", path, "startpos", AFTER_E4)
    assert status == 0, err
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 2 and all("cp" in r for r in rows)
    from pathlib import Path

    run(capsys, "eval", *SF, "--epd", Path(__file__).parents[2] / "examples" / "demo.epd", "-o", path)
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_batch_row_0_of_another_type_is_not_compared_with_rows_before(evaluator):
    """``evaluate_batch([b"<fen>"])`` said "like the rows before" for row 0."""
    with pytest.raises(TypeError, match=r"row 0: expected a FEN string or a chess.Board, got bytes"):
        evaluator.evaluate_batch([chess.STARTING_FEN.encode()])
    with pytest.raises(TypeError, match=r"row 1: expected a FEN string like the rows before, got bytes"):
        evaluator.evaluate_batch([chess.STARTING_FEN, chess.STARTING_FEN.encode()])


def test_moves_after_a_result_are_an_error(capsys):
    """``eval "startpos moves e4 e5 1-0 Nf3"`` played Nf3 after the result."""
    status, out, err = run(capsys, "eval", *SF, "startpos moves e4 e5 1-0 Nf3")
    assert status == 1 and "moves[2]: 'Nf3' follows the result '1-0'" in err
    assert run(capsys, "eval", *SF, "startpos moves e4 e5 1-0")[0] == 0


@pytest.mark.parametrize("line, column", [(b"ab\xff\xff\xff\xffc\x00", 8), ("é€x".encode() + b"\x00", 4),
                                          (b"abc\x00", 4)])
def test_nul_byte_column_counts_characters(line, column):
    """After invalid UTF-8 the NUL column was a byte offset in the re-encoded (U+FFFD) buffer."""
    data = chess.STARTING_FEN.encode() + b"\n" + line + b"\n"
    with pytest.raises(InputError, match=rf"^x:2: NUL byte at column {column}: "):
        epd.read_epd(data, source="x")


def test_cr_only_line_ends_are_named(capsys, tmp_path):
    """Old-Mac CR-only line ends read as one line whose second FEN is called a bad opcode."""
    path = tmp_path / "cr.epd"
    path.write_bytes(f"{chess.STARTING_FEN}\r{AFTER_E4}\r".encode())
    status, out, err = run(capsys, "eval", *SF, "--epd", path)
    assert status == 1 and "lines end in CR only" in err


def test_activations_of_an_epd_file_with_a_refused_line(tmp_path, capsys):
    """One unrepresentable EPD line: reported as FILE:LINE, the other rows written, status 1 (the
    whole file was refused with a 0-based row before); --keep-errors is refused, not ignored."""
    import numpy as np

    from nnue_infer.cli import main

    epd = tmp_path / "p.epd"
    epd.write_text(f"{chess.STARTING_FEN}\n8/8/8/8/8/8/8/4K3 w - - 0 1\n"
                   "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3\n")
    out = tmp_path / "a.npz"
    assert main(["eval", "--epd", str(epd), "--activations", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{epd}:2: Black must have exactly one king" in err, err
    with np.load(out) as acts:
        assert [f.split()[0] for f in acts["fen"]] == [chess.STARTING_FEN.split()[0], "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R"]
        assert acts["value"].shape == (2,)
    assert main(["eval", "--epd", str(epd), "--activations", "--keep-errors", "-o", str(tmp_path / "b.npz")]) == 2
    assert "--keep-errors does not go with --activations" in capsys.readouterr().err
    assert not (tmp_path / "b.npz").exists()


def test_activations_of_an_epd_file_echo_its_fens_as_written(tmp_path, capsys):
    """``--activations --epd``'s ``fen`` column (and ``--trace --json --epd``'s) added " 0 1" to a FEN without the
    move counters (python-chess's FEN); it is the line's FEN as ``eval --epd`` writes it.  Positions given on the command line (``startpos moves
    e4`` is no FEN) keep python-chess's FEN."""
    import numpy as np

    placement = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR"
    lines = [f"{placement} b KQkq -", f'{placement} b KQkq - bm e5; id "x";', "4k3/8/8/8/8/8/8/4K3 w - - 3 9"]
    epd = tmp_path / "p.epd"
    epd.write_text("\n".join(lines) + "\n")
    out = tmp_path / "a.npz"
    assert main(["eval", "--epd", str(epd), "--activations", "-o", str(out)]) == 0
    status, csv_out, _ = run(capsys, "eval", "--epd", epd)
    written = [row["fen"] for row in csv.DictReader(io.StringIO(csv_out))]
    with np.load(out) as acts:
        assert acts["fen"].tolist() == written == [lines[0], lines[0], lines[2]]
    assert main(["eval", "--activations", "-o", str(out), "startpos moves e4"]) == 0
    with np.load(out) as acts:
        assert acts["fen"].tolist() == [f"{placement} b KQkq - 0 1"]
    status, traced, _ = run(capsys, "eval", "--epd", epd, "--trace", "--json")  # (so do --trace --json's)
    assert status == 0 and [json.loads(t)["fen"] for t in traced.splitlines()] == written


def test_a_dask_job_refuses_a_file_given_to_the_other_kinds_option(capsys, tmp_path):
    """A Dask job reads each file by its name's kind: a PGN named games.txt given to --pgn was read as EPD
    (every line an error), a .pgn file given to --epd as PGN, silently (hostile pass 2); now a usage error
    naming the file, before any cluster starts."""
    pytest.importorskip("distributed")
    games = tmp_path / "games.txt"
    games.write_text('[Event "x"]\n\n1. e4 e5 *\n')
    pgn = tmp_path / "g.pgn"
    pgn.write_text('[Event "x"]\n\n1. e4 e5 *\n')
    out = tmp_path / "out"
    status, _, err = run(capsys, "eval", "--pgn", games, "--output", out, "--workers", "1")
    assert status == 2 and f"--pgn {games}: a Dask job reads each file by its name's kind, and this one's is epd" in err
    status, _, err = run(capsys, "eval", "--epd", pgn, "--output", out, "--workers", "1")
    assert status == 2 and f"--epd {pgn}: a Dask job reads each file by its name's kind, and this one's is pgn" in err
    assert not out.exists()


@pytest.mark.parametrize("suffix, option", [(".binpack", "--epd"), (".bin", "--pgn"), (".binpack.zst", "--epd")])
def test_training_data_given_to_eval_in_process_says_where_it_is_read(capsys, tmp_path, suffix, option):
    """A .binpack given to eval --epd in one process said only 'binary data, not an EPD/FEN text file'
    (fresh-user trial, session 34): the message now says which commands read training data."""
    path = tmp_path / f"games{suffix}"
    path.write_bytes(b"BINP\x10\x00\x00\x00" + bytes(64))  # a NUL among the first bytes, as every binpack has
    status, out, err = run(capsys, "eval", option, path)
    assert status == 1 and out == ""
    assert f"{path}: NUL byte at byte offset" in err and "nnue-infer data" in err and "--workers" in err, err


def test_a_text_file_with_a_nul_gets_no_training_data_hint(capsys, tmp_path):
    path = tmp_path / "positions.epd"
    path.write_bytes(AFTER_E4.encode() + b"\n\0")
    status, _, err = run(capsys, "eval", "--epd", path)
    assert status == 1 and "binary data, not an EPD/FEN text file" in err and "training data" not in err, err


def test_info_says_what_the_version_fields_of_a_network_mean(capsys):
    """``info default`` listed stockfish_version: 15.1 and file_version: 2062757664 for a Chess768 network of
    our own, read as facts about the file (fresh-user trial, session 34): they are conventions, now said."""
    status, out, _ = run(capsys, "info", "default")
    assert status == 0
    assert "  file_version: 2062757664 (0x7AF32F20: the .nnue header version it is written with)" in out
    assert "  stockfish_version: 15.1 (the Stockfish version whose eval text and pawn normalisation it follows)" in out


# -- hostile input ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("words", [[""], [" ", "\t"]])
def test_empty_position_arguments_are_named(capsys, words):
    status, out, err = run(capsys, "eval", *words)
    assert status == 1 and out == "" and "empty position" in err


def test_a_drawn_result_ends_a_pasted_move_list(capsys):
    status, out, err = run(capsys, "eval", "startpos moves 1. e4 e5 1/2-1/2", "startpos")
    assert status == 0 and err == ""
    assert [line.split("\t")[0] for line in out.splitlines()] == [
        "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2", chess.STARTING_FEN]


@pytest.mark.parametrize("null", ["0000", "--"])
def test_a_null_move_in_check_is_refused_on_the_command_line(capsys, null):
    status, out, err = run(capsys, "eval", f"startpos moves e4 f5 Qh5+ {null}")
    assert status == 1 and out == "" and "null move" in err and "in check" in err
    status, out, err = run(capsys, "eval", f"startpos moves e4 f5 {null}")  # not in check: a pass
    assert status == 0 and out.startswith("rnbqkbnr/ppppp1pp/8/5p2/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 1 2\t")


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


FEN = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"




@pytest.fixture(scope="module")
def small_nets(tmp_path_factory):
    """A float network file and its quantised version (small, Chess768)."""
    d = tmp_path_factory.mktemp("nets")
    arch = Architecture("Chess768", 64, "pairwise", 127, 7, psqt_buckets=0, output_buckets=1,
                        layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")))
    fnet = FloatNetwork.random(arch, seed=13)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qnet = quantise(fnet)
    save(fnet, d / "float.safetensors")
    save(qnet, d / "q.safetensors")
    return d / "float.safetensors", d / "q.safetensors"


def _run_into_pipe(args: list[str], reader: str, cwd) -> tuple[int, str, bytes]:
    """Run ``python -m nnue_infer ARGS`` with its standard output a real pipe whose reader goes away: ``"closed"``
    before the process starts (its first write fails: the same every run), ``"line"`` after reading one line
    (as ``| head -1``: the process may have written everything by then, or not).  (status, stderr, what was read)."""
    r, w = os.pipe()
    if reader == "closed":
        os.close(r)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "nnue_infer", *args], stdout=w, stderr=subprocess.PIPE, cwd=cwd,
                            env=env)
    os.close(w)
    read = b""
    if reader == "line":
        with os.fdopen(r, "rb") as f:
            read = f.readline()
    try:
        err = proc.communicate(timeout=300)[1].decode()
    finally:
        proc.kill()
    # nothing on stderr but, on a cold cache, the first-use compile notice (its own test: test_compile)
    err = "".join(line for line in err.splitlines(True) if "compiling kernels for this CPU" not in line)
    return proc.returncode, err, read


#: The first bytes of a PNG image (signature, IHDR chunk: its first NUL at byte offset 8, on line 3), then noise.
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00P\x00\x00\x00P\x08\x06" + bytes(range(1, 256)) * 4


def _damaged_gzip() -> bytes:
    import gzip

    return gzip.compress((FEN + "\n").encode() * 3)[:11]  # its header, then nothing that decodes


@pytest.mark.parametrize("target", ["/nonexistent-dir/x.csv", "/dev/full"])
def test_unwritable_output_is_a_message(tmp_path, capsys, target):
    """Item 11: ``-o /missing/dir/x.csv`` and ``-o /dev/full`` gave tracebacks."""
    epd = tmp_path / "p.epd"
    epd.write_text(FEN + "\n")
    status, out, err = run(capsys, "eval", "--epd", epd, "-o", target)
    assert status == 1 and out == ""
    assert err.startswith("error: cannot write") and target.split("/")[-1] in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_crosscheck_plot_into_a_missing_directory_fails_before_the_work(tmp_path, capsys, small_nets):
    """Item 11: ``crosscheck --plot /missing/dir/p.png`` raised PIL's traceback after all the work."""
    fpath, qpath = small_nets
    pos = tmp_path / "p.epd"
    pos.write_text(FEN + "\n")
    status, out, err = run(capsys, "crosscheck", "--float", fpath, "--quantised", qpath, "--positions", pos,
                           "--plot", tmp_path / "missing" / "p.png")
    assert status == 2 and out == ""
    assert "Invalid value for --plot" in err and "does not exist" in err


def test_datagen_with_a_float_teacher(tmp_path, capsys, small_nets):
    """Item 11: ``datagen --teacher float.safetensors`` raised ``TypeError``."""
    status, out, err = run(capsys, "datagen", "-o", tmp_path / "p.npz", "-n", 10, "--teacher", small_nets[0])
    assert status == 1
    assert err.strip() == f"error: --teacher {small_nets[0]} holds a float network; the teacher must be quantised " \
                          "(nnue-infer quantise)"


def test_extract_into_a_missing_directory(tmp_path, capsys):
    """Item 11: ``extract -o /missing/n.nnue`` named the temporary ``.part`` file."""
    status, out, err = run(capsys, "extract", "/usr/games/stockfish", "-o", tmp_path / "missing" / "n.nnue")
    assert status == 2 and ".part" not in err and f"directory {tmp_path / 'missing'} does not exist" in err


@pytest.mark.parametrize("what", ["devnull", "directory", "fifo"])
def test_net_that_is_not_a_regular_file(tmp_path, capsys, what):
    """Item 11: ``--net /dev/null`` or a directory said "does not exist"; ``info FIFO`` hung."""
    path = {"devnull": "/dev/null", "directory": str(tmp_path)}.get(what)
    if what == "fifo":
        path = str(tmp_path / "net.fifo")
        os.mkfifo(path)
    status, out, err = run(capsys, "eval", "--net", path, FEN)
    assert status == 1 and err.strip() == (f"error: {path}: not a regular file (a directory, device or FIFO); a network "
                                           "is a .nnue or .safetensors file")
    r = subprocess.run([sys.executable, "-m", "nnue_infer", "info", path], capture_output=True, text=True,
                       timeout=120)  # hung before
    assert r.returncode == 1 and "not a regular file" in r.stderr


def test_missing_net_file_still_says_it_does_not_exist(tmp_path, capsys):
    status, out, err = run(capsys, "eval", "--net", tmp_path / "nope.nnue", FEN)
    assert status == 1 and "does not exist" in err


def test_plain_line_prints_what_stockfish_prints(capsys):
    """Item 13: the plain line printed +0.27 (truncated centipawns / 100) under "(white side)"
    where ``--trace`` and Stockfish print +0.28 (value / 361)."""
    status, out, err = run(capsys, "eval", "--net", "stockfish", FEN)
    assert status == 0
    assert out == f"{FEN}\tvalue 100\tcp +27 (side to move)\t+0.28 (white side)\n"
    status, trace, _ = run(capsys, "eval", "--net", "stockfish", "--trace", FEN)
    assert trace.splitlines()[-1] == "NNUE evaluation        +0.28 (white side)"


def test_huge_bad_input_gives_a_short_message(tmp_path, capsys):
    """Item 13: a bad 4 MB EPD line gave an 8 MB error message (quoted twice, in full)."""
    huge = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x " + "K" * 4_000_000
    epd = tmp_path / "p.epd"
    epd.write_text(FEN + "\n" + huge + "\n")
    status, out, err = run(capsys, "eval", "--epd", epd)
    assert status == 1 and len(out.splitlines()) == 2  # the line before is still scored
    assert len(err) < 2000 and f"{epd}:2: line longer than 1048576 bytes" in err  # EPD lines stop at 1 MiB
    status, out, err = run(capsys, "eval", "--fen", huge)
    assert status == 1 and len(err) < 2000 and "more characters" in err
    status, out, err = run(capsys, "eval", huge)  # as words: the bad side to move is named
    assert status == 1 and len(err) < 2000 and "more characters" in err and "found 'x'" in err


@pytest.mark.parametrize("content", ["", "# only a comment\n\n"])
def test_crosscheck_on_an_empty_file(tmp_path, capsys, small_nets, content):
    """Item 13: crosscheck on an empty file exited 0 with NaN statistics and wrote invalid JSON."""
    fpath, qpath = small_nets
    pos = tmp_path / "empty.epd"
    pos.write_text(content)
    status, out, err = run(capsys, "crosscheck", "--float", fpath, "--quantised", qpath, "--positions", pos,
                           "--plot", "", "--json")
    assert status == 1 and out == ""
    assert err.strip() == f"error: {pos}: no positions (the file is empty or holds only comments)"


def test_crosscheck_json_is_valid_even_when_a_statistic_is_undefined(tmp_path, capsys, small_nets):
    """One position: the correlation is undefined; the JSON says null, never NaN."""
    fpath, qpath = small_nets
    pos = tmp_path / "one.epd"
    pos.write_text(FEN + "\n")
    status, out, err = run(capsys, "crosscheck", "--float", fpath, "--quantised", qpath, "--positions", pos,
                           "--plot", "", "--json")
    assert status == 0
    summary = json.loads(out, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c}"))
    assert summary["positions"] == 1 and summary["correlation"] is None


def test_a_closed_stdout_ends_quietly(tmp_path):
    """Hostile pass: ``nnue-infer eval --epd big.epd | head -2`` printed "Error: cannot write to
    stdout: Broken pipe"; the reader going away is no error worth a message."""
    epd = tmp_path / "p.epd"
    epd.write_text((FEN + "\n") * 20000)
    r = subprocess.run(f"{sys.executable} -m nnue_infer eval --epd {epd} | head -2", shell=True, capture_output=True,
                       text=True, executable="/bin/bash", timeout=300)
    assert r.stdout.splitlines()[0] == "line,fen,value,cp,cp_white,in_check,outcome" and len(r.stdout.splitlines()) == 2
    # nothing but, on a cold cache, the first-use compile notice (its own test: test_compile)
    assert [line for line in r.stderr.splitlines() if "compiling kernels for this CPU" not in line] == [], r.stderr


@pytest.mark.parametrize("args, reader", [
    (["eval", "--moves", "startpos"], "closed"), (["eval", "--moves", "startpos"], "line"),
    (["eval", "--epd", "big.epd"], "closed"), (["eval", "--epd", "big.epd", "-o", "-"], "line"),
    (["data", "info", "selfplay.binpack"], "closed"), (["data", "convert", "selfplay.binpack", "-", "--to", "plain"], "closed"),
    (["--help"], "closed")])
def test_a_reader_going_away_ends_quietly_with_status_0(tmp_path, args, reader):
    """``nnue-infer eval --moves FEN | head -1`` ended with status 1 when the reader had gone before a write (click's
    handler of EPIPE), 0 when everything fit in the pipe first: a status that depended on the timing, and ``-o -``
    said "cannot write to stdout: Broken pipe".  Now a reader going away ends every command (and --help) with
    status 0 and nothing on stderr, as docs/command-line.md says."""
    (tmp_path / "big.epd").write_text((FEN + "\n") * 20000)
    if args[0] == "data":
        from tests.conftest import shared_dir

        (tmp_path / "selfplay.binpack").write_bytes((shared_dir() / "data/binpack/selfplay.binpack").read_bytes())
    for _ in range(2):
        status, err, read = _run_into_pipe(args, reader, tmp_path)
        assert (status, err) == (0, ""), (status, err)
        assert reader == "closed" or read.strip(), read


def test_compressed_network_and_two_stdin_inputs_are_named(tmp_path, capsys):
    """Hostile pass: a gzip-compressed network said "unknown network format (first bytes 1f 8b ...)";
    ``datagen --games - --exclude -`` would read standard input twice."""
    import gzip

    from nnue_infer.resources import default_network_path

    gz = tmp_path / "net.safetensors.gz"
    gz.write_bytes(gzip.compress(default_network_path().read_bytes()[:4096]))
    status, out, err = run(capsys, "info", gz)
    assert status == 1 and "a gzip-compressed file; decompress the network first (gunzip" in err
    status, out, err = run(capsys, "datagen", "-o", tmp_path / "p.npz", "--games", "-", "--exclude", "-")
    assert status == 2 and "cannot both read standard input" in err


@pytest.mark.parametrize("kind, what", [("pgn", "a PGN text file"), ("epd", "an EPD/FEN text file")])
@pytest.mark.parametrize("how", ["plain", "gzip", "stdin"])
def test_a_binary_file_is_refused_naming_the_byte(tmp_path, capsys, monkeypatch, kind, what, how):
    """An image named ``.pgn`` gave a row of the start position and an error row ("failed to parse SAN at ply 1:
    \\ufffdPNG"); named ``.epd``, error rows up to its first NUL.  A NUL byte among an input's first bytes is binary
    data: refused before any row, naming the file, the byte offset and its line."""
    import gzip
    import io

    path = tmp_path / f"image.{kind}"
    path.write_bytes(gzip.compress(PNG) if how == "gzip" else PNG)
    if how == "stdin":
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(PNG)))
    name = "-" if how == "stdin" else path
    status, out, err = run(capsys, "eval", f"--{kind}", name)
    label = "<stdin>" if how == "stdin" else path
    assert (status, out, err) == (1, "", f"error: {label}: NUL byte at byte offset 8 (line 3): binary data, not {what}\n")


def test_binary_pgn_refused_by_read_pgn_and_latin1_pgn_still_read(tmp_path):
    """The Python reader refuses binary data too; bytes that are not UTF-8 alone are no binary data: a Latin-1 PGN's
    names are read as U+FFFD (the rule of ``inputs.open_input``) and its games scored."""
    from nnue_infer.errors import InputKindError
    from nnue_infer.io.pgn import read_pgn

    image = tmp_path / "image.pgn"
    image.write_bytes(PNG)
    with pytest.raises(InputKindError, match=f"^{image}: NUL byte at byte offset 8 "):
        list(read_pgn(image))
    latin1 = tmp_path / "latin1.pgn"
    latin1.write_bytes('[White "Müller"]\n\n1. e4 e5 *\n'.encode("latin-1"))
    (batch,) = read_pgn(latin1)
    assert batch.headers["White"].tolist() == ["M\ufffdller"] * 3 and batch.san == ["", "e4", "e5"]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("kind, content, says", [
    ("epd", b"x" * (2 << 20), ":1: line longer than"),  # InputError at the first line
    ("epd", None, "corrupt or truncated gzip data found by compressed byte 11"),  # InputError before any line
    ("epd", b'[Event "x"]\n\n1. e4 *\n', ":1: this is PGN"),  # InputKindError
    ("pgn", PNG, "binary data, not a PGN text file"),
])
def test_a_run_refused_before_any_row_leaves_no_output(tmp_path, capsys, suffix, kind, content, says):
    """An input refused at its first line with ``-o x.parquet`` left a Parquet file of no columns (a damaged gzip
    stream, one of the usual columns and no rows), with ``-o x.csv`` an empty file, and an earlier file of that
    name emptied: a refused run leaves no file, and one that was there as it was."""
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    src = tmp_path / f"in.{kind}"
    src.write_bytes(_damaged_gzip() if content is None else content)
    fresh = tmp_path / f"new{suffix}"
    status, out, err = run(capsys, "eval", f"--{kind}", src, "-o", fresh)
    assert status == 1 and says in err and out == ""
    assert not fresh.exists()
    kept = tmp_path / f"old{suffix}"
    kept.write_bytes(b"earlier results\n")
    status, out, err = run(capsys, "eval", f"--{kind}", src, "-o", kept)
    assert status == 1 and says in err and kept.read_bytes() == b"earlier results\n"
    assert sorted(os.listdir(tmp_path)) == sorted([src.name, kept.name])  # no temporary file either


def test_a_run_with_nothing_to_write_still_makes_its_file(tmp_path, capsys):
    """The output file is opened by the first write; a run that succeeds with nothing to write (JSON lines of an
    input without positions) still leaves its (empty) file."""
    src = tmp_path / "empty.epd"
    src.write_text("# no positions\n")
    status, out, err = run(capsys, "eval", "--epd", src, "-o", tmp_path / "out.jsonl")
    assert status == 0 and (tmp_path / "out.jsonl").read_bytes() == b""

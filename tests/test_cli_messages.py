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
    binary = tmp_path / "b.epd"  # binary data after the first bytes (there: refused at once, test_reliability_cli)
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
    shutil.copy(Path(__file__).parent.parent / "examples" / example, path)
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

    demo = Path(__file__).parent.parent / "examples" / "demo.epd"
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

    run(capsys, "eval", *SF, "--epd", Path(__file__).parent.parent / "examples" / "demo.epd", "-o", path)
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

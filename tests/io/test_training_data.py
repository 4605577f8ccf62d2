"""The training-data readers and writers of :mod:`nnue_infer.io.training_data`: values the formats
cannot keep are refused, damaged compressed input is a :class:`TrainingDataError`, outputs name
themselves (in errors and in a gzip header)."""

from __future__ import annotations

import gzip
import os

import pytest
from conftest import shared_dir

from nnue_infer.errors import TrainingDataError
from nnue_infer.io import training_data as td

FEN = "4k3/8/8/8/8/8/8/4K3 w - - 0 {}"


@pytest.fixture(scope="module")
def bp():
    return shared_dir() / "data" / "binpack"


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

"""Hostile inputs to the training-data readers, writers and ``nnue-infer data`` (findings of a
hostile trial): each must give an error naming the file and the byte offset or row and the
problem (no traceback, no crash, no silent wrong data) and leave no output behind."""

from __future__ import annotations

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

"""Hostile inputs and output directories for dataset scoring (nnue_infer.io.distributed.score_files, in process).

Each test is a way a careless or malicious user broke the scoring path: the standard is a clear error
that names the problem (file, row, field), no traceback, no silent wrong row, nothing changed by a
refused run, and a re-run after a failure that gives exactly the rows of a clean run.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="needs the dask extra: pip install -e '.[dask]'")
pytest.importorskip("distributed", reason="needs the dask extra: pip install -e '.[dask]'")
import pyarrow.parquet as pq  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.io import distributed as D  # noqa: E402


@pytest.fixture(scope="module")
def fens(data_dir):
    with open(data_dir / "positions-dev.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["fen"] for line in f][:40]


def dataset_rows(out) -> list[tuple]:
    """(source, line, fen, value) of every row of the dataset ``out``, sorted."""
    t = pq.read_table(out, columns=["source", "line", "fen", "value"]).to_pydict()
    return sorted(zip(t["source"], t["line"], t["fen"], t["value"]))


def errors_rows(out) -> list[tuple]:
    """(line, message) of the errors table of ``out``, sorted by line."""
    t = pq.read_table(os.path.join(out, D.ERRORS_DIR)).to_pydict()
    return sorted(zip(t["line"], t["message"]), key=lambda r: (r[0] is None, r[0]))


# --- Input names: a file whose name holds glob characters --------------------------------------------------------

def test_a_file_named_like_a_glob_pattern_is_that_file(tmp_path, fens):
    """``a[1].epd`` exists: it is scored, not ``a1.epd`` (which the pattern ``a[1].epd`` matches)."""
    (tmp_path / "a[1].epd").write_text("\n".join(fens[:3]) + "\n")
    (tmp_path / "a1.epd").write_text("\n".join(fens[3:9]) + "\n")
    assert D.expand_inputs(str(tmp_path / "a[1].epd")) == [str(tmp_path / "a[1].epd")]
    out = tmp_path / "out"
    D.score_files(str(tmp_path / "a[1].epd"), str(out))
    rows = dataset_rows(out)
    assert [(s, line, f) for s, line, f, _ in rows] == [(str(tmp_path / "a[1].epd"), i + 1, f)
                                                        for i, f in enumerate(fens[:3])]
    # a pattern still matches (the literal name is only taken when it names a file)
    assert D.expand_inputs(str(tmp_path / "a[12].epd")) == [str(tmp_path / "a1.epd")]

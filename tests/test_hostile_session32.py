"""Hostile pass over the changes of session 32: FEN batches in chunks, Parquet text columns, dataset scoring.

Each test is a way a careless or malicious user (or a file system changing under a job) broke one of the
session's new paths: the standard is a clear error naming the problem, never a traceback, a silent wrong
value or a changed dataset.
"""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("pyarrow", reason="needs the dask extra: pip install -e '.[dask]'")
pytest.importorskip("distributed", reason="needs the dask extra: pip install -e '.[dask]'")

from nnue_infer.io import distributed as D  # noqa: E402


@pytest.fixture(scope="module")
def fens(data_dir):
    with open(data_dir / "positions-dev.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["fen"] for line in f][:40]


# --- score_files: ScoreReport.changed -----------------------------------------------------------------------------

def test_an_input_replaced_by_a_directory_during_the_job_is_reported(tmp_path, fens):
    """An input removed and replaced by a directory of the same name while the job ran (its task then cannot read
    it): the report named nothing and ``score_files`` raised ``TypeError: 'NoneType' object is not subscriptable``
    after the job, from the check of changed inputs (a stamp of ``None`` for what is no longer a regular file);
    now the job completes, the input's task is a failed one and the report names the change."""
    (tmp_path / "a.epd").write_text("\n".join(fens[:4]) + "\n")
    (tmp_path / "b.epd").write_text("\n".join(fens[4:8]) + "\n")

    def replace(summary):
        if summary["input"].endswith("a.epd"):
            os.remove(tmp_path / "b.epd")
            os.mkdir(tmp_path / "b.epd")

    report = D.score_files([str(tmp_path / "a.epd"), str(tmp_path / "b.epd")], str(tmp_path / "out"),
                           progress=replace)
    assert report.rows == 4 and len(report.failed) == 1
    assert report.changed == [f"{tmp_path / 'b.epd'}: changed while it was scored (is no longer a regular file): "
                              "its rows in the dataset are the file as its tasks read it; score it again into "
                              "another output directory, or delete its parts"]

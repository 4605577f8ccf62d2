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
from nnue_infer.io.distributed import workers  # noqa: E402


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


# --- evaluate_batch on FEN strings, in chunks ----------------------------------------------------------------------

def test_fen_chunks_name_rows_of_the_whole_list(evaluator, fens, monkeypatch):
    """Over 131,072 rows (three chunks of ``batch.FEN_CHUNK_ROWS``), and with 7-row chunks: the values of each FEN
    alone; a bad FEN, a FEN python-chess reads (Unicode spaces) that lacks a field, and a wrong-typed element at
    and around chunk boundaries are named by their row in the whole list; a row python-chess reads is evaluated
    in any chunk; a wrong-typed row is the error even after a bad FEN of an earlier chunk (as the docstring says)."""
    import chess
    import numpy as np

    from nnue_infer import FenError, batch

    alone = np.array([evaluator.evaluate(f) for f in fens], np.int32)
    many = (fens * (131_072 // len(fens) + 3))[:131_100]
    want = np.resize(alone, len(many))
    assert np.array_equal(evaluator.evaluate_batch(tuple(many)), want)
    for size, rows in ((batch.FEN_CHUNK_ROWS, (65_535, 65_536, 131_072, 131_099)), (7, (0, 6, 7, 13, 14))):
        monkeypatch.setattr(batch, "FEN_CHUNK_ROWS", size)
        for i in rows:
            bad = list(many)
            bad[i] = many[i].replace(" ", "\u2003")
            assert np.array_equal(evaluator.evaluate_batch(f for f in bad), want)
            bad[i] = "\u2003".join(many[i].split()[:3])
            with pytest.raises(FenError, match=rf"^row {i}: FEN .* has no en passant square field"):
                evaluator.evaluate_batch(bad)
            bad[i] = many[i][:-1] + "x"
            with pytest.raises(FenError, match=rf"^row {i}: "):
                evaluator.evaluate_batch(bad)
            if i + 1 < len(bad):  # (a board in row 0 would make it a list of boards)
                bad[i + 1] = chess.Board()
                with pytest.raises(TypeError, match=rf"^row {i + 1}: expected a FEN string like the rows before"):
                    evaluator.evaluate_batch(bad)


# --- Parquet text columns --------------------------------------------------------------------------------------------

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


# --- score_files on a cluster: relative names --------------------------------------------------------------------

def test_a_relative_network_file_reaches_workers_in_other_directories(tmp_path, fens, network_path, monkeypatch):
    """The inputs and the output are made absolute before they go to the workers, but the network file was not:
    with ``network="nets/sf.nnue"`` and workers started in another directory, the job failed at their warm-up
    with ``NetworkNotFoundError: 'nets/sf.nnue' is no known network name and no file``, after the output
    directory and its manifest were made.  Now it is resolved as the inputs, and the manifest keeps the name."""
    from distributed import Client, LocalCluster

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.epd").write_text("\n".join(fens[:6]) + "\n")
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "sf.nnue").symlink_to(network_path)
    (tmp_path / "elsewhere").mkdir()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as lc, Client(lc) as client:
        client.run(os.chdir, str(tmp_path / "elsewhere"))
        monkeypatch.chdir(tmp_path)
        report = D.score_files("in/a.epd", "out", "nets/sf.nnue", client, threads=1)
    assert (report.rows, report.errors, report.failed) == (6, 0, [])
    with open(tmp_path / "out" / D.MANIFEST) as f:
        assert json.load(f)["network"] == "nets/sf.nnue"
    assert os.listdir(tmp_path / "elsewhere") == []


def test_a_directory_named_like_a_known_network_does_not_turn_the_name_into_a_path(tmp_path, monkeypatch):
    """A folder named ``sf16`` in the client's directory made ``network="sf16"`` go to the workers as that folder's
    absolute path (``os.path.exists``), which no worker can load, where ``network_from_spec`` reads the name (a
    regular file alone takes a known name over: hostile pass of stop 33).  Files named relative to the client are
    still made absolute, and built-in names stay names whatever files exist."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sf16").mkdir()
    (tmp_path / "default").write_bytes(b"")
    (tmp_path / "nets").mkdir()
    assert workers._absolute_network("sf16") == "sf16"
    assert workers._absolute_network("default") == "default"
    assert workers._absolute_network("nets/my.nnue") == str(tmp_path / "nets" / "my.nnue")


def test_a_relative_network_file_reaches_the_partitions_of_a_dataframe(tmp_path, fens, network_path, monkeypatch):
    """``evaluate_dataframe(ddf, network="nets/sf.nnue")`` computed on workers in another directory: each partition
    failed with ``NetworkNotFoundError``; now the name is resolved where the frame is built, as ``score_files``'."""
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster

    import nnue_infer

    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "sf.nnue").symlink_to(network_path)
    (tmp_path / "elsewhere").mkdir()
    ddf = dd.from_pandas(pd.DataFrame({"fen": fens[:6]}), npartitions=2)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as lc, Client(lc) as client:
        client.run(os.chdir, str(tmp_path / "elsewhere"))
        monkeypatch.chdir(tmp_path)
        values = D.evaluate_dataframe(ddf, network="nets/sf.nnue", threads=1).compute()["value"].tolist()
    assert values == nnue_infer.Evaluator(nnue_infer.load(network_path)).evaluate_batch(fens[:6]).tolist()

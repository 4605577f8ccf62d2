"""``.binpack`` inputs of the Dask scale-out (nnue_infer.io.distributed): one task per range of
whole blocks, each row exactly once with evaluate_batch's value, re-runs skip finished ranges."""

from __future__ import annotations

import pytest

pytest.importorskip("distributed", reason="needs the dask extra: pip install -e '.[dask]'")
pq = pytest.importorskip("pyarrow.parquet", reason="needs the dask extra: pip install -e '.[dask]'")

from tests.conftest import shared_dir  # noqa: E402
from nnue_infer.io import distributed as D  # noqa: E402
from nnue_infer.io import training_data as td  # noqa: E402

pytestmark = pytest.mark.usefixtures("dask_timeouts")  # local clusters on a busy machine


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """Three copies of the tools' selfplay.binpack in one file of three blocks, and its rows."""
    rows = td.read(shared_dir() / "data" / "binpack" / "selfplay.binpack")
    data = td.TrainingData.concat([rows] * 15)
    path = tmp_path_factory.mktemp("bp") / "big.binpack"
    td.write(data, path)
    return str(path), td.read(path)


def test_binpack_tasks_by_block_range(big, tmp_path, network_path, evaluator):
    path, data = big
    tasks = D.tasks_of(path, binpack_task_bytes=1)
    assert len(tasks) >= 2 and all(t.count == len(tasks) and t.kind == "binpack" for t in tasks)
    out = str(tmp_path / "out")
    report = D.score_files(path, out, str(network_path), binpack_task_bytes=1)
    assert len(report.parts) == len(tasks) and report.rows == len(data) and report.errors == 0
    table = pq.read_table(out).to_pydict()
    assert sorted(zip(table["fen"], table["uci"])) == sorted(zip(data.fens(), data.uci()))
    values = dict(zip(data.fens(), evaluator.evaluate_batch(data.fens()).tolist()))
    assert all(values[f] == v for f, v in zip(table["fen"], table["value"]))
    assert set(table["outcome"]) == {"none"} and table["line"] == [None] * len(data)
    again = D.score_files(path, out, str(network_path), binpack_task_bytes=1)
    assert again.skipped == len(tasks) and again.rows == len(data)


def test_binpack_on_a_local_cluster(big, tmp_path, network_path):
    from distributed import Client, LocalCluster

    path, data = big
    out = str(tmp_path / "out")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0",
                      worker_dashboard_address=":0") as lc, Client(lc) as client:
        report = D.score_files(path, out, str(network_path), client, threads=1, binpack_task_bytes=1)
    assert [p["part"] for p in report.parts] == [f"{out}/{t.part}" for t in D.tasks_of(path, 1)]
    assert report.rows == len(data) and not report.skipped
    inproc = str(tmp_path / "inproc")
    D.score_files(path, inproc, str(network_path), binpack_task_bytes=1)
    columns = ["game", "ply", "fen", "value"]
    assert pq.read_table(out, columns=columns).to_pydict() == pq.read_table(inproc, columns=columns).to_pydict()

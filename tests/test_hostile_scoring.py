"""Hostile inputs and output directories for dataset scoring (nnue_infer.io.distributed.score_files, in process).

Each test is a way a careless or malicious user broke the scoring path: the standard is a clear error
that names the problem (file, row, field), no traceback, no silent wrong row, nothing changed by a
refused run, and a re-run after a failure that gives exactly the rows of a clean run.
"""

from __future__ import annotations

import json
import os
import re

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
    """(source, line, fen, value) of every row of the parts of the dataset ``out``, sorted."""
    parts = sorted(os.path.join(out, p) for p in os.listdir(out) if p.startswith("part-"))
    t = pa.concat_tables([pq.read_table(p, columns=["source", "line", "fen", "value"]) for p in parts]).to_pydict()
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


# --- A damaged manifest ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", [
    pytest.param(lambda text: text[:len(text) // 2], id="truncated"),
    pytest.param(lambda text: "", id="empty"),
    pytest.param(lambda text: "[1, 2]", id="a-list"),
    pytest.param(lambda text: "\udcff\udcfe", id="not-utf8"),
    pytest.param(lambda text: json.dumps(json.loads(text) | {"ranges": "x"}), id="ranges-not-an-object"),
    pytest.param(lambda text: json.dumps(json.loads(text) | {"sizes": [1]}), id="sizes-not-an-object"),
    pytest.param(lambda text: json.dumps(json.loads(text) | {"ranges": {"/x": {"ranges": [[0, "a"]]}}}),
                 id="a-range-not-integers"),
])
def test_a_damaged_manifest_is_named_and_changes_nothing(tmp_path, fens, damage):
    """A manifest edited or cut short: a ``ValueError`` naming it (was ``JSONDecodeError`` without the file's
    name, ``AttributeError`` or ``TypeError`` tracebacks), and the directory is left as it was."""
    src = tmp_path / "a.epd"
    src.write_text("\n".join(fens[:5]) + "\n")
    out = tmp_path / "out"
    D.score_files(str(src), str(out))
    manifest = out / D.MANIFEST
    manifest.write_bytes(damage(manifest.read_text()).encode("utf-8", "surrogateescape"))
    os.remove(out / D.part_name(str(src)))  # a task to do: the re-run must read the plans
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=re.escape(f"{manifest}: ") + ".*(use another output directory|delete)"):
        D.score_files(str(src), str(out))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_an_errors_table_that_is_a_file_is_named_before_any_work(tmp_path, fens):
    """``out/_errors`` is a file: refused up front naming it (was ``FileExistsError`` from the task that first
    had a bad row, after the other parts were written)."""
    src = tmp_path / "a.epd"
    src.write_text("\n".join(fens[:3] + ["not a fen"]) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / D.ERRORS_DIR).write_text("x")
    with pytest.raises(NotADirectoryError, match=re.escape(str(out / D.ERRORS_DIR))):
        D.score_files(str(src), str(out))
    assert sorted(os.listdir(out)) == [D.ERRORS_DIR]


# --- Parquet inputs: odd column types and cells ----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["dictionary", "string_view", "large_string"])
def test_parquet_text_in_any_arrow_string_type_is_scored(tmp_path, fens, kind):
    """A FEN column of dictionary-encoded strings (pandas' ``category``) or string views is text: scored as
    ``string`` is (was refused: "holds dictionary<values=string, ...>, not text")."""
    cells = pa.array(fens[:6] + [None])
    cells = {"dictionary": cells.dictionary_encode(), "string_view": cells.cast(pa.string_view()),
             "large_string": cells.cast(pa.large_string())}[kind]
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"fen": cells}), src)
    out = tmp_path / "out"
    report = D.score_files(str(src), str(out))
    assert (report.rows, report.errors) == (6, 1)
    rows = dataset_rows(out)
    assert [(line, f) for _, line, f, _ in rows] == [(i + 1, f) for i, f in enumerate(fens[:6])]
    np.testing.assert_array_equal([v for *_, v in rows], nnue_infer.evaluate_batch(fens[:6]))
    assert errors_rows(out) == [(7, "row 7: a null cell")]


def test_two_fen_columns_are_named(tmp_path, fens):
    """Two columns named ``fen`` (Arrow allows it): was pyarrow's "Column fen does not exist in schema"."""
    src = tmp_path / "a.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(fens[:2]), pa.array(fens[2:4])], names=["fen", "fen"]), src)
    with pytest.raises(ValueError, match=re.escape(f"{src}: 2 columns are named 'fen'")):
        D.score_files(str(src), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_a_binary_fen_column_is_named(tmp_path, fens):
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"fen": pa.array([f.encode() for f in fens[:2]])}), src)
    with pytest.raises(ValueError, match=re.escape(f"{src}: column 'fen' holds binary, not text")):
        D.score_files(str(src), str(tmp_path / "out"))


def test_a_parquet_cell_with_a_nul_byte_or_too_long_is_one_error_row(tmp_path, fens):
    """One cell holding a NUL byte, or longer than any line of an EPD file may be, is an error row naming the
    cell; the input's other rows are scored (was: the whole input refused as "binary data, not an EPD/FEN
    text file", naming the row as a line)."""
    from nnue_infer.io.epd import MAX_LINE_BYTES

    cells = [fens[0], fens[1] + "\0", fens[2], "x" * (MAX_LINE_BYTES + 1), fens[3]]
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"fen": cells}), src)
    out = tmp_path / "out"
    report = D.score_files(str(src), str(out))
    assert (report.rows, report.errors, report.failed) == (3, 2, [])
    assert [(line, f) for _, line, f, _ in dataset_rows(out)] == [(1, fens[0]), (3, fens[2]), (5, fens[3])]
    assert errors_rows(out) == [(2, "row 2: a NUL byte in the cell"),
                                (4, f"row 4: a cell longer than {MAX_LINE_BYTES} bytes")]


# --- Re-runs: exactly the rows of a clean run ------------------------------------------------------------------------

def test_a_pattern_over_the_output_directory_does_not_score_its_own_parts(tmp_path, fens):
    """Parquet inputs in the directory the dataset goes to, named by a pattern: a re-run matched the dataset's
    own parts and scored them as inputs (each re-run added a generation of duplicated rows)."""
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"fen": fens[:7]}), data / "in.parquet")
    pattern = str(data / "*.parquet")
    first = D.score_files(pattern, str(data))
    clean = dataset_rows(data)
    assert first.rows == len(clean) == 7
    again = D.score_files(pattern, str(data))
    assert (again.rows, again.skipped, len(again.parts)) == (7, 1, 1)
    assert dataset_rows(data) == clean
    with pytest.raises(FileNotFoundError, match="only files of the output dataset"):
        D.score_files(str(data / "part-*.parquet"), str(data))
    # a user's own shards named part-*, beside the dataset, are inputs
    pq.write_table(pa.table({"fen": fens[7:9]}), data / "part-2.parquet")
    assert D.score_files(pattern, str(data)).rows == 9


def test_a_pattern_over_the_output_directory_passes_over_its_manifest(tmp_path, fens):
    """``data/*`` scored into ``data``: the re-run matched the manifest and the lock, and was refused
    ("unknown input kind '.json'")."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.epd").write_text("\n".join(fens[:5]) + "\n")
    D.score_files(str(data / "*"), str(data))
    clean = dataset_rows(data)
    again = D.score_files(str(data / "*"), str(data))
    assert (again.rows, again.skipped) == (5, 1)
    assert dataset_rows(data) == clean


def test_parts_without_a_manifest_are_refused(tmp_path, fens):
    """The manifest deleted (or lost) beside the parts of a split input: a re-run with another task size planned
    other ranges and wrote every row a second time; refused, naming the parts, and nothing is changed."""
    src = tmp_path / "big.epd"
    src.write_text("\n".join(fens * 10) + "\n")
    out = tmp_path / "out"
    D.score_files(str(src), str(out), split_bytes=8000)
    parts = sorted(p for p in os.listdir(out) if p.startswith("part-"))
    assert len(parts) > 1
    os.remove(out / D.MANIFEST)
    before = sorted(os.listdir(out))
    with pytest.raises(ValueError, match=re.escape(f"{out} holds parts ({parts[0]}") + ".*no manifest"):
        D.score_files(str(src), str(out), split_bytes=12000)
    assert sorted(os.listdir(out)) == before
    # a user's own shards named part-*: inputs, scored into their own directory, are no dataset's parts
    data = tmp_path / "data"
    data.mkdir()
    (data / "part-1.epd").write_text("\n".join(fens[:3]) + "\n")
    assert D.score_files(str(data / "part-*"), str(data)).rows == 3
    assert D.score_files(str(data / "part-*"), str(data)).skipped == 1


def test_hard_links_to_one_file_are_scored_once(tmp_path, fens):
    """Two hard links to one file (two names, no link to resolve): each was scored, every row twice."""
    a = tmp_path / "a.epd"
    a.write_text("\n".join(fens[:4]) + "\n")
    os.link(a, tmp_path / "b.epd")
    assert D.expand_inputs([str(tmp_path / "*.epd")]) == [str(a)]
    out = tmp_path / "out"
    assert D.score_files(str(tmp_path / "*.epd"), str(out)).rows == 4
    assert [(s, line) for s, line, _, _ in dataset_rows(out)] == [(str(a), i + 1) for i in range(4)]


@pytest.mark.parametrize("column, problem", [("nope", "no column 'nope' (columns: fen, n)"),
                                             ("n", "column 'n' holds int64, not text")])
def test_a_parquet_input_without_the_fen_column_fails_before_any_work(tmp_path, fens, column, problem):
    """The FEN column missing from (or not text in) one Parquet input: refused before any part is written (the
    job stopped at that input's task, after scoring the inputs before it)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.epd").write_text("\n".join(fens[:3]) + "\n")
    pq.write_table(pa.table({"fen": fens[3:6], "n": [1, 2, 3]}), tmp_path / "in" / "b.parquet")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'in' / 'b.parquet'}: {problem}")):
        D.score_files(str(tmp_path / "in" / "*"), str(out), column=column)
    assert not out.exists()


# --- evaluate_dataframe --------------------------------------------------------------------------------------------

def test_evaluate_dataframe_names_the_index_of_a_bad_fen(fens):
    """A bad cell in the third partition: the error names its index label (was "row 1", its position within
    a partition the caller never sees)."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import dask

    from nnue_infer.errors import FenError

    df = pd.DataFrame({"fen": fens[:5] + ["not a fen"] + fens[5:8]}, index=range(100, 109))
    ddf = dd.from_pandas(df, npartitions=3)
    with dask.config.set(scheduler="sync"), pytest.raises(FenError, match=r"^'fen' at index 105: invalid character"):
        D.evaluate_dataframe(ddf).compute()
    nulls = pd.DataFrame({"fen": [fens[0], None, fens[1]]}, index=np.array([10, 11, 12], np.int64))
    with dask.config.set(scheduler="sync"), pytest.raises(TypeError, match=r"^'fen' at index 11: a null cell, not a"):
        D.evaluate_dataframe(dd.from_pandas(nulls, npartitions=1)).compute()  # (was "np.int64(11): ... NAType")
    good = D.evaluate_dataframe(dd.from_pandas(df.drop(index=105), npartitions=3))
    with dask.config.set(scheduler="sync"):
        np.testing.assert_array_equal(good.compute()["value"].to_numpy(), nnue_infer.evaluate_batch(fens[:8]))


def test_evaluate_dataframe_without_the_column_is_refused_at_once(fens):
    """A column that is not there: a ``KeyError`` naming it and the columns when the frame is built (was a bare
    ``KeyError: 'fen'`` from a worker at compute time)."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    ddf = dd.from_pandas(pd.DataFrame({"position": fens[:3]}), npartitions=1)
    with pytest.raises(KeyError, match=r"no column 'fen' \(columns: position\)"):
        D.evaluate_dataframe(ddf)


def test_a_file_name_that_is_not_utf8_is_refused_before_any_work(tmp_path, fens):
    """An input whose name is not UTF-8 (bytes of another encoding): a ``UnicodeEncodeError`` without the name
    while planning, and once past that a ``source`` column of invalid UTF-8 that readers cannot decode;
    refused up front, naming the file."""
    name = os.fsdecode(b"caf\xe9.epd")
    try:
        (tmp_path / name).write_text("\n".join(fens[:2]) + "\n")
    except (OSError, UnicodeError):
        pytest.skip("this file system takes UTF-8 names only")
    (tmp_path / "b.epd").write_text("\n".join(fens[2:4]) + "\n")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=re.escape(repr(str(tmp_path / name))) + ": the file name is not UTF-8"):
        D.score_files(str(tmp_path / "*.epd"), str(out))
    assert not out.exists()


def test_epd_operations_do_not_change_which_rows_a_dataset_keeps(tmp_path, fens):
    """A 9 MiB EPD file whose last line has an opcode the lines before lack: scored whole (one task) that row was
    an error ("first appears after the first chunk"), scored in ranges it was a position; datasets keep no
    operations, so every row must be scored, whatever the task size."""
    from nnue_infer.io.epd import CHUNK_BYTES

    pad = "x" * 1000
    n = CHUNK_BYTES // 1000 + 500
    lines = [f'{fens[i % len(fens)]} id "{pad}";' for i in range(n)]
    lines[-1] = f"{fens[0]} bm e4;"
    src = tmp_path / "ops.epd"
    src.write_text("\n".join(lines) + "\n")
    whole = D.score_files(str(src), str(tmp_path / "whole"), split_bytes=1 << 30)
    split = D.score_files(str(src), str(tmp_path / "split"), split_bytes=CHUNK_BYTES // 2)
    assert (split.rows, split.errors) == (n, 0)
    assert (whole.rows, whole.errors) == (n, 0)


@pytest.mark.parametrize("damage", [lambda data: b"garbage", lambda data: data[:len(data) // 2]],
                         ids=["garbage", "cut-short"])
@pytest.mark.parametrize("which", ["part", "errors part"])
def test_a_damaged_part_is_scored_again_and_named(tmp_path, fens, damage, which, caplog):
    """A part or its errors part cut short or overwritten (a copy interrupted, a disk error, a stray file under its
    name): the re-run scores its task again, giving the clean run's rows and errors, and the warning names the
    file it could not read."""
    import logging

    src = tmp_path / "a.epd"
    src.write_text("\n".join([*fens[:6], "not a fen"]) + "\n")
    out = tmp_path / "out"
    D.score_files(str(src), str(out))
    clean = dataset_rows(out), pq.read_table(out / D.ERRORS_DIR).to_pydict()
    part = out / D.part_name(str(src))
    damaged = part if which == "part" else out / D.ERRORS_DIR / part.name
    damaged.write_bytes(damage(damaged.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="nnue_infer.io"):
        report = D.score_files(str(src), str(out))
    assert (report.rows, report.errors, report.skipped) == (6, 1, 0)
    assert (dataset_rows(out), pq.read_table(out / D.ERRORS_DIR).to_pydict()) == clean
    assert [r.getMessage().split(": ")[0] for r in caplog.records] == [str(damaged)]


@pytest.mark.parametrize("threads", [0, -3, 2.5, True])
def test_threads_must_be_a_positive_integer(tmp_path, fens, threads):
    """``threads=-3`` ran on one thread, ``threads=0`` on all cores, ``2.5`` went to Numba as it was: refused up
    front, as the task sizes are; ``None`` is the default (every core)."""
    src = tmp_path / "a.epd"
    src.write_text(fens[0] + "\n")
    with pytest.raises(ValueError, match=re.escape(f"threads must be a positive integer, got {threads!r}")):
        D.score_files(str(src), str(tmp_path / "out"), threads=threads)
    assert not (tmp_path / "out").exists()
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    with pytest.raises(ValueError, match=re.escape(f"threads must be a positive integer, got {threads!r}")):
        D.evaluate_dataframe(dd.from_pandas(pd.DataFrame({"fen": fens[:2]}), npartitions=1), threads=threads)


def test_the_cli_passes_over_the_files_of_its_output_dataset(tmp_path, fens, capsys, monkeypatch):
    """``eval --epd 'data/*' --workers N -o data`` a second time: the CLI's own check of each file's kind met the
    manifest and stopped ("unknown input kind '.json'") before the job could skip it.  (The job itself is
    stubbed: what is checked is what the CLI hands it.)"""
    from nnue_infer.cli import main

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.epd").write_text("\n".join(fens[:3]) + "\n")
    D.score_files(str(data / "*"), str(data))
    handed = []
    monkeypatch.setattr(D, "run_job", lambda inputs, output, *a, **k: handed.append((inputs, output)) or 0)
    status = main(["eval", "--epd", str(data / "*"), "--workers", "1", "-o", str(data)])
    assert status == 0, capsys.readouterr().err
    assert handed == [([str(data / "*")], str(data))]


def test_the_cli_refuses_a_local_cluster_larger_than_the_machine(tmp_path, fens, capsys, monkeypatch):
    """``eval --workers 100000`` started as many worker processes (each with the network): more than 4 per core (at
    least 8) is a usage error naming the option, before any process or directory is made."""
    from nnue_infer.cli import eval as E
    from nnue_infer.cli import main

    (tmp_path / "a.epd").write_text(fens[0] + "\n")
    handed = []
    monkeypatch.setattr(D, "run_job", lambda inputs, output, *a, **k: handed.append(k["workers"]) or 0)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    most = max(E.MAX_LOCAL_WORKERS_PER_CORE * usable, 8)
    assert main(["eval", "--epd", str(tmp_path / "a.epd"), "--workers", str(most + 1), "-o", str(tmp_path / "o")]) == 2
    assert f"Invalid value for '--workers': {most + 1} local worker processes is more than {most}" in \
        capsys.readouterr().err
    assert not (tmp_path / "o").exists() and handed == []
    assert main(["eval", "--epd", str(tmp_path / "a.epd"), "--workers", str(most), "-o", str(tmp_path / "o")]) == 0
    assert handed == [most]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity masks on this system")
def test_the_local_cluster_limit_counts_the_cpus_this_process_may_use(tmp_path, fens, capsys, monkeypatch):
    """The ``--workers`` limit counted ``os.cpu_count()``, the machine's CPUs, not the ones a container or ``taskset``
    leaves the process: 3 usable CPUs of 64 allow 12 workers, not 256."""
    from nnue_infer.cli import eval as E
    from nnue_infer.cli import main

    (tmp_path / "a.epd").write_text(fens[0] + "\n")
    handed = []
    monkeypatch.setattr(D, "run_job", lambda inputs, output, *a, **k: handed.append(k["workers"]) or 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    most = 3 * E.MAX_LOCAL_WORKERS_PER_CORE
    assert main(["eval", "--epd", str(tmp_path / "a.epd"), "--workers", str(most + 1), "-o", str(tmp_path / "o")]) == 2
    assert f"{most + 1} local worker processes is more than {most}" in capsys.readouterr().err and handed == []
    assert main(["eval", "--epd", str(tmp_path / "a.epd"), "--workers", str(most), "-o", str(tmp_path / "o")]) == 0
    assert handed == [most]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity masks on this system")
@pytest.mark.parametrize("workers, threads", [(None, 1), (3, 1), (1, 3)])
def test_a_local_cluster_shares_the_cpus_this_process_may_use(tmp_path, fens, monkeypatch, workers, threads):
    """``run_job``'s local cluster counted ``os.cpu_count()``: with 3 usable CPUs of 64 it started 64 workers
    (``--workers`` not given) or gave each of 3 workers 21 Numba threads; now the usable CPUs are shared."""
    import distributed

    (tmp_path / "a.epd").write_text(fens[0] + "\n")
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    seen = {}

    class Stop(Exception):
        pass

    def cluster(**kwargs):
        seen["workers"] = kwargs["n_workers"]
        raise Stop

    monkeypatch.setattr(D, "warm_up", lambda network, threads: seen.update(threads=threads))
    monkeypatch.setattr(distributed, "LocalCluster", cluster)
    with pytest.raises(Stop):
        D.run_job([str(tmp_path / "a.epd")], str(tmp_path / "o"), "default", workers=workers, progress=False)
    assert seen == {"threads": threads, "workers": workers or 3}


def test_an_input_changed_during_the_job_is_reported(tmp_path, fens):
    """An input appended to while the job ran (a log still being written): its rows are the file as its task read
    it, and the job said nothing (the next run refused it as "changed since planned"); now the report names it,
    and an input nobody touched is not named."""
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.epd").write_text("\n".join(fens[:4]) + "\n")
    (inp / "b.epd").write_text("\n".join(fens[4:8]) + "\n")

    def append(summary):
        if summary["input"].endswith("a.epd"):
            with open(inp / "a.epd", "a") as f:
                f.write(fens[9] + "\n")

    report = D.score_files(str(inp / "*.epd"), str(tmp_path / "out"), progress=append)
    assert report.rows == 8 and len(report.changed) == 1
    assert report.changed[0].startswith(f"{inp / 'a.epd'}: changed while it was scored (was ")
    again = D.score_files(str(inp / "b.epd"), str(tmp_path / "out2"))
    assert again.changed == [] and again.rows == 4


# --- PGN games python-chess reads (Chess960, or without the Rust parser) ---------------------------------------------

BROKEN_960 = '[Event "a"]\n[Variant "Chess960"]\n\n1. e4 e4 ) d5 *\n\n[Event "b"]\n\n1. d4 d5 *\n'


def test_a_stray_parenthesis_after_an_illegal_move_ends_the_game_there(tmp_path):
    """An illegal move, then ``)`` and another move, in a game python-chess reads (a ``Variant`` tag): python-chess
    raised ``IndexError`` from ``read_game``, which stopped the whole job with a traceback (later: one error row
    for the game, its rows lost).  Now the game keeps its rows before the illegal move and gets one error row
    naming it, as the Rust parser gives (python-chess alone would play on after the ``)``); the other games are
    scored."""
    src = tmp_path / "g.pgn"
    src.write_text(BROKEN_960)
    out = tmp_path / "out"
    report = D.score_files(str(src), str(out))
    assert (report.rows, report.errors, report.failed) == (5, 1, [])
    t = pq.read_table(out, columns=["game", "ply", "event"]).to_pydict()
    assert sorted(zip(*t.values())) == [(1, 0, "a"), (1, 1, "a"), (2, 0, "b"), (2, 1, "b"), (2, 2, "b")]
    e = pq.read_table(out / D.ERRORS_DIR).to_pydict()
    assert (e["game"], e["ply"]) == ([1], [2])
    assert e["message"][0].startswith("illegal san: 'e4'")


def test_the_python_parser_gives_the_same_error_row():
    """The same game through ``parser="python-chess"`` (the path without the Rust parser): one error row, not a crash,
    and the game's rows before it; the Rust parser gives the same rows."""
    import io

    from nnue_infer.evaluator import Evaluator
    from nnue_infer.io.score import score_pgn

    ev = Evaluator(nnue_infer.default_network())
    text = BROKEN_960.replace('[Variant "Chess960"]\n', "")
    rows = {}
    for parser in ("python-chess", "rust"):
        tables = [t for t, _ in score_pgn(ev, io.StringIO(text), parser=parser)]
        errors = [m for t in tables for m in t["error"].to_list() if m]
        assert len(errors) == 1 and "e4" in errors[0]
        rows[parser] = [(g, p) for t in tables for g, p in zip(t["game"].tolist(), t["ply"].tolist())]
    assert rows["python-chess"] == rows["rust"] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]


def test_a_parquet_input_cut_short_during_a_job_names_it(tmp_path, fens):
    """A Parquet input rewritten with fewer row groups after it was planned: its later ranges failed with pyarrow's
    "Some index in row_group_indices is 3, ..." (no file named in the job's report); now the message names the
    file and what changed, and the re-run names the parts that hold the old file's rows."""
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"fen": fens[:40]}), src, row_group_size=5)
    out = tmp_path / "out"
    done = []

    def progress(summary):
        if not done:
            pq.write_table(pa.table({"fen": fens[:12]}), src, row_group_size=5)  # 3 row groups, was 8
        done.append(summary)

    report = D.score_files(str(src), str(out), split_rows=10, progress=progress)
    assert len(report.failed) == 3
    assert report.failed[0].startswith(f"{src}: has 3 row groups, not the 4 this task's range ends at: the file "
                                       "changed while it was scored; input not scored (range 2 of 4)")
    with pytest.raises(ValueError, match=re.escape(f"{src}: changed since {out} planned it")):
        D.score_files(str(src), str(out), split_rows=10)


def test_a_parquet_input_that_is_not_parquet_is_named(tmp_path, fens):
    """A ``.parquet`` input that is something else: its task fails with a message naming it, and the other inputs
    are scored, as for a damaged gzip input (was pyarrow's "Parquet magic bytes not found in footer ..." from the
    planning, naming no file, and no input scored)."""
    bad = tmp_path / "in" / "b.parquet"
    bad.parent.mkdir()
    bad.write_text("\n".join(fens[:3]) + "\n")
    (tmp_path / "in" / "a.epd").write_text("\n".join(fens[3:6]) + "\n")
    report = D.score_files(str(tmp_path / "in" / "*"), str(tmp_path / "out"))
    assert report.rows == 3 and len(report.failed) == 1
    assert report.failed[0].startswith(f"{bad}: Parquet magic bytes not found"), report.failed


def test_a_damaged_binpack_input_is_one_error_row_and_the_others_are_scored(tmp_path, fens, data_dir):
    """A ``.binpack`` input cut short: the planning (which finds its blocks) raised ``TrainingDataError`` and no
    input was scored; now, as a damaged gzip input, it is one error row naming it, and the others are scored."""
    (tmp_path / "in").mkdir()
    cut = tmp_path / "in" / "cut.binpack"
    cut.write_bytes((data_dir / "binpack" / "dev-games.binpack").read_bytes()[:5000])
    (tmp_path / "in" / "a.epd").write_text("\n".join(fens[:3]) + "\n")
    report = D.score_files(str(tmp_path / "in" / "*"), str(tmp_path / "out"))
    assert report.rows == 3 and len(report.failed) == 1, report.failed
    assert report.failed[0].startswith(f"{cut}: "), report.failed


# --- EPD streams: the last line without a newline --------------------------------------------------------------------

NO_NEWLINE = b"8/8/8/8/2k5/8/7p/2K5 b - -\n8/8/8/8/8/8/1K1k3p/8 w - - bm e4;"  # (no newline at the end)


def test_an_unfinished_last_line_is_in_the_chunk_before_it():
    """The last line of a file without a final newline came as a chunk of its own, so its opcodes were "after the
    first chunk of the input (8 MiB)" in a file of 62 bytes: an error row, and no ``bm`` column."""
    import io

    from nnue_infer.io.epd import iter_epd, read_epd

    chunks = list(iter_epd(io.BytesIO(NO_NEWLINE)))
    assert len(chunks) == 1 and chunks[0].opcodes() == read_epd(NO_NEWLINE).opcodes() == ["bm"]
    lines = NO_NEWLINE.split(b"\n") * 30  # chunk boundaries still fall between whole lines, numbered on
    data = b"\n".join(lines)
    chunks = list(iter_epd(io.BytesIO(data), chunk_bytes=100))
    assert len(chunks) > 1
    got = [(int(c.line[i]), c.fen[i]) for c in chunks for i in range(len(c))]
    whole = read_epd(data)
    assert got == [(int(whole.line[i]), whole.fen[i]) for i in range(len(whole))]


def test_eval_scores_an_epd_file_without_a_final_newline(tmp_path, capsys):
    from nnue_infer.cli import main

    src = tmp_path / "a.epd"
    src.write_bytes(NO_NEWLINE)
    assert main(["eval", "--epd", str(src)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.splitlines()[0].endswith(",bm") and out.splitlines()[2].endswith(",e4")
    report = D.score_files(str(src), str(tmp_path / "out"))
    assert (report.rows, report.errors) == (2, 0)


def test_compression_suffixes_in_capitals(tmp_path, fens):
    """``GAMES.EPD.GZ``: "unknown input kind '.gz' (expected ..., optionally .gz or .zst)" from a Dask job, though
    ``eval --epd`` in process reads it (the kind's suffix was compared without case, the compression's with)."""
    import gzip

    src = tmp_path / "A.EPD.GZ"
    src.write_bytes(gzip.compress(("\n".join(fens[:4]) + "\n").encode()))
    assert D.input_kind(str(src)) == "epd"
    assert D.score_files(str(src), str(tmp_path / "out")).rows == 4


def test_a_refused_run_does_not_delete_a_directory_another_run_created(tmp_path, fens, monkeypatch):
    """Two runs into a new directory: the second, refused (another network's manifest), deleted the whole directory
    because it did not exist when the second run started, with the first run's manifest and parts in it.  (The
    first run's arrival between the second one's start and its planning is played by a wrapper of ``planning``.)"""
    import contextlib

    src = tmp_path / "a.epd"
    src.write_text("\n".join(fens[:3]) + "\n")
    out = tmp_path / "out"
    real = D.planning

    @contextlib.contextmanager
    def first_run_arrives(out_dir):
        if not out.exists():  # the other run: its directory, its manifest (another network), a part of it
            out.mkdir()
            (out / D.MANIFEST).write_text(json.dumps({"network": "other.nnue", "network_sha256": "0" * 64}))
            (out / "part-theirs.parquet").write_bytes(b"theirs")
        with real(out_dir):
            yield

    monkeypatch.setattr(D, "planning", first_run_arrives)
    with pytest.raises(ValueError, match="holds results of network 'other.nnue'"):
        D.score_files(str(src), str(out))
    assert (out / "part-theirs.parquet").read_bytes() == b"theirs"
    assert json.loads((out / D.MANIFEST).read_text())["network"] == "other.nnue"


def test_a_refused_re_run_keeps_the_errors_tables(tmp_path, fens):
    """Two inputs edited since the first run: one without parts (its task had failed), one with parts (refused).
    The refused re-run had already deleted the first one's errors table."""
    import gzip

    (tmp_path / "in").mkdir()
    a = tmp_path / "in" / "a.epd.gz"
    a.write_bytes(gzip.compress(("\n".join(fens[:3]) + "\n").encode())[:-6])  # damaged: its task fails
    b = tmp_path / "in" / "b.epd"
    b.write_text("\n".join(fens[3:6]) + "\n")
    out = tmp_path / "out"
    assert len(D.score_files(str(tmp_path / "in" / "*"), str(out)).failed) == 1
    a.write_bytes(gzip.compress(("\n".join(fens[:3]) + "\n").encode()))  # mended
    b.write_text("\n".join(fens[3:7]) + "\n")  # edited while its part exists
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=re.escape(f"{b}: changed since")):
        D.score_files(str(tmp_path / "in" / "*"), str(out))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_standard_input_is_named_as_such_for_a_dask_job(tmp_path, capsys):
    """``--epd -`` with ``--workers``: was "no input file matches '-'"."""
    from nnue_infer.cli import main

    status = main(["eval", "--epd", "-", "--workers", "1", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2 and "--epd -: a Dask job's workers read files by name, not the standard input" in err, err
    assert not (tmp_path / "out").exists()


# --- A file whose content is the other kind than its name says --------------------------------------------------------

@pytest.mark.parametrize("name, text, says", [
    ("fens.pgn", None, "this is a FEN/EPD line, not PGN (tag pairs and moves)"),
    ("games.txt", '[Event "x"]\n\n1. e4 e5 *\n', "this is PGN (a tag pair or moves), not a FEN/EPD line"),
])
def test_content_of_the_other_kind_is_refused_naming_the_file(tmp_path, fens, name, text, says):
    """FENs in a ``.pgn`` file were read as movetext: each line a game whose row was the *starting position* (a
    row of a position the file does not hold) and an error; PGN in a ``.txt`` file was an error per line.  As
    ``eval --epd/--pgn`` in process, the job is refused naming the file and line (the call's error: a job reads
    each input by its name's kind).  It is refused before anything is written: a good input scored before it left
    its part, and the refused job the manifest and the lock (reliability pass of stop 33)."""
    src = tmp_path / name
    src.write_text(text or "\n".join(fens[:3]) + "\n")
    (tmp_path / "a.epd").write_text(fens[0] + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{src}:1: {says}") + ".*by its name's kind"):
        D.score_files([str(tmp_path / "a.epd"), str(src)], str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, what", [("image.pgn", "a PGN text file"), ("image.epd", "an EPD/FEN text file")])
def test_a_binary_input_is_refused_naming_the_byte(tmp_path, name, what):
    """An image named ``.pgn`` gave a row of the start position and an error row, named ``.epd`` error rows: binary
    data (a NUL byte among its first bytes) is the job's error, naming the file, the byte offset and its line."""
    src = tmp_path / name
    src.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(nnue_infer.InputKindError,
                       match=re.escape(f"{src}: NUL byte at byte offset 8 (line 3): binary data, not {what}")):
        D.score_files(str(src), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # (refused before planning: no manifest, no lock)


@pytest.mark.usefixtures("dask_timeouts")
def test_eval_workers_with_port_8787_in_use(tmp_path, fens, capsys):
    """Another Dask cluster (a notebook's, another job's) holds port 8787: ``eval --workers`` warned "Port 8787 is
    already in use ... Hosting the HTTP server on port N instead" (its scheduler's HTTP server, though the job
    shows no dashboard), an error under ``filterwarnings=error``: the tests of this CLI failed whenever another
    session on the machine ran a cluster."""
    import contextlib
    import socket

    from nnue_infer.cli import main

    src = tmp_path / "a.epd"
    src.write_text("\n".join(fens[:3]) + "\n")
    with contextlib.closing(socket.socket()) as held:
        with contextlib.suppress(OSError):  # (in use already: the same condition)
            held.bind(("127.0.0.1", 8787))
            held.listen(1)
        assert main(["eval", "--epd", str(src), "--workers", "1", "-o", str(tmp_path / "out")]) == 0
    assert "Port 8787" not in capsys.readouterr().err
    assert pq.read_table(tmp_path / "out").num_rows == 3

"""Dask-distributed scoring (nnue_infer.io.distributed): real local clusters of worker processes.

Each cluster costs a few seconds (worker start, imports, the Numba cache); the inputs are a
few hundred positions, so the whole module stays within tens of seconds.
"""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import signal
import threading
import time

import chess
import numpy as np
import pytest

pytest.importorskip("distributed", reason="needs the dask extra: pip install -e '.[dask]'")
pa = pytest.importorskip("pyarrow", reason="needs the dask extra: pip install -e '.[dask]'")
import pyarrow.parquet as pq  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.io import distributed as D  # noqa: E402
from nnue_infer.io.distributed import manifest, plan, task, workers  # noqa: E402
from nnue_infer.io.distributed import workers  # noqa: E402
from nnue_infer.cli import main
import re
from nnue_infer.io.distributed import job  # noqa: E402

pytestmark = pytest.mark.usefixtures("dask_timeouts")  # local clusters on a busy machine

BAD = ["8/8/8/8/8/8/8/4K3 w - - 0 1", "not a fen"]


@pytest.fixture(scope="module")
def fens(data_dir):
    with open(data_dir / "positions-dev.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["fen"] for line in f][:600]


def write_shards(directory, fens, n=6):
    """n EPD shards (odd ones gzip'd); shard 2 gets two bad rows at lines 3 and 4."""
    directory.mkdir()
    size = len(fens) // n
    expected = []
    for k in range(n):
        part = fens[k * size:(k + 1) * size]
        lines = part[:2] + BAD + part[2:] if k == 2 else part
        name = directory / (f"s{k}.epd.gz" if k % 2 else f"s{k}.epd")
        data = "\n".join(lines) + "\n"
        if k % 2:
            with gzip.open(name, "wt") as f:
                f.write(data)
        else:
            name.write_text(data)
        expected += [(str(name), i + 1, fen) for i, fen in enumerate(lines) if fen not in BAD]
    return expected


def read_dataset(out):
    t = pq.read_table(out, columns=["source", "line", "fen", "value", "cp", "cp_white"]).to_pydict()
    rows = sorted(zip(t["source"], t["line"], t["fen"], t["value"]))
    return rows


def check_complete(out, expected, network):
    """Every expected row exactly once, with evaluate_batch's value."""
    rows = read_dataset(out)
    keys = [(s, line) for s, line, _, _ in rows]
    assert len(keys) == len(set(keys)), "duplicated rows"
    assert [(s, line, f) for s, line, f, _ in rows] == sorted(expected)
    got = np.array([v for *_, v in rows])
    want = nnue_infer.evaluate_batch([f for _, _, f in sorted(expected)], network)
    np.testing.assert_array_equal(got, want)


def cluster(method="spawn", n_workers=2):
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.worker.multiprocessing-method": method}):
        lc = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=":0", worker_dashboard_address=":0")
    return lc, Client(lc)


def test_in_process_errors_table_and_rerun(tmp_path, fens):
    expected = write_shards(tmp_path / "in", fens)
    out = tmp_path / "out"
    report = D.score_files(str(tmp_path / "in" / "*"), str(out), "default")
    assert (report.rows, report.errors, report.skipped) == (len(expected), 2, 0)
    check_complete(out, expected, nnue_infer.default_network())
    errors = pq.read_table(out / D.ERRORS_DIR).to_pydict()
    assert [(os.path.basename(s), line) for s, line in zip(errors["source"], errors["line"])] == [("s2.epd", 3),
                                                                                                   ("s2.epd", 4)]
    assert "Black must have exactly one king" in errors["message"][0]
    assert errors["message"][1] == "invalid character 'o' in the placement field at column 2 of 'not a fen'"
    again = D.score_files(str(tmp_path / "in" / "*"), str(out), "default")
    assert (again.rows, again.skipped) == (len(expected), 6)
    with pytest.raises(ValueError, match="network"):
        D.score_files(str(tmp_path / "in" / "*"), str(out), "stockfish")


def test_killed_worker_mid_job_gives_complete_output(tmp_path, fens):
    """A worker is killed (SIGKILL) while it runs a task: the job still writes every row once.

    The task is held on purpose: its input is a FIFO, so the worker blocks opening it until
    the test writes it, after the kill; Dask reruns the task on a surviving (or restarted) worker.
    """
    expected = write_shards(tmp_path / "in", fens)
    fifo = tmp_path / "in" / "zz-held.epd"
    os.mkfifo(fifo)
    held = fens[-20:]
    expected += [(str(fifo), i + 1, f) for i, f in enumerate(held)]
    out = tmp_path / "out"
    lc, client = cluster()
    try:
        result = {}
        job = threading.Thread(target=lambda: result.update(
            report=D.score_files(str(tmp_path / "in" / "*"), str(out), "default", client, threads=1)))
        job.start()
        victim = None
        deadline = time.monotonic() + 120
        while victim is None and time.monotonic() < deadline:  # the worker running the held task
            for worker, keys in client.processing().items():
                if any(D.part_name(str(fifo)) in str(k) for k in keys):
                    victim = worker
            time.sleep(0.05)
        assert victim is not None, "the held task never started"
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        while victim in client.scheduler_info()["workers"] and time.monotonic() < deadline:
            time.sleep(0.05)  # until the scheduler saw the worker die (no writer may meet the dying reader)
        with open(fifo, "w") as f:  # blocks until the task's retry opens it
            f.write("\n".join(held) + "\n")
        job.join(120)
        assert not job.is_alive()
    finally:
        client.close()
        lc.close()
    assert result["report"].rows == len(expected)
    check_complete(out, expected, nnue_infer.default_network())


START_METHOD_JOB = """
import json, sys
import nnue_infer
from distributed import Client, LocalCluster
from nnue_infer.io import distributed as D

fens = json.loads(sys.argv[1])
nnue_infer.evaluate_batch(fens)  # the parent has used the parallel kernel (and its thread pool) before the workers start
with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0") as lc, \\
        Client(lc) as client:
    D.score_files(sys.argv[2], sys.argv[3], "default", client, threads=2)
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_start_methods(tmp_path, fens, method):
    """Workers started by spawn, forkserver and fork (after the parent ran the parallel batch kernel).

    Dask reads the start method when ``distributed`` is imported, so each runs in a fresh interpreter.
    """
    import subprocess
    import sys

    expected = write_shards(tmp_path / "in", fens[:120], n=2)
    out = tmp_path / "out"
    env = os.environ | {"DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD": method}
    proc = subprocess.run([sys.executable, "-c", START_METHOD_JOB, json.dumps(fens[:50]), str(tmp_path / "in" / "*"),
                           str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_complete(out, expected, nnue_infer.default_network())


def test_evaluate_dataframe(fens):
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd
    from distributed import Client

    df = pd.DataFrame({"fen": fens[:200], "id": np.arange(200)})
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0") as client:
        got = D.evaluate_dataframe(dd.from_pandas(df, npartitions=4), network="default").compute(scheduler=client)
    np.testing.assert_array_equal(got["value"].to_numpy(), nnue_infer.evaluate_batch(fens[:200]))
    assert got["id"].tolist() == list(range(200))
    black = np.array([f.split()[1] == "b" for f in fens[:200]])
    np.testing.assert_array_equal(got["cp_white"].to_numpy(), np.where(black, -got["cp"], got["cp"]))


def test_pgn_and_parquet_inputs_in_process(tmp_path, fens, data_dir):
    """A gzip'd PGN shard (SAN, UCI, headers, values as evaluate_game) and a Parquet shard of FENs."""
    import chess
    import chess.pgn

    with open(data_dir / "games-dev.jsonl", encoding="utf-8") as f:
        games = [json.loads(line) for _, line in zip(range(4), f)]
    text = ""
    for g in games:
        game = chess.pgn.Game.from_board(chess.Board(g["start_fen"]))
        game.headers["White"] = g["id"]
        game.add_line([chess.Move.from_uci(m) for m in g["moves"]])
        text += str(game) + "\n\n"
    (tmp_path / "in").mkdir()
    with gzip.open(tmp_path / "in" / "games.pgn.gz", "wt") as f:
        f.write(text)
    pq.write_table(pa.table({"fen": fens[:30]}), tmp_path / "in" / "fens.parquet")
    out = tmp_path / "out"
    report = D.score_files([str(tmp_path / "in" / "*.pgn.gz"), str(tmp_path / "in" / "*.parquet")], str(out), "default")
    assert report.errors == 0
    t = pq.read_table(out).to_pydict()
    pgn_rows = [i for i, s in enumerate(t["source"]) if s.endswith(".pgn.gz")]
    ev = nnue_infer.Evaluator()
    want = np.concatenate([ev.evaluate_game(chess.Board(g["start_fen"]), g["moves"]) for g in games])
    np.testing.assert_array_equal([t["value"][i] for i in pgn_rows], want)
    first = pgn_rows[:len(games[0]["moves"]) + 1]
    assert [t["uci"][i] for i in first] == [None] + games[0]["moves"]
    assert [t["white"][i] for i in first] == [games[0]["id"]] * len(first)
    board = chess.Board(games[0]["start_fen"])
    sans = [None]
    for m in games[0]["moves"]:
        sans.append(board.san(chess.Move.from_uci(m)))
        board.push_uci(m)
    assert [t["san"][i] for i in first] == sans
    pq_rows = [i for i, s in enumerate(t["source"]) if s.endswith(".parquet")]
    assert [t["line"][i] for i in pq_rows] == list(range(1, 31))
    np.testing.assert_array_equal([t["value"][i] for i in pq_rows], nnue_infer.evaluate_batch(fens[:30]))


def test_cli_parquet_output_and_workers(tmp_path, fens, capsys):
    """``eval --pgn ... -o x.parquet`` holds the CSV's rows; ``eval --epd 'glob' --epd 'glob' --output DIR --workers 1``
    writes the dataset of both patterns' files (exit status 1: the shards' two bad rows, listed in _errors)."""
    import csv
    import io

    from nnue_infer.cli import main

    pgn = tmp_path / "g.pgn"
    pgn.write_text('[Event "e"]\n[White "w"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Bxc6 dxc6 *\n\n1. d4 d5 *\n')
    assert main(["eval", "--pgn", str(pgn), "-o", str(tmp_path / "g.parquet")]) == 0
    assert main(["eval", "--pgn", str(pgn)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    t = pq.read_table(tmp_path / "g.parquet").to_pylist()
    assert [{k: "" if v is None else str(v).lower() if isinstance(v, bool) else str(v) for k, v in r.items()}
            for r in t] == rows
    assert t[7]["san"] == "Bxc6" and t[7]["white"] == "w" and t[-1]["event"] is None
    expected = write_shards(tmp_path / "in", fens[:90], n=3)
    out = tmp_path / "ds"
    status = main(["eval", "--epd", str(tmp_path / "in" / "s[01]*"), "--epd", str(tmp_path / "in" / "s2*"),
                   "--output", str(out), "--workers", "1"])  # every --epd pattern (click kept the last one only)
    assert status == 1
    check_complete(out, expected, nnue_infer.default_network())
    assert pq.read_table(out / D.ERRORS_DIR).num_rows == 2


def test_large_inputs_split_into_ranges_exactly_once(tmp_path, fens):
    """An uncompressed EPD file cut into line-aligned byte ranges and a Parquet file cut by row groups:
    the same rows and line numbers as whole inputs, one part per range, a re-run skips the finished
    ranges (a lost part is scored again, alone), and changed input is refused."""
    (tmp_path / "in").mkdir()
    lines = fens[:250] + ["", "# comment"] + fens[250:400] + BAD + fens[400:]
    epd = tmp_path / "in" / "big.epd"
    epd.write_text("\n".join(lines) + "\n")
    expected = [(str(epd), i + 1, f) for i, f in enumerate(lines) if f and f not in BAD and not f.startswith("#")]
    table = pa.table({"fen": fens[:430], "n": np.arange(430)})
    pq.write_table(table, tmp_path / "in" / "big.parquet", row_group_size=50)
    expected += [(str(tmp_path / "in" / "big.parquet"), i + 1, f) for i, f in enumerate(fens[:430])]
    out = tmp_path / "out"
    files = [str(epd), str(tmp_path / "in" / "big.parquet")]
    report = D.score_files(files, str(out), "default", split_bytes=4000, split_rows=100)
    ranges = {}
    for p in report.parts:
        ranges.setdefault(p["input"], set()).add(p["range"])
    count = next(iter(ranges[str(epd)]))[1]
    assert count > 5 and ranges[str(epd)] == {(k, count) for k in range(count)}
    assert next(iter(ranges[files[1]]))[1] == 4  # 9 row groups of 50 (the last 30): 100, 100, 100, 130 rows
    assert (report.rows, report.errors, report.skipped) == (len(expected), 2, 0)
    check_complete(out, expected, nnue_infer.default_network())
    errors = pq.read_table(out / D.ERRORS_DIR).to_pydict()
    assert sorted(errors["line"]) == [403, 404]
    lost = [p["part"] for p in report.parts if p["input"] == str(epd) and p["range"][0] == 2]
    assert len(lost) == 1 and len(list(out.glob("part-big_epd-*-b*.parquet"))) == count
    lost = [pathlib.Path(lost[0])]
    lost[0].unlink()
    again = D.score_files(files, str(out), "default", split_bytes=999_999)  # the recorded ranges, not new ones
    assert again.skipped == len(report.parts) - 1 and again.rows == len(expected)
    check_complete(out, expected, nnue_infer.default_network())
    with open(epd, "a") as f:
        f.write(fens[0] + "\n")
    lost[0].unlink()
    with pytest.raises(ValueError, match="changed since"):
        D.score_files(files, str(out), "default")


def test_parquet_cells_are_cells(tmp_path, fens):
    """A Parquet input's FEN cells are read as cells (issue 26 item 2): a cell holding a line break, an empty
    cell and a null cell are errors of their rows, and every other row keeps its own row number."""
    cells = [fens[0], fens[1] + "\n" + fens[2], "", None, "  ", fens[3], "# x", fens[4]]
    path = tmp_path / "cells.parquet"
    pq.write_table(pa.table({"fen": pa.array(cells, pa.string())}), path)
    out = tmp_path / "out"
    report = D.score_files(str(path), str(out), "default")
    assert (report.rows, report.errors) == (3, 5)
    check_complete(out, [(str(path), 1, fens[0]), (str(path), 6, fens[3]), (str(path), 8, fens[4])],
                   nnue_infer.default_network())
    errors = pq.read_table(out / D.ERRORS_DIR).to_pydict()
    assert sorted(zip(errors["line"], errors["message"])) == [
        (2, "row 2: a line break inside the cell"), (3, "row 3: an empty cell"), (4, "row 4: a null cell"),
        (5, "row 5: an empty cell"), (7, "row 7: a comment, not a FEN")]
    with pytest.raises(ValueError, match="no column 'fens'"):
        D.score_files(str(path), str(tmp_path / "out2"), "default", column="fens")


def test_parquet_cells_with_text_after_the_fen_are_errors_as_in_evaluate_batch(tmp_path, fens):
    """A Parquet FEN cell with EPD operations or a seventh field after its FEN was scored as the FEN alone (the
    operations dropped), where ``evaluate_batch`` and ``evaluate_dataframe`` refuse the same cell: an error of its
    row naming the text, and the FEN alone in another cell is still scored."""
    cells = [fens[0] + " bm e4;", fens[1] + " extra", fens[2]]
    for cell in cells[:2]:
        with pytest.raises(ValueError):
            nnue_infer.evaluate_batch([cell])
    path = tmp_path / "ops.parquet"
    pq.write_table(pa.table({"fen": cells}), path)
    out = tmp_path / "out"
    report = D.score_files(str(path), str(out), "default")
    assert (report.rows, report.errors) == (1, 2)
    check_complete(out, [(str(path), 3, fens[2])], nnue_infer.default_network())
    errors = pq.read_table(out / D.ERRORS_DIR).to_pydict()
    assert sorted(zip(errors["line"], errors["message"])) == [
        (1, "row 1: text after the FEN ('bm e4;'): a FEN column holds one FEN per cell (EPD operations are not "
            "read from Parquet)"),
        (2, "row 2: text after the FEN ('extra'): a FEN column holds one FEN per cell (EPD operations are not "
            "read from Parquet)")]


def test_inputs_named_twice_are_scored_once(tmp_path, fens):
    """Overlapping patterns and a link to an input name one file (issue 26 item 3): counted once."""
    expected = write_shards(tmp_path / "in", fens[:60], n=2)
    (tmp_path / "link.epd").symlink_to(tmp_path / "in" / "s0.epd")
    report = D.score_files([str(tmp_path / "in" / "*"), str(tmp_path / "in" / "s0.epd"), str(tmp_path / "link.epd")],
                           str(tmp_path / "out"), "default")
    assert len(report.parts) == 2 and report.rows == len(expected)
    check_complete(tmp_path / "out", expected, nnue_infer.default_network())


def test_pgn_split_by_games_exactly_as_whole(tmp_path, data_dir):
    """An uncompressed PGN file cut into byte ranges of whole games (issue 23 item 2) gives the rows and
    errors of the whole file: game and line numbers, tags, values; the cut falls only where the reader
    starts a game (not inside a comment holding a blank line and a tag-like line, not between the tags
    of a game whose tags a blank line separates), CRLF line ends are cut too, and a file with a lone
    carriage return is one task."""
    import chess
    import chess.pgn

    with open(data_dir / "games-dev.jsonl", encoding="utf-8") as f:
        games = [json.loads(line) for _, line in zip(range(24), f)]
    texts = []
    for k, g in enumerate(games):
        game = chess.pgn.Game.from_board(chess.Board(g["start_fen"]))
        game.headers["White"] = g["id"]
        game.add_line([chess.Move.from_uci(m) for m in g["moves"]])
        text = str(game)
        if k % 5 == 1:  # a comment with a blank line and a tag-like line inside: one game, not three
            text = text.replace("\n\n", '\n\n{ a comment\n\n[Event "not a tag"]\n}\n', 1)
        if k % 5 == 2:  # tags separated by one blank line: still one game
            text = text.replace("[White", "\n[White", 1)
        if k % 7 == 3:  # an illegal move: rows up to it, then an error row naming game and line
            text = text.rsplit("\n", 1)[0] + " Ke9 *"
        texts.append(("% escaped line\n" if k == 5 else "") + text)
    body = "\ufeff" + "\n\n".join(texts) + "\n"
    (tmp_path / "in").mkdir()
    plain = tmp_path / "in" / "games.pgn"
    plain.write_text(body, encoding="utf-8")
    crlf = tmp_path / "in" / "crlf.pgn"
    crlf.write_bytes(body.replace("\n", "\r\n").encode())
    lone = tmp_path / "in" / "lone.pgn"
    lone.write_bytes(body.replace("\n", "\r", 1).encode())
    files = [str(plain), str(crlf), str(lone)]
    whole = D.score_files(files, str(tmp_path / "whole"), "default", split_bytes=1 << 30)
    split = D.score_files(files, str(tmp_path / "split"), "default", split_bytes=1000)
    counts = {p["input"]: p["range"][1] for p in split.parts}
    assert counts[str(plain)] > 5 and counts[str(crlf)] > 5 and counts[str(lone)] == 1
    assert {p["range"][1] for p in whole.parts} == {1}
    assert (split.rows, split.errors) == (whole.rows, whole.errors) and whole.errors >= 3

    def rows(directory):
        t = pq.read_table(directory)
        return sorted(t.to_pylist(), key=lambda r: (r["source"], r["game"], r["ply"]))

    got, want = rows(tmp_path / "split"), rows(tmp_path / "whole")
    assert got == want
    assert max(r["game"] for r in got) == len(games)
    errors = [rows(d / D.ERRORS_DIR) for d in (tmp_path / "split", tmp_path / "whole")]
    assert errors[0] == errors[1]
    np.testing.assert_array_equal([r["value"] for r in got], nnue_infer.evaluate_batch([r["fen"] for r in got]))
    again = D.score_files(files, str(tmp_path / "split"), "default")  # the recorded ranges: all done
    assert again.skipped == len(split.parts)


def test_small_inputs_batched_per_dask_task(tmp_path, fens):
    """On a cluster, small whole inputs go several to a Dask task (about TASKS_PER_THREAD per worker
    thread); ranges of a split input and FIFOs go alone; with no worker thread nothing is grouped."""
    (tmp_path / "in").mkdir()
    for k in range(16):
        (tmp_path / "in" / f"s{k:02d}.epd").write_text("\n".join(fens[k * 10:(k + 1) * 10]) + "\n")
    big = tmp_path / "in" / "t-big.epd"
    big.write_text("\n".join(fens) + "\n")
    os.mkfifo(tmp_path / "in" / "u-fifo.epd")
    files = D.expand_inputs(str(tmp_path / "in" / "*"))
    out = tmp_path / "out"
    manifest._check_manifest(str(out), "default")
    tasks = D.plan_tasks(files, str(out), split_bytes=big.stat().st_size // 3)
    ranges = [t for t in tasks if t.count > 1]
    assert len(ranges) == 3
    groups = D.batches(tasks, 2, split_bytes=1 << 20)
    assert sorted((t for g in groups for t in g), key=tasks.index) == tasks  # each task in one group
    small = [g for g in groups if g[0].count == 1 and os.path.basename(g[0].path).startswith("s")]
    assert D.TASKS_PER_THREAD <= len(small) <= 2 * D.TASKS_PER_THREAD + 1 and max(map(len, small)) > 1
    assert [g for g in groups if g[0].count > 1 or g[0].path.endswith("fifo.epd")] == [[t] for t in ranges] + [[tasks[-1]]]
    assert D.batches(tasks, 0) == [[t] for t in tasks]
    assert D.batches(tasks, 64) == [[t] for t in tasks]  # a shard each is already a 256th of the whole
    assert D.batches(tasks, 1, split_bytes=300) == [[t] for t in tasks]  # no Dask task over split_bytes


def test_compression_of_the_free_text(tmp_path, fens):
    """``compression`` codes the parts' free text (zstd by default, 'none' plain), nothing else; the rows
    are the same; an unknown codec is refused before any work."""
    expected = write_shards(tmp_path / "in", fens[:120], n=2)
    sizes = {}
    for codec in ("zstd", "none"):
        out = tmp_path / codec
        D.score_files(str(tmp_path / "in" / "*"), str(out), "default", compression=codec)
        check_complete(out, expected, nnue_infer.default_network())
        part = sorted(out.glob("part-*.parquet"))[0]
        meta = pq.ParquetFile(part).metadata.row_group(0)
        codecs = {meta.column(i).path_in_schema: meta.column(i).compression for i in range(meta.num_columns)}
        assert {codecs.pop(name) for name in ("fen", "san", "uci")} == {codec.upper().replace("NONE", "UNCOMPRESSED")}
        assert set(codecs.values()) == {"UNCOMPRESSED"}
        sizes[codec] = part.stat().st_size
    assert sizes["zstd"] < sizes["none"]
    with pytest.raises(ValueError, match="unknown Parquet compression 'lzma'"):
        D.score_files(str(tmp_path / "in" / "*"), str(tmp_path / "x"), "default", compression="lzma")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("option", ["split_bytes", "split_rows", "binpack_task_bytes"])
@pytest.mark.parametrize("value", [0, -5, 1.5, True])
def test_task_sizes_must_be_positive_integers(tmp_path, option, value):
    """split_bytes=0 made the EPD range planner append the same range forever (memory exhausted)."""
    from nnue_infer.io.distributed import score_files

    shard = tmp_path / "s.epd"
    shard.write_text(chess.STARTING_FEN + "\n")
    with pytest.raises(ValueError, match=f"{option} must be a positive integer, got {value!r}"):
        score_files(str(shard), str(tmp_path / "out"), **{option: value})
    assert not (tmp_path / "out").exists()


def test_an_input_changed_since_it_was_scored_is_refused(tmp_path):
    """A whole input (no ranges) that grew after its part was written: refused, naming it, and the
    dataset untouched (it was skipped as finished, its new lines never scored)."""
    from nnue_infer.io.distributed import score_files

    shard = tmp_path / "s.epd"
    shard.write_text(chess.STARTING_FEN + "\n")
    out = tmp_path / "out"
    assert score_files(str(shard), str(out)).rows == 1
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with shard.open("a") as f:
        f.write("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3\n")
    with pytest.raises(ValueError, match=rf"{shard}: changed since {out} planned it \(\d+ bytes, now \d+\)"):
        score_files(str(shard), str(out))
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_fixed_input_leaves_no_stale_errors(tmp_path, fens):
    """An input whose bad row was fixed (same size), its part deleted to score it again: the errors table
    no longer lists the row (the part's old ``_errors`` file was kept, naming a row that is now good)."""
    shard = tmp_path / "s.epd"
    shard.write_text("\n".join(fens[:3] + ["not a fen"]) + "\n")
    out = tmp_path / "out"
    assert D.score_files(str(shard), str(out), "default").errors == 1
    shard.write_text("\n".join(fens[:3] + ["#ot a fen"]) + "\n")  # now a comment, skipped
    (out / D.part_name(str(shard))).unlink()
    report = D.score_files(str(shard), str(out), "default")
    assert (report.rows, report.errors, report.skipped) == (3, 0, 0)
    assert not list((out / D.ERRORS_DIR).glob("*.parquet"))


def test_concurrent_runs_with_other_task_sizes_write_each_row_once(tmp_path, fens, monkeypatch):
    """A second ``score_files`` into the same output while the first plans its tasks, with a task size that
    splits an input the first scores whole: it waits for the first run's plan and follows it (the manifest
    was read and written unlocked, each run planned its own ranges: every row of the input twice)."""
    big = tmp_path / "big.epd"
    big.write_text("\n".join(fens) + "\n")
    out = tmp_path / "out"
    second: list = []
    planning = D.tasks_of

    def tasks_of(path, *args, **kwargs):  # the first run, in the middle of its plan, starts the second
        if not second:
            run = threading.Thread(target=lambda: second.append(
                D.score_files(str(big), str(out), "default", split_bytes=big.stat().st_size // 4)))
            second.append(run)
            run.start()
            run.join(1.0)  # the second run finishes (unlocked) or waits for this one's plan
        return planning(path, *args, **kwargs)

    monkeypatch.setattr(plan, "tasks_of", tasks_of)
    first = D.score_files(str(big), str(out), "default")
    second[0].join()
    assert first.rows == second[1].rows == len(fens)
    assert pq.read_table(out).num_rows == len(fens)
    assert [p.name for p in out.glob("part-*")] == [D.part_name(str(big))]


def test_an_unknown_network_leaves_no_output(tmp_path):
    shard = tmp_path / "s.epd"
    shard.write_text(chess.STARTING_FEN + "\n")
    with pytest.raises(nnue_infer.errors.NetworkNotFoundError, match="no-such.nnue"):
        D.score_files(str(shard), str(tmp_path / "out"), str(tmp_path / "no-such.nnue"))
    assert not (tmp_path / "out").exists()


def test_two_writers_of_one_part_in_one_process(tmp_path):
    """Two writers of one part in one process (two threads of a worker running the part for two jobs) each
    write their own temporary file (one name per process before: the second truncated the first's file,
    and the first's rename then failed or moved a half-written file into place)."""
    from nnue_infer.inputs import replacing

    part = tmp_path / "part.parquet"
    with replacing(part) as first, replacing(part) as second:
        assert first != second
        pathlib.Path(first).write_bytes(b"first")
        pathlib.Path(second).write_bytes(b"second")
    assert part.read_bytes() == b"first"  # the last rename wins, whole
    assert [p.name for p in tmp_path.iterdir()] == ["part.parquet"]


def test_an_output_that_cannot_be_locked_is_still_written(tmp_path, monkeypatch):
    """A file system without locks (flock: ENOLCK on some network file systems): the run goes unlocked."""
    import errno
    import fcntl

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    shard = tmp_path / "s.epd"
    shard.write_text(chess.STARTING_FEN + "\n")
    assert D.score_files(str(shard), str(tmp_path / "out"), "default").rows == 1


def test_a_replaced_network_file_is_refused(tmp_path, fens):
    """The manifest records the network's SHA-256: another network copied over the same file name (or an
    updated package's default network) cannot add its rows to a dataset of the first (a hostile pass got
    1,823 rows of one network and 1,188 of the other in one dataset, no warning)."""
    import dataclasses

    from nnue_infer.network import network_digest

    shard = tmp_path / "s.epd"
    shard.write_text("\n".join(fens[:20]) + "\n")
    net = nnue_infer.default_network()
    path = tmp_path / "net.safetensors"
    nnue_infer.save(net, path)
    out = tmp_path / "out"
    assert D.score_files(str(shard), str(out), str(path)).rows == 20
    other = dataclasses.replace(net, ft_biases=net.ft_biases + 1)
    nnue_infer.save(other, path)
    (out / D.part_name(str(shard))).unlink()
    with pytest.raises(ValueError, match=r"holds results of '.*net.safetensors' with other parameters \(SHA-256 "):
        D.score_files(str(shard), str(out), str(path))
    manifest = json.loads((out / D.MANIFEST).read_text())
    assert manifest["network_sha256"] == network_digest(net) != network_digest(other)


def test_the_network_digest_is_computed_once_per_file_version(tmp_path, fens, monkeypatch):
    """The manifest's SHA-256 of the network (~46 MB of parameters for Stockfish 15.1's: 34 ms a job) is computed
    once per version of the network file in a process: a later job hashes nothing; a file rewritten in place is
    hashed again (and refused by the dataset of the old one); and the in-process evaluator is the new file's (a
    long-lived worker kept the old network under the same name: rows of the old network in a dataset whose
    manifest names the new one)."""
    import dataclasses

    from nnue_infer import network as N

    calls = []
    digest = N.network_digest
    monkeypatch.setattr(N, "network_digest", lambda net: calls.append(1) or digest(net))
    shard = tmp_path / "s.epd"
    shard.write_text("\n".join(fens[:20]) + "\n")
    net = nnue_infer.default_network()
    path = tmp_path / "net.safetensors"
    nnue_infer.save(net, path)
    assert D.score_files(str(shard), str(tmp_path / "a"), str(path)).rows == 20
    assert D.score_files(str(shard), str(tmp_path / "b"), str(path)).rows == 20
    assert len(calls) == 1
    other = dataclasses.replace(net, ft_biases=net.ft_biases + 1)
    nnue_infer.save(other, path)
    assert D.score_files(str(shard), str(tmp_path / "c"), str(path)).rows == 20
    assert len(calls) == 2
    values = pq.read_table(tmp_path / "c", columns=["value"])["value"].to_pylist()
    assert values == nnue_infer.Evaluator(other).evaluate_batch(fens[:20]).tolist()
    assert values != pq.read_table(tmp_path / "a", columns=["value"])["value"].to_pylist()


def test_each_worker_is_warmed_once_per_client(tmp_path, fens):
    """A job warms up (``warm_up``) only the workers its client has not warmed for the network yet: one round
    trip less per job; a worker that joins later is warmed by the next job, alone; every job's values right."""
    expected = write_shards(tmp_path / "in", fens[:60], n=3)
    lc, client = cluster(n_workers=1)
    try:
        runs = []
        run = client.run
        client.run = lambda fn, *args, **kwargs: runs.append((fn, kwargs.get("workers"))) or run(fn, *args, **kwargs)
        for k in range(2):
            D.score_files(str(tmp_path / "in" / "*"), str(tmp_path / f"out{k}"), "default", client, threads=1)
            check_complete(tmp_path / f"out{k}", expected, nnue_infer.default_network())
        first = list(client.nthreads())
        assert runs == [(D.warm_up, first)]
        lc.scale(2)
        client.wait_for_workers(2)
        D.score_files(str(tmp_path / "in" / "*"), str(tmp_path / "out2"), "default", client, threads=1)
        check_complete(tmp_path / "out2", expected, nnue_infer.default_network())
        assert runs == [(D.warm_up, first), (D.warm_up, [w for w in client.nthreads() if w not in first])]
        # the workers come from the cluster object's table (no round trip), or from the scheduler without one
        assert workers._worker_threads(client) == client.nthreads() and len(client.nthreads()) == 2
        from distributed import Client

        with Client(lc.scheduler_address) as other:
            assert other.cluster is None and workers._worker_threads(other) == client.nthreads()
    finally:
        client.close()
        lc.close()


def test_relative_paths_reach_workers_in_other_directories(tmp_path, fens, monkeypatch):
    """Workers that run in another directory than the client (a cluster started elsewhere, ``--scheduler``) get
    the inputs and the output resolved against the client's: relative names made them read files that are not
    there and write the errors table into their own directory (a new user's trial).  Two cold workers of one
    machine are warmed one after the other: the first compiles into the cache they share."""
    expected = write_shards(tmp_path / "in", fens[:60], n=3)
    (tmp_path / "elsewhere").mkdir()
    lc, client = cluster(n_workers=2)
    try:
        client.run(os.chdir, str(tmp_path / "elsewhere"))
        monkeypatch.chdir(tmp_path)
        runs = []
        run = client.run
        client.run = lambda fn, *args, **kwargs: runs.append((fn, kwargs.get("workers"))) or run(fn, *args, **kwargs)
        report = D.score_files("in/*", "out", "default", client, threads=1)
        assert (report.rows, report.errors, report.failed) == (len(expected), 2, [])
        check_complete(tmp_path / "out", expected, nnue_infer.default_network())
        assert (tmp_path / "out" / D.ERRORS_DIR).is_dir() and os.listdir(tmp_path / "elsewhere") == []
        assert [len(workers) for fn, workers in runs if fn is D.warm_up] == [1, 1]
    finally:
        client.close()
        lc.close()


def _no_network_here():
    """Run on a worker: its network loader fails, as on a machine that cannot read the network's path."""
    from nnue_infer.io.distributed import task as worker_side

    def fail(network, sha256=None):
        raise FileNotFoundError(f"{network}: not on this worker's machine")

    worker_side.worker_evaluator = fail
    worker_side._warm.clear()


def test_workers_that_cannot_load_the_network_leave_nothing(tmp_path, fens):
    """The workers' warm-up fails (a network path only the client can read): the job fails before it makes the
    output directory (it wrote the manifest and the lock first, and left them: the second hostile pass)."""
    (tmp_path / "a.epd").write_text("\n".join(fens[:3]) + "\n")
    lc, client = cluster(n_workers=1)
    try:
        client.run(_no_network_here)
        with pytest.raises(FileNotFoundError, match="not on this worker's machine"):
            D.score_files(str(tmp_path / "a.epd"), str(tmp_path / "out"), "default", client, threads=1)
        assert not (tmp_path / "out").exists()
    finally:
        client.close()
        lc.close()


def test_a_link_in_a_later_run_is_the_same_input(tmp_path, fens):
    """Parts are named by the input's real path: the same file through a link, in a later run, is a part
    already done (it was scored again: every row twice in the dataset)."""
    shard = tmp_path / "s.epd"
    shard.write_text("\n".join(fens[:20]) + "\n")
    (tmp_path / "link.epd").symlink_to(shard)
    out = tmp_path / "out"
    assert D.score_files(str(shard), str(out), "default").rows == 20
    again = D.score_files(str(tmp_path / "link.epd"), str(out), "default")
    assert (again.rows, again.skipped) == (20, 1) and again.parts[0]["skipped"]
    assert pq.read_table(out, columns=["fen"]).num_rows == 20


def test_an_input_edited_at_the_same_size(tmp_path, fens):
    """An input edited in place at the same size while its part exists: refused, naming the part (it was
    skipped as finished, its old values kept); with the part deleted, the new file is scored."""
    shard = tmp_path / "s.epd"
    lines = [f for f in fens if f.split()[3] == "-" and chess.Board(f.replace(" w ", " b ")).is_valid()][:10]
    shard.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    first = D.score_files(str(shard), str(out), "default")
    assert first.rows == 10
    flipped = lines[0].replace(" w ", " b ")
    assert len(flipped) == len(lines[0]) and chess.Board(flipped).is_valid()
    shard.write_text("\n".join([flipped, *lines[1:]]) + "\n")
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))  # a later modification
    part = D.part_name(str(shard))
    with pytest.raises(ValueError, match=rf"{shard}: changed since {out} planned it \(\d+ bytes, \d+ and "
                                         rf"modified since\): its parts there \({part}\)"):
        D.score_files(str(shard), str(out), "default")
    (out / part).unlink()
    assert D.score_files(str(shard), str(out), "default").rows == 10
    table = pq.read_table(out, columns=["fen", "value"]).to_pydict()
    assert table["value"][table["fen"].index(flipped)] == nnue_infer.evaluate(chess.Board(flipped))


def test_a_range_that_ends_early_fails_its_task(tmp_path):
    """A file truncated while it is scored: the task reading a range past the new end fails, naming the file
    and byte (it ended quietly: a run reported success with most rows missing)."""
    path = tmp_path / "t.epd"
    path.write_bytes(b"x" * 100)
    with open(path, "rb", buffering=0) as f:
        part = task._Range(f, 40, 150)
        assert len(part.read(50)) == 50
        assert part.read() == b"x" * 10  # what there is
        with pytest.raises(ValueError, match=rf"{path}: ends at byte 100, before the end of the range planned for "
                                             r"this task \(byte 150\)"):
            part.read()
    with open(path, "rb", buffering=0) as f:  # a range that starts past the end now (the file shrank more):
        part = task._Range(f, 120, 150)          # its own size, not the position the seek reached (hostile pass 2)
        with pytest.raises(ValueError, match=rf"{path}: ends at byte 100, before the end of the range planned for "
                                             r"this task \(byte 150\)"):
            part.read()


def test_a_run_waiting_for_another_says_so(tmp_path, fens, caplog):
    """A run that finds the output's lock held waits and says so (it waited silently, forever for a hung
    planner), then goes on when the lock is released."""
    import fcntl

    shard = tmp_path / "s.epd"
    shard.write_text("\n".join(fens[:5]) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    holder = open(out / D.LOCK, "a+b")
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
    release = threading.Timer(1.0, holder.close)
    release.start()
    with caplog.at_level("WARNING", logger="nnue_infer"):
        assert D.score_files(str(shard), str(out), "default").rows == 5
    release.join()
    assert f"waiting for another run planning into {out}" in caplog.text


def test_an_output_that_is_a_file_is_named(tmp_path, fens):
    """An output path that is a file (or the input itself): one clear error, the file untouched (was a raw
    FileExistsError from makedirs)."""
    shard = tmp_path / "s.epd"
    shard.write_text("\n".join(fens[:3]) + "\n")
    before = shard.read_bytes()
    with pytest.raises(NotADirectoryError, match=rf"{shard}: exists and is not a directory"):
        D.score_files(str(shard), str(shard), "default")
    assert shard.read_bytes() == before


@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.reset_index")  # Dask's own call (pandas 3.1)
def test_a_damaged_input_is_one_error_row_and_the_others_are_scored(tmp_path, fens):
    """A gzip shard damaged in the middle: its task writes no part and one row in the errors table
    naming the file and the byte, the other shards are scored (the whole job ended at the first
    damaged input, in process with the shards after it not scored: hostile pass); once mended, a
    re-run scores it and drops the error row."""
    expected = write_shards(tmp_path / "in", fens[:300], n=3)  # s0.epd, s1.epd.gz, s2.epd (2 bad rows)
    damaged = tmp_path / "in" / "s1.epd.gz"
    good = damaged.read_bytes()
    damaged.write_bytes(good[:len(good) // 2] + bytes(40) + good[len(good) // 2 + 40:])
    out = tmp_path / "out"
    report = D.score_files(str(tmp_path / "in" / "*"), str(out), "default")
    assert len(report.failed) == 1 and report.failed[0].startswith(f"{damaged}: corrupt or truncated gzip data")
    assert report.failed[0].endswith("input not scored: no row of it is in the dataset")
    assert "the rows before it were read" not in report.failed[0]  # (the CLI reader's words: not so here)
    check_complete(out, [e for e in expected if e[0] != str(damaged)], nnue_infer.default_network())
    errors = pq.read_table(out / D.ERRORS_DIR).to_pylist()
    assert sorted((e["source"], e["line"]) for e in errors) == [(str(damaged), None), (str(tmp_path / "in" / "s2.epd"), 3),
                                                                (str(tmp_path / "in" / "s2.epd"), 4)]
    damaged.write_bytes(good)  # mended (same size: a new modification time)
    os.utime(damaged, ns=(time.time_ns(), time.time_ns() + 10**9))
    report = D.score_files(str(tmp_path / "in" / "*"), str(out), "default")
    assert not report.failed and report.skipped == 2
    check_complete(out, expected, nnue_infer.default_network())
    assert pq.read_table(out / D.ERRORS_DIR).num_rows == 2
    import dask.dataframe as dd  # as large-datasets.md reads a dataset with an errors table (the directory
    # itself read _errors/ as rows: hostile pass 2)
    assert len(dd.read_parquet(str(out / "part-*.parquet")).compute()) == len(expected)


def test_a_network_file_replaced_during_a_job_stops_it(tmp_path, fens):
    """Another process replaces the network file while a job runs: the next task refuses to score with
    it (NetworkChangedError naming the file), so every row written is the manifest's network's (the
    tasks after the swap scored with the new network under the old one's manifest: hostile pass 2)."""
    import shutil

    from nnue_infer.errors import NetworkChangedError

    net = tmp_path / "net.nnue"
    shutil.copy(nnue_infer.default_network_path(), net)
    for i in range(3):
        (tmp_path / f"in{i}.epd").write_text("\n".join(fens[10 * i:10 * i + 10]) + "\n")

    swapped = []

    def swap(_summary):  # after the first task: another network put in its place, atomically
        if not swapped:
            shutil.copy(nnue_infer.stockfish_15_1_network_path(), tmp_path / "other.nnue")
            os.replace(tmp_path / "other.nnue", net)
            swapped.append(True)

    with pytest.raises(NetworkChangedError, match=f"{net}: now holds the network with SHA-256"):
        D.score_files([str(tmp_path / f"in{i}.epd") for i in range(3)], str(tmp_path / "out"), str(net),
                      progress=swap)
    t = pq.read_table(tmp_path / "out", columns=["fen", "value"]).to_pydict()
    assert len(t["fen"]) == 10  # the first input's part, scored before the swap
    np.testing.assert_array_equal(t["value"], nnue_infer.evaluate_batch(t["fen"], nnue_infer.default_network()))


def test_a_rerun_removes_the_temporary_files_of_dead_writers_only(tmp_path, fens):
    """The hidden temporary file of a part (and of the manifest) that a killed worker was writing stayed in the
    dataset directory for ever: a run into the directory removes those last written over ``STALE_SECONDS`` ago, and
    leaves a fresh one (a live writer's) and other hidden files alone."""
    write_shards(tmp_path / "in", fens, 2)
    out = tmp_path / "out"
    D.score_files(str(tmp_path / "in" / "*"), str(out), "default")
    part = D.part_name(str(tmp_path / "in" / "s0.epd"))
    (out / D.ERRORS_DIR).mkdir(exist_ok=True)
    old = [out / f".{part}.tmp-4242-0", out / D.ERRORS_DIR / f".{part}.tmp-4242-1", out / f"{D.MANIFEST}.tmp-4242-7"]
    kept = [out / f".{part}.tmp-4343-0", out / ".notes.tmp-1-1", out / D.ERRORS_DIR / ".keep"]
    for path in old + kept:
        path.write_bytes(b"PAR1 half a part")
    stale = time.time() - D.STALE_SECONDS - 60
    for path in old + kept[1:]:
        os.utime(path, (stale, stale))
    again = D.score_files(str(tmp_path / "in" / "*"), str(out), "default")
    assert again.skipped == 2
    assert [p.exists() for p in old] == [False] * 3
    assert [p.exists() for p in kept] == [True] * 3


# -- hostile input ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def few_fens(data_dir):
    with open(data_dir / "positions-dev.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["fen"] for line in f][:40]


def test_an_input_replaced_by_a_directory_during_the_job_is_reported(tmp_path, few_fens):
    """An input removed and replaced by a directory of the same name while the job ran (its task then cannot read
    it): the report named nothing and ``score_files`` raised ``TypeError: 'NoneType' object is not subscriptable``
    after the job, from the check of changed inputs (a stamp of ``None`` for what is no longer a regular file);
    now the job completes, the input's task is a failed one and the report names the change."""
    (tmp_path / "a.epd").write_text("\n".join(few_fens[:4]) + "\n")
    (tmp_path / "b.epd").write_text("\n".join(few_fens[4:8]) + "\n")

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


def test_a_relative_network_file_reaches_workers_in_other_directories(tmp_path, few_fens, network_path, monkeypatch):
    """The inputs and the output are made absolute before they go to the workers, but the network file was not:
    with ``network="nets/sf.nnue"`` and workers started in another directory, the job failed at their warm-up
    with ``NetworkNotFoundError: 'nets/sf.nnue' is no known network name and no file``, after the output
    directory and its manifest were made.  Now it is resolved as the inputs, and the manifest keeps the name."""
    from distributed import Client, LocalCluster

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.epd").write_text("\n".join(few_fens[:6]) + "\n")
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


def test_a_relative_network_file_reaches_the_partitions_of_a_dataframe(tmp_path, few_fens, network_path, monkeypatch):
    """``evaluate_dataframe(ddf, network="nets/sf.nnue")`` computed on workers in another directory: each partition
    failed with ``NetworkNotFoundError``; now the name is resolved where the frame is built, as ``score_files``'."""
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster

    import nnue_infer

    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "sf.nnue").symlink_to(network_path)
    (tmp_path / "elsewhere").mkdir()
    ddf = dd.from_pandas(pd.DataFrame({"fen": few_fens[:6]}), npartitions=2)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as lc, Client(lc) as client:
        client.run(os.chdir, str(tmp_path / "elsewhere"))
        monkeypatch.chdir(tmp_path)
        values = D.evaluate_dataframe(ddf, network="nets/sf.nnue", threads=1).compute()["value"].tolist()
    assert values == nnue_infer.Evaluator(nnue_infer.load(network_path)).evaluate_batch(few_fens[:6]).tolist()


@pytest.mark.parametrize("kind", ["epd", "pgn"])
def test_job_refuses_text_followed_by_nul_bytes_before_writing(tmp_path, kind):
    """Item 3 (Dask jobs pre-check input kinds, ed0f7e7): the client's check looked at whole lines of
    the first 8 KiB only, so a NUL byte after their last newline (text followed by a run of NUL bytes,
    as a file cut short by a crash keeps; a small binary file) passed it; the input's task then
    refused the file after the job had written the manifest, the lock and the other inputs' parts.
    Now the NUL byte is found in the client and the refused job writes nothing."""
    pytest.importorskip("distributed")
    from nnue_infer.errors import InputKindError
    from nnue_infer.io.distributed import score_files

    good = tmp_path / "good.epd"
    good.write_text(f"{chess.STARTING_FEN}\n" * 3)
    text = f"{chess.STARTING_FEN}\n" * 2 if kind == "epd" else '[Event "x"]\n\n1. e4 e5 *\n'
    padded = tmp_path / f"padded.{kind}"
    padded.write_bytes(text.encode() + b"\0" * 4096)
    out = tmp_path / "scores"
    with pytest.raises(InputKindError, match=f"padded.{kind}: NUL byte at byte offset {len(text)} "):
        score_files([str(good), str(padded)], str(out), client=None)
    assert not os.path.exists(out)


@pytest.mark.parametrize("refusal", ["other network", "damaged manifest", "parts without manifest", "pgn in epd",
                                     "output is a file", "errors dir is a file"])
def test_a_refused_dask_job_starts_no_cluster(tmp_path, capsys, monkeypatch, refusal):
    """``eval --workers N`` started its local cluster (about 4 s, N processes) before the checks that refuse a
    job without one (its output's manifest, its inputs' content, the output path): a refused job took seconds
    and started processes for nothing.  The checks (io.distributed.check_job) now come first: the job is
    refused at once, no cluster is constructed (distributed.LocalCluster and Client raise here), and nothing
    is created."""
    distributed = pytest.importorskip("distributed")
    from nnue_infer.io.distributed import MANIFEST, score_files
    from nnue_infer.resources import default_network_path

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started for a refused job")

    monkeypatch.setattr(distributed, "LocalCluster", no_cluster)
    monkeypatch.setattr(distributed, "Client", no_cluster)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.epd").write_text(f"{chess.STARTING_FEN}\n")
    inputs, net = ["--epd", "a.epd"], []
    out = tmp_path / "ds"
    expected = {
        "other network": f"error: {out} holds results of network 'default', not 'net.nnue': use another output "
                         "directory\n",
        "damaged manifest": f"error: {out / MANIFEST}: not JSON",
        "parts without manifest": f"error: {out} holds parts (part-a-0123456789ab.parquet) but no manifest",
        "pgn in epd": "error: games.epd:1: this is PGN (a tag pair or moves), not a FEN/EPD line",
        "output is a file": f"error: {out}: exists and is not a directory",
        "errors dir is a file": f"error: {out / '_errors'}: exists and is not a directory",
    }[refusal]
    if refusal == "other network":
        score_files([str(tmp_path / "a.epd")], str(out), "default")  # in process, no cluster
        (tmp_path / "net.nnue").write_bytes(default_network_path().read_bytes())
        net = ["--net", "net.nnue"]
    elif refusal == "damaged manifest":
        out.mkdir()
        (out / MANIFEST).write_text("{")
    elif refusal == "parts without manifest":
        out.mkdir()
        (out / "part-a-0123456789ab.parquet").write_bytes(b"")
    elif refusal == "pgn in epd":
        (tmp_path / "games.epd").write_text('[Event "x"]\n\n1. e4 *\n')
        inputs = ["--epd", "games.epd"]
    elif refusal == "output is a file":
        out.write_text("mine\n")
    else:
        out.mkdir()
        (out / "_errors").write_text("mine\n")
    before = sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    status = main(["eval", *inputs, *net, "--workers", "1", "-o", str(out), "-q"])
    stdout, err = capsys.readouterr()
    assert status == 1 and stdout == ""
    assert err.startswith(expected), err
    assert sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before  # nothing created or changed


def dataset_rows(out) -> list[tuple]:
    """(source, line, fen, value) of every row of the parts of the dataset ``out``, sorted."""
    parts = sorted(os.path.join(out, p) for p in os.listdir(out) if p.startswith("part-"))
    t = pa.concat_tables([pq.read_table(p, columns=["source", "line", "fen", "value"]) for p in parts]).to_pydict()
    return sorted(zip(t["source"], t["line"], t["fen"], t["value"]))


def errors_rows(out) -> list[tuple]:
    """(line, message) of the errors table of ``out``, sorted by line."""
    t = pq.read_table(os.path.join(out, D.ERRORS_DIR)).to_pydict()
    return sorted(zip(t["line"], t["message"]), key=lambda r: (r[0] is None, r[0]))


BROKEN_960 = '[Event "a"]\n[Variant "Chess960"]\n\n1. e4 e4 ) d5 *\n\n[Event "b"]\n\n1. d4 d5 *\n'


NO_NEWLINE = b"8/8/8/8/2k5/8/7p/2K5 b - -\n8/8/8/8/8/8/1K1k3p/8 w - - bm e4;"  # (no newline at the end)


def test_a_file_named_like_a_glob_pattern_is_that_file(tmp_path, few_fens):
    """``a[1].epd`` exists: it is scored, not ``a1.epd`` (which the pattern ``a[1].epd`` matches)."""
    (tmp_path / "a[1].epd").write_text("\n".join(few_fens[:3]) + "\n")
    (tmp_path / "a1.epd").write_text("\n".join(few_fens[3:9]) + "\n")
    assert D.expand_inputs(str(tmp_path / "a[1].epd")) == [str(tmp_path / "a[1].epd")]
    out = tmp_path / "out"
    D.score_files(str(tmp_path / "a[1].epd"), str(out))
    rows = dataset_rows(out)
    assert [(s, line, f) for s, line, f, _ in rows] == [(str(tmp_path / "a[1].epd"), i + 1, f)
                                                        for i, f in enumerate(few_fens[:3])]
    # a pattern still matches (the literal name is only taken when it names a file)
    assert D.expand_inputs(str(tmp_path / "a[12].epd")) == [str(tmp_path / "a1.epd")]


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
def test_a_damaged_manifest_is_named_and_changes_nothing(tmp_path, few_fens, damage):
    """A manifest edited or cut short: a ``ValueError`` naming it (was ``JSONDecodeError`` without the file's
    name, ``AttributeError`` or ``TypeError`` tracebacks), and the directory is left as it was."""
    src = tmp_path / "a.epd"
    src.write_text("\n".join(few_fens[:5]) + "\n")
    out = tmp_path / "out"
    D.score_files(str(src), str(out))
    manifest = out / D.MANIFEST
    manifest.write_bytes(damage(manifest.read_text()).encode("utf-8", "surrogateescape"))
    os.remove(out / D.part_name(str(src)))  # a task to do: the re-run must read the plans
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=re.escape(f"{manifest}: ") + ".*(use another output directory|delete)"):
        D.score_files(str(src), str(out))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_an_errors_table_that_is_a_file_is_named_before_any_work(tmp_path, few_fens):
    """``out/_errors`` is a file: refused up front naming it (was ``FileExistsError`` from the task that first
    had a bad row, after the other parts were written)."""
    src = tmp_path / "a.epd"
    src.write_text("\n".join(few_fens[:3] + ["not a fen"]) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / D.ERRORS_DIR).write_text("x")
    with pytest.raises(NotADirectoryError, match=re.escape(str(out / D.ERRORS_DIR))):
        D.score_files(str(src), str(out))
    assert sorted(os.listdir(out)) == [D.ERRORS_DIR]


@pytest.mark.parametrize("kind", ["dictionary", "string_view", "large_string"])
def test_parquet_text_in_any_arrow_string_type_is_scored(tmp_path, few_fens, kind):
    """A FEN column of dictionary-encoded strings (pandas' ``category``) or string views is text: scored as
    ``string`` is (was refused: "holds dictionary<values=string, ...>, not text")."""
    cells = pa.array(few_fens[:6] + [None])
    cells = {"dictionary": cells.dictionary_encode(), "string_view": cells.cast(pa.string_view()),
             "large_string": cells.cast(pa.large_string())}[kind]
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"fen": cells}), src)
    out = tmp_path / "out"
    report = D.score_files(str(src), str(out))
    assert (report.rows, report.errors) == (6, 1)
    rows = dataset_rows(out)
    assert [(line, f) for _, line, f, _ in rows] == [(i + 1, f) for i, f in enumerate(few_fens[:6])]
    np.testing.assert_array_equal([v for *_, v in rows], nnue_infer.evaluate_batch(few_fens[:6]))
    assert errors_rows(out) == [(7, "row 7: a null cell")]


def test_two_fen_columns_are_named(tmp_path, few_fens):
    """Two columns named ``fen`` (Arrow allows it): was pyarrow's "Column fen does not exist in schema"."""
    src = tmp_path / "a.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(few_fens[:2]), pa.array(few_fens[2:4])], names=["fen", "fen"]), src)
    with pytest.raises(ValueError, match=re.escape(f"{src}: 2 columns are named 'fen'")):
        D.score_files(str(src), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_a_binary_fen_column_is_named(tmp_path, few_fens):
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"fen": pa.array([f.encode() for f in few_fens[:2]])}), src)
    with pytest.raises(ValueError, match=re.escape(f"{src}: column 'fen' holds binary, not text")):
        D.score_files(str(src), str(tmp_path / "out"))


def test_a_parquet_cell_with_a_nul_byte_or_too_long_is_one_error_row(tmp_path, few_fens):
    """One cell holding a NUL byte, or longer than any line of an EPD file may be, is an error row naming the
    cell; the input's other rows are scored (was: the whole input refused as "binary data, not an EPD/FEN
    text file", naming the row as a line)."""
    from nnue_infer.io.epd import MAX_LINE_BYTES

    cells = [few_fens[0], few_fens[1] + "\0", few_fens[2], "x" * (MAX_LINE_BYTES + 1), few_fens[3]]
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"fen": cells}), src)
    out = tmp_path / "out"
    report = D.score_files(str(src), str(out))
    assert (report.rows, report.errors, report.failed) == (3, 2, [])
    assert [(line, f) for _, line, f, _ in dataset_rows(out)] == [(1, few_fens[0]), (3, few_fens[2]), (5, few_fens[3])]
    assert errors_rows(out) == [(2, "row 2: a NUL byte in the cell"),
                                (4, f"row 4: a cell longer than {MAX_LINE_BYTES} bytes")]


def test_a_pattern_over_the_output_directory_does_not_score_its_own_parts(tmp_path, few_fens):
    """Parquet inputs in the directory the dataset goes to, named by a pattern: a re-run matched the dataset's
    own parts and scored them as inputs (each re-run added a generation of duplicated rows)."""
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"fen": few_fens[:7]}), data / "in.parquet")
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
    pq.write_table(pa.table({"fen": few_fens[7:9]}), data / "part-2.parquet")
    assert D.score_files(pattern, str(data)).rows == 9


def test_a_pattern_over_the_output_directory_passes_over_its_manifest(tmp_path, few_fens):
    """``data/*`` scored into ``data``: the re-run matched the manifest and the lock, and was refused
    ("unknown input kind '.json'")."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.epd").write_text("\n".join(few_fens[:5]) + "\n")
    D.score_files(str(data / "*"), str(data))
    clean = dataset_rows(data)
    again = D.score_files(str(data / "*"), str(data))
    assert (again.rows, again.skipped) == (5, 1)
    assert dataset_rows(data) == clean


def test_parts_without_a_manifest_are_refused(tmp_path, few_fens):
    """The manifest deleted (or lost) beside the parts of a split input: a re-run with another task size planned
    other ranges and wrote every row a second time; refused, naming the parts, and nothing is changed."""
    src = tmp_path / "big.epd"
    src.write_text("\n".join(few_fens * 10) + "\n")
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
    (data / "part-1.epd").write_text("\n".join(few_fens[:3]) + "\n")
    assert D.score_files(str(data / "part-*"), str(data)).rows == 3
    assert D.score_files(str(data / "part-*"), str(data)).skipped == 1


def test_hard_links_to_one_file_are_scored_once(tmp_path, few_fens):
    """Two hard links to one file (two names, no link to resolve): each was scored, every row twice."""
    a = tmp_path / "a.epd"
    a.write_text("\n".join(few_fens[:4]) + "\n")
    os.link(a, tmp_path / "b.epd")
    assert D.expand_inputs([str(tmp_path / "*.epd")]) == [str(a)]
    out = tmp_path / "out"
    assert D.score_files(str(tmp_path / "*.epd"), str(out)).rows == 4
    assert [(s, line) for s, line, _, _ in dataset_rows(out)] == [(str(a), i + 1) for i in range(4)]


@pytest.mark.parametrize("column, problem", [("nope", "no column 'nope' (columns: fen, n)"),
                                             ("n", "column 'n' holds int64, not text")])
def test_a_parquet_input_without_the_fen_column_fails_before_any_work(tmp_path, few_fens, column, problem):
    """The FEN column missing from (or not text in) one Parquet input: refused before any part is written (the
    job stopped at that input's task, after scoring the inputs before it)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.epd").write_text("\n".join(few_fens[:3]) + "\n")
    pq.write_table(pa.table({"fen": few_fens[3:6], "n": [1, 2, 3]}), tmp_path / "in" / "b.parquet")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'in' / 'b.parquet'}: {problem}")):
        D.score_files(str(tmp_path / "in" / "*"), str(out), column=column)
    assert not out.exists()


def test_evaluate_dataframe_names_the_index_of_a_bad_fen(few_fens):
    """A bad cell in the third partition: the error names its index label (was "row 1", its position within
    a partition the caller never sees)."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import dask

    from nnue_infer.errors import FenError

    df = pd.DataFrame({"fen": few_fens[:5] + ["not a fen"] + few_fens[5:8]}, index=range(100, 109))
    ddf = dd.from_pandas(df, npartitions=3)
    with dask.config.set(scheduler="sync"), pytest.raises(FenError, match=r"^'fen' at index 105: invalid character"):
        D.evaluate_dataframe(ddf).compute()
    nulls = pd.DataFrame({"fen": [few_fens[0], None, few_fens[1]]}, index=np.array([10, 11, 12], np.int64))
    with dask.config.set(scheduler="sync"), pytest.raises(TypeError, match=r"^'fen' at index 11: a null cell, not a"):
        D.evaluate_dataframe(dd.from_pandas(nulls, npartitions=1)).compute()  # (was "np.int64(11): ... NAType")
    good = D.evaluate_dataframe(dd.from_pandas(df.drop(index=105), npartitions=3))
    with dask.config.set(scheduler="sync"):
        np.testing.assert_array_equal(good.compute()["value"].to_numpy(), nnue_infer.evaluate_batch(few_fens[:8]))


def test_evaluate_dataframe_without_the_column_is_refused_at_once(few_fens):
    """A column that is not there: a ``KeyError`` naming it and the columns when the frame is built (was a bare
    ``KeyError: 'fen'`` from a worker at compute time)."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    ddf = dd.from_pandas(pd.DataFrame({"position": few_fens[:3]}), npartitions=1)
    with pytest.raises(KeyError, match=r"no column 'fen' \(columns: position\)"):
        D.evaluate_dataframe(ddf)


def test_a_file_name_that_is_not_utf8_is_refused_before_any_work(tmp_path, few_fens):
    """An input whose name is not UTF-8 (bytes of another encoding): a ``UnicodeEncodeError`` without the name
    while planning, and once past that a ``source`` column of invalid UTF-8 that readers cannot decode;
    refused up front, naming the file."""
    name = os.fsdecode(b"caf\xe9.epd")
    try:
        (tmp_path / name).write_text("\n".join(few_fens[:2]) + "\n")
    except (OSError, UnicodeError):
        pytest.skip("this file system takes UTF-8 names only")
    (tmp_path / "b.epd").write_text("\n".join(few_fens[2:4]) + "\n")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=re.escape(repr(str(tmp_path / name))) + ": the file name is not UTF-8"):
        D.score_files(str(tmp_path / "*.epd"), str(out))
    assert not out.exists()


def test_epd_operations_do_not_change_which_rows_a_dataset_keeps(tmp_path, few_fens):
    """A 9 MiB EPD file whose last line has an opcode the lines before lack: scored whole (one task) that row was
    an error ("first appears after the first chunk"), scored in ranges it was a position; datasets keep no
    operations, so every row must be scored, whatever the task size."""
    from nnue_infer.io.epd import CHUNK_BYTES

    pad = "x" * 1000
    n = CHUNK_BYTES // 1000 + 500
    lines = [f'{few_fens[i % len(few_fens)]} id "{pad}";' for i in range(n)]
    lines[-1] = f"{few_fens[0]} bm e4;"
    src = tmp_path / "ops.epd"
    src.write_text("\n".join(lines) + "\n")
    whole = D.score_files(str(src), str(tmp_path / "whole"), split_bytes=1 << 30)
    split = D.score_files(str(src), str(tmp_path / "split"), split_bytes=CHUNK_BYTES // 2)
    assert (split.rows, split.errors) == (n, 0)
    assert (whole.rows, whole.errors) == (n, 0)


@pytest.mark.parametrize("damage", [lambda data: b"garbage", lambda data: data[:len(data) // 2]],
                         ids=["garbage", "cut-short"])
@pytest.mark.parametrize("which", ["part", "errors part"])
def test_a_damaged_part_is_scored_again_and_named(tmp_path, few_fens, damage, which, caplog):
    """A part or its errors part cut short or overwritten (a copy interrupted, a disk error, a stray file under its
    name): the re-run scores its task again, giving the clean run's rows and errors, and the warning names the
    file it could not read."""
    import logging

    src = tmp_path / "a.epd"
    src.write_text("\n".join([*few_fens[:6], "not a fen"]) + "\n")
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
def test_threads_must_be_a_positive_integer(tmp_path, few_fens, threads):
    """``threads=-3`` ran on one thread, ``threads=0`` on all cores, ``2.5`` went to Numba as it was: refused up
    front, as the task sizes are; ``None`` is the default (every core)."""
    src = tmp_path / "a.epd"
    src.write_text(few_fens[0] + "\n")
    with pytest.raises(ValueError, match=re.escape(f"threads must be a positive integer, got {threads!r}")):
        D.score_files(str(src), str(tmp_path / "out"), threads=threads)
    assert not (tmp_path / "out").exists()
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    with pytest.raises(ValueError, match=re.escape(f"threads must be a positive integer, got {threads!r}")):
        D.evaluate_dataframe(dd.from_pandas(pd.DataFrame({"fen": few_fens[:2]}), npartitions=1), threads=threads)


def test_the_cli_passes_over_the_files_of_its_output_dataset(tmp_path, few_fens, capsys, monkeypatch):
    """``eval --epd 'data/*' --workers N -o data`` a second time: the CLI's own check of each file's kind met the
    manifest and stopped ("unknown input kind '.json'") before the job could skip it.  (The job itself is
    stubbed: what is checked is what the CLI hands it.)"""
    from nnue_infer.cli import main

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.epd").write_text("\n".join(few_fens[:3]) + "\n")
    D.score_files(str(data / "*"), str(data))
    handed = []
    monkeypatch.setattr(D, "run_job", lambda inputs, output, *a, **k: handed.append((inputs, output)) or 0)
    status = main(["eval", "--epd", str(data / "*"), "--workers", "1", "-o", str(data)])
    assert status == 0, capsys.readouterr().err
    assert handed == [([str(data / "*")], str(data))]


def test_the_cli_refuses_a_local_cluster_larger_than_the_machine(tmp_path, few_fens, capsys, monkeypatch):
    """``eval --workers 100000`` started as many worker processes (each with the network): more than 4 per core (at
    least 8) is a usage error naming the option, before any process or directory is made."""
    from nnue_infer.cli import eval as E
    from nnue_infer.cli import main

    (tmp_path / "a.epd").write_text(few_fens[0] + "\n")
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
def test_the_local_cluster_limit_counts_the_cpus_this_process_may_use(tmp_path, few_fens, capsys, monkeypatch):
    """The ``--workers`` limit counted ``os.cpu_count()``, the machine's CPUs, not the ones a container or ``taskset``
    leaves the process: 3 usable CPUs of 64 allow 12 workers, not 256."""
    from nnue_infer.cli import eval as E
    from nnue_infer.cli import main

    (tmp_path / "a.epd").write_text(few_fens[0] + "\n")
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
def test_a_local_cluster_shares_the_cpus_this_process_may_use(tmp_path, few_fens, monkeypatch, workers, threads):
    """``run_job``'s local cluster counted ``os.cpu_count()``: with 3 usable CPUs of 64 it started 64 workers
    (``--workers`` not given) or gave each of 3 workers 21 Numba threads; now the usable CPUs are shared."""
    import distributed

    (tmp_path / "a.epd").write_text(few_fens[0] + "\n")
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    seen = {}

    class Stop(Exception):
        pass

    def cluster(**kwargs):
        seen["workers"] = kwargs["n_workers"]
        raise Stop

    monkeypatch.setattr(job, "warm_up", lambda network, threads: seen.update(threads=threads))
    monkeypatch.setattr(distributed, "LocalCluster", cluster)
    with pytest.raises(Stop):
        D.run_job([str(tmp_path / "a.epd")], str(tmp_path / "o"), "default", workers=workers, progress=False)
    assert seen == {"threads": threads, "workers": workers or 3}


def test_an_input_changed_during_the_job_is_reported(tmp_path, few_fens):
    """An input appended to while the job ran (a log still being written): its rows are the file as its task read
    it, and the job said nothing (the next run refused it as "changed since planned"); now the report names it,
    and an input nobody touched is not named."""
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.epd").write_text("\n".join(few_fens[:4]) + "\n")
    (inp / "b.epd").write_text("\n".join(few_fens[4:8]) + "\n")

    def append(summary):
        if summary["input"].endswith("a.epd"):
            with open(inp / "a.epd", "a") as f:
                f.write(few_fens[9] + "\n")

    report = D.score_files(str(inp / "*.epd"), str(tmp_path / "out"), progress=append)
    assert report.rows == 8 and len(report.changed) == 1
    assert report.changed[0].startswith(f"{inp / 'a.epd'}: changed while it was scored (was ")
    again = D.score_files(str(inp / "b.epd"), str(tmp_path / "out2"))
    assert again.changed == [] and again.rows == 4


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


def test_a_parquet_input_cut_short_during_a_job_names_it(tmp_path, few_fens):
    """A Parquet input rewritten with fewer row groups after it was planned: its later ranges failed with pyarrow's
    "Some index in row_group_indices is 3, ..." (no file named in the job's report); now the message names the
    file and what changed, and the re-run names the parts that hold the old file's rows."""
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"fen": few_fens[:40]}), src, row_group_size=5)
    out = tmp_path / "out"
    done = []

    def progress(summary):
        if not done:
            pq.write_table(pa.table({"fen": few_fens[:12]}), src, row_group_size=5)  # 3 row groups, was 8
        done.append(summary)

    report = D.score_files(str(src), str(out), split_rows=10, progress=progress)
    assert len(report.failed) == 3
    assert report.failed[0].startswith(f"{src}: has 3 row groups, not the 4 this task's range ends at: the file "
                                       "changed while it was scored; input not scored (range 2 of 4)")
    with pytest.raises(ValueError, match=re.escape(f"{src}: changed since {out} planned it")):
        D.score_files(str(src), str(out), split_rows=10)


def test_a_parquet_input_that_is_not_parquet_is_named(tmp_path, few_fens):
    """A ``.parquet`` input that is something else: its task fails with a message naming it, and the other inputs
    are scored, as for a damaged gzip input (was pyarrow's "Parquet magic bytes not found in footer ..." from the
    planning, naming no file, and no input scored)."""
    bad = tmp_path / "in" / "b.parquet"
    bad.parent.mkdir()
    bad.write_text("\n".join(few_fens[:3]) + "\n")
    (tmp_path / "in" / "a.epd").write_text("\n".join(few_fens[3:6]) + "\n")
    report = D.score_files(str(tmp_path / "in" / "*"), str(tmp_path / "out"))
    assert report.rows == 3 and len(report.failed) == 1
    assert report.failed[0].startswith(f"{bad}: Parquet magic bytes not found"), report.failed


def test_a_damaged_binpack_input_is_one_error_row_and_the_others_are_scored(tmp_path, few_fens, data_dir):
    """A ``.binpack`` input cut short: the planning (which finds its blocks) raised ``TrainingDataError`` and no
    input was scored; now, as a damaged gzip input, it is one error row naming it, and the others are scored."""
    (tmp_path / "in").mkdir()
    cut = tmp_path / "in" / "cut.binpack"
    cut.write_bytes((data_dir / "binpack" / "dev-games.binpack").read_bytes()[:5000])
    (tmp_path / "in" / "a.epd").write_text("\n".join(few_fens[:3]) + "\n")
    report = D.score_files(str(tmp_path / "in" / "*"), str(tmp_path / "out"))
    assert report.rows == 3 and len(report.failed) == 1, report.failed
    assert report.failed[0].startswith(f"{cut}: "), report.failed


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


def test_compression_suffixes_in_capitals(tmp_path, few_fens):
    """``GAMES.EPD.GZ``: "unknown input kind '.gz' (expected ..., optionally .gz or .zst)" from a Dask job, though
    ``eval --epd`` in process reads it (the kind's suffix was compared without case, the compression's with)."""
    import gzip

    src = tmp_path / "A.EPD.GZ"
    src.write_bytes(gzip.compress(("\n".join(few_fens[:4]) + "\n").encode()))
    assert D.input_kind(str(src)) == "epd"
    assert D.score_files(str(src), str(tmp_path / "out")).rows == 4


def test_a_refused_run_does_not_delete_a_directory_another_run_created(tmp_path, few_fens, monkeypatch):
    """Two runs into a new directory: the second, refused (another network's manifest), deleted the whole directory
    because it did not exist when the second run started, with the first run's manifest and parts in it.  (The
    first run's arrival between the second one's start and its planning is played by a wrapper of ``planning``.)"""
    import contextlib

    src = tmp_path / "a.epd"
    src.write_text("\n".join(few_fens[:3]) + "\n")
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

    monkeypatch.setattr(job, "planning", first_run_arrives)
    with pytest.raises(ValueError, match="holds results of network 'other.nnue'"):
        D.score_files(str(src), str(out))
    assert (out / "part-theirs.parquet").read_bytes() == b"theirs"
    assert json.loads((out / D.MANIFEST).read_text())["network"] == "other.nnue"


def test_a_refused_re_run_keeps_the_errors_tables(tmp_path, few_fens):
    """Two inputs edited since the first run: one without parts (its task had failed), one with parts (refused).
    The refused re-run had already deleted the first one's errors table."""
    import gzip

    (tmp_path / "in").mkdir()
    a = tmp_path / "in" / "a.epd.gz"
    a.write_bytes(gzip.compress(("\n".join(few_fens[:3]) + "\n").encode())[:-6])  # damaged: its task fails
    b = tmp_path / "in" / "b.epd"
    b.write_text("\n".join(few_fens[3:6]) + "\n")
    out = tmp_path / "out"
    assert len(D.score_files(str(tmp_path / "in" / "*"), str(out)).failed) == 1
    a.write_bytes(gzip.compress(("\n".join(few_fens[:3]) + "\n").encode()))  # mended
    b.write_text("\n".join(few_fens[3:7]) + "\n")  # edited while its part exists
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


@pytest.mark.parametrize("name, text, says", [
    ("fens.pgn", None, "this is a FEN/EPD line, not PGN (tag pairs and moves)"),
    ("games.txt", '[Event "x"]\n\n1. e4 e5 *\n', "this is PGN (a tag pair or moves), not a FEN/EPD line"),
])
def test_content_of_the_other_kind_is_refused_naming_the_file(tmp_path, few_fens, name, text, says):
    """FENs in a ``.pgn`` file were read as movetext: each line a game whose row was the *starting position* (a
    row of a position the file does not hold) and an error; PGN in a ``.txt`` file was an error per line.  As
    ``eval --epd/--pgn`` in process, the job is refused naming the file and line (the call's error: a job reads
    each input by its name's kind).  It is refused before anything is written: a good input scored before it left
    its part, and the refused job the manifest and the lock (reliability pass of stop 33)."""
    src = tmp_path / name
    src.write_text(text or "\n".join(few_fens[:3]) + "\n")
    (tmp_path / "a.epd").write_text(few_fens[0] + "\n")
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
def test_eval_workers_with_port_8787_in_use(tmp_path, few_fens, capsys):
    """Another Dask cluster (a notebook's, another job's) holds port 8787: ``eval --workers`` warned "Port 8787 is
    already in use ... Hosting the HTTP server on port N instead" (its scheduler's HTTP server, though the job
    shows no dashboard), an error under ``filterwarnings=error``: the tests of this CLI failed whenever another
    session on the machine ran a cluster."""
    import contextlib
    import socket

    from nnue_infer.cli import main

    src = tmp_path / "a.epd"
    src.write_text("\n".join(few_fens[:3]) + "\n")
    with contextlib.closing(socket.socket()) as held:
        with contextlib.suppress(OSError):  # (in use already: the same condition)
            held.bind(("127.0.0.1", 8787))
            held.listen(1)
        assert main(["eval", "--epd", str(src), "--workers", "1", "-o", str(tmp_path / "out")]) == 0
    assert "Port 8787" not in capsys.readouterr().err
    assert pq.read_table(tmp_path / "out").num_rows == 3

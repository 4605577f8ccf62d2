"""Parquet settings of a dataset part, each measured on its own against the ones ``score_files`` uses.

One part of ``--size`` real FENs (bench_distributed's positions) is scored once into its Arrow table
(:func:`nnue_infer.io.distributed.task._score_tables`); then that table is written to memory with the parts'
settings (:func:`nnue_infer.io.distributed.task._parquet`) and with one setting changed at a time, the variants
alternated ``--rounds`` times (thread CPU time, best and median; the file's size).  Also each codec alone on
the part's FEN text (``pyarrow.Codec.compress``): what compressing the FEN column costs on this CPU.

Run: ``python benchmarks/bench_parquet_options.py [--size 10000 --rounds 30] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402
from bench_distributed import real_fens, write_shards  # noqa: E402

from nnue_infer.io import distributed as D  # noqa: E402
from nnue_infer.io.distributed import task as T  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="positions in the part")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--net", default="stockfish")
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--json", metavar="FILE", type=common.output_file,
                        help="also write the figures to FILE for benchmarks/manual.py")
    args = parser.parse_args()
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    tmp = tempfile.mkdtemp()
    try:
        numba.set_num_threads(1)
        write_shards(os.path.join(tmp, "in"), real_fens(), 1, args.size)
        path = os.path.join(tmp, "in", "s0000.epd")
        D.warm_up(args.net, 1)
        tables, _ = T._task_tables(D.Task(path, "epd"), D.worker_evaluator(args.net), "fen")
        table, _ = T._score_tables(tables, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = T._parquet("zstd")
    encodings = base["column_encoding"]
    variants = {
        "the parts' settings (zstd free text)": base,
        "free text uncompressed ('none')": T._parquet("none"),
        "free text lz4": T._parquet("lz4"),
        "free text snappy": T._parquet("snappy"),
        "zstd level -1": base | {"compression_level": {c: -1 for c in T._FREE_TEXT}},
        "zstd level -7": base | {"compression_level": {c: -7 for c in T._FREE_TEXT}},
        "FEN DELTA_LENGTH_BYTE_ARRAY": base | {"column_encoding": encodings | {"fen": "DELTA_LENGTH_BYTE_ARRAY"}},
        "no statistics at all": base | {"write_statistics": False},
        "statistics on every column": base | {"write_statistics": True},
        "no dictionaries": base | {"use_dictionary": False},
        "integers PLAIN (no delta)": {k: v for k, v in base.items() if k != "column_encoding"},
        "data pages of 64 KiB": base | {"data_page_size": 1 << 16},
        "data pages of 4 MiB": base | {"data_page_size": 4 << 20},
        "no Arrow schema stored": base | {"store_schema": False},
    }

    def write(options: dict) -> int:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, **options)
        return sink.getvalue().size

    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, options in variants.items():
            t = time.thread_time()
            write(options)
            times[name].append(time.thread_time() - t)
    fens = table.column("fen").combine_chunks()
    offsets = np.frombuffer(fens.buffers()[1], np.int32)[fens.offset:fens.offset + len(fens) + 1]
    text = np.frombuffer(fens.buffers()[2], np.uint8)[offsets[0]:offsets[-1]].tobytes()
    codecs = {"zstd (level 1)": pa.Codec("zstd"), "zstd level -7": pa.Codec("zstd", compression_level=-7),
              "lz4": pa.Codec("lz4"), "snappy": pa.Codec("snappy")}
    codec_times: dict[str, list[float]] = {k: [] for k in codecs}
    for _ in range(args.rounds):
        for name, codec in codecs.items():
            t = time.thread_time()
            codec.compress(text)
            codec_times[name].append(time.thread_time() - t)

    say(f"one part of {table.num_rows:,} real FENs (net {args.net}), {table.num_columns} columns, written to memory; "
        f"{args.rounds} rounds alternated; thread CPU ms best / median; load {os.getloadavg()[0]:.1f}")
    ref = min(times["the parts' settings (zstd free text)"])
    say(f"{'':<40} {'ms best':>8} {'median':>8} {'vs parts':>9} {'bytes':>9}")
    for name, options in variants.items():
        say(f"{name:<40} {1e3 * min(times[name]):>8.3f} {1e3 * float(np.median(times[name])):>8.3f} "
            f"{1e3 * (min(times[name]) - ref):>+9.3f} {write(options):>9,}")
    say()
    say(f"the part's FEN text alone ({len(text):,} bytes), compressed by pyarrow.Codec:")
    for name, codec in codecs.items():
        best = min(codec_times[name])
        say(f"{name:<40} {1e3 * best:>8.3f} {1e3 * float(np.median(codec_times[name])):>8.3f} "
            f"{len(text) / best / 1e6:>7.0f} MB/s {len(codec.compress(text, asbytes=True)):>9,} bytes")
    if args.json:
        ref_bytes = write(base)
        records = [common.row(f"Parquet part, {name}", f"{1e3 * min(times[name]):.2f} ms, {write(options):,} bytes",
                              "" if options is base else f"the parts' settings: {1e3 * ref:.2f} ms, {ref_bytes:,} bytes",
                              "" if options is base else f"{min(times[name]) / ref:.2f}x time, "
                              f"{write(options) / ref_bytes:.2f}x size")
                   for name, options in variants.items()]
        common.write_json(args.json, "files", records,
                          f"one part of {table.num_rows:,} real FENs, {table.num_columns} columns, written to memory; "
                          f"best of {args.rounds} alternated rounds, thread CPU time")
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"$ python benchmarks/bench_parquet_options.py {' '.join(sys.argv[1:])}\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

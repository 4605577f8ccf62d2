"""The before/after table of ``bench_distributed.py`` runs, from their saved outputs (markdown, for the docs).

Run: ``python benchmarks/distributed_table.py LABEL=benchmarks/results/distributed-X.txt ...``; one row per file:
the load, the paired in-process CPU ratios (zstd, none) with their ranges, and for the cluster of 2 workers x 1
thread the wall-clock ratio (medians), the busiest worker's ratio, the paired ratio (zstd, none) with its range
and the CPU of the client's process (the scheduler's threads included).
"""

from __future__ import annotations

import re
import sys

PAIRED = re.compile(r"paired CPU ratio, (\w+)\s+([\d.]+x) median \(([\d.]+)-([\d.]+)\)")
CLUSTER = re.compile(r"^2 worker\(s\), (\w+)\s.*?([\d.]+x)\s.*?([\d.]+x)\s+"
                     r"([\d.]+x) \(([\d.]+)-([\d.]+)\)\s+([\d.]+)\s")
LOAD = re.compile(r"load average \(1 min\) during the runs: ([\d.]+-[\d.]+)")


def row(label: str, path: str) -> str:
    text = open(path, encoding="utf-8").read()
    local = {m[1]: f"{m[2]} ({m[3]}-{m[4]})" for m in PAIRED.finditer(text)}
    cluster = {m[1]: (m[2], m[3], f"{m[4]} ({m[5]}-{m[6]})", m[7]) for m in map(CLUSTER.match, text.splitlines()) if m}
    return " | ".join([label, LOAD.search(text)[1], local["zstd"], local["none"],
                       f"{cluster['zstd'][0]} / {cluster['none'][0]}", f"{cluster['zstd'][1]} / {cluster['none'][1]}",
                       cluster["zstd"][2], cluster["none"][2], f"{cluster['zstd'][3]} s"])


def main() -> None:
    print("| run | load | in process, zstd | in process, none | 2 workers: wall ratio, zstd / none "
          "| busiest worker's ratio, zstd / none | 2 workers paired, zstd | 2 workers paired, none "
          "| client+scheduler CPU a job (zstd) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for arg in sys.argv[1:]:
        label, path = arg.split("=", 1)
        print(f"| {row(label, path)} |")


if __name__ == "__main__":
    main()

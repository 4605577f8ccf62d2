"""Every layer's activations: ``Evaluator.activations_batch`` against nnue-interface 0.2.7, one run.

Run:  python benchmarks/bench_activations.py [--positions 1000] [--repeat 3]

Both on Stockfish 17.1's big net over the first ``--positions`` dev positions (FEN strings):

* nnue-interface: ``get_activations_and_eval(fen)`` per position, the way it is used (one
  thread; its nets ``nn-1c0000000000.nnue`` / ``nn-37f18f62d772.nnue`` are placed in
  ``~/.cache/stockfish_nnue`` from the project's cache first, so it downloads nothing);
* nnue-infer: ``activations_batch(fens)`` on Numba's threads (all cores), and with one thread.

Per position: wall-clock microseconds and process CPU microseconds, best of ``--repeat``
rounds (the two alternate within a round, so load on a shared machine hits both alike); the
ratio is nnue-interface's time over nnue-infer's (> 1: nnue-infer faster).  The first call of
each (compilation, loading) is made before timing and reported on its own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import numba

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.resources import known_network, known_network_path  # noqa: E402


def place_interface_nets() -> None:
    """Copy the two Stockfish 17.1 nets where nnue-interface looks for them (before importing it)."""
    target = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stockfish_nnue"
    target.mkdir(parents=True, exist_ok=True)
    for spec in ("sf17.1", "sf17.1-small"):
        source = known_network_path(spec)
        if not (target / source.name).is_file():
            shutil.copyfile(source, target / source.name)


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", metavar="FILE", type=common.output_file,
                        help="also write the figures to FILE for benchmarks/manual.py")
    args = parser.parse_args()
    place_interface_nets()
    import nnue_interface

    fens = list(common.positions()[:args.positions])
    n = len(fens)
    ev = nnue_infer.Evaluator(known_network("sf17.1"))
    first = {"nnue-infer": timed(lambda: ev.activations_batch(fens[:2])),
             "nnue-interface": timed(lambda: nnue_interface.get_activations_and_eval(fens[0]))}
    threads = numba.get_num_threads()
    runs = {
        "nnue-interface": lambda: [nnue_interface.get_activations_and_eval(f) for f in fens],
        f"nnue-infer ({threads} threads)": lambda: ev.activations_batch(fens),
        "nnue-infer (1 thread)": lambda: ev.activations_batch(fens),
    }
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeat):
        for name, fn in runs.items():
            numba.set_num_threads(1 if "1 thread" in name else threads)
            wall, cpu = timed(fn)
            old = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(old[0], wall), min(old[1], cpu))
    numba.set_num_threads(threads)
    print(f"# {common.machine()}; load average {os.getloadavg()[0]:.1f}")
    print(f"# {n} dev positions, Stockfish 17.1 big net, best of {args.repeat}; first calls (wall s, CPU s): "
          + ", ".join(f"{k} {w:.2f} / {c:.2f}" for k, (w, c) in first.items()))
    base_wall, base_cpu = best["nnue-interface"]
    print(f"{'':28s} {'us/pos wall':>12s} {'us/pos CPU':>11s} {'x wall':>8s} {'x CPU':>7s}")
    for name, (wall, cpu) in best.items():
        print(f"{name:28s} {1e6 * wall / n:12.1f} {1e6 * cpu / n:11.1f} {base_wall / wall:8.1f} {base_cpu / cpu:7.1f}")
    if args.json:
        common.write_json(args.json, "research", [
            common.row(f"activations_batch, {name}, per position", f"{1e6 * wall / n:.1f} us wall, {1e6 * cpu / n:.1f} us CPU",
                       f"nnue-interface 0.2.7 get_activations_and_eval: {1e6 * base_wall / n:.1f} us wall, "
                       f"{1e6 * base_cpu / n:.1f} us CPU", f"{base_wall / wall:.1f}x wall, {base_cpu / cpu:.1f}x CPU",
                       ">= 10x (issue 21)", met=base_wall / wall >= 10)
            for name, (wall, cpu) in best.items() if name != "nnue-interface"],
            f"{n} dev positions, Stockfish 17.1's big net, best of {args.repeat} alternating rounds")


if __name__ == "__main__":
    main()

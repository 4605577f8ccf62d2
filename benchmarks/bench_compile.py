"""First-use compile time of the main paths (issue 19), from an empty Numba cache.

Each case runs in a fresh subprocess with its own empty ``NUMBA_CACHE_DIR``; the figures are
that process's CPU time (user + sys, ``time.process_time``), so other jobs on a shared machine
move them little.  Per case: the import of ``nnue_infer`` beyond ``numpy, numba, chess``, the
whole case, and every ``Dispatcher.compile`` (kernel and signature) with its own time (its
callees' compiles excluded), told apart as Numba's dispatcher counts them: a *compile* (a cache
miss: the kernel is typed and lowered in the process; Numba's own uncached helpers included), a
*load* (a cache hit: the machine code read from the cache and linked) or neither (an overload
the process already holds, not counted).  The first load or compile of a process also pays
Numba's one-time initialisation of its CPU target (``BaseContext.refresh``: its registries of
implementations, ``numba.np.linalg``'s check for SciPy's BLAS), shown apart as ``target init``.
``--warm`` repeats each case on the cache the first run filled: a warm case should compile nothing.

    python benchmarks/bench_compile.py                   # every case, cold
    python benchmarks/bench_compile.py cli-eval --warm   # one case, cold then warm
    python benchmarks/bench_compile.py cli-epd cli-json --after cli-eval   # what a further mode compiles
    python benchmarks/bench_compile.py --list

The cases: the README's one-FEN ``nnue-infer eval`` with the default network (in-process
``cli.main``) and its other modes (an EPD file of one position to stdout and to Parquet, ``--json``,
``--trace``, ``--moves``), ``data convert`` of a ``.plain`` to ``.binpack``, a first Python session with Stockfish 15.1's network (``evaluate(board)``, push +
``evaluate()`` + pop, ``evaluate_batch``, ``evaluate_game``, ``trace``), the same calls alone, every
child of a position (``evaluate_moves``), ``activations_batch``, and
``evaluate(board)`` / ``evaluate_batch`` with Stockfish 19's network (when its npm tarball is cached).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

FEN = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"

#: name -> Python code run after ``import nnue_infer`` (``FEN`` and ``chess`` are defined).
CASES = {
    "import": "",
    "cli-eval": "from nnue_infer.cli import main\nassert main(['eval', FEN]) == 0",
    "sf15-session": """
        ev = nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network())
        board = chess.Board(FEN)
        ev.evaluate(board)
        ev.set_position(board)
        ev.push(chess.Move.from_uci('f1b5')); ev.evaluate(); ev.pop()
        ev.evaluate_batch([FEN, chess.STARTING_FEN])
        ev.evaluate_game(chess.Board(), ['e2e4', 'e7e5', 'g1f3'])
        ev.trace(board)
    """,
    "sf15-board": "nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network()).evaluate(chess.Board(FEN))",
    "sf15-pushpop": """
        ev = nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network())
        ev.push(chess.Move.from_uci('e2e4')); ev.evaluate(); ev.pop()
    """,
    "sf15-batch": "nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network()).evaluate_batch([FEN])",
    "sf15-game": "nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network()).evaluate_game(chess.Board(), ['e2e4'])",
    "sf15-trace": "nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network()).trace(chess.Board(FEN))",
    "sf15-children": "nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network()).evaluate_moves(chess.Board(FEN))",
    "sf15-activations": "nnue_infer.Evaluator(nnue_infer.stockfish_15_1_network()).activations_batch([FEN])",
    "sf15-search": """
        from nnue_infer.search import Engine
        Engine(nnue_infer.stockfish_15_1_network()).search(chess.Board(FEN), depth=3)
    """,
    "cli-epd": "from nnue_infer.cli import main\nassert main(['eval', '--epd', EPD]) == 0",
    "cli-parquet": "from nnue_infer.cli import main\nassert main(['eval', '--epd', EPD, '-o', OUT + '.parquet']) == 0",
    "cli-json": "from nnue_infer.cli import main\nassert main(['eval', '--json', FEN]) == 0",
    "cli-trace": "from nnue_infer.cli import main\nassert main(['eval', '--trace', FEN]) == 0",
    "cli-moves": "from nnue_infer.cli import main\nassert main(['eval', '--moves', FEN]) == 0",
    "cli-data": "from nnue_infer.cli import main\nassert main(['data', 'convert', '-q', PLAIN, OUT + '.binpack']) == 0",
    "sf19-board": "nnue_infer.Evaluator(nnue_infer.network_from_spec('sf19')).evaluate(chess.Board(FEN))",
    "sf19-batch": "nnue_infer.Evaluator(nnue_infer.network_from_spec('sf19')).evaluate_batch([FEN])",
}

#: Targets of issue 19 (process CPU seconds): case -> (cold, warm); the import case's is the import's own time.
TARGETS = {"import": (0.2, 0.2), "cli-eval": (30, 1.0), "sf15-session": (90, None)}

#: Run in the subprocess: times the import and every Dispatcher.compile, runs the case, writes JSON.
DRIVER = """
import json, sys, time
t0 = time.process_time()
import numpy, numba, chess
t1 = time.process_time()
from numba.core import base, dispatcher
records, stack, init = [], [], [0.0, 0]
_compile = dispatcher.Dispatcher.compile
_refresh = base.BaseContext.refresh
def _refreshed(self):  # Numba's target initialisation (its first call is the cost; later ones add new registries)
    init[1] += 1
    start = time.process_time()
    try:
        return _refresh(self)
    finally:
        init[1] -= 1
        if not init[1]:
            init[0] += time.process_time() - start
base.BaseContext.refresh = _refreshed
def _count(self, which):
    return sum(getattr(self, which).values())
def _timed(self, sig):
    start = time.process_time()
    stack.append(0.0)
    misses, hits = _count(self, "_cache_misses"), _count(self, "_cache_hits")
    try:
        return _compile(self, sig)
    finally:
        total = time.process_time() - start
        inner = stack.pop()
        if stack:
            stack[-1] += total
        kind = ("compile" if _count(self, "_cache_misses") > misses else
                "load" if _count(self, "_cache_hits") > hits else None)  # None: an overload already held
        f = self.py_func
        passes = {}
        if total - inner > 5:  # where a long compile went: Numba's passes (lowering includes LLVM)
            cres = self.overloads.get(tuple(sig)) if isinstance(sig, tuple) else None
            times = cres.metadata.get("pipeline_times", {}) if cres is not None else {}
            for pipeline in times.values():
                for name, t in pipeline.items():
                    passes[name.split("_", 1)[-1]] = round(t.init + t.run + t.finalize, 2)
        if kind:
            records.append((f.__module__ + "." + f.__qualname__, str(sig), round(total - inner, 3), passes, kind))
dispatcher.Dispatcher.compile = _timed
import nnue_infer
t2 = time.process_time()
FEN = %(fen)r
EPD, OUT, PLAIN = sys.argv[2], sys.argv[3], sys.argv[4]
exec(%(code)r)
t3 = time.process_time()
with open(sys.argv[1], "w") as f:
    json.dump({"import": t2 - t1, "base_import": t1 - t0, "total": t3 - t0, "target_init": init[0],
               "compiles": [r for r in records if r[4] == "compile"],
               "loads": [r for r in records if r[4] == "load"]}, f)
"""


def run_case(name: str, cache_dir: str) -> dict:
    """Run case ``name`` in a subprocess on ``cache_dir``; its figures (see :data:`DRIVER`)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out, tempfile.TemporaryDirectory() as work:
        epd = os.path.join(work, "positions.epd")
        with open(epd, "w") as f:
            f.write(FEN + "\n")
        plain = os.path.join(work, "positions.plain")  # a training-data record (data convert to .binpack)
        with open(plain, "w") as f:
            f.write(f"fen {FEN}\nmove f1b5\nscore 20\nply 4\nresult 0\ne\n")
        code = DRIVER % {"fen": FEN, "code": textwrap.dedent(CASES[name])}
        env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
        proc = subprocess.run([sys.executable, "-c", code, out.name, epd, os.path.join(work, "out"), plain], env=env,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"case {name} failed:\n{proc.stderr[-3000:]}")
        with open(out.name) as f:
            return json.load(f)


def report(name: str, label: str, result: dict, top: int, records: list | None = None) -> None:
    compiles = sorted(result["compiles"] + result["loads"], key=lambda r: -r[2])
    spent = sum(r[2] for r in result["compiles"])
    loading = sum(r[2] for r in result["loads"])
    counts = (f"{spent:.2f} s compiling in {len(result['compiles'])} compiles, {loading:.2f} s loading in "
              f"{len(result['loads'])} loads, of which {result['target_init']:.2f} s Numba's target init")
    if records is not None:
        target = TARGETS.get(name, (None, None))[label == "warm"] if label in ("cold", "warm") else None
        figure, seconds = ((f"import nnue_infer beyond numpy, numba, chess ({label} cache)", result["import"])
                           if name == "import" else (f"case {name}, {label} cache: whole process", result["total"]))
        records.append(common_row(figure, f"{seconds:.3f} s CPU" if name == "import" else
                                  f"{seconds:.2f} s CPU ({counts})",
                                  target=f"<= {target} s" if target else "",
                                  met=seconds <= target if target else None))
    print(f"{name:14s} {label:5s} total {result['total']:7.2f} s CPU  import {result['import']:5.2f} s  "
          f"compiling {spent:7.2f} s in {len(result['compiles'])} compiles  loading {loading:5.2f} s in "
          f"{len(result['loads'])} loads  target init {result['target_init']:5.2f} s", flush=True)
    for kernel, sig, seconds, passes, kind in compiles[:top]:
        if seconds >= 0.05:
            print(f"    {seconds:7.2f} s  {kind:7s}  {kernel}{sig if len(sig) < 80 else sig[:77] + '...'}", flush=True)
        slow = sorted(passes.items(), key=lambda kv: -kv[1])[:4]
        if slow:
            shown = ", ".join(f"{k} {v:.1f}" for k, v in slow)
            print(f"             passes (s, callees included): {shown}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="cases to run (default: all)")
    parser.add_argument("--warm", action="store_true", help="run each case again on its filled cache")
    parser.add_argument("--after", metavar="CASE", help="run CASE first on each case's empty cache, not reported: "
                        "the case then shows what it compiles beyond CASE (e.g. --after cli-eval: a further mode of the command)")
    parser.add_argument("--top", type=int, default=12, help="compiles listed per case (by own time)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE for benchmarks/manual.py")
    args = parser.parse_args()
    records = []
    if args.json:  # checked before the cases run (minutes) so that their figures are not lost at the end
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import common

        try:
            common.output_file(args.json)
        except argparse.ArgumentTypeError as exc:
            parser.error(f"argument --json: {exc}")
    if args.list:
        print("\n".join(CASES))
        return
    unknown = [c for c in [*args.cases, *([args.after] if args.after else [])] if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    after = f", after {args.after} on it" if args.after else ""
    print(f"# bench_compile: process CPU time, empty NUMBA_CACHE_DIR per case{after}; python {sys.version.split()[0]}, "
          f"os.getloadavg() {os.getloadavg()[0]:.1f}", flush=True)
    for name in args.cases or CASES:
        with tempfile.TemporaryDirectory(prefix="nnue-compile-") as cache:
            try:
                if args.after:
                    run_case(args.after, cache)
                report(name, "cold" if not args.after else "after", run_case(name, cache), args.top, records)
                if args.warm:
                    report(name, "warm", run_case(name, cache), args.top, records)
            except RuntimeError as e:
                print(e, flush=True)
    if args.json:
        common.write_json(args.json, "startup", records, f"process CPU time (user + sys), a fresh process and an "
                          f"empty NUMBA_CACHE_DIR per case{after}")


def common_row(*args, **kwargs) -> dict:
    """``common.row``, imported here so that ``--list`` and the subprocesses need no benchmarks path."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common

    return common.row(*args, **kwargs)


if __name__ == "__main__":
    main()

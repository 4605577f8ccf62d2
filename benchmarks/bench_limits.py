"""nnue-infer against the hand-written C floors of ``shared/limits``: the ratio table of issue 11.

One command builds the C reference kernels (``shared/limits``: plain C, AVX2 and AVX-512 VNNI
intrinsics on synthetic weights of the same shapes) in a temporary directory, then alternates
ROUNDS times: one C process (every case, interleaved, its own median per case) and this
process's nnue-infer measurements of the same operations on Stockfish 15.1's network (and the
bundled default network for the last row).  A cell is the median over rounds; the ratio is
nnue-infer / best C implementation.  Both sides are timed in **thread CPU time**
(``CPUCLOCK=1`` for C, ``time.thread_time_ns`` here), so the other jobs on a shared machine
move the figures much less than wall time would.

Kernel-only rows call the library's kernel n times inside one compiled loop; whole-call rows
time the Python API.  On a CPU without AVX-512 the C bench is built without its AVX-512 file
(and the three memory probes that need it are compiled for AVX-512 but never run).

    python benchmarks/bench_limits.py              # ROUNDS=3, about 2-3 minutes
    python benchmarks/bench_limits.py --rounds 5 --limits /path/to/shared/limits

The instruction-set path is nnue-infer's default for this CPU (``NNUE_INFER_SIMD`` forces one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import chess
import numba
import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from common import REPO  # noqa: E402

import nnue_infer  # noqa: E402
from nnue_infer.features import MAX_PIECES, board_bitboards  # noqa: E402
from nnue_infer.batch import batch_kernels  # noqa: E402
from nnue_infer.kernels.nnue import forward as K# noqa: E402
from nnue_infer.kernels import simd# noqa: E402
from nnue_infer.kernels.nnue.accumulator import refresh_accumulator, update_accumulator  # noqa: E402
from nnue_infer.kernels.nnue.activation import ft_transform  # noqa: E402
from nnue_infer.kernels.nnue.dense import COL_ROWS, first_layer, ft_input, propagate_layer_stack  # noqa: E402
from nnue_infer.kernels.nnue.feature_index import active_features# noqa: E402

#: 30 pieces, as the C bench's positions (30 active features per perspective).
FEN30 = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
QUIET = "d2d3"  # a quiet non-king move from FEN30

# (row label, C floor as a sum of (coefficient, "bench\tvariant") cases, nnue-infer kind), in the order.
STACK_HOT = ((1, "eval_from_acc\tbig dense hot"), (-1, "pairwise_2p\tbig 2x1024->1024 hot"))
ROWS = [
    ("layer stack after the activation (fc_0 1024->16, fc_1, fc_2), kernel alone", STACK_HOT, "stack"),
    ("fc_0 1024->16, one bucket, kernel alone", ((1, "fc0\tdense, 1 bucket (16KB w)"),), "fc0"),
    ("pairwise transform, both perspectives, kernel alone", ((1, "pairwise_2p\tbig 2x1024->1024 hot"),), "pairwise"),
    ("accumulator update, quiet move, one perspective (hot, +PSQT)", ((1, "update_1p\tbig1024+psqt quiet hot"),),
     "update"),
    ("accumulator refresh, one perspective, 30 rows (hot, +PSQT)", ((1, "refresh_1p\tbig1024+psqt hot"),), "refresh"),
    ("evaluate from scratch, batch kernel CPU per position (hot)", ((1, "eval_scratch\tbig hot"),), "batch"),
    ("incremental quiet move + evaluate, Python call beyond python-chess's push/pop",
     ((1, "eval_incremental\tbig hot"),), "incremental"),
    ("evaluate() of an already evaluated position (Python call)", ((1, "eval_from_acc\tbig dense hot"),), "evaluated"),
    ("evaluate(board) from scratch (Python call)", ((1, "eval_scratch\tbig hot"),), "evaluate_board"),
    # C's from-scratch small256+stack exists only as plain C here without AVX-512 (gcc's unroll-and-jam
    # makes it slow): its floor is two refreshes (best implementation) plus the evaluation from the accumulator.
    ("bundled default net, from scratch, batch CPU per position",
     ((2, "refresh_1p\tsmall256 hot"), (1, "eval_from_acc\tsmall256+stack 1 pos hot")), "batch_default"),
]
C_FILTER = "|".join(sorted({c.split("\t")[0] + "/" + c.split("\t")[1] + "/" for _, cs, _ in ROWS for _, c in cs}))


# ------------------------------------------------------------------------------------------- C
def shared_dir() -> Path:
    """The project's shared directory (``$NNUE_INFER_SHARED``, else ``../shared`` beside the
    repository, else ``/work/shared``): ``limits/`` and ``data/`` are in it."""
    shared = Path(os.environ.get("NNUE_INFER_SHARED", REPO.parent / "shared"))
    return shared if (shared / "limits").is_dir() else Path("/work/shared")


def build_c(limits: Path, work: Path) -> Path:
    """Copy ``limits`` to ``work`` and build its ``bench`` (without AVX-512 parts if the CPU lacks them;
    the CPU's AVX-512 VNNI flag is read as ``avx512vnni`` or ``avx512_vnni``)."""
    src = work / "limits"
    shutil.copytree(limits, src, ignore=shutil.ignore_patterns("raw", "*.o", "bench", "probe_throughput"))
    flags = set(open("/proc/cpuinfo").read().split()) if Path("/proc/cpuinfo").exists() else set()
    if flags & {"avx512vnni", "avx512_vnni"} and "avx512bw" in flags:
        # HAVE512 set here: the Makefile looks for "avx512vnni", which Linux spells "avx512_vnni"
        # on some CPUs (this machine's Xeon): its own test left the AVX-512 floors out there
        subprocess.run(["make", "-s", "bench", "HAVE512=1"], cwd=src, check=True, capture_output=True)
        return src / "bench"
    bench = (src / "bench.c").read_text()
    target = '__attribute__((target("avx512f,avx512bw"))) '
    for head in ("__attribute__((noinline)) static int64_t read_avx512", "static void b_rows_indep(long n)",
                 "static void b_rows_dep(long n)"):
        bench = bench.replace(head, target + head)
    for line in ("    bad += verify(&impl_avx512);\n", "    register_impl(&impl_avx512, 0);\n",
                 '    register_ext(&impl_avx512, ext_avx512_eval_small256_stack, "avx512");\n'):
        bench = bench.replace(line, "")
    bench = bench.replace("int32_t y = ext_avx512_eval_small256_stack(", "int32_t y = ext_scalar_eval_small256_stack(")
    (src / "bench_noavx512.c").write_text(bench)
    native = ["gcc", "-O3", "-march=native", "-std=gnu11", "-w"]
    objs = []

    def cc(flags_, source, obj, *defs):
        subprocess.run([*flags_, *defs, "-c", source, "-o", obj], cwd=src, check=True)
        objs.append(obj)

    cc(native, "bench_noavx512.c", "bench.o")
    cc(native, "kernels_scalar.c", "ks.o", "-DIMPL_SYM=impl_scalar", '-DIMPL_NAME="scalar"')
    cc(native, "kernels_scalar.c", "kn.o", "-fno-loop-unroll-and-jam", "-DIMPL_SYM=impl_nojam", '-DIMPL_NAME="nojam"')
    cc(native, "kernels_scalar.c", "kv.o", "-fno-tree-vectorize", "-fno-tree-slp-vectorize", "-DIMPL_SYM=impl_novec",
       '-DIMPL_NAME="novec"')
    cc(["gcc", "-O3", "-march=x86-64-v3", "-std=gnu11", "-w"], "kernels_avx2.c", "ka.o")
    cc(native, "ext_scalar.c", "es.o")
    subprocess.run(["gcc", "-o", "bench", *objs], cwd=src, check=True)
    return src / "bench"


def run_c(bench: Path) -> dict[str, tuple[float, str]]:
    """One C process (2 interleaved rounds, thread CPU time): best implementation's median per case."""
    env = dict(os.environ, ROUNDS="2", CPUCLOCK="1")
    out = subprocess.run([str(bench), C_FILTER], env=env, capture_output=True, text=True, check=True).stdout
    best: dict[str, tuple[float, str]] = {}
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] != "R" or f[3] == "novec":  # the vectoriser-off build is not a floor
            continue
        key, median = f"{f[1]}\t{f[2]}", float(f[4])
        if key not in best or median < best[key][0]:
            best[key] = (median, f[3])
    return best


# ----------------------------------------------------------------------------------- nnue-infer
@njit
def loop_pairwise(acc, params, biases, scratch, layers, n):
    out = ft_input(scratch, layers)
    for i in range(n):
        ft_transform(acc, i & 1, params[K.P_FT_ACTIVATION], params[K.P_FT_CLAMP], params[K.P_FT_SHIFT],
                     params[K.P_SIMD], biases, scratch, out)


@njit
def loop_fc0(scratch, weights, biases, layers, params, z, n):
    x = ft_input(scratch, layers)
    for _ in range(n):  # bucket 0, as propagate_layer_stack runs it (the row-major copy on vnni512)
        first_layer(x, 0, layers[0, 0], weights, layers[0, 4], layers[0, COL_ROWS], biases, layers[0, 6], layers[0, 1],
                    z, 0, params[K.P_FC0_SIMD])


@njit
def loop_stack(scratch, weights, biases, layers, params, n):
    s = 0
    for i in range(n):
        s += propagate_layer_stack(scratch, 7, weights, biases, layers, params[K.P_WEIGHT_SHIFT],
                                   params[K.P_SKIP_INDEX], params[K.P_SKIP_SUB], params[K.P_SKIP_MODE],
                                   params[K.P_SKIP_NUM], params[K.P_SKIP_DEN], params[K.P_FLOAT_OUTPUT],
                                   params[K.P_SIMD], params[K.P_FC0_SIMD], False)
    return s


@njit
def loop_update(w, pw, acc, psqt, added, removed, isa, n):
    for i in range(n):
        update_accumulator(w, pw, acc[i & 1], psqt[i & 1], added, 1, removed, 1, acc[1 - (i & 1)],
                           psqt[1 - (i & 1)], isa)


@njit
def loop_refresh(w, b, pw, feats, count, acc, psqt, isa, n):
    for _ in range(n):
        refresh_accumulator(w, b, pw, feats, count, acc, psqt, isa)


def cpu_ns(fn, n: int, samples: int = 5) -> float:
    """Median over ``samples`` of the thread CPU time of ``fn(n)`` per operation (ns)."""
    fn(max(1, n // 10))
    times = []
    for _ in range(samples):
        t = time.thread_time_ns()
        fn(n)
        times.append((time.thread_time_ns() - t) / n)
    return statistics.median(times)


def calibrate(fn, target_s: float = 0.02) -> int:
    n = 1
    while True:
        t = time.thread_time_ns()
        fn(n)
        if time.thread_time_ns() - t > target_s * 1e9 or n > 1 << 24:
            return n
        n *= 2


class Python:
    """The nnue-infer side: one callable per row kind, timed in thread CPU time per operation."""

    def __init__(self) -> None:
        self.sf = nnue_infer.stockfish_15_1_network()
        self.default = nnue_infer.default_network()
        ev = self.ev = nnue_infer.Evaluator(self.sf)
        self.board = chess.Board(FEN30)
        self.move = chess.Move.from_uci(QUIET)
        arch = self.sf.architecture
        self.weights, self.biases, self.layers = ev._weights, ev._biases, ev._layers
        self.params = ev._params
        ev._refresh(self.board)
        # 64-byte aligned copies (simd.ALIGNMENT), as the C bench's arrays and the Evaluator's are
        self.acc, self.psqt = simd.aligned(ev._acc.copy()), simd.aligned(ev._psqt.copy())
        self.scratch = simd.aligned(ev._scratch.copy())
        loop_pairwise(self.acc, self.params, self.biases, self.scratch, self.layers, 1)  # real transformed features
        fs = nnue_infer.features.architecture_features(arch)
        bb = np.empty(8, np.int64)
        board_bitboards(self.board, bb)
        feats, counts = np.empty((2, MAX_PIECES), np.int32), np.empty(2, np.int64)
        active_features(bb, fs.slot_table, fs.king_buckets, self.params[K.P_MIRROR], self.params[K.P_NUM_SLOTS],
                        feats, counts)
        self.feats, self.count = feats[0].copy(), int(counts[0])
        self.added = np.array([self.feats[3]], np.int32)
        self.removed = np.array([self.feats[5]], np.int32)
        self.z = np.empty(64, np.int32)
        self.ev.set_position(self.board)
        self.ev.evaluate()
        self.batch_args = {}
        for name, net in (("sf", self.sf), ("default", self.default)):
            e = nnue_infer.Evaluator(net)
            bbs = np.repeat(bb[None, :], 1024, axis=0)
            stm = np.zeros(1024, np.uint8)
            values, codes = np.empty(1024, np.int32), np.empty(1024, np.int32)
            net_arrays, scratch_len, _ = e._batch_args
            args = (*net_arrays, MAX_PIECES, scratch_len, 1, values, codes)
            self.batch_args[name] = (bbs, stm, args)

    def op(self, kind: str):
        """A callable ``f(n)`` doing n operations of ``kind``, and the seconds it needs per op (None: calibrate)."""
        ev, net = self.ev, self.sf
        isa = int(self.params[K.P_SIMD])
        if kind == "pairwise":
            return lambda n: loop_pairwise(self.acc, self.params, self.biases, self.scratch, self.layers, n)
        if kind == "fc0":
            return lambda n: loop_fc0(self.scratch, self.weights, self.biases, self.layers, self.params, self.z, n)
        if kind == "stack":
            return lambda n: loop_stack(self.scratch, self.weights, self.biases, self.layers, self.params, n)
        if kind == "update":
            acc, psqt = simd.aligned(np.repeat(self.acc[:1], 2, axis=0)), simd.aligned(np.repeat(self.psqt[:1], 2, axis=0))
            return lambda n: loop_update(net.ft_weights, net.psqt_weights, acc, psqt, self.added, self.removed, isa, n)
        if kind == "refresh":
            acc, psqt = simd.aligned(self.acc[0].copy()), simd.aligned(self.psqt[0].copy())
            return lambda n: loop_refresh(net.ft_weights, net.ft_biases, net.psqt_weights, self.feats, self.count,
                                          acc, psqt, isa, n)
        if kind in ("batch", "batch_default"):
            bbs, stm, args = self.batch_args["sf" if kind == "batch" else "default"]
            evaluate_batch = batch_kernels(args).evaluate_batch

            def batch(n):
                for _ in range(max(1, n // len(bbs))):
                    evaluate_batch(bbs, stm, *args)
            return batch
        if kind == "incremental":
            board, move = ev._board, self.move

            def incremental(n):
                push, evaluate, pop = ev.push, ev.evaluate, ev.pop
                for _ in range(n):
                    push(move, validate=False)
                    evaluate()
                    pop()
            return incremental
        if kind == "incremental_floor":
            board, move = self.board.copy(), self.move

            def chess_only(n):
                push, pop = board.push, board.pop
                for _ in range(n):
                    push(move)
                    pop()
            return chess_only
        if kind == "evaluated":
            def evaluated(n):
                evaluate = ev.evaluate
                for _ in range(n):
                    evaluate()
            return evaluated
        if kind == "evaluate_board":
            board = self.board

            def evaluate_board(n):
                evaluate = ev.evaluate
                for _ in range(n):
                    evaluate(board)
            return evaluate_board
        raise ValueError(kind)

    def measure(self) -> dict[str, float]:
        out = {}
        for kind in [k for _, _, k in ROWS] + ["incremental_floor"]:
            fn = self.op(kind)
            if kind.startswith("batch"):
                n = 1024 * 8
                out[kind] = cpu_ns(fn, n, samples=3)
            else:
                out[kind] = cpu_ns(fn, calibrate(fn))
        out["incremental"] -= out.pop("incremental_floor")
        return out


def floor_label(cases, c_round) -> str:
    """The C floor's implementation, e.g. ``avx2``; a floor made of several cases names them:
    ``eval_from_acc avx2 - pairwise_2p avx2``, ``2x refresh_1p avx2 + eval_from_acc scalar``."""
    if len(cases) == 1:
        return c_round[cases[0][1]][1]
    terms = []
    for i, (k, case) in enumerate(cases):
        sign = ("- " if k < 0 else "+ ") if i else ("-" if k < 0 else "")
        count = "" if abs(k) == 1 else f"{abs(k)}x "
        terms.append(f"{sign}{count}{case.split(chr(9))[0]} {c_round[case][1]}")
    return " ".join(terms)


def fmt(ns: float) -> str:
    return f"{ns:,.0f}" if ns >= 100 else f"{ns:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "3")))
    ap.add_argument("--limits", type=Path, default=shared_dir() / "limits", help="the shared/limits directory")
    ap.add_argument("--json", metavar="FILE", type=common.output_file,
                    help="also write the table to FILE for benchmarks/manual.py")
    args = ap.parse_args(argv)
    numba.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="nnue-limits-") as tmp:
        print(f"building the C floors from {args.limits} in {tmp} ...", file=sys.stderr)
        bench = build_c(args.limits, Path(tmp))
        py = Python()
        py.measure()  # compile and warm up
        c_rounds, py_rounds = [], []
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
            c_rounds.append(run_c(bench))
            py_rounds.append(py.measure())
    isa = simd.ISA_NAMES[int(py.params[K.P_SIMD])]
    print(f"nnue-infer {nnue_infer.__version__} against shared/limits C floors: median of {args.rounds} alternating "
          f"rounds, thread CPU time, 1 thread; nnue-infer path {isa} (native: "
          f"{', '.join(simd.ISA_NAMES[i] for i in simd.native_isas())}); load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| operation (Stockfish 15.1 net unless said) | C floor ns | nnue-infer ns | ratio |")
    print("|---|---|---|---|")
    records = []
    for label, cases, kind in ROWS:
        c_ns = statistics.median(sum(k * c[case][0] for k, case in cases) for c in c_rounds)
        impl = floor_label(cases, c_rounds[-1])
        py_ns = statistics.median(r[kind] for r in py_rounds)
        print(f"| {label} | {fmt(c_ns)} [{impl}] | {fmt(py_ns)} | {py_ns / c_ns:.1f}x |")
        records.append(common.row(label, f"{fmt(py_ns)} ns", f"C floor [{impl}]: {fmt(c_ns)} ns", f"{py_ns / c_ns:.1f}x"))
    if args.json:
        common.write_json(args.json, "c-floors", records,
                          f"median of {args.rounds} alternating rounds, thread CPU time, 1 thread; nnue-infer path {isa}",
                          argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

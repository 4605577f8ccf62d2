"""The sparse first dense layer against the dense one, Stockfish 15.1's net before and after the
feature-transformer permutation, with the C floor's sparse fc_0 (``shared/limits``) in the same run.

Per network (original; permuted with ``nnue_infer.inspection.permutation`` on the first 4,000
positions of ``binpack/selfplay.binpack``), over the transformed features of the dev corpus's
positions (their real feature-transformer outputs, every bucket):

* ``fc0 dense``: ``kernels.nnue.dense.first_layer`` (the path evaluations take), ns per call;
* ``fc0 sparse``: ``kernels.nnue.dense_sparse.first_layer_sparse`` (the non-zero chunks listed, then
  those blocks only), ns per call, with the share of non-zero 4-byte chunks;
* ``evaluate_moves``: ``Evaluator.evaluate_moves(board)`` per child (the incremental path), and
  ``evaluate_batch`` per position, both through the dense layer (the sparse one is not wired into
  the evaluation kernels yet): what the permutation alone changes (nothing, it must not);
* ``projected``: the per-child time with fc_0's dense time replaced by the sparse one, and with fc_0
  costing nothing: what wiring a sparse layer in could give at most on the incremental path.

C: ``fc0`` dense and sparse at the block densities the C bench has (one bucket, hot), best
implementation, median of its rounds.  Everything is thread CPU time on one thread.

    python benchmarks/bench_sparse.py               # about 2-4 minutes
    python benchmarks/bench_sparse.py --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import chess
import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_limits  # noqa: E402
import nnue_infer  # noqa: E402
from nnue_infer import Evaluator  # noqa: E402
from nnue_infer.inspection.permutation import permute  # noqa: E402
from nnue_infer.inspection.positions import read_positions  # noqa: E402
from nnue_infer.kernels import simd  # noqa: E402
from nnue_infer.kernels.nnue.dense import first_layer  # noqa: E402
from nnue_infer.kernels.nnue.dense_sparse import first_layer_sparse  # noqa: E402


@njit(cache=False)
def _fc0_loop(xs, weights, rows, w_off, w_stride, biases, b_off, b_stride, n_in, n_out, fc0, z, nnz, sparse, repeat):
    """``repeat`` passes of the first layer (dense, or sparse when ``sparse``) over ``xs``, buckets in turn."""
    s = 0
    for _ in range(repeat):
        for i in range(xs.shape[0]):
            k = i & 7
            if sparse:
                first_layer_sparse(xs[i], 0, n_in, weights, w_off + k * w_stride, biases, b_off + k * b_stride, n_out,
                                   z, 0, fc0, nnz)
            else:
                first_layer(xs[i], 0, n_in, weights, w_off + k * w_stride, rows + k * w_stride, biases,
                            b_off + k * b_stride, n_out, z, 0, fc0)
            s += z[0]
    return s


def fc0_times(net, outputs: np.ndarray, repeat: int) -> tuple[float, float]:
    """ns per call of the dense and the sparse first layer over ``outputs`` (uint8[n, 1024])."""
    weights, biases, layers = net.compute_layout
    n_in, n_out, w_off, w_stride, b_off, b_stride = (int(layers[0, c]) for c in (0, 1, 4, 5, 6, 7))
    rows = int(layers[0, 11])
    fc0 = simd.first_layer_isa(simd.ISA, net.architecture.first_layer_max_byte, net.first_layer_pair_sum,
                               net.first_layer_quad_sum)
    z = np.empty(n_out, np.int32)
    nnz = np.empty(n_in // 4 + 16, np.int32)
    args = (outputs, weights, rows, w_off, w_stride, biases, b_off, b_stride, n_in, n_out, fc0, z, nnz)
    times = []
    for sparse in (False, True):
        _fc0_loop(*args, sparse, 1)
        t = time.thread_time_ns()
        _fc0_loop(*args, sparse, repeat)
        times.append((time.thread_time_ns() - t) / (repeat * len(outputs)))
    dense, sparse = times
    return dense, sparse


def api_times(net, boards: list[chess.Board], fens: list[str]) -> tuple[float, float]:
    """ns per child of ``evaluate_moves`` and ns per position of ``evaluate_batch``."""
    ev = Evaluator(net)
    ev.evaluate_moves(boards[0])
    ev.evaluate_batch(fens[:8])
    children = sum(board.legal_moves.count() for board in boards)
    t = time.thread_time_ns()
    for board in boards:
        ev.evaluate_moves(board)
    per_child = (time.thread_time_ns() - t) / children
    t = time.thread_time_ns()
    ev.evaluate_batch(fens)
    per_position = (time.thread_time_ns() - t) / len(fens)
    return per_child, per_position


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=100, help="passes over the outputs per fc_0 timing")
    args = ap.parse_args()
    import numba

    numba.set_num_threads(1)
    data = bench_limits.shared_dir() / "data"
    corpus = read_positions(data / "positions-dev.jsonl")
    fit = read_positions(data / "binpack" / "selfplay.binpack", limit=4000)
    original = nnue_infer.stockfish_15_1_network()
    permuted = permute(original, fit.bitboards, fit.stm).network
    nets = {"original": original, "permuted": permuted}
    boards = [chess.Board(f) for f in corpus.fens[::4]]
    boards = [b for b in boards if not b.is_game_over()]
    outputs = {name: np.ascontiguousarray(Evaluator(net).activations_bitboards(corpus.bitboards, corpus.stm).ft_output)
               for name, net in nets.items()}
    density = {name: float(o.reshape(len(o), -1, 4).any(axis=2).mean()) for name, o in outputs.items()}
    with tempfile.TemporaryDirectory(prefix="nnue-sparse-") as tmp:
        print("building the C floors ...", file=sys.stderr)
        bench = bench_limits.build_c(bench_limits.shared_dir() / "limits", Path(tmp))
        bench_limits.C_FILTER = "fc0"
        rows: dict[str, list[float]] = {}
        c_rows: dict[str, list[float]] = {}
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
            for key, (median, impl) in bench_limits.run_c(bench).items():
                c_rows.setdefault(f"C {key.replace(chr(9), ' ')} ({impl})", []).append(median)
            for name, net in nets.items():
                d, s = fc0_times(net, outputs[name], args.repeat)
                child, position = api_times(net, boards, corpus.fens)
                for label, v in ((f"{name}: fc0 dense", d), (f"{name}: fc0 sparse", s),
                                 (f"{name}: evaluate_moves per child", child),
                                 (f"{name}: evaluate_batch per position", position),
                                 (f"{name}: projected per child (fc0 sparse)", child - d + s),
                                 (f"{name}: projected per child (fc0 free)", child - d)):
                    rows.setdefault(label, []).append(v)
    print(f"nnue-infer {nnue_infer.__version__}, {simd.ISA_NAMES[simd.ISA]} path, thread CPU time, one thread, "
          f"median of {args.rounds} rounds; {len(corpus)} dev positions ({len(boards)} parents for evaluate_moves)")
    for name in nets:
        print(f"{name}: non-zero 4-byte chunks of the feature-transformer output {100 * density[name]:.1f} %")
    print("| measurement | ns |")
    print("|---|---|")
    med = {k: statistics.median(v) for k, v in rows.items()}
    for k, v in med.items():
        print(f"| {k} | {v:.1f} |")
    for k, v in c_rows.items():
        print(f"| {k} | {statistics.median(v):.1f} |")
    base = med["original: evaluate_moves per child"]
    for name in nets:
        print(f"{name}: fc0 sparse / dense {med[f'{name}: fc0 sparse'] / med[f'{name}: fc0 dense']:.2f}; "
              f"evaluate_moves per child, original dense / {name} projected sparse: "
              f"{base / med[f'{name}: projected per child (fc0 sparse)']:.3f}x (fc0 free: "
              f"{base / med[f'{name}: projected per child (fc0 free)']:.3f}x)")


if __name__ == "__main__":
    main()

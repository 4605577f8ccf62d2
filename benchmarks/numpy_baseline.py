"""A straightforward NumPy implementation of Stockfish 15.1's network: the speed baseline.

Integer NumPy throughout (int64 sums, C-style truncating division), no Numba, a full
refresh of both accumulators per position, features read with ``Board.piece_map()``.
It reads the same :class:`nnue_infer.Network` arrays, so its values are bit-identical to
nnue-infer's (``report.py`` checks this before timing it).

Source of the arithmetic: ``shared/reference/stockfish-15.1-nnue.md`` (Stockfish sf_15.1,
``nnue/evaluate_nnue.cpp``, ``nnue/nnue_architecture.h``, ``nnue/features/half_ka_v2_hm.cpp``).
"""

from __future__ import annotations

import chess
import numpy as np

import nnue_infer
from nnue_infer.features import feature_set


def tdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _wrap32(x: int) -> int:
    """Two's-complement wrap to int32 (Stockfish's int32 arithmetic)."""
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


class NumpyEvaluator:
    """Evaluates HalfKAv2_hm pairwise networks (Stockfish 15.1's layout) with NumPy only."""

    def __init__(self, network: nnue_infer.Network) -> None:
        arch = network.architecture
        if arch.feature_set != "HalfKAv2_hm" or len(arch.layers) != 3:
            raise ValueError("the baseline implements Stockfish 15.1's architecture only")
        fs = feature_set("HalfKAv2_hm")
        self.slots = fs.slot_table.tolist()
        self.king_buckets = fs.king_buckets.tolist()
        self.num_slots = fs.num_slots
        self.arch = arch
        self.ft_w = network.ft_weights
        self.ft_b = network.ft_biases.astype(np.int64)
        self.psqt_w = network.psqt_weights
        self.w = [w.astype(np.int64) for w in network.layer_weights]
        self.b = [b.astype(np.int64) for b in network.layer_biases]

    def features(self, board: chess.Board, perspective: bool) -> list[int]:
        """Active HalfKAv2_hm feature indices of one perspective."""
        ksq = board.king(perspective)
        orient = (0 if perspective == chess.WHITE else 56) ^ (7 if chess.square_file(ksq) < 4 else 0)
        base = 64 * self.num_slots * self.king_buckets[ksq ^ orient]
        return [(sq ^ orient) + 64 * self.slots[0 if piece.color == perspective else 1][piece.piece_type - 1] + base
                for sq, piece in board.piece_map().items()]

    def evaluate(self, board: chess.Board) -> int:
        """Internal units, side to move's point of view (as ``nnue_infer.Evaluator.evaluate``)."""
        arch = self.arch
        half = arch.ft_width // 2
        stm = board.turn
        acc, psqt = {}, {}
        for p in (chess.WHITE, chess.BLACK):
            idx = self.features(board, p)
            # int16 accumulator with wrap-around, as Stockfish's 16-bit lanes
            acc[p] = (self.ft_b + self.ft_w[idx].sum(axis=0, dtype=np.int64)).astype(np.int16).astype(np.int64)
            psqt[p] = self.psqt_w[idx].sum(axis=0, dtype=np.int64)
        pieces = chess.popcount(board.occupied)
        bucket = (pieces - 1) // (32 // arch.output_buckets)
        x = np.concatenate([
            (np.clip(acc[p][:half], 0, arch.ft_clamp) * np.clip(acc[p][half:], 0, arch.ft_clamp)) >> arch.ft_shift
            for p in (stm, not stm)
        ])
        shift = arch.weight_scale_bits
        z0 = self.w[0][bucket] @ x + self.b[0][bucket]
        n0 = arch.layers[0].n_activated
        a0 = z0[:n0]
        x1 = np.zeros(self.w[1].shape[2], np.int64)
        x1[:n0] = np.minimum((a0 * a0) >> (2 * shift + 7), 127)
        x1[n0:2 * n0] = np.clip(a0 >> shift, 0, 127)
        z1 = self.w[1][bucket] @ x1 + self.b[1][bucket]
        x2 = np.clip(z1 >> shift, 0, 127)
        out = int((self.w[2][bucket] @ x2 + self.b[2][bucket])[0])
        skip = tdiv(int(z0[arch.skip_index]) * arch.skip_numerator, arch.skip_denominator)
        positional = out + skip
        psqt_term = tdiv(_wrap32(int(psqt[stm][bucket] - psqt[not stm][bucket])), 2)  # Stockfish's int32 arithmetic
        return tdiv(_wrap32(psqt_term + positional), arch.output_scale)

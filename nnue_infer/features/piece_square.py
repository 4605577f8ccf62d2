"""King-bucketed piece-square feature sets: the mechanism HalfKAv2_hm and Chess768 share.

One feature per piece (kings included), ``(square ^ orientation) + 64 * slot + 64 *
num_slots * king_bucket``; the index arithmetic is compiled
(:mod:`nnue_infer.kernels.chess.bitboard`).  The concrete sets are built by
:mod:`nnue_infer.features.halfkav2_hm` and :mod:`nnue_infer.features.chess768`.

Source: Stockfish 15.1, ``nnue/features/half_ka_v2_hm.{h,cpp}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import chess
import numpy as np

from ..kernels.nnue.feature_index import active_features
from .board import MAX_PIECES, board_bitboards

#: Kernel codes of the mirroring modes (see :data:`nnue_infer.network.MIRROR_MODES`).
MIRROR_CODES = {"none": 0, "e-h": 1, "a-d": 2}


@dataclass(frozen=True, eq=False)
class FeatureSet:
    """A king-bucketed piece-square feature set.

    Attributes
    ----------
    name : str
        The field's name for it, e.g. ``"HalfKAv2_hm"``.
    slot_table : int32[2, 6]
        Slot of own (row 0) and their (row 1) pieces, columns P, N, B, R, Q, K.
    num_slots : int
        Slots per king bucket (64 features each).
    king_buckets : int32[64]
        King bucket of the perspective's own king by its oriented square.
    mirror : int
        0 no mirroring; 1 mirror files so the own king is always on files e-h (HalfKAv2_hm);
        2 so it is always on files a-d (bullet's ``ChessBucketsMirrored``).
    """

    name: str
    slot_table: np.ndarray
    num_slots: int
    king_buckets: np.ndarray
    mirror: int

    @property
    def num_king_buckets(self) -> int:
        """Number of king buckets."""
        return int(self.king_buckets.max()) + 1

    @property
    def num_features(self) -> int:
        """Features per perspective: 64 * num_slots * number of king buckets."""
        return 64 * self.num_slots * self.num_king_buckets

    @property
    def num_king_frames(self) -> int:
        """King frames (king bucket x mirrored or not) per perspective: the refresh cache's
        entries.  Within one frame every piece keeps its feature index, so accumulators of the
        same frame differ only by the pieces that differ (see ``kernels.nnue.feature_index.king_frame``)."""
        return 2 * self.num_king_buckets

    def active(self, board: chess.Board) -> tuple[list[int], list[int]]:
        """Active feature indices (White's perspective, Black's) of ``board``, sorted.

        Raises :class:`~nnue_infer.errors.PositionError` for positions the network
        cannot represent (see :func:`board_bitboards`).
        """
        out = np.empty((2, MAX_PIECES), np.int32)
        counts = np.empty(2, np.int64)
        active_features(board_bitboards(board), self.slot_table, self.king_buckets, self.mirror,
                        self.num_slots, out, counts)
        return sorted(out[0, : counts[0]].tolist()), sorted(out[1, : counts[1]].tolist())

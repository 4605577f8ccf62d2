"""HalfKAv2_hm: Stockfish's king-bucketed piece-square features (22,528 per perspective).

For perspective P with own king on K, every piece on the board, both kings included, gives
``(s ^ m) + 64 * slot + 704 * bucket``: ``m`` mirrors files when K is on files a-d (the own
king lands on files e-h) and flips ranks for Black; slots are own pawn 0, their pawn 1, ...,
own queen 8, their queen 9, any king 10; 32 king buckets by the oriented king square.
The incremental delta of a move is the difference of the piece sets (at most 4 features),
unless P's own king moved (then a refresh through the refresh cache).

Source: Stockfish 15.1 and 19, ``nnue/features/half_ka_v2_hm.{h,cpp}``;
``shared/reference/stockfish-19-nnue.md`` section 3.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .piece_square import FeatureSet

#: Feature-set hash (``HalfKAv2_hm::HashValue``).
HASH = 0x7F234CB8
NAME = "HalfKAv2_hm"


@lru_cache(maxsize=None)
def halfkav2_hm() -> FeatureSet:
    """The HalfKAv2_hm :class:`~nnue_infer.features.piece_square.FeatureSet`."""
    # Own pieces take even slots, theirs odd; both kings share slot 10.
    slots = np.array([[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 10]], np.int32)
    # Oriented king square (file e-h after mirroring) -> 4 * (7 - rank) + (7 - file).
    buckets = np.array([4 * (7 - sq // 8) + (7 - max(sq % 8, 7 - sq % 8)) for sq in range(64)], np.int32)
    return FeatureSet(NAME, slots, 11, buckets, 1)

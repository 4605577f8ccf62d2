"""Chess768: 12 piece slots x 64 squares, optionally king-bucketed and mirrored.

Own pawn..king take slots 0-5, their pawn..king slots 6-11; squares are flipped vertically
for Black.  With a 64-entry king-bucket table (by oriented own-king square) and a mirror mode
it covers bullet's ``ChessBucketsMirrored``; with no buckets and mirror ``"e-h"`` it is
Stockfish 19 lite's P_hm (768 features: the own king always on files e-h).

Source: bullet, ``inputs`` (``Chess768``: ``384 * side + 64 * piece + square``,
``ChessBucketsMirrored``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .piece_square import MIRROR_CODES, FeatureSet

NAME = "Chess768"


@lru_cache(maxsize=None)
def chess768(king_buckets: tuple[int, ...] | None = None, mirror: str | None = None) -> FeatureSet:
    """The Chess768 :class:`~nnue_infer.features.piece_square.FeatureSet`.

    ``king_buckets``: 64 ints by oriented king square, ``None`` for a single bucket;
    ``mirror``: ``"none"`` (default), ``"e-h"`` or ``"a-d"``.  ``ValueError`` for an unknown mode.
    """
    if mirror not in (None, *MIRROR_CODES):
        raise ValueError(f"unknown mirror mode {mirror!r}; known: {sorted(MIRROR_CODES)}")
    slots = np.array([[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]], np.int32)
    buckets = np.zeros(64, np.int32) if king_buckets is None else np.array(king_buckets, np.int32)
    return FeatureSet(NAME, slots, 12, buckets, MIRROR_CODES[mirror or "none"])

"""Input feature sets: from a python-chess ``Board`` to active feature indices.

One module per feature set, as Stockfish's ``nnue/features/`` holds one file per set; each
owns its index math, its tables and its incremental delta (the arithmetic itself is compiled,
in :mod:`nnue_infer.kernels`):

* :mod:`~nnue_infer.features.halfkav2_hm`: HalfKAv2_hm (Stockfish 15.1 to 19), int16 rows;
* :mod:`~nnue_infer.features.chess768`: Chess768 with optional king buckets and mirroring
  (bullet nets, the default network, Stockfish 19 lite's P_hm);
* both are instances of :mod:`~nnue_infer.features.piece_square`'s king-bucketed mechanism;
* :mod:`~nnue_infer.features.board`: board -> validated bitboards, shared by all sets.

A network's input is its piece-square set (``Architecture.feature_set``, int16 rows).
"""

from __future__ import annotations

from .board import MAX_PIECES, board_bitboards, check_position, check_variant
from .chess768 import chess768
from .halfkav2_hm import halfkav2_hm
from .piece_square import FeatureSet

__all__ = ["MAX_PIECES", "FeatureSet", "architecture_features", "board_bitboards", "check_position", "check_variant",
           "feature_set"]


def feature_set(name: str, king_buckets: tuple[int, ...] | None = None, mirror: str | None = None) -> FeatureSet:
    """The piece-square :class:`FeatureSet` called ``name``, with a king-bucket table and mirroring for Chess768.

    ``king_buckets`` (64 ints, by oriented king square) and ``mirror`` (``"none"``, ``"e-h"``,
    ``"a-d"``) are ``None`` for the feature set's defaults.  ``ValueError`` if unknown.
    """
    if name == "HalfKAv2_hm":
        if king_buckets is not None or mirror not in (None, "e-h"):
            raise ValueError("HalfKAv2_hm has a fixed king-bucket table and mirroring")
        return halfkav2_hm()
    if name == "Chess768":
        return chess768(king_buckets, mirror)
    raise ValueError(f"unknown feature set {name!r}; known: ['Chess768', 'HalfKAv2_hm']")


def architecture_features(arch) -> FeatureSet:  # arch: nnue_infer.network.Architecture
    """The piece-square :class:`FeatureSet` an :class:`~nnue_infer.network.Architecture` describes."""
    return feature_set(arch.feature_set, arch.king_buckets, arch.mirror)

"""Input feature sets: from a python-chess ``Board`` to active feature indices.

One module per feature set, as Stockfish's ``nnue/features/`` holds one file per set; each
owns its index math, its tables and its incremental delta (the arithmetic itself is compiled,
in :mod:`nnue_infer.kernels`):

* :mod:`~nnue_infer.features.halfkav2_hm`: HalfKAv2_hm (Stockfish 15.1 to 19), int16 rows;
* :mod:`~nnue_infer.features.chess768`: Chess768 with optional king buckets and mirroring
  (bullet nets, the default network, Stockfish 19 lite's P_hm);
* :mod:`~nnue_infer.features.full_threats`: FullThreats (Stockfish 19), int8 rows;
* :mod:`~nnue_infer.features.pawn_pairs`: PP_3Wide (Stockfish 19), int8 rows;
* :mod:`~nnue_infer.features.full_threats_18`: Stockfish 18's threat features, int8 rows;
* the piece-square sets are instances of :mod:`~nnue_infer.features.piece_square`'s king-bucketed mechanism;
* :mod:`~nnue_infer.features.board`: board -> validated bitboards, shared by all sets.

A network's input is its piece-square set (``Architecture.feature_set``, int16 rows), plus for
Stockfish 19 the int8 sets (one index space, :class:`Int8Layout`), all summed into one int16
accumulator with wrap-around.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import full_threats, full_threats_18, pawn_pairs
from .board import MAX_PIECES, board_bitboards, check_position, check_variant
from .chess768 import chess768
from .halfkav2_hm import halfkav2_hm
from .piece_square import FeatureSet

__all__ = ["INT8_FEATURE_SETS", "MAX_PIECES", "FeatureSet", "Int8Layout", "architecture_features", "board_bitboards",
           "check_position", "check_variant", "feature_set", "int8_layout"]

#: Feature sets with int8 rows, by name: their number of features.
INT8_FEATURE_SETS = {full_threats.NAME: full_threats.NUM_FEATURES, full_threats_18.NAME: full_threats_18.NUM_FEATURES,
                     pawn_pairs.NAME: pawn_pairs.NUM_FEATURES}
#: Kernel code of each threat set (``kernels.nnue.threats.THREATS_*``).
_THREAT_CODES = {full_threats.NAME: 1, full_threats_18.NAME: 2}


@dataclass(frozen=True)
class Int8Layout:
    """Where a network's int8 feature sets sit in their shared index space (rows of ``int8_weights``).

    Attributes
    ----------
    num_features : int
        Total int8 rows (0 when the network has none).
    threats : int
        Threat set of rows 0 .. (its size - 1): 1 FullThreats (Stockfish 19), 2 FullThreats18
        (Stockfish 18), 0 none (``kernels.nnue.threats.THREATS_*``).
    pairs : int
        1 if PP_3Wide is used, else 0.
    pair_offset : int
        First row of the pawn pairs (after the threat rows: 59,808 for Stockfish 19).
    """

    num_features: int
    threats: int
    pairs: int
    pair_offset: int


def int8_layout(names: tuple[str, ...]) -> Int8Layout:
    """The :class:`Int8Layout` of the int8 feature sets ``names`` (a threat set first, then PP_3Wide).

    ``ValueError`` for an unknown set, a repeated one, two threat sets or another order.
    """
    known = list(INT8_FEATURE_SETS)
    for name in names:
        if name not in INT8_FEATURE_SETS:
            raise ValueError(f"unknown int8 feature set {name!r}; known: {known}")
    if list(names) != [n for n in known if n in names]:
        raise ValueError(f"int8 feature sets must be distinct and in the order {known}, got {list(names)}")
    threat_sets = [n for n in names if n in _THREAT_CODES]
    if len(threat_sets) > 1:
        raise ValueError(f"at most one threat feature set, got {threat_sets}")
    threats = _THREAT_CODES[threat_sets[0]] if threat_sets else 0
    pairs = int(pawn_pairs.NAME in names)
    offset = INT8_FEATURE_SETS[threat_sets[0]] if threat_sets else 0
    return Int8Layout(offset + (pawn_pairs.NUM_FEATURES if pairs else 0), threats, pairs, offset)


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

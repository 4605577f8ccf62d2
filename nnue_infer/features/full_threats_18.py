"""Stockfish 18's threat features, ``Full_Threats(Friend)`` (79,856 per perspective, int8 rows).

The same mechanism as Stockfish 19's FullThreats (:mod:`nnue_infer.features.full_threats`:
attacker on ``f`` attacks the piece on ``t`` on the current board, lines stop at the first
occupied square, indices relative to the perspective with the own king mirrored to files a-d)
with another table of which pairs count: kings attack pawns, knights, bishops and rooks and
are attacked by knights, bishops, rooks and queens; pawns threaten pawns, knights and rooks.
Of two pieces of the same type attacking each other only the direction with ``f' > t'`` counts
(pawns of one colour never attack each other both ways).  No pawn-pair features.

Source: Stockfish 18 (tag ``sf_18``), ``nnue/features/full_threats.{h,cpp}`` (``map``,
``numValidTargets``, ``init_index_luts``; ``HashValue`` 0x8F234CB8, ``Dimensions`` 79,856).
"""

from __future__ import annotations

import chess

from ..kernels.nnue.threats import NUM_THREAT_FEATURES_SF18, THREATS_SF18
from .full_threats import relation_features

NAME = "FullThreats18"
#: Feature-set hash (``FullThreats::HashValue`` at sf_18).
HASH = 0x8F234CB8
NUM_FEATURES = NUM_THREAT_FEATURES_SF18


#: ``(threats, pairs)`` of :func:`~nnue_infer.kernels.nnue.threats.relation_list` that select this set.
RELATIONS = (THREATS_SF18, 0)


def active(board: chess.Board) -> tuple[list[int], list[int]]:
    """Sorted indices (0 .. 79,855) of White's and Black's perspective."""
    return relation_features(board, *RELATIONS)

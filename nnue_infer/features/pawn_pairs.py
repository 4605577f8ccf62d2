"""PP_3Wide: Stockfish 19's pawn-pair features (4,560 per perspective, int8 rows).

Every unordered pair of pawns (any colours) whose files differ by at most one is a feature,
at any rank distance.  For a perspective (same orientation as FullThreats: own king on files
a-d, ranks flipped for Black) a pawn's id is ``48 * c + (s ^ o) - 8`` (c = 0 own, 1 their);
a pair is ``hi * (hi - 1) / 2 + lo`` of its two ids.  Stockfish 19 stores these rows right
after the threat rows, so in a network with both sets pair ``k`` is row ``59,808 + k``.

Incremental delta: the pairs that involve a pawn that appeared or vanished (the difference of
the sorted pair lists; Stockfish's ``DirtyPawnPairs``).

Source: Stockfish 19, ``nnue/features/pp_3wide.{h,cpp}``, ``bitboard.h`` (``pawn_pair_bb``);
``shared/reference/stockfish-19-nnue.md`` sections 5 and 11.3.
"""

from __future__ import annotations

import chess

from ..kernels.nnue.threats import NUM_PAIR_FEATURES
from .full_threats import relation_features

NAME = "PP_3Wide"
#: Feature-set hash (``PP_3Wide::HashValue``).
HASH = 0x86F2B1DD
NUM_FEATURES = NUM_PAIR_FEATURES


#: ``(threats, pairs)`` of :func:`~nnue_infer.kernels.nnue.threats.relation_list` that select this set.
RELATIONS = (0, 1)


def active(board: chess.Board) -> tuple[list[int], list[int]]:
    """Sorted PP_3Wide indices (0 .. 4,559) of White's and Black's perspective."""
    return relation_features(board, *RELATIONS)

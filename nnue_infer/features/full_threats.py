"""FullThreats: Stockfish 19's threat features (59,808 per perspective, int8 rows).

A feature is an ordered pair (attacker A on square f, attacked piece D on square t) where A
attacks t on the current board: pawns by their captures, knights by their jumps, bishops,
rooks and queens along lines stopping at the first occupied square (no x-rays); kings neither
attack nor are attacked but block lines; both colours (defences are features too).  Pawns
threaten only knights and rooks, bishops and rooks never queens.  For two pieces of the same
type only the direction with ``f' > t'`` (oriented squares) counts.  Indices are relative to
the perspective (own/their pieces; the own king is mirrored to files a-d, ranks flipped for
Black); the formula and its tables are in :mod:`nnue_infer.kernels.nnue.threats`.

Incremental delta: the difference of the two positions' sorted threat lists (what Stockfish's
``DirtyThreats`` amounts to), valid while the perspective's king stays on the same side of
the d/e boundary; the evaluator applies it inside one king frame of HalfKAv2_hm, which fixes
that side.

Source: Stockfish 19, ``nnue/features/full_threats.{h,cpp}``;
``shared/reference/stockfish-19-nnue.md`` sections 4 and 11.2.
"""

from __future__ import annotations

import chess
import numpy as np

from ..kernels.nnue.threats import MAX_RELATIONS, NUM_THREAT_FEATURES, THREATS_SF19, active_relation_features
from .board import board_bitboards

NAME = "FullThreats"
#: Feature-set hash (``FullThreats::HashValue``).
HASH = 0x2E6B9D04
NUM_FEATURES = NUM_THREAT_FEATURES


def relation_features(board: chess.Board, threats: int, pairs: int) -> tuple[list[int], list[int]]:
    """Sorted indices of the relation features (threats and/or pawn pairs, as selected by
    ``threats`` / ``pairs`` of :func:`~nnue_infer.kernels.nnue.threats.relation_list`) of White's and
    Black's perspective; shared by this module, :mod:`.full_threats_18` and :mod:`.pawn_pairs`.

    Raises :class:`~nnue_infer.errors.PositionError` for positions no network can represent.
    """
    out = np.empty((2, MAX_RELATIONS), np.int32)
    counts = np.empty(2, np.int64)
    active_relation_features(board_bitboards(board), np.int64(threats), np.int64(pairs), np.int64(0), out, counts)
    return sorted(out[0, :counts[0]].tolist()), sorted(out[1, :counts[1]].tolist())


#: ``(threats, pairs)`` of :func:`~nnue_infer.kernels.nnue.threats.relation_list` that select this set.
RELATIONS = (THREATS_SF19, 0)


def active(board: chess.Board) -> tuple[list[int], list[int]]:
    """Sorted FullThreats indices (0 .. 59,807) of White's and Black's perspective.

    Raises :class:`~nnue_infer.errors.PositionError` for positions no network can represent.
    """
    return relation_features(board, *RELATIONS)




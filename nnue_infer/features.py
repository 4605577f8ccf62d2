"""Input feature sets: from a python-chess ``Board`` to active feature indices.

The index arithmetic itself is compiled (:mod:`nnue_infer.kernels.features`); this
module describes each feature set and turns a board into the bitboards the kernels
read, after checking that the network can represent the position.

Source: Stockfish 15.1, ``nnue/features/half_ka_v2_hm.{h,cpp}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import chess
import numpy as np

from .errors import PositionError
from .kernels.features import active_features

#: Most pieces any supported feature set accepts (Stockfish: ``MaxActiveDimensions``).
MAX_PIECES = 32
_BACK_RANKS = chess.BB_RANK_1 | chess.BB_RANK_8


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
        same frame differ only by the pieces that differ (see ``kernels.features.king_frame``)."""
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


def _halfkav2_hm() -> FeatureSet:
    # Own pieces take even slots, theirs odd; both kings share slot 10.
    slots = np.array([[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 10]], np.int32)
    # Oriented king square (file e-h after mirroring) -> 4 * (7 - rank) + (7 - file).
    buckets = np.array([4 * (7 - sq // 8) + (7 - max(sq % 8, 7 - sq % 8)) for sq in range(64)], np.int32)
    return FeatureSet("HalfKAv2_hm", slots, 11, buckets, 1)


def _chess768(king_buckets: tuple[int, ...] | None, mirror: int) -> FeatureSet:
    # Own P..K take slots 0-5, their P..K slots 6-11 (bullet's Chess768: 384 * side + 64 * piece + square).
    slots = np.array([[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]], np.int32)
    buckets = np.zeros(64, np.int32) if king_buckets is None else np.array(king_buckets, np.int32)
    return FeatureSet("Chess768", slots, 12, buckets, mirror)


#: Kernel codes of the mirroring modes (see :data:`nnue_infer.network.MIRROR_MODES`).
_MIRROR_CODES = {"none": 0, "e-h": 1, "a-d": 2}


@lru_cache(maxsize=None)
def feature_set(name: str, king_buckets: tuple[int, ...] | None = None, mirror: str | None = None) -> FeatureSet:
    """The :class:`FeatureSet` called ``name``, with a king-bucket table and mirroring for Chess768.

    ``king_buckets`` (64 ints, by oriented king square) and ``mirror`` (``"none"``, ``"e-h"``,
    ``"a-d"``) are ``None`` for the feature set's defaults.  ``ValueError`` if unknown.
    """
    if name == "HalfKAv2_hm":
        if king_buckets is not None or mirror not in (None, "e-h"):
            raise ValueError("HalfKAv2_hm has a fixed king-bucket table and mirroring")
        return _halfkav2_hm()
    if name == "Chess768":
        if mirror not in (None, *_MIRROR_CODES):
            raise ValueError(f"unknown mirror mode {mirror!r}; known: {sorted(_MIRROR_CODES)}")
        return _chess768(king_buckets, _MIRROR_CODES[mirror or "none"])
    raise ValueError(f"unknown feature set {name!r}; known: ['Chess768', 'HalfKAv2_hm']")


def architecture_features(arch) -> FeatureSet:  # arch: nnue_infer.network.Architecture
    """The :class:`FeatureSet` an :class:`~nnue_infer.network.Architecture` describes."""
    return feature_set(arch.feature_set, arch.king_buckets, arch.mirror)


def check_position(board: chess.Board) -> None:
    """Check that ``board`` can be represented by a king-bucketed feature set.

    Raises
    ------
    PositionError
        A side has no king or more than one, there are more than 32 pieces, a pawn
        stands on the first or last rank, or the board's bitboards contradict each other (a
        square with two piece types, both colours, or a type without a colour; only a board
        whose internals were modified directly) (the message names the squares).
    """
    black, white = board.occupied_co
    pieces = board.pawns
    overlap = pieces & board.knights
    pieces |= board.knights
    overlap |= pieces & board.bishops
    pieces |= board.bishops
    overlap |= pieces & board.rooks
    pieces |= board.rooks
    overlap |= pieces & board.queens
    pieces |= board.queens
    overlap |= pieces & board.kings
    pieces |= board.kings
    if overlap or white & black or pieces != white | black:
        bad = overlap | (white & black) | (pieces ^ (white | black))
        squares = ", ".join(chess.SQUARE_NAMES[s] for s in chess.scan_forward(bad))
        raise PositionError(f"inconsistent board: squares {squares} have two piece types, both colours or a type "
                            "without a colour")
    for color, name in ((chess.WHITE, "White"), (chess.BLACK, "Black")):
        kings = board.kings & board.occupied_co[color]
        n = chess.popcount(kings)
        if n != 1:
            where = ", ".join(chess.SQUARE_NAMES[s] for s in chess.scan_forward(kings)) or "none"
            raise PositionError(f"{name} must have exactly one king, found {n} ({where})")
    n = chess.popcount(pieces)
    if n > MAX_PIECES:
        raise PositionError(f"{n} pieces on the board; the network accepts at most {MAX_PIECES}")
    bad = board.pawns & _BACK_RANKS
    if bad:
        squares = ", ".join(chess.SQUARE_NAMES[s] for s in chess.scan_forward(bad))
        raise PositionError(f"pawn on the first or last rank: {squares}")


def board_bitboards(board: chess.Board, out: np.ndarray | None = None) -> np.ndarray:
    """Validated bitboards of ``board`` for the feature kernels.

    Returns int64[8]: pawns, knights, bishops, rooks, queens, kings, white, black
    (python-chess's uint64 bitboards reinterpreted as int64).  Raises
    :class:`PositionError` as :func:`check_position` does.
    """
    check_position(board)
    if out is None:
        out = np.empty(8, np.int64)
    u = out.view(np.uint64)
    u[0] = board.pawns
    u[1] = board.knights
    u[2] = board.bishops
    u[3] = board.rooks
    u[4] = board.queens
    u[5] = board.kings
    u[6] = board.occupied_co[chess.WHITE]
    u[7] = board.occupied_co[chess.BLACK]
    return out

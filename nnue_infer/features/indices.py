"""Active feature indices of many positions in a CSR layout, numbered for training loaders.

:func:`features_batch` numbers features as nnue-pytorch's data loader does (its component
names, joined by ``+`` in the order given, each component's indices offset by the sizes of the
ones before it), or as a network of this package numbers its rows (an :class:`Architecture`:
its piece-square set, then its int8 rows):

* ``HalfKAv2_hm`` (``HalfKAv2_hm^`` too: the virtual factor adds no indices): 24,576 per
  perspective, 768 per king bucket: Stockfish's HalfKAv2_hm with the two kings apart (own king
  slot 10, the opponent's 11) where Stockfish's .nnue merges them into one slot (704 per bucket);
* ``Full_Threats``: 59,808, Stockfish 19's FullThreats (the same numbering);
* ``PP_3Wide``: 4,560, Stockfish 19's pawn pairs (the same numbering);
* ``Chess768``: 768, this package's Chess768 without king buckets or mirroring.

Source: official-stockfish/nnue-pytorch ``data_loader/cpp/training_data_loader.cpp``
(``HalfKAv2_hm::feature_index``, ``FullThreats::threat_index``, ``PP_3Wide::make_index``,
``ComposedFeatureExtractor``) and ``model/modules/features/`` (names and sizes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import chess
import numpy as np

from . import architecture_features, feature_set, full_threats, full_threats_18, pawn_pairs
from .board import check_position

#: Per perspective: the HalfKAv2_hm slots per king bucket as nnue-pytorch numbers them.
TORCH_HALFKA_PLANES = 768
#: nnue-pytorch component name -> number of features per perspective.
COMPONENTS = {"HalfKAv2_hm": 32 * TORCH_HALFKA_PLANES, "Full_Threats": full_threats.NUM_FEATURES,
              "PP_3Wide": pawn_pairs.NUM_FEATURES, "Chess768": 768}
#: nnue-pytorch's default feature set (``model/modules/features/__init__.py``), without the ``^``.
DEFAULT_FEATURES = "Full_Threats+PP_3Wide+HalfKAv2_hm"
_INT8_MODULES = {full_threats.NAME: full_threats, full_threats_18.NAME: full_threats_18, pawn_pairs.NAME: pawn_pairs}


@dataclass(frozen=True)
class FeatureIndices:
    """Active features of ``N`` positions, per perspective, in CSR form.

    Attributes
    ----------
    feature_set : str
        What the indices number (a ``+``-joined component list, or ``"network:<feature set>"``).
    num_inputs : int
        Features per perspective (indices lie in ``0 .. num_inputs - 1``).
    offsets : int64[2, N + 1]
        Row 0 White's perspective, row 1 Black's: position ``i``'s indices are
        ``indices[p][offsets[p, i]:offsets[p, i + 1]]``.
    indices : tuple of two int32 arrays
        White's and Black's perspective's indices, position after position; within a position
        each component's indices ascend, components in the order of :attr:`feature_set`.
    """

    feature_set: str
    num_inputs: int
    offsets: np.ndarray
    indices: tuple[np.ndarray, np.ndarray]

    def __len__(self) -> int:
        return self.offsets.shape[1] - 1

    def row(self, i: int, perspective: chess.Color) -> np.ndarray:
        """Position ``i``'s indices for ``perspective`` (``chess.WHITE`` or ``chess.BLACK``)."""
        p = 0 if perspective == chess.WHITE else 1
        return self.indices[p][self.offsets[p, i]:self.offsets[p, i + 1]]


def torch_halfka(sf_indices: np.ndarray) -> np.ndarray:
    """Stockfish's HalfKAv2_hm indices (``osq + 64 slot + 704 bucket``, kings sharing slot 10) as
    nnue-pytorch numbers them (``osq + 64 slot + 768 bucket``, own king slot 10, the other 11).

    The own king's oriented square is the one its bucket comes from (``rank = 7 - b // 4``,
    ``file = 7 - b % 4``), so a slot-10 feature on another square is the opponent's king.
    """
    bucket, rest = np.divmod(np.asarray(sf_indices, np.int64), 704)
    slot, osq = np.divmod(rest, 64)
    own_king = 8 * (7 - bucket // 4) + 7 - bucket % 4
    slot = slot + ((slot == 10) & (osq != own_king))
    return (osq + 64 * slot + TORCH_HALFKA_PLANES * bucket).astype(np.int32)


def _component_rows(name: str, board: chess.Board) -> tuple[list[int], list[int]]:
    if name == "HalfKAv2_hm":
        white, black = feature_set("HalfKAv2_hm").active(board)
        return sorted(torch_halfka(white).tolist()), sorted(torch_halfka(black).tolist())
    if name == "Chess768":
        return feature_set("Chess768").active(board)
    return {"Full_Threats": full_threats, "PP_3Wide": pawn_pairs}[name].active(board)


def _parse(features) -> tuple[str, list[tuple[str, int]], object]:
    """(name, [(component, size)], architecture or None) of a ``features_batch`` argument."""
    from ..network import Architecture, Network

    if isinstance(features, Network):
        features = features.architecture
    if isinstance(features, Architecture):
        parts = [(features.feature_set, architecture_features(features).num_features)]
        parts += [(name, _INT8_MODULES[name].NUM_FEATURES) for name in features.int8_feature_sets]
        return "network:" + "+".join(p for p, _ in parts), parts, features
    if not isinstance(features, str):
        raise TypeError(f"features must be a feature-set name or an Architecture/Network, got {type(features).__name__}")
    parts = []
    for part in features.split("+"):
        name = part.removesuffix("^") if part == "HalfKAv2_hm^" else part
        if name not in COMPONENTS:
            raise ValueError(f"unknown feature component {part!r} in {features!r}; known: {', '.join(COMPONENTS)} "
                             "(HalfKAv2_hm^ as HalfKAv2_hm)")
        parts.append((name, COMPONENTS[name]))
    if len({p for p, _ in parts}) != len(parts):
        raise ValueError(f"feature component repeated in {features!r}")
    return "+".join(p for p, _ in parts), parts, None


def features_batch(positions: Iterable[chess.Board | str], features=DEFAULT_FEATURES) -> FeatureIndices:
    """Active feature indices of each position and perspective, in CSR form.

    Parameters
    ----------
    positions : iterable of chess.Board or FEN str
        The positions (FENs are read by python-chess).
    features : str, Architecture or Network
        nnue-pytorch component names joined by ``+`` (``"HalfKAv2_hm"``, ``"Full_Threats"``,
        ``"PP_3Wide"``, and ``"Chess768"``; default ``"Full_Threats+PP_3Wide+HalfKAv2_hm"``,
        nnue-pytorch's default), numbered and offset as nnue-pytorch's loader does; or a
        network (architecture) of this package, numbered as its rows: the piece-square set
        (Stockfish's 704-per-bucket HalfKAv2_hm, or Chess768 with its king buckets and
        mirroring), then its int8 sets (threats, pawn pairs) from ``num_features`` on.

    Returns
    -------
    FeatureIndices
        ``offsets`` int64[2, N + 1] and ``indices`` (two int32 arrays), White's perspective then Black's.

    Raises
    ------
    ValueError
        Unknown or repeated component (:class:`~nnue_infer.errors.FenError` for a bad FEN,
        :class:`~nnue_infer.errors.PositionError` for a position no network represents: both
        ``ValueError``\\ s naming the row).
    TypeError
        A row that is neither a board nor a string, or a bad ``features``.
    """
    from ..errors import FenError, PositionError
    from ..positions import board_from_fen

    name, parts, arch = _parse(features)
    rows: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    for i, position in enumerate(positions):
        try:
            if isinstance(position, str):
                board = board_from_fen(position, hint="api")
            elif isinstance(position, chess.Board):
                board = position
            else:
                raise TypeError(f"row {i}: expected a chess.Board or a FEN string, got {type(position).__name__}")
            check_position(board)
        except (FenError, PositionError) as exc:
            raise type(exc)(f"row {i}: {exc}") from None
        offset = 0
        found: tuple[list[int], list[int]] = ([], [])
        for component, size in parts:
            if arch is not None:
                active = (architecture_features(arch).active(board) if component == arch.feature_set
                          else _INT8_MODULES[component].active(board))
            else:
                active = _component_rows(component, board)
            for p in range(2):
                found[p].extend(offset + f for f in active[p])
            offset += size
        for p in range(2):
            rows[p].append(np.asarray(found[p], np.int32))
    n = len(rows[0])
    offsets = np.zeros((2, n + 1), np.int64)
    for p in range(2):
        np.cumsum([r.size for r in rows[p]], out=offsets[p, 1:])
    indices = tuple(np.concatenate(rows[p]) if n else np.zeros(0, np.int32) for p in range(2))
    return FeatureIndices(name, sum(size for _, size in parts), offsets, indices)  # type: ignore[arg-type]

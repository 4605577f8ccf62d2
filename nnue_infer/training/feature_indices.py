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

from ..features import architecture_features, feature_set, full_threats, full_threats_18, pawn_pairs

#: Per perspective: the HalfKAv2_hm slots per king bucket as nnue-pytorch numbers them.
TORCH_HALFKA_PLANES = 768
#: nnue-pytorch component name -> number of features per perspective.
COMPONENTS = {"HalfKAv2_hm": 32 * TORCH_HALFKA_PLANES, "Full_Threats": full_threats.NUM_FEATURES,
              "PP_3Wide": pawn_pairs.NUM_FEATURES, "Chess768": 768}
#: nnue-pytorch's default feature set (``model/modules/features/__init__.py``), without the ``^``.
DEFAULT_FEATURES = "Full_Threats+PP_3Wide+HalfKAv2_hm"
_INT8_MODULES = {full_threats.NAME: full_threats, full_threats_18.NAME: full_threats_18, pawn_pairs.NAME: pawn_pairs}
#: nnue-pytorch's relation components and the modules that number them alike.
_TORCH_RELATIONS = {"Full_Threats": full_threats, "PP_3Wide": pawn_pairs}
#: Positions per pass (bounds the padded work arrays: about 3 KiB a position).
CHUNK_ROWS = 65536


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
        The positions.  FENs are parsed in compiled code, as ``evaluate_batch`` does (a FEN it
        refuses is read by python-chess for the message); the indices come from the same
        kernels as the evaluation, 65,536 positions a pass.
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
    from ..batch import as_sequence, raise_row_error
    from ..kernels.chess.bitboard import check_bitboards_batch

    name, parts, arch = _parse(features)
    positions = as_sequence(positions)
    bitboards = _bitboards(positions)
    n = len(bitboards)
    codes = np.empty(n, np.int8)
    check_bitboards_batch(bitboards, np.int64(32), codes)
    bad = np.flatnonzero(codes)
    if bad.size:
        raise_row_error(positions, int(bad[0]), None, None, codes)
    rows: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    counts = np.zeros((2, n), np.int64)
    for start in range(0, n, CHUNK_ROWS):
        chunk = bitboards[start:start + CHUNK_ROWS]
        blocks, offset = [], 0
        for component, size in parts:
            block = _component_block(component, arch, chunk)
            blocks.append(np.where(block >= 0, block + offset, -1))
            offset += size
        table = np.concatenate(blocks, axis=2)
        for p in range(2):
            valid = table[:, p] >= 0
            rows[p].append(table[:, p][valid].astype(np.int32))
            counts[p, start:start + len(chunk)] = valid.sum(axis=1)
    offsets = np.zeros((2, n + 1), np.int64)
    np.cumsum(counts, axis=1, out=offsets[:, 1:])
    indices = tuple(np.concatenate(rows[p]) if rows[p] else np.zeros(0, np.int32) for p in range(2))
    return FeatureIndices(name, sum(size for _, size in parts), offsets, indices)  # type: ignore[arg-type]


def _bitboards(positions) -> np.ndarray:
    """int64[n, 8] bitboards of FENs and/or boards; ``TypeError`` / :class:`FenError` name the row."""
    from ..batch import board_bitboards_batch, positions_bitboards
    from ..errors import FenError
    from ..positions import board_from_fen

    if all(isinstance(p, str) for p in positions) or all(isinstance(p, chess.Board) for p in positions):
        return positions_bitboards(positions)[0]
    boards = []
    for i, position in enumerate(positions):
        if isinstance(position, str):
            try:
                position = board_from_fen(position, hint="api")
            except FenError as exc:
                raise FenError(f"row {i}: {exc}") from None
        elif not isinstance(position, chess.Board):
            raise TypeError(f"row {i}: expected a chess.Board or a FEN string, got {type(position).__name__}")
        boards.append(position)
    return board_bitboards_batch(boards)[0]


def _component_block(component: str, arch, bitboards: np.ndarray) -> np.ndarray:
    """int32[n, 2, w]: each position's indices of one component (White's perspective, then Black's),
    ascending, then -1."""
    from ..kernels.nnue.feature_index import active_features_batch
    from ..kernels.nnue.threats import MAX_RELATIONS, active_relation_features_batch

    n = len(bitboards)
    if component in _INT8_MODULES or component in _TORCH_RELATIONS:
        module = _INT8_MODULES.get(component) or _TORCH_RELATIONS[component]
        block = np.full((n, 2, MAX_RELATIONS), -1, np.int32)
        active_relation_features_batch(bitboards, np.int64(module.RELATIONS[0]), np.int64(module.RELATIONS[1]), block,
                                       np.empty((n, 2), np.int64))
    else:
        fs = architecture_features(arch) if arch is not None else feature_set(component)
        block = np.empty((n, 2, 32), np.int32)
        active_features_batch(bitboards, np.zeros(n, np.uint8), fs.slot_table, fs.king_buckets, fs.mirror,
                              fs.num_slots, -1, block, np.empty(n, np.int64))
        if arch is None and component == "HalfKAv2_hm":
            block = np.where(block >= 0, torch_halfka(block), -1).astype(np.int32)
    block[block < 0] = np.iinfo(np.int32).max
    block.sort(axis=2)
    block[block == np.iinfo(np.int32).max] = -1
    return block

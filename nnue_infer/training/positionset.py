"""De-duplication of training positions across a whole data set: 64-bit position hashes.

A network sees a position's piece placement and side to move only, so two rows with the same
placement and side to move are the same training example whatever their castling rights, en
passant square or clocks.  :func:`position_hashes` maps each row to a 64-bit hash of exactly
those inputs (the eight bitboards and the side to move, FNV-1a style with an extra xor-shift per
word); :class:`PositionSet` is a set of such hashes that grows chunk by chunk and is saved beside
the data (``.npy``, sorted uint64), so a data set made in many runs of a generator is
de-duplicated as a whole.  With 64-bit hashes, the chance that two of 40 million distinct
positions collide is about 40e6**2 / 2**65 = 4e-5 (a collision drops one distinct position).
"""

from __future__ import annotations

import os

import numpy as np

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def position_hashes(bitboards: np.ndarray, stm: np.ndarray) -> np.ndarray:
    """uint64[n]: a hash of each row's placement and side to move.

    Parameters
    ----------
    bitboards : numpy.ndarray
        int64 or uint64 [n, 8]: pawns, knights, bishops, rooks, queens, kings, White's, Black's
        (the layout of :mod:`nnue_infer.training.datagen` and :class:`nnue_infer.io.training_data.TrainingData`).
    stm : numpy.ndarray
        uint8[n], side to move (0 White, 1 Black).

    Raises
    ------
    ValueError
        ``bitboards`` not of shape [n, 8] or ``stm`` not of length n.
    """
    bitboards = np.asarray(bitboards)
    stm = np.asarray(stm)
    if bitboards.ndim != 2 or bitboards.shape[1] != 8 or stm.shape != (bitboards.shape[0],):
        raise ValueError(f"position_hashes: bitboards of shape {bitboards.shape} and stm of shape {stm.shape}; "
                         "need [n, 8] and [n]")
    bb = np.ascontiguousarray(bitboards).view(np.uint64)
    h = np.full(len(bb), _FNV_OFFSET)
    with np.errstate(over="ignore"):
        for col in range(8):
            h = (h ^ bb[:, col]) * _FNV_PRIME
            h ^= h >> np.uint64(29)
        h = (h ^ stm.astype(np.uint64)) * _FNV_PRIME
    return h


def first_occurrences(hashes: np.ndarray) -> np.ndarray:
    """bool[n]: True at the first row of each distinct hash (later repeats False)."""
    _, first = np.unique(hashes, return_index=True)
    keep = np.zeros(len(hashes), bool)
    keep[first] = True
    return keep


class PositionSet:
    """A growing set of position hashes (sorted uint64 array).

    Parameters
    ----------
    hashes : numpy.ndarray, optional
        Initial members (any order, repeats allowed).
    """

    def __init__(self, hashes: np.ndarray | None = None) -> None:
        self._keys = np.unique(np.asarray(hashes, np.uint64)) if hashes is not None else np.zeros(0, np.uint64)

    def __len__(self) -> int:
        return len(self._keys)

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """bool[n]: which of ``hashes`` are members."""
        hashes = np.asarray(hashes, np.uint64)
        if not len(self._keys):
            return np.zeros(len(hashes), bool)
        i = np.searchsorted(self._keys, hashes)
        return self._keys[np.minimum(i, len(self._keys) - 1)] == hashes

    def new_rows(self, hashes: np.ndarray) -> np.ndarray:
        """bool[n]: rows whose hash is neither a member nor an earlier row's (the rows to keep)."""
        return first_occurrences(hashes) & ~self.contains(hashes)

    def add(self, hashes: np.ndarray) -> None:
        """Make ``hashes`` members (a merge of two sorted runs: time linear in the set's size)."""
        keys = np.concatenate([self._keys, np.unique(np.asarray(hashes, np.uint64))])
        keys.sort(kind="stable")  # timsort: two sorted runs merge in one pass
        self._keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the members to ``path`` (``.npy``; written under a temporary name, then renamed)."""
        tmp = f"{os.fspath(path)}.tmp.npy"
        np.save(tmp, self._keys)
        os.replace(tmp, path)

    @classmethod
    def load(cls, *paths: str | os.PathLike[str]) -> PositionSet:
        """The union of sets saved by :meth:`save` (no path: the empty set).

        Raises
        ------
        ValueError
            A file that does not hold a one-dimensional uint64 array (names the file).
        """
        parts = []
        for path in paths:
            keys = np.load(path, allow_pickle=False)
            if keys.dtype != np.uint64 or keys.ndim != 1:
                raise ValueError(f"{os.fspath(path)}: not a position-hash set (dtype {keys.dtype}, shape {keys.shape}; "
                                 "expected one-dimensional uint64)")
            parts.append(keys)
        return cls(np.concatenate(parts) if parts else None)

"""The positions a network tool looks at: any position file the package reads, as bitboards."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..batch import positions_bitboards

#: Text-file extensions read as PGN (after a ``.gz`` / ``.zst`` suffix is removed).
PGN_EXTENSIONS = (".pgn",)


def _kind(path: str) -> str:
    """``"pgn"``, a training-data kind (``binpack``, ``bin``, ``plain``, ``parquet``) or ``"lines"``
    (EPD / FEN / JSON lines with a ``fen`` field), from the file name."""
    from ..io.training_data import KindError, kind_of

    name = path.lower()
    for suffix in (".gz", ".zst", ".zstd"):
        name = name.removesuffix(suffix)
    if name.endswith(PGN_EXTENSIONS):
        return "pgn"
    try:
        return kind_of(path)
    except KindError:
        return "lines"


@dataclass(frozen=True)
class Positions:
    """Positions as the batch kernels read them, with their FENs.

    Attributes
    ----------
    bitboards : int64[n, 8]
        Pawns, knights, bishops, rooks, queens, kings, White's pieces, Black's pieces (a1 = bit 0).
    stm : uint8[n]
        Side to move, 0 White, 1 Black.
    fens : list of str
        The positions' FENs (for messages and the float reference, which reads boards).
    """

    bitboards: np.ndarray
    stm: np.ndarray
    fens: list[str]

    def __len__(self) -> int:
        return len(self.fens)

    def __getitem__(self, rows: slice) -> Positions:
        """The positions of a slice of rows."""
        return Positions(self.bitboards[rows], self.stm[rows], self.fens[rows])


def read_positions(path: str | os.PathLike[str], limit: int | None = None) -> Positions:
    """The first ``limit`` positions (all when ``None``) of a file, as bitboards.

    Parameters
    ----------
    path : str or os.PathLike
        A PGN file (``.pgn``: every mainline position of every game), a training-data file
        (``.binpack``, ``.bin``, ``.plain``, ``.parquet``: every row), or any other text file of
        positions: EPD/FEN lines or JSON lines with a ``fen`` field (the dev corpus); each optionally
        gzip- or Zstandard-compressed.  Read with :func:`nnue_infer.io.pgn.read_pgn`,
        :func:`nnue_infer.io.training_data.iter_chunks` and
        :func:`nnue_infer.training.crosscheck.read_positions`.
    limit : int, optional
        Most positions to read.

    Returns
    -------
    Positions
        Bitboards, sides to move and FENs, in file order.

    Raises
    ------
    ValueError
        ``limit`` is not a positive integer, or the file holds no position.
    FenError, TrainingDataError, InputError, OSError
        From the readers, naming the file and the line, game or byte offset.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit <= 0):
        raise ValueError(f"limit must be a positive integer (positions), got {limit!r}")
    path = os.fspath(path)
    kind = _kind(path)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    fens: list[str] = []
    count = 0
    if kind == "lines":
        from ..training.crosscheck import read_positions as read_fens

        fens = read_fens(path)[:limit]
        if fens:
            parts.append(positions_bitboards(fens))
            count = len(fens)
    else:
        if kind == "pgn":
            from ..io.pgn import read_pgn

            batches = read_pgn(path)
        else:
            from ..io.training_data import iter_chunks

            batches = iter_chunks(path, kind)
        for batch in batches:
            take = len(batch.stm) if limit is None else min(len(batch.stm), limit - count)
            parts.append((np.asarray(batch.bitboards[:take], np.int64), np.asarray(batch.stm[:take], np.uint8)))
            fens += (batch.fen if kind == "pgn" else batch.fens())[:take]
            count += take
            if limit is not None and count >= limit:
                break
    if count == 0:
        raise ValueError(f"{path}: no positions")
    return Positions(np.ascontiguousarray(np.concatenate([p[0] for p in parts])),
                     np.ascontiguousarray(np.concatenate([p[1] for p in parts])), fens)

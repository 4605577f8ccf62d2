"""A Dask DataFrame of FENs scored in place: :func:`evaluate_dataframe` adds ``value``, ``cp`` and
``cp_white`` columns.
"""

from __future__ import annotations

import re

import numpy as np

from .plan import _check_task_sizes
from .workers import _absolute_network, _set_threads, worker_evaluator


def _evaluate_partition(df, column: str, network: str, threads: int | None):
    """``df`` (pandas) with ``value``, ``cp`` and ``cp_white`` columns for its FEN column."""
    _set_threads(threads)
    ev = worker_evaluator(network)
    fens = df[column].tolist()
    try:
        values = ev.evaluate_batch(fens).astype(np.int64) if fens else np.zeros(0, np.int64)
    except (ValueError, TypeError) as exc:  # "row I: ...", I within this partition: name the frame's index label
        at = re.match(r"row (\d+): ", str(exc))
        if at is None:
            raise
        row = int(at.group(1))
        label = df.index[row]
        label = label.item() if isinstance(label, np.generic) else label  # 11, not np.int64(11)
        import pandas as pd

        cell = fens[row]
        null = pd.api.types.is_scalar(cell) and pd.isna(cell)  # None, NaN, pd.NA, NaT
        problem = "a null cell, not a FEN string" if null else str(exc)[at.end():]
        raise type(exc)(f"{column!r} at index {label!r}: {problem}") from None
    black = np.array([f.split()[1:2] == ["b"] for f in fens], bool)
    cp = np.sign(values) * (np.abs(100 * values) // ev.network.architecture.units_per_pawn)  # tdiv
    return df.assign(value=values, cp=cp, cp_white=np.where(black, -cp, cp))


def evaluate_dataframe(ddf, column: str = "fen", network: str = "default", *, threads: int | None = None):
    """A Dask DataFrame like ``ddf`` with ``value`` (int64, internal units, side to move), ``cp`` and
    ``cp_white`` (int64 centipawns) columns for the FENs in ``column``, computed lazily per partition.

    ``network`` is a path every worker can read (a relative one made absolute here), ``default`` or
    ``stockfish``; each worker process loads it once.  A bad FEN fails its partition with
    :class:`~nnue_infer.errors.FenError` / :class:`~nnue_infer.errors.PositionError` (``TypeError`` for a
    cell that is no string) naming the column and the row's index label; use :func:`score_files` for error
    tables.  ``KeyError`` at once when ``ddf`` has no ``column``.
    """
    if threads is not None:
        _check_task_sizes(threads=threads)
    if column not in ddf.columns:
        raise KeyError(f"no column {column!r} (columns: {', '.join(map(str, ddf.columns))})")
    meta = ddf._meta.assign(value=np.int64(0), cp=np.int64(0), cp_white=np.int64(0))
    return ddf.map_partitions(_evaluate_partition, column, _absolute_network(network), threads, meta=meta)

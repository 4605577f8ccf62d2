"""The result of :meth:`Evaluator.activations` and :meth:`Evaluator.activations_batch`:
every layer's output of one evaluation (:class:`Activations`), as the kernels of
:mod:`nnue_infer.kernels.nnue.layer_outputs` write them.

The layer names follow Stockfish's (sf_17.1 ``nnue/nnue_architecture.h``: ``fc_0``, ``ac_sqr_0``,
``ac_0``, ``fc_1``, ``ac_1``, ``fc_2``; ``nnue_feature_transformer.h`` for the accumulators).
"""

from __future__ import annotations

import numpy as np


class Activations:
    """Every intermediate array of a network's evaluation of one position or a batch, as exact integers.

    Made by :meth:`nnue_infer.Evaluator.activations` (one position: no leading axis) and
    :meth:`nnue_infer.Evaluator.activations_batch` (a leading ``N`` axis, written below).  Read
    the arrays as attributes (``acts.fc_0``) or with :meth:`to_dict`; :attr:`names` lists them in
    order.  Integer layers only: a float hidden layer and those after it are not recorded.

    Arrays
    ------
    accumulator : int16[N, 2, L1]
        The feature transformer's accumulators, row 0 White's perspective, row 1 Black's
        (Stockfish's ``accumulation[WHITE]``, ``accumulation[BLACK]``), threat and pawn-pair rows
        included (Stockfish 18/19).
    psqt : int32[N, 2, P]
        The PSQT accumulators, same rows.
    ft_output : uint8[N, F] (int8 for the signed activations glu, bilinear, hswish_glu, lut_glu)
        The feature-transformer activation's output, side to move's half first: ``F = L1`` for
        pairwise multiplication and the gated activations, ``2 * L1`` for crelu/screlu.
    bucket : int32[N]
        The layer stack used, ``(pieces - 1) // 4`` for 8 stacks.
    fc_0 : int32[N, L2 + 1]
        The first dense layer's sums before activation (Stockfish 15.1-18: 16; 19: 32).
    fc_0_activated : uint8[N, 2 * L2]
        Its activation: Stockfish 15.1-18 SqrClippedReLU of the first 15 sums then ClippedReLU
        of the same 15 (Stockfish 17.1's ``ac_sqr_0`` then ``ac_0``, 30 bytes; the 16th sum is the
        forward skip); Stockfish 19 both of all 32 (64 bytes).
    fc_1 : int32[N, L3]
        The second dense layer's sums (32).
    fc_1_activated : uint8[N, ...]
        Its activation: ClippedReLU (Stockfish 15.1-18, ``ac_1``, 32 bytes); Stockfish 19
        SqrClippedReLU then ClippedReLU of all 32 (64 bytes, which with fc_0's 64 make the 128
        inputs of its fc_2).  Further hidden layers continue as ``fc_2``, ``fc_2_activated``, ...
    output : int32[N]
        The output layer's sum (``fc_2`` in Stockfish 15.1-19), before the forward skip.
    positional : int32[N]
        The layer stack's result with the forward skip (Stockfish's ``positional``), internal
        units x OutputScale, side to move's view.
    value : int32[N]
        The network's value, :meth:`nnue_infer.Evaluator.evaluate`: internal units, side to move's view.

    With ``buckets="all"`` every layer's array and ``output`` / ``positional`` gain a bucket
    axis after ``N`` (``fc_0`` int32[N, B, L2 + 1], ``output`` int32[N, B]); ``bucket`` and
    ``value`` stay those of the used stack.
    """

    def __init__(self, arrays: dict, batched: bool) -> None:
        self._arrays = arrays
        self.batched = batched

    @property
    def names(self) -> list[str]:
        """The arrays' names, in data-flow order."""
        return list(self._arrays)

    def __getattr__(self, name: str):
        arrays = self.__dict__.get("_arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(f"no array {name!r}; this network's arrays: {', '.join(arrays)}")

    def __len__(self) -> int:
        """Number of positions."""
        return len(self._arrays["value"]) if self.batched else 1

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={v.dtype}{list(v.shape)}" for k, v in self._arrays.items())
        return f"Activations({shapes})"

    def to_dict(self) -> dict:
        """``{name: numpy array}``, the arrays themselves (not copies), in :attr:`names` order."""
        return dict(self._arrays)

    def to_arrow(self):
        """A ``pyarrow.Table`` with one row per position and one column per array: integer
        columns for per-position scalars, fixed-size lists (nested for 2-D rows) otherwise,
        values as the arrays' dtypes; an axis of length 0 (``psqt`` of a network without PSQT)
        as variable-size lists, all empty.

        Raises
        ------
        ImportError
            pyarrow is not installed, naming the extra to install (``pip install 'nnue-infer[parquet]'``).
        """
        try:
            import pyarrow as pa
        except ImportError as exc:  # a bare ModuleNotFoundError named no extra (fresh-user trial)
            raise ImportError("Activations.to_arrow() needs pyarrow: pip install 'nnue-infer[parquet]'") from exc

        columns = {}
        for name, arr in self._arrays.items():
            rows = arr if self.batched else arr[np.newaxis]
            column = pa.array(np.ascontiguousarray(rows).reshape(-1))
            for level in range(rows.ndim - 1, 0, -1):
                width = rows.shape[level]
                if width:
                    column = pa.FixedSizeListArray.from_arrays(column, width)
                else:  # Arrow has no fixed-size list of size 0 (psqt of a network without PSQT): empty lists
                    lists = int(np.prod(rows.shape[:level]))
                    column = pa.ListArray.from_arrays(pa.array(np.zeros(lists + 1, np.int32)), column)
            columns[name] = column
        return pa.table(columns)

"""Import float networks from named arrays: a PyTorch ``state_dict`` converted to numpy, or a ``.npz``.

:func:`float_network_from_arrays` maps source names to the canonical tensors of a
:class:`~nnue_infer.float_network.FloatNetwork` and accepts the layouts trainers use:

* ``ft.weights`` as ``[num_features, L1]`` or as a ``torch.nn.Linear`` weight ``[L1, num_features]``;
* ``ft.psqt_weights`` as ``[num_features, P]`` or ``[P, num_features]`` (may be absent when P = 0);
  which of the two a square array is (``num_features == L1``, e.g. Chess768 with L1 = 768) cannot
  be told from its shape: then ``ft_layout`` must say it (``"features_first"`` or ``"linear"``);
* ``layers.{i}.weights`` as ``[buckets, outputs, inputs]``, or a ``Linear(inputs, outputs * buckets)``
  weight ``[outputs * buckets, inputs]`` (nnue-pytorch's layer stacks), with ``inputs`` either the
  padded width or the real one (zero-padded here);
* ``layers.{i}.biases`` as ``[buckets, outputs]`` or ``[outputs * buckets]``.

Values are taken as they are: they must follow the float semantics of
:mod:`nnue_infer.float_network` (accumulator 1.0 = the clamp point, output in units of
``output_units``).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping

import numpy as np

from ..errors import NetworkFormatError
from ..float_network import FloatNetwork
from ..network import Architecture
from . import check_regular_file


#: Layouts of the feature-transformer arrays: ``[num_features, n]`` or a ``torch.nn.Linear`` weight ``[n, num_features]``.
FT_LAYOUTS = ("auto", "features_first", "linear")


def _layout(name: str, arr: np.ndarray, shape: tuple[int, ...], real_in: int | None = None,
            ft_layout: str = "auto") -> np.ndarray:
    arr = np.asarray(arr)
    if not np.issubdtype(arr.dtype, np.floating):
        raise NetworkFormatError(f"tensor {name!r}: dtype {arr.dtype}, expected a floating-point type")
    with np.errstate(over="ignore"):  # values beyond float32 become inf: refused by FloatNetwork, naming the tensor
        a = arr.astype(np.float32)
    if name in ("ft.weights", "ft.psqt_weights"):
        if a.size == 0 and a.shape in (shape, shape[::-1]):  # no PSQT buckets: nothing to orient
            return np.zeros(shape, np.float32)
        if ft_layout == "auto" and shape[0] == shape[1] and a.shape == shape:
            raise NetworkFormatError(
                f"tensor {name!r}: shape {a.shape} reads either way (num_features == {shape[1]}); say which with "
                f"ft_layout='features_first' ([num_features, {shape[1]}]) or ft_layout='linear' (a torch.nn.Linear "
                f"weight [{shape[1]}, num_features])")
        if ft_layout == "linear" or (ft_layout == "auto" and a.shape == shape[::-1]):
            a = a.T
        if a.shape != shape:
            raise NetworkFormatError(f"tensor {name!r}: shape {arr.shape} does not fit the architecture, expected "
                                     f"{shape if ft_layout != 'linear' else shape[::-1]} (ft_layout={ft_layout!r})")
        return np.ascontiguousarray(a)
    if a.shape == shape:
        return np.ascontiguousarray(a)
    if len(shape) == 2 and name.endswith("biases") and a.shape == (shape[0] * shape[1],):
        return np.ascontiguousarray(a.reshape(shape))
    if len(shape) == 3:
        B, out, n_in = shape
        for cand_in in {n_in, real_in}:
            if cand_in is None:
                continue
            for cand in ((B, out, cand_in), (B * out, cand_in)):
                if a.shape == cand:
                    w = np.zeros(shape, np.float32)
                    w[:, :, :cand_in] = a.reshape(B, out, cand_in)
                    return w
            if B == 1 and a.shape == (out, cand_in):
                w = np.zeros(shape, np.float32)
                w[0, :, :cand_in] = a
                return w
    raise NetworkFormatError(f"tensor {name!r}: shape {a.shape} does not fit the architecture, expected {shape}"
                             + (f" (or with {real_in} real inputs)" if real_in else ""))


def float_network_from_arrays(architecture: Architecture, arrays: Mapping[str, np.ndarray] | str | os.PathLike[str],
                              names: Mapping[str, str] | None = None, description: str = "", *,
                              ft_layout: str = "auto") -> FloatNetwork:
    """Build a :class:`FloatNetwork` from named float arrays.

    Parameters
    ----------
    architecture : Architecture
        What the arrays mean.
    arrays : mapping of str to ndarray, or path of a ``.npz`` file
        Source arrays (e.g. ``{k: v.numpy() for k, v in model.state_dict().items()}``).
    names : mapping, optional
        Canonical name (``ft.weights``, ``ft.biases``, ``ft.psqt_weights``,
        ``layers.{i}.weights``, ``layers.{i}.biases``) to source name; identity by default.
    description : str
        Stored with the network.
    ft_layout : {"auto", "features_first", "linear"}
        Layout of ``ft.weights`` and ``ft.psqt_weights``: ``[num_features, n]``
        (``"features_first"``), a ``torch.nn.Linear`` weight ``[n, num_features]``
        (``"linear"``), or told from the shape (``"auto"``; refused when the shape is square).

    Raises
    ------
    NetworkFormatError
        A tensor is missing (naming canonical and source names), not floating point, or its
        shape fits none of the accepted layouts (naming the tensor and the expected shape), or
        a square feature-transformer array with ``ft_layout="auto"``; a path that is not a
        regular file (a directory, device or FIFO) or not a readable ``.npz`` archive.
    """
    if ft_layout not in FT_LAYOUTS:
        raise ValueError(f"ft_layout must be one of {FT_LAYOUTS}, got {ft_layout!r}")
    from ..features import architecture_features

    if not isinstance(arrays, Mapping):
        path = os.fspath(arrays)
        check_regular_file(path, "an .npz archive is a file")
        with open(path, "rb") as f:  # our handle: np.load leaks its own when the archive is corrupt
            try:
                z = np.load(f, allow_pickle=False)
                if not isinstance(z, np.lib.npyio.NpzFile):
                    raise ValueError(f"found a single {type(z).__name__}")
                with z:
                    arrays = {k: z[k] for k in z.files}
            except (ValueError, zipfile.BadZipFile) as exc:  # .npy, pickled objects, corrupt zip
                raise NetworkFormatError(f"{path}: not a readable .npz archive of arrays: {exc}") from exc
    names = dict(names or {})
    arch = architecture
    nf = architecture_features(arch).num_features
    B = arch.output_buckets
    expected: dict[str, tuple[tuple[int, ...], int | None]] = {
        "ft.biases": ((arch.ft_width,), None),
        "ft.weights": ((nf, arch.ft_width), None),
        "ft.psqt_weights": ((nf, arch.psqt_buckets), None),
    }
    real_inputs = [arch.ft_output_width] + [l.activated_width for l in arch.layers[:-1]]
    for i, (layer, n_in, real) in enumerate(zip(arch.layers, arch.layer_inputs(), real_inputs)):
        expected[f"layers.{i}.weights"] = ((B, layer.outputs, n_in), real)
        expected[f"layers.{i}.biases"] = ((B, layer.outputs), None)
    out: dict[str, np.ndarray] = {}
    for canon, (shape, real) in expected.items():
        src = names.get(canon, canon)
        if src not in arrays:
            if canon == "ft.psqt_weights" and arch.psqt_buckets == 0:
                out[canon] = np.zeros(shape, np.float32)
                continue
            raise NetworkFormatError(f"missing tensor {canon!r} (source name {src!r}); available: {sorted(arrays)[:20]}")
        out[canon] = _layout(canon, arrays[src], shape, real, ft_layout)
    return FloatNetwork.from_tensors(arch, out, description)

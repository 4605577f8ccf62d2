"""Import bullet's quantised raw output (``quantised.bin``) of the simple single-layer shapes.

Supported shapes, given as an :class:`~nnue_infer.network.Architecture`:
``Chess768`` (optionally king-bucketed / mirrored) -> ``ft_width`` N per perspective, any
feature-transformer activation (``crelu``, ``screlu``: ``(768 -> N)x2 -> 1``; ``pairwise``:
``(768 -> N)x2 pairwise -> 1``, ...), no PSQT, one output bucket, one dense layer with one
output (``layers = (HiddenLayer(1, "none"),)``).

File layout (little-endian, no header; the order of bullet's ``save_format`` list
``l0w, l0b, l1w, l1b``; each tensor as bullet stores it, column-major):

====  ===========================  ==========  ===================================================
name  shape                        type        float value
====  ===========================  ==========  ===================================================
l0w   [num_features][N]            int16       ``/ QA``   (one row of N per feature: an accumulator column)
l0b   [N]                          int16       ``/ QA``
l1w   [W]                          int16       ``/ QB``   (W = 2N, or N for paired activations;
                                                           side-to-move half first)
l1b   [1]                          int16       ``/ (QA * QB)``
====  ===========================  ==========  ===================================================

followed by up to 63 zero bytes (bullet pads the file to a multiple of 64 bytes).  Bullet's
engines evaluate ``(l1b + sum(act(acc) * l1w) [/ QA for screlu]) * SCALE / (QA * QB)``
centipawns: the float network returned here has ``output_units = SCALE`` and
``units_per_pawn = 100``, so :func:`~nnue_infer.float_network.forward_float` returns centipawns.

Source: bullet, ``examples/simple.rs`` (the ``Network`` struct and ``evaluate``) and
``examples/progression/1_simple.rs`` (``SavedFormat`` ids and quantisation of each tensor).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ..errors import NetworkFormatError
from ..float_network import FloatNetwork
from ..network import Architecture
from . import check_regular_file


def check_bullet_architecture(arch: Architecture) -> None:
    """``NetworkFormatError`` naming the field if ``arch`` is not one of the supported shapes."""
    if arch.feature_set != "Chess768":
        raise NetworkFormatError(f"bullet import: architecture field 'feature_set' must be 'Chess768', got {arch.feature_set!r}")
    if arch.psqt_buckets != 0:
        raise NetworkFormatError("bullet import: architecture field 'psqt_buckets' must be 0")
    if arch.output_buckets != 1:
        raise NetworkFormatError("bullet import: architecture field 'output_buckets' must be 1 (bullet's material "
                                 "buckets count pieces differently)")
    if len(arch.layers) != 1:
        raise NetworkFormatError(f"bullet import: architecture field 'layers' must be one output layer, got {len(arch.layers)}")


def bullet_sections(arch: Architecture) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of each int16 tensor in file order for ``arch``."""
    from ..features import architecture_features

    nf = architecture_features(arch).num_features
    return [("l0w", (nf, arch.ft_width)), ("l0b", (arch.ft_width,)), ("l1w", (arch.ft_output_width,)), ("l1b", (1,))]


def read_bullet(path: str | os.PathLike[str], architecture: Architecture, qa: int = 255, qb: int = 64,
                scale: int | None = None) -> FloatNetwork:
    """Read bullet's quantised output for ``architecture`` into a :class:`FloatNetwork`.

    Parameters
    ----------
    path : path
        ``quantised.bin`` written by bullet.
    architecture : Architecture
        The shape (see the module docstring); its ``output_units`` is replaced by ``scale``
        when given and ``units_per_pawn`` set to 100.
    qa, qb : int
        The quantisation bullet used for ``l0`` (QA) and ``l1w`` (QB); ``l1b`` is at QA * QB.
    scale : int, optional
        Bullet's evaluation scale (``SCALE``, e.g. 400): centipawns per float output.

    Raises
    ------
    NetworkFormatError
        Unsupported architecture (naming the field), a path that is not a regular file (a
        directory, device or FIFO), or a file whose size does not match (naming the expected
        and found sizes) or whose padding is not zero.
    OSError
        The file cannot be read.
    """
    check_bullet_architecture(architecture)
    for name, q in (("qa", qa), ("qb", qb)):
        if not isinstance(q, (int, np.integer)) or isinstance(q, bool) or q <= 0:
            raise NetworkFormatError(f"bullet import: {name} must be a positive integer, got {q!r}")
    arch = dataclasses.replace(architecture, units_per_pawn=100,
                               output_units=architecture.output_units if scale is None else scale)
    path = os.fspath(path)
    check_regular_file(path, "bullet's quantised output is a file")
    sections = bullet_sections(arch)
    need = sum(2 * int(np.prod(shape)) for _, shape in sections)
    size = os.path.getsize(path)  # checked before reading: a wrong file may be large
    if not need <= size < need + 64:
        raise NetworkFormatError(
            f"{path}: {size} bytes, but a bullet network with {sections[0][1][0]} features and N = {arch.ft_width} "
            f"({arch.ft_activation}) has {need} bytes of tensors plus 0..63 bytes of padding"
        )
    with open(path, "rb") as f:
        data = f.read(need + 64)
    if len(data) != size:
        raise NetworkFormatError(f"{path}: changed while it was read ({size} bytes, then {len(data)})")
    if any(data[need:]):
        raise NetworkFormatError(f"{path}: non-zero bytes in the padding after offset {need}")
    arrays, off = {}, 0
    for name, shape in sections:
        n = int(np.prod(shape))
        arrays[name] = np.frombuffer(data, "<i2", n, off).reshape(shape).astype(np.float64)
        off += 2 * n
    f32 = np.float32
    return FloatNetwork(
        arch,
        ft_biases=(arrays["l0b"] / qa).astype(f32),
        ft_weights=(arrays["l0w"] / qa).astype(f32),
        psqt_weights=np.zeros((sections[0][1][0], 0), f32),
        layer_weights=((arrays["l1w"] / qb).astype(f32).reshape(1, 1, -1),),
        layer_biases=((arrays["l1b"] / (qa * qb)).astype(f32).reshape(1, 1),),
        description=f"bullet {os.path.basename(path)} (QA={qa}, QB={qb}, SCALE={arch.output_units})",
    )


def write_bullet(network: FloatNetwork, path: str | os.PathLike[str], qa: int = 255, qb: int = 64) -> None:
    """Write ``network`` in the layout :func:`read_bullet` reads (rounded to nearest, padded to 64 bytes).

    Raises :class:`NetworkFormatError` for unsupported architectures and
    :class:`~nnue_infer.errors.QuantisationRangeError` if a value does not fit int16.
    """
    from ..errors import QuantisationRangeError

    arch = network.architecture
    check_bullet_architecture(arch)
    parts = [("l0w", network.ft_weights, qa), ("l0b", network.ft_biases, qa),
             ("l1w", network.layer_weights[0].reshape(-1), qb), ("l1b", network.layer_biases[0].reshape(-1), qa * qb)]
    blob = bytearray()
    for name, arr, scale in parts:
        q = np.rint(arr.astype(np.float64) * scale)
        if np.abs(q).max(initial=0) > 32767:
            raise QuantisationRangeError(f"bullet {name}: values up to {np.abs(q).max():.0f} exceed int16 at scale {scale}")
        blob += q.astype("<i2").tobytes()
    blob += bytes(-len(blob) % 64)
    with open(path, "wb") as f:
        f.write(bytes(blob))

"""Fixtures for kernel tests: the network's compute layout and buffers typed exactly as the
Evaluator types them (so every kernel keeps one compiled signature)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from nnue_infer.features import feature_set
from nnue_infer.kernels.nnue import forward as K
from nnue_infer.kernels.nnue.activation import FT_PAIRWISE
from nnue_infer.kernels import simd
from nnue_infer.kernels.nnue.dense import ft_input, scratch_size


_run: set[str] = set()  # node ids of the tests run in this process


@pytest.fixture(autouse=True)
def _note_the_test(request):
    _run.add(request.node.nodeid)


@pytest.fixture
def kernel_test_files_run(request) -> set[str]:
    """The test files (stems) all of whose selected tests have run in this process so far:
    pytest-xdist may spread a file's tests over its worker processes, and a kernel compiles in the
    process whose test calls it."""
    by_file: dict[str, list[str]] = {}
    for item in request.session.items:
        by_file.setdefault(item.path.stem, []).append(item.nodeid)
    return {stem for stem, ids in by_file.items() if all(i in _run for i in ids)}


@pytest.fixture(scope="session")
def halfka():
    return feature_set("HalfKAv2_hm")


@pytest.fixture(scope="session")
def params(network, halfka) -> np.ndarray:
    """The ``params`` int64 array of :mod:`nnue_infer.kernels.nnue.forward` for Stockfish 15.1's net."""
    arch = network.architecture
    p = np.zeros(K.N_PARAMS, np.int64)
    p[K.P_FT_CLAMP] = 127
    p[K.P_FT_SHIFT] = 7
    p[K.P_WEIGHT_SHIFT] = 6
    p[K.P_SKIP_INDEX] = 15
    p[K.P_SKIP_NUM] = 9600
    p[K.P_SKIP_DEN] = 8128
    p[K.P_SKIP_SUB] = -1  # z[15] alone (SKIP_SEPARATE = 0, VALUE_SUM = 0)
    p[K.P_OUTPUT_SCALE] = 16
    p[K.P_NUM_SLOTS] = 11
    p[K.P_MIRROR] = 1
    p[K.P_BUCKET_DIVISOR] = 4
    p[K.P_FT_ACTIVATION] = FT_PAIRWISE
    p[K.P_FLOAT_OUTPUT] = 9600  # 600 * 16 (no float layers in this network)
    p[K.P_SIMD] = simd.ISA  # the path under test (NNUE_INFER_SIMD; see test_simd_paths.py)
    p[K.P_FC0_SIMD] = simd.first_layer_isa(simd.ISA, 126, network.first_layer_pair_sum, network.first_layer_quad_sum)
    assert arch.skip_index == 15 and arch.output_buckets == 8
    return p


@pytest.fixture(scope="session")
def layout(network):
    """(weights int8[total], biases int32[total], layers int64[3, 8]) as the dense kernels read them."""
    return network.compute_layout


def make_buffers(layers: np.ndarray | None = None, l1: int = 1024, psqt: int = 8) -> SimpleNamespace:
    """Scratch buffers with the Evaluator's dtypes and shapes; ``ft_out`` is the transformed
    features (the first layer's input bytes in ``scratch``, the kernels' scratch for the layer
    stack ``layers``)."""
    scratch = np.zeros(scratch_size(layers) if layers is not None else l1, np.int16)
    return SimpleNamespace(
        bb=np.empty(8, np.int64),
        feats=np.empty((2, 32), np.int32),
        counts=np.empty(2, np.int64),
        acc=np.empty((2, l1), np.int16),
        psqt=np.empty((2, psqt), np.int32),
        scratch=scratch,
        ft_out=ft_input(scratch, layers) if layers is not None else scratch[:l1],
    )

"""Imports from other trainers: bullet's quantised raw output and named float arrays (.npz / state_dict)."""

from __future__ import annotations

import chess
import numpy as np
import pytest

from nnue_infer.errors import NetworkFormatError
from nnue_infer.float_network import FloatNetwork, forward_float
from nnue_infer.formats.arrays import float_network_from_arrays
from nnue_infer.formats.bullet import read_bullet, write_bullet
from nnue_infer.network import Architecture, HiddenLayer
import contextlib
import resource
from nnue_infer import NetworkFormatError, load
import nnue_infer
from nnue_infer import Architecture, FloatNetwork, HiddenLayer, NetworkFormatError, load, quantise, save

QA, QB, SCALE = 255, 64, 400
BUCKETS = tuple((sq // 8) // 2 for sq in range(64))  # 4 king buckets by rank pair (oriented square)


def bullet_arch(activation: str, king_buckets=None, mirror=None) -> Architecture:
    return Architecture(feature_set="Chess768", ft_width=64, ft_activation=activation, ft_clamp=255,
                        ft_shift={"crelu": 1, "screlu": 9, "pairwise": 9}[activation], psqt_buckets=0, output_buckets=1,
                        layers=(HiddenLayer(1, "none"),), king_buckets=king_buckets, mirror=mirror,
                        output_units=SCALE, units_per_pawn=100)


def bullet_features(board: chess.Board, perspective: chess.Color, buckets) -> list[int]:
    """bullet's Chess768 / ChessBucketsMirrored indices, written out from its documentation:
    768 * bucket + 384 * (piece colour != perspective) + 64 * piece type + square, the square
    flipped vertically for Black and horizontally when the own king is on files e-h."""
    king = board.king(perspective)
    flip = 56 if perspective == chess.BLACK else 0
    if buckets is not None and chess.square_file(king) > 3:
        flip ^= 7
    bucket = 0 if buckets is None else buckets[king ^ flip]
    out = []
    for sq, piece in board.piece_map().items():
        out.append(768 * bucket + 384 * (piece.color != perspective) + 64 * (piece.piece_type - 1) + (sq ^ flip))
    return out


def bullet_engine_eval(raw: bytes, n: int, activation: str, board: chess.Board, buckets=None) -> int:
    """An engine's integer evaluation of bullet's quantised output (bullet examples/simple.rs), centipawns."""
    nf = 768 * (1 if buckets is None else max(buckets) + 1)
    a = np.frombuffer(raw, "<i2")
    l0w = a[: nf * n].reshape(nf, n).astype(np.int64)
    l0b = a[nf * n : nf * n + n].astype(np.int64)
    l1w = a[nf * n + n : nf * n + 3 * n].astype(np.int64)
    l1b = int(a[nf * n + 3 * n])
    us, them = (board.turn, not board.turn)
    accs = [l0b + l0w[bullet_features(board, side, buckets)].sum(0) for side in (us, them)]
    acts = [np.clip(x, 0, QA) for x in accs]
    if activation == "screlu":
        s = int(sum((x * x * w).sum() for x, w in zip(acts, (l1w[:n], l1w[n:]))))
        s = int(s / QA)  # Rust integer division truncates
    else:
        s = int(sum((x * w).sum() for x, w in zip(acts, (l1w[:n], l1w[n:]))))
    out = (s + l1b) * SCALE
    return int(out / (QA * QB)) if out >= 0 else -int(-out / (QA * QB))


@pytest.mark.parametrize("activation,buckets", [("crelu", None), ("screlu", None), ("screlu", BUCKETS)])
def test_bullet_layout_matches_engine_arithmetic(activation, buckets, tmp_path, corpus):
    arch = bullet_arch(activation, buckets, "a-d" if buckets else None)
    ref = FloatNetwork.random(arch, seed=9, ft_std=0.05)
    path = tmp_path / "quantised.bin"
    write_bullet(ref, path, QA, QB)
    raw = path.read_bytes()
    assert len(raw) % 64 == 0
    fn = read_bullet(path, arch, QA, QB, SCALE)
    assert np.array_equal(fn.ft_weights, (np.rint(ref.ft_weights.astype(np.float64) * QA) / QA).astype(np.float32))
    for r in corpus[::25]:
        board = chess.Board(r["fen"])
        engine = bullet_engine_eval(raw, 64, activation, board, buckets)
        # the engine truncates twice: the final division (< 1 cp) and, for screlu, the division
        # by QA (< 1 unit of QA * QB, i.e. SCALE / (QA * QB) cp)
        assert abs(forward_float(fn, board) - engine) < 1.0 + SCALE / (QA * QB) + 1e-6, r["fen"]


def test_bullet_pairwise_layout(tmp_path):
    arch = bullet_arch("pairwise")
    ref = FloatNetwork.random(arch, seed=2)
    write_bullet(ref, tmp_path / "p.bin")
    fn = read_bullet(tmp_path / "p.bin", arch)
    assert fn.layer_weights[0].shape == (1, 1, 64)  # N/2 products per perspective
    assert np.allclose(fn.layer_weights[0], ref.layer_weights[0], atol=0.5 / QB)


def test_bullet_bad_files(tmp_path):
    arch = bullet_arch("crelu")
    write_bullet(FloatNetwork.random(arch, seed=1), tmp_path / "a.bin")
    raw = (tmp_path / "a.bin").read_bytes()
    (tmp_path / "short.bin").write_bytes(raw[:-200])
    with pytest.raises(NetworkFormatError, match="bytes of tensors"):
        read_bullet(tmp_path / "short.bin", arch)
    (tmp_path / "pad.bin").write_bytes(raw[:-1] + b"\x01")
    with pytest.raises(NetworkFormatError, match="padding"):
        read_bullet(tmp_path / "pad.bin", arch)
    import dataclasses

    with pytest.raises(NetworkFormatError, match="'output_buckets'"):
        read_bullet(tmp_path / "a.bin", dataclasses.replace(arch, output_buckets=8))
    with pytest.raises(NetworkFormatError, match="'feature_set'"):
        read_bullet(tmp_path / "a.bin", dataclasses.replace(arch, feature_set="HalfKAv2_hm", king_buckets=None))


def test_state_dict_style_arrays(tmp_path, corpus):
    arch = Architecture(feature_set="HalfKAv2_hm", ft_width=64, ft_activation="pairwise", ft_clamp=127, ft_shift=7,
                        psqt_buckets=8, output_buckets=8,
                        layers=(HiddenLayer(16, "sqr_crelu+crelu", activated=15), HiddenLayer(32, "crelu"),
                                HiddenLayer(1, "none")), skip_index=15)
    fn = FloatNetwork.random(arch, seed=4)
    # PyTorch-shaped: Linear weights [out, in], layer stacks as Linear(in, out * buckets), no padding
    sd = {"input.weight": fn.ft_weights.T.copy(), "input.bias": fn.ft_biases, "psqt.weight": fn.psqt_weights.T.copy(),
          "l1.weight": fn.layer_weights[0].reshape(8 * 16, 64), "l1.bias": fn.layer_biases[0].reshape(-1),
          "l2.weight": fn.layer_weights[1][:, :, :30].reshape(8 * 32, 30), "l2.bias": fn.layer_biases[1].reshape(-1),
          "out.weight": fn.layer_weights[2].reshape(8, 32), "out.bias": fn.layer_biases[2].reshape(-1)}
    names = {"ft.weights": "input.weight", "ft.biases": "input.bias", "ft.psqt_weights": "psqt.weight",
             "layers.0.weights": "l1.weight", "layers.0.biases": "l1.bias", "layers.1.weights": "l2.weight",
             "layers.1.biases": "l2.bias", "layers.2.weights": "out.weight", "layers.2.biases": "out.bias"}
    np.savez(tmp_path / "sd.npz", **sd)
    back = float_network_from_arrays(arch, tmp_path / "sd.npz", names)
    for (name, a), b in zip(fn.tensors().items(), back.tensors().values()):
        assert np.array_equal(a, b), name
    assert forward_float(back, corpus[3]["fen"]) == forward_float(fn, corpus[3]["fen"])

    with pytest.raises(NetworkFormatError, match=r"missing tensor 'layers.1.biases' \(source name 'l2.bias'\)"):
        float_network_from_arrays(arch, {k: v for k, v in sd.items() if k != "l2.bias"}, names)
    with pytest.raises(NetworkFormatError, match=r"'layers.0.weights': shape \(128, 60\)"):
        float_network_from_arrays(arch, {**sd, "l1.weight": np.zeros((128, 60), np.float32)}, names)
    with pytest.raises(NetworkFormatError, match=r"'ft.biases': dtype int16"):
        float_network_from_arrays(arch, {**sd, "input.bias": np.zeros(64, np.int16)}, names)


# -- hostile input ---------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _address_space_left(extra: int):
    """Limit the process's address space to what it maps now plus ``extra`` bytes (Linux: VmSize of
    /proc/self/status), so an allocation of gigabytes fails at once with ``MemoryError``."""
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = size + extra if hard == resource.RLIM_INFINITY else min(size + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _bullet_architecture():
    from nnue_infer import Architecture, HiddenLayer

    return Architecture(feature_set="Chess768", ft_width=32, ft_activation="screlu", ft_clamp=255, ft_shift=8,
                        psqt_buckets=0, output_buckets=1, layers=(HiddenLayer(1, "none"),))


@pytest.mark.parametrize("reader", ["bullet", "npz"])
def test_bullet_and_npz_readers_refuse_what_is_not_a_regular_file(tmp_path, reader):
    """Network files, never a hang: ``read_bullet`` and ``float_network_from_arrays`` (the documented ways
    trained weights come in) opened whatever they were given: a named pipe blocked for ever in ``open``
    and ``/dev/zero`` was read until memory ran out (``MemoryError``), where ``load`` refuses both.  Now
    both readers say the path is not a regular file, as ``load`` does, before opening it."""
    import os
    import threading

    from nnue_infer.formats.arrays import float_network_from_arrays
    from nnue_infer.formats.bullet import read_bullet

    read = (lambda p: read_bullet(p, _bullet_architecture())) if reader == "bullet" else \
        (lambda p: float_network_from_arrays(_bullet_architecture(), p))
    fifo = tmp_path / "net.bin"
    os.mkfifo(fifo)
    outcome = []

    def run():
        try:
            read(fifo)
        except Exception as exc:  # noqa: BLE001 - the outcome is checked below
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():  # blocked in open(): give it a writer that closes at once, so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"{reader}: reading a named pipe blocked")
    assert isinstance(outcome[0], NetworkFormatError) and str(outcome[0]) == (
        f"{fifo}: not a regular file (a directory, device or FIFO); "
        + ("bullet's quantised output is a file" if reader == "bullet" else "an .npz archive is a file"))
    with _address_space_left(1 << 30), pytest.raises(NetworkFormatError, match="^/dev/zero: not a regular file"):
        read("/dev/zero")


def _bullet_arch():
    from nnue_infer import Architecture, HiddenLayer

    return Architecture(feature_set="Chess768", ft_width=32, ft_activation="screlu", ft_clamp=255, ft_shift=8,
                        psqt_buckets=0, output_buckets=1, layers=(HiddenLayer(1, "none"),), output_units=400,
                        units_per_pawn=100)


@pytest.mark.parametrize("kwargs", [{"qa": 0}, {"qb": 0}, {"qa": -255}, {"qa": 1.5}, {"qb": True}])
def test_bullet_scales_must_be_positive_integers(tmp_path, kwargs):
    """qa=0 divided by zero (RuntimeWarning, then a misleading 'contains NaN'); a negative qa
    silently gave the network with every sign flipped."""
    from nnue_infer import FloatNetwork, NetworkFormatError
    from nnue_infer.formats.bullet import read_bullet, write_bullet

    arch = _bullet_arch()
    write_bullet(FloatNetwork.random(arch, seed=3), tmp_path / "q.bin")
    name = next(iter(kwargs))
    with pytest.raises(NetworkFormatError, match=f"{name} must be a positive integer"):
        read_bullet(tmp_path / "q.bin", arch, **kwargs)


def test_npz_import_of_non_archives_and_overflowing_values(tmp_path):
    """A .npy file raised TypeError, a corrupt archive zipfile.BadZipFile; float64 values beyond
    float32 warned about an overflow in a cast before the NaN/inf error."""
    import numpy as np

    from nnue_infer import FloatNetwork, NetworkFormatError
    from nnue_infer.float_network import network_tensors
    from nnue_infer.formats.arrays import float_network_from_arrays

    arch = _bullet_arch()
    arrays = network_tensors(FloatNetwork.random(arch, seed=3))
    np.save(tmp_path / "a.npy", arrays["ft.biases"])
    (tmp_path / "b.npz").write_bytes(b"PK\x03\x04 not a zip archive")
    np.savez(tmp_path / "c.npz", **{**arrays, "ft.biases": np.array([None] * 32, dtype=object)})
    for name in ("a.npy", "b.npz", "c.npz"):
        with pytest.raises(NetworkFormatError, match="not a readable .npz"):
            float_network_from_arrays(arch, tmp_path / name)
    with pytest.raises(NetworkFormatError, match="'ft.biases'.*NaN or infinity"):
        float_network_from_arrays(arch, {**arrays, "ft.biases": np.full(32, 1e300)})


def test_square_feature_transformer_needs_an_explicit_layout():
    """Item 6: with num_features == ft_width (Chess768, L1 = 768) a transposed nn.Linear weight was
    read as [num_features, L1] without a word (-250.76 became 866.74); now "auto" refuses the
    square shape and ``ft_layout`` says which it is."""
    arch = Architecture("Chess768", 768, "pairwise", 127, 7, psqt_buckets=0, output_buckets=1,
                        layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")))
    net = FloatNetwork.random(arch, seed=6)
    canonical = {name: arr for name, arr in net.tensors().items()}
    linear = {**canonical, "ft.weights": np.ascontiguousarray(canonical["ft.weights"].T)}  # as torch stores it
    with pytest.raises(NetworkFormatError, match="'ft.weights': shape \\(768, 768\\) reads either way.*ft_layout="):
        float_network_from_arrays(arch, linear)
    got = float_network_from_arrays(arch, linear, ft_layout="linear")
    assert np.array_equal(got.ft_weights, net.ft_weights)
    got = float_network_from_arrays(arch, canonical, ft_layout="features_first")
    assert np.array_equal(got.ft_weights, net.ft_weights)
    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    assert nnue_infer.forward_float(got, fen) == nnue_infer.forward_float(net, fen)
    with pytest.raises(NetworkFormatError, match="expected \\(768, 768\\)"):
        float_network_from_arrays(arch, {**canonical, "ft.weights": canonical["ft.weights"][:700]},
                                  ft_layout="linear")
    with pytest.raises(ValueError, match="ft_layout must be one of"):
        float_network_from_arrays(arch, canonical, ft_layout="transposed")


def test_non_square_shapes_still_work_unannounced():
    arch = Architecture("Chess768", 64, "pairwise", 127, 7, psqt_buckets=2, output_buckets=2,
                        layers=(HiddenLayer(1, "none"),))
    net = FloatNetwork.random(arch, seed=7)
    t = net.tensors()
    arrays = {**t, "ft.weights": t["ft.weights"].T.copy(), "ft.psqt_weights": t["ft.psqt_weights"].T.copy()}
    got = float_network_from_arrays(arch, arrays)
    assert np.array_equal(got.ft_weights, net.ft_weights) and np.array_equal(got.psqt_weights, net.psqt_weights)

"""Stockfish 15.1 ``.nnue`` files: corrupted copies raise NetworkFormatError naming section and offset.

Offsets come from the spec (``stockfish-15.1-nnue.md`` section 2), not from the package.  The
47 MB file is read once (``net_bytes``) and written to disk only a few times: corruptions are
patched in place and undone, truncations cut one copy shorter and shorter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import struct

import pytest

import nnue_infer
from nnue_infer import NetworkFormatError, extract_network, load, read_stockfish, write_stockfish
import chess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import warnings
import numpy as np
from safetensors.numpy import load_file
from safetensors.numpy import save as st_save
from nnue_infer import Architecture, FloatNetwork, HiddenLayer, NetworkFormatError, load, quantise, save
from nnue_infer.formats.safetensors import read_metadata

SIZE = 47_001_499
SHA256 = "ad9b423546714137916bd38978af6fd68d7b8951bef25ff76bf43da72d6cb786"
STACKS = 46_860_379
STACK_SIZE = 17_640


def spec_sections() -> list[tuple[str, int, int]]:
    """(name, offset, size) of every section, spec section 2 (description length 75)."""
    out = [("header.version", 0, 4), ("header.hash", 4, 4), ("header.description_length", 8, 4),
           ("header.description", 12, 75), ("feature_transformer.hash", 87, 4),
           ("feature_transformer.biases", 91, 2048), ("feature_transformer.weights", 2_139, 22528 * 1024 * 2),
           ("feature_transformer.psqt_weights", 46_139_483, 22528 * 8 * 4)]
    rel = [("hash", 0, 4), ("fc_0.biases", 4, 64), ("fc_0.weights", 68, 16384), ("fc_1.biases", 16_452, 128),
           ("fc_1.weights", 16_580, 1024), ("fc_2.biases", 17_604, 4), ("fc_2.weights", 17_608, 32)]
    for k in range(8):
        out += [(f"layer_stack[{k}].{name}", STACKS + k * STACK_SIZE + off, n) for name, off, n in rel]
    return out


def test_spec_sections_tile_the_file():
    end = 0
    for name, off, n in spec_sections():
        assert off == end, name
        end = off + n
    assert end == SIZE


@pytest.fixture(scope="module")
def copy(tmp_path_factory, net_bytes):
    """One full copy of the network on disk, for in-place patches (each undone after use)."""
    path = tmp_path_factory.mktemp("net") / "copy.nnue"
    path.write_bytes(net_bytes)
    yield path
    path.unlink()


@contextlib.contextmanager
def patched(path, offset: int, data: bytes):
    with open(path, "r+b") as f:
        f.seek(offset)
        old = f.read(len(data))
        f.seek(offset)
        f.write(data)
    try:
        yield path
    finally:
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(old)


def expect_error(path, *fragments, reader=load) -> str:
    with pytest.raises(NetworkFormatError) as info:
        reader(path)
    msg = str(info.value)
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    assert isinstance(info.value, ValueError)
    return msg


def test_intact_copy_loads(copy, network):
    net = load(copy)
    assert net.description == "Network trained with the https://github.com/glinscott/nnue-pytorch trainer."
    for a, b in ((net.ft_weights, network.ft_weights), (net.psqt_weights, network.psqt_weights)):
        assert (a == b).all()


def u32(x: int) -> bytes:
    return struct.pack("<I", x)


def test_wrong_version(copy):
    with patched(copy, 0, u32(0x7AF32F21)):
        expect_error(copy, "unknown network format")  # load() picks the format by the version
        expect_error(copy, "header.version", "offset 0", "0x7AF32F21", reader=read_stockfish)


def test_header_hash_altered(copy):
    with patched(copy, 4, u32(0x1C102EF3)):
        expect_error(copy, "header.hash", "offset 4", "0x1C102EF3")


def test_feature_transformer_hash_altered(copy):
    with patched(copy, 87, u32(0x7F2344B9)):
        expect_error(copy, "feature_transformer.hash", "offset 87")
    # a valid hash for another width (L1 = 512) no longer matches the header's whole-net hash
    with patched(copy, 87, u32(0x7F234CB8 ^ 1024)):
        expect_error(copy, "header.hash", "offset 4")


@pytest.mark.parametrize("k", range(8))
def test_layer_stack_hash_altered(copy, k):
    off = STACKS + k * STACK_SIZE
    with patched(copy, off, u32(0x63336A4B)):
        expect_error(copy, f"layer_stack[{k}].hash", f"offset {off}", "0x63336A4B")


@pytest.mark.parametrize("length,fragments", [
    (0xFFFFFFFF, ("header.description_length", "offset 8")),
    (1 << 30, ("header.description_length", "offset 8")),
    (74, ("feature_transformer.hash", "offset 86")),  # off by one: the FT hash is read at the wrong place
    (76, ("feature_transformer.hash", "offset 88")),
    (0, ("feature_transformer.hash", "offset 12")),
])
def test_description_length_wrong(copy, length, fragments):
    with patched(copy, 8, u32(length)):
        expect_error(copy, *fragments)


def test_parameter_bytes_are_not_checked_but_load(copy):
    """Flipping weight bytes is not detectable (no checksum in the format): it loads, values change."""
    with patched(copy, 2_139, b"\x7f\x7f"):
        assert load(copy).ft_weights[0, 0] == 0x7F7F


@pytest.mark.parametrize("extra", [1, 100])
def test_trailing_bytes(copy, extra):
    with open(copy, "ab") as f:
        f.write(b"\0" * extra)
    try:
        expect_error(copy, "trailing", str(SIZE))
    finally:
        os.truncate(copy, SIZE)


def test_truncated_at_every_section_boundary_and_mid_section(tmp_path, net_bytes):
    """One copy, cut shorter and shorter: at each section's start and in its middle."""
    cuts = []
    for name, off, n in spec_sections():
        cuts += [(off, name), (off + max(1, n // 2), name)]
    cuts += [(SIZE - 1, "layer_stack[7].fc_2.weights")]
    path = tmp_path / "truncated.nnue"
    path.write_bytes(net_bytes)
    checked = 0
    for size, name in sorted(set(cuts), reverse=True):
        os.truncate(path, size)
        if size == 0:
            expect_error(path, "empty")
            expect_error(path, "header.version", "offset 0", reader=read_stockfish)
        elif size < 4:
            expect_error(path, "unknown network format")
            expect_error(path, "header.version", "offset 0", reader=read_stockfish)
        else:
            off = next(o for n_, o, _ in spec_sections() if n_ == name)
            expect_error(path, "truncated", name, f"offset {off}")
        checked += 1
    assert checked >= 2 * 60


def test_empty_and_not_a_network(tmp_path, stockfish_binary):
    empty = tmp_path / "empty.nnue"
    empty.write_bytes(b"")
    expect_error(empty, "empty", str(empty))
    text = tmp_path / "notes.txt"
    text.write_text("this is not a network\n" * 10)
    expect_error(text, "unknown network format", str(text))
    expect_error(stockfish_binary, "unknown network format")  # an ELF file, not a bare network
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.nnue")


def test_write_stockfish_round_trip_is_byte_identical(tmp_path, network, net_bytes):
    out = tmp_path / "written.nnue"
    write_stockfish(network, out)
    data = out.read_bytes()
    assert len(data) == SIZE and data == net_bytes
    assert hashlib.sha256(data).hexdigest() == SHA256
    out.unlink()


def test_extract_network_from_debian_binary(tmp_path, stockfish_binary, net_bytes):
    out = tmp_path / "nn-ad9b42354671.nnue"
    assert extract_network(stockfish_binary, out) == SHA256
    data = out.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA256 and data == net_bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nn-ad9b42354671.nnue"]  # no .part left
    out.unlink()


def test_extract_network_refuses_wrong_name(tmp_path, stockfish_binary):
    """An output named nn-<12 hex>.nnue must carry that SHA-256 prefix."""
    out = tmp_path / "nn-000000000000.nnue"
    with pytest.raises(NetworkFormatError, match="000000000000"):
        extract_network(stockfish_binary, out)
    assert list(tmp_path.iterdir()) == []


def test_extract_network_from_non_engine_files(tmp_path, net_bytes):
    plain = tmp_path / "plain.bin"
    plain.write_bytes(os.urandom(4096))
    with pytest.raises(NetworkFormatError, match="no embedded Stockfish network"):
        extract_network(plain, tmp_path / "out.nnue")
    cut = tmp_path / "cut.bin"
    cut.write_bytes(b"\x7fELF" + b"\0" * 100 + net_bytes[:1_000_000])  # header found, network cut off
    with pytest.raises(NetworkFormatError, match="no embedded Stockfish network"):  # header found, network cut off
        extract_network(cut, tmp_path / "out.nnue")
    assert not (tmp_path / "out.nnue").exists() and not (tmp_path / "out.nnue.part").exists()


def test_cached_network_path(network_path):
    assert network_path.name == "nn-ad9b42354671.nnue" and network_path.stat().st_size == SIZE
    assert nnue_infer.stockfish_15_1_network_path() == network_path


# -- hostile input ---------------------------------------------------------------------------------------------------

START = chess.STARTING_FEN


@pytest.fixture(scope="module")
def small_network():
    from nnue_infer import FloatNetwork, quantise, stockfish_15_1_architecture

    return quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=4))


@pytest.fixture(scope="module")
def small_files(small_network, tmp_path_factory):
    """The small network as .nnue and .safetensors bytes."""
    from nnue_infer import save

    root = tmp_path_factory.mktemp("small")
    save(small_network, root / "n.nnue")
    save(small_network, root / "n.safetensors")
    return {ext: (root / f"n.{ext}").read_bytes() for ext in ("nnue", "safetensors")}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_files_load_exactly_or_fail_with_network_format_error(small_files, small_network, tmp_path, data):
    """Truncations anywhere and bit flips in the headers (where every byte is checked or is
    free text): NetworkFormatError, or a network that evaluates; never another exception."""
    from nnue_infer import Evaluator, NetworkFormatError, load

    ext = data.draw(st.sampled_from(sorted(small_files)))
    blob = bytearray(small_files[ext])
    if data.draw(st.booleans()):
        blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 3))):
            blob[data.draw(st.integers(0, 2000))] ^= 1 << data.draw(st.integers(0, 7))
    path = tmp_path / f"damaged.{ext}"
    path.write_bytes(bytes(blob))
    try:
        net = load(path)
    except NetworkFormatError:
        return
    Evaluator(net).evaluate(START)


def quiet_quantise(net):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantise(net)


def float_layer_arch() -> Architecture:
    return Architecture("Chess768", 64, "pairwise", 127, 7, psqt_buckets=1, output_buckets=1,
                        layers=(HiddenLayer(8, "crelu"), HiddenLayer(8, "screlu", precision="float32"),
                                HiddenLayer(1, "none", precision="float32")))


@pytest.mark.parametrize("tensor, value", [("layers.1.weights", np.nan), ("layers.2.biases", np.inf),
                                           ("layers.1.biases", -np.inf)])
def test_nan_in_a_quantised_files_float_layer_is_refused_at_load(tmp_path, tensor, value):
    """Item 5: a quantised .safetensors with NaN/inf in a float32 hidden layer loaded and evaluated
    to 0 everywhere; now load() refuses it naming the tensor."""
    net = quiet_quantise(FloatNetwork.random(float_layer_arch(), seed=5))
    good = tmp_path / "good.safetensors"
    save(net, good)
    tensors = load_file(good)
    tensors[tensor] = tensors[tensor].copy()
    tensors[tensor].reshape(-1)[3 % tensors[tensor].size] = value
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(st_save(tensors, metadata=read_metadata(good)))
    with pytest.raises(NetworkFormatError, match=f"tensor '{tensor}': 1 value\\(s\\) NaN or infinity"):
        load(bad)


@pytest.mark.parametrize("change, reason", [
    (dict(ft_activation="bilinear"), "feature-transformer activation is 'bilinear'; a .nnue file stores none"),
    (dict(ft_shift=8), "feature-transformer clamp 127 and shift 8 are not the 127 and 7 its header version implies"),
])
def test_writing_a_non_stockfish_feature_transformer_names_what_differs(tmp_path, change, reason):
    """A HalfKAv2_hm network with a Stockfish layer stack but another activation or shift has no .nnue
    form (the file implies pairwise, QA 127 and shift 7): the error names that part, and no file is written."""
    arch = dataclasses.replace(nnue_infer.stockfish_15_1_architecture(32), **change)
    net = quantise(FloatNetwork.random(arch, seed=3), nnue_infer.QuantisationScheme(ft_shift=arch.ft_shift))
    assert net.architecture.ft_activation == arch.ft_activation and net.architecture.ft_shift == arch.ft_shift
    with pytest.raises(ValueError, match=f"can be written as .nnue; this network's {reason}"):
        save(net, tmp_path / "net.nnue")
    assert not (tmp_path / "net.nnue").exists()


def test_writing_the_bundled_network_as_nnue_names_its_feature_set(tmp_path):
    """The bundled network (Chess768 with king buckets) is no Stockfish feature set: the error says so."""
    with pytest.raises(ValueError, match=r"this network's feature set Chess768 \(king buckets yes, mirror e-h\) is neither"):
        save(nnue_infer.default_network(), tmp_path / "default.nnue")
    assert not (tmp_path / "default.nnue").exists()

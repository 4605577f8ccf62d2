"""Native safetensors format, format detection and ``nnue-infer convert``: lossless round trips and bad files."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

import nnue_infer
from nnue_infer.cli import main
from nnue_infer.errors import NetworkFormatError
from nnue_infer.float_network import FloatNetwork, forward_float, network_tensors
from nnue_infer.formats import detect_format, load, save
from nnue_infer.formats.safetensors import FORMAT_VERSION, read_info
from nnue_infer.network import Architecture, HiddenLayer
from nnue_infer.quantisation import quantise
from nnue_infer import NetworkFormatError, load
import warnings
from nnue_infer import Architecture, FloatNetwork, HiddenLayer, NetworkFormatError, load, quantise, save
from nnue_infer.formats.safetensors import read_metadata
from nnue_infer.network import stockfish_15_1_architecture

SMALL = Architecture(feature_set="Chess768", ft_width=64, ft_activation="glu", ft_clamp=127, ft_shift=7,
                     psqt_buckets=4, output_buckets=4, layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none")),
                     king_buckets=tuple(sq // 32 for sq in range(64)), mirror="a-d", output_units=400, units_per_pawn=100)


def test_stockfish_native_stockfish_byte_identical(network_path, tmp_path, capsys):
    native, back = tmp_path / "sf.safetensors", tmp_path / "sf.nnue"
    assert main(["convert", str(network_path), str(native)]) == 0
    assert detect_format(native) == "safetensors"
    assert main(["convert", str(native), str(back)]) == 0
    assert hashlib.sha256(back.read_bytes()).hexdigest() == nnue_infer.constants.SF15_1_NET_SHA256
    out = capsys.readouterr().out
    assert "(stockfish) ->" in out and "(safetensors) ->" in out
    info = read_info(native)
    assert info["format_version"] == FORMAT_VERSION and info["kind"] == "quantised"
    assert Architecture.from_dict(info["architecture"]) == nnue_infer.stockfish_15_1_architecture()
    again = tmp_path / "again.safetensors"
    assert main(["convert", str(back), str(again)]) == 0
    assert again.read_bytes() == native.read_bytes()  # reproducible files


def test_explicit_format_overrides_extension(network, tmp_path):
    path = tmp_path / "net.bin"
    assert main(["convert", "--format", "safetensors", str(tmp_path / "missing.nnue"), str(path)]) != 0
    save(network, tmp_path / "a.nnue")
    assert main(["convert", "--format", "safetensors", str(tmp_path / "a.nnue"), str(path)]) == 0
    assert detect_format(path) == "safetensors"
    assert main(["convert", str(tmp_path / "a.nnue"), str(tmp_path / "x.bin")]) == 1  # no format from '.bin'


def test_native_evaluations_identical(network, tmp_path, corpus):
    save(network, tmp_path / "n.safetensors")
    loaded = load(tmp_path / "n.safetensors")
    a, b = nnue_infer.Evaluator(network), nnue_infer.Evaluator(loaded)
    for r in corpus[::40]:
        assert a.evaluate(r["fen"]) == b.evaluate(r["fen"]) == r["raw"]["value"]


def test_float_and_quantised_round_trip(tmp_path, corpus):
    fn = FloatNetwork.random(SMALL, seed=5)
    save(fn, tmp_path / "f.safetensors")
    back = load(tmp_path / "f.safetensors")
    assert isinstance(back, FloatNetwork) and back.architecture == SMALL and back.description == fn.description
    for (name, x), y in zip(fn.tensors().items(), back.tensors().values()):
        assert y.dtype == np.float32 and np.array_equal(x, y), name
    fen = corpus[7]["fen"]
    assert forward_float(back, fen) == forward_float(fn, fen)
    q = quantise(fn)
    save(q, tmp_path / "q.safetensors")
    q2 = load(tmp_path / "q.safetensors")
    assert isinstance(q2, nnue_infer.Network)
    assert nnue_infer.Evaluator(q2).evaluate(fen) == nnue_infer.Evaluator(q).evaluate(fen)
    with pytest.raises(ValueError, match="float network cannot be written as .nnue"):
        save(fn, tmp_path / "f.nnue")
    with pytest.raises(ValueError, match="only Stockfish architectures"):
        save(q, tmp_path / "q.nnue")


def _write(path, tensors, raw=None, **meta):
    base = {"format_version": 1, "kind": "quantised", "architecture": json.loads(SMALL.to_json()), "description": ""}
    base.update(meta)
    info = raw if raw is not None else json.dumps({k: v for k, v in base.items() if v is not None})
    save_file(tensors, str(path), metadata={"nnue-infer": info})


@pytest.fixture()
def q_tensors():
    return {k: np.ascontiguousarray(v) for k, v in network_tensors(quantise(FloatNetwork.random(SMALL, seed=1))).items()}


def test_bad_files_name_the_field(tmp_path, q_tensors):
    p = tmp_path / "bad.safetensors"
    _write(p, q_tensors)
    assert isinstance(load(p), nnue_infer.Network)  # the baseline is valid

    t = dict(q_tensors)
    t["layers.0.weights"] = t["layers.0.weights"].astype(np.int16)
    _write(p, t)
    with pytest.raises(NetworkFormatError, match=r"'layers\[0\].weights': dtype int16, expected int8"):
        load(p)

    t = dict(q_tensors)
    del t["ft.psqt_weights"]
    _write(p, t)
    with pytest.raises(NetworkFormatError, match=r"missing tensor\(s\) \['ft.psqt_weights'\]"):
        load(p)

    t = dict(q_tensors, extra=np.zeros(3, np.int8))
    _write(p, t)
    with pytest.raises(NetworkFormatError, match=r"unexpected tensor\(s\) \['extra'\]"):
        load(p)

    # metadata not matching the tensors: an architecture with a wider feature transformer
    _write(p, q_tensors, architecture=json.loads(dataclasses.replace(SMALL, ft_width=128).to_json()))
    with pytest.raises(NetworkFormatError, match=r"'ft_biases': shape \(64,\), expected \(128,\)"):
        load(p)

    _write(p, q_tensors, kind="float")
    with pytest.raises(NetworkFormatError, match="'ft_biases': dtype int16, expected float32"):
        load(p)

    bad_arch = json.loads(SMALL.to_json())
    bad_arch["ft_activation"] = "swish"
    _write(p, q_tensors, architecture=bad_arch)
    with pytest.raises(NetworkFormatError, match="metadata 'architecture'.*'ft_activation'.*swish"):
        load(p)

    for key, value, msg in (("format_version", 2, "format_version"), ("architecture", None, "'architecture' is missing"),
                            ("kind", "int4", "'kind'")):
        _write(p, q_tensors, **{key: value})
        with pytest.raises(NetworkFormatError, match=msg):
            load(p)
    _write(p, q_tensors, raw="{not json")
    with pytest.raises(NetworkFormatError, match="'nnue-infer' is not JSON"):
        load(p)
    save_file(q_tensors, str(p), metadata={"format": "pt"})
    with pytest.raises(NetworkFormatError, match="not written by nnue-infer"):
        load(p)


def test_corrupt_safetensors(tmp_path, q_tensors):
    p = tmp_path / "c.safetensors"
    _write(p, q_tensors)
    data = p.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    p.write_bytes(data[: 8 + n + 10])  # tensor data cut off
    with pytest.raises(NetworkFormatError, match=r"truncated in tensor .* the file has \d+ bytes"):
        load(p)
    p.write_bytes(data[:8] + b"{" + b"x" * (n - 1) + data[8 + n:])
    with pytest.raises(NetworkFormatError, match="not JSON"):
        load(p)
    p.write_bytes(b"\x00" * 16)
    with pytest.raises(NetworkFormatError, match="unknown network format"):
        load(p)


# -- hostile input ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["header", "metadata"])
def test_safetensors_json_nested_too_deeply(tmp_path, where):
    """Network files, safetensors with a lying header: a JSON header (or the ``nnue-infer`` metadata
    string) of 200,000 nested arrays made ``load``, ``Evaluator(path)`` and the command line die with
    Python's ``RecursionError`` traceback instead of a format error.  Now it is a
    ``NetworkFormatError`` naming the file and the part that is not readable JSON."""
    import json

    deep = '{"a": ' + "[" * 200_000 + "]" * 200_000 + "}"
    raw = deep.encode() if where == "header" else json.dumps({"__metadata__": {"nnue-infer": deep}}).encode()
    path = tmp_path / "deep.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(NetworkFormatError) as info:
        load(path)
    expected = (f"{path}: safetensors header at offset 8 is not JSON: nested too deeply" if where == "header"
                else f"{path}: metadata 'nnue-infer' is not JSON: nested too deeply")
    assert str(info.value) == expected


@pytest.mark.parametrize("keep", [0.5, 0.999])
def test_a_truncated_safetensors_file_names_the_tensor_and_sizes(tmp_path, keep):
    from nnue_infer import load
    from nnue_infer.errors import NetworkFormatError
    from nnue_infer.resources import default_network_path

    data = default_network_path().read_bytes()
    path = tmp_path / "cut.safetensors"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(NetworkFormatError, match=r"truncated in tensor '[\w.]+' \(bytes \d+\.\.\d+ of the file\): "
                                                 rf"the file has {int(len(data) * keep)} bytes, its header needs "
                                                 rf"{len(data)}"):
        load(path)


def _rewrite_safetensors_header(path, edit):
    """Rewrite a safetensors file's JSON header with ``edit(header)`` (tensor data unchanged)."""
    import json
    import struct

    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    edit(header)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])


@pytest.mark.parametrize("edit, match", [
    (lambda h: h["ft.biases"].update(dtype="BF16"), "unreadable safetensors data"),
    (lambda h: h["__metadata__"].update({"nnue-infer": 5}), "'nnue-infer' is not JSON"),
    (lambda h: h["ft.biases"].update(data_offsets=[0, 10**12]), "truncated in tensor .ft.biases."),
])
def test_hand_made_safetensors_headers(tmp_path, edit, match):
    """A BF16 tensor (numpy has no bfloat16) and a non-string metadata value escaped as TypeError."""
    from nnue_infer import FloatNetwork, NetworkFormatError, load, quantise, save, stockfish_15_1_architecture

    path = tmp_path / "net.safetensors"
    save(quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)), path)
    _rewrite_safetensors_header(path, edit)
    with pytest.raises(NetworkFormatError, match=match):
        load(path)


def test_non_utf8_description_survives_conversion(tmp_path):
    """A .nnue description that is not UTF-8 was read as Latin-1 and written back as UTF-8:
    ``convert`` .nnue -> .safetensors -> .nnue changed the file silently."""
    import struct

    from nnue_infer import FloatNetwork, load, quantise, save, stockfish_15_1_architecture
    from nnue_infer.cli import main

    save(quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)), tmp_path / "a.nnue")
    data = (tmp_path / "a.nnue").read_bytes()
    version, net_hash, length = struct.unpack("<III", data[:12])
    desc = b"caf\xe9 \xff net"
    original = struct.pack("<III", version, net_hash, len(desc)) + desc + data[12 + length :]
    (tmp_path / "b.nnue").write_bytes(original)
    assert main(["convert", str(tmp_path / "b.nnue"), str(tmp_path / "b.safetensors")]) in (0, None)
    assert main(["convert", str(tmp_path / "b.safetensors"), str(tmp_path / "c.nnue")]) in (0, None)
    assert (tmp_path / "c.nnue").read_bytes() == original
    assert main(["info", str(tmp_path / "b.safetensors")]) in (0, None)
    assert load(tmp_path / "b.nnue").description == load(tmp_path / "b.safetensors").description


def quiet_quantise(net):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantise(net)


def test_save_refuses_what_load_refuses(tmp_path):
    """Item 10: save() wrote an .nnue with ft_width 48 (not a multiple of 32) and one with a
    description over 1 MiB, which load() then refused; now save refuses them, leaves no file
    (and an existing file untouched), and the native format takes both."""
    net48 = quiet_quantise(FloatNetwork.random(stockfish_15_1_architecture(48), seed=10))
    target = tmp_path / "n.nnue"
    with pytest.raises(NetworkFormatError, match=r"n\.nnue: not written: this network cannot be stored as stockfish"):
        save(net48, target)
    assert list(tmp_path.iterdir()) == []
    net32 = quiet_quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=10))
    save(net32, target)
    before = target.read_bytes()
    wordy = dataclasses.replace(net32, description="x" * ((1 << 20) + 1))
    with pytest.raises(NetworkFormatError, match="description"):
        save(wordy, target)
    assert target.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["n.nnue"]
    for net in (net48, wordy):
        save(net, tmp_path / "n.safetensors")
        back = load(tmp_path / "n.safetensors")
        assert back.description == net.description and np.array_equal(back.ft_weights, net.ft_weights)


def test_save_errors_name_the_path_asked_for(tmp_path):
    net = nnue_infer.default_network()
    with pytest.raises(FileNotFoundError) as info:
        save(net, tmp_path / "missing" / "n.safetensors")
    assert info.value.filename == str(tmp_path / "missing" / "n.safetensors")
    (tmp_path / "d.safetensors").mkdir()
    with pytest.raises(IsADirectoryError):
        save(net, tmp_path / "d.safetensors")
    assert json.loads(read_metadata(nnue_infer.default_network_path())["nnue-infer"])["kind"] == "quantised"

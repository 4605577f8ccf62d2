"""Issue 8 items 5, 6, 8 and 10: no silent NaN, no silently transposed import, no unreadable own files.

Each test failed before its fix (the docstrings say how).
"""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save as st_save

import nnue_infer
from nnue_infer import Architecture, FloatNetwork, HiddenLayer, NetworkFormatError, load, quantise, save
from nnue_infer.formats.arrays import float_network_from_arrays
from nnue_infer.formats.safetensors import read_metadata
from nnue_infer.network import stockfish_15_1_architecture
from nnue_infer.quantisation import quantise_with_report


def quiet_quantise(net):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantise(net)


def float_layer_arch() -> Architecture:
    return Architecture("Chess768", 64, "pairwise", 127, 7, psqt_buckets=1, output_buckets=1,
                        layers=(HiddenLayer(8, "crelu"), HiddenLayer(8, "screlu", precision="float32"),
                                HiddenLayer(1, "none", precision="float32")))


# --- item 5 ----------------------------------------------------------------------------------

@pytest.mark.parametrize("tensor, value", [("layers.1.weights", np.nan), ("layers.2.biases", np.inf),
                                           ("layers.1.biases", -np.inf)])
def test_item5_nan_in_a_quantised_files_float_layer_is_refused_at_load(tmp_path, tensor, value):
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


# --- item 8 ----------------------------------------------------------------------------------

@pytest.mark.parametrize("clip", ["error", "saturate"])
def test_item8_nan_written_after_construction_is_named_at_quantisation(clip):
    """Item 8: NaN written into a FloatNetwork's arrays after construction became 0 ("no parameter
    clipped"), a NaN bias was blamed on an int32 worst-case sum; now the tensor is named."""
    net = FloatNetwork.random(Architecture("Chess768", 64, "pairwise", 127, 7, psqt_buckets=0, output_buckets=1,
                                           layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none"))), seed=8)
    net.layer_biases[0][0, 2] = np.nan
    with pytest.raises(NetworkFormatError, match=r"tensor 'layers.0.biases': 1 value\(s\) NaN or infinity, the first "
                                                 r"nan at index \[0, 2\]"):
        quantise_with_report(net, clip=clip)
    net.layer_biases[0][0, 2] = 0.0
    net.ft_weights[700, 5] = np.inf
    with pytest.raises(NetworkFormatError, match="tensor 'ft.weights'.*inf at index \\[700, 5\\]"):
        quantise_with_report(net, clip=clip)


# --- item 6 ----------------------------------------------------------------------------------

def test_item6_square_feature_transformer_needs_an_explicit_layout():
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


def test_item6_non_square_shapes_still_work_unannounced():
    arch = Architecture("Chess768", 64, "pairwise", 127, 7, psqt_buckets=2, output_buckets=2,
                        layers=(HiddenLayer(1, "none"),))
    net = FloatNetwork.random(arch, seed=7)
    t = net.tensors()
    arrays = {**t, "ft.weights": t["ft.weights"].T.copy(), "ft.psqt_weights": t["ft.psqt_weights"].T.copy()}
    got = float_network_from_arrays(arch, arrays)
    assert np.array_equal(got.ft_weights, net.ft_weights) and np.array_equal(got.psqt_weights, net.psqt_weights)


# --- item 10 ---------------------------------------------------------------------------------

def test_item10_save_refuses_what_load_refuses(tmp_path):
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


def test_item10_save_errors_name_the_path_asked_for(tmp_path):
    net = nnue_infer.default_network()
    with pytest.raises(FileNotFoundError) as info:
        save(net, tmp_path / "missing" / "n.safetensors")
    assert info.value.filename == str(tmp_path / "missing" / "n.safetensors")
    (tmp_path / "d.safetensors").mkdir()
    with pytest.raises(IsADirectoryError):
        save(net, tmp_path / "d.safetensors")
    assert json.loads(read_metadata(nnue_infer.default_network_path())["nnue-infer"])["kind"] == "quantised"

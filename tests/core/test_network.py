"""Architecture descriptions: JSON round trips, feature sets, and bad descriptions naming the field."""

from __future__ import annotations

import dataclasses

import chess
import pytest

from nnue_infer.errors import NetworkFormatError
from nnue_infer.features import architecture_features, feature_set
from nnue_infer.network import FT_ACTIVATIONS, Architecture, HiddenLayer, stockfish_15_1_architecture

#: bullet-style mirrored king buckets: 4 buckets by rank pair, indexed by the oriented king square.
RANK_PAIR_BUCKETS = tuple(sq // 16 for sq in range(64))


def small_arch(**kw) -> Architecture:
    base = dict(feature_set="Chess768", ft_width=64, ft_activation="pairwise", ft_clamp=127, ft_shift=7,
                psqt_buckets=0, output_buckets=1, layers=(HiddenLayer(1, "none"),))
    base.update(kw)
    return Architecture(**base)


@pytest.mark.parametrize("arch", [
    stockfish_15_1_architecture(),
    small_arch(),
    small_arch(king_buckets=RANK_PAIR_BUCKETS, mirror="a-d", ft_activation="glu", output_units=400, units_per_pawn=100),
    small_arch(ft_activation="screlu", ft_clamp=255, ft_shift=9, output_buckets=8,
               layers=(HiddenLayer(16, "crelu"), HiddenLayer(1, "none"))),
])
def test_json_round_trip(arch):
    assert Architecture.from_json(arch.to_json()) == arch


@pytest.mark.parametrize("field,value,fragment", [
    ("ft_activation", "swish", "ft_activation"),
    ("feature_set", "HalfKP", "feature_set"),
    ("ft_width", 63, "ft_width"),
    ("mirror", "left", "mirror"),
    ("king_buckets", (0,) * 63, "king_buckets"),
    ("king_buckets", (0,) * 63 + (2,), "king_buckets"),
    ("ft_shift", 6, "ft_shift"),       # 127 * 127 >> 6 = 252 fits uint8 ... but:
    ("ft_clamp", 40000, "ft_clamp"),
    ("output_buckets", 3, "output_buckets"),
    ("psqt_buckets", 2, "psqt_buckets"),
])
def test_bad_description_names_field(field, value, fragment):
    if field == "ft_shift":  # glu is signed: 252 exceeds int8
        with pytest.raises(NetworkFormatError, match=fragment):
            small_arch(ft_activation="glu", ft_shift=value)
        return
    with pytest.raises(NetworkFormatError, match=fragment):
        small_arch(**{field: value})


def test_bad_layers_name_field():
    with pytest.raises(NetworkFormatError, match=r"layers\[0\].activation"):
        small_arch(layers=(HiddenLayer(8, "gelu"), HiddenLayer(1, "none")))
    with pytest.raises(NetworkFormatError, match=r"layers\[-1\].outputs"):
        small_arch(layers=(HiddenLayer(8, "crelu"), HiddenLayer(2, "none")))
    with pytest.raises(NetworkFormatError, match="unknown field"):
        Architecture.from_dict({**dataclasses.asdict(small_arch()), "colour": 1})
    with pytest.raises(NetworkFormatError, match="invalid JSON"):
        Architecture.from_json("{")


def test_float_layer_rules_name_the_field():
    with pytest.raises(NetworkFormatError, match=r"layers\[0\].precision"):
        small_arch(layers=(HiddenLayer(8, "crelu", precision="float32"), HiddenLayer(1, "none", precision="float32")))
    with pytest.raises(NetworkFormatError, match=r"layers\[2\].precision.*cannot follow"):
        small_arch(layers=(HiddenLayer(8, "crelu"), HiddenLayer(8, "relu", precision="float32"), HiddenLayer(1, "none")))
    with pytest.raises(NetworkFormatError, match=r"layers\[0\].activation.*'relu' for a int8 layer"):
        small_arch(layers=(HiddenLayer(8, "relu"), HiddenLayer(1, "none")))
    with pytest.raises(NetworkFormatError, match=r"layers\[1\].precision.*unknown precision 'float16'"):
        small_arch(layers=(HiddenLayer(8, "crelu"), HiddenLayer(1, "none", precision="float16")))
    ok = small_arch(layers=(HiddenLayer(8, "crelu"), HiddenLayer(8, "screlu", precision="float32"),
                            HiddenLayer(1, "none", precision="float32")))
    assert Architecture.from_json(ok.to_json()) == ok


def test_halfkav2_hm_rejects_custom_buckets():
    with pytest.raises(NetworkFormatError, match="king_buckets"):
        dataclasses.replace(stockfish_15_1_architecture(), king_buckets=RANK_PAIR_BUCKETS)


def test_ft_output_width():
    for name, act in FT_ACTIVATIONS.items():
        shift = {1: 0, 2: 7, 3: 14, 4: 21}[act.degree]
        arch = small_arch(ft_activation=name, ft_shift=shift)
        assert arch.ft_output_width == (64 if act.paired else 128)


def test_chess768_indices_follow_bullet_layout():
    # bullet Chess768: 384 * (piece colour != perspective) + 64 * piece type + (square, flipped for Black).
    fs = feature_set("Chess768")
    board = chess.Board("4k3/8/8/8/8/8/3P4/4K3 w - - 0 1")
    white, black = fs.active(board)
    d2, e1, e8 = chess.D2, chess.E1, chess.E8
    assert white == sorted([0 * 64 + d2, 5 * 64 + e1, 384 + 5 * 64 + e8])
    assert black == sorted([384 + 0 * 64 + (d2 ^ 56), 384 + 5 * 64 + (e1 ^ 56), 5 * 64 + (e8 ^ 56)])


def test_mirrored_king_buckets():
    arch = small_arch(king_buckets=RANK_PAIR_BUCKETS, mirror="a-d")
    fs = architecture_features(arch)
    assert fs.num_features == 4 * 768
    # White king on g1 (file g >= e): mirrored to b1 (square 1, bucket 0); Black king on b8 stays (b8^56 = b1).
    board = chess.Board("1k6/8/8/8/8/8/8/6K1 w - - 0 1")
    white, black = fs.active(board)
    assert white == sorted([5 * 64 + (chess.G1 ^ 7), 384 + 5 * 64 + (chess.B8 ^ 7)])
    assert black == sorted([5 * 64 + (chess.B8 ^ 56), 384 + 5 * 64 + (chess.G1 ^ 56)])
    # Kings on the 4th/5th rank use bucket 1 (oriented squares 16..31).
    white, _ = fs.active(chess.Board("8/8/8/1k6/6K1/8/8/8 w - - 0 1"))
    assert min(white) >= 768 and max(white) < 2 * 768


# -- hostile input ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("ft_width", 32.0), ("ft_clamp", 127.0), ("ft_clamp", True), ("output_scale", 16.5), ("skip_numerator", 600.5),
    ("skip_denominator", 0.5), ("weight_scale_bits", 6.5), ("psqt_buckets", 8.0), ("output_units", float("nan")),
    ("units_per_pawn", float("inf")), ("output_scale", 10**30), ("skip_numerator", -(2**40)), ("units_per_pawn", "361"),
])
def test_non_integer_architecture_fields_are_refused_by_name(tmp_path, field, value):
    """Floats were truncated silently into the kernels' int64 parameters (output_scale 16.5 ran
    as 16, skip_numerator 600.5 as 600), or escaped as TypeError / ZeroDivisionError /
    OverflowError from load() or Evaluator()."""
    import json

    import numpy as np
    from safetensors.numpy import load_file, save_file

    from nnue_infer import Architecture, FloatNetwork, NetworkFormatError, load, quantise, save
    from nnue_infer import stockfish_15_1_architecture

    arch = stockfish_15_1_architecture(32)
    data = json.loads(arch.to_json())
    with pytest.raises(NetworkFormatError, match=f"'{field}'"):
        Architecture.from_dict({**data, field: value})
    path = tmp_path / "net.safetensors"
    save(quantise(FloatNetwork.random(arch, seed=1)), path)
    tensors = load_file(path)
    from safetensors import safe_open

    with safe_open(path, "np") as f:
        info = json.loads(f.metadata()["nnue-infer"])
    info["architecture"][field] = value
    save_file(tensors, path, metadata={"nnue-infer": json.dumps(info)})
    with pytest.raises(NetworkFormatError, match=f"'{field}'"):
        load(path)
    assert Architecture.from_dict({**data, "ft_width": np.int64(32)}).ft_width == 32


def test_hidden_layer_sizes_must_be_integers():
    import dataclasses

    from nnue_infer import HiddenLayer, NetworkFormatError, stockfish_15_1_architecture

    arch = stockfish_15_1_architecture(32)
    for layer in (HiddenLayer(16.0, "sqr_crelu+crelu", 15), HiddenLayer(16, "sqr_crelu+crelu", 15.0)):
        with pytest.raises(NetworkFormatError, match=r"layers\[0\]"):
            dataclasses.replace(arch, layers=(layer, *arch.layers[1:]))
    with pytest.raises(NetworkFormatError, match="'layers'"):
        dataclasses.replace(arch, layers=({"outputs": 1, "activation": "none"},))


@pytest.mark.parametrize("version", [1.0, True, "1", 2, None])
def test_format_version_must_be_the_integer_1(tmp_path, version):
    import json

    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from nnue_infer import FloatNetwork, NetworkFormatError, load, quantise, save, stockfish_15_1_architecture

    path = tmp_path / "net.safetensors"
    save(quantise(FloatNetwork.random(stockfish_15_1_architecture(32), seed=1)), path)
    with safe_open(path, "np") as f:
        info = json.loads(f.metadata()["nnue-infer"])
    save_file(load_file(path), path, metadata={"nnue-infer": json.dumps({**info, "format_version": version})})
    with pytest.raises(NetworkFormatError, match="format_version"):
        load(path)

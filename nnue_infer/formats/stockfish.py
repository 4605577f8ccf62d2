"""Stockfish's ``.nnue`` file format, Stockfish 12 to 19: read and write a :class:`Network`.

Layout (little-endian): header (u32 version, u32 whole-net hash, u32 description length,
description), feature transformer (u32 hash, int16 biases [L1], int16 weights [F][L1], int32
PSQT weights [F][8]), then 8 layer stacks (u32 hash, then per dense layer int32 biases and
int8 row-major weights [outputs][padded inputs]).  Each feature-transformer array is stored
raw or as a LEB128 block (``COMPRESSED_LEB128``, u32 byte count, signed LEB128 values; see
:mod:`nnue_infer.kernels.data.leb128`).  Nothing in the file is tabled here: the feature set and L1
come from the feature-transformer hash, the layer sizes from the whole-net hash (and, when
several fit, the file size), and every hash is recomputed and checked.

Versions and what they imply:

* ``0x7AF32F20`` (Stockfish 12-18): FT activation clamp 127, product >> 7 (Stockfish 17.1/18
  double the FT parameters in memory and use 254 and >> 9: the same numbers); the 15.1 layer
  stack (fc_0 L2+1 outputs, L2 activated, skip from the last; fc_1; fc_2).
* ``0x6A448AFA`` (Stockfish 19): clamp 255, >> 9; the Stockfish 19 stack (fc_0 L2 outputs all
  activated with shift 7, fc_1 over both activations, fc_2 over all four blocks, skip
  z[L2-2] - z[L2-1] scaled with the output).

Feature sets by hash: HalfKAv2_hm ``0x7F234CB8`` (22,528 features), P_hm ``0x6F234CB8`` (768;
nnue-infer's ``Chess768`` with mirror ``e-h`` and no king buckets).

Source: Stockfish sf_15.1 .. sf_18 ``nnue/evaluate_nnue.cpp`` / ``network.cpp``
(``read_header``, ``read_parameters``), ``nnue/nnue_feature_transformer.h``,
``nnue/nnue_architecture.h`` (``get_hash_value``), ``nnue/nnue_common.h`` (LEB128);
``shared/reference/stockfish-19-nnue.md`` section 2 and ``stockfish-19-lite-nnue.md`` section 2.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import constants as C
from ..errors import NetworkFormatError
from ..kernels.data import leb128 as L
from ..kernels import simd
from ..network import Architecture, HiddenLayer, Network

#: Header versions: Stockfish 12-18 and Stockfish 19.
VERSION_SF12 = C.SF_FILE_VERSION
VERSION_SF19 = C.SF19_FILE_VERSION
VERSIONS = (VERSION_SF12, VERSION_SF19)
#: Feature-set hashes (``features/*.h``: ``HashValue``) and the nnue-infer feature set they are.
FEATURE_HASHES = {"HalfKAv2_hm": C.HALFKAV2_HM_HASH, "P_hm": 0x6F234CB8}
#: Feature transformers with int8 threat rows, by their hash before the XOR with 2 * L1: the
#: Stockfish version, the int8 feature sets (``Architecture.int8_feature_sets``) and the arrays in
#: file order (name, rows per feature or ``"l1"`` per row, dtype).  Stockfish 19 combines its three
#: set hashes as h = rotl32(h, 1) ^ set hash over (FullThreats, PP_3Wide, HalfKAv2_hm)
#: (``FeatureTransformer::get_hash_value``); Stockfish 18 names its threat set only.
def _rotl32(h: int) -> int:
    return ((h << 1) | (h >> 31)) & 0xFFFFFFFF


_SF19_INPUT_HASH = _rotl32(_rotl32(0x2E6B9D04) ^ 0x86F2B1DD) ^ C.HALFKAV2_HM_HASH
THREAT_INPUTS = {
    _SF19_INPUT_HASH: ("19", ("FullThreats", "PP_3Wide"), (
        ("feature_transformer.biases", 1, "l1", "int16", True),
        ("feature_transformer.threat_weights", 59_808, "l1", "int8", False),
        ("feature_transformer.threat_psqt_weights", 59_808, 8, "int32", True),
        ("feature_transformer.pair_weights", 4_560, "l1", "int8", False),
        ("feature_transformer.pair_psqt_weights", 4_560, 8, "int32", True),
        ("feature_transformer.weights", 22_528, "l1", "int16", True),
        ("feature_transformer.psqt_weights", 22_528, 8, "int32", True))),
    0x8F234CB8: ("18", ("FullThreats18",), (
        ("feature_transformer.biases", 1, "l1", "int16", True),
        ("feature_transformer.threat_weights", 79_856, "l1", "int8", False),
        ("feature_transformer.weights", 22_528, "l1", "int16", True),
        ("feature_transformer.threat_and_psqt_weights", 79_856 + 22_528, 8, "int32", True))),
}
#: Magic of a LEB128 block (``nnue_common.h``: ``Leb128MagicString``).
LEB128_MAGIC = b"COMPRESSED_LEB128"
#: The first 8 bytes of Stockfish 15.1's network file: version and (for L1 = 1024) hash.
SF15_1_MAGIC = struct.pack("<II", C.SF_FILE_VERSION, 0x1C102EF2)
#: Layer-stack styles: "sf15" (Stockfish 12-18) and "sf19".
STACK_STYLES = ("sf15", "sf19")
_MAX_DESCRIPTION = 1 << 20
_MASK = 0xFFFFFFFF
_L2_RANGE = range(1, 65)
_L3_RANGE = range(1, 65)


def _pad32(n: int) -> int:
    return (n + 31) // 32 * 32


def ft_hash(l1: int, feature: str = "HalfKAv2_hm") -> int:
    """Feature-transformer hash: the feature set's hash XOR 2 * L1 (``get_hash_value``)."""
    return (FEATURE_HASHES[feature] ^ (2 * l1)) & _MASK


def _affine(h: int, n: int) -> int:
    return ((C.SF_AFFINE_HASH + n) ^ (h >> 1) ^ (h << 31)) & _MASK


def _crelu(h: int) -> int:
    return (C.SF_CLIPPED_RELU_HASH + h) & _MASK


def stack_hash(l1: int, fc0_outputs: int, l3: int) -> int:
    """Layer-stack hash: the input slice seed XOR 2 * L1 folded through affine(fc0_outputs),
    ClippedReLU, affine(l3), ClippedReLU, affine(1) (SqrClippedReLU is not hashed).
    The same rule for the 15.1 stack (fc0_outputs = L2 + 1) and Stockfish 19's (= L2)."""
    h = (C.SF_INPUT_SLICE_HASH ^ (2 * l1)) & _MASK
    h = _crelu(_affine(h, fc0_outputs))
    h = _crelu(_affine(h, l3))
    return _affine(h, 1)


def stockfish_architecture(l1: int, *, feature: str = "HalfKAv2_hm", style: str = "sf15", l2: int | None = None,
                           l3: int = 32, version: int = VERSION_SF12, ft_compression: str = "none",
                           stockfish_version: str = "15.1") -> Architecture:
    """The :class:`Architecture` of a Stockfish network.

    Parameters
    ----------
    l1 : int
        Accumulator width per perspective (128 ... 3072 in released nets).
    feature : str
        ``"HalfKAv2_hm"`` or ``"P_hm"`` (``Chess768`` mirrored to files e-h, no king buckets).
    style : str
        ``"sf15"``: fc_0 -> L2 + 1 outputs (L2 activated as [SqrClippedReLU | ClippedReLU],
        the last one the forward skip), fc_1 -> l3 ClippedReLU, fc_2 -> 1.  ``"sf19"``: fc_0 ->
        L2 outputs all activated both ways (shift 7), fc_1 -> l3 activated both ways (shift 6),
        fc_2 over the concatenation of the four blocks; skip z[L2-2] - z[L2-1] added to fc_2's
        output before scaling by 9600 / 16384.
    l2 : int, optional
        Activated fc_0 outputs (default 15 for ``sf15``, 32 for ``sf19``).
    version : int
        Header version; ``VERSION_SF19`` implies the FT clamp 255 and shift 9.
    ft_compression, stockfish_version : str
        See :class:`~nnue_infer.network.Architecture`.
    """
    if feature not in FEATURE_HASHES:
        raise ValueError(f"unknown Stockfish feature set {feature!r}; known: {sorted(FEATURE_HASHES)}")
    fs = dict(feature_set="HalfKAv2_hm") if feature == "HalfKAv2_hm" else dict(feature_set="Chess768", mirror="e-h")
    clamp, shift = (255, 9) if version == VERSION_SF19 else (C.FT_CLAMP, C.FT_SHIFT)
    common = dict(ft_width=l1, ft_activation="pairwise", ft_clamp=clamp, ft_shift=shift, psqt_buckets=C.SF_BUCKETS,
                  output_buckets=C.SF_BUCKETS, file_version=version, ft_compression=ft_compression,
                  stockfish_version=stockfish_version,
                  value_division="sum" if stockfish_version in ("15.1", "16") else "each",
                  units_per_pawn=UNITS_PER_PAWN[stockfish_version], **fs)
    if style == "sf15":
        l2 = C.SF_L2 if l2 is None else l2
        return Architecture(
            layers=(HiddenLayer(l2 + 1, "sqr_crelu+crelu", activated=l2), HiddenLayer(l3, "crelu"),
                    HiddenLayer(1, "none")),
            skip_index=l2, skip_numerator=C.SF_SKIP_NUMERATOR, skip_denominator=C.SF_SKIP_DENOMINATOR, **common)
    if style == "sf19":
        l2 = 32 if l2 is None else l2
        return Architecture(
            layers=(HiddenLayer(l2, "sqr_crelu+crelu", shift=C.WEIGHT_SCALE_BITS + 1),
                    HiddenLayer(l3, "sqr_crelu+crelu"), HiddenLayer(1, "none", concat_inputs=True)),
            skip_index=l2 - 2, skip_subtract_index=l2 - 1, skip_mode="output",
            skip_numerator=C.SF_OUTPUT_UNITS * C.OUTPUT_SCALE, skip_denominator=128 * (1 << C.WEIGHT_SCALE_BITS) * 2,
            **common)
    raise ValueError(f"unknown layer-stack style {style!r}; known: {STACK_STYLES}")


#: Internal units per pawn for centipawn conversion by version: Stockfish 15.1's 361, 16's 328;
#: later versions normalise by a material-dependent WDL model (:mod:`nnue_infer.normalisation`),
#: here its value at material 58, rounded (only for ``evaluate_cp``; the trace is exact).
UNITS_PER_PAWN = {"15.1": 361, "16": 328, "17.1": 377, "18": 385, "19": 304}


def _threat_key(sets: tuple[str, ...]) -> int:
    """The :data:`THREAT_INPUTS` key (FT hash before XOR 2 * L1) of these int8 sets; ``ValueError`` if none."""
    for key, (_, s, _) in THREAT_INPUTS.items():
        if s == sets:
            return key
    raise ValueError(f"int8 feature sets {list(sets)} are not a Stockfish threat input")


def _without_threats(arch: Architecture) -> Architecture:
    """``arch`` without its int8 sets and with the FT activation its header version implies
    (threat inputs use clamp 255, >> 9 under either header), for comparing layer stacks."""
    plain = stockfish_architecture(arch.ft_width, version=arch.file_version)
    return dataclasses.replace(arch, int8_feature_sets=(), ft_clamp=plain.ft_clamp, ft_shift=plain.ft_shift)


def _stack_geometry(arch: Architecture) -> tuple[str, int, int] | None:
    """(style, L2, L3) if ``arch``'s layer stack is one Stockfish writes, else None."""
    if arch.int8_feature_sets:
        if not any(s == arch.int8_feature_sets for _, s, _ in THREAT_INPUTS.values()):
            return None
        arch = _without_threats(arch)
    for style in STACK_STYLES:
        layers = arch.layers
        if len(layers) != 3:
            return None
        l2 = layers[0].n_activated
        ref = stockfish_architecture(arch.ft_width, feature=_feature_of(arch) or "HalfKAv2_hm", style=style, l2=l2,
                                     l3=layers[1].outputs, version=arch.file_version,
                                     stockfish_version=arch.stockfish_version)
        if ref.layers == layers and _same_stack(ref, arch):
            return style, l2, layers[1].outputs
    return None


def _same_stack(a: Architecture, b: Architecture) -> bool:
    keys = ("skip_index", "skip_subtract_index", "skip_mode", "skip_numerator", "skip_denominator", "weight_scale_bits",
            "output_scale", "psqt_buckets", "output_buckets", "ft_activation", "ft_clamp", "ft_shift")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def _feature_of(arch: Architecture) -> str | None:
    if arch.feature_set == "HalfKAv2_hm":
        return "HalfKAv2_hm"
    if arch.feature_set == "Chess768" and arch.mirror == "e-h" and arch.king_buckets is None:
        return "P_hm"
    return None


def network_hashes(arch: Architecture) -> tuple[int, int, int]:
    """(whole-net, feature-transformer, layer-stack) hashes of a Stockfish architecture."""
    feature = _feature_of(arch)
    geometry = _stack_geometry(arch)
    if feature is None or geometry is None:
        raise ValueError("not a Stockfish architecture")
    style, l2, l3 = geometry
    fth = ft_hash(arch.ft_width, feature)
    if arch.int8_feature_sets:
        fth = (_threat_key(arch.int8_feature_sets) ^ (2 * arch.ft_width)) & _MASK
    sh = stack_hash(arch.ft_width, l2 + 1 if style == "sf15" else l2, l3)
    return fth ^ sh, fth, sh


def is_stockfish_architecture(arch: Architecture) -> bool:
    """Whether ``arch`` can be written as a Stockfish ``.nnue`` file (HalfKAv2_hm or P_hm, a
    Stockfish layer stack of any size, the FT activation its header version implies)."""
    return arch.file_version in VERSIONS and _feature_of(arch) is not None and _stack_geometry(arch) is not None


# -- reading -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Block:
    """One feature-transformer array in the file: where it starts, whether LEB128, its byte size."""

    name: str
    offset: int
    leb128: bool
    nbytes: int  # whole block, magic and count included
    payload: int  # offset of the values (after the LEB128 framing)
    count: int  # values
    dtype: str  # their type


@dataclass(frozen=True)
class _Layout:
    version: int
    description: tuple[int, int]  # (offset in the data, length): copied only when parsed
    feature: str
    l1: int
    blocks: tuple[_Block, ...]
    style: str
    l2: int
    l3: int
    stacks: int  # offset of layer_stack[0]
    stack_size: int
    threat_input: tuple | None = None  # an entry of THREAT_INPUTS

    @property
    def end(self) -> int:
        return self.stacks + C.SF_BUCKETS * self.stack_size


def _u32(data: np.ndarray, off: int, what: str, where: str, start: int = 0) -> int:
    if off + 4 > len(data):
        raise NetworkFormatError(f"{where}: truncated in {what} at offset {off - start}: needs 4 bytes, "
                                 f"{max(len(data) - off, 0)} left")
    return int(data[off:off + 4].view("<u4")[0])


def _dense_shapes(style: str, l1: int, l2: int, l3: int) -> list[tuple[int, int]]:
    """(outputs, padded inputs) of fc_0, fc_1, fc_2 for a stack style."""
    if style == "sf15":
        return [(l2 + 1, l1), (l3, _pad32(2 * l2)), (1, _pad32(l3))]
    return [(l2, l1), (l3, _pad32(2 * l2)), (1, _pad32(2 * l2) + _pad32(2 * l3))]


def _stack_size(style: str, l1: int, l2: int, l3: int) -> int:
    return 4 + sum(4 * n_out + n_out * n_in for n_out, n_in in _dense_shapes(style, l1, l2, l3))


def _geometries(style: str) -> list[tuple[str, int, int]]:
    """(style, L2, L3) to consider, Stockfish's own sizes first."""
    defaults = [(15, 32), (32, 32)]
    rest = [(a, b) for a in _L2_RANGE for b in _L3_RANGE if (a, b) not in defaults]
    return [(style, a, b) for a, b in defaults + rest if style == "sf15" or a >= 2]


@lru_cache(maxsize=64)
def _stack_candidates(version: int, l1: int, hash_value: int) -> tuple[tuple[str, int, int], ...]:
    """(style, L2, L3) whose layer-stack hash is ``hash_value``, Stockfish's own sizes first."""
    style = "sf19" if version == VERSION_SF19 else "sf15"
    return tuple(g for g in _geometries(style) if stack_hash(l1, g[1] + (style == "sf15"), g[2]) == hash_value)


def _walk(data: np.ndarray, start: int, where: str, size: int | None) -> _Layout:
    """Parse the header and skip over the feature transformer of a network at ``data[start:]``.

    ``size`` is the network's byte size when known (a file), ``None`` when scanning a memory
    image (the layer sizes are then confirmed by the repeated layer-stack hash).  Raises
    :class:`NetworkFormatError` naming the section and its offset (relative to ``start``).
    """
    version = _u32(data, start, "header.version", where, start)
    if version not in VERSIONS:
        raise NetworkFormatError(
            f"{where}: header.version at offset 0: expected 0x{VERSION_SF12:08X} (Stockfish 12-18) or "
            f"0x{VERSION_SF19:08X} (Stockfish 19), got 0x{version:08X} (not a Stockfish network file)")
    net_hash = _u32(data, start + 4, "header.hash", where, start)
    desc_len = _u32(data, start + 8, "header.description_length", where, start)
    if desc_len > _MAX_DESCRIPTION:
        raise NetworkFormatError(f"{where}: header.description_length at offset 8: {desc_len} bytes is implausible")
    if start + 12 + desc_len > len(data):
        raise NetworkFormatError(f"{where}: truncated in header.description at offset 12: needs {desc_len} bytes, "
                                 f"{len(data) - start - 12} left")
    description = (start + 12, desc_len)
    off = start + 12 + desc_len
    fth = _u32(data, off, "feature_transformer.hash", where, start)
    feature = l1 = None
    threat_input = None
    for name, h in [*FEATURE_HASHES.items(), *(("HalfKAv2_hm", h) for h in THREAT_INPUTS)]:
        x = fth ^ h
        if x % 2 == 0 and 0 < x // 2 <= 1 << 15 and (x // 2) % 32 == 0:
            feature, l1 = name, x // 2
            threat_input = THREAT_INPUTS.get(h)
    if feature is None:
        raise NetworkFormatError(
            f"{where}: feature_transformer.hash at offset {off - start}: 0x{fth:08X} is none of HalfKAv2_hm, P_hm, "
            "Stockfish 19's and Stockfish 18's threat inputs "
            f"with a width that is a multiple of 32 (expected e.g. 0x{ft_hash(C.SF_L1):08X} for HalfKAv2_hm, L1 = {C.SF_L1})")
    candidates = _stack_candidates(version, l1, net_hash ^ fth)
    if not candidates:
        style = "sf19" if version == VERSION_SF19 else "sf15"
        l2 = 32 if style == "sf19" else C.SF_L2
        expected = fth ^ stack_hash(l1, l2 + (style == "sf15"), 32)
        raise NetworkFormatError(
            f"{where}: header.hash at offset 4: 0x{net_hash:08X} is the feature-transformer hash 0x{fth:08X} XOR no "
            f"known layer stack for L1 = {l1} (expected e.g. 0x{expected:08X} for L2 = {l2}, L3 = 32)")
    off += 4
    nf = 22528 if feature == "HalfKAv2_hm" else 768
    blocks = []
    if threat_input is not None:  # a fixed mix of LEB128 blocks and raw int8 rows
        for name, rows, width, dtype, leb in threat_input[2]:
            count = rows * (l1 if width == "l1" else width)
            if off + (len(LEB128_MAGIC) + 4 if leb else 1) > len(data):
                raise NetworkFormatError(f"{where}: truncated at {name}, offset {off - start}: the data ends there "
                                         f"({len(data) - start} bytes)")
            magic = data[off:off + len(LEB128_MAGIC)].tobytes() == LEB128_MAGIC
            if leb != magic:
                raise NetworkFormatError(
                    f"{where}: {name} at offset {off - start}: expected {'a LEB128 block' if leb else 'raw int8 rows'} "
                    f"(Stockfish {threat_input[0]}'s threat inputs), found {'one' if magic else 'no LEB128 magic'}"
                    + ("" if leb else " (a LEB128 block)"))
            if leb:
                n = _u32(data, off + len(LEB128_MAGIC), f"{name} (LEB128 byte count)", where, start)
                blocks.append(_Block(name, off - start, True, len(LEB128_MAGIC) + 4 + n, off + len(LEB128_MAGIC) + 4,
                                     count, dtype))
            else:
                blocks.append(_Block(name, off - start, False, count, off, count, dtype))
            if off + blocks[-1].nbytes > len(data):  # cut short, or a wrong LEB128 byte count: name this block
                raise NetworkFormatError(
                    f"{where}: truncated in {name} at offset {off - start}: needs {blocks[-1].nbytes} bytes"
                    f"{' (by its LEB128 byte count)' if leb else ''}, {len(data) - off} left")
            off += blocks[-1].nbytes
    for name, count, dtype in () if threat_input is not None else (
            ("feature_transformer.biases", l1, "int16"), ("feature_transformer.weights", nf * l1, "int16"),
            ("feature_transformer.psqt_weights", nf * C.SF_BUCKETS, "int32")):
        if blocks and blocks[0].leb128 and off <= len(data) < off + len(LEB128_MAGIC):  # a cut magic, not raw data
            raise NetworkFormatError(f"{where}: truncated at {name}, offset {off - start}: the data ends there "
                                     f"({len(data) - start} bytes)")
        if off + len(LEB128_MAGIC) <= len(data) and data[off:off + len(LEB128_MAGIC)].tobytes() == LEB128_MAGIC:
            n = _u32(data, off + len(LEB128_MAGIC), f"{name} (LEB128 byte count)", where, start)
            blocks.append(_Block(name, off - start, True, len(LEB128_MAGIC) + 4 + n, off + len(LEB128_MAGIC) + 4,
                                 count, dtype))
        else:
            blocks.append(_Block(name, off - start, False, count * np.dtype(dtype).itemsize, off, count, dtype))
        off += blocks[-1].nbytes
    if threat_input is None and len({b.leb128 for b in blocks}) != 1:
        for b in blocks:  # a wrong byte count shifts the next block: name the block that is wrong
            if b.leb128:
                _decode_block(data, b, where)
        raise NetworkFormatError(f"{where}: feature transformer mixes raw and LEB128 arrays ("
                                 + ", ".join(f"{b.name} {'LEB128' if b.leb128 else 'raw'}" for b in blocks)
                                 + "); Stockfish writes all of them one way")
    stacks = off - start
    chosen = candidates[0]
    if size is not None:
        style0 = candidates[0][0]
        fits = [c for c in _geometries(style0) if stacks + C.SF_BUCKETS * _stack_size(style0, l1, *c[1:]) == size]
        matching = [c for c in fits if c in candidates]
        if matching:
            chosen = matching[0]
        elif fits and fits[0] == _geometries(style0)[0]:  # Stockfish's own sizes fit the file: the header is wrong
            _, l2, l3 = fits[0]
            expected = fth ^ stack_hash(l1, l2 + (style0 == "sf15"), l3)
            raise NetworkFormatError(
                f"{where}: header.hash at offset 4: expected 0x{expected:08X} (feature transformer XOR layer stack "
                f"for L1 = {l1}, L2 = {l2}, L3 = {l3}, the sizes that fit the file), got 0x{net_hash:08X}")
        else:  # the other version's stacks fit the file and its hashes: the version word is wrong
            other = VERSION_SF12 if version == VERSION_SF19 else VERSION_SF19
            other_style = "sf19" if other == VERSION_SF19 else "sf15"
            alt = [c for c in _stack_candidates(other, l1, net_hash ^ fth)
                   if stacks + C.SF_BUCKETS * _stack_size(other_style, l1, *c[1:]) == size]
            if alt:
                names = {VERSION_SF12: "Stockfish 12-18", VERSION_SF19: "Stockfish 19"}
                raise NetworkFormatError(
                    f"{where}: header.version at offset 0: 0x{version:08X} ({names[version]}), but the file's layer "
                    f"stacks and hashes are {names[other]}'s (L1 = {l1}, L2 = {alt[0][1]}, L3 = {alt[0][2]}): "
                    f"expected 0x{other:08X}")
    else:
        for cand in candidates:
            size_c = _stack_size(cand[0], l1, *cand[1:])
            if all(start + stacks + k * size_c + 4 <= len(data)
                   and _u32(data, start + stacks + k * size_c, "", where) == net_hash ^ fth
                   for k in range(C.SF_BUCKETS)):
                chosen = cand
                break
    style, l2, l3 = chosen
    return _Layout(version, description, feature, l1, tuple(blocks), style, l2, l3, stacks,
                   _stack_size(style, l1, l2, l3), threat_input)


def network_extent(data: np.ndarray, start: int = 0, where: str = "data") -> int:
    """Byte size of the Stockfish network starting at ``data[start]`` (uint8 array), from its
    header, LEB128 byte counts and layer-stack hashes; :class:`NetworkFormatError` if none."""
    return _walk(data, start, where, None).end


def _decode_block(data: np.ndarray, block: _Block, path: str) -> np.ndarray:
    """The values of one feature-transformer array (native byte order, writeable)."""
    count, dtype = block.count, block.dtype
    if not block.leb128:
        end = block.payload + block.nbytes
        if end > len(data):
            raise NetworkFormatError(f"{path}: truncated in {block.name} at offset {block.offset}: needs "
                                     f"{block.nbytes} bytes, {len(data) - block.payload} left")
        out = simd.aligned_empty(count, dtype)  # 64-byte aligned: Network keeps it without a copy
        out[...] = data[block.payload:end].view(np.dtype(dtype).newbyteorder("<"))
        return out
    n = block.nbytes - len(LEB128_MAGIC) - 4
    if block.payload + n > len(data):
        raise NetworkFormatError(f"{path}: truncated in {block.name} (LEB128 block at offset {block.offset}): its "
                                 f"byte count says {n} bytes, {len(data) - block.payload} left")
    if n < count:  # every value takes a byte or more: refused before the array (L1 from a hash: up to 1.4 GiB)
        raise NetworkFormatError(f"{path}: truncated in {block.name} (LEB128 block at offset {block.offset}): its "
                                 f"byte count says {n} bytes, fewer than its {count} values (at least one byte each)")
    out = simd.aligned_empty(count, dtype)
    info = np.iinfo(dtype)
    max_bytes = (info.bits + 6) // 7
    decode = L.decode_leb128_int16 if dtype == "int16" else L.decode_leb128
    status, index, at = decode(data[block.payload:block.payload + n], out, info.min, info.max, max_bytes)
    where = f"{path}: {block.name} (LEB128 block at offset {block.offset}, payload at {block.payload})"
    if status == L.LEB128_TRUNCATED:
        raise NetworkFormatError(f"{where}: truncated: the {n} payload bytes end inside value {index} of {count} "
                                 f"(payload offset {at}, file offset {block.payload + at})")
    if status == L.LEB128_OVERLONG:
        raise NetworkFormatError(f"{where}: overlong value {index} at payload offset {at} (file offset "
                                 f"{block.payload + at}): more than {max_bytes} bytes or outside {dtype}")
    if status == L.LEB128_TRAILING:
        raise NetworkFormatError(f"{where}: byte count mismatch: {count} values end at payload offset {at}, the block "
                                 f"declares {n} bytes ({n - at} left over)")
    return out


def _version_of(layout: _Layout, data: np.ndarray) -> str:
    """The Stockfish version a file's numbers and text follow: 19 by header; raw FT: 15.1; a
    LEB128 file of the 12-18 header: the registry's version for a known SHA-256, else 17.1."""
    if layout.version == VERSION_SF19:
        return "19"
    if not layout.blocks[0].leb128:
        return "15.1"
    import hashlib

    from .registry import version_for_sha256

    return version_for_sha256(hashlib.sha256(memoryview(data)).hexdigest()) or "17.1"


def parse_stockfish(data: np.ndarray, path: str = "<bytes>", stockfish_version: str | None = None) -> Network:
    """A :class:`Network` from the bytes of a ``.nnue`` file (uint8 array); see :func:`read_stockfish`."""
    layout = _walk(data, 0, path, len(data))
    nf = 22528 if layout.feature == "HalfKAv2_hm" else 768
    l1 = layout.l1
    if layout.threat_input is None:
        biases = _decode_block(data, layout.blocks[0], path)
        weights = _decode_block(data, layout.blocks[1], path).reshape(nf, l1)
        psqt = _decode_block(data, layout.blocks[2], path).reshape(nf, C.SF_BUCKETS)
        int8 = {}
    else:
        biases, weights, psqt, int8 = _threat_ft(data, layout, path)
    shapes = _dense_shapes(layout.style, l1, layout.l2, layout.l3)
    want = _u32(data, 4, "header.hash", path) ^ _u32(data, sum(layout.description), "feature_transformer.hash", path)
    layer_w = [np.empty((C.SF_BUCKETS, o, i), np.int8) for o, i in shapes]
    layer_b = [np.empty((C.SF_BUCKETS, o), np.int32) for o, _ in shapes]
    off = layout.stacks
    for b in range(C.SF_BUCKETS):
        got = _u32(data, off, f"layer_stack[{b}].hash", path)
        if got != want:
            raise NetworkFormatError(f"{path}: layer_stack[{b}].hash at offset {off}: expected 0x{want:08X}, got 0x{got:08X}")
        off += 4
        for i, (n_out, n_in) in enumerate(shapes):
            for name, arr, nbytes in ((f"layer_stack[{b}].fc_{i}.biases", layer_b[i], 4 * n_out),
                                      (f"layer_stack[{b}].fc_{i}.weights", layer_w[i], n_out * n_in)):
                if off + nbytes > len(data):
                    raise NetworkFormatError(
                        f"{path}: truncated in {name} (offset {off}, {nbytes} bytes): file has {len(data)} bytes, "
                        f"a network with L1 = {l1} needs {layout.end}")
                src = data[off:off + nbytes]
                arr[b] = (src.view("<i4") if arr.dtype == np.int32 else src.view(np.int8)).reshape(arr.shape[1:])
                off += nbytes
    if len(data) > layout.end:
        raise NetworkFormatError(f"{path}: {len(data) - layout.end} trailing bytes after the last layer stack "
                                 f"(offset {layout.end})")
    arch = stockfish_architecture(l1, feature=layout.feature, style=layout.style, l2=layout.l2, l3=layout.l3,
                                  version=layout.version, ft_compression="leb128" if layout.blocks[0].leb128 else "none",
                                  stockfish_version=stockfish_version or _version_of(layout, data))
    if layout.threat_input is not None:  # int8 rows: clamp 255, product >> 9 (no doubling of the FT in memory)
        arch = dataclasses.replace(arch, int8_feature_sets=layout.threat_input[1], ft_clamp=255, ft_shift=9)
    return Network(architecture=arch, ft_biases=biases, ft_weights=weights, psqt_weights=psqt,
                   layer_weights=tuple(layer_w), layer_biases=tuple(layer_b), **int8,
                   description=data[layout.description[0]:sum(layout.description)].tobytes().decode(
                       "utf-8", "surrogateescape"))


def _threat_ft(data: np.ndarray, layout: _Layout, path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Biases, HalfKAv2_hm weights and PSQT, and the int8 rows with their PSQT rows (``Network``'s
    ``int8_weights``/``int8_psqt_weights``, one index space) of a threat-input feature transformer."""
    l1 = layout.l1
    arrays = {b.name: _decode_block(data, b, path) for b in layout.blocks}
    biases = arrays.pop("feature_transformer.biases")
    weights = arrays.pop("feature_transformer.weights").reshape(-1, l1)
    if "feature_transformer.pair_weights" in arrays:  # Stockfish 19: threat rows, then pair rows
        int8 = np.concatenate([arrays["feature_transformer.threat_weights"], arrays["feature_transformer.pair_weights"]])
        int8_psqt = np.concatenate([arrays["feature_transformer.threat_psqt_weights"],
                                    arrays["feature_transformer.pair_psqt_weights"]])
        psqt = arrays["feature_transformer.psqt_weights"].reshape(-1, C.SF_BUCKETS)
    else:  # Stockfish 18: one LEB128 block holds the threat PSQT rows, then HalfKAv2_hm's
        int8 = arrays["feature_transformer.threat_weights"]
        both = arrays["feature_transformer.threat_and_psqt_weights"].reshape(-1, C.SF_BUCKETS)
        n = int8.size // l1
        int8_psqt, psqt = np.ascontiguousarray(both[:n]), np.ascontiguousarray(both[n:])
    return biases, weights, psqt, {"int8_weights": int8.reshape(-1, l1),
                                   "int8_psqt_weights": int8_psqt.reshape(-1, C.SF_BUCKETS)}


def _threat_ft_parts(network: Network) -> list[bytes]:
    """Feature-transformer blocks of a threat-input network, in file order."""
    sets = network.architecture.int8_feature_sets
    raw = lambda a: np.ascontiguousarray(a, dtype="i1").tobytes()  # noqa: E731
    w8, p8 = network.int8_weights, network.int8_psqt_weights
    if "PP_3Wide" in sets:
        n = 59_808
        return [_leb128_block(network.ft_biases), raw(w8[:n]), _leb128_block(p8[:n]), raw(w8[n:]),
                     _leb128_block(p8[n:]), _leb128_block(network.ft_weights), _leb128_block(network.psqt_weights)]
    return [_leb128_block(network.ft_biases), raw(w8), _leb128_block(network.ft_weights),
                 _leb128_block(np.concatenate([p8, network.psqt_weights]))]


def read_stockfish(path: str | os.PathLike[str], stockfish_version: str | None = None) -> Network:
    """Read a Stockfish ``.nnue`` file (Stockfish 12 to 19 headers; raw or LEB128 arrays).

    Every byte is checked: version, the three kinds of hash, LEB128 framing and values, the
    exact length (no truncation, no trailing bytes).  The file is read once; LEB128 blocks are
    decoded by a compiled kernel.

    Returns
    -------
    Network
        With :func:`stockfish_architecture` (feature set, L1, L2, L3 and stack style from the
        file; ``stockfish_version`` as given, else from the header, the storage and, for a
        LEB128 file with the 12-18 header, the registry of known nets by SHA-256, else 17.1).

    Raises
    ------
    NetworkFormatError
        Naming the path, the section (e.g. ``layer_stack[3].hash``) and its byte offset.
    OSError
        The file cannot be read.
    """
    path = os.fspath(path)
    data = np.fromfile(path, np.uint8)
    if len(data) < 4:
        raise NetworkFormatError(f"{path}: truncated in header.version at offset 0: needs 4 bytes, {len(data)} left")
    return parse_stockfish(data, path, stockfish_version)


# -- writing -------------------------------------------------------------------------------------

def _leb128_block(values: np.ndarray) -> bytes:
    flat = np.ascontiguousarray(values.reshape(-1), dtype=np.int32)
    out = np.empty(L.leb128_size(flat), np.uint8)
    L.encode_leb128(flat, out)
    return LEB128_MAGIC + struct.pack("<I", len(out)) + out.tobytes()


def _unwritable_part(arch: Architecture) -> str:
    """What keeps ``arch`` out of the ``.nnue`` format, for the error of :func:`stockfish_bytes`:
    the header version, the feature set, the feature transformer's activation, clamp or shift (the
    file holds none of them: Stockfish's pairwise multiplication and the version's QA and shift are
    implied), or else the layer stack."""
    if arch.file_version not in VERSIONS:
        return f"header version 0x{arch.file_version:08X} is none of Stockfish's"
    if _feature_of(arch) is None:
        return (f"feature set {arch.feature_set} (king buckets {'yes' if arch.king_buckets else 'none'}, "
                f"mirror {arch.mirror or 'none'}) is neither")
    implied = stockfish_architecture(arch.ft_width, version=arch.file_version)
    clamp, shift = implied.ft_clamp, implied.ft_shift
    if arch.ft_activation != "pairwise":
        return (f"feature-transformer activation is {arch.ft_activation!r}; a .nnue file stores none and "
                "Stockfish multiplies pairwise")
    if (arch.ft_clamp, arch.ft_shift) != (clamp, shift):
        return (f"feature-transformer clamp {arch.ft_clamp} and shift {arch.ft_shift} are not the {clamp} and {shift} "
                "its header version implies")
    return "layer stack is not one of Stockfish's"


def stockfish_bytes(network: Network) -> bytes:
    """The ``.nnue`` bytes of ``network`` (see :func:`write_stockfish`)."""
    arch = network.architecture
    feature = _feature_of(arch)
    geometry = _stack_geometry(arch)
    if arch.file_version not in VERSIONS or feature is None or geometry is None:
        raise ValueError("only Stockfish architectures (HalfKAv2_hm or P_hm feature transformer, a Stockfish 12-19 "
                         "layer stack, see formats.stockfish.stockfish_architecture) can be written as .nnue; "
                         f"this network's {_unwritable_part(arch)}")
    _, fth, sh = network_hashes(arch)
    desc = network.description.encode("utf-8", "surrogateescape")
    parts = [struct.pack("<III", arch.file_version, fth ^ sh, len(desc)), desc, struct.pack("<I", fth)]
    if arch.int8_feature_sets:
        parts += _threat_ft_parts(network)
    for arr, dt in () if arch.int8_feature_sets else (
            (network.ft_biases, "<i2"), (network.ft_weights, "<i2"), (network.psqt_weights, "<i4")):
        parts.append(_leb128_block(arr) if arch.ft_compression == "leb128"
                     else np.ascontiguousarray(arr, dtype=dt).tobytes())
    for b in range(arch.output_buckets):
        parts.append(struct.pack("<I", sh))
        for w, bias in zip(network.layer_weights, network.layer_biases):
            parts.append(np.ascontiguousarray(bias[b], dtype="<i4").tobytes())
            parts.append(np.ascontiguousarray(w[b], dtype="i1").tobytes())
    return b"".join(parts)


def write_stockfish(network: Network, path: str | os.PathLike[str]) -> None:
    """Write ``network`` as a Stockfish ``.nnue`` file: the header version and feature-transformer
    storage (raw or LEB128, shortest form as Stockfish writes it) its architecture records, so a
    network read from a ``.nnue`` file is written back byte for byte.

    Raises ``ValueError`` if the architecture is not a Stockfish one (:func:`is_stockfish_architecture`).
    """
    data = stockfish_bytes(network)
    with open(path, "wb") as f:
        f.write(data)

"""Explicit SIMD for the Numba kernels: short integer vectors and the dot-product instructions
LLVM does not produce from loops (AVX-512 VNNI / AVX-VNNI ``vpdpbusd``, AVX2 ``vpmaddubsw`` +
``vpmaddwd``), and the choice of instruction set.

**Instruction set.**  :data:`ISA` is chosen once, on first use (reading ``simd.ISA``), from the
features of the CPU Numba compiles for (``vnni512`` > ``avxvnni`` > ``avx2`` > ``portable``), or
forced with the environment variable ``NNUE_INFER_SIMD`` (one of :data:`ISA_NAMES`, a path this
CPU has).  An unknown name, or a path whose instructions the CPU lacks, is a
:class:`~nnue_infer.errors.SimdPathError` naming the valid values and the missing features,
raised where the path is first needed (creating an evaluator), not at import: ``import
nnue_infer`` and ``nnue-infer --help`` work whatever the variable says.  ``ISA`` is *data*, not a
compile-time constant: the callers put it into the int64 parameters they pass to the kernels
(``forward.P_SIMD``), and the kernels branch on it.  So one compiled (and ``cache=True``-cached)
kernel holds every path, and a kernel cached under one choice is never reused for another.
Under ``NUMBA_DISABLE_JIT`` the path is ``portable`` (the intrinsics exist only compiled).

**Portability.**  Every intrinsic here emits the x86 instruction only when the compilation
target has the feature; otherwise it emits the same arithmetic in generic LLVM vector IR
(bit-identical, including ``vpmaddubsw``'s int16 saturation), which compiles on any CPU
(x86-64 without AVX2, ARM); ``tests/kernels/test_simd.py`` checks that emulation of every
intrinsic on any machine.  The kernels compile only the paths the target CPU has
(:data:`TARGET_AVX2`, ...), which is why a path the CPU lacks cannot be forced.  ``portable``
is the plain-loop path of every kernel.

**Vectors.**  ``I16x16``, ``I16x64`` (16 / 64 int16 lanes), ``I32x8`` and ``I32x16`` are Numba types held in
registers (LLVM vectors); they are created, combined and stored only through the intrinsics
below; LLVM splits a vector wider than the CPU's registers (``I16x64``: 4 ymm or 2 zmm).  Arrays are addressed as ``(array, flat element index)``; the arrays must be
C-contiguous and the index in bounds (nothing is checked: these are the kernels' internals).

Sources: Intel's intrinsics guide (``_mm512_dpbusd_epi32``, ``_mm256_maddubs_epi16``,
``_mm256_madd_epi16``) and LLVM's ``llvm.x86.*`` intrinsic signatures.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import config as numba_config
from numba.core import cgutils
from numba.extending import intrinsic, models, overload, register_model

from ..errors import SimdPathError, quote

#: Instruction-set paths, in order of preference (codes stored in ``forward.P_SIMD``).
ISA_PORTABLE, ISA_AVX2, ISA_AVXVNNI, ISA_VNNI512 = 0, 1, 2, 3
ISA_NAMES = ("portable", "avx2", "avxvnni", "vnni512")
#: The environment variable that forces a path.
ENV_VAR = "NNUE_INFER_SIMD"

#: CPU features each path needs natively (otherwise its instructions are emulated).
_NEEDS = {
    ISA_AVX2: ("avx2",),
    ISA_AVXVNNI: ("avx2", "avxvnni"),
    ISA_VNNI512: ("avx2", "avx512f", "avx512bw", "avx512vl", "avx512vnni"),
}


def target_features() -> frozenset[str]:
    """Features (``avx2``, ``avx512vnni``, ...) of the CPU Numba compiles for (host by default)."""
    from numba.core.registry import cpu_target

    feats = cpu_target.target_context.codegen()._tm_features or ""
    return frozenset(f[1:] for f in feats.split(",") if f.startswith("+"))


def native_isas(features: frozenset[str] | None = None) -> tuple[int, ...]:
    """The paths whose instructions the CPU has (``ISA_PORTABLE`` always), best last."""
    features = target_features() if features is None else features
    return (ISA_PORTABLE,) + tuple(isa for isa, needs in _NEEDS.items() if all(f in features for f in needs))


def select_isa(environ=os.environ, features: frozenset[str] | None = None) -> int:
    """The path to use: ``NNUE_INFER_SIMD`` if set, else the best native one.

    Parameters
    ----------
    environ : mapping
        Where ``NNUE_INFER_SIMD`` is read (the process's environment by default).
    features : frozenset of str, optional
        The CPU's features (:func:`target_features` by default).

    Raises
    ------
    SimdPathError
        For an unknown name (the valid values are listed) or a path this CPU lacks (the missing
        features are named).
    """
    return path_code(environ.get(ENV_VAR, ""), features, ENV_VAR, "unset it for the best")


def path_code(name: str | None, features: frozenset[str] | None = None, label: str = "isa",
              hint: str = "leave it out for the best") -> int:
    """The code (``ISA_*``) of the path called ``name`` (one of :data:`ISA_NAMES`, any case, white
    space around it ignored), or of the best native path when ``name`` is ``None`` or empty;
    ``ISA_PORTABLE`` under ``NUMBA_DISABLE_JIT`` (the intrinsics exist only compiled).

    Raises
    ------
    SimdPathError
        For an unknown name (the valid values are listed) or a path this CPU lacks (the missing
        features are named), the message starting ``{label}='{name}'`` and ending with ``hint``.
    """
    forced = (name or "").strip().lower()
    if numba_config.DISABLE_JIT:  # the kernels run as Python: intrinsics do not exist then
        return ISA_PORTABLE
    features = target_features() if features is None else features
    native = native_isas(features)
    if not forced:
        return native[-1]
    runs = ", ".join(ISA_NAMES[i] for i in native)
    if forced not in ISA_NAMES:
        raise SimdPathError(f"{label}={quote(forced)}: expected one of {', '.join(ISA_NAMES)} "
                            f"(this CPU runs {runs}; {hint})")
    isa = ISA_NAMES.index(forced)
    if isa not in native:
        missing = ", ".join(f for f in _NEEDS[isa] if f not in features)
        raise SimdPathError(f"{label}={quote(forced)}: this CPU lacks {missing} (it runs {runs}; {hint})")
    return isa


def __getattr__(name: str):
    """:data:`ISA` on first use (PEP 562): a bad ``NNUE_INFER_SIMD`` raises there, not at import."""
    if name == "ISA":
        globals()["ISA"] = isa = select_isa()
        return isa
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Compile-time facts about the target CPU, frozen into the compiled kernels so that paths it
#: lacks are not compiled at all (their emulation is slow to compile).  Numba's cache key
#: includes the target CPU's name and features, so a cache built on one CPU is not reused on
#: another.
TARGET_AVX2 = ISA_AVX2 in native_isas()
TARGET_VNNI512 = ISA_VNNI512 in native_isas()
TARGET_VNNI256 = ISA_AVXVNNI in native_isas() or TARGET_VNNI512  # vpdpbusd ymm: AVX-VNNI or AVX-512 VNNI + VL
#: Byte alignment of the arrays the SIMD kernels stream through (a cache line).  A 32-byte load
#: from a row that starts 16 bytes into a line (where NumPy's large allocations start) crosses
#: into the next line every other time: Stockfish 15.1's quiet-move update 44 ns with 64-byte
#: aligned rows and accumulators, 59 ns with both 16 bytes off (AVX2, thread CPU).
ALIGNMENT = 64


def aligned_empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` starting on an :data:`ALIGNMENT`-byte boundary (C-contiguous, writeable)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned_zeros(shape, dtype) -> np.ndarray:
    """``np.zeros(shape, dtype)`` starting on an :data:`ALIGNMENT`-byte boundary (C-contiguous, writeable)."""
    out = aligned_empty(shape, dtype)
    out[...] = 0
    return out


def aligned(arr: np.ndarray) -> np.ndarray:
    """``arr`` if C-contiguous, writeable and :data:`ALIGNMENT`-aligned, else such a copy."""
    if arr.flags.c_contiguous and arr.flags.writeable and arr.ctypes.data % ALIGNMENT == 0:
        return arr
    out = aligned_empty(arr.shape, arr.dtype)
    out[...] = arr
    return out


#: First-layer path of AVX2 for input bytes up to 255 whatever the weights: each byte split into
#: its top bit and its low 7 bits, one ``vpmaddubsw`` for each (neither can saturate).
FC0_AVX2_WIDE = 4
#: First-layer path of AVX2 for layers whose int16 sums of four products cannot overflow: the
#: ``vpmaddubsw`` results of two input blocks added in int16 (``vpaddw``) before one ``vpmaddwd``
#: (three multiplies per two blocks instead of four; Stockfish's ``m256_add_dpbusd_epi32x2``).
FC0_AVX2_PAIRED = 5
#: The largest |sum of two products| ``vpmaddubsw`` returns exactly (int16 saturation).
MADDUBS_LIMIT = 32767


def first_layer_isa(isa: int, max_input: int, max_pair: int, max_quad: int = 1 << 16) -> int:
    """The path of the first dense layer: ``isa``, or on AVX2 ``FC0_AVX2_PAIRED`` where int16
    sums of four products cannot overflow and ``FC0_AVX2_WIDE`` where ``vpmaddubsw`` could saturate.

    Parameters
    ----------
    isa : int
        The process's path (``ISA_*``).
    max_input : int
        Largest input byte (0..255) the layer reads: the activation's largest output, plus 128
        for signed activations, whose bytes are stored offset by 128 (``kernels.nnue.activation.ft_transform``).
    max_pair : int
        Largest ``|w[o, 2j]| + |w[o, 2j + 1]|`` of the layer's int8 weights over buckets,
        outputs o and input pairs j (``Network.first_layer_pair_sum``): the two products
        ``vpmaddubsw`` adds in int16.
    max_quad : int
        Largest sum of the |weights| of the four products ``FC0_AVX2_PAIRED`` adds in one int16
        lane (``Network.first_layer_quad_sum``; the default: never).

    ``vpmaddubsw`` is exact when ``max_input * max_pair <= 32767`` (always for inputs up to 127:
    127 * 256 = 32512), and adding two of its results in int16 when ``max_input * max_quad <=
    32767`` (Stockfish 15.1's fc_0: 126 * 227); otherwise AVX2 takes ``FC0_AVX2_WIDE``, which is
    exact for every input and weight.  VNNI's ``vpdpbusd`` sums in int32 and the plain loops in
    int64: exact for all.
    """
    if isa == ISA_AVX2 and max_input * max_quad <= MADDUBS_LIMIT:
        return FC0_AVX2_PAIRED
    if isa == ISA_AVX2 and max_input * max_pair > MADDUBS_LIMIT:
        return FC0_AVX2_WIDE
    return isa


# ---------------------------------------------------------------------------------------------
# Vector types
class IntVector(types.Type):
    """A vector of ``lanes`` signed integers of ``bits`` bits, held in a register."""

    def __init__(self, bits: int, lanes: int) -> None:
        self.bits = bits
        self.lanes = lanes
        super().__init__(name=f"i{bits}x{lanes}")


@register_model(IntVector)
class _IntVectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(ir.IntType(fe_type.bits), fe_type.lanes))


I16x16 = IntVector(16, 16)
I16x64 = IntVector(16, 64)
I32x8 = IntVector(32, 8)
I32x16 = IntVector(32, 16)

_I8, _I16, _I32, _I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)


def _vec(bits: int, lanes: int) -> ir.VectorType:
    return ir.VectorType(ir.IntType(bits), lanes)


def _has(context, *features: str) -> bool:
    """Whether the compilation target has all ``features`` (checked when the IR is generated)."""
    feats = context.codegen()._tm_features or ""
    return all(f"+{f}" in feats.split(",") for f in features)


def _element_ptr(context, builder, arrty, arr, index, vecty):
    """Pointer (typed as ``vecty*``) to element ``index`` of the C-contiguous array ``arr``."""
    ary = context.make_array(arrty)(context, builder, arr)
    ptr = builder.gep(ary.data, [index])
    return builder.bitcast(ptr, vecty.as_pointer())


def _is_array(t, bits=None) -> bool:
    return (isinstance(t, types.Array) and t.layout == "C" and isinstance(t.dtype, types.Integer)
            and (bits is None or t.dtype.bitwidth == bits))


def _splat(builder, value, vecty):
    """``vecty`` with every lane ``value`` (an LLVM scalar of the lane type)."""
    undef = ir.Constant(vecty, ir.Undefined)
    v = builder.insert_element(undef, value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, undef, ir.Constant(_vec(32, vecty.count), [0] * vecty.count))


def _lanes(builder, v, idx):
    """Lanes ``idx`` of vector ``v`` (a shuffle)."""
    return builder.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), ir.Constant(_vec(32, len(idx)), list(idx)))


def _as_i16(builder, v):
    """An LLVM integer scalar converted to i16 (truncated or sign-extended)."""
    if v.type.width > 16:
        return builder.trunc(v, _I16)
    return builder.sext(v, _I16) if v.type.width < 16 else v


def _call(builder, name, ret, args):
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, [a.type for a in args]), name)
    return builder.call(fn, args)


def _dot4_generic(builder, acc, xb, wb):
    """``acc[i] += sum_k u8(xb[4i+k]) * i8(wb[4i+k])`` in generic IR (``vpdpbusd``'s definition)."""
    n = acc.type.count
    prods = builder.mul(builder.zext(xb, _vec(32, 4 * n)), builder.sext(wb, _vec(32, 4 * n)))
    for k in range(4):
        acc = builder.add(acc, _lanes(builder, prods, range(k, 4 * n, 4)))
    return acc


def _maddubs_generic(builder, xb, wb):
    """AVX2 ``maddubs(xb, wb)`` in generic IR: pairs of u8*i8 products summed with int16
    saturation (``xb``, ``wb``: 32 bytes; 16 int16 lanes)."""
    prods = builder.mul(builder.zext(xb, _vec(32, 32)), builder.sext(wb, _vec(32, 32)))
    pairs = builder.add(_lanes(builder, prods, range(0, 32, 2)), _lanes(builder, prods, range(1, 32, 2)))
    lo = ir.Constant(_vec(32, 16), [-32768] * 16)
    hi = ir.Constant(_vec(32, 16), [32767] * 16)
    pairs = builder.select(builder.icmp_signed("<", pairs, lo), lo, pairs)
    pairs = builder.select(builder.icmp_signed(">", pairs, hi), hi, pairs)
    return builder.trunc(pairs, _vec(16, 16))


def _maddubs_madd_generic(builder, acc, xb, wb):
    """AVX2 ``acc + madd(maddubs(xb, wb), 1)`` in generic IR (8 int32 lanes): pairs of u8*i8
    products summed with int16 saturation, then pairs of those summed into int32."""
    pairs = builder.sext(_maddubs_generic(builder, xb, wb), _vec(32, 16))
    return builder.add(acc, builder.add(_lanes(builder, pairs, range(0, 16, 2)), _lanes(builder, pairs, range(1, 16, 2))))


def _dot4_operands(context, builder, sig, args, lanes):
    """Broadcast 4 input bytes ``x[xi:xi+4]`` and load ``4 * lanes`` weight bytes ``w[wi:]``."""
    _, xty, _, wty, _ = sig.args
    _, x, xi, w, wi = args
    x4 = builder.load(_element_ptr(context, builder, xty, x, xi, _I32), align=1)
    xb = builder.bitcast(_splat(builder, x4, _vec(32, lanes)), _vec(8, 4 * lanes))
    wb = builder.load(_element_ptr(context, builder, wty, w, wi, _vec(8, 4 * lanes)), align=1)
    return xb, wb


def _dpbusd_zmm(context, builder, acc, xb, wb):
    """``acc`` (16 int32 lanes) plus, per lane, the sum of its 4 u8 x i8 products of ``xb`` and ``wb``
    (64 bytes each): one ``vpdpbusd zmm`` where the target has AVX-512 VNNI, generic IR otherwise."""
    if _has(context, "avx512f", "avx512vnni"):
        v32 = _vec(32, 16)
        return _call(builder, "llvm.x86.avx512.vpdpbusd.512", v32,
                     [acc, builder.bitcast(xb, v32), builder.bitcast(wb, v32)])
    return _dot4_generic(builder, acc, xb, wb)


def _check_dot4(acc, x, xi, w, wi, vt):
    return (acc == vt and _is_array(x, 8) and isinstance(xi, types.Integer) and _is_array(w, 8)
            and isinstance(wi, types.Integer))


# ---------------------------------------------------------------------------------------------
# Dot products of 4-byte blocks (the dense layers)
@intrinsic
def dot4_vnni512(typingctx, acc, x, xi, w, wi):
    """``acc[i] += sum_k x[xi + k] * w[wi + 4*i + k]`` for 16 int32 lanes i (k < 4).

    x uint8 (its 4 bytes broadcast to every lane), w int8 (64 bytes); int32 sums wrap.  One
    ``vpdpbusd zmm`` where the target has AVX-512 VNNI, the same arithmetic otherwise.
    """
    if not _check_dot4(acc, x, xi, w, wi, I32x16):
        return None

    def codegen(context, builder, sig, args):
        xb, wb = _dot4_operands(context, builder, sig, args, 16)
        return _dpbusd_zmm(context, builder, args[0], xb, wb)

    return I32x16(acc, x, xi, w, wi), codegen


@intrinsic
def dot64_vnni512(typingctx, acc, x, xi, w, wi):
    """``acc[i] += sum_k x[xi + 4*i + k] * w[wi + 4*i + k]`` for 16 int32 lanes i (k < 4): 64
    input bytes against 64 weight bytes, lane by lane (no broadcast; a row-major weight row, see
    ``dense.affine_rows_zmm``).  x uint8, w int8; int32 sums wrap.  One ``vpdpbusd zmm`` where
    the target has AVX-512 VNNI, the same arithmetic otherwise."""
    if not _check_dot4(acc, x, xi, w, wi, I32x16):
        return None

    def codegen(context, builder, sig, args):
        _, xty, _, wty, _ = sig.args
        v8 = _vec(8, 64)
        xb = builder.load(_element_ptr(context, builder, xty, args[1], args[2], v8), align=1)
        wb = builder.load(_element_ptr(context, builder, wty, args[3], args[4], v8), align=1)
        return _dpbusd_zmm(context, builder, args[0], xb, wb)

    return I32x16(acc, x, xi, w, wi), codegen


@intrinsic
def hsum16_i32x16(typingctx, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    """The 16 lane sums of 16 ``I32x16`` vectors, lane o of the result = sum of the lanes of ``a_o``
    (wrapping int32): a transposing tree of shuffles and adds (pairs of vectors, then pairs of
    those, ...: 15 steps of two shuffles and an add), generic vector IR on every target."""
    if not all(a == I32x16 for a in (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)):
        return None

    def codegen(context, builder, sig, args):
        vs = list(args)
        size = 1
        while len(vs) > 1:  # blocks of ``size`` lanes: [v.b0, w.b0, v.b2, w.b2, ..] + [v.b1, w.b1, v.b3, w.b3, ..]
            lo, hi = [], []
            for b in range(0, 16 // size, 2):
                lo += [b * size + i for i in range(size)] + [16 + b * size + i for i in range(size)]
                hi += [(b + 1) * size + i for i in range(size)] + [16 + (b + 1) * size + i for i in range(size)]
            mask_lo, mask_hi = ir.Constant(_vec(32, 16), lo), ir.Constant(_vec(32, 16), hi)
            vs = [builder.add(builder.shuffle_vector(v, w, mask_lo), builder.shuffle_vector(v, w, mask_hi))
                  for v, w in zip(vs[0::2], vs[1::2])]
            size *= 2
        return vs[0]

    return I32x16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15), codegen


@intrinsic
def dot_u8i8x32(typingctx, x, xi, w, wi):
    """``sum_k x[xi + k] * w[wi + k]`` over 32 bytes (x uint8, w int8) as a wrapping int32: a
    32-lane product and a vector sum (generic IR on every target: LLVM picks the instructions)."""
    if not (_is_array(x, 8) and _is_array(w, 8) and isinstance(xi, types.Integer) and isinstance(wi, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        xty, _, wty, _ = sig.args
        xb = builder.load(_element_ptr(context, builder, xty, args[0], args[1], _vec(8, 32)), align=1)
        wb = builder.load(_element_ptr(context, builder, wty, args[2], args[3], _vec(8, 32)), align=1)
        p = builder.mul(builder.zext(xb, _vec(32, 32)), builder.sext(wb, _vec(32, 32)))
        return _call(builder, "llvm.vector.reduce.add.v32i32", _I32, [p])

    return types.int32(x, xi, w, wi), codegen


@intrinsic
def nnz_blocks16(typingctx, x, xi, nnz, ni, base):
    """Of the 16 four-byte blocks of ``x`` (uint8) at byte ``xi``, append the numbers ``base + j`` of the
    non-zero ones to ``nnz`` (int32) at ``ni``, in order; returns how many (int64).  A vector compare
    and a compressing store (``vpcompressd`` with AVX-512; LLVM expands it elsewhere); ``nnz`` needs
    room for 16 entries at ``ni`` (all 16 lanes may be written on other targets)."""
    if not (_is_array(x, 8) and _is_array(nnz, 32) and isinstance(xi, types.Integer)
            and isinstance(ni, types.Integer) and isinstance(base, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        xty, _, nty, _, bty = sig.args
        x, xi, nnz, ni, base = args
        v32 = _vec(32, 16)
        words = builder.load(_element_ptr(context, builder, xty, x, xi, v32), align=1)
        mask = builder.icmp_unsigned("!=", words, ir.Constant(v32, [0] * 16))
        first = builder.trunc(base, _I32) if bty.bitwidth > 32 else base
        values = builder.add(_splat(builder, first, v32), ir.Constant(v32, list(range(16))))
        dest = builder.bitcast(_element_ptr(context, builder, nty, nnz, ni, v32), _I32.as_pointer())
        _call(builder, "llvm.masked.compressstore.v16i32", ir.VoidType(), [values, dest, mask])
        bits = builder.zext(builder.bitcast(mask, _I16), ir.IntType(64))
        return _call(builder, "llvm.ctpop.i64", ir.IntType(64), [bits])

    return types.int64(x, xi, nnz, ni, base), codegen


@intrinsic
def dot4_avxvnni(typingctx, acc, x, xi, w, wi):
    """As :func:`dot4_vnni512` for 8 int32 lanes (32 weight bytes): one ``vpdpbusd ymm``
    (AVX-VNNI, or AVX-512 VNNI + VL) where the target has it, the same arithmetic otherwise."""
    if not _check_dot4(acc, x, xi, w, wi, I32x8):
        return None

    def codegen(context, builder, sig, args):
        xb, wb = _dot4_operands(context, builder, sig, args, 8)
        if _has(context, "avxvnni") or _has(context, "avx512vnni", "avx512vl"):
            v32 = _vec(32, 8)
            return _call(builder, "llvm.x86.avx512.vpdpbusd.256", v32,
                         [args[0], builder.bitcast(xb, v32), builder.bitcast(wb, v32)])
        return _dot4_generic(builder, args[0], xb, wb)

    return I32x8(acc, x, xi, w, wi), codegen


@intrinsic
def dot4_avx2(typingctx, acc, x, xi, w, wi):
    """As :func:`dot4_avxvnni` with AVX2's ``vpmaddubsw`` + ``vpmaddwd`` (by ones) + ``vpaddd``.

    ``vpmaddubsw`` saturates the sum of two products to int16: exact (equal to the other
    paths) only while ``x <= 127`` (|sum| <= 2 * 127 * 128 < 32768); callers use it only then.
    """
    if not _check_dot4(acc, x, xi, w, wi, I32x8):
        return None

    def codegen(context, builder, sig, args):
        xb, wb = _dot4_operands(context, builder, sig, args, 8)
        if _has(context, "avx2"):
            v16 = _vec(16, 16)
            t = _call(builder, "llvm.x86.avx2.pmadd.ub.sw", v16, [xb, wb])
            ones = ir.Constant(v16, [1] * 16)
            return builder.add(args[0], _call(builder, "llvm.x86.avx2.pmadd.wd", _vec(32, 8), [t, ones]))
        return _maddubs_madd_generic(builder, args[0], xb, wb)

    return I32x8(acc, x, xi, w, wi), codegen


@intrinsic
def dot4_avx2_wide(typingctx, acc, x, xi, w, wi):
    """As :func:`dot4_avx2`, exact for every input byte (0..255) and weight: AVX2 without saturation.

    Each broadcast input byte u is split as ``u = 128 * (u >> 7) + (u & 127)``; ``vpmaddubsw`` of
    the low 7 bits (pairs at most 2 * 127 * 128 = 32512) and of the top bits (at most 256) cannot
    saturate; ``vpmaddwd`` sums each into int32, the top bits' by 128.  Two multiplies per
    block instead of one: the first layer's path when :func:`dot4_avx2` could saturate
    (``FC0_AVX2_WIDE``, see :func:`first_layer_isa`).  Same arithmetic as ``vpdpbusd`` where the
    target lacks AVX2.
    """
    if not _check_dot4(acc, x, xi, w, wi, I32x8):
        return None

    def codegen(context, builder, sig, args):
        xb, wb = _dot4_operands(context, builder, sig, args, 8)
        if not _has(context, "avx2"):
            return _dot4_generic(builder, args[0], xb, wb)
        v8, v16, v32 = _vec(8, 32), _vec(16, 16), _vec(32, 8)
        x4 = builder.load(_element_ptr(context, builder, sig.args[1], args[1], args[2], _I32), align=1)
        low = builder.bitcast(_splat(builder, builder.and_(x4, ir.Constant(_I32, 0x7F7F7F7F)), v32), v8)
        top = builder.bitcast(_splat(builder, builder.and_(builder.lshr(x4, ir.Constant(_I32, 7)),
                                                           ir.Constant(_I32, 0x01010101)), v32), v8)
        t_low = _call(builder, "llvm.x86.avx2.pmadd.ub.sw", v16, [low, wb])
        t_top = _call(builder, "llvm.x86.avx2.pmadd.ub.sw", v16, [top, wb])
        s_low = _call(builder, "llvm.x86.avx2.pmadd.wd", v32, [t_low, ir.Constant(v16, [1] * 16)])
        s_top = _call(builder, "llvm.x86.avx2.pmadd.wd", v32, [t_top, ir.Constant(v16, [128] * 16)])
        return builder.add(args[0], builder.add(s_low, s_top))

    return I32x8(acc, x, xi, w, wi), codegen


@intrinsic
def dot4x2_avx2(typingctx, acc, x, xi, xj, w, wi, wj):
    """Two 4-byte input blocks into 8 int32 lanes: ``vpmaddubsw`` of each (``x[xi:xi+4]`` against
    ``w[wi:wi+32]``, ``x[xj:xj+4]`` against ``w[wj:wj+32]``), the two results added in int16
    (``vpaddw``, wrapping), one ``vpmaddwd`` by ones, added to ``acc``.

    Equal to two :func:`dot4_avx2` when no int16 sum of four products overflows (the caller
    checks the weights: ``first_layer_isa``'s ``FC0_AVX2_PAIRED``).  The same saturating and
    wrapping arithmetic where the target lacks AVX2.
    """
    if not (acc == I32x8 and _is_array(x, 8) and _is_array(w, 8)
            and all(isinstance(t, types.Integer) for t in (xi, xj, wi, wj))):
        return None

    def codegen(context, builder, sig, args):
        _, xty, _, _, wty, _, _ = sig.args
        acc_, x_, xi_, xj_, w_, wi_, wj_ = args
        v8, v16, v32 = _vec(8, 32), _vec(16, 16), _vec(32, 8)

        def operands(i, j):
            x4 = builder.load(_element_ptr(context, builder, xty, x_, i, _I32), align=1)
            xb = builder.bitcast(_splat(builder, x4, v32), v8)
            return xb, builder.load(_element_ptr(context, builder, wty, w_, j, v8), align=1)

        (xa, wa), (xb, wb) = operands(xi_, wi_), operands(xj_, wj_)
        if _has(context, "avx2"):
            t = builder.add(_call(builder, "llvm.x86.avx2.pmadd.ub.sw", v16, [xa, wa]),
                            _call(builder, "llvm.x86.avx2.pmadd.ub.sw", v16, [xb, wb]))
            return builder.add(acc_, _call(builder, "llvm.x86.avx2.pmadd.wd", v32, [t, ir.Constant(v16, [1] * 16)]))
        t = builder.add(_maddubs_generic(builder, xa, wa), _maddubs_generic(builder, xb, wb))
        t32 = builder.sext(t, _vec(32, 16))
        return builder.add(acc_, builder.add(_lanes(builder, t32, range(0, 16, 2)), _lanes(builder, t32, range(1, 16, 2))))

    return I32x8(acc, x, xi, xj, w, wi, wj), codegen


def address_pointer(address, dtype):
    """``(dtype *) address``: an int64 address as a typed pointer, for ``numba.carray``.

    Compiled: one ``inttoptr`` (:func:`_address_pointer`, inlined).  Plain Python
    (``NUMBA_DISABLE_JIT``): the same pointer as a ``ctypes`` pointer, which ``numba.carray``
    also takes.
    """
    return ctypes.cast(int(address), ctypes.POINTER(np.ctypeslib.as_ctypes_type(np.dtype(dtype))))


@intrinsic
def _address_pointer(typingctx, address, dtype):
    """The compiled :func:`address_pointer`."""
    if not isinstance(address, types.Integer) or not isinstance(dtype, types.NumberClass):
        return None
    ptr = types.CPointer(dtype.instance_type)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(ptr))

    return ptr(address, dtype), codegen


@overload(address_pointer, inline="always")
def _address_pointer_overload(address, dtype):
    if isinstance(address, types.Integer) and isinstance(dtype, types.NumberClass):
        return lambda address, dtype: _address_pointer(address, dtype)
    return None


def data_pointer(arr, dtype):
    """``(dtype *) arr.data``: the first element of the C-contiguous array ``arr`` as a pointer to
    ``dtype``, for ``numba.carray``: a view of the same memory as another type that, unlike
    ``arr.view``, divides nothing at run time and holds no reference (the caller keeps ``arr``
    alive while the view is used).

    Compiled: a bitcast of the array's data pointer (:func:`_data_pointer`, inlined).  Plain
    Python (``NUMBA_DISABLE_JIT``): :func:`address_pointer` of ``arr.ctypes.data``.
    """
    return address_pointer(arr.ctypes.data, dtype)


@intrinsic
def _data_pointer(typingctx, arr, dtype):
    """The compiled :func:`data_pointer`."""
    if not (_is_array(arr) and isinstance(dtype, types.NumberClass)):
        return None
    ptr = types.CPointer(dtype.instance_type)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.bitcast(ary.data, context.get_value_type(ptr))

    return ptr(arr, dtype), codegen


@overload(data_pointer, inline="always")
def _data_pointer_overload(arr, dtype):
    if _is_array(arr) and isinstance(dtype, types.NumberClass):
        return lambda arr, dtype: _data_pointer(arr, dtype)
    return None


# ---------------------------------------------------------------------------------------------
# Loads, stores, arithmetic
def _make_load(vt):
    @intrinsic
    def load(typingctx, arr, i):
        if not (_is_array(arr, vt.bits) and isinstance(i, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            lty = _vec(vt.bits, vt.lanes)
            return builder.load(_element_ptr(context, builder, sig.args[0], args[0], args[1], lty), align=1)

        return vt(arr, i), codegen

    load.__doc__ = f"Load {vt.lanes} int{vt.bits} lanes from ``arr[i:i + {vt.lanes}]`` (C-contiguous int{vt.bits} array)."
    return load


def _make_store(vt):
    @intrinsic
    def store(typingctx, arr, i, v):
        if not (_is_array(arr, vt.bits) and isinstance(i, types.Integer) and v == vt):
            return None

        def codegen(context, builder, sig, args):
            lty = _vec(vt.bits, vt.lanes)
            builder.store(args[2], _element_ptr(context, builder, sig.args[0], args[0], args[1], lty), align=1)
            return context.get_dummy_value()

        return types.none(arr, i, v), codegen

    store.__doc__ = f"Store {vt.lanes} int{vt.bits} lanes to ``arr[i:i + {vt.lanes}]``."
    return store


def _make_binary(vt, op):
    @intrinsic
    def binary(typingctx, a, b):
        if not (a == vt and b == vt):
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, op)(args[0], args[1])

        return vt(a, b), codegen

    binary.__doc__ = f"Lane-wise wrapping {op} of two {vt}."
    return binary


def _make_zero(vt):
    @intrinsic
    def zero(typingctx):
        def codegen(context, builder, sig, args):
            return ir.Constant(_vec(vt.bits, vt.lanes), [0] * vt.lanes)

        return vt(), codegen

    zero.__doc__ = f"{vt} of zeros."
    return zero


load_i16x16, store_i16x16 = _make_load(I16x16), _make_store(I16x16)
load_i16x64, store_i16x64 = _make_load(I16x64), _make_store(I16x64)
add_i16x64, sub_i16x64 = _make_binary(I16x64, "add"), _make_binary(I16x64, "sub")
load_i32x8, store_i32x8 = _make_load(I32x8), _make_store(I32x8)
load_i32x16, store_i32x16 = _make_load(I32x16), _make_store(I32x16)
add_i16x16, sub_i16x16 = _make_binary(I16x16, "add"), _make_binary(I16x16, "sub")
add_i32x8, add_i32x16 = _make_binary(I32x8, "add"), _make_binary(I32x16, "add")
sub_i32x8 = _make_binary(I32x8, "sub")
zero_i32x8, zero_i32x16 = _make_zero(I32x8), _make_zero(I32x16)


@intrinsic
def pairwise_u8x32(typingctx, acc, ia, ib, clamp_max, shift, out, io):
    """``out[io + j] = (clamp(acc[ia + j], 0, M) * clamp(acc[ib + j], 0, M)) >> shift`` for j < 32.

    ``acc`` int16 (any number of dimensions, C-contiguous: flat indices), ``out`` uint8 (or
    int8); the clamps, product and logical shift run in 16-bit lanes (two 256-bit registers),
    exact for ``M <= 255`` (the product is below 2**16) when the result fits 8 bits; one
    32-byte store.  The narrowing is AVX2's ``vpackuswb`` (+ ``vpermq`` for its lane order)
    where the target has it: equal to truncation for results within 255, without the masking
    a truncation needs when the compiler cannot bound them (a run-time shift).  With
    ``clamp_max`` and ``shift`` compile-time constants the splats fold into the instructions.
    """
    if not (_is_array(acc, 16) and _is_array(out, 8) and all(isinstance(t, types.Integer)
                                                              for t in (ia, ib, clamp_max, shift, io))):
        return None

    def codegen(context, builder, sig, args):
        accty, _, _, mty, sty, outty, _ = sig.args
        acc_, ia_, ib_, m_, s_, out_, io_ = args
        v16 = _vec(16, 32)
        zero = ir.Constant(v16, [0] * 32)
        m = _splat(builder, _as_i16(builder, m_), v16)
        s = _splat(builder, _as_i16(builder, s_), v16)

        def clamped(i):
            v = builder.load(_element_ptr(context, builder, accty, acc_, i, v16), align=1)
            v = builder.select(builder.icmp_signed("<", v, zero), zero, v)
            return builder.select(builder.icmp_signed(">", v, m), m, v)

        prod = builder.lshr(builder.mul(clamped(ia_), clamped(ib_)), s)
        if _has(context, "avx2"):
            halves = [_lanes(builder, prod, range(0, 16)), _lanes(builder, prod, range(16, 32))]
            packed = _call(builder, "llvm.x86.avx2.packuswb", _vec(8, 32), halves)
            # vpackuswb packs per 128-bit lane: 8-byte groups [a0-7, b0-7, a8-15, b8-15] -> a, then b
            narrow = _lanes(builder, builder.bitcast(packed, _vec(64, 4)), (0, 2, 1, 3))
            narrow = builder.bitcast(narrow, _vec(8, 32))
        else:
            narrow = builder.trunc(prod, _vec(8, 32))
        builder.store(narrow, _element_ptr(context, builder, outty, out_, io_, _vec(8, 32)), align=1)
        return context.get_dummy_value()

    return types.none(acc, ia, ib, clamp_max, shift, out, io), codegen


#: The offset of signed (int8) first-layer inputs in their bytes: x is stored as the uint8 x + 128.
SIGNED_INPUT_OFFSET = 128


@intrinsic
def gated_u8x32(typingctx, acc, ia, ib, lo_a, lo_b, clamp_max, shift, out, io):
    """``out[io + j] = ((clamp(acc[ia + j], lo_a, M) * clamp(acc[ib + j], lo_b, M)) >> shift) + 128``
    for j < 32: a signed gated product (``glu``: lo_a = 0, lo_b = -M; ``bilinear``: both -M) as
    its byte offset by 128 (:data:`SIGNED_INPUT_OFFSET`).

    ``acc`` int16 (C-contiguous, any number of dimensions: ``ia``, ``ib`` are flat indices), ``out``
    uint8; the clamps, product and arithmetic shift (floor) run in 16-bit
    lanes: exact for ``M * M <= 32767`` (M <= 181), ``-M <= lo`` and ``shift <= 15``, when the
    result lies in [-128, 127] (the caller checks these).
    """
    if not (_is_array(acc, 16) and _is_array(out, 8)
            and all(isinstance(t, types.Integer) for t in (ia, ib, lo_a, lo_b, clamp_max, shift, io))):
        return None

    def codegen(context, builder, sig, args):
        accty, outty = sig.args[0], sig.args[7]
        acc_, ia_, ib_, lo_a_, lo_b_, m_, s_, out_, io_ = args
        v16 = _vec(16, 32)
        m = _splat(builder, _as_i16(builder, m_), v16)

        def clamped(i, lo_):
            lo = _splat(builder, _as_i16(builder, lo_), v16)
            v = builder.load(_element_ptr(context, builder, accty, acc_, i, v16), align=1)
            v = builder.select(builder.icmp_signed("<", v, lo), lo, v)
            return builder.select(builder.icmp_signed(">", v, m), m, v)

        prod = builder.ashr(builder.mul(clamped(ia_, lo_a_), clamped(ib_, lo_b_)),
                            _splat(builder, _as_i16(builder, s_), v16))
        prod = builder.add(prod, ir.Constant(v16, [SIGNED_INPUT_OFFSET] * 32))
        builder.store(builder.trunc(prod, _vec(8, 32)), _element_ptr(context, builder, outty, out_, io_, _vec(8, 32)),
                      align=1)
        return context.get_dummy_value()

    return types.none(acc, ia, ib, lo_a, lo_b, clamp_max, shift, out, io), codegen


# ---------------------------------------------------------------------------------------------
# Hidden-layer activations, 8 int32 lanes to 8 bytes
def _check_act(z, zi, shift, out, oi):
    return (_is_array(z, 32) and _is_array(out, 8)
            and all(isinstance(t, types.Integer) for t in (zi, shift, oi)))


def _act_io(context, builder, sig, args):
    """The 8 int32 lanes ``z[zi:zi + 8]`` and a function storing 8 bytes at ``out[oi]``."""
    zty, _, _, outty, _ = sig.args
    z, zi, _, out, oi = args
    v = builder.load(_element_ptr(context, builder, zty, z, zi, _vec(32, 8)), align=1)

    def store(r):
        builder.store(builder.trunc(r, _vec(8, 8)), _element_ptr(context, builder, outty, out, oi, _vec(8, 8)),
                      align=1)
    return v, store


@intrinsic
def clipped_relu_u8x8(typingctx, z, zi, shift, out, oi):
    """ClippedReLU of 8 lanes: ``out[oi + j] = clamp(z[zi + j] >> shift, 0, 127)`` (arithmetic
    shift, ``shift`` < 32), z int32, out uint8; lane-parallel (``vpsrad``, ``vpmaxsd``,
    ``vpminsd``, packs)."""
    if not _check_act(z, zi, shift, out, oi):
        return None

    def codegen(context, builder, sig, args):
        v, store = _act_io(context, builder, sig, args)
        v32 = _vec(32, 8)
        s = _splat(builder, builder.trunc(args[2], _I32) if args[2].type.width > 32 else args[2], v32)
        v = builder.ashr(v, s)
        zero, top = ir.Constant(v32, [0] * 8), ir.Constant(v32, [127] * 8)
        v = builder.select(builder.icmp_signed("<", v, zero), zero, v)
        store(builder.select(builder.icmp_signed(">", v, top), top, v))
        return context.get_dummy_value()

    return types.none(z, zi, shift, out, oi), codegen


@intrinsic
def sqr_clipped_relu_u8x8(typingctx, z, zi, shift, out, oi):
    """SqrClippedReLU of 8 lanes: ``out[oi + j] = min((z[zi + j]**2) >> (2 * shift + 7), 127)``
    with the square in 64-bit lanes (exact for every int32; ``2 * shift + 7`` < 64)."""
    if not _check_act(z, zi, shift, out, oi):
        return None

    def codegen(context, builder, sig, args):
        v, store = _act_io(context, builder, sig, args)
        v64 = _vec(64, 8)
        w = builder.sext(v, v64)
        s = args[2] if args[2].type.width == 64 else builder.sext(args[2], _I64)
        s = builder.add(builder.mul(s, ir.Constant(_I64, 2)), ir.Constant(_I64, 7))
        sq = builder.lshr(builder.mul(w, w), _splat(builder, s, v64))  # a square is >= 0
        top = ir.Constant(v64, [127] * 8)
        store(builder.select(builder.icmp_unsigned(">", sq, top), top, sq))
        return context.get_dummy_value()

    return types.none(z, zi, shift, out, oi), codegen

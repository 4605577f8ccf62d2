"""Signed LEB128 decoding and encoding, as Stockfish compresses feature-transformer arrays.

One value: 7-bit groups, least significant first; bit ``0x80`` set on every byte but the
last; in the last byte bit ``0x40`` is the sign (the value is sign-extended from
``7 * bytes`` bits).  The encoder writes the shortest form: it stops at the first byte after
which the remaining value is 0 with ``0x40`` clear, or -1 with ``0x40`` set.

A block in a ``.nnue`` file is the 17 ASCII bytes ``COMPRESSED_LEB128``, a little-endian u32
byte count n, then n bytes holding exactly the expected number of values (the framing is read
and written by :mod:`nnue_infer.formats.stockfish`; these kernels see only the payload).

Source: Stockfish sf_16 .. sf_18, ``nnue/nnue_common.h`` (``read_leb_128``, ``write_leb_128``);
``shared/reference/stockfish-19-nnue.md`` section 2.1.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Status codes of :func:`decode_leb128` (first element of its result).
LEB128_OK = 0
LEB128_TRUNCATED = 1  #: the payload ended inside a value or before ``out`` was full
LEB128_OVERLONG = 2  #: a value's encoding is longer than ``max_bytes`` or its value leaves [lo, hi]
LEB128_TRAILING = 3  #: bytes were left over after the last expected value (byte count mismatch)


@njit(cache=True, inline="always")
def _decode(payload, out, lo, hi, max_bytes):
    """The body of :func:`decode_leb128` / :func:`decode_leb128_int16` (any integer ``out``)."""
    n = payload.shape[0]
    count = out.shape[0]
    pos = 0
    for i in range(count):
        start = pos
        result = np.int64(0)
        shift = 0
        while True:
            if pos >= n:
                return LEB128_TRUNCATED, i, start
            if shift >= 7 * max_bytes:
                return LEB128_OVERLONG, i, start
            byte = np.int64(payload[pos])
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if byte & 0x80 == 0:
                if byte & 0x40:
                    result -= np.int64(1) << shift
                break
        if result < lo or result > hi:
            return LEB128_OVERLONG, i, start
        out[i] = result
    if pos != n:
        return LEB128_TRAILING, count, pos
    return LEB128_OK, count, pos


@njit(cache=True)
def decode_leb128_int16(payload, out, lo, hi, max_bytes):
    """:func:`decode_leb128` into an int16 array (no int32 copy of a 69-million-value block)."""
    return _decode(payload, out, lo, hi, max_bytes)


@njit(cache=True)
def decode_leb128(payload, out, lo, hi, max_bytes):
    """Decode exactly ``out.shape[0]`` signed LEB128 values from ``payload``.

    Parameters
    ----------
    payload : uint8[n]
        The block's payload (the n bytes after magic and byte count).
    out : int32[count]
        Receives the values in order.
    lo, hi : int
        Allowed value range (e.g. -32768, 32767 for an int16 array).
    max_bytes : int
        Most bytes one value may take (3 for int16, 5 for int32 in Stockfish's 32-bit decoder).

    Returns
    -------
    (int, int, int)
        ``(status, value index, byte offset in payload)``: ``LEB128_OK`` with ``count`` and
        ``n``, or an error code with the index of the offending value and the offset where
        it starts (for ``LEB128_TRAILING``: the offset of the first unused byte).
    """
    return _decode(payload, out, lo, hi, max_bytes)


@njit(cache=True)
def leb128_size(values):
    """Bytes the shortest signed LEB128 encoding of ``values`` (int32[count]) takes."""
    total = 0
    for i in range(values.shape[0]):
        v = np.int64(values[i])
        while True:
            byte = v & 0x7F
            v >>= 7
            total += 1
            if (v == 0 and byte & 0x40 == 0) or (v == -1 and byte & 0x40 != 0):
                break
    return total


@njit(cache=True)
def encode_leb128(values, out):
    """Write the shortest signed LEB128 encoding of ``values`` (int32[count]) into ``out``.

    ``out`` is uint8[leb128_size(values)]; returns the number of bytes written.
    """
    pos = 0
    for i in range(values.shape[0]):
        v = np.int64(values[i])
        while True:
            byte = v & 0x7F
            v >>= 7
            if (v == 0 and byte & 0x40 == 0) or (v == -1 and byte & 0x40 != 0):
                out[pos] = byte
                pos += 1
                break
            out[pos] = byte | 0x80
            pos += 1
    return pos

"""FarmHash `Fingerprint64` of byte strings, compiled: the function TensorFlow's
`tf.strings.to_hash_bucket_fast(s, n)` takes modulo n (as an unsigned 64-bit number) and
`tf.fingerprint(s, "farmhash64")` returns, so integers written at conversion give the bucket ids
that hashing the strings gives at serving time.

A port of `farmhashna::Hash64` (farmhash.cc), which `Fingerprint64` is on every platform. All
arithmetic is modulo 2^64 on uint64; every constant and shift count is a uint64, since numba
would turn a uint64 mixed with a signed integer into a float64.
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from tfx_tabular.coders.intrinsics import load_word

K0 = np.uint64(0xC3A5C85C97CB3127)
K1 = np.uint64(0xB492B66FBE98F273)
K2 = np.uint64(0x9AE16A3B2F90404F)
K_MUL = np.uint64(0x9DDFEA08EB382D69)
SEED = np.uint64(81)

_jit = numba.njit(cache=True, nogil=True, boundscheck=False)


@_jit
def _rotate(value, shift):
    return (value >> np.uint64(shift)) | (value << np.uint64(64 - shift))


@_jit
def _shift_mix(value):
    return value ^ (value >> np.uint64(47))


@_jit
def _fetch32(data, at):
    """Bytes data[at:at + 4] as a little-endian unsigned 32-bit number, in a uint64."""
    return (
        np.uint64(data[at])
        | (np.uint64(data[at + 1]) << np.uint64(8))
        | (np.uint64(data[at + 2]) << np.uint64(16))
        | (np.uint64(data[at + 3]) << np.uint64(24))
    )


@_jit
def _hash_len16(u, v, mul):
    a = (u ^ v) * mul
    a ^= a >> np.uint64(47)
    b = (v ^ a) * mul
    b ^= b >> np.uint64(47)
    return b * mul


@_jit
def _len0to16(data, s, n):
    length = np.uint64(n)
    if n >= 8:
        mul = K2 + length * np.uint64(2)
        a = load_word(data, s) + K2
        b = load_word(data, s + n - 8)
        c = _rotate(b, 37) * mul + a
        d = (_rotate(a, 25) + b) * mul
        return _hash_len16(c, d, mul)
    if n >= 4:
        mul = K2 + length * np.uint64(2)
        a = _fetch32(data, s)
        return _hash_len16(length + (a << np.uint64(3)), _fetch32(data, s + n - 4), mul)
    if n > 0:
        y = np.uint64(data[s]) + (np.uint64(data[s + (n >> 1)]) << np.uint64(8))
        z = length + (np.uint64(data[s + n - 1]) << np.uint64(2))
        # farmhash computes y and z in uint32: they fit, so no truncation is needed.
        return _shift_mix(y * K2 ^ z * K0) * K2
    return K2


@_jit
def _mix_ends(data, s, n, mul, k):
    """The first 16 and last 16 bytes mixed, as both middle lengths begin: (a, b, c, y, u)."""
    a = load_word(data, s) * k
    b = load_word(data, s + 8)
    c = load_word(data, s + n - 8) * mul
    d = load_word(data, s + n - 16) * K2
    return a, b, c, _rotate(a + b, 43) + _rotate(c, 30) + d, a + _rotate(b + K2, 18) + c


@_jit
def _len17to32(data, s, n):
    mul = K2 + np.uint64(n) * np.uint64(2)
    _, _, _, y, u = _mix_ends(data, s, n, mul, K1)
    return _hash_len16(y, u, mul)


@_jit
def _len33to64(data, s, n):
    mul = K2 + np.uint64(n) * np.uint64(2)
    a, b, c, y, u = _mix_ends(data, s, n, mul, K2)
    z = _hash_len16(y, u, mul)
    e = load_word(data, s + 16) * mul
    f = load_word(data, s + 24)
    g = (y + load_word(data, s + n - 32)) * mul
    h = (z + load_word(data, s + n - 24)) * mul
    return _hash_len16(_rotate(e + f, 43) + _rotate(g, 30) + h, e + _rotate(f + a, 18) + g, mul)


@_jit
def _weak_len32(data, s, a, b):
    """Farmhash's WeakHashLen32WithSeeds over data[s:s + 32], as a pair."""
    w = load_word(data, s)
    x = load_word(data, s + 8)
    y = load_word(data, s + 16)
    z = load_word(data, s + 24)
    a += w
    b = _rotate(b + a + z, 21)
    c = a
    a += x
    a += y
    b += _rotate(a, 44)
    return a + z, b + c


@_jit
def _over64(data, s, n):
    """Strings over 64 bytes: 64-byte blocks, then the last 64 bytes once more."""
    x = SEED
    y = SEED * K1 + np.uint64(113)
    z = _shift_mix(y * K2 + np.uint64(113)) * K2
    v0 = v1 = w0 = w1 = np.uint64(0)
    x = x * K2 + load_word(data, s)
    end = s + ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    while True:
        x = _rotate(x + y + v0 + load_word(data, s + 8), 37) * K1
        y = _rotate(y + v1 + load_word(data, s + 48), 42) * K1
        x ^= w1
        y += v0 + load_word(data, s + 40)
        z = _rotate(z + w0, 33) * K1
        v0, v1 = _weak_len32(data, s, v1 * K1, x + w0)
        w0, w1 = _weak_len32(data, s + 32, z + w1, y + load_word(data, s + 16))
        z, x = x, z
        s += 64
        if s == end:
            break
    mul = K1 + ((z & np.uint64(0xFF)) << np.uint64(1))
    s = last64
    w0 += np.uint64((n - 1) & 63)
    v0 += w0
    w0 += v0
    x = _rotate(x + y + v0 + load_word(data, s + 8), 37) * mul
    y = _rotate(y + v1 + load_word(data, s + 48), 42) * mul
    x ^= w1 * np.uint64(9)
    y += v0 * np.uint64(9) + load_word(data, s + 40)
    z = _rotate(z + w0, 33) * mul
    v0, v1 = _weak_len32(data, s, v1 * mul, x + w0)
    w0, w1 = _weak_len32(data, s + 32, z + w1, y + load_word(data, s + 16))
    z, x = x, z
    return _hash_len16(
        _hash_len16(v0, w0, mul) + _shift_mix(y) * K0 + z, _hash_len16(v1, w1, mul) + x, mul
    )


@_jit
def fingerprint64(data, start, end):
    """`Fingerprint64` of data[start:end] (a uint8 array)."""
    n = end - start
    if n <= 16:
        return _len0to16(data, start, n)
    if n <= 32:
        return _len17to32(data, start, n)
    if n <= 64:
        return _len33to64(data, start, n)
    return _over64(data, start, n)


@_jit
def fingerprints_into(offsets, data, out):
    """`Fingerprint64` of each value of a string/binary buffer pair (n + 1 offsets) into out."""
    for i in range(len(offsets) - 1):
        out[i] = fingerprint64(data, np.int64(offsets[i]), np.int64(offsets[i + 1]))


@_jit
def fingerprints_of(offsets, data):
    """`Fingerprint64` of each value of a string/binary buffer pair (n + 1 offsets)."""
    out = np.empty(len(offsets) - 1, np.uint64)
    fingerprints_into(offsets, data, out)
    return out


@_jit
def take_codes(hashed, codes, out):
    """out[i] = hashed[codes[i]], a dictionary's fingerprints by value; a code outside the
    dictionary (a null slot's arbitrary one) takes the last's."""
    last = len(hashed) - 1
    if last < 0:  # an empty dictionary: every slot a null
        out[:] = 0
        return
    for i in range(len(codes)):
        out[i] = hashed[min(max(np.int64(codes[i]), 0), last)]


def fingerprints(values: pa.Array) -> np.ndarray:
    """`Fingerprint64` of each value of a string or binary Arrow array (nulls hash as the empty
    string: the caller keeps the validity), as uint64."""
    if pa.types.is_dictionary(values.type):
        return fingerprints(values.dictionary)[values.indices.fill_null(0).to_numpy()]
    if not (
        pa.types.is_string(values.type)
        or pa.types.is_binary(values.type)
        or pa.types.is_large_string(values.type)
        or pa.types.is_large_binary(values.type)
    ):
        raise TypeError(f"fingerprints need string or binary values, not {values.type}")
    large = pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type)
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64 if large else np.int32)
    offsets = offsets[values.offset : values.offset + len(values) + 1]
    # Every read stays inside its value's bytes: no padding or copy is needed.
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer else np.empty(0, np.uint8)
    return fingerprints_of(offsets, data)

"""Arrow record batches → serialized tf.Example records, column-wise.

Arrow kernels flatten every column into flat numpy arrays (row splits, validity, values); a numba
kernel then writes the tf.Example protobuf wire format and TFRecord framing for the whole batch
in one pass. No per-row Python. The output is wire-compatible with tfx_bsl's
RecordBatchToExamplesEncoder: a null is a feature with no kind set, an empty list an empty typed
list (tests compare both against tf.io.parse_example and tfx_bsl's decoder).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import functools
import platform
import sys
from typing import Optional, Sequence

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import cgutils
from numba.cpython.unsafe.numbers import leading_zeros
from numba.extending import intrinsic

from tfx_tabular.source.mapping import Feature, Kind

_INT64_MAX = np.iinfo(np.int64).max

if sys.byteorder != "little":  # the kernels read 8-byte little-endian words (hashes, CRC)
    raise ImportError("tfx_tabular.coders.encoding needs a little-endian machine")


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def reuse_freed_memory() -> bool:
    """Have glibc keep the encoder's freed batch buffers (a few MiB each) for the next batch.
    Under its default, adaptive mmap threshold, a multi-threaded conversion mapped fresh pages
    for most batches and spent much of the encoder's CPU page-faulting them in. Up to 32 MiB of
    freed memory stays mapped. False where the C library has no mallopt (nothing changes)."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20) and mallopt(_M_TRIM_THRESHOLD, 32 << 20))


class ConversionError(ValueError):
    """Data that cannot be written losslessly (the message names the column)."""


@dataclasses.dataclass
class FeatureValues:
    """One feature over a batch: rows r's values are values[row_splits[r]:row_splits[r + 1]]."""

    row_splits: np.ndarray  # int64, n + 1
    valid: np.ndarray  # bool, n; False → null (feature with no kind)
    values: np.ndarray  # int64 | float32 | for BYTES: the int64 offsets (m + 1) into `data`
    data: Optional[np.ndarray] = None  # uint8, BYTES only
    # BYTES kept dictionary-encoded (Parquet's dictionary pages): value i is string codes[i] of
    # the dictionary whose offsets are `values` (codes in null slots are arbitrary). None: value
    # i is string i.
    codes: Optional[np.ndarray] = None
    # A scalar's: row r's value is slot r (row_splits is 0..n), null rows' slots unused.
    slots: bool = False


def _decoded(arr: pa.Array) -> pa.Array:
    return arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr


def _is_string_dictionary(arr: pa.Array, kind: Kind) -> bool:
    t = arr.type
    return (
        kind == Kind.BYTES
        and pa.types.is_dictionary(t)
        and len(arr.dictionary) > 0
        and (pa.types.is_string(t.value_type) or pa.types.is_binary(t.value_type))
    )


def _dictionary_codes(arr: pa.DictionaryArray) -> np.ndarray:
    """Each slot's index into the dictionary, as stored (arbitrary in null slots); no copy."""
    return _slots(arr.indices, arr.indices.type.to_pandas_dtype())


def _validity(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _decimal_text(arr: pa.Array) -> pa.Array:
    """Decimal → its exact text (pyarrow 10 has no decimal→string cast), vectorized.

    Values whose unscaled integer fits in int64 (up to 18 digits) are exact; others fail."""
    scale = arr.type.scale
    width = arr.type.byte_width // 8  # 2 words for decimal128, 4 for decimal256
    words = np.frombuffer(arr.buffers()[1], dtype=np.int64)[
        width * arr.offset : width * (arr.offset + len(arr))
    ].reshape(-1, width)
    if (
        arr.null_count
    ):  # null slots hold arbitrary words: write them as 0 (the serializer skips them)
        words = np.where(_validity(arr)[:, None], words, 0)
    low = words[:, 0]
    negative = low < 0
    if not (words[:, 1:] == np.where(negative, -1, 0)[:, None]).all():
        raise ConversionError(
            f"decimal value beyond 18 digits ({arr.type}) cannot be written "
            "as text; use decimal_as='float'"
        )
    unsigned = low.view(np.uint64)
    magnitude = np.where(negative, ~unsigned + np.uint64(1), unsigned)  # |x|, -2**63 included
    sign = pa.array(np.where(negative, "-", ""))
    if scale <= 0:
        return pc.binary_join_element_wise(
            sign, pa.array(magnitude).cast(pa.string()), "0" * -scale, ""
        )
    if scale >= 20:  # 10**scale exceeds every uint64: all digits are fractional
        whole, frac = np.zeros_like(magnitude), magnitude
    else:
        power = np.uint64(10**scale)
        whole, frac = magnitude // power, magnitude % power
    frac_text = pc.utf8_lpad(pa.array(frac).cast(pa.string()), width=scale, padding="0")
    return pc.binary_join_element_wise(sign, pa.array(whole).cast(pa.string()), ".", frac_text, "")


def _slots(arr: pa.Array, dtype) -> np.ndarray:
    """A fixed-width array's value buffer, one value per slot (nulls hold arbitrary values,
    which the serializer skips); no copy."""
    if len(arr) == 0:
        return np.zeros(0, dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset : arr.offset + len(arr)]


def _leaf_values(arr: pa.Array, kind: Kind, column: str):
    """Leaf values as (values, data) for the serializer, one per slot of `arr`."""
    t = arr.type
    if kind == Kind.INT:
        if pa.types.is_temporal(t):
            storage = pa.int32() if t.bit_width == 32 else pa.int64()
            arr = arr.view(storage)
        elif pa.types.is_uint64(t) and len(arr) and (pc.max(arr).as_py() or 0) > _INT64_MAX:
            raise ConversionError(
                f"column {column!r}: uint64 value {pc.max(arr).as_py()} is "
                f"above the int64 maximum {_INT64_MAX}"
            )
        # Arrow's cast rather than numpy's astype for int32 (a wide table's narrowed row
        # groups): numpy's many small arrays fragmented the heap and raised the peak RSS.
        return _slots(arr.cast(pa.int64()), np.int64), None
    if kind == Kind.FLOAT:
        if pa.types.is_decimal(t):
            arr = arr.cast(pa.float64())
        # float64 → float32 keeps float32's precision and range (out-of-range → ±inf).
        with np.errstate(over="ignore"):
            return _slots(arr, arr.type.to_pandas_dtype()).astype(np.float32, copy=False), None
    if pa.types.is_null(t):
        return np.zeros(1, np.int64), np.zeros(0, np.uint8)
    if pa.types.is_fixed_size_binary(t):
        # No cast: pyarrow 10 crashes casting a sliced fixed_size_binary array.
        size = t.byte_width
        data = np.frombuffer(arr.buffers()[1], dtype=np.uint8)[
            size * arr.offset : size * (arr.offset + len(arr))
        ]
        return np.arange(len(arr) + 1, dtype=np.int64) * size, data
    if pa.types.is_decimal(t):
        arr = _decimal_text(arr)
    arr = arr.cast(pa.large_binary())
    offsets_buf, data_buf = arr.buffers()[1:3]
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    return offsets, data


def _flatten(arr: pa.Array) -> pa.Array:
    # pyarrow 10's list_flatten fails on an all-null list array whose nulls hold child values.
    if arr.null_count == len(arr):
        return arr.values.slice(0, 0)
    return pc.list_flatten(arr)


def _list_lengths(arr: pa.Array) -> np.ndarray:
    return pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def cumulative(lengths: np.ndarray) -> np.ndarray:
    """Where each of `lengths`' items starts when laid end to end, then the end: 0 and the
    running sums."""
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


@functools.lru_cache(maxsize=8)
def _slot_splits(rows: int) -> np.ndarray:
    """0..rows, a scalar feature's row splits (row r's value is slot r): one read-only array
    shared by a batch's scalar features (a wide table has thousands of them)."""
    splits = np.arange(rows + 1, dtype=np.int64)
    splits.setflags(write=False)
    return splits


def feature_values(column: pa.Array, feature: Feature, partitions: Sequence[Feature] = ()):
    """A values feature (and its ragged row-length partitions) of one column over a batch."""
    arr = column
    top_valid: Optional[np.ndarray] = None
    levels: list[np.ndarray] = []  # cumulative offsets: items of level k-1 → items of level k
    for step in feature.path:
        arr = _decoded(arr)
        nested = top_valid is not None
        if nested and arr.null_count:
            what = "list" if step == "list" else "struct"
            raise ConversionError(
                f"column {feature.column!r} (feature {feature.name!r}): a null "
                f"{what} inside a list cannot be represented in tf.Example"
            )
        if step == "list":
            if not nested:
                top_valid = _validity(arr)
            levels.append(cumulative(_list_lengths(arr)))
            arr = _flatten(arr)
        else:
            arr = arr.flatten()[arr.type.get_field_index(step)]
    # Strings read as dictionary pages stay encoded: each value is written from the dictionary.
    keep_dictionary = _is_string_dictionary(arr, feature.kind)
    if not keep_dictionary:
        arr = _decoded(arr)
    slots = top_valid is None
    if slots:  # a scalar: row r's value is slot r (skipped where null)
        top_valid = _validity(arr)
        levels.append(_slot_splits(len(arr)))
    elif arr.null_count:
        raise ConversionError(
            f"column {feature.column!r} (feature {feature.name!r}): a null "
            "value inside a list cannot be represented in tf.Example"
        )
    if pa.types.is_null(arr.type):
        top_valid = np.zeros(len(column), dtype=bool)
        levels = [np.zeros(len(column) + 1, dtype=np.int64)]
        slots = False
    codes = _dictionary_codes(arr) if keep_dictionary else None
    values, data = _leaf_values(
        arr.dictionary if keep_dictionary else arr, feature.kind, feature.column
    )

    def composed(depth: int) -> np.ndarray:
        splits = levels[0]
        for offsets in levels[1:depth]:
            splits = offsets[splits]
        return splits

    out = [FeatureValues(composed(len(levels)), top_valid, values, data, codes, slots)]
    for partition in partitions:
        out.append(
            FeatureValues(composed(partition.level), top_valid, np.diff(levels[partition.level]))
        )
    return out


# --- wire format ---------------------------------------------------------------------------


def _crc32c_tables() -> np.ndarray:
    table = np.zeros((8, 256), dtype=np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table[0, i] = crc
    for i in range(256):
        for k in range(1, 8):
            table[k, i] = (table[k - 1, i] >> 8) ^ table[0, table[k - 1, i] & 0xFF]
    return table


CRC_TABLES = _crc32c_tables()


@numba.njit(cache=True, nogil=True, inline="always")
def varint_size(v) -> int:
    bits = 64 - leading_zeros(np.uint64(v) | np.uint64(1))  # 0 takes one byte, like 1
    return (bits * 9 + 64) // 64  # ceil(bits / 7) for bits in 1..64


@numba.njit(cache=True, nogil=True, inline="always")
def put_varint(buf, pos, v):
    v = np.uint64(v)
    while v >= 0x80:
        buf[pos] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
        v >>= np.uint64(7)
        pos += 1
    buf[pos] = np.uint8(v)
    return pos + 1


@numba.njit(cache=True, nogil=True)
def _crc32c_table(buf, start, end, tables):
    """Slicing-by-8 CRC32C, for CPUs without the SSE4.2 instruction."""
    crc = np.uint32(0xFFFFFFFF)
    i = start
    while i + 8 <= end:
        lo = crc ^ (
            np.uint32(buf[i])
            | (np.uint32(buf[i + 1]) << 8)
            | (np.uint32(buf[i + 2]) << 16)
            | (np.uint32(buf[i + 3]) << 24)
        )
        crc = (
            tables[7, lo & 0xFF]
            ^ tables[6, (lo >> 8) & 0xFF]
            ^ tables[5, (lo >> 16) & 0xFF]
            ^ tables[4, lo >> 24]
            ^ tables[3, buf[i + 4]]
            ^ tables[2, buf[i + 5]]
            ^ tables[1, buf[i + 6]]
            ^ tables[0, buf[i + 7]]
        )
        i += 8
    while i < end:
        crc = tables[0, (crc ^ buf[i]) & 0xFF] ^ (crc >> 8)
        i += 1
    return crc ^ np.uint32(0xFFFFFFFF)


def _llvm_call(builder, name: str, widths: Sequence[int], values):
    fnty = ir.FunctionType(ir.IntType(widths[0]), [ir.IntType(w) for w in widths[1:]])
    return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), values)


@intrinsic
def _crc32c_u64(typingctx, crc, word):
    return numba.uint64(numba.uint64, numba.uint64), lambda context, builder, sig, args: _llvm_call(
        builder, "llvm.x86.sse42.crc32.64.64", (64, 64, 64), args
    )


@intrinsic
def _crc32c_u8(typingctx, crc, byte):
    return numba.uint32(numba.uint32, numba.uint8), lambda context, builder, sig, args: _llvm_call(
        builder, "llvm.x86.sse42.crc32.32.8", (32, 32, 8), args
    )


@numba.njit(cache=True, nogil=True)
def _crc32c_sse42(buf, start, end, tables):
    """CRC32C with the SSE4.2 instruction (several times the table version's speed); `tables`
    is unused, kept so both kernels take the same arguments."""
    n_words = (end - start) // 8
    words = buf[start : start + 8 * n_words].view(np.uint64)
    crc = np.uint64(0xFFFFFFFF)
    for w in range(n_words):
        crc = _crc32c_u64(crc, words[w])
    c = np.uint32(crc)
    for i in range(start + 8 * n_words, end):
        c = _crc32c_u8(c, buf[i])
    return c ^ np.uint32(0xFFFFFFFF)


def _target_has_sse42() -> bool:
    """Whether numba's code may use SSE4.2: the features numba targets (NUMBA_CPU_FEATURES,
    empty under NUMBA_CPU_NAME=generic: a portable cache, as the image's), else the host's. LLVM
    aborts the process on the instruction where the target lacks it."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    features = numba.config.CPU_FEATURES
    if features is None:
        features = llvm_binding.get_host_cpu_features().flatten()
    return "+sse4.2" in features.split(",")


_HAS_SSE42 = _target_has_sse42()


@intrinsic
def load_word(typingctx, array, index):
    """Bytes array[index:index + 8] of a uint8 array as one little-endian uint64, unaligned
    (the caller checks the bounds)."""

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        word = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(word, align=1)

    return numba.uint64(array, numba.int64), codegen


@intrinsic
def store_word(typingctx, array, index, word):
    """`word`'s 8 bytes into array[index:index + 8] of a uint8 array, unaligned (the caller
    checks the bounds)."""

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        target = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        builder.store(args[2], target, align=1)
        return context.get_dummy_value()

    return numba.none(array, numba.int64, numba.uint64), codegen


_crc32c = _crc32c_sse42 if _HAS_SSE42 else _crc32c_table


@numba.njit(cache=True, nogil=True, inline="always")
def put_masked_crc(buf, pos, start, end, tables):
    """TFRecord's masked CRC32C of buf[start:end], little-endian at buf[pos:pos + 4]."""
    crc = _crc32c(buf, start, end, tables)
    masked = np.uint32(((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8))
    for k in range(4):
        buf[pos + k] = np.uint8((masked >> np.uint32(8 * k)) & np.uint32(0xFF))


@numba.njit(cache=True, nogil=True, inline="always")
def list_size(kind, payload):
    """Bytes of a value list given its payload (BytesList is not packed; empty packed lists are
    omitted)."""
    if kind == 1 or payload == 0:
        return payload
    return 1 + varint_size(payload) + payload


@numba.njit(cache=True, nogil=True, inline="always")
def entry_sizes(header, kind, payload):
    """A Features map entry's bytes after its tag and length, its Feature's and its value list's,
    for a value list of `kind` whose values take `payload` bytes (-1: a null, a Feature with no
    kind) and a key field and value tag of `header` bytes."""
    size = feature = 0
    if payload >= 0:
        size = list_size(kind, payload)
        feature = 1 + varint_size(size) + size
    return header + varint_size(feature) + feature, feature, size


@numba.njit(cache=True, nogil=True, inline="always")
def entry_bytes(header, kind, payload):
    """A Features map entry's whole bytes, its tag and length included (see `entry_sizes`)."""
    entry = entry_sizes(header, kind, payload)[0]
    return 1 + varint_size(entry) + entry


@numba.njit(cache=True, nogil=True)
def put_entry_head(buf, pos, headers, h0, header, kind, payload):
    """A Features map entry's bytes up to its values: its tag and length, its key field and value
    tag (headers[h0:h0 + header], from `key_headers`), the Feature's length and, unless a null
    (payload -1), the value list's field and length and a packed list's header; returns where its
    `payload` bytes of values go. For records of many rows (columnar): `_serialize` writes the
    same bytes inline, since a compiled call taking arrays, once per row and feature, costs more
    than the bytes it writes (even inlined: the arrays' references are counted at each call)."""
    entry, feature, size = entry_sizes(header, kind, payload)
    buf[pos] = 0x0A
    pos = put_varint(buf, pos + 1, entry)
    for k in range(header):
        buf[pos + k] = headers[h0 + k]
    pos = put_varint(buf, pos + header, feature)
    if payload < 0:
        return pos
    # Feature.kind field numbers: bytes_list 1, float_list 2, int64_list 3.
    buf[pos] = 0x0A if kind == 1 else (0x12 if kind == 3 else 0x1A)
    pos = put_varint(buf, pos + 1, size)
    if kind != 1 and payload > 0:
        buf[pos] = 0x0A
        pos = put_varint(buf, pos + 1, payload)
    return pos


@numba.njit(cache=True, nogil=True)
def _serialize(
    n_rows,
    kinds,
    key_headers,
    header_offsets,
    valid,
    splits,
    ints,
    floats,
    bstart,
    bend,
    data,
    framed,
    tables,
):
    """All rows' tf.Examples in one buffer; returns (buffer, record offsets).

    `valid` and `splits` are feature-major ([features, rows], [features, rows + 1]): row r of
    feature f holds items splits[f, r]:splits[f, r + 1] of its kind's pool, and writes them
    only if valid[f, r]. `key_headers` holds, per feature, the map entry's key field and the
    value field's tag (constant per feature).
    """
    n_features = len(kinds)
    # Pass 1, feature by feature (sizes depend on one feature's values): each value list's
    # byte size (-1: null) and item count, stored row-major for pass 2, and each Example's size.
    payloads = np.empty((n_rows, n_features), dtype=np.int64)
    counts = np.empty((n_rows, n_features), dtype=np.int64)
    bodies = np.zeros(n_rows, dtype=np.int64)
    for f in range(n_features):
        kind = kinds[f]
        header = header_offsets[f + 1] - header_offsets[f]
        null_cost = entry_bytes(header, kind, -1)
        for r in range(n_rows):
            lo = splits[f, r]
            hi = splits[f, r + 1]
            counts[r, f] = hi - lo
            if not valid[f, r]:
                payloads[r, f] = -1
                bodies[r] += null_cost
                continue
            payload = 0
            if kind == 2:  # Int64List: packed varints
                for i in range(lo, hi):
                    payload += varint_size(ints[i])
            elif kind == 3:  # FloatList: packed fixed32
                payload = 4 * (hi - lo)
            else:  # BytesList: not packed
                for i in range(lo, hi):
                    length = bend[i] - bstart[i]
                    payload += 1 + varint_size(length) + length
            payloads[r, f] = payload
            bodies[r] += entry_bytes(header, kind, payload)
    frame = 16 if framed else 0
    record_offsets = np.empty(n_rows + 1, dtype=np.int64)
    record_offsets[0] = 0
    for r in range(n_rows):
        record_offsets[r + 1] = record_offsets[r] + frame + 1 + varint_size(bodies[r]) + bodies[r]
    # Pass 2, row by row: write. Per-feature cursors walk the pools, so pass 2 reads row-major.
    buf = np.empty(record_offsets[n_rows], dtype=np.uint8)
    cursors = splits[:, 0].copy()
    for r in range(n_rows):
        pos = record_offsets[r]
        if framed:
            length = np.uint64(record_offsets[r + 1] - pos - 16)
            for k in range(8):
                buf[pos + k] = np.uint8((length >> np.uint64(8 * k)) & np.uint64(0xFF))
            put_masked_crc(buf, pos + 8, pos, pos + 8, tables)
            pos += 12
        start = pos
        buf[pos] = 0x0A
        pos = put_varint(buf, pos + 1, bodies[r])
        for f in range(n_features):
            kind = kinds[f]
            h0 = header_offsets[f]
            header = header_offsets[f + 1] - h0
            payload = payloads[r, f]
            lo = cursors[f]
            hi = lo + counts[r, f]
            cursors[f] = hi
            # As put_entry_head writes it (inline: see there).
            entry, feature, size = entry_sizes(header, kind, payload)
            buf[pos] = 0x0A
            pos = put_varint(buf, pos + 1, entry)
            for k in range(header):
                buf[pos + k] = key_headers[h0 + k]
            pos = put_varint(buf, pos + header, feature)
            if payload < 0:  # null: a Feature with no kind set
                continue
            # Feature.kind field numbers: bytes_list 1, float_list 2, int64_list 3.
            buf[pos] = 0x0A if kind == 1 else (0x12 if kind == 3 else 0x1A)
            pos = put_varint(buf, pos + 1, size)
            if kind == 1:
                for i in range(lo, hi):
                    b0 = bstart[i]
                    length = bend[i] - b0
                    buf[pos] = 0x0A
                    pos = put_varint(buf, pos + 1, length)
                    # A short string in one 8-byte copy (what follows it is written later).
                    if length <= 8 and b0 + 8 <= len(data) and pos + 8 <= len(buf):
                        store_word(buf, pos, load_word(data, b0))
                    else:
                        for k in range(length):
                            buf[pos + k] = data[b0 + k]
                    pos += length
            elif payload > 0:
                buf[pos] = 0x0A
                pos = put_varint(buf, pos + 1, payload)
                if kind == 3:
                    float_bytes = floats[lo:hi].view(np.uint8)
                    for k in range(payload):
                        buf[pos + k] = float_bytes[k]
                    pos += payload
                else:
                    for i in range(lo, hi):
                        pos = put_varint(buf, pos, ints[i])
        if framed:
            put_masked_crc(buf, pos, start, pos, tables)
    return buf, record_offsets


@numba.njit(cache=True, nogil=True)
def fingerprints(buf, record_offsets, skip_head, skip_tail):
    """A 64-bit hash of each record's bytes: 8-byte words folded by multiply-xor, then a
    splitmix64 finish (depends on the bytes only, so the same on any machine or worker)."""
    n = len(record_offsets) - 1
    out = np.empty(n, dtype=np.uint64)
    for r in range(n):
        start = record_offsets[r] + skip_head
        end = record_offsets[r + 1] - skip_tail
        h = np.uint64(0xCBF29CE484222325) ^ np.uint64(end - start)
        n_words = (end - start) // 8
        words = buf[start : start + 8 * n_words].view(np.uint64)
        for w in range(n_words):
            h = (h ^ words[w]) * np.uint64(0x100000001B3)
            h ^= h >> np.uint64(29)
        i = start + 8 * n_words
        while i < end:
            h = (h ^ np.uint64(buf[i])) * np.uint64(0x100000001B3)
            i += 1
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out[r] = h ^ (h >> np.uint64(31))
    return out


@numba.njit(cache=True, nogil=True)
def gather_records(buf, record_offsets, rows):
    """The bytes of records `rows`, concatenated in that order."""
    total = 0
    for r in rows:
        total += record_offsets[r + 1] - record_offsets[r]
    out = np.empty(total, dtype=np.uint8)
    pos = 0
    for r in rows:
        length = record_offsets[r + 1] - record_offsets[r]
        out[pos : pos + length] = buf[record_offsets[r] : record_offsets[r + 1]]
        pos += length
    return out


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclasses.dataclass
class EncodedBatch:
    """Serialized records of a batch: record r is buffer[offsets[r]:offsets[r + 1]]."""

    buffer: np.ndarray
    offsets: np.ndarray
    framed: bool

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def records(self) -> list[bytes]:
        """The records as bytes objects (for tests and small outputs)."""
        head, tail = (12, 4) if self.framed else (0, 0)
        raw = self.buffer.tobytes()
        return [
            raw[a + head : b - tail]
            for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True)
        ]

    def fingerprints(self) -> np.ndarray:
        head, tail = (12, 4) if self.framed else (0, 0)
        return fingerprints(self.buffer, self.offsets, head, tail)


def _partitions(features: Sequence[Feature]) -> dict[str, list[Feature]]:
    partitions: dict[str, list[Feature]] = {}
    for f in features:
        if f.row_lengths_of is not None:
            partitions.setdefault(f.row_lengths_of, []).append(f)
    return partitions


def written_order(features: Sequence[Feature]) -> list[Feature]:
    """The order `feature_columns` yields features in: each values feature, then its partitions."""
    partitions = _partitions(features)
    return [
        g for f in features if f.row_lengths_of is None for g in [f, *partitions.get(f.name, [])]
    ]


def feature_columns(
    batch: pa.RecordBatch, features: Sequence[Feature]
) -> list[tuple[Feature, FeatureValues]]:
    """Every feature of `batch` (from `features_of`) as flat buffers, in `written_order`."""
    partitions = _partitions(features)
    ordered: list[tuple[Feature, FeatureValues]] = []
    for f in features:
        if f.row_lengths_of is not None:
            continue
        parts = partitions.get(f.name, [])
        column = batch.column(batch.schema.get_field_index(f.column))
        ordered.extend(zip([f, *parts], feature_values(column, f, parts), strict=True))
    return ordered


def encode(
    batch: pa.RecordBatch, features: Sequence[Feature], framed: bool = False
) -> EncodedBatch:
    """Serialize every row of `batch` as a tf.Example with `features` (from `features_of`).

    `framed` adds TFRecord framing (length, masked CRC32C), so records can be written as is.
    """
    return PooledColumns(feature_columns(batch, features)).encode(framed=framed)


class ValuePools:
    """Each kind's values laid end to end, as the serializer reads them: INT and FLOAT values,
    and for BYTES each string's [start, end) in the pooled data."""

    def __init__(self):
        self._values = {Kind.INT: [], Kind.FLOAT: []}
        self._starts, self._ends, self._data = [], [], []
        self.sizes = {Kind.INT: 0, Kind.FLOAT: 0, Kind.BYTES: 0}
        self._data_size = 0

    def add(self, kind: Kind, fv: FeatureValues) -> int:
        """Adds a feature's values; returns the pool index of its first one."""
        if kind == Kind.BYTES:
            if fv.codes is None:
                return self.add_strings(fv.data, fv.values[:-1], fv.values[1:])
            # "clip": null slots hold arbitrary codes (their values are never written)
            return self.add_strings(
                fv.data,
                np.take(fv.values[:-1], fv.codes, mode="clip"),
                np.take(fv.values[1:], fv.codes, mode="clip"),
            )
        base = self.sizes[kind]
        self._values[kind].append(fv.values)
        self.sizes[kind] += len(fv.values)
        return base

    def add_strings(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
        """Adds strings data[starts[j]:ends[j]]; returns the pool index of the first."""
        base = self.sizes[Kind.BYTES]
        self._starts.append(starts + self._data_size)
        self._ends.append(ends + self._data_size)
        self._data.append(data)
        self._data_size += len(data)
        self.sizes[Kind.BYTES] += len(starts)
        return base

    def arrays(self) -> tuple:
        """(ints, floats, string starts, string ends, data), the serializer's arguments."""

        def pool(parts, dtype):
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

        return (
            pool(self._values[Kind.INT], np.int64),
            pool(self._values[Kind.FLOAT], np.float32),
            pool(self._starts, np.int64),
            pool(self._ends, np.int64),
            pool(self._data, np.uint8),
        )


def key_headers(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per feature, the map entry's key field (tag, length, name) and the value field's tag,
    laid end to end, and their offsets."""
    headers = [b"\n" + _varint(len(n.encode())) + n.encode() + b"\x12" for n in names]
    offsets = cumulative(np.array([len(h) for h in headers], dtype=np.int64))
    return np.frombuffer(b"".join(headers), dtype=np.uint8), offsets


class PooledColumns:
    """A batch's features (`feature_columns`' output) as the serializer reads them, built once
    per batch: each kind's values end to end (`pools`, as `ValuePools.arrays` gives them) and,
    per feature f and row r, its items splits[f, r]:splits[f, r + 1] there (`splits`), written
    only if valid[f, r]. Rows of it are encoded per row (`encode`) or taken into columnar
    records. A scalar's splits are its first slot (`firsts`) plus the row, made only for the
    rows asked: at thousands of columns the whole batch's splits outweighed its values."""

    def __init__(self, ordered: Sequence[tuple[Feature, FeatureValues]]):
        rows = len(ordered[0][1].valid) if ordered else 0
        self.kinds = np.array([int(f.kind) for f, _ in ordered], dtype=np.int64)
        self._headers = key_headers([f.name for f, _ in ordered])
        self.valid = np.empty((len(ordered), rows), dtype=np.bool_)
        self.firsts = np.empty(len(ordered), dtype=np.int64)
        # Each feature's row in _list_splits; -1: a scalar's slots.
        self._list_position = np.full(len(ordered), -1, dtype=np.int64)
        lists = [i for i, (_, fv) in enumerate(ordered) if not fv.slots]
        self._list_position[lists] = np.arange(len(lists))
        self._list_splits = np.empty((len(lists), rows + 1), dtype=np.int64)
        pools = ValuePools()
        for i, (f, fv) in enumerate(ordered):
            self.valid[i] = fv.valid
            first = pools.add(f.kind, fv)
            if fv.slots:
                self.firsts[i] = first
            else:
                at = self._list_position[i]
                np.add(fv.row_splits, first, out=self._list_splits[at])
                self.firsts[i] = self._list_splits[at, 0]
        self.pools = pools.arrays()

    @property
    def rows(self) -> int:
        return self.valid.shape[1]

    @property
    def rows_of(self) -> tuple:
        """What locates row r of feature f in its kind's pool, for compiled readers: a scalar's
        first slot (plus r), each feature's row in the lists' splits (-1: a scalar), those
        splits, and which rows hold a value."""
        return self.firsts, self._list_position, self._list_splits, self.valid

    def splits(self, start: int, stop: int) -> np.ndarray:
        """[feature, row]: where rows [start, stop) of each feature start in its kind's pool,
        and where the last ends (a new array)."""
        out = self.firsts[:, None] + np.arange(start, stop + 1)[None, :]
        listed = self._list_position >= 0
        out[listed] = self._list_splits[self._list_position[listed], start : stop + 1]
        return out

    def encode(self, start: int = 0, stop: Optional[int] = None, framed: bool = False):
        """Rows [start, stop) as tf.Examples (see `encode`); an `EncodedBatch`."""
        stop = self.rows if stop is None else stop
        whole = start == 0 and stop == self.rows
        valid = self.valid if whole else np.ascontiguousarray(self.valid[:, start:stop])
        buffer, offsets = _serialize(
            stop - start,
            self.kinds,
            *self._headers,
            valid,
            self.splits(start, stop),
            *self.pools,
            framed,
            CRC_TABLES,
        )
        return EncodedBatch(buffer, offsets, framed)

"""tf.Example's protobuf wire format (tensorflow/core/example/example.proto, feature.proto): the
fields' tags by name, varints, and the sizes and heads of a Features map entry, as the compiled
writers lay them out; `varint` and `length_delimited` for messages built in Python.

An Example is its `features` field; Features is a map, one entry per feature: the key (its
name) and the value (a Feature), whose one set field is a BytesList, FloatList or Int64List. A
BytesList holds each string as a field of its own; a FloatList's and an Int64List's values are
packed into one field (fixed32 each, varints). A null is a Feature with no list set; an empty
numeric list is left out of its Feature (protobuf omits an empty packed field).
"""

from __future__ import annotations

from typing import Sequence

import numba
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from tfx_tabular.source.mapping import Kind

# Wire types.
VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2  # strings, messages and packed fields


def tag(field_number: int, wire_type: int = LENGTH_DELIMITED) -> int:
    """A field's key on the wire: its number and wire type (one byte below field 16)."""
    return field_number << 3 | wire_type


EXAMPLE_FEATURES = tag(1)  # Example.features
FEATURES_ENTRY = tag(1)  # Features.feature: a map entry
ENTRY_KEY = tag(1)  # a map entry's key: the feature's name
ENTRY_VALUE = tag(2)  # a map entry's value: the Feature
BYTES_LIST = tag(1)  # Feature.bytes_list
FLOAT_LIST = tag(2)  # Feature.float_list
INT64_LIST = tag(3)  # Feature.int64_list
LIST_VALUE = tag(1)  # BytesList.value (each string), FloatList / Int64List.value (packed)


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


@numba.njit(cache=True, nogil=True, inline="always")
def put_field_head(buf, pos, field_tag, length):
    """A length-delimited field's tag and length; returns where its `length` bytes go."""
    buf[pos] = field_tag
    return put_varint(buf, pos + 1, length)


@numba.njit(cache=True, nogil=True, inline="always")
def list_tag(kind):
    """The Feature field that holds a value list of `kind` (a `Kind`)."""
    if kind == Kind.BYTES:
        return BYTES_LIST
    return FLOAT_LIST if kind == Kind.FLOAT else INT64_LIST


@numba.njit(cache=True, nogil=True, inline="always")
def list_size(kind, payload):
    """Bytes of a value list given its payload (BytesList is not packed; empty packed lists are
    omitted)."""
    if kind == Kind.BYTES or payload == 0:
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
    (payload -1), the value list's field and length and a packed list's head; returns where its
    `payload` bytes of values go. `encoding._serialize` writes the same bytes inline, since a
    compiled call taking arrays, once per row and feature, costs more than the bytes it writes
    (even inlined: the arrays' references are counted at each call)."""
    entry, feature, size = entry_sizes(header, kind, payload)
    pos = put_field_head(buf, pos, FEATURES_ENTRY, entry)
    for k in range(header):
        buf[pos + k] = headers[h0 + k]
    pos = put_varint(buf, pos + header, feature)
    if payload < 0:
        return pos
    pos = put_field_head(buf, pos, list_tag(kind), size)
    if kind != Kind.BYTES and payload > 0:
        pos = put_field_head(buf, pos, LIST_VALUE, payload)
    return pos


def varint(value: int) -> bytes:
    """A non-negative integer as a varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(field_number: int, payload: bytes) -> bytes:
    """A length-delimited field's wire bytes: its tag, the payload's length, the payload."""
    return varint(tag(field_number)) + varint(len(payload)) + payload


def key_headers(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per feature, the map entry's key field (tag, length, name) and the value field's tag,
    laid end to end, and their offsets."""
    headers = [
        bytes([ENTRY_KEY]) + varint(len(n.encode())) + n.encode() + bytes([ENTRY_VALUE])
        for n in names
    ]
    offsets = np.zeros(len(headers) + 1, dtype=np.int64)
    np.cumsum(np.array([len(h) for h in headers], dtype=np.int64), out=offsets[1:])
    return np.frombuffer(b"".join(headers), dtype=np.uint8), offsets

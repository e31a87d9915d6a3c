"""A batch's features → serialized tf.Example records, one per row, in one compiled pass.

The features come flattened (`flatten`) and pooled (`pools.PooledColumns`); `_serialize` writes
the tf.Example wire format (`wire`) and, if asked, TFRecord framing (`tfrecord`) for all rows at
once, with no per-row Python. The output is wire-compatible with tfx_bsl's
RecordBatchToExamplesEncoder: a null is a feature with no kind set, an empty list an empty typed
list (tests compare both against tf.io.parse_example and tfx_bsl's decoder). Also here: each
record's fingerprint (hash splits) and the gathering of chosen records.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numba
import numpy as np
import pyarrow as pa

from tfx_tabular.coders import intrinsics, tfrecord, wire
from tfx_tabular.coders.flatten import feature_columns
from tfx_tabular.coders.pools import PooledColumns
from tfx_tabular.source.mapping import Feature, Kind


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
        null_cost = wire.entry_bytes(header, kind, -1)
        for r in range(n_rows):
            lo = splits[f, r]
            hi = splits[f, r + 1]
            counts[r, f] = hi - lo
            if not valid[f, r]:
                payloads[r, f] = -1
                bodies[r] += null_cost
                continue
            payload = 0
            if kind == Kind.INT:  # packed varints
                for i in range(lo, hi):
                    payload += wire.varint_size(ints[i])
            elif kind == Kind.FLOAT:  # packed fixed32
                payload = 4 * (hi - lo)
            else:  # strings, not packed: each its own field
                for i in range(lo, hi):
                    length = bend[i] - bstart[i]
                    payload += 1 + wire.varint_size(length) + length
            payloads[r, f] = payload
            bodies[r] += wire.entry_bytes(header, kind, payload)
    frame = tfrecord.FRAME_BYTES if framed else 0
    record_offsets = np.empty(n_rows + 1, dtype=np.int64)
    record_offsets[0] = 0
    for r in range(n_rows):
        body = bodies[r]
        record_offsets[r + 1] = record_offsets[r] + frame + 1 + wire.varint_size(body) + body
    # Pass 2, row by row: write. Per-feature cursors walk the pools, so pass 2 reads row-major.
    buf = np.empty(record_offsets[n_rows], dtype=np.uint8)
    cursors = splits[:, 0].copy()
    for r in range(n_rows):
        pos = record_offsets[r]
        if framed:
            length = record_offsets[r + 1] - pos - tfrecord.FRAME_BYTES
            pos = tfrecord.put_record_head(buf, pos, length, tables)
        start = pos
        pos = wire.put_field_head(buf, pos, wire.EXAMPLE_FEATURES, bodies[r])
        for f in range(n_features):
            kind = kinds[f]
            h0 = header_offsets[f]
            header = header_offsets[f + 1] - h0
            payload = payloads[r, f]
            lo = cursors[f]
            hi = lo + counts[r, f]
            cursors[f] = hi
            # wire.put_entry_head's bytes, and below put_field_head's, inline (see
            # put_entry_head why; tests/unit/test_wire.py holds the two to the same bytes).
            entry, feature, size = wire.entry_sizes(header, kind, payload)
            buf[pos] = wire.FEATURES_ENTRY
            pos = wire.put_varint(buf, pos + 1, entry)
            for k in range(header):
                buf[pos + k] = key_headers[h0 + k]
            pos = wire.put_varint(buf, pos + header, feature)
            if payload < 0:  # null: a Feature with no kind set
                continue
            buf[pos] = wire.list_tag(kind)
            pos = wire.put_varint(buf, pos + 1, size)
            if kind == Kind.BYTES:
                for i in range(lo, hi):
                    b0 = bstart[i]
                    length = bend[i] - b0
                    buf[pos] = wire.LIST_VALUE
                    pos = wire.put_varint(buf, pos + 1, length)
                    # A short string in one 8-byte copy (what follows it is written later).
                    if length <= 8 and b0 + 8 <= len(data) and pos + 8 <= len(buf):
                        intrinsics.store_word(buf, pos, intrinsics.load_word(data, b0))
                    else:
                        for k in range(length):
                            buf[pos + k] = data[b0 + k]
                    pos += length
            elif payload > 0:
                buf[pos] = wire.LIST_VALUE
                pos = wire.put_varint(buf, pos + 1, payload)
                if kind == Kind.FLOAT:
                    float_bytes = floats[lo:hi].view(np.uint8)
                    for k in range(payload):
                        buf[pos + k] = float_bytes[k]
                    pos += payload
                else:
                    for i in range(lo, hi):
                        pos = wire.put_varint(buf, pos, ints[i])
        if framed:
            tfrecord.put_masked_crc(buf, pos, start, pos, tables)
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
        head, tail = self._frame()
        raw = self.buffer.tobytes()
        return [
            raw[a + head : b - tail]
            for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True)
        ]

    def fingerprints(self) -> np.ndarray:
        return fingerprints(self.buffer, self.offsets, *self._frame())

    def _frame(self) -> tuple[int, int]:
        """Bytes of each record's TFRecord frame before and after its tf.Example."""
        return (tfrecord.HEAD_BYTES, tfrecord.TAIL_BYTES) if self.framed else (0, 0)


def encode(
    batch: pa.RecordBatch, features: Sequence[Feature], framed: bool = False
) -> EncodedBatch:
    """Serialize every row of `batch` as a tf.Example with `features` (from `features_of`).

    `framed` adds TFRecord framing (length, masked CRC32C), so records can be written as is.
    """
    return encode_rows(PooledColumns(feature_columns(batch, features)), framed=framed)


def encode_rows(
    pooled: PooledColumns, start: int = 0, stop: Optional[int] = None, framed: bool = False
) -> EncodedBatch:
    """Rows [start, stop) of a pooled batch as tf.Examples (see `encode`)."""
    stop = pooled.rows if stop is None else stop
    whole = start == 0 and stop == pooled.rows
    valid = pooled.valid if whole else np.ascontiguousarray(pooled.valid[:, start:stop])
    buffer, offsets = _serialize(
        stop - start,
        pooled.kinds,
        *pooled.key_headers,
        valid,
        pooled.splits(start, stop),
        *pooled.pools,
        framed,
        tfrecord.CRC_TABLES,
    )
    return EncodedBatch(buffer, offsets, framed)

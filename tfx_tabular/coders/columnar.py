"""Columnar batches, layout 3: many rows in one TFRecord record, each feature a raw buffer.

A record is a tf.Example of up to `batch_rows` rows holding, for each feature i of the type
mapping (values features and ragged row-length partitions alike), bytes values only:

* ``v<i>``: the feature's values over the record's rows, little-endian, laid end to end: int64
  for INT, float32 for FLOAT, and for BYTES each string's 64-bit FarmHash `Fingerprint64`
  (`coders.fingerprint`) as int64. A scalar feature has one slot per row; a null row's slot
  holds what the per-row parse gives a missing value (0, 0.0, or the empty string's
  fingerprint). A list feature has its rows' values only.
* ``m<i>``: one bit per row, 1 where the row holds a value (a null has 0), little-endian bit
  order (row r is bit r % 8 of byte r // 8; the last byte's unused bits 0).
* ``o<i>`` (list features only): the rows' offsets into the values, int64, rows + 1 of them,
  the first 0: the row splits themselves, so a reader needs no cumulative sum.

So a reader decodes every column with one `decode_raw` and never sees a string: the trainer gets
integers and floats only (see `tfx_tabular.training.columnar`). Features are keyed by their index
in the layout (``columnar.json``), so no column name, however awkward, needs escaping.

A split's rows are staged as each read batch comes (`RecordBuffer.add`: one gather per feature
out of the batch's pools, `pools.PooledColumns`, which the per-row encoding has just read), and a
record is written once `batch_rows` rows are staged; a shard's last record may be shorter.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator, Optional, Sequence

import numpy as np

from tfx_tabular.coders import tfrecord, wire
from tfx_tabular.coders.fingerprint import K2
from tfx_tabular.coders.pools import PooledColumns
from tfx_tabular.source.mapping import Feature, Kind

LAYOUT_VERSION = 3
# Folder in an Examples artifact (beside the `Split-<name>` folders stock components read) that
# holds `columnar.json` and one `Split-<name>` folder of columnar records per split.
FOLDER = "columnar"
LAYOUT_FILE = "columnar.json"
DEFAULT_BATCH_ROWS = 8192
# Rows of a run: a record's rows are a whole number of runs (but a shard's last record), so that
# a reader mixes runs of this many neighbouring rows from several records into each batch.
RUN_ROWS = 512
SCALAR, LIST = "scalar", "list"
VALUE_DTYPES = {Kind.INT: np.dtype("<i8"), Kind.FLOAT: np.dtype("<f4"), Kind.BYTES: np.dtype("<i8")}
# What a null scalar's slot holds: the per-row parse's default for a missing value.
# FarmHash's Fingerprint64 of no bytes is its constant k2 (tested against TensorFlow's).
EMPTY_STRING_FINGERPRINT = np.array(K2, np.uint64).view(np.int64).item()
NULL_FILL = {Kind.INT: 0, Kind.FLOAT: 0.0, Kind.BYTES: EMPTY_STRING_FINGERPRINT}


def shape_of(feature: Feature) -> str:
    """Whether a feature has one slot per row (a scalar) or row offsets (a list, or a ragged
    feature's row-length partition)."""
    return SCALAR if feature.list_depth == 0 and feature.row_lengths_of is None else LIST


def values_key(index: int) -> str:
    return f"v{index}"


def mask_key(index: int) -> str:
    return f"m{index}"


def offsets_key(index: int) -> str:
    return f"o{index}"


@dataclasses.dataclass(frozen=True)
class ColumnarLayout:
    """What a columnar payload holds: `features` (name, kind, shape) in key order, rows per
    record and rows per split. Readers refuse a `version` they do not know."""

    batch_rows: int
    features: tuple[tuple[str, int, str], ...]
    rows: dict
    version: int = LAYOUT_VERSION

    def to_json(self) -> str:
        return json.dumps(
            {
                "layout_version": self.version,
                "batch_rows": self.batch_rows,
                "features": [
                    {"name": n, "kind": Kind(k).name, "shape": s} for n, k, s in self.features
                ],
                "rows": self.rows,
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str, source: str = LAYOUT_FILE) -> ColumnarLayout:
        data = json.loads(text)
        version = data.get("layout_version")
        if version != LAYOUT_VERSION:
            raise ValueError(
                f"{source}: columnar layout version {version!r} is not one this tfx-tabular "
                f"reads (it reads version {LAYOUT_VERSION}); convert again, or read the per-row "
                "Examples (input_fn(..., columnar_batches=False))"
            )
        features = tuple((f["name"], int(Kind[f["kind"]]), f["shape"]) for f in data["features"])
        return cls(int(data["batch_rows"]), features, dict(data["rows"]), version)


def layout_of(features: Sequence[Feature], batch_rows: int, rows: dict) -> ColumnarLayout:
    return ColumnarLayout(
        batch_rows, tuple((f.name, int(f.kind), shape_of(f)) for f in features), rows
    )


@dataclasses.dataclass
class _Column:
    """One feature over staged rows: its values, each row's validity, and (lists) its row
    offsets into the values."""

    values: np.ndarray
    valid: np.ndarray  # uint8
    offsets: Optional[np.ndarray] = None  # int64, rows + 1, the first 0


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices of ranges [starts[r], starts[r] + lengths[r]) laid end to end."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(starts - ends + lengths, lengths) + np.arange(total, dtype=np.int64)


def _staged(batch: PooledColumns, f: int, kind: Kind, scalar: bool, rows: np.ndarray) -> _Column:
    """Rows `rows` of feature `f` of a batch as a column of a record."""
    firsts, positions, list_splits, valid = batch.rows_of
    pool = batch.fingerprints if kind == Kind.BYTES else batch.pools[0 if kind == Kind.INT else 1]
    present = valid[f, rows]
    at = positions[f]
    if at < 0:  # one slot per row
        slots = firsts[f] + rows
    else:
        starts = list_splits[at, rows]
        lengths = np.where(present, list_splits[at, rows + 1] - starts, 0)
    if scalar:  # a null's slot filled as the per-row parse would (an all-null column has no slots)
        if at >= 0:
            present, slots = present & (lengths > 0), starts
        taken = pool[np.minimum(slots, len(pool) - 1)] if len(pool) else 0
        values = np.where(present, taken, NULL_FILL[kind])
        return _Column(values.astype(VALUE_DTYPES[kind], copy=False), present.view(np.uint8))
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pool[_ranges(starts, lengths)].astype(VALUE_DTYPES[kind], copy=False)
    return _Column(values, present.view(np.uint8), offsets)


def _joined(columns: Sequence[_Column]) -> _Column:
    if len(columns) == 1:
        return columns[0]
    values = np.concatenate([c.values for c in columns])
    valid = np.concatenate([c.valid for c in columns])
    if columns[0].offsets is None:
        return _Column(values, valid)
    ends = np.cumsum([c.offsets[-1] for c in columns])
    parts = [columns[0].offsets] + [
        c.offsets[1:] + end for c, end in zip(columns[1:], ends[:-1], strict=True)
    ]
    return _Column(values, valid, np.concatenate(parts))


def _cut(column: _Column, start: int, stop: int) -> _Column:
    """Rows [start, stop) of a column (views where it can)."""
    if column.offsets is None:
        return _Column(column.values[start:stop], column.valid[start:stop])
    offsets = column.offsets[start : stop + 1]
    values = column.values[offsets[0] : offsets[-1]]
    return _Column(values, column.valid[start:stop], offsets - offsets[0])


def _entry_head(key: bytes, size: int) -> bytes:
    """A feature map entry's bytes up to its one bytes value's `size` bytes: key, Feature,
    BytesList, value headers."""
    value_list = bytes([wire.LIST_VALUE]) + wire.varint(size)
    bytes_list_size = len(value_list) + size
    feature = bytes([wire.BYTES_LIST]) + wire.varint(bytes_list_size) + value_list
    feature_size = len(feature) + size
    body = bytes([wire.ENTRY_KEY]) + wire.varint(len(key)) + key
    body += bytes([wire.ENTRY_VALUE]) + wire.varint(feature_size)
    return bytes([wire.FEATURES_ENTRY]) + wire.varint(len(body) + feature_size) + body + feature


def frame_record(values: Sequence[tuple[bytes, np.ndarray]]) -> np.ndarray:
    """One framed TFRecord of a tf.Example whose features each hold one bytes value (key, raw
    bytes), as a uint8 array."""
    pieces = []
    for key, data in values:
        raw = data.view(np.uint8).reshape(-1)
        pieces += [np.frombuffer(_entry_head(key, len(raw)), np.uint8), raw]
    body = sum(len(p) for p in pieces)
    head = np.frombuffer(bytes([wire.EXAMPLE_FEATURES]) + wire.varint(body), np.uint8)
    size = len(head) + body
    buf = np.empty(tfrecord.FRAME_BYTES + size, np.uint8)
    pos = tfrecord.put_record_head(buf, 0, size, tfrecord.CRC_TABLES)
    for piece in [head, *pieces]:
        buf[pos : pos + len(piece)] = piece
        pos += len(piece)
    tfrecord.put_masked_crc(buf, pos, tfrecord.HEAD_BYTES, pos, tfrecord.CRC_TABLES)
    return buf


class RecordBuffer:
    """One split's rows waiting to become records of `batch_rows` rows, staged as they come (a
    read batch is let go at once)."""

    def __init__(self, features: Sequence[Feature], batch_rows: int):
        self._batch_rows = batch_rows
        self._kinds = [Kind(f.kind) for f in features]
        self._scalars = [shape_of(f) == SCALAR for f in features]
        self._keys = [
            (values_key(i).encode(), mask_key(i).encode(), offsets_key(i).encode())
            for i in range(len(features))
        ]
        self._pending: list[list[_Column]] = [[] for _ in features]
        self._rows = 0
        self.records = 0

    def add(self, batch: PooledColumns, rows: Optional[np.ndarray]) -> Iterator[np.ndarray]:
        """Adds rows `rows` (all when None) of `batch`; yields each record they complete."""
        rows = np.arange(batch.rows) if rows is None else rows
        if not len(rows):
            return
        for f, (kind, scalar) in enumerate(zip(self._kinds, self._scalars, strict=True)):
            self._pending[f].append(_staged(batch, f, kind, scalar, rows))
        self._rows += len(rows)
        if self._rows < self._batch_rows:
            return
        columns = [_joined(pending) for pending in self._pending]
        full = self._rows // self._batch_rows * self._batch_rows
        for start in range(0, full, self._batch_rows):
            yield self._record([_cut(c, start, start + self._batch_rows) for c in columns])
        self._pending = [[_cut(c, full, self._rows)] for c in columns]
        self._rows -= full

    def flush(self) -> Iterator[np.ndarray]:
        """The last, shorter record, if rows are left."""
        if self._rows:
            columns = [_joined(pending) for pending in self._pending]
            self._pending, self._rows = [[] for _ in self._kinds], 0
            yield self._record(columns)

    def _record(self, columns: Sequence[_Column]) -> np.ndarray:
        values = []
        for (v, m, o), column in zip(self._keys, columns, strict=True):
            values += [(v, column.values), (m, np.packbits(column.valid, bitorder="little"))]
            if column.offsets is not None:
                values.append((o, column.offsets))
        self.records += 1
        return frame_record(values)

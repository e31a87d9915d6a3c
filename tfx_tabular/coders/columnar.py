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
* ``b<i>`` and ``e<i>`` (BYTES features, only in records written with `strings`): the strings
  themselves, for a reader that wants them exactly (a stock `run_fn`, a Transform graph): their
  bytes laid end to end, and where each ends there, int32, one more than the values (the first
  0). A null scalar's string is empty.

So a reader decodes every column with one `decode_raw` and, unless it asks for the strings, never
sees one: the trainer gets integers and floats only (see `tfx_tabular.training.columnar`). Features are keyed by their index
in the layout (``columnar.json``), so no column name, however awkward, needs escaping.

A split's rows are staged as each read batch comes (`RecordBuffer.add`: the scalars by one
compiled gather per value dtype out of the batch's pools, `pools.PooledColumns`, which the
per-row encoding has just read; lists by numpy), and a record is written once `batch_rows` rows
are staged; a shard's last record may be shorter.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Iterator, Optional, Sequence

import numba
import numpy as np

from tfx_tabular.coders import intrinsics, tfrecord, wire
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


def string_bytes_key(index: int) -> str:
    return f"b{index}"


def string_ends_key(index: int) -> str:
    return f"e{index}"


@dataclasses.dataclass(frozen=True)
class ColumnarLayout:
    """What a columnar payload holds: `features` (name, kind, shape) in key order, rows per
    record, rows per split, and whether the records hold the strings too (`strings`). Readers
    refuse a `version` they do not know."""

    batch_rows: int
    features: tuple[tuple[str, int, str], ...]
    rows: dict
    strings: bool = False
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
                "strings": self.strings,
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
        strings = bool(data.get("strings", False))
        return cls(int(data["batch_rows"]), features, dict(data["rows"]), strings, version)


def layout_of(
    features: Sequence[Feature], batch_rows: int, rows: dict, strings: bool = False
) -> ColumnarLayout:
    return ColumnarLayout(
        batch_rows, tuple((f.name, int(f.kind), shape_of(f)) for f in features), rows, strings
    )


@dataclasses.dataclass
class _List:
    """A list feature over staged rows: its values and the rows' offsets into them."""

    values: np.ndarray
    offsets: np.ndarray  # int64, rows + 1, the first 0


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices of ranges [starts[r], starts[r] + lengths[r]) laid end to end."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(starts - ends + lengths, lengths) + np.arange(total, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _stage_scalars(rows, at, features, fill, rows_of, pool, out, out_valid):
    """Rows `rows` of scalar `features` into out[j, at:] (a null's slot filled with `fill`)
    and their validity into out_valid[features[j], at:]; `pool` holds the features' values."""
    firsts, positions, list_splits, valid = rows_of
    for j in range(len(features)):
        f = features[j]
        p = positions[f]
        for k in range(len(rows)):
            r = rows[k]
            present = valid[f, r]
            if p < 0:
                slot = firsts[f] + r
            else:  # pooled as a list of at most one value: no value is a null
                slot = list_splits[p, r]
                present = present and list_splits[p, r + 1] > slot
            out_valid[f, at + k] = present
            out[j, at + k] = pool[slot] if present else fill


def _staged_list(batch: PooledColumns, f: int, kind: Kind, rows: np.ndarray) -> _List:
    """Rows `rows` of list feature `f` of a batch."""
    _, positions, list_splits, valid = batch.rows_of
    at = positions[f]
    starts = list_splits[at, rows]
    lengths = np.where(valid[f, rows], list_splits[at, rows + 1] - starts, 0)
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = _pool_of(batch, kind)[_ranges(starts, lengths)]
    return _List(values.astype(VALUE_DTYPES[kind], copy=False), offsets)


@numba.njit(cache=True, nogil=True)
def _strings_at(slots, present, starts, ends, data):
    """The strings at pool slots `slots` (empty where not `present`: a null's slot may be
    past the pool's end), as their bytes end to end and their lengths."""
    lengths = np.zeros(len(slots), np.int64)
    for j in range(len(slots)):
        if present[j]:
            lengths[j] = ends[slots[j]] - starts[slots[j]]
    out = np.empty(lengths.sum(), np.uint8)
    at = 0
    for j in range(len(slots)):
        length = lengths[j]
        if not length:
            continue
        start = starts[slots[j]]
        # A short string in one 8-byte copy (what follows it is written later); written out
        # here as in the per-row encoder: a shared compiled helper was slower in this loop.
        if length <= 8 and start + 8 <= len(data) and at + 8 <= len(out):
            intrinsics.store_word(out, at, intrinsics.load_word(data, start))
        else:
            for k in range(length):
                out[at + k] = data[start + k]
        at += length
    return out, lengths


def _staged_strings(batch: PooledColumns, f: int, scalar: bool, rows: np.ndarray) -> _List:
    """The strings of rows `rows` of BYTES feature `f` of a batch (a scalar's one a row, a
    null's empty; a list's values), as their bytes (`values`) and lengths (`offsets`)."""
    firsts, positions, list_splits, valid = batch.rows_of
    _, _, starts, ends, data = batch.pools
    at = positions[f]
    if at < 0:  # a scalar's slots
        slots, present = firsts[f] + rows, valid[f, rows]
    else:
        first = list_splits[at, rows]
        counts = np.where(valid[f, rows], list_splits[at, rows + 1] - first, 0)
        if scalar:  # pooled as a list of at most one value: no value is a null
            slots, present = first, counts > 0
        else:
            slots = _ranges(first, counts)
            present = np.ones(len(slots), np.bool_)
    return _List(*_strings_at(slots, present, starts, ends, data))


def _string_columns(parts: Sequence[_List], name: str) -> tuple[np.ndarray, np.ndarray]:
    """Staged strings (bytes, lengths) → a record's bytes and int32 ends (the first 0)."""
    data = np.concatenate([p.values for p in parts]) if parts else np.zeros(0, np.uint8)
    if len(data) > np.iinfo(np.int32).max:
        raise ValueError(
            f"feature {name!r}: a columnar record's strings hold more than 2 GiB; write "
            "fewer columnar_batch_rows"
        )
    lengths = np.concatenate([p.offsets for p in parts]) if parts else np.zeros(0, np.int64)
    ends = np.zeros(len(lengths) + 1, np.dtype("<i4"))
    np.cumsum(lengths, out=ends[1:])
    return data, ends


def _joined(lists: Sequence[_List]) -> _List:
    if len(lists) == 1:
        return lists[0]
    ends = np.cumsum([c.offsets[-1] for c in lists])
    parts = [lists[0].offsets] + [
        c.offsets[1:] + end for c, end in zip(lists[1:], ends[:-1], strict=True)
    ]
    return _List(np.concatenate([c.values for c in lists]), np.concatenate(parts))


def _pool_of(batch: PooledColumns, kind: Kind) -> np.ndarray:
    if kind != Kind.BYTES:
        return batch.pools[0 if kind == Kind.INT else 1]
    if batch.fingerprints is None:
        raise ValueError("columnar records need the batch's string fingerprints")
    return batch.fingerprints


@functools.lru_cache(maxsize=4096)
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
    read batch is let go at once): scalars into one array per value dtype, a row per feature
    (a compiled gather per batch), lists as their values and offsets; with `strings`, each
    BYTES feature's strings as their bytes and lengths too."""

    def __init__(self, features: Sequence[Feature], batch_rows: int, strings: bool = False):
        self._batch_rows = batch_rows
        self._names = [f.name for f in features]
        kinds = [Kind(f.kind) for f in features]
        scalars = [shape_of(f) == SCALAR for f in features]
        self._keys = [
            (values_key(i).encode(), mask_key(i).encode(), offsets_key(i).encode())
            for i in range(len(features))
        ]
        # (kind of pool, features) of the scalars staged into each dtype's array
        self._scalar_groups = [
            (kind, np.array([f for f, k in enumerate(kinds) if k == kind and scalars[f]], np.int64))
            for kind in (Kind.INT, Kind.BYTES, Kind.FLOAT)
        ]
        self._lists = [(f, k) for f, (k, s) in enumerate(zip(kinds, scalars, strict=True)) if not s]
        # INT and BYTES scalars share the int64 array, INT's rows first
        self._int_rows = {Kind.INT: 0, Kind.BYTES: len(self._scalar_groups[0][1])}
        int_scalars = self._int_rows[Kind.BYTES] + len(self._scalar_groups[1][1])
        self._ints = np.empty((int_scalars, batch_rows), VALUE_DTYPES[Kind.INT])
        self._floats = np.empty(
            (len(self._scalar_groups[2][1]), batch_rows), VALUE_DTYPES[Kind.FLOAT]
        )
        self._valid = np.empty((len(features), batch_rows), np.uint8)
        # where each feature is staged: ("scalar", array, row) or ("list", index in self._lists)
        self._where: list = [None] * len(features)
        for kind, group in self._scalar_groups:
            out = self._floats if kind == Kind.FLOAT else self._ints
            base = 0 if kind == Kind.FLOAT else self._int_rows[kind]
            for j, f in enumerate(group):
                self._where[f] = ("scalar", out, base + j)
        for i, (f, _) in enumerate(self._lists):
            self._where[f] = ("list", i)
        self._pending: list[list[_List]] = [[] for _ in self._lists]
        # (feature, scalar) of the BYTES features whose strings are staged
        self._strings = [
            (f, scalars[f]) for f, k in enumerate(kinds) if strings and k == Kind.BYTES
        ]
        self._pending_strings: list[list[_List]] = [[] for _ in self._strings]
        self._rows = 0
        self.records = 0

    def add(self, batch: PooledColumns, rows: Optional[np.ndarray]) -> Iterator[np.ndarray]:
        """Adds rows `rows` (all when None) of `batch`; yields each record they complete."""
        rows = np.arange(batch.rows) if rows is None else np.asarray(rows, np.int64)
        done = 0
        while done < len(rows):
            chunk = rows[done : done + self._batch_rows - self._rows]
            self._stage(batch, chunk)
            done += len(chunk)
            if self._rows == self._batch_rows:
                yield self._record()

    def flush(self) -> Iterator[np.ndarray]:
        """The last, shorter record, if rows are left."""
        if self._rows:
            yield self._record()

    def _stage(self, batch: PooledColumns, rows: np.ndarray) -> None:
        for kind, group in self._scalar_groups:
            if not len(group):
                continue
            out = self._floats if kind == Kind.FLOAT else self._ints[self._int_rows[kind] :]
            fill = out.dtype.type(NULL_FILL[kind])
            pool = _pool_of(batch, kind).astype(out.dtype, copy=False)
            _stage_scalars(rows, self._rows, group, fill, batch.rows_of, pool, out, self._valid)
        valid = batch.rows_of[3]
        for i, (f, kind) in enumerate(self._lists):
            self._valid[f, self._rows : self._rows + len(rows)] = valid[f, rows]
            self._pending[i].append(_staged_list(batch, f, kind, rows))
        for i, (f, scalar) in enumerate(self._strings):
            self._pending_strings[i].append(_staged_strings(batch, f, scalar, rows))
        self._rows += len(rows)

    def _record(self) -> np.ndarray:
        rows, self._rows = self._rows, 0
        bits = np.packbits(self._valid[:, :rows], axis=1, bitorder="little")
        lists = [_joined(pending) for pending in self._pending]
        self._pending = [[] for _ in self._lists]
        values = []
        for f, (v, m, o) in enumerate(self._keys):
            where = self._where[f]
            if where[0] == "scalar":
                values += [(v, where[1][where[2], :rows]), (m, bits[f])]
            else:
                column = lists[where[1]]
                values += [(v, column.values), (m, bits[f]), (o, column.offsets)]
        for i, (f, _) in enumerate(self._strings):
            data, ends = _string_columns(self._pending_strings[i], self._names[f])
            values += [(string_bytes_key(f).encode(), data), (string_ends_key(f).encode(), ends)]
        self._pending_strings = [[] for _ in self._strings]
        self.records += 1
        return frame_record(values)

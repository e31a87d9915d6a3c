"""Columnar batches: many rows in one TFRecord record, each feature's values together.

A record is one tf.Example of up to `batch_rows` rows cut into slices of `slice_rows` rows (the
last ones may be shorter). For each feature of the type mapping (values features and ragged
row-length partitions alike) and each slice s, it holds ``v<i>_<s>``, the feature's values over
the slice's rows in row order, and ``l<i>_<s>``, one bytes value: each row's value count (0 for
a null row) as uint8 for a scalar feature (0 or 1) or little-endian int32 for a list, read back
with one `decode_raw` instead of a varint per row. Row r of a slice is therefore exactly the list
the per-row record holds for that feature (a null, which the per-row record leaves without a
kind, has 0 values; so has an empty list, and the per-row parse gives both the same tensor).
Features are keyed by their index in the layout (``columnar.json``) so no column name, however
awkward, needs escaping.

Why slices: parsing slice s of several records in one `parse_example` call gives their rows
already concatenated, so a training batch mixes rows of several records with no copy beyond the
parse itself (see `tfx_tabular.training.columnar`).

Records are written by the same compiled serializer as per-row Examples, one call per record
(an Example whose features are the slices of the columns); the rows a record takes from each
read batch are gathered for all features of a kind at once.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator, Optional, Sequence

import numba
import numpy as np

from tfx_tabular.coders import encoding
from tfx_tabular.source.mapping import Feature, Kind

LAYOUT_VERSION = 2
# Folder in an Examples artifact (beside the `Split-<name>` folders stock components read) that
# holds `columnar.json` and one `Split-<name>` folder of columnar records per split.
FOLDER = "columnar"
LAYOUT_FILE = "columnar.json"
DEFAULT_BATCH_ROWS = 8192
# Rows per slice of a record: a training batch of a multiple of it is read without a copy (see
# the module docstring); its rows come in runs of this many neighbours.
SLICE_ROWS = 512


def lengths_dtype(feature: Feature) -> str:
    """How a feature's row lengths are stored: uint8 for scalars (0 or 1 value), int32 for lists."""
    return "uint8" if feature.list_depth == 0 and feature.row_lengths_of is None else "int32"


def values_key(index: int, slice_index: int | str) -> str:
    """The key of feature `index`'s values in slice `slice_index` ("": the key's prefix, to
    which a reader appends slice indices it computes)."""
    return f"v{index}_{slice_index}"


def lengths_key(index: int, slice_index: int | str) -> str:
    """The key of feature `index`'s row lengths in slice `slice_index` ("": the prefix)."""
    return f"l{index}_{slice_index}"


@dataclasses.dataclass(frozen=True)
class ColumnarLayout:
    """What a columnar payload holds: `features` (name, kind, lengths dtype) in key order, rows
    per record and per slice, and rows per split. Readers refuse a `version` they do not know."""

    batch_rows: int
    features: tuple[tuple[str, int, str], ...]
    rows: dict
    slice_rows: int = SLICE_ROWS
    version: int = LAYOUT_VERSION

    @property
    def slices(self) -> int:
        """Slices in a full record."""
        return -(-self.batch_rows // self.slice_rows)

    def to_json(self) -> str:
        return json.dumps(
            {
                "layout_version": self.version,
                "batch_rows": self.batch_rows,
                "slice_rows": self.slice_rows,
                "features": [
                    {"name": n, "kind": Kind(k).name, "lengths": d} for n, k, d in self.features
                ],
                "rows": self.rows,
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str, source: str = "columnar.json") -> ColumnarLayout:
        data = json.loads(text)
        version = data.get("layout_version")
        if version != LAYOUT_VERSION:
            raise ValueError(
                f"{source}: columnar layout version {version!r} is not one this tfx-tabular "
                f"reads (it reads version {LAYOUT_VERSION}); convert again, or read the per-row "
                "Examples (input_fn(..., columnar_batches=False))"
            )
        features = tuple((f["name"], int(Kind[f["kind"]]), f["lengths"]) for f in data["features"])
        return cls(
            int(data["batch_rows"]), features, dict(data["rows"]), int(data["slice_rows"]), version
        )


def layout_of(
    features: Sequence[Feature], batch_rows: int, rows: dict, slice_rows: int = SLICE_ROWS
) -> ColumnarLayout:
    return ColumnarLayout(
        batch_rows,
        tuple((f.name, int(f.kind), lengths_dtype(f)) for f in features),
        rows,
        min(slice_rows, batch_rows),
    )


class PooledBatch:
    """A read batch's columns as records take rows from them, for every feature of a kind at
    once: the batch's pools (`encoding.PooledColumns`, shared with the per-row encoding) and,
    per kind, each of its features' (in layout order) row starts there and value counts per row
    (0 for a null: a null scalar still owns a slot). Built once per batch, shared by the
    splits."""

    def __init__(self, kinds: dict, pooled: encoding.PooledColumns):
        self.rows = pooled.rows
        self.starts, self.lengths = {}, {}
        for kind, members in kinds.items():
            splits = pooled.splits(0, pooled.rows, members)
            self.starts[kind] = splits  # row r starts at column r (the last column: the end)
            # int32: held until records fill
            self.lengths[kind] = (np.diff(splits, axis=1) * pooled.valid[members]).astype(np.int32)
        ints, floats, string_starts, self.string_ends, self.data = pooled.pools
        # Each kind's items: values, or for BYTES each string's start in `data`.
        self.items = {Kind.INT: ints, Kind.FLOAT: floats, Kind.BYTES: string_starts}


@numba.njit(cache=True, nogil=True)
def _row_counts(lengths, rows):
    """Each feature's (row of `lengths`) items in rows `rows`."""
    counts = np.zeros(lengths.shape[0], np.int64)
    for f in range(lengths.shape[0]):
        for r in rows:
            counts[f] += lengths[f, r]
    return counts


@numba.njit(cache=True, nogil=True)
def _take_rows(batch, rows, shift, out, firsts, row0, slice_rows):
    """Rows `rows` of a batch's features of one kind, in that order, from record row `row0` on:
    each feature f's items into out.items from firsts[f] on (plus `shift`, 0: as they are; for
    strings, their ends too), its row lengths into out.lengths[f], and where each of its slices
    starts into out.slice_items."""
    starts, lengths, items, ends = batch
    out_items, out_ends, out_lengths, slice_items = out
    for f in range(starts.shape[0]):
        pos = firsts[f]
        for i in range(len(rows)):
            row, r = row0 + i, rows[i]
            if row % slice_rows == 0:
                slice_items[row // slice_rows, f] = pos
            n, start = lengths[f, r], starts[f, r]
            out_lengths[f, row] = n
            for k in range(n):
                if shift:
                    out_items[pos + k] = items[start + k] + shift
                else:
                    out_items[pos + k] = items[start + k]
            for k in range(n if len(ends) else 0):
                out_ends[pos + k] = ends[start + k] + shift
            pos += n


_NO_ENDS = np.zeros(0, np.int64)  # a numeric kind's string ends: none


class RecordEncoder:
    """Writes records of rows taken from `PooledBatch`es of `features`, in slices of
    `slice_rows` rows, with one serializer call per record and, per record, a few array
    operations per kind of value whatever the number of features. A record's entries are
    ordered slice by slice, so a shorter record's keys are a prefix of a full one's."""

    def __init__(self, features: Sequence[Feature], batch_rows: int, slice_rows: int):
        self._slice_rows = slice_rows
        count = len(features)
        slices = -(-batch_rows // slice_rows)
        names = [
            key(i, s)
            for s in range(slices)
            for i in range(count)
            for key in (values_key, lengths_key)
        ]
        self._headers = encoding.key_headers(names)
        kinds = np.full((slices, count, 2), int(Kind.BYTES), np.int64)
        kinds[:, :, 0] = [int(f.kind) for f in features]
        self._kinds = kinds.reshape(-1)
        self.kinds = {
            kind: [i for i, f in enumerate(features) if f.kind == kind]
            for kind in (Kind.INT, Kind.FLOAT, Kind.BYTES)
        }
        # A record's row-length bytes: every uint8 feature's rows, then every int32 feature's;
        # feature i's row r at byte base + _width[i] * (_position[i] * rows + r), where base is
        # 0 for uint8 features and the uint8 features' bytes for int32 ones (see `_encoded`).
        narrow = np.array([lengths_dtype(f) == "uint8" for f in features], bool)
        self._narrow = np.flatnonzero(narrow)
        self._wide = np.flatnonzero(~narrow)
        self._width = np.where(narrow, 1, 4)
        self._position = np.empty(count, np.int64)
        self._position[self._narrow] = np.arange(len(self._narrow))
        self._position[self._wide] = np.arange(len(self._wide))

    def encode(self, pieces: Sequence[tuple[PooledBatch, np.ndarray]]) -> np.ndarray:
        """One framed TFRecord holding rows `rows` of each (batch, rows) piece, in order."""
        rows = sum(len(r) for _, r in pieces)
        starts = np.arange(0, rows, self._slice_rows)
        stops = np.minimum(starts + self._slice_rows, rows)
        lengths = np.empty((len(self._width), rows), np.int32)
        # [slice, feature, (values, lengths), (first item, end)] into the kinds' pools.
        splits = np.empty((len(starts), len(self._width), 2, 2), np.int64)
        pools = {
            kind: self._gather(kind, members, pieces, lengths, splits) if members else None
            for kind, members in self.kinds.items()
        }
        return self._encoded(pools, lengths, splits, starts, stops)

    def _gather(self, kind: Kind, members: list, pieces, lengths, splits):
        """The values of the pieces' rows of `kind`'s features (`members`), feature-major
        (strings: their [start, end) into the pieces' data laid end to end, and those data
        arrays); fills the members' rows of `lengths` and their value entries in `splits`."""
        counts = np.stack([_row_counts(b.lengths[kind], r) for b, r in pieces])
        # Where piece p's values of feature f go: after every piece's values of the features
        # before f, and the earlier pieces' values of f.
        firsts = np.cumsum(counts, axis=0) - counts + encoding.cumulative(counts.sum(axis=0))[:-1]
        total = int(counts.sum())
        strings = kind == Kind.BYTES
        kind_lengths = np.empty((len(members), lengths.shape[1]), np.int32)
        slice_items = np.empty((len(splits) + 1, len(members)), np.int64)
        out = (
            np.empty(total, np.int64 if strings else pieces[0][0].items[kind].dtype),
            np.empty(total if strings else 0, np.int64),
            kind_lengths,
            slice_items,
        )
        row, data_base = 0, 0
        for (batch, rows), first in zip(pieces, firsts, strict=True):
            ends = batch.string_ends if strings else _NO_ENDS
            taken = (batch.starts[kind], batch.lengths[kind], batch.items[kind], ends)
            _take_rows(taken, rows, data_base, out, first, row, self._slice_rows)
            row += len(rows)
            data_base += len(batch.data) if strings else 0
        slice_items[-1] = firsts[-1] + counts[-1]  # each feature's end
        lengths[members] = kind_lengths
        splits[:, members, 0, 0] = slice_items[:-1]
        splits[:, members, 0, 1] = slice_items[1:]
        if strings:
            return out[0], out[1], [batch.data for batch, _ in pieces]
        return out[0]

    def _encoded(self, pools: dict, lengths: np.ndarray, splits, starts, stops) -> np.ndarray:
        """The record: value entries from `pools`, each (slice, feature)'s row lengths one
        string appended to the BYTES pool."""
        rows = lengths.shape[1]
        length_bytes = [
            lengths[self._narrow].astype(np.uint8).ravel(),
            lengths[self._wide].astype("<i4").ravel().view(np.uint8),
        ]
        base = np.where(self._width == 1, 0, len(self._narrow) * rows)
        first = base + self._width * self._position * rows  # [feature]
        length_starts = (first[None, :] + self._width[None, :] * starts[:, None]).ravel()
        length_ends = (first[None, :] + self._width[None, :] * stops[:, None]).ravel()
        no_strings = (np.zeros(0, np.int64), np.zeros(0, np.int64), [])
        value_starts, value_ends, data = pools[Kind.BYTES] or no_strings
        data_bytes = sum(len(d) for d in data)
        strings = len(value_starts)
        entries = np.arange(len(starts) * len(self._width)).reshape(len(starts), -1) + strings
        splits[:, :, 1, 0] = entries
        splits[:, :, 1, 1] = entries + 1
        arrays = (
            np.zeros(0, np.int64) if pools[Kind.INT] is None else pools[Kind.INT],
            np.zeros(0, np.float32) if pools[Kind.FLOAT] is None else pools[Kind.FLOAT],
            np.concatenate([value_starts, length_starts + data_bytes]),
            np.concatenate([value_ends, length_ends + data_bytes]),
            np.concatenate([*data, *length_bytes]),  # the pieces' strings copied once
        )
        entries = splits.size // 2
        buffer, offsets = self._headers
        return encoding.encode_example(
            self._kinds[:entries], (buffer, offsets[: entries + 1]), splits.reshape(-1, 2), arrays
        )


class RecordBuffer:
    """One split's rows waiting to become records of `batch_rows` rows: (batch, rows) pieces,
    cut where a record ends."""

    def __init__(self, features: Sequence[Feature], batch_rows: int, slice_rows: int = SLICE_ROWS):
        self._batch_rows = batch_rows
        self.encoder = RecordEncoder(features, batch_rows, min(slice_rows, batch_rows))
        self._pieces: list[tuple[PooledBatch, np.ndarray]] = []
        self._rows = 0
        self.records = 0

    def add(self, batch: PooledBatch, rows: Optional[np.ndarray]) -> Iterator:
        """Adds rows `rows` (all when None) of `batch`; yields each record they complete."""
        rows = np.arange(batch.rows) if rows is None else rows
        if not len(rows):
            return
        self._pieces.append((batch, rows))
        self._rows += len(rows)
        while self._rows >= self._batch_rows:
            yield self._record(self._batch_rows)

    def flush(self) -> Iterator:
        """The last, shorter record, if rows are left."""
        if self._rows:
            yield self._record(self._rows)

    def _record(self, rows: int) -> np.ndarray:
        """A record of the first `rows` rows waiting."""
        head, taken = [], 0
        while taken < rows:
            batch, chosen = self._pieces.pop(0)
            if taken + len(chosen) > rows:
                cut = rows - taken
                self._pieces.insert(0, (batch, chosen[cut:]))
                chosen = chosen[:cut]
            head.append((batch, chosen))
            taken += len(chosen)
        record = self.encoder.encode(head)
        self._rows -= rows
        self.records += 1
        return record

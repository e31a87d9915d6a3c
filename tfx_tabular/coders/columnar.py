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
(an Example whose features are the slices of the columns); only the row selection and
concatenation below are new, all vectorized.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator, Optional, Sequence

import numpy as np

from tfx_tabular.coders import encoding
from tfx_tabular.coders.encoding import FeatureValues, rows_of
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


def _row_lengths(fv: FeatureValues) -> np.ndarray:
    # A null row writes no values (a null scalar still owns one slot in `row_splits`).
    return np.where(fv.valid, np.diff(fv.row_splits), 0)


def _value_indices(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenated ranges [starts[r], starts[r] + lengths[r])."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    shift = np.repeat(starts - (ends - lengths), lengths)
    return np.arange(total, dtype=np.int64) + shift


def _take_slots(fv: FeatureValues, rows: Optional[np.ndarray]) -> FeatureValues:
    """`take_rows` for a scalar feature (row r's value is slot r, or none where null)."""
    valid = fv.valid if rows is None else fv.valid[rows]
    index = np.flatnonzero(valid) if rows is None else rows[valid]
    splits = np.zeros(len(valid) + 1, np.int64)
    np.cumsum(valid, out=splits[1:])
    return _compacted(fv, splits, index)


def take_rows(fv: FeatureValues, rows: Optional[np.ndarray], scalar: bool = False) -> FeatureValues:
    """Rows `rows` (all when None) of a feature, compacted: only their written values, nulls as
    empty valid rows. Strings are not copied: they become codes into `fv`'s buffers. `scalar`:
    the feature holds at most one value per row, in the row's own slot."""
    if scalar and fv.row_splits[-1] == len(fv.valid):  # not an all-null (null-typed) column
        return _take_slots(fv, rows)
    lengths = _row_lengths(fv)
    starts = fv.row_splits[:-1]
    if rows is not None:
        lengths, starts = lengths[rows], starts[rows]
    splits = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=splits[1:])
    return _compacted(fv, splits, _value_indices(starts, lengths))


def _compacted(fv: FeatureValues, splits: np.ndarray, index: np.ndarray) -> FeatureValues:
    """Values `index` of `fv` as rows split by `splits`, all valid."""
    valid = np.ones(len(splits) - 1, bool)
    if fv.data is None:
        return FeatureValues(splits, valid, fv.values[index])
    codes = index if fv.codes is None else fv.codes[index].astype(np.int64, copy=False)
    return FeatureValues(splits, valid, fv.values, fv.data, codes)


def concat(pieces: Sequence[FeatureValues]) -> FeatureValues:
    """Compacted pieces (from `take_rows`) of one feature, one after the other."""
    if len(pieces) == 1:
        return pieces[0]
    lengths = np.concatenate([np.diff(p.row_splits) for p in pieces])
    splits = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=splits[1:])
    valid = np.ones(len(lengths), bool)
    if pieces[0].data is None:
        return FeatureValues(splits, valid, np.concatenate([p.values for p in pieces]))
    # Strings: the pieces' dictionaries (offsets into their data) laid end to end.
    offsets, codes, data = [], [], []
    entries = data_size = 0
    for p in pieces:
        offsets.append(p.values + data_size)
        codes.append(p.codes + entries)
        data.append(p.data)
        entries += len(p.values)
        data_size += len(p.data)
    return FeatureValues(
        splits, valid, np.concatenate(offsets), np.concatenate(data), np.concatenate(codes)
    )


class RecordEncoder:
    """Writes records of compacted columns (from `take_rows` and `concat`) of `features`, in
    slices of `slice_rows` rows, with one serializer call per record. A record's entries are
    ordered slice by slice, so a shorter record's keys are a prefix of a full one's."""

    def __init__(self, features: Sequence[Feature], batch_rows: int, slice_rows: int):
        self._features = list(features)
        self._slice_rows = slice_rows
        slices = -(-batch_rows // slice_rows)
        names = [
            key(i, s)
            for s in range(slices)
            for i in range(len(self._features))
            for key in (values_key, lengths_key)
        ]
        self._headers = encoding.key_headers(names)
        kinds = np.full((slices, len(self._features), 2), int(Kind.BYTES), np.int64)
        kinds[:, :, 0] = [int(f.kind) for f in self._features]
        self._kinds = kinds.reshape(-1)
        self._lengths_dtypes = [
            np.dtype(lengths_dtype(f)).newbyteorder("<") for f in self._features
        ]

    def encode(self, columns: Sequence[FeatureValues]) -> np.ndarray:
        """One framed TFRecord holding `columns` (one per feature, equal rows)."""
        rows = len(columns[0].valid) if columns else 0
        starts = np.arange(0, rows, self._slice_rows)
        stops = np.minimum(starts + self._slice_rows, rows)
        slices = np.arange(len(starts))
        # [slice, feature, (values, lengths), (first item, end)] into the kinds' pools.
        splits = np.empty((len(starts), len(columns), 2, 2), np.int64)
        pools = encoding.ValuePools()
        for i, (feature, fv) in enumerate(zip(self._features, columns, strict=True)):
            base = pools.add(feature.kind, fv)
            splits[:, i, 0, 0] = base + fv.row_splits[starts]
            splits[:, i, 0, 1] = base + fv.row_splits[stops]
            lengths = np.diff(fv.row_splits).astype(self._lengths_dtypes[i]).view(np.uint8)
            width = self._lengths_dtypes[i].itemsize
            base = pools.add_strings(lengths, starts * width, stops * width)
            splits[:, i, 1, 0] = base + slices
            splits[:, i, 1, 1] = base + slices + 1
        entries = splits.size // 2
        buffer, offsets = self._headers
        return encoding.encode_example(
            self._kinds[:entries], (buffer, offsets[: entries + 1]), splits.reshape(-1, 2), pools
        )


class RecordBuffer:
    """One split's rows waiting to become records of `batch_rows` rows."""

    def __init__(self, features: Sequence[Feature], batch_rows: int, slice_rows: int = SLICE_ROWS):
        self._batch_rows = batch_rows
        self._scalars = [lengths_dtype(f) == "uint8" for f in features]
        self._encoder = RecordEncoder(features, batch_rows, min(slice_rows, batch_rows))
        self._pieces: list[list[FeatureValues]] = []
        self._rows = 0
        self.records = 0

    def add(self, columns: Sequence[FeatureValues], rows: Optional[np.ndarray]) -> Iterator:
        """Adds rows `rows` of `columns` (one per feature); yields each record they complete."""
        piece = [
            take_rows(fv, rows, scalar) for fv, scalar in zip(columns, self._scalars, strict=True)
        ]
        count = len(piece[0].valid) if piece else 0
        if not count:
            return
        self._pieces.append(piece)
        self._rows += count
        while self._rows >= self._batch_rows:
            yield self._record(self._batch_rows)

    def flush(self) -> Iterator:
        """The last, shorter record, if rows are left."""
        if self._rows:
            yield self._record(self._rows)

    def _record(self, rows: int) -> np.ndarray:
        """A record of the first `rows` rows waiting; the rest keep their own buffers (a
        merged remainder would carry every earlier piece's strings into the next record)."""
        head, rest, taken = [], list(self._pieces), 0
        while taken < rows:
            piece = rest.pop(0)
            count = len(piece[0].valid)
            if taken + count > rows:
                cut = rows - taken
                rest.insert(0, [rows_of(fv, cut, count) for fv in piece])
                piece, count = [rows_of(fv, 0, cut) for fv in piece], cut
            head.append(piece)
            taken += count
        columns = [concat(c) for c in zip(*head, strict=True)]
        record = self._encoder.encode(columns)
        self._pieces, self._rows = rest, self._rows - rows
        self.records += 1
        return record

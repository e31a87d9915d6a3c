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

Records are written by the same compiled serializer as per-row Examples (one "row" whose lists
are whole slices of columns); only the row selection and concatenation below are new, all
vectorized.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator, Optional, Sequence

import numpy as np

from tfx_tabular.coders.encoding import FeatureValues, encode_columns, rows_of
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


def values_key(index: int, slice_index: int) -> str:
    return f"v{index}_{slice_index}"


def lengths_key(index: int, slice_index: int) -> str:
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


def take_rows(fv: FeatureValues, rows: Optional[np.ndarray]) -> FeatureValues:
    """Rows `rows` (all when None) of a feature, compacted: only their written values, nulls as
    empty valid rows. Strings are not copied: they become codes into `fv`'s buffers."""
    lengths = _row_lengths(fv)
    starts = fv.row_splits[:-1]
    if rows is not None:
        lengths, starts = lengths[rows], starts[rows]
    index = _value_indices(starts, lengths)
    splits = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=splits[1:])
    valid = np.ones(len(lengths), bool)
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


_VALID = np.ones(1, bool)
_ONE_ROW = np.array([0, 1], np.int64)


def _one_row(count: int) -> np.ndarray:
    return np.array([0, count], np.int64)


def _slice_features(i: int, s: int, feature: Feature, fv: FeatureValues) -> list:
    """The values and lengths features of slice `s` (compacted `fv`) of feature `i`."""
    count = len(fv.values) if fv.data is None else len(fv.codes)
    lengths = np.diff(fv.row_splits).astype(np.dtype(lengths_dtype(feature)).newbyteorder("<"))
    return [
        (
            Feature(values_key(i, s), feature.column, (), feature.kind, None),
            FeatureValues(_one_row(count), _VALID, fv.values, fv.data, fv.codes),
        ),
        (
            Feature(lengths_key(i, s), feature.column, (), Kind.BYTES, None),
            FeatureValues(_ONE_ROW, _VALID, _one_row(lengths.nbytes), lengths.view(np.uint8)),
        ),
    ]


def encode_record(
    features: Sequence[Feature], columns: Sequence[FeatureValues], slice_rows: int
) -> np.ndarray:
    """One framed TFRecord holding compacted `columns` (one per feature, equal rows), in slices
    of `slice_rows` rows."""
    rows = len(columns[0].valid) if columns else 0
    ordered = []
    for s, start in enumerate(range(0, rows, slice_rows)):
        stop = min(start + slice_rows, rows)
        for i, (feature, fv) in enumerate(zip(features, columns, strict=True)):
            ordered += _slice_features(i, s, feature, rows_of(fv, start, stop))
    return encode_columns(1, ordered, framed=True).buffer


class RecordBuffer:
    """One split's rows waiting to become records of `batch_rows` rows."""

    def __init__(self, features: Sequence[Feature], batch_rows: int, slice_rows: int = SLICE_ROWS):
        self._features = list(features)
        self._batch_rows = batch_rows
        self._slice_rows = min(slice_rows, batch_rows)
        self._pieces: list[list[FeatureValues]] = []
        self._rows = 0
        self.records = 0

    def add(self, columns: Sequence[FeatureValues], rows: Optional[np.ndarray]) -> Iterator:
        """Adds rows `rows` of `columns` (one per feature); yields each record they complete."""
        piece = [take_rows(fv, rows) for fv in columns]
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
        record = encode_record(self._features, columns, self._slice_rows)
        self._pieces, self._rows = rest, self._rows - rows
        self.records += 1
        return record

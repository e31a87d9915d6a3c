"""A batch's features as the compiled writers read them (`PooledColumns`): each kind's values
laid end to end (`ValuePools`) and where each feature's rows are in them. The per-row encoder
(`encoding`), the columnar records (`columnar`) and the statistics' scalar blocks read one
batch's pools, built once; for the columnar records, with every string's fingerprint
(`StringFingerprints`).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from tfx_tabular.coders import wire
from tfx_tabular.coders.fingerprint import fingerprints_into, fingerprints_of, take_codes
from tfx_tabular.coders.flatten import FeatureValues
from tfx_tabular.source.mapping import Feature, Kind


def _string_count(fv: FeatureValues) -> int:
    return len(fv.codes) if fv.codes is not None else len(fv.values) - 1


class StringFingerprints:
    """Fingerprint64 of a batch's BYTES values in the string pool's order (`pool`), for the
    columnar records. A dictionary's strings are hashed once each, and once per run of batches
    that carry the same dictionary: a row group read in several batches gives each a copy of it,
    which is compared with the last one (exact bytes) instead of hashed again. One per thread."""

    def __init__(self):
        self._last: dict[int, tuple] = {}  # feature position: (offsets, data, fingerprints)

    def pool(self, ordered: Sequence[tuple[Feature, FeatureValues]]) -> np.ndarray:
        strings = [(f, fv) for f, (feature, fv) in enumerate(ordered) if feature.kind == Kind.BYTES]
        out = np.empty(sum(_string_count(fv) for _, fv in strings), np.uint64)
        at = 0
        for f, fv in strings:
            part = out[at : at + _string_count(fv)]
            if fv.codes is None:
                fingerprints_into(fv.values, fv.data, part)
            else:
                take_codes(self._dictionary(f, fv), fv.codes, part)
            at += len(part)
        return out.view(np.int64)

    def _dictionary(self, f: int, fv: FeatureValues) -> np.ndarray:
        last = self._last.get(f)
        if (
            last is not None
            and np.array_equal(last[0], fv.values)
            and np.array_equal(last[1], fv.data)
        ):
            return last[2]
        hashed = fingerprints_of(fv.values, fv.data)
        self._last[f] = (fv.values, fv.data, hashed)
        return hashed


class ValuePools:
    """Each kind's values laid end to end, as the serializer reads them: INT and FLOAT values,
    and for BYTES each string's [start, end) in the pooled data."""

    def __init__(self):
        self._values = {Kind.INT: [], Kind.FLOAT: []}
        self._starts, self._ends, self._data = [], [], []
        self.sizes = {Kind.INT: 0, Kind.FLOAT: 0, Kind.BYTES: 0}
        self._data_size = 0

    @property
    def data_size(self) -> int:
        """The string bytes added so far: where the next BYTES feature's start."""
        return self._data_size

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


class PooledColumns:
    """A batch's features (`flatten.feature_columns`' output) as the serializer reads them,
    built once per batch: each kind's values end to end (`pools`, as `ValuePools.arrays` gives
    them), each feature's map entry key (`key_headers`, from `wire.key_headers`) and, per
    feature f and row r, its items splits[f, r]:splits[f, r + 1] there (`splits`), written only
    if valid[f, r]. Rows of it are encoded per row (`encoding.encode_rows`) or taken into
    columnar records. A scalar's splits are its first slot (`firsts`) plus the row, made only for the
    rows asked: at thousands of columns the whole batch's splits outweighed its values."""

    def __init__(
        self,
        ordered: Sequence[tuple[Feature, FeatureValues]],
        fingerprints: Optional[StringFingerprints] = None,
    ):
        rows = len(ordered[0][1].valid) if ordered else 0
        self.kinds = np.array([int(f.kind) for f, _ in ordered], dtype=np.int64)
        self.key_headers = wire.key_headers([f.name for f, _ in ordered])
        self.valid = np.empty((len(ordered), rows), dtype=np.bool_)
        self.firsts = np.empty(len(ordered), dtype=np.int64)
        # Each feature's row in _list_splits; -1: a scalar's slots.
        self._list_position = np.full(len(ordered), -1, dtype=np.int64)
        lists = [i for i, (_, fv) in enumerate(ordered) if not fv.slots]
        self._list_position[lists] = np.arange(len(lists))
        self._list_splits = np.empty((len(lists), rows + 1), dtype=np.int64)
        # Where each BYTES feature's `data` starts in the string pool's bytes: a dictionary's
        # entry i is data_starts[f] + values[i] there (0 for other kinds).
        self.data_starts = np.zeros(len(ordered), dtype=np.int64)
        pools = ValuePools()
        for i, (f, fv) in enumerate(ordered):
            self.valid[i] = fv.valid
            self.data_starts[i] = pools.data_size
            first = pools.add(f.kind, fv)
            if fv.slots:
                self.firsts[i] = first
            else:
                at = self._list_position[i]
                np.add(fv.row_splits, first, out=self._list_splits[at])
                self.firsts[i] = self._list_splits[at, 0]
        self.pools = pools.arrays()
        # columnar records' strings; None: not asked
        self.fingerprints = fingerprints.pool(ordered) if fingerprints is not None else None

    @property
    def rows(self) -> int:
        return self.valid.shape[1]

    @property
    def rows_of(self) -> tuple:
        """What locates row r of feature f in its kind's pool, for compiled readers: a scalar's
        first slot (plus r), each feature's row in the lists' splits (-1: a scalar), those
        splits, and which rows hold a value."""
        return self.firsts, self._list_position, self._list_splits, self.valid

    def count_non_finite(self, counts: np.ndarray) -> None:
        """Add each FLOAT feature's NaN, +inf and -inf values in this batch to
        counts[feature, (NaN, +inf, -inf)] (features in this batch's order). One pass over the
        float pool; only its non-finite slots are looked at further, and those of null rows
        (a scalar's null row keeps an arbitrary value in its slot: pandas' NaN) are no values."""
        floats = self.pools[1]
        slots = np.flatnonzero(~np.isfinite(floats))
        if not len(slots):
            return
        features = np.flatnonzero(self.kinds == int(Kind.FLOAT))
        # Each feature's values are one run of the pool, the runs in feature order: a slot is the
        # last feature's starting at or before it (an empty run starts where the next one does).
        owner = features[np.searchsorted(self.firsts[features], slots, side="right") - 1]
        scalar = self._list_position[owner] < 0
        rows = np.where(scalar, slots - self.firsts[owner], 0)
        kept = ~scalar | self.valid[owner, rows]
        values = floats[slots[kept]]
        which = np.where(np.isnan(values), 0, np.where(values > 0, 1, 2))
        np.add.at(counts, (owner[kept], which), 1)

    def splits(self, start: int, stop: int) -> np.ndarray:
        """[feature, row]: where rows [start, stop) of each feature start in its kind's pool,
        and where the last ends (a new array)."""
        out = self.firsts[:, None] + np.arange(start, stop + 1)[None, :]
        listed = self._list_position >= 0
        out[listed] = self._list_splits[self._list_position[listed], start : stop + 1]
        return out

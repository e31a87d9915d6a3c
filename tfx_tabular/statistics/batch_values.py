"""One feature's values in one batch, as the accumulators read them (`BatchValues`): each row's
split, and the values, strings and integers counted per (value, split) in one pass for every
split, each table computed on first use."""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tfx_bsl.arrow import array_util

from tfx_tabular.coders.flatten import FeatureValues
from tfx_tabular.statistics.sketches import binary_array, string_table


@numba.njit(cache=True, nogil=True)
def _split_counts(keys, groups, low, num_keys, num_splits):
    """counts[key - low, split] of the values whose group is a split, in one pass for every
    split. Group `num_splits` (a null row's slot, holding an arbitrary key) is skipped."""
    counts = np.zeros((num_keys, num_splits), np.int64)
    for i in range(len(keys)):
        group = groups[i]
        if group < num_splits:
            counts[keys[i] - low, group] += 1
    return counts


@numba.njit(cache=True, nogil=True)
def _row_groups(valid, split_ids, num_splits):
    """Each row's group (its split, or `num_splits` where the feature is null) and the rows
    per group."""
    groups = np.empty(len(valid), np.int64)
    rows = np.zeros(num_splits + 1, np.int64)
    for i in range(len(valid)):
        group = split_ids[i] if valid[i] else num_splits
        groups[i] = group
        rows[group] += 1
    return groups, rows


@numba.njit(cache=True, nogil=True)
def _counted_range(table, low):
    """The rows of counts[value - low, split] counted in some split: (values, their counts)."""
    values = np.empty(len(table), np.int64)
    counts = np.empty_like(table)
    size = 0
    for row in range(len(table)):  # loops, not array expressions: numba compiles those slowly
        if table[row].any():
            values[size] = row + low
            for split in range(table.shape[1]):
                counts[size, split] = table[row, split]
            size += 1
    return values[:size], counts[:size]


@numba.njit(cache=True, nogil=True)
def _present_range(values, groups, num_splits):
    """(min, max) of the values in a split; (1, 0) if none is."""
    low, high, seen = 1, 0, False
    for i in range(len(values)):
        if groups[i] < num_splits:
            value = values[i]
            if not seen:
                low = high = value
                seen = True
            elif value < low:
                low = value
            elif value > high:
                high = value
    return low, high


class _computed_once:
    """`functools.cached_property` without its lock: Python 3.10's takes one lock per property
    for every instance, so each converting thread waited while the other computed its batch's
    tables. A batch is read by one thread only."""

    def __init__(self, compute):
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __get__(self, batch, owner=None):
        if batch is None:
            return self
        value = batch.__dict__[self.name] = self.compute(batch)  # read from there from now on
        return value


class BatchValues:
    """One feature's values in one batch, every split's share counted in one pass: a row's
    group is its split, or `num_splits` where the feature is null; value counts, strings and
    integers are counted per (value, split) by `_split_counts`."""

    def __init__(self, fv: FeatureValues, scalar: bool, split_ids: np.ndarray, split_rows):
        self.fv = fv
        self.scalar = scalar
        self.num_splits = num_splits = len(split_rows)
        if fv.valid.all():  # the batch's own split counts hold
            self.row_groups = split_ids
            self.rows = np.append(split_rows, 0)
        else:
            self.row_groups, self.rows = _row_groups(fv.valid, split_ids, num_splits)

    def _counts(self, keys: np.ndarray, groups: np.ndarray, low: int, num_keys: int):
        return _split_counts(keys, groups, low, num_keys, self.num_splits)

    @_computed_once
    def values(self) -> np.ndarray:
        return self.fv.values[: self.fv.row_splits[-1]]

    @_computed_once
    def value_groups(self) -> np.ndarray:
        """Each value's group (scalars: value r is row r's, a null row's slot in no split)."""
        if self.scalar:
            return self.row_groups
        return np.repeat(self.row_groups, np.diff(self.fv.row_splits))

    @_computed_once
    def value_count_table(self) -> np.ndarray:
        """rows[number of values, split] of a list feature."""
        counts = np.diff(self.fv.row_splits)
        longest = int(counts.max()) if len(counts) else 0
        return self._counts(counts, self.row_groups, 0, longest + 1)

    @_computed_once
    def strings(self) -> pa.Array:
        """The values as an Arrow array (null slots: some dictionary value)."""
        fv = self.fv
        if fv.codes is None:
            return binary_array(fv.values[: fv.row_splits[-1] + 1], fv.data)
        codes = np.clip(fv.codes[: fv.row_splits[-1]], 0, len(fv.values) - 2)
        return binary_array(fv.values, fv.data).take(pa.array(codes))

    @_computed_once
    def string_table(self) -> StringTable:
        """The batch's distinct strings: Parquet's dictionary pages counted by code, other
        strings dictionary-encoded first (by Arrow, without the GIL)."""
        fv = self.fv
        if fv.codes is None:
            encoded = pc.dictionary_encode(self.strings)
            dictionary = encoded.dictionary
            offsets = np.frombuffer(dictionary.buffers()[1], np.int64)[: len(dictionary) + 1]
            data = np.frombuffer(dictionary.buffers()[2] or b"", np.uint8)
            codes = encoded.indices.to_numpy()
        else:
            dictionary = binary_array(fv.values, fv.data)
            offsets, data, codes = fv.values, fv.data, fv.codes[: fv.row_splits[-1]]
        counts = self._counts(codes, self.value_groups, 0, len(dictionary))
        return StringTable(dictionary, offsets, *string_table(offsets, data, counts))

    @_computed_once
    def int_table(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct integers and counts[integer, split]: counted over the values' range
        when it is narrow (counts, ids of a few thousand), else through a hash table."""
        values, groups = self.values, self.value_groups
        low, high = (int(v) for v in _present_range(values, groups, self.num_splits))
        if high < low:
            return np.zeros(0, np.int64), np.zeros((0, self.num_splits), np.int64)
        if high - low <= 2 * len(values) + 4096:
            return _counted_range(self._counts(values, groups, low, high - low + 1), low)
        encoded = pc.dictionary_encode(pa.array(values))
        counts = self._counts(encoded.indices.to_numpy(), groups, 0, len(encoded.dictionary))
        return encoded.dictionary.to_numpy(), counts


class StringTable:
    """A batch's distinct strings by hash (`sketches.string_table`): hashes ascending, each
    one's first position in `dictionary`, counts[hash, split], and byte lengths."""

    def __init__(self, dictionary: pa.Array, offsets: np.ndarray, hashes, first, counts, ascii):
        self.dictionary = dictionary
        self.hashes, self.first, self.counts = hashes, first, counts
        self.lengths = (offsets[first + 1] - offsets[first]).astype(np.int64)
        self.any_invalid = not ascii and array_util.CountInvalidUTF8(dictionary) > 0

"""TFDV-compatible statistics of the tf.Examples a conversion writes, computed while it encodes.

The encoder already holds every feature of a batch as flat numpy buffers (`FeatureValues`: row
splits, validity, values or dictionary codes); `add_batch` reads those same buffers, so the
statistics describe exactly the features, kinds and values written. Accumulators serialize and
merge (one per shard and split, merged in shard order, so a run's files are the same on every
runner), and the result does not depend on how rows were split into batches, except where a
sketch is used:

* exact: num_examples, num_non_missing, num_missing, min/max/avg/tot_num_values, min, max, mean,
  std_dev (float64, merged with Chan's formula), num_zeros, num_nan, avg_length,
  invalid_utf8_count;
* tfx_bsl's QuantilesSketch (the one TFDV's BasicStatsGenerator uses, eps 0.01): median,
  quantiles and standard histograms and the num_values histogram of list features. Ranks within
  1% of the count (integers and value counts go in as distinct values with their counts as
  weights). Scalar numeric features use our fixed-memory KLL sketch instead (`quantiles`, read
  out by the same rule, also within 1%), updated for all of them in one call per batch
  (`numeric`): tfx_bsl's sketch held more than the values at thousands of columns;
* Misra-Gries (`sketches.TopK`, 1,000 counters, as TFDV's sketch-based top-k), fed each
  batch's distinct strings with their counts: top_values and rank_histogram. Exact when a
  split's feature holds at most 1,000 distinct values; otherwise each count errs by at most
  N / 1,001 (N the feature's values in the split) and any value more frequent is listed;
* K-minimum values (`sketches.DistinctCount`, 1,024 hashes, estimated as tfx_bsl's KmvSketch):
  string `unique`. Exact below 1,024 distinct values; beyond, a relative standard error of
  about 1/sqrt(1,024) ≈ 3%.

The string sketches are our own (`sketches`): a batch's distinct strings are hashed once,
without the GIL, and both sketches merge sorted hash arrays, where tfx_bsl's MisraGriesSketch
and KmvSketch each took new Arrow arrays of the strings and hashed them again.

Histograms are TFDV's `quantiles_util` helpers (median and rebinning as TFDV's own code, the
histograms through `histograms`, their numba port with identical output), top-k laid out as
TFDV's `top_k_uniques_stats_util`, with StatsOptions' defaults, so the output has stock
StatisticsGen's shape. Feature types follow `mapping.Kind`: a feature with no value in a split
keeps its type (stock TFDV would call it STRING).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import struct
from typing import Optional, Sequence

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx_bsl.arrow import array_util
from tfx_bsl.sketches import QuantilesSketch

from tfx_tabular.coders.flatten import FeatureValues
from tfx_tabular.coders.pools import PooledColumns
from tfx_tabular.source.mapping import Feature, Kind
from tfx_tabular.statistics import histograms, numeric, strings
from tfx_tabular.statistics import quantiles as kll
from tfx_tabular.statistics.numeric import ScalarNumerics
from tfx_tabular.statistics.sketches import (
    DistinctCount,
    TopK,
    binary_array,
    string_hash,
    string_table,
)
from tfx_tabular.statistics.strings import ScalarStrings

# tensorflow_data_validation.StatsOptions' defaults, as stock StatisticsGen runs it.
NUM_TOP_VALUES = 20
NUM_RANK_HISTOGRAM_BUCKETS = 1000
NUM_VALUES_HISTOGRAM_BUCKETS = 10
NUM_HISTOGRAM_BUCKETS = 10
NUM_QUANTILES_HISTOGRAM_BUCKETS = 10
QUANTILES_EPSILON = 0.01
FREQUENCY_THRESHOLD = 1  # top-k lists values counted at least this often
NUM_KMV_BUCKETS = 1024
# As TFDV's BasicStatsGenerator: the equi-width histogram is read off 100x finer quantiles.
_STD_HISTOGRAM_QUANTILES_FACTOR = 100
# tensorflow_data_validation.constants (a test checks they still agree); strings longer than
# LARGE_STRING_THRESHOLD count as one placeholder value in top-k, as in TFDV.
NON_UTF8_PLACEHOLDER = "__BYTES_VALUE__"
LARGE_BYTES_PLACEHOLDER = "__LARGE_BYTES__"
LARGE_STRING_THRESHOLD = 1024
FILE_NAME = "FeatureStats.pb"  # stock StatisticsGen's file name in each Split-<name> folder
_STRING_LIMITS = strings.Limits(
    top_values=NUM_RANK_HISTOGRAM_BUCKETS,
    distinct_hashes=NUM_KMV_BUCKETS,
    long_length=LARGE_STRING_THRESHOLD,
    placeholder=LARGE_BYTES_PLACEHOLDER.encode(),
)


def _quantiles_sketch() -> QuantilesSketch:
    return QuantilesSketch(eps=QUANTILES_EPSILON, max_num_elements=1 << 32, num_streams=1)


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


@numba.njit(cache=True, nogil=True)
def _integer_summary(values, weights):
    """Of distinct integers with counts, those counted at least once: (count, zeros, min, max,
    mean, sum of squared deviations, the values, their counts as float64 sketch weights). One
    compiled pass: numpy's mixed int/float dot wakes BLAS threads that spin on the other core."""
    kept = np.empty(len(values), values.dtype)
    counts = np.empty(len(values), np.float64)
    size = low = high = 0
    for i in range(len(values)):
        if weights[i]:
            kept[size], counts[size] = values[i], weights[i]
            low = values[i] if size == 0 else min(low, values[i])
            high = values[i] if size == 0 else max(high, values[i])
            size += 1
    kept, counts = kept[:size], counts[:size]
    count = zeros = 0
    total = 0.0
    for i in range(len(kept)):
        count += int(counts[i])
        total += float(kept[i]) * counts[i]
        if kept[i] == 0:
            zeros += int(counts[i])
    mean = total / count if count else 0.0
    m2 = 0.0
    for i in range(len(kept)):
        m2 += (float(kept[i]) - mean) ** 2 * counts[i]
    return count, zeros, low, high, mean, m2, kept, counts


@numba.njit(cache=True, nogil=True)
def _float_summary(values):
    """Of float values: (count and NaN, +inf and zero counts, min, max, finite min and max,
    mean, sum of squared deviations), NaN left out of all but its count, ±inf in the moments
    as numpy would keep them."""
    count = nan = pos_inf = zeros = 0
    low = finite_low = np.inf
    high = finite_high = -np.inf
    total = 0.0
    for value in values:
        x = float(value)
        if np.isnan(x):
            nan += 1
            continue
        count += 1
        total += x
        zeros += x == 0
        low, high = min(low, x), max(high, x)
        if np.isfinite(x):
            finite_low, finite_high = min(finite_low, x), max(finite_high, x)
        elif x > 0:
            pos_inf += 1
    mean = total / count if count else 0.0
    m2 = 0.0
    for value in values:
        if not np.isnan(value):
            m2 += (float(value) - mean) ** 2
    return count, nan, pos_inf, zeros, low, high, finite_low, finite_high, mean, m2


@numba.njit(cache=True, nogil=True)
def _split_strings(hashes, first, counts, lengths, split, long_length):
    """One split's share of a batch's string table: (the hashes it holds; the hashes, counts and
    dictionary positions of those of at most `long_length` bytes; its total bytes; its values
    longer than that)."""
    seen = np.empty(len(hashes), np.uint64)
    kept = np.empty(len(hashes), np.int64)
    num_seen = num_kept = total_bytes = long_values = 0
    for i in range(len(hashes)):
        count = counts[i, split]
        if count == 0:
            continue
        seen[num_seen] = hashes[i]
        num_seen += 1
        total_bytes += count * lengths[i]
        if lengths[i] > long_length:
            long_values += count
        else:
            kept[num_kept] = i
            num_kept += 1
    kept_hashes = np.empty(num_kept, np.uint64)
    kept_counts = np.empty(num_kept, np.int64)
    kept_first = np.empty(num_kept, np.int64)
    for j in range(num_kept):
        i = kept[j]
        kept_hashes[j], kept_counts[j], kept_first[j] = hashes[i], counts[i, split], first[i]
    return seen[:num_seen], kept_hashes, kept_counts, kept_first, total_bytes, long_values


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


class _BatchValues:
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
    def string_table(self) -> _StringTable:
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
        return _StringTable(dictionary, offsets, *string_table(offsets, data, counts))

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


class _StringTable:
    """A batch's distinct strings by hash (`sketches.string_table`): hashes ascending, each
    one's first position in `dictionary`, counts[hash, split], and byte lengths."""

    def __init__(self, dictionary: pa.Array, offsets: np.ndarray, hashes, first, counts, ascii):
        self.dictionary = dictionary
        self.hashes, self.first, self.counts = hashes, first, counts
        self.lengths = (offsets[first + 1] - offsets[first]).astype(np.int64)
        self.any_invalid = not ascii and array_util.CountInvalidUTF8(dictionary) > 0


def _quantiles_to_part(sketch) -> dict:
    if isinstance(sketch, kll.Quantiles):  # a scalar numeric feature's, not tfx_bsl's sketch
        return {"kll": sketch.to_bytes()}
    # QuantilesSketch offers its state only through the pickling protocol's __getstate__.
    return {"tfx_bsl": sketch.__getstate__()}


def _quantiles_from_part(part: dict):
    if "kll" in part:
        return kll.Quantiles.from_bytes(part["kll"])
    sketch = QuantilesSketch.__new__(QuantilesSketch)
    sketch.__setstate__(part["tfx_bsl"])
    return sketch


# The sketch attributes of FeatureStatistics, and how each is written and read back.
_SKETCHES = {
    "num_values": (_quantiles_to_part, _quantiles_from_part),
    "quantiles": (_quantiles_to_part, _quantiles_from_part),
    "top": (TopK.to_dict, TopK.from_dict),
    "distinct": (DistinctCount.to_dict, DistinctCount.from_dict),
}


class FeatureStatistics:
    """The mergeable state of one feature over the rows of one split."""

    def __init__(self, kind: Kind, scalar: bool = False):
        self.kind = kind
        self.scalar = scalar  # one value per present row: row r's value is slot r
        self.num_non_missing = 0
        self.min_num_values = math.inf
        self.max_num_values = 0
        self.tot_num_values = 0
        self.num_values: Optional[QuantilesSketch] = None
        # numeric: count, mean and sum of squared deviations of the non-NaN values
        self.count, self.mean, self.m2 = 0, 0.0, 0.0
        self.num_zeros = self.num_nan = self.pos_inf = 0
        self.min = self.finite_min = math.inf
        self.max = self.finite_max = -math.inf
        self.quantiles: Optional[QuantilesSketch] = None
        # strings
        self.total_bytes = self.invalid_utf8 = 0
        self.top: Optional[TopK] = None
        self.distinct: Optional[DistinctCount] = None

    def add(self, batch: _BatchValues, split: int) -> None:
        """Add the rows of `batch` in group `split`."""
        present_rows = int(batch.rows[split])
        if not present_rows:
            return
        if self.scalar:
            # num_values is 1 for every present row: no sketch (see `value_counts`)
            self.num_non_missing += present_rows
            self.tot_num_values += present_rows
            self.min_num_values, self.max_num_values = 1, 1
        else:
            self._add_value_counts(batch.value_count_table[:, split])
        if self.kind == Kind.BYTES:
            self._add_strings(batch, split)
        elif self.kind == Kind.INT:
            values, counts = batch.int_table
            self._add_integers(values, counts[:, split])
        else:
            self._add_floats(batch.values[batch.value_groups == split])

    def _add_value_counts(self, rows: np.ndarray) -> None:
        """rows[k]: the present rows of a list feature with k values."""
        counts = np.flatnonzero(rows)
        self.num_non_missing += int(rows.sum())
        self.min_num_values = min(self.min_num_values, int(counts[0]))
        self.max_num_values = max(self.max_num_values, int(counts[-1]))
        self.tot_num_values += int(np.dot(counts, rows[counts]))
        if self.num_values is None:
            self.num_values = _quantiles_sketch()
        self.num_values.AddValues(pa.array(counts), pa.array(rows[counts].astype(np.float64)))

    def value_counts(self, num_buckets: int) -> tuple[np.ndarray, np.ndarray]:
        """The quantiles and cumulative counts of the number of values per present row; a
        scalar's without a sketch (all 1, as tfx_bsl's sketch of them reads)."""
        if self.num_values is not None:
            return _quantiles_and_counts(self.num_values, num_buckets)
        return np.ones(num_buckets + 1), np.full(num_buckets + 1, float(self.num_non_missing))

    def _add_integers(self, values: np.ndarray, weights: np.ndarray) -> None:
        """Integers as distinct values and their counts: exact sums from the counts, and the
        sketch sees each distinct value once."""
        # One array type for the kernel (a split's column of counts is strided, a dictionary's
        # values read-only): the type the image's cache compiled, not a new compile per task.
        values = np.require(values, np.int64, ["C", "W"])
        weights = np.require(weights, np.int64, ["C", "W"])
        count, zeros, low, high, mean, m2, values, weights = _integer_summary(values, weights)
        if not count:
            return
        self.min, self.max = min(self.min, low), max(self.max, high)
        self.finite_min, self.finite_max = min(self.finite_min, low), max(self.finite_max, high)
        self.num_zeros += zeros
        self._merge_moments(count, mean, m2)
        if self.quantiles is None:
            self.quantiles = _quantiles_sketch()
        self.quantiles.AddValues(pa.array(values), pa.array(weights))

    def _add_floats(self, values: np.ndarray) -> None:
        count, nan, pos_inf, zeros, low, high, finite_low, finite_high, mean, m2 = _float_summary(
            values
        )
        self.num_nan += nan
        if not count:
            return
        self.min, self.max = min(self.min, low), max(self.max, high)
        self.finite_min = min(self.finite_min, finite_low)
        self.finite_max = max(self.finite_max, finite_high)
        self.pos_inf += pos_inf
        self.num_zeros += zeros
        self._merge_moments(count, mean, m2)
        if self.quantiles is None:
            self.quantiles = _quantiles_sketch()
        # mostly distinct: counting them would cost more than the sketch
        self.quantiles.AddValues(pa.array(values[~np.isnan(values)] if nan else values))

    def _merge_moments(self, count: int, mean: float, m2: float) -> None:
        """Chan et al.'s pairwise update of count, mean and squared deviations."""
        total = self.count + count
        if not count:
            return
        delta = mean - self.mean
        self.mean += delta * count / total
        self.m2 += m2 + delta * delta * self.count * count / total
        self.count = total

    def _add_strings(self, batch: _BatchValues, split: int) -> None:
        table = batch.string_table
        seen, hashes, counts, positions, total_bytes, long_values = _split_strings(
            table.hashes, table.first, table.counts, table.lengths, split, LARGE_STRING_THRESHOLD
        )
        self.total_bytes += total_bytes
        if table.any_invalid:
            rows = pa.array(batch.value_groups == split)
            self.invalid_utf8 += int(array_util.CountInvalidUTF8(batch.strings.filter(rows)))
        if self.top is None:
            self.top = TopK(NUM_RANK_HISTOGRAM_BUCKETS)
            self.distinct = DistinctCount(NUM_KMV_BUCKETS)
        self.distinct.add(seen)
        if long_values:  # as TFDV, top-k counts them as one placeholder value
            placeholder, strings = _large_bytes_placeholder()
            count = np.array([long_values], np.int64)
            self.top.add(placeholder, count, strings, np.zeros(1, np.int64))
        self.top.add(hashes, counts, table.dictionary, positions)

    def compact(self) -> None:
        """Fold the quantile sketches' buffers into their summaries, as TFDV's combiner does
        before Beam shuffles its accumulators (fewer bytes to write and merge, same bounds)."""
        for sketch in (self.num_values, self.quantiles):
            if isinstance(sketch, QuantilesSketch):
                sketch.Compact()

    def to_dict(self) -> dict:
        """Plain data: JSON-able but for the sketches' bytes (see SplitStatistics.to_bytes)."""
        out = {k: v for k, v in vars(self).items() if k not in _SKETCHES}
        out["kind"] = int(self.kind)
        out["sketches"] = {
            name: to_part(getattr(self, name))
            for name, (to_part, _) in _SKETCHES.items()
            if getattr(self, name) is not None
        }
        return out

    @classmethod
    def from_dict(cls, data: dict) -> FeatureStatistics:
        stats = cls(Kind(data["kind"]), data["scalar"])
        for name, value in data.items():
            if name not in ("kind", "sketches"):
                setattr(stats, name, value)
        for name, encoded in data["sketches"].items():
            setattr(stats, name, _SKETCHES[name][1](encoded))
        return stats

    def merge(self, other: FeatureStatistics) -> None:
        self.num_non_missing += other.num_non_missing
        self.min_num_values = min(self.min_num_values, other.min_num_values)
        self.max_num_values = max(self.max_num_values, other.max_num_values)
        self.tot_num_values += other.tot_num_values
        self._merge_moments(other.count, other.mean, other.m2)
        self.num_zeros += other.num_zeros
        self.num_nan += other.num_nan
        self.pos_inf += other.pos_inf
        self.min, self.max = min(self.min, other.min), max(self.max, other.max)
        self.finite_min = min(self.finite_min, other.finite_min)
        self.finite_max = max(self.finite_max, other.finite_max)
        self.total_bytes += other.total_bytes
        self.invalid_utf8 += other.invalid_utf8
        for name in _SKETCHES:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is None:
                setattr(self, name, theirs)
            elif theirs is not None and isinstance(mine, QuantilesSketch):
                mine.Merge(theirs)
            elif theirs is not None:
                mine.merge(theirs)


def _is_scalar(feature: Feature) -> bool:
    """One value slot per row (`FeatureValues.slots`), as the blocks read them."""
    return (
        feature.list_depth == 0
        and feature.row_lengths_of is None
        and not pa.types.is_null(feature.leaf_type)
    )


def _is_scalar_numeric(feature: Feature) -> bool:
    """Kept in a `numeric.ScalarNumerics` block."""
    return _is_scalar(feature) and feature.kind in (Kind.INT, Kind.FLOAT)


class SplitStatistics:
    """The mergeable statistics of one split: its row count and each feature's state. Scalar
    numeric features accumulate in one block per kind (`numeric`), kept as blocks in part files
    and merged as blocks, and folded into their FeatureStatistics when the split's message is
    made. Scalar string features accumulate in one block (`strings`), folded into their
    FeatureStatistics when a part is written or the message made."""

    def __init__(self, features: Sequence[Feature] = ()):
        self.num_examples = 0
        self.features = {
            f.name: FeatureStatistics(f.kind, scalar=f.list_depth == 0) for f in features
        }
        self._scalar_names = {
            kind: [f.name for f in features if _is_scalar_numeric(f) and f.kind == kind]
            for kind in (Kind.INT, Kind.FLOAT)
        }
        self.scalar_blocks = self._new_blocks()
        self._string_names = [f.name for f in features if _is_scalar(f) and f.kind == Kind.BYTES]
        self.string_block = self._new_string_block()

    def _new_string_block(self) -> Optional[ScalarStrings]:
        return ScalarStrings(self._string_names, _STRING_LIMITS) if self._string_names else None

    def _fold_strings(self) -> None:
        """Move the string block's state into its features' FeatureStatistics; it starts over."""
        block = self.string_block
        for name, fields, top, distinct in block.features() if block else ():
            if fields["num_non_missing"]:
                stats = _scalar_statistics(Kind.BYTES, fields, top=top, distinct=distinct)
                self.features[name].merge(stats)
        self.string_block = self._new_string_block()

    def blocks(self) -> dict[Kind, ScalarNumerics | ScalarStrings]:
        """Its blocks by the kind of the features they hold."""
        blocks = dict(self.scalar_blocks)
        if self.string_block is not None:
            blocks[Kind.BYTES] = self.string_block
        return blocks

    def _new_blocks(self) -> dict[Kind, ScalarNumerics]:
        return {kind: ScalarNumerics(names) for kind, names in self._scalar_names.items() if names}

    def _fold_scalars(self) -> None:
        """Move the blocks' state into the features' FeatureStatistics; the blocks start over."""
        for kind, block in self.scalar_blocks.items():
            for index, name in enumerate(block.names):
                fields, sketch = block.feature(index)
                if fields["num_non_missing"]:
                    quantiles = sketch if fields["count"] else None
                    self.features[name].merge(_scalar_statistics(kind, fields, quantiles=quantiles))
        self.scalar_blocks = self._new_blocks()

    def to_bytes(self) -> bytes:
        """The accumulator as bytes (a shard's part file): JSON numbers and the sketches' own
        serialized forms, so any worker's Python and tfx_bsl can merge it; the scalar numeric
        blocks as their arrays (`ScalarNumerics.to_part`), merged as arrays too; the string block
        folded into its features."""
        self._fold_strings()
        in_blocks = {name for block in self.scalar_blocks.values() for name in block.names}
        features = {}
        for name, stats in self.features.items():
            # A block's feature is in its block, unless rows were folded into it before.
            if name not in in_blocks or stats.num_non_missing:
                stats.compact()
                features[name] = stats.to_dict()
        blocks = {int(kind): block.to_part() for kind, block in self.scalar_blocks.items()}
        return _pack({"num_examples": self.num_examples, "features": features, "blocks": blocks})

    @classmethod
    def from_bytes(cls, data: bytes) -> SplitStatistics:
        decoded = _unpack(data)
        result = cls()
        result.num_examples = decoded["num_examples"]
        result.features = {
            name: FeatureStatistics.from_dict(stats) for name, stats in decoded["features"].items()
        }
        result.scalar_blocks = {
            Kind(int(kind)): ScalarNumerics.from_part(part)
            for kind, part in decoded["blocks"].items()
        }
        for kind, block in result.scalar_blocks.items():
            for name in block.names:
                result.features.setdefault(name, FeatureStatistics(kind, scalar=True))
        return result

    def merge(self, other: SplitStatistics) -> SplitStatistics:
        """Add `other`'s rows: numeric blocks merge as blocks where they can, else both are
        folded; string blocks are folded."""
        self._fold_strings()
        other._fold_strings()
        if not self._merge_blocks(other):
            self._fold_scalars()
            other._fold_scalars()
        self.num_examples += other.num_examples
        for name, stats in other.features.items():
            if name in self.features:
                self.features[name].merge(stats)
            else:
                self.features[name] = stats
        return self

    def _merge_blocks(self, other: SplitStatistics) -> bool:
        """Merge `other`'s blocks into these as arrays if each holds the same features as this
        one's of its kind, or features new here (taken over); False, merging none, otherwise."""
        plan = []
        for kind, block in other.scalar_blocks.items():
            mine = self.scalar_blocks.get(kind)
            if mine is not None and mine.names == block.names:
                plan.append((kind, block, mine))
            elif mine is None and self.features.keys().isdisjoint(block.names):
                plan.append((kind, block, None))
            else:
                return False
        for kind, block, mine in plan:
            if mine is None:
                self.scalar_blocks[kind] = block
            else:
                mine.merge(block)
        return True


_BLOB = "$bytes"  # a JSON object {_BLOB: [offset, size]}: bytes stored after the JSON


def _pack(document) -> bytes:
    """`document` as a part file: the JSON's size, the JSON, then its bytes values (the
    sketches') unencoded: as base64 inside the JSON, they made writing and merging the parts a
    large share of a wide table's statistics."""
    blobs, offset = [], 0

    def reference(value):
        nonlocal offset
        if not isinstance(value, bytes):
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        blobs.append(value)
        offset += len(value)
        return {_BLOB: [offset - len(value), len(value)]}

    text = json.dumps(document, default=reference).encode()
    return b"".join([struct.pack("<Q", len(text)), text, *blobs])


def _unpack(data: bytes):
    """A part file's document (see `_pack`)."""
    (size,) = struct.unpack_from("<Q", data)
    blobs = memoryview(data)[8 + size :]

    def resolve(item: dict):
        where = item.get(_BLOB)
        if len(item) != 1 or not isinstance(where, list):  # e.g. one feature named _BLOB
            return item
        return bytes(blobs[where[0] : where[0] + where[1]])

    return json.loads(data[8 : 8 + size], object_hook=resolve)


def _scalar_statistics(kind: Kind, fields: dict, **sketches) -> FeatureStatistics:
    """A scalar feature's FeatureStatistics from its block's `fields` and `sketches` (by their
    FeatureStatistics names)."""
    stats = FeatureStatistics(kind, scalar=True)
    for name, value in {**fields, **sketches}.items():
        setattr(stats, name, value)
    stats.tot_num_values = stats.num_non_missing
    stats.min_num_values = stats.max_num_values = 1
    return stats


def add_batch(
    splits: Sequence[SplitStatistics],
    values: Sequence[tuple[Feature, FeatureValues]],
    pooled: PooledColumns,
    split_ids: np.ndarray,
) -> None:
    """Add a batch's encoded features (`flatten.feature_columns`, and `pooled` from them: the
    scalar numeric ones are read there), row r to `splits[split_ids[r]]`."""
    split_rows = np.bincount(split_ids, minlength=len(splits))
    rows = split_rows.tolist()
    for split, count in zip(splits, rows, strict=True):
        split.num_examples += count
    split_blocks = [split.blocks() for split in splits]
    blocks = split_blocks[0] if splits else {}
    slots = {name: (kind, i) for kind, b in blocks.items() for i, name in enumerate(b.names)}
    positions = {kind: np.zeros(len(b.names), np.int64) for kind, b in blocks.items()}
    for position, (feature, fv) in enumerate(values):
        if feature.name in slots:
            kind, index = slots[feature.name]
            positions[kind][index] = position
            continue
        batch = _BatchValues(fv, feature.list_depth == 0, split_ids, split_rows)
        for index, split in enumerate(splits):
            if rows[index]:
                split.features[feature.name].add(batch, index)
    for kind, at in positions.items():
        if kind == Kind.BYTES:
            columns = strings.pooled_columns(pooled, at)
        else:
            columns = numeric.pooled_columns(pooled, kind, at)
        for index, split_block in enumerate(split_blocks):
            if rows[index]:
                split_block[kind].add(columns, split_ids, index)


@functools.cache
def _large_bytes_placeholder() -> tuple[np.ndarray, pa.Array]:
    """The hash and string array TopK counts strings over LARGE_STRING_THRESHOLD bytes as."""
    value = LARGE_BYTES_PLACEHOLDER.encode()
    return np.array([string_hash(value)], np.uint64), pa.array([value], pa.large_binary())


def _quantiles_and_counts(sketch, num_buckets: int):
    if isinstance(sketch, kll.Quantiles):
        return sketch.quantiles_and_counts(num_buckets)
    quantiles, counts = sketch.GetQuantilesAndCumulativeWeights(num_buckets)
    return (
        quantiles.flatten().to_numpy(zero_copy_only=False),
        counts.flatten().to_numpy(zero_copy_only=False),
    )


@functools.cache
def _quantiles_util():
    """TFDV's `quantiles_util` module, loaded alone: it needs only numpy and
    tensorflow_metadata, while importing it through its package loads TensorFlow and Beam's
    TFDV transforms, which takes longer than computing the statistics themselves."""
    package = importlib.util.find_spec("tensorflow_data_validation")
    path = os.path.join(package.submodule_search_locations[0], "utils", "quantiles_util.py")
    spec = importlib.util.spec_from_file_location("_tfdv_quantiles_util", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _common_proto(stats: FeatureStatistics, num_examples: int, out) -> None:
    out.num_non_missing = stats.num_non_missing
    out.num_missing = num_examples - stats.num_non_missing
    out.tot_num_values = stats.tot_num_values
    if stats.num_non_missing:
        out.min_num_values = int(stats.min_num_values)
        out.max_num_values = stats.max_num_values
        out.avg_num_values = stats.tot_num_values / stats.num_non_missing
        out.num_values_histogram.CopyFrom(
            histograms.quantiles_histogram(*stats.value_counts(NUM_VALUES_HISTOGRAM_BUCKETS))
        )


def _numeric_proto(stats: FeatureStatistics, out) -> None:
    """As TFDV's BasicStatsGenerator fills NumericStatistics (unweighted)."""
    quantiles_util = _quantiles_util()

    if not stats.count:
        if stats.num_nan:  # only NaN values: TFDV sets num_nan alone
            out.histograms.add(type=statistics_pb2.Histogram.STANDARD).num_nan = stats.num_nan
            out.histograms.add(type=statistics_pb2.Histogram.QUANTILES).num_nan = stats.num_nan
        return
    out.mean = stats.mean
    out.std_dev = math.sqrt(max(0.0, stats.m2 / stats.count))
    out.num_zeros = stats.num_zeros
    out.min, out.max = float(stats.min), float(stats.max)
    quantiles, counts = _quantiles_and_counts(
        stats.quantiles, _STD_HISTOGRAM_QUANTILES_FACTOR * NUM_QUANTILES_HISTOGRAM_BUCKETS
    )
    out.median = float(quantiles_util.find_median(quantiles))
    standard = histograms.equi_width_histogram(
        quantiles=quantiles,
        cumulative_counts=counts,
        finite_min=stats.finite_min,
        finite_max=stats.finite_max,
        num_buckets=NUM_HISTOGRAM_BUCKETS,
        num_pos_inf=stats.pos_inf,
    )
    by_quantile = histograms.quantiles_histogram(
        *quantiles_util.rebin_quantiles(quantiles, counts, _STD_HISTOGRAM_QUANTILES_FACTOR)
    )
    for histogram in (standard, by_quantile):
        histogram.num_nan = stats.num_nan
        out.histograms.add().CopyFrom(histogram)


def _ranked(top: TopK) -> tuple[np.ndarray, pa.Array]:
    """The values counted at least FREQUENCY_THRESHOLD times, by count then value, both
    descending, at most NUM_RANK_HISTOGRAM_BUCKETS: (counts, labels as UTF-8 strings, TFDV's
    placeholder for invalid UTF-8)."""
    table = pa.table({"count": top.counts, "value": top.values})
    table = table.filter(pc.greater_equal(table["count"], FREQUENCY_THRESHOLD))
    order = pc.sort_indices(table, [("count", "descending"), ("value", "descending")])
    table = table.take(order[:NUM_RANK_HISTOGRAM_BUCKETS])
    labels = table["value"].combine_chunks()
    if array_util.CountInvalidUTF8(labels):
        labels = pa.array([_label(value) for value in labels.to_pylist()], pa.large_string())
    return table["count"].to_numpy(), labels


def _label(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:  # as TFDV labels them
        return NON_UTF8_PLACEHOLDER


def _string_proto(stats: FeatureStatistics, out) -> Optional[bytes]:
    """As TFDV fills StringStatistics, top-k and uniques as its sketch-based generator does
    (`top_k_uniques_stats_util._make_feature_stats_proto_topk`: by count, then by value, both
    descending). Returns its rank histogram, serialized, for the caller to put in (None: none)."""
    if stats.tot_num_values:
        out.avg_length = stats.total_bytes / stats.tot_num_values
    out.invalid_utf8_count = stats.invalid_utf8
    if stats.top is None:
        return None
    counts, labels = _ranked(stats.top)
    top = labels[:NUM_TOP_VALUES].cast(pa.large_string()).to_pylist()
    for count, label in zip(counts[:NUM_TOP_VALUES].tolist(), top, strict=True):
        out.top_values.add(value=label, frequency=count)
    out.unique = stats.distinct.estimate()
    return histograms.rank_histogram_bytes(labels, counts)


def _feature_proto(name: str, stats: FeatureStatistics, num_examples: int, out) -> Optional[bytes]:
    """One feature's `FeatureNameStatistics`, filled in place but for a string feature's rank
    histogram, which is returned serialized (None: none)."""
    out.path.step.append(name)
    if stats.kind == Kind.BYTES:
        out.type = statistics_pb2.FeatureNameStatistics.STRING
        _common_proto(stats, num_examples, out.string_stats.common_stats)
        return _string_proto(stats, out.string_stats)
    kind = "INT" if stats.kind == Kind.INT else "FLOAT"
    out.type = statistics_pb2.FeatureNameStatistics.Type.Value(kind)
    _numeric_proto(stats, out.num_stats)
    _common_proto(stats, num_examples, out.num_stats.common_stats)
    return None


def statistics_list(split: SplitStatistics):
    """The `DatasetFeatureStatisticsList` stock StatisticsGen writes for one split (one dataset,
    its features in name order; no features for a split without rows, as TFDV): the message of
    the bytes `serialized_statistics_list` gives, which `publish` writes."""
    return statistics_pb2.DatasetFeatureStatisticsList.FromString(serialized_statistics_list(split))


def _field_number(message, name: str) -> int:
    return message.DESCRIPTOR.fields_by_name[name].number


def _length_delimited(number: int, payload: bytes) -> bytes:
    """A message field's wire bytes: its key (wire type 2), the payload's length, the payload."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _feature_bytes(feature, ranks: Optional[bytes]) -> bytes:
    """A serialized FeatureNameStatistics, a string feature's rank histogram bytes put in its
    string_stats as they are (fields may come in any order on the wire)."""
    if ranks is None:
        return feature.SerializeToString()
    string_stats = feature.string_stats.SerializeToString() + _length_delimited(
        _field_number(feature.string_stats, "rank_histogram"), ranks
    )
    feature.ClearField("string_stats")
    return feature.SerializeToString() + _length_delimited(
        _field_number(feature, "string_stats"), string_stats
    )


def serialized_statistics_list(split: SplitStatistics) -> bytes:
    """The split's `DatasetFeatureStatisticsList` serialized, assembled from each feature's
    bytes: the rank histograms (a thousand labelled buckets a string feature) are never parsed into the
    message to be serialized again, which took most of a wide table's publishing."""
    split._fold_scalars()
    split._fold_strings()
    dataset = statistics_pb2.DatasetFeatureStatistics(num_examples=split.num_examples)
    number = _field_number(dataset, "features")
    pieces = [dataset.SerializeToString()]
    for name in sorted(split.features) if split.num_examples else ():
        feature = statistics_pb2.FeatureNameStatistics()
        ranks = _feature_proto(name, split.features[name], split.num_examples, feature)
        pieces.append(_length_delimited(number, _feature_bytes(feature, ranks)))
    number = _field_number(statistics_pb2.DatasetFeatureStatisticsList(), "datasets")
    return _length_delimited(number, b"".join(pieces))

"""TFDV-compatible statistics of the tf.Examples a conversion writes, accumulated while it encodes.

The encoder already holds every feature of a batch as flat numpy buffers (`FeatureValues`: row
splits, validity, values or dictionary codes); `add_batch` reads those same buffers, so the
statistics describe exactly the features, kinds and values written. Accumulators serialize and
merge (one per shard and split, written as part files and merged in shard order, so a run's files are the same on every
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

The accumulators of a split: `SplitStatistics` (its rows and features), each feature's
`FeatureStatistics`; `add_batch` feeds them a batch through `batch_values.BatchValues`. `parts`
writes them as part files, `render` makes the message.
"""

from __future__ import annotations

import functools
import math
from typing import Optional, Sequence

import numba
import numpy as np
import pyarrow as pa
from tfx_bsl.arrow import array_util
from tfx_bsl.sketches import QuantilesSketch

from tfx_tabular.coders.flatten import FeatureValues
from tfx_tabular.coders.pools import PooledColumns
from tfx_tabular.source.mapping import Feature, Kind
from tfx_tabular.statistics import numeric, strings
from tfx_tabular.statistics import quantiles as kll
from tfx_tabular.statistics.batch_values import BatchValues
from tfx_tabular.statistics.numeric import ScalarNumerics
from tfx_tabular.statistics.options import (
    LARGE_BYTES_PLACEHOLDER,
    LARGE_STRING_THRESHOLD,
    NUM_KMV_BUCKETS,
    NUM_RANK_HISTOGRAM_BUCKETS,
    QUANTILES_EPSILON,
)
from tfx_tabular.statistics.sketches import DistinctCount, TopK, string_hash
from tfx_tabular.statistics.strings import ScalarStrings

_STRING_LIMITS = strings.Limits(
    top_values=NUM_RANK_HISTOGRAM_BUCKETS,
    distinct_hashes=NUM_KMV_BUCKETS,
    long_length=LARGE_STRING_THRESHOLD,
    placeholder=LARGE_BYTES_PLACEHOLDER.encode(),
)


def _quantiles_sketch() -> QuantilesSketch:
    return QuantilesSketch(eps=QUANTILES_EPSILON, max_num_elements=1 << 32, num_streams=1)


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


# The sketch attributes of FeatureStatistics.
SKETCHES = ("num_values", "quantiles", "top", "distinct")


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

    def add(self, batch: BatchValues, split: int) -> None:
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
            return quantiles_and_counts(self.num_values, num_buckets)
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

    def _add_strings(self, batch: BatchValues, split: int) -> None:
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
        for name in SKETCHES:
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

    def fold_strings(self) -> None:
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

    def fold_scalars(self) -> None:
        """Move the blocks' state into the features' FeatureStatistics; the blocks start over."""
        for kind, block in self.scalar_blocks.items():
            for index, name in enumerate(block.names):
                fields, sketch = block.feature(index)
                if fields["num_non_missing"]:
                    quantiles = sketch if fields["count"] else None
                    self.features[name].merge(_scalar_statistics(kind, fields, quantiles=quantiles))
        self.scalar_blocks = self._new_blocks()

    def merge(self, other: SplitStatistics) -> SplitStatistics:
        """Add `other`'s rows: numeric blocks merge as blocks where they can, else both are
        folded; string blocks are folded."""
        self.fold_strings()
        other.fold_strings()
        if not self._merge_blocks(other):
            self.fold_scalars()
            other.fold_scalars()
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
        batch = BatchValues(fv, feature.list_depth == 0, split_ids, split_rows)
        for index, split in enumerate(splits):
            if rows[index]:
                split.features[feature.name].add(batch, index)
    for kind, at in positions.items():
        if kind == Kind.BYTES:
            columns = strings.pooled_columns(
                pooled, at, [fv for _, fv in values], split_ids, len(splits)
            )
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


def quantiles_and_counts(sketch, num_buckets: int):
    if isinstance(sketch, kll.Quantiles):
        return sketch.quantiles_and_counts(num_buckets)
    quantiles, counts = sketch.GetQuantilesAndCumulativeWeights(num_buckets)
    return (
        quantiles.flatten().to_numpy(zero_copy_only=False),
        counts.flatten().to_numpy(zero_copy_only=False),
    )

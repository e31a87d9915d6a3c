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
  quantiles and standard histograms and the num_values histogram. Ranks within 1% of the count
  (integers and value counts go in as distinct values with their counts as weights);
* tfx_bsl's MisraGriesSketch (1,000 counters, as TFDV's sketch-based top-k), fed each batch's
  distinct values Misra-Gries-reduced to at most 1,000 (`_misra_gries_reduced`): top_values and
  rank_histogram. Exact when a split's feature holds at most 1,000 distinct values; otherwise
  each count errs by at most N / 1,000 (N the feature's values in the split) and any value
  more frequent than that is listed;
* tfx_bsl's KmvSketch (1,024 minimum hashes): string `unique`. Exact up to 1,024 distinct
  values; beyond, a relative standard error of about 1/sqrt(1,024) ≈ 3%.

Histograms, top-k and proto layout come from TFDV's own helpers (`quantiles_util`,
`top_k_uniques_stats_util`), with StatsOptions' defaults, so the output has stock
StatisticsGen's shape. Feature types follow `mapping.Kind`: a feature with no value in a split
keeps its type (stock TFDV would call it STRING).
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import math
import os
from typing import Iterable, Optional, Sequence

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tfx_bsl.arrow import array_util
from tfx_bsl.sketches import KmvSketch, MisraGriesSketch, QuantilesSketch

from tfx_tabular.io.encoding import FeatureValues
from tfx_tabular.io.mapping import Feature, Kind

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


def _misra_gries_reduced(weights: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Misra-Gries' reduction of a batch's distinct values (indices, reduced weights): with more
    than `capacity` of them, the (capacity + 1)-th largest weight is taken from every value and
    values left without weight are dropped, as the sketch itself would. Each reduction removes
    at least (capacity + 1) times what it takes from any value, so over a stream the counts
    still err by at most N / (capacity + 1), while the sketch sees at most `capacity` values
    per batch instead of thousands."""
    if len(weights) <= capacity:
        return np.arange(len(weights)), weights
    cut = np.partition(weights, len(weights) - capacity - 1)[len(weights) - capacity - 1]
    kept = np.flatnonzero(weights > cut)
    return kept, weights[kept] - cut


class _BatchValues:
    """One feature's values in one batch, every split's share counted in one pass: a row's
    group is its split, or `num_splits` where the feature is null; value counts, strings and
    integers are counted per (value, split) by `_split_counts`."""

    def __init__(self, fv: FeatureValues, scalar: bool, split_ids: np.ndarray, num_splits: int):
        self.fv = fv
        self.scalar = scalar
        self.num_splits = num_splits
        self.row_groups = np.where(fv.valid, split_ids, num_splits)
        self.rows = np.bincount(self.row_groups, minlength=num_splits + 1)

    def _counts(self, keys: np.ndarray, groups: np.ndarray, low: int, num_keys: int):
        return _split_counts(keys, groups, low, num_keys, self.num_splits)

    @functools.cached_property
    def values(self) -> np.ndarray:
        return self.fv.values[: self.fv.row_splits[-1]]

    @functools.cached_property
    def value_groups(self) -> np.ndarray:
        """Each value's group (scalars: value r is row r's, a null row's slot in no split)."""
        if self.scalar:
            return self.row_groups
        return np.repeat(self.row_groups, np.diff(self.fv.row_splits))

    @functools.cached_property
    def value_count_table(self) -> np.ndarray:
        """rows[number of values, split] of a list feature."""
        counts = np.diff(self.fv.row_splits)
        longest = int(counts.max()) if len(counts) else 0
        return self._counts(counts, self.row_groups, 0, longest + 1)

    @functools.cached_property
    def strings(self) -> pa.Array:
        """The values as an Arrow array (null slots: some dictionary value)."""
        fv = self.fv
        if fv.codes is None:
            return _binary_array(fv.values[: fv.row_splits[-1] + 1], fv.data)
        codes = np.clip(fv.codes[: fv.row_splits[-1]], 0, len(fv.values) - 2)
        return _binary_array(fv.values, fv.data).take(pa.array(codes))

    @functools.cached_property
    def string_table(self) -> tuple[pa.Array, np.ndarray, bool, np.ndarray]:
        """The distinct strings, their lengths, whether any is invalid UTF-8, and
        counts[string, split]."""
        if self.fv.codes is None:
            encoded = pc.dictionary_encode(self.strings)
            dictionary = encoded.dictionary
            counts = self._counts(encoded.indices.to_numpy(), self.value_groups, 0, len(dictionary))
        else:
            dictionary, counts = self._dictionary_table()
        return (
            dictionary,
            pc.binary_length(dictionary).to_numpy().astype(np.int64),
            array_util.CountInvalidUTF8(dictionary) > 0,
            counts,
        )

    def _dictionary_table(self) -> tuple[pa.Array, np.ndarray]:
        """Dictionary pages' values counted by code, then merged by string (a writer may
        repeat a value in its dictionary). Only the dictionary is hashed, not every value."""
        fv = self.fv
        pages = _binary_array(fv.values, fv.data)
        counts = self._counts(fv.codes[: fv.row_splits[-1]], self.value_groups, 0, len(pages))
        encoded = pc.dictionary_encode(pages)
        if len(encoded.dictionary) == len(pages):
            return pages, counts
        merged = encoded.indices.to_numpy()
        size = len(encoded.dictionary)
        by_string = [np.bincount(merged, weights=c, minlength=size) for c in counts.T]
        return encoded.dictionary, np.stack(by_string, axis=1).astype(np.int64)

    @functools.cached_property
    def int_table(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct integers and counts[integer, split]: counted over the values' range
        when it is narrow (counts, ids of a few thousand), else through a hash table."""
        values, groups = self.values, self.value_groups
        low, high = (int(v) for v in _present_range(values, groups, self.num_splits))
        if high < low:
            return np.zeros(0, np.int64), np.zeros((0, self.num_splits), np.int64)
        if high - low <= 2 * len(values) + 4096:
            table = self._counts(values, groups, low, high - low + 1)
            distinct = np.flatnonzero(table.any(axis=1))
            return distinct + low, table[distinct]
        encoded = pc.dictionary_encode(pa.array(values))
        counts = self._counts(encoded.indices.to_numpy(), groups, 0, len(encoded.dictionary))
        return encoded.dictionary.to_numpy(), counts


# The sketch attributes of FeatureStatistics, and their classes.
_SKETCHES = {
    "num_values": QuantilesSketch,
    "quantiles": QuantilesSketch,
    "top": MisraGriesSketch,
    "distinct": KmvSketch,
}


def _sketch_bytes(sketch) -> bytes:
    # QuantilesSketch offers its state only through the pickling protocol's __getstate__.
    return sketch.__getstate__() if isinstance(sketch, QuantilesSketch) else sketch.Serialize()


def _sketch_from_bytes(kind, data: bytes):
    if kind is QuantilesSketch:
        sketch = QuantilesSketch.__new__(QuantilesSketch)
        sketch.__setstate__(data)
        return sketch
    return kind.Deserialize(data)


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
        self.top: Optional[MisraGriesSketch] = None
        self.distinct: Optional[KmvSketch] = None

    def add(self, batch: _BatchValues, split: int) -> None:
        """Add the rows of `batch` in group `split`."""
        present_rows = int(batch.rows[split])
        if not present_rows:
            return
        if self.scalar:
            # num_values is 1 for every present row: its sketch is made once, in `value_counts`
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

    def value_counts(self) -> QuantilesSketch:
        """The sketch of the number of values per present row."""
        if self.num_values is not None:
            return self.num_values
        sketch = _quantiles_sketch()
        sketch.AddValues(pa.array([1]), pa.array([float(self.num_non_missing)]))
        return sketch

    def _add_integers(self, values: np.ndarray, weights: np.ndarray) -> None:
        """Integers as distinct values and their counts: exact sums from the counts, and the
        sketch sees each distinct value once."""
        seen = np.flatnonzero(weights)
        if not len(seen):
            return
        values, weights = values[seen], weights[seen]
        low, high = values.min().item(), values.max().item()
        self.min, self.max = min(self.min, low), max(self.max, high)
        self.finite_min, self.finite_max = min(self.finite_min, low), max(self.finite_max, high)
        self.num_zeros += int(weights[values == 0].sum())
        as_double = values.astype(np.float64)
        count = int(weights.sum())
        mean = float(np.dot(as_double, weights)) / count
        self._merge_moments(count, mean, float(np.dot(np.square(as_double - mean), weights)))
        if self.quantiles is None:
            self.quantiles = _quantiles_sketch()
        self.quantiles.AddValues(pa.array(values), pa.array(weights.astype(np.float64)))

    def _add_floats(self, values: np.ndarray) -> None:
        nan = np.isnan(values)
        if nan.any():
            self.num_nan += int(nan.sum())
            values = values[~nan]
        if not len(values):
            return
        low, high = values.min().item(), values.max().item()
        self.min, self.max = min(self.min, low), max(self.max, high)
        finite = values
        if math.isinf(low) or math.isinf(high):
            finite = values[np.isfinite(values)]
            self.pos_inf += int(np.isposinf(values).sum())
        if len(finite):
            self.finite_min = min(self.finite_min, finite.min().item())
            self.finite_max = max(self.finite_max, finite.max().item())
        self.num_zeros += len(values) - int(np.count_nonzero(values))
        as_double = values.astype(np.float64)
        mean = float(as_double.mean())
        self._merge_moments(len(values), mean, float(np.square(as_double - mean).sum()))
        if self.quantiles is None:
            self.quantiles = _quantiles_sketch()
        self.quantiles.AddValues(pa.array(values))  # mostly distinct: counting costs more

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
        dictionary, lengths, any_invalid, counts = batch.string_table
        weights = counts[:, split]
        self.total_bytes += int(np.dot(lengths, weights))
        if any_invalid:
            rows = pa.array(batch.value_groups == split)
            self.invalid_utf8 += int(array_util.CountInvalidUTF8(batch.strings.filter(rows)))
        if self.top is None:
            self.top = MisraGriesSketch(
                num_buckets=NUM_RANK_HISTOGRAM_BUCKETS,
                invalid_utf8_placeholder=NON_UTF8_PLACEHOLDER,
                large_string_threshold=LARGE_STRING_THRESHOLD,
                large_string_placeholder=LARGE_BYTES_PLACEHOLDER,
            )
            self.distinct = KmvSketch(NUM_KMV_BUCKETS)
        seen = np.flatnonzero(weights)
        self.distinct.AddValues(dictionary.take(pa.array(seen)))
        # tfx_bsl applies its large-string placeholder to unweighted values only: long values
        # go in unweighted, the others weighted (each distinct value once) and reduced.
        large = lengths[seen] > LARGE_STRING_THRESHOLD
        if large.any():
            long_values = seen[large]
            self.top.AddValues(
                dictionary.take(pa.array(np.repeat(long_values, weights[long_values])))
            )
            seen = seen[~large]
        kept, reduced = _misra_gries_reduced(weights[seen], NUM_RANK_HISTOGRAM_BUCKETS)
        self.top.AddValues(
            dictionary.take(pa.array(seen[kept])), pa.array(reduced.astype(np.float32))
        )

    def compact(self) -> None:
        """Fold the quantile sketches' buffers into their summaries, as TFDV's combiner does
        before Beam shuffles its accumulators (half the bytes at 1M rows, same bounds)."""
        for sketch in (self.num_values, self.quantiles):
            if sketch is not None:
                sketch.Compact()

    def to_dict(self) -> dict:
        """A JSON-able form (see SplitStatistics.to_bytes)."""
        out = {k: v for k, v in vars(self).items() if k not in _SKETCHES}
        out["kind"] = int(self.kind)
        out["sketches"] = {
            name: base64.b64encode(_sketch_bytes(getattr(self, name))).decode()
            for name in _SKETCHES
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
            setattr(stats, name, _sketch_from_bytes(_SKETCHES[name], base64.b64decode(encoded)))
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
        for name in ("num_values", "quantiles", "top", "distinct"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is None:
                setattr(self, name, theirs)
            elif theirs is not None:
                mine.Merge(theirs)


class SplitStatistics:
    """The mergeable statistics of one split: its row count and each feature's state."""

    def __init__(self, features: Sequence[Feature] = ()):
        self.num_examples = 0
        self.features = {
            f.name: FeatureStatistics(f.kind, scalar=f.list_depth == 0) for f in features
        }

    def to_bytes(self) -> bytes:
        """The accumulator as bytes (a shard's part file): JSON numbers and the sketches' own
        serialized forms, so any worker's Python and tfx_bsl can merge it."""
        for stats in self.features.values():
            stats.compact()
        features = {name: stats.to_dict() for name, stats in self.features.items()}
        return json.dumps({"num_examples": self.num_examples, "features": features}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> SplitStatistics:
        decoded = json.loads(data)
        result = cls()
        result.num_examples = decoded["num_examples"]
        result.features = {
            name: FeatureStatistics.from_dict(stats) for name, stats in decoded["features"].items()
        }
        return result

    def merge(self, other: SplitStatistics) -> SplitStatistics:
        self.num_examples += other.num_examples
        for name, stats in other.features.items():
            if name in self.features:
                self.features[name].merge(stats)
            else:
                self.features[name] = stats
        return self


def add_batch(
    splits: Sequence[SplitStatistics],
    values: Iterable[tuple[Feature, FeatureValues]],
    split_ids: np.ndarray,
) -> None:
    """Add a batch's encoded features (`encoding.feature_columns`), row r to
    `splits[split_ids[r]]`. `values` may be a generator: one feature at a time is held."""
    rows = np.bincount(split_ids, minlength=len(splits)).tolist()
    for split, count in zip(splits, rows, strict=True):
        split.num_examples += count
    for feature, fv in values:
        batch = _BatchValues(fv, feature.list_depth == 0, split_ids, len(splits))
        for index, split in enumerate(splits):
            if rows[index]:
                split.features[feature.name].add(batch, index)


def _binary_array(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    """Strings at int64 `offsets` into `data` (not necessarily from 0), without a copy."""
    return pa.Array.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _quantiles_and_counts(sketch: QuantilesSketch, num_buckets: int):
    quantiles, counts = sketch.GetQuantilesAndCumulativeWeights(num_buckets)
    return (
        quantiles.flatten().to_numpy(zero_copy_only=False),
        counts.flatten().to_numpy(zero_copy_only=False),
    )


@functools.cache
def _quantiles_util():
    """TFDV's `quantiles_util` module, loaded alone: it needs only numpy and
    tensorflow_metadata, while importing it through its package loads TensorFlow and Beam's
    TFDV transforms (4.5 s, more than the statistics themselves take at 1M rows)."""
    package = importlib.util.find_spec("tensorflow_data_validation")
    path = os.path.join(package.submodule_search_locations[0], "utils", "quantiles_util.py")
    spec = importlib.util.spec_from_file_location("_tfdv_quantiles_util", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _common_proto(stats: FeatureStatistics, num_examples: int, out) -> None:
    quantiles_util = _quantiles_util()
    out.num_non_missing = stats.num_non_missing
    out.num_missing = num_examples - stats.num_non_missing
    out.tot_num_values = stats.tot_num_values
    if stats.num_non_missing:
        out.min_num_values = int(stats.min_num_values)
        out.max_num_values = stats.max_num_values
        out.avg_num_values = stats.tot_num_values / stats.num_non_missing
        out.num_values_histogram.CopyFrom(
            quantiles_util.generate_quantiles_histogram(
                *_quantiles_and_counts(stats.value_counts(), NUM_VALUES_HISTOGRAM_BUCKETS)
            )
        )


def _numeric_proto(stats: FeatureStatistics, out) -> None:
    """As TFDV's BasicStatsGenerator fills NumericStatistics (unweighted)."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

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
    standard = quantiles_util.generate_equi_width_histogram(
        quantiles=quantiles,
        cumulative_counts=counts,
        finite_min=stats.finite_min,
        finite_max=stats.finite_max,
        num_buckets=NUM_HISTOGRAM_BUCKETS,
        num_pos_inf=stats.pos_inf,
    )
    by_quantile = quantiles_util.generate_quantiles_histogram(
        *quantiles_util.rebin_quantiles(quantiles, counts, _STD_HISTOGRAM_QUANTILES_FACTOR)
    )
    for histogram in (standard, by_quantile):
        histogram.num_nan = stats.num_nan
        out.histograms.add().CopyFrom(histogram)


def _string_proto(stats: FeatureStatistics, out) -> None:
    """As TFDV fills StringStatistics, top-k and uniques as its sketch-based generator does
    (`top_k_uniques_stats_util._make_feature_stats_proto_topk`: by count, then by value, both
    descending)."""
    if stats.tot_num_values:
        out.avg_length = stats.total_bytes / stats.tot_num_values
    out.invalid_utf8_count = stats.invalid_utf8
    if stats.top is None:
        return
    estimate = stats.top.Estimate()
    pairs = sorted(
        zip(
            estimate.field("counts").to_pylist(),
            estimate.field("values").to_pylist(),
            strict=True,
        ),
        reverse=True,
    )
    frequent = [pair for pair in pairs if pair[0] >= FREQUENCY_THRESHOLD]
    for rank, (count, value) in enumerate(frequent[:NUM_RANK_HISTOGRAM_BUCKETS]):
        try:
            label = value.decode("utf-8")
        except UnicodeDecodeError:  # weighted values reach the sketch without its placeholder
            label = NON_UTF8_PLACEHOLDER
        if rank < NUM_TOP_VALUES:
            out.top_values.add(value=label, frequency=count)
        out.rank_histogram.buckets.add(
            low_rank=rank, high_rank=rank, sample_count=count, label=label
        )
    out.unique = stats.distinct.Estimate()


def feature_proto(name: str, stats: FeatureStatistics, num_examples: int):
    """One feature's `FeatureNameStatistics`."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    out = statistics_pb2.FeatureNameStatistics()
    out.path.step.append(name)
    if stats.kind == Kind.BYTES:
        out.type = statistics_pb2.FeatureNameStatistics.STRING
        _string_proto(stats, out.string_stats)
        _common_proto(stats, num_examples, out.string_stats.common_stats)
    else:
        kind = "INT" if stats.kind == Kind.INT else "FLOAT"
        out.type = statistics_pb2.FeatureNameStatistics.Type.Value(kind)
        _numeric_proto(stats, out.num_stats)
        _common_proto(stats, num_examples, out.num_stats.common_stats)
    return out


def statistics_list(split: SplitStatistics):
    """The `DatasetFeatureStatisticsList` stock StatisticsGen writes for one split: one dataset,
    its features in name order (no features for a split without rows, as TFDV)."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    result = statistics_pb2.DatasetFeatureStatisticsList()
    dataset = result.datasets.add(num_examples=split.num_examples)
    if split.num_examples:
        for name in sorted(split.features):
            dataset.features.add().CopyFrom(
                feature_proto(name, split.features[name], split.num_examples)
            )
    return result

"""A schema's constraints from example statistics, the statistics of every split in an
ExampleStatistics artifact (ParquetExampleGen's `statistics` output, or stock StatisticsGen's):
each constraint holds on every split it came from, so stock ExampleValidator finds no anomaly on
that data.

* presence: `min_fraction: 1` only where no split misses the feature; `min_count: 1` only where
  every split holds it (a column with one value in one split gets no `min_count`);
* value_count: the smallest and largest value counts over all splits (features without a shape);
* string_domain: the union of every split's values, when each split's value list is complete
  (its counts add up to the split's values, no invalid UTF-8 or oversized placeholder) and the
  union has at most `max_vocabulary_size` values;
* float_domain (where the footers set one): the smallest and largest value written over all
  splits (float32, as written, so rounding cannot put a value outside); int_domain stays the
  footers' exact bounds, as the statistics hold integers as doubles.

Where the footers say nothing of a column (files written without statistics), `column_stats_of`
gives schema inference the null counts and extremes these statistics hold instead: integers
beyond 2^53, which a double cannot hold exactly, widened outward to the next double.
"""

from __future__ import annotations

import posixpath
from typing import Mapping, Optional

import numpy as np
import pyarrow.fs as pafs
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from tfx_tabular import statistics
from tfx_tabular.source.errors import InputError
from tfx_tabular.source.files import ColumnStats
from tfx_tabular.source.filesystems import resolve_filesystem

_PLACEHOLDERS = {statistics.NON_UTF8_PLACEHOLDER, statistics.LARGE_BYTES_PLACEHOLDER}


def _statistics_files(uri: str) -> tuple[pafs.FileSystem, list[str]]:
    """The `Split-*/FeatureStats.pb` paths of an ExampleStatistics folder (pyarrow's filesystems:
    TensorFlow's gfile took longer to import than the rest of `infer-schema`). Listed
    recursively: an object store has no folders to list, only the files' names."""
    filesystem, folder = resolve_filesystem(uri)
    try:
        entries = filesystem.get_file_info(pafs.FileSelector(folder, recursive=True))
    except (FileNotFoundError, NotADirectoryError):
        return filesystem, []
    paths = []
    for entry in entries:
        parts = posixpath.relpath(entry.path, folder).split("/")
        if (
            entry.type == pafs.FileType.File
            and len(parts) == 2
            and parts[0].startswith("Split-")
            and parts[1] == statistics.FILE_NAME
        ):
            paths.append(entry.path)
    return filesystem, sorted(paths)


def load_example_statistics(uri: str) -> dict[str, statistics_pb2.DatasetFeatureStatisticsList]:
    """Every `Split-<name>/FeatureStats.pb` of an ExampleStatistics folder, by split name."""
    filesystem, paths = _statistics_files(uri)
    result = {}
    for path in paths:
        split = posixpath.basename(posixpath.dirname(path))[len("Split-") :]
        stats = statistics_pb2.DatasetFeatureStatisticsList()
        with filesystem.open_input_stream(path) as handle:
            stats.ParseFromString(handle.read())
        result[split] = stats
    if not result:
        raise InputError(f"no Split-*/{statistics.FILE_NAME} under the example statistics {uri}")
    return result


def _common(feature: statistics_pb2.FeatureNameStatistics):
    kind = feature.WhichOneof("stats")
    return getattr(feature, kind).common_stats if kind else statistics_pb2.CommonStatistics()


def _by_feature(
    splits: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList],
) -> dict[str, list[statistics_pb2.FeatureNameStatistics]]:
    """Each feature's statistics in every split with rows; a split without the feature at all
    counts as one where it is always missing."""
    datasets = [s.datasets[0] for s in splits.values() if s.datasets and s.datasets[0].num_examples]
    # Each split's top-level features by name, looked up once: a scan per feature was
    # quadratic in the columns.
    by_name = [
        {f.path.step[0]: f for f in reversed(d.features) if len(f.path.step) == 1} for d in datasets
    ]
    result = {}
    for name in set().union(*by_name):
        result[name] = []
        for dataset, features in zip(datasets, by_name, strict=True):
            missing = statistics_pb2.FeatureNameStatistics()
            missing.num_stats.common_stats.num_missing = dataset.num_examples
            result[name].append(features.get(name, missing))
    return result


def _set_presence(target: schema_pb2.Feature, commons) -> None:
    always = all(c.num_missing == 0 and c.num_non_missing > 0 for c in commons)
    everywhere = all(c.num_non_missing > 0 for c in commons)
    target.presence.ClearField("min_fraction")
    target.presence.ClearField("min_count")
    if always:
        target.presence.min_fraction = 1.0
    if everywhere:
        target.presence.min_count = 1
    if not always:
        target.ClearField("shape")  # a fixed shape asserts a value in every example


def _set_value_count(target: schema_pb2.Feature, commons) -> None:
    present = [c for c in commons if c.num_non_missing]
    if target.HasField("shape") or not present:
        return
    target.value_count.min = min(c.min_num_values for c in present)
    target.value_count.max = max(c.max_num_values for c in present)


def _string_values(features) -> Optional[set[str]]:
    """The union of the splits' values, or None when some split's list is incomplete."""
    values: set[str] = set()
    for feature in features:
        stats = feature.string_stats
        buckets = stats.rank_histogram.buckets
        if not stats.common_stats.tot_num_values:
            continue
        complete = sum(b.sample_count for b in buckets) == stats.common_stats.tot_num_values
        labels = {b.label for b in buckets}
        if not complete or stats.invalid_utf8_count or labels & _PLACEHOLDERS:
            return None
        values |= labels
    return values


def _set_domain(target: schema_pb2.Feature, features, max_vocabulary_size: int) -> None:
    numbers = [f.num_stats for f in features if f.num_stats.common_stats.tot_num_values]
    if target.HasField("float_domain") and numbers:
        target.float_domain.min = min(n.min for n in numbers)
        target.float_domain.max = max(n.max for n in numbers)
    elif target.type == schema_pb2.BYTES and target.WhichOneof("domain_info") is None:
        values = _string_values(features)
        if values and len(values) <= max_vocabulary_size:
            target.string_domain.name = target.name
            target.string_domain.value.extend(sorted(values))


_EXACT_DOUBLE = 2**53  # every integer below this magnitude is a double exactly (2^53 + 1 is not)
_INT64 = (-(2**63), 2**63 - 1)


def _outward_int(value: float, direction: float) -> int:
    """An integer bound from a double the statistics hold: exact below 2^53; beyond, the next
    double in `direction` (the integer it rounded from lies between), inside int64."""
    if abs(value) >= _EXACT_DOUBLE:
        value = float(np.nextafter(value, direction))
    return min(max(int(value), _INT64[0]), _INT64[1])


def column_stats_of(
    splits: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList],
) -> dict[str, ColumnStats]:
    """Each top-level feature's null count and extremes over every split, as footer statistics
    give them (integer extremes widened outward where a double cannot hold them)."""
    result = {}
    for name, features in _by_feature(splits).items():
        nulls = sum(_common(f).num_missing for f in features)
        numbers = [f for f in features if f.num_stats.common_stats.tot_num_values]
        if not numbers:
            result[name] = ColumnStats(nulls)
            continue
        low, high = min(f.num_stats.min for f in numbers), max(f.num_stats.max for f in numbers)
        if numbers[0].type == statistics_pb2.FeatureNameStatistics.INT:
            low, high = _outward_int(low, -np.inf), _outward_int(high, np.inf)
        result[name] = ColumnStats(nulls, low, high)
    return result


def apply_example_statistics(
    schema: schema_pb2.Schema,
    splits: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList],
    max_vocabulary_size: int,
) -> schema_pb2.Schema:
    """`schema` with presence, value counts and domains that hold on every split (module doc)."""
    result = schema_pb2.Schema()
    result.CopyFrom(schema)
    by_feature = _by_feature(splits)
    for target in result.feature:
        features = by_feature.get(target.name)
        if not features:
            continue
        commons = [_common(f) for f in features]
        _set_presence(target, commons)
        _set_value_count(target, commons)
        _set_domain(target, features, max_vocabulary_size)
    return result

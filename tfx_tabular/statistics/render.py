"""A split's statistics rendered as the `DatasetFeatureStatisticsList` stock StatisticsGen
writes: TFDV's `quantiles_util` helpers (median and rebinning as TFDV's own code, the histograms
through `histograms`, their numba port with identical output), top-k laid out as TFDV's
`top_k_uniques_stats_util`, with StatsOptions' defaults (`options`), so the output has stock
StatisticsGen's shape. Feature types follow `mapping.Kind`: a feature with no value in a split
keeps its type (stock TFDV would call it STRING)."""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx_bsl.arrow import array_util

from tfx_tabular.coders import wire
from tfx_tabular.source.mapping import Kind
from tfx_tabular.statistics import histograms
from tfx_tabular.statistics.accumulators import (
    FeatureStatistics,
    SplitStatistics,
    quantiles_and_counts,
)
from tfx_tabular.statistics.options import (
    FREQUENCY_THRESHOLD,
    NON_UTF8_PLACEHOLDER,
    NUM_HISTOGRAM_BUCKETS,
    NUM_QUANTILES_HISTOGRAM_BUCKETS,
    NUM_RANK_HISTOGRAM_BUCKETS,
    NUM_TOP_VALUES,
    NUM_VALUES_HISTOGRAM_BUCKETS,
    STD_HISTOGRAM_QUANTILES_FACTOR,
)
from tfx_tabular.statistics.sketches import TopK

FILE_NAME = "FeatureStats.pb"  # stock StatisticsGen's file name in each Split-<name> folder


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
    quantiles, counts = quantiles_and_counts(
        stats.quantiles, STD_HISTOGRAM_QUANTILES_FACTOR * NUM_QUANTILES_HISTOGRAM_BUCKETS
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
        *quantiles_util.rebin_quantiles(quantiles, counts, STD_HISTOGRAM_QUANTILES_FACTOR)
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


def _feature_bytes(feature, ranks: Optional[bytes]) -> bytes:
    """A serialized FeatureNameStatistics, a string feature's rank histogram bytes put in its
    string_stats as they are (fields may come in any order on the wire)."""
    if ranks is None:
        return feature.SerializeToString()
    string_stats = feature.string_stats.SerializeToString() + wire.length_delimited(
        _field_number(feature.string_stats, "rank_histogram"), ranks
    )
    feature.ClearField("string_stats")
    return feature.SerializeToString() + wire.length_delimited(
        _field_number(feature, "string_stats"), string_stats
    )


def serialized_statistics_list(split: SplitStatistics) -> bytes:
    """The split's `DatasetFeatureStatisticsList` serialized, assembled from each feature's
    bytes: the rank histograms (a thousand labelled buckets a string feature) are never parsed into the
    message to be serialized again, which took most of a wide table's publishing."""
    split.fold_scalars()
    split.fold_strings()
    dataset = statistics_pb2.DatasetFeatureStatistics(num_examples=split.num_examples)
    number = _field_number(dataset, "features")
    pieces = [dataset.SerializeToString()]
    for name in sorted(split.features) if split.num_examples else ():
        feature = statistics_pb2.FeatureNameStatistics()
        ranks = _feature_proto(name, split.features[name], split.num_examples, feature)
        pieces.append(wire.length_delimited(number, _feature_bytes(feature, ranks)))
    number = _field_number(statistics_pb2.DatasetFeatureStatisticsList(), "datasets")
    return wire.length_delimited(number, b"".join(pieces))

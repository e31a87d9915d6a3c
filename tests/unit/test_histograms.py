"""tfx_tabular.statistics.histograms: the protos of TFDV 1.16.1's quantiles_util, bit for bit, on quantiles
from tfx_bsl's QuantilesSketch and on hand-made edge cases; TFDV's rejections are rejected too."""

import math
import struct

import numpy as np
import pyarrow as pa
import pytest
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx_bsl.sketches import QuantilesSketch

from tfx_tabular.statistics import histograms, render

INF, NAN = float("inf"), float("nan")
NUM_QUANTILE_BUCKETS = 1000  # as the statistics read the equi-width histogram off (10 x 100)


TFDV = render._quantiles_util()  # TFDV's own module, loaded without TensorFlow


def _bits(histogram):
    buckets = [
        struct.pack("<3d", b.low_value, b.high_value, b.sample_count) for b in histogram.buckets
    ]
    return histogram.type, buckets


def assert_same(ours, theirs):
    """Bit for bit, and `==`, which takes -0.0 for 0.0 and never holds with a NaN count."""
    assert _bits(ours) == _bits(theirs)
    if not any(math.isnan(b.sample_count) for b in theirs.buckets):
        assert ours == theirs


def test_the_comparison_sees_a_sign_of_zero():
    zero, negative_zero = statistics_pb2.Histogram(), statistics_pb2.Histogram()
    zero.buckets.add(sample_count=0.0)
    negative_zero.buckets.add(sample_count=-0.0)
    with pytest.raises(AssertionError):
        assert_same(zero, negative_zero)


# --- Quantiles from tfx_bsl's sketch, as tfx_tabular.statistics.render (and TFDV) obtain them.


def _integers(rng, size):
    return rng.integers(-20, 30, size), None


def _zipf(rng, size):
    return np.minimum(rng.zipf(1.3, size), 10**6), None


def _floats(rng, size):
    return rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4), None


def _lognormal(rng, size):
    return rng.lognormal(0.0, 2.0, size), None


def _weighted(rng, size):
    return rng.standard_normal(size), rng.exponential(1.0, size)


def _single_value(rng, size):
    return np.full(size, 3.25), None


def _two_values(rng, size):
    return rng.choice([-1.5, 2.0], size, p=[0.9, 0.1]), None


def _with_infinities(rng, size):
    values = rng.standard_normal(size)
    values[rng.random(size) < 0.05] = -INF
    values[rng.random(size) < 0.1] = INF
    values[0] = 0.5  # at least one finite value
    return values, None


KINDS = [
    _integers,
    _zipf,
    _floats,
    _lognormal,
    _weighted,
    _single_value,
    _two_values,
    _with_infinities,
]


def _sketched(kind, seed):
    """(quantiles, cumulative counts, finite_min, finite_max, num_pos_inf) of a random feature.
    Integers go in as distinct values and their counts, with int min/max, as statistics.py does."""
    rng = np.random.default_rng(seed)
    values, weights = kind(rng, int(rng.integers(1, 20_000)))
    sketch = QuantilesSketch(eps=0.01, max_num_elements=1 << 32, num_streams=1)
    if values.dtype.kind == "i":
        values, counts = np.unique(values, return_counts=True)
        sketch.AddValues(pa.array(values), pa.array(counts.astype(np.float64)))
        finite_min, finite_max, num_pos_inf = int(values[0]), int(values[-1]), 0
    else:
        if weights is None:  # unweighted, as statistics.py adds floats
            sketch.AddValues(pa.array(values))
            weights = np.ones(len(values))
        else:
            sketch.AddValues(pa.array(values), pa.array(weights))
        finite = values[np.isfinite(values)]
        finite_min, finite_max = float(finite.min()), float(finite.max())
        num_pos_inf = float(weights[values == INF].sum())
    quantiles, counts = sketch.GetQuantilesAndCumulativeWeights(NUM_QUANTILE_BUCKETS)
    quantiles = quantiles.flatten().to_numpy(zero_copy_only=False)
    counts = counts.flatten().to_numpy(zero_copy_only=False)
    return quantiles, counts, finite_min, finite_max, num_pos_inf


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__.strip("_"))
def test_sketched_quantiles(kind, seed):
    quantiles, counts, finite_min, finite_max, num_pos_inf = _sketched(kind, seed)
    for num_buckets in (10, 3):
        args = (quantiles, counts, finite_min, finite_max, num_buckets, num_pos_inf)
        assert_same(
            histograms.equi_width_histogram(*args), TFDV.generate_equi_width_histogram(*args)
        )
    rebinned = TFDV.rebin_quantiles(quantiles, counts, 100)  # the 10 buckets of the statistics
    for pair in ((quantiles, counts), rebinned):
        assert_same(histograms.quantiles_histogram(*pair), TFDV.generate_quantiles_histogram(*pair))


# --- Hand-made edge cases: (quantiles, cumulative counts, finite_min, finite_max, num_pos_inf).


def _duplicate_run(length):
    """A run of `length` bins with the same upper bound and uneven weights, whose shared weight
    depends on the order of summation (numpy's pairwise sum: < 8, <= 128 and beyond)."""
    rng = np.random.default_rng(length)
    quantiles = np.concatenate([[0.0], np.full(length, 1.0), [2.0]])
    return quantiles, np.cumsum(rng.uniform(0.0, 1.0, length + 2)), 0.0, 2.0, 0


HUGE = (-1.7e308, 1.7e308)  # finite_min and finite_max: their difference overflows
EDGES = {
    "leading -inf": ([-INF, -INF, 1, 2, 3], [2, 2, 3, 5, 6], 1, 3, 0),
    "-inf of zero weight": ([-INF, 1, 2], [0, 1, 2], 1, 2, 0),
    "trailing +inf": ([1, 2, 3, INF, INF], [1, 2, 4, 6, 6], 1, 3, 2),
    "+inf bucket holds the finite max": ([0, 1, 2, INF], [1, 2, 3, 6], 0, 7.5, 2),
    "both infinities": ([-INF, 0, 1, 2, INF], [3, 4, 5, 6, 9], 0, 2, 3),
    "weighted infinities": ([-INF, -INF, 0.5, 1.5, INF], [0.25, 0.25, 1.75, 2.5, 3], 0.5, 1.5, 0.5),
    "finite_min == finite_max": ([5] * 11, [3] * 11, 5, 5, 0),
    "finite_min == finite_max, infinities": ([-INF, 5, 5, INF], [1, 4, 4, 6], 5.0, 5.0, 2),
    "no finite value": ([-INF, -INF, INF, INF], [2, 2, 5, 5], INF, -INF, 3),
    "no finite value, -inf only": ([-INF] * 5, [4] * 5, INF, -INF, 0),
    "duplicates at start": ([0, 0, 0, 1, 2, 3], [5, 5, 5, 6, 8, 9], 0, 3, 0),
    "duplicates in the middle": ([0, 1, 1, 1, 2, 3], [1, 2, 2, 7, 8, 9], 0, 3, 0),
    "duplicates at end": ([0, 1, 2, 3, 3, 3], [1, 2, 3, 4, 4, 9], 0, 3, 0),
    "duplicate run of 5": _duplicate_run(5),
    "duplicate run of 21": _duplicate_run(21),
    "duplicate run of 300": _duplicate_run(300),
    "point bucket on the first bound": ([0, 0, 4, 9], [2, 2, 3, 6], 0, 9, 0),
    "point bucket on inner bounds": ([0, 5, 5, 6, 6, 10], [1, 3, 6, 7, 8, 9], 0, 10, 0),
    "negative values": ([-10, -7.5, -3, -3, -1], [1, 2, 3, 3, 4], -10, -1, 0),
    "linspace overflows": ([-1.7e308, 0, 1.7e308], [1, 2, 3], *HUGE, 0),
    "linspace overflows, infinities": ([-INF, -1.7e308, 1.7e308, INF], [1, 2, 3, 4], *HUGE, 1),
    # The first count overflows: an infinite bucket, whose 0.0 overlaps add NaNs (as long as a
    # later interval starts its scan at that bucket).
    "overflowing counts": ([0, 1, 2, 3], [-1.7e308, 1.7e308, 1.7e308, 1.7e308], 0, 3, 0),
    "huge finite range": ([0, 1e307, 1.7e308], [1, 2, 3], 0, 1.7e308, 0),
    "step underflows to 0": ([0, 5e-324], [1, 2], 0.0, 5e-324, 0),
    "step underflows, 3 ulps": ([-5e-324, 1e-323], [1, 2], -5e-324, 1e-323, 0),
    "single quantile": ([2.0], [7.0], 2.0, 2.0, 0),
    "no quantile": ([], [], 1.0, 2.0, 0),
}


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("num_buckets", [10, 3])
@pytest.mark.parametrize("edge", EDGES.values(), ids=EDGES.keys())
def test_equi_width_edge_cases(edge, num_buckets):
    quantiles, counts, finite_min, finite_max, num_pos_inf = edge
    args = (np.array(quantiles, float), np.array(counts, float), finite_min, finite_max)
    args += (num_buckets, num_pos_inf)
    assert_same(histograms.equi_width_histogram(*args), TFDV.generate_equi_width_histogram(*args))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("edge", EDGES.values(), ids=EDGES.keys())
def test_quantiles_histogram_edge_cases(edge):
    quantiles, counts = np.array(edge[0], float), np.array(edge[1], float)
    assert_same(
        histograms.quantiles_histogram(quantiles, counts),
        TFDV.generate_quantiles_histogram(quantiles, counts),
    )


@pytest.mark.parametrize(
    "args, tfdv_error",
    [
        pytest.param(([0, 2, 1], [1, 2, 3], 0, 2, 10, 0), AssertionError, id="unsorted"),
        pytest.param(([0, NAN, 1], [1, 2, 3], 0, 1, 10, 0), AssertionError, id="NaN quantile"),
        pytest.param(([0, 1], [1, 2], 0, INF, 10, 0), AssertionError, id="finite_max infinite"),
        pytest.param(([-INF, -INF], [1, 1], 0, 1, 10, 2), IndexError, id="+inf, all -inf"),
    ],
)
def test_equi_width_rejects_what_tfdv_rejects(args, tfdv_error):
    args = (np.array(args[0], float), np.array(args[1], float)) + args[2:]
    with pytest.raises(tfdv_error):
        TFDV.generate_equi_width_histogram(*args)
    with pytest.raises(ValueError):
        histograms.equi_width_histogram(*args)


@pytest.mark.parametrize(
    "function, args",
    [
        (histograms.quantiles_histogram, ([0.0, 1.0], [1.0])),
        (histograms.equi_width_histogram, ([0.0, 1.0], [1.0], 0, 1, 10, 0)),
        (histograms.equi_width_histogram, ([0.0, 1.0], [1.0, 2.0], 0, 1, 0, 0)),
    ],
    ids=["lengths differ", "lengths differ (equi-width)", "no bucket"],
)
def test_rejects_meaningless_arguments(function, args):
    """Where TFDV returns a partial or arbitrary histogram."""
    with pytest.raises(ValueError):
        function(*args)


@pytest.mark.parametrize("size", [0, 1, 130, 1000])
def test_rank_histogram_is_the_message_protobuf_builds(size):
    """Bucket r: ranks r (varints past 127 too), the label (empty, non-ASCII, over 127 bytes),
    the count (a double)."""
    rng = np.random.default_rng(size)
    labels = [["", "été", "x" * 200, "ok"][i % 4] + str(i if i % 4 else "") for i in range(size)]
    labels[: min(size, 1)] = [""][: min(size, 1)]
    counts = rng.integers(1, 10**12, size)
    expected = statistics_pb2.RankHistogram()
    for rank, (label, count) in enumerate(zip(labels, counts.tolist(), strict=True)):
        expected.buckets.add(low_rank=rank, high_rank=rank, label=label, sample_count=count)
    encoded = histograms.rank_histogram_bytes(pa.array(labels, pa.large_string()), counts)
    ours = statistics_pb2.RankHistogram.FromString(encoded)
    assert ours == expected
    assert ours.SerializeToString() == expected.SerializeToString()

"""A numba port of the histogram helpers of TFDV 1.16.1's `utils/quantiles_util.py`:
`equi_width_histogram` and `quantiles_histogram` return the protos that
`generate_equi_width_histogram` and `generate_quantiles_histogram` return, bit for bit, from the
same float operations in the same order (numpy's pairwise summation and `np.linspace` included).
TFDV loops in Python over protobuf buckets (1,001 quantiles) for every numeric feature; here the
loops run compiled over float64 arrays and the proto is built once.

`rank_histogram_bytes` encodes a string feature's 1,000-bucket RankHistogram from its encoded form
for protobuf to parse, not bucket by bucket in Python (1,000 buckets per string feature and split).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pyarrow as pa
from tensorflow_metadata.proto.v0 import statistics_pb2

from tfx_tabular.coders import wire

# numpy's `pairwise_sum`: sums up to this length are unrolled 8 ways, longer ones split in two.
_PAIRWISE_BLOCK = 128


@numba.njit(cache=True, nogil=True)
def _pairwise_sum(values):
    """The order in which numpy's `values.sum()` adds a contiguous array (its `pairwise_sum`)."""
    n = len(values)
    if n < 8:
        total = 0.0
        for value in values:
            total += value
        return total
    if n <= _PAIRWISE_BLOCK:
        partial = values[:8].copy()
        i = 8
        while i < n - n % 8:
            for k in range(8):
                partial[k] += values[i + k]
            i += 8
        total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) + (
            (partial[4] + partial[5]) + (partial[6] + partial[7])
        )
        for k in range(i, n):
            total += values[k]
        return total
    half = n // 2
    half -= half % 8
    return _pairwise_sum(values[:half]) + _pairwise_sum(values[half:])


@numba.njit(cache=True, nogil=True)
def _bin_weights(boundaries, cumulative_counts):
    """TFDV's `_get_bin_weights`: (low, high, weight) of the bins between consecutive boundaries.
    Bins sharing an upper bound share their weight evenly, and the first cumulative count (the
    minimum's weight) is spread over the bins identical to the first."""
    low = boundaries[:-1]
    high = boundaries[1:]
    n = len(low)
    weights = np.empty(n)
    for k in range(n):  # loops, not array expressions: numba compiles those slowly
        weights[k] = cumulative_counts[k + 1] - cumulative_counts[k]
    i = 0
    while i < n:
        j = i + 1
        while j < n and high[i] == high[j]:
            j += 1
        if j > i + 1:
            shared = _pairwise_sum(weights[i:j]) / (j - i)
            for k in range(i, j):
                weights[k] = shared
        i = j
    i = 0
    while i < n and low[0] == low[i] and high[0] == high[i]:
        i += 1
    if i > 0:
        minimum_share = cumulative_counts[0] / i
        for k in range(i):
            weights[k] += minimum_share
    return low, high, weights


@numba.njit(cache=True, nogil=True)
def _appended(values, value):
    out = np.empty(len(values) + 1)
    for k in range(len(values)):
        out[k] = values[k]
    out[len(values)] = value
    return out


@numba.njit(cache=True, nogil=True)
def _strip_infinities(quantiles, cumulative_counts, finite_max, num_pos_inf):
    """TFDV's `_strip_infinities`: (quantiles, counts, num_neg_inf) without the leading -inf
    quantiles and, if num_pos_inf, with the +inf ones replaced by finite_max. Quantiles are
    sorted, so counting from the left finds what TFDV's `np.searchsorted` calls find."""
    neg = 0
    while neg < len(quantiles) and quantiles[neg] == -np.inf:
        neg += 1
    num_neg_inf = 0.0
    if neg:
        num_neg_inf = cumulative_counts[neg - 1]
        quantiles = quantiles[neg:]
        counts = np.empty(len(quantiles))
        for k in range(len(quantiles)):
            counts[k] = cumulative_counts[neg + k] - num_neg_inf
        cumulative_counts = counts
    if num_pos_inf != 0.0:  # Python truthiness, as TFDV's `if num_pos_inf:` (NaN is true)
        if not len(quantiles):  # TFDV raises an IndexError here
            raise ValueError("num_pos_inf is nonzero but no quantile is above -inf")
        finite_max_count = cumulative_counts[-1] - num_pos_inf
        pos = 0
        while pos < len(quantiles) and quantiles[pos] < np.inf:
            pos += 1
        quantiles = _appended(quantiles[:pos], finite_max)
        cumulative_counts = _appended(cumulative_counts[:pos], finite_max_count)
    return quantiles, cumulative_counts, num_neg_inf


@numba.njit(cache=True, nogil=True)
def _linspace(start, stop, num_buckets):
    """`np.linspace(start, stop, num_buckets + 1)` with numpy 1.26's operations: k * step + start,
    (k / num_buckets) * delta + start where the step underflows to 0, and stop itself last."""
    delta = stop - start
    step = delta / num_buckets
    bounds = np.empty(num_buckets + 1)
    for k in range(num_buckets + 1):
        if step == 0:
            bounds[k] = float(k) / num_buckets * delta + start
        else:
            bounds[k] = float(k) * step + start
    bounds[num_buckets] = stop
    return bounds


@numba.njit(cache=True, nogil=True)
def _overlap(bucket_low, bucket_high, low_bound, high_bound, first_bucket):
    """TFDV's `_overlap`: (fraction of the bucket within [low_bound, high_bound], whether the
    bucket precedes the interval, whether it follows it). A point bucket on the left edge counts
    in the first interval only. TFDV's last case (a ValueError) needs a NaN bound, which the
    sortedness check and the finite boundaries exclude."""
    if bucket_high == bucket_low and bucket_low == low_bound:
        return (1.0, False, False) if first_bucket else (0.0, True, False)
    if bucket_high < low_bound:
        return 0.0, True, False
    if bucket_low > high_bound:
        return 0.0, False, True
    if low_bound <= bucket_low and high_bound >= bucket_high:
        return 1.0, False, False
    if low_bound <= bucket_low:
        return (high_bound - bucket_low) / (bucket_high - bucket_low), False, False
    if high_bound >= bucket_high:
        return (bucket_high - low_bound) / (bucket_high - bucket_low), False, False
    return (high_bound - low_bound) / (bucket_high - bucket_low), False, False


@numba.njit(cache=True, nogil=True)
def _merged_counts(low, high, weights, bounds):
    """The equi-width loop of TFDV's `generate_equi_width_histogram`: each interval's count sums
    overlap * weight over the quantile buckets, in bucket order, from the last bucket seen to
    precede an interval (every visited bucket is added, at overlap 0.0 too, as TFDV does)."""
    counts = np.empty(len(bounds) - 1)
    start_index = 0
    for i in range(len(bounds) - 1):
        sample_count = 0.0
        for current in range(start_index, len(low)):
            overlap, precedes, follows = _overlap(
                low[current], high[current], bounds[i], bounds[i + 1], i == 0
            )
            if follows:
                break
            if precedes:
                start_index = current
            sample_count += overlap * weights[current]
        counts[i] = sample_count
    return counts


@numba.njit(cache=True, nogil=True)
def _equi_width_buckets(
    quantiles, cumulative_counts, finite_min, finite_max, num_buckets, num_pos_inf
):
    """(low, high, count) of the equi-width histogram's buckets, -inf and +inf buckets included
    when there are such values; none at all when the boundaries overflow, as TFDV bails out."""
    quantiles, cumulative_counts, num_neg_inf = _strip_infinities(
        quantiles, cumulative_counts, finite_max, num_pos_inf
    )
    low, high, weights = _bin_weights(quantiles, cumulative_counts)
    if finite_min == finite_max:
        bounds = np.array([finite_min, finite_max])
    else:
        bounds = _linspace(finite_min, finite_max, num_buckets)
        for bound in bounds:
            if not np.isfinite(bound):
                return np.empty(0), np.empty(0), np.empty(0)
    counts = _merged_counts(low, high, weights, bounds)
    first = 1 if num_neg_inf != 0.0 else 0
    size = first + len(counts) + (1 if num_pos_inf != 0.0 else 0)
    out_low, out_high, out_count = np.empty(size), np.empty(size), np.empty(size)
    if first:
        out_low[0], out_high[0], out_count[0] = -np.inf, -np.inf, num_neg_inf
    for k in range(len(counts)):
        out_low[first + k], out_high[first + k] = bounds[k], bounds[k + 1]
        out_count[first + k] = counts[k]
    if num_pos_inf != 0.0:
        out_low[-1], out_high[-1], out_count[-1] = np.inf, np.inf, num_pos_inf
    return out_low, out_high, out_count


@numba.njit(cache=True, nogil=True)
def _is_sorted(values):
    """As TFDV's `np.all(quantiles[:-1] <= quantiles[1:])`: False where a NaN is compared."""
    for i in range(len(values) - 1):
        if not values[i] <= values[i + 1]:
            return False
    return True


def _float_arrays(quantiles, cumulative_counts) -> tuple[np.ndarray, np.ndarray]:
    # Copies: the kernels then see writable arrays only (read-only ones, as Arrow's, would be
    # compiled a second time).
    quantiles = np.array(quantiles, dtype=np.float64)
    cumulative_counts = np.array(cumulative_counts, dtype=np.float64)
    if quantiles.shape != cumulative_counts.shape or quantiles.ndim != 1:
        raise ValueError(
            f"quantiles {quantiles.shape} and cumulative_counts {cumulative_counts.shape} "
            "must be 1-D arrays of the same length"
        )
    return quantiles, cumulative_counts


def _histogram(kind, low, high, counts) -> statistics_pb2.Histogram:
    result = statistics_pb2.Histogram(type=kind)
    add = result.buckets.add
    for low_value, high_value, sample_count in zip(
        low.tolist(), high.tolist(), counts.tolist(), strict=True
    ):
        add(low_value=low_value, high_value=high_value, sample_count=sample_count)
    return result


def quantiles_histogram(
    quantiles: np.ndarray, cumulative_counts: np.ndarray
) -> statistics_pb2.Histogram:
    """TFDV's `generate_quantiles_histogram`: a QUANTILES histogram with a bucket between each two
    consecutive quantiles, weighted from the cumulative counts (sums of weights)."""
    return _histogram(
        statistics_pb2.Histogram.QUANTILES,
        *_bin_weights(*_float_arrays(quantiles, cumulative_counts)),
    )


def equi_width_histogram(
    quantiles: np.ndarray,
    cumulative_counts: np.ndarray,
    finite_min: float,
    finite_max: float,
    num_buckets: int,
    num_pos_inf: float,
) -> statistics_pb2.Histogram:
    """TFDV's `generate_equi_width_histogram`: a STANDARD histogram of num_buckets equal-width
    buckets over [finite_min, finite_max], counts interpolated from the quantiles histogram, plus
    a -inf and a +inf bucket when there are such values. No finite value: one bucket
    (finite_min, finite_max) with the total count."""
    quantiles, cumulative_counts = _float_arrays(quantiles, cumulative_counts)
    finite_min, finite_max, num_pos_inf = float(finite_min), float(finite_max), float(num_pos_inf)
    standard = statistics_pb2.Histogram.STANDARD
    if not math.isfinite(finite_min) and not math.isfinite(finite_max):
        return _histogram(
            standard,
            np.array([finite_min]),
            np.array([finite_max]),
            np.array([cumulative_counts[-1]]),
        )
    # TFDV asserts these.
    if not (math.isfinite(finite_min) and math.isfinite(finite_max)):
        raise ValueError(f"finite_min {finite_min} and finite_max {finite_max}: one is not finite")
    if not _is_sorted(quantiles):
        raise ValueError("quantiles are not sorted")
    if num_buckets < 1:  # TFDV returns the infinite buckets alone, or nothing
        raise ValueError(f"num_buckets {num_buckets} < 1")
    return _histogram(
        standard,
        *_equi_width_buckets(
            quantiles, cumulative_counts, finite_min, finite_max, num_buckets, num_pos_inf
        ),
    )


# RankHistogram's fields (tensorflow_metadata statistics.proto; a test builds the same message
# with the protobuf API): buckets; Bucket: low_rank, high_rank, label, sample_count (a double).
_BUCKETS_TAG = wire.tag(1)
_LOW_TAG = wire.tag(1, wire.VARINT)
_HIGH_TAG = wire.tag(2, wire.VARINT)
_LABEL_TAG = wire.tag(4)
_COUNT_TAG = wire.tag(5, wire.FIXED64)


@numba.njit(cache=True, nogil=True)
def _rank_histogram_bytes(offsets, data, count_bytes):
    """Bucket r: ranks r, label data[offsets[r]:offsets[r + 1]], sample count count_bytes[r]
    (a little-endian double's 8 bytes)."""
    n = len(offsets) - 1
    out = np.empty(32 * n + (offsets[n] - offsets[0]), np.uint8)
    pos = 0
    for rank in range(n):
        start, end = offsets[rank], offsets[rank + 1]
        rank_size = wire.varint_size(rank)
        body = 2 * (1 + rank_size) + 1 + wire.varint_size(end - start) + (end - start) + 1 + 8
        out[pos] = _BUCKETS_TAG
        pos = wire.put_varint(out, pos + 1, body)
        out[pos] = _LOW_TAG
        pos = wire.put_varint(out, pos + 1, rank)
        out[pos] = _HIGH_TAG
        pos = wire.put_varint(out, pos + 1, rank)
        out[pos] = _LABEL_TAG
        pos = wire.put_varint(out, pos + 1, end - start)
        for k in range(start, end):
            out[pos] = data[k]
            pos += 1
        out[pos] = _COUNT_TAG
        for k in range(8):
            out[pos + 1 + k] = count_bytes[rank, k]
        pos += 9
    return out[:pos]


def rank_histogram_bytes(labels: pa.Array, counts: np.ndarray) -> bytes:
    """The serialized RankHistogram with bucket r = (rank r, labels[r] (UTF-8), counts[r])."""
    labels = labels.cast(pa.large_binary())
    offsets = np.frombuffer(labels.buffers()[1], np.int64)[labels.offset :][: len(labels) + 1]
    data = np.frombuffer(labels.buffers()[2] or b"", np.uint8)
    count_bytes = np.ascontiguousarray(counts, "<f8").view(np.uint8).reshape(-1, 8)
    return _rank_histogram_bytes(offsets, data, count_bytes).tobytes()

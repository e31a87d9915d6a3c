"""A fixed-memory quantiles sketch (KLL, Karnin, Lang and Liberty 2016) for scalar numeric
features, many features in one array and updated in one compiled call per batch.

Why not tfx_bsl's QuantilesSketch (which the other numeric features use): its buffers per stream
are larger than the values themselves at a few thousand values per feature, so a table of
thousands of columns held gigabytes of sketches per converting thread and split. Here a feature's
state is at most `STORE` float64 items.

The sketch keeps levels of sorted items, an item of level h standing for 2**h values. When the
items exceed the levels' capacity (K at the top level, 2/3 of the next one's below, at least
MIN_WIDTH), the lowest level over its own capacity is compacted: every other of its sorted items
moves up a level (which one of each pair alternates per feature, so the result is the same on
every run). Compactions happen only when a row is full (up to STORE values a sketch is exact),
and each compaction of level h moves any rank by at most 2**h; with K = 256 the ranks stay well
within 1% of the count (tested against exact ranks and tfx_bsl's read-out).

A row of `items` holds the levels from the highest down to level 0, then free space: new values
append at the end of level 0. `sizes[h]` is level h's size; `sizes[MAX_LEVELS]` counts the
feature's compactions (the alternation).
"""

from __future__ import annotations

import numba
import numpy as np

K = 256
MIN_WIDTH = 8
MAX_LEVELS = 40  # 2**40 values per feature and split before the top level stops growing
# Levels' total capacity is at most 3 K + MIN_WIDTH * MAX_LEVELS: compacted that far, a row
# always has room for CHUNK more items. Values are added CHUNK at a time: every numeric
# feature's store (per split and converting thread: a wide table's statistics memory) grows with
# it, but a smaller CHUNK compacts more often (256: a third less memory, a quarter more CPU per
# value added).
CHUNK = 1024
STORE = 3 * K + MIN_WIDTH * MAX_LEVELS + CHUNK


def empty(features: int) -> tuple[np.ndarray, np.ndarray]:
    """The state of `features` empty sketches: (items, sizes)."""
    return np.zeros((features, STORE), np.float64), np.zeros((features, MAX_LEVELS + 1), np.int64)


@numba.njit(cache=True, nogil=True)
def _capacity(level, levels):
    width = int(K * (2.0 / 3.0) ** (levels - 1 - level))
    return max(MIN_WIDTH, width)


@numba.njit(cache=True, nogil=True)
def _levels(sizes):
    """Levels in use (at least 1)."""
    top = 1
    for h in range(MAX_LEVELS):
        if sizes[h]:
            top = h + 1
    return top


@numba.njit(cache=True, nogil=True)
def _over(sizes, levels):
    """The lowest level over its capacity when all levels together are; -1 if none needs to be."""
    total = capacity = 0
    for h in range(levels):
        total += sizes[h]
        capacity += _capacity(h, levels)
    if total <= capacity:
        return -1
    for h in range(levels):
        if sizes[h] >= _capacity(h, levels) and sizes[h] > 1 and h + 1 < MAX_LEVELS:
            return h
    return -1


@numba.njit(cache=True, nogil=True)
def _offset(sizes, level):
    """Where level `level` starts in a row (higher levels come first)."""
    start = 0
    for h in range(MAX_LEVELS - 1, level, -1):
        start += sizes[h]
    return start


@numba.njit(cache=True, nogil=True)
def _radix_sort(values):
    """Sort float64 `values` (no NaN) in place: least significant byte first over keys that
    order as the floats do, skipping bytes all keys share (most of them, for small integers).
    A level's new items are sorted once each; comparison sorts cost several times more."""
    n = len(values)
    keys = values.view(np.uint64).copy()
    sign = np.uint64(1) << np.uint64(63)
    for i in range(n):
        keys[i] = ~keys[i] if keys[i] & sign else keys[i] | sign
    # The bytes that differ between keys, found in one pass: counting a byte every key shares
    # increments one counter over and over, each waiting for the last.
    differ = np.uint64(0)
    for i in range(n):
        differ |= keys[i] ^ keys[0]
    other = np.empty(n, np.uint64)
    for shift in range(0, 64, 8):
        if not (differ >> np.uint64(shift)) & np.uint64(255):
            continue
        counts = np.zeros(257, np.int64)
        for i in range(n):
            counts[((keys[i] >> np.uint64(shift)) & np.uint64(255)) + 1] += 1
        for b in range(256):
            counts[b + 1] += counts[b]
        for i in range(n):
            digit = (keys[i] >> np.uint64(shift)) & np.uint64(255)
            other[counts[digit]] = keys[i]
            counts[digit] += 1
        keys, other = other, keys
    for i in range(n):
        keys[i] = keys[i] & ~sign if keys[i] & sign else ~keys[i]
    values[:] = keys.view(np.float64)


@numba.njit(cache=True, nogil=True)
def _compact(items, sizes, level, scratch):
    """Every other sorted item of `level` (an even count) merged into the level above."""
    start = _offset(sizes, level)
    size = sizes[level]
    stop = start + size
    if level == 0:
        _radix_sort(items[start:stop])
    kept = size % 2  # an odd level leaves its last item where it is
    coin = sizes[MAX_LEVELS] % 2
    sizes[MAX_LEVELS] += 1
    moved = (size - kept) // 2
    above = sizes[level + 1]
    first = start - above
    # scratch: the merged level above, then what stays of this level, then the lower levels
    i, j, out = first, 0, 0
    while i < start or j < moved:
        if j >= moved or (i < start and items[i] <= items[start + coin + 2 * j]):
            scratch[out] = items[i]
            i += 1
        else:
            scratch[out] = items[start + coin + 2 * j]
            j += 1
        out += 1
    end = _offset(sizes, -1)
    for p in range(start + size - kept, end):
        scratch[out] = items[p]
        out += 1
    items[first : first + out] = scratch[:out]
    sizes[level + 1] = above + moved
    sizes[level] = kept


@numba.njit(cache=True, nogil=True)
def _make_room(items, sizes, needed, scratch):
    """Compact until `needed` more items fit: the lowest level over its capacity first, else
    (all within theirs) the lowest of two items or more."""
    while STORE - _offset(sizes, -1) < needed:
        level = _over(sizes, _levels(sizes))
        if level < 0:
            level = 0
            while sizes[level] < 2:
                level += 1
        _compact(items, sizes, level, scratch)


@numba.njit(cache=True, nogil=True)
def _insert(items, sizes, level, values, scratch):
    """Add `values` (at most CHUNK) to level `level`, kept sorted above level 0."""
    _make_room(items, sizes, len(values), scratch)
    start = _offset(sizes, level)
    stop = start + sizes[level]
    end = _offset(sizes, -1)
    count = len(values)
    items[stop + count : end + count] = items[stop:end].copy()
    items[stop : stop + count] = values
    sizes[level] += count
    if level:
        items[start : stop + count].sort()


@numba.njit(cache=True, nogil=True)
def add(items, sizes, values, scratch):
    """Add `values` (float64) to one feature's sketch (`items`, `sizes`: its rows)."""
    for done in range(0, len(values), CHUNK):
        _insert(items, sizes, 0, values[done : done + CHUNK], scratch)


@numba.njit(cache=True, nogil=True)
def merge(items, sizes, other_items, other_sizes, scratch):
    """Add another feature sketch's items, each at its own level, into this one."""
    for h in range(MAX_LEVELS - 1, -1, -1):
        start = _offset(other_sizes, h)
        for done in range(0, other_sizes[h], CHUNK):
            stop = min(start + other_sizes[h], start + done + CHUNK)
            _insert(items, sizes, h, other_items[start + done : stop], scratch)


@numba.njit(cache=True, nogil=True)
def merge_rows(items, sizes, other_items, other_sizes):
    """`merge` row by row: feature f's sketch of `other_*` into feature f's here."""
    scratch = np.empty(STORE, np.float64)
    for f in range(items.shape[0]):
        merge(items[f], sizes[f], other_items[f], other_sizes[f], scratch)


@numba.njit(cache=True, nogil=True)
def weighted(items, sizes):
    """The sketch's items ascending with their weights (float64): level 0 sorted, then each
    level (sorted already) merged in, from the lowest up."""
    total = _offset(sizes, -1)
    values, weights = np.empty(total, np.float64), np.empty(total, np.float64)
    merged_values, merged_weights = np.empty(total, np.float64), np.empty(total, np.float64)
    filled = 0
    for h in range(MAX_LEVELS):
        size = sizes[h]
        if not size:
            continue
        start = _offset(sizes, h)
        level = items[start : start + size]
        if h == 0:  # the only level not kept sorted: sorted apart
            level = level.copy()
            _radix_sort(level)
        i = j = 0
        while i < filled or j < size:
            if j >= size or (i < filled and values[i] <= level[j]):
                merged_values[i + j], merged_weights[i + j] = values[i], weights[i]
                i += 1
            else:
                merged_values[i + j], merged_weights[i + j] = level[j], 2.0**h
                j += 1
        filled += size
        values, merged_values = merged_values, values
        weights, merged_weights = merged_weights, weights
    return values, weights


@numba.njit(cache=True, nogil=True)
def quantiles_and_cumulative_weights(items, sizes, num_buckets):
    """As tfx_bsl's QuantilesSketch.GetQuantilesAndCumulativeWeights: `num_buckets` + 1
    boundaries (the minimum, each first item whose cumulative weight exceeds i / num_buckets of
    the total, the maximum) and the weight of the items up to and equal to each."""
    values, weights = weighted(items, sizes)
    cumulative = np.cumsum(weights)
    quantiles = np.empty(num_buckets + 1, np.float64)
    counts = np.empty(num_buckets + 1, np.float64)
    if not len(values):
        return quantiles[:0], counts[:0]
    total = cumulative[-1]
    p = 0
    for b in range(num_buckets + 1):
        target = total * b / num_buckets
        while p < len(values) - 1 and cumulative[p] <= target:
            p += 1
        last = p  # the weight of every item equal to the boundary counts
        while last < len(values) - 1 and values[last + 1] == values[p]:
            last += 1
        quantiles[b], counts[b] = values[p], cumulative[last]
    return quantiles, counts


class Quantiles:
    """One feature's sketch (rows of `empty`'s arrays), as FeatureStatistics keeps it between
    batches, files and shards."""

    def __init__(self, items: np.ndarray, sizes: np.ndarray):
        self.items, self.sizes = items, sizes

    @classmethod
    def new(cls) -> Quantiles:
        items, sizes = empty(1)
        return cls(items[0], sizes[0])

    def merge(self, other: Quantiles) -> None:
        merge(self.items, self.sizes, other.items, other.sizes, np.empty(STORE, np.float64))

    def quantiles_and_counts(self, num_buckets: int) -> tuple[np.ndarray, np.ndarray]:
        return quantiles_and_cumulative_weights(self.items, self.sizes, num_buckets)

    def to_bytes(self) -> bytes:
        """The sizes and the used items (a part file's)."""
        used = self.items[: int(self.sizes[:MAX_LEVELS].sum())]
        return self.sizes.tobytes() + used.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> Quantiles:
        split = (MAX_LEVELS + 1) * 8
        sketch = cls.new()
        sketch.sizes[:] = np.frombuffer(data[:split], np.int64)
        used = np.frombuffer(data[split:], np.float64)
        sketch.items[: len(used)] = used
        return sketch

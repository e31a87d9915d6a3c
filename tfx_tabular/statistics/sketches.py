"""The string sketches of the one-pass statistics, keyed by 64-bit hashes and GIL-free.

tfx_bsl's MisraGriesSketch and KmvSketch each take new Arrow arrays of a batch's strings and
hash them again. Here each batch's distinct strings are hashed once (`string_table`, numba,
without the GIL) and both sketches merge sorted hash arrays:

* `TopK`: Misra-Gries with `capacity` counters, merged as Agarwal et al.'s mergeable summaries
  (add the counters, subtract the (capacity + 1)-th largest): every count errs by at most
  N / (capacity + 1) (N the values added) and every value more frequent than that is kept;
  exact while at most `capacity` distinct values are seen. Each counter keeps one of its
  strings, for the labels.
* `DistinctCount`: K-minimum values (Bar-Yossef et al.), estimated as tfx_bsl's KmvSketch does:
  exact below `capacity` distinct values, beyond a relative standard error of about
  1 / sqrt(capacity).

Two different strings with the same 64-bit hash count as one value (probability about
n² / 2^65 for n distinct strings: 3e-6 at ten million).
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@numba.njit(cache=True, nogil=True)
def hash_bytes(data, start, end):
    """(hash, the bytes OR-ed together): FNV-1a over the bytes, then MurmurHash3's finalizer
    (FNV-1a's high bits mix poorly on short strings, and KMV reads the hashes as uniform
    numbers)."""
    h = _FNV_OFFSET
    bits = 0
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * _FNV_PRIME
        bits |= data[i]
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h, bits


def string_hash(value: bytes) -> int:
    """One string's hash, as `string_table` computes it."""
    return int(hash_bytes(np.frombuffer(value, np.uint8), 0, len(value))[0])


@numba.njit(cache=True, nogil=True)
def hash_order(hashes):
    """Argsort of uniformly distributed hashes: dealt into about as many buckets as hashes by
    their top bits, then each bucket (a few hashes; repeated ones are not moved)
    insertion-sorted: faster than numba's quicksort at a dictionary's few thousand."""
    bits = 1
    while (1 << bits) < len(hashes):
        bits += 1
    shift = np.uint64(64 - bits)
    starts = np.zeros((1 << bits) + 1, np.int64)
    for h in hashes:
        starts[np.int64(h >> shift) + 1] += 1
    for bucket in range(1 << bits):
        starts[bucket + 1] += starts[bucket]
    fill = starts[:-1].copy()
    order = np.empty(len(hashes), np.int64)
    for i in range(len(hashes)):
        bucket = np.int64(hashes[i] >> shift)
        order[fill[bucket]] = i
        fill[bucket] += 1
    for bucket in range(1 << bits):
        low, high = starts[bucket], starts[bucket + 1]
        for j in range(low + 1, high):
            item, k = order[j], j - 1
            while k >= low and hashes[order[k]] > hashes[item]:
                order[k + 1] = order[k]
                k -= 1
            order[k + 1] = item
    return order


@numba.njit(cache=True, nogil=True)
def string_table(offsets, data, counts):
    """The distinct strings of a batch's dictionary by hash: (hashes ascending, each one's first
    dictionary index, counts[hash, split] summed over the entries that share it, whether all
    are ASCII, hence valid UTF-8). `offsets` (int64, len n + 1) index `data`;
    `counts[entry, split]`."""
    n = len(offsets) - 1
    hashes = np.empty(n, np.uint64)
    bits = 0
    for i in range(n):
        hashes[i], entry_bits = hash_bytes(data, offsets[i], offsets[i + 1])
        bits |= entry_bits
    order = hash_order(hashes)
    unique = np.empty(n, np.uint64)
    first = np.empty(n, np.int64)
    grouped = np.zeros((n, counts.shape[1]), np.int64)
    size = 0
    for i in order:
        if size == 0 or hashes[i] != unique[size - 1]:
            unique[size] = hashes[i]
            first[size] = i
            size += 1
        for split in range(counts.shape[1]):
            grouped[size - 1, split] += counts[i, split]
    return unique[:size], first[:size], grouped[:size], bits < 0x80


@numba.njit(cache=True, nogil=True)
def merge_counters(hashes_a, counts_a, hashes_b, counts_b, positions_b, capacity):
    """Two Misra-Gries summaries sorted by hash, added and cut back to `capacity` counters:
    (hashes, counts, source), source indexing a's strings, then b's (b's counter j is string
    positions_b[j])."""
    size = len(hashes_a) + len(hashes_b)
    hashes = np.empty(size, np.uint64)
    counts = np.empty(size, np.int64)
    source = np.empty(size, np.int64)
    i = j = k = 0
    while i < len(hashes_a) or j < len(hashes_b):
        if j == len(hashes_b) or (i < len(hashes_a) and hashes_a[i] < hashes_b[j]):
            hashes[k], counts[k], source[k] = hashes_a[i], counts_a[i], i
            i += 1
        elif i == len(hashes_a) or hashes_b[j] < hashes_a[i]:
            hashes[k], counts[k] = hashes_b[j], counts_b[j]
            source[k] = len(hashes_a) + positions_b[j]
            j += 1
        else:
            hashes[k], counts[k], source[k] = hashes_a[i], counts_a[i] + counts_b[j], i
            i += 1
            j += 1
        k += 1
    if k <= capacity:
        return hashes[:k], counts[:k], source[:k]
    cut = _largest(counts[:k], capacity + 1)
    size = 0
    for i in range(k):  # loops, not array expressions: numba compiles those slowly
        if counts[i] > cut:
            hashes[size], counts[size], source[size] = hashes[i], counts[i] - cut, source[i]
            size += 1
    return hashes[:size], counts[:size], source[:size]


@numba.njit(cache=True, nogil=True)
def _largest(counts, rank):
    """The rank-th largest of positive counts, in linear time: read off a histogram of the counts
    below 4 * len(counts) (most counts of a batch's strings), else found by bisection among the
    larger ones. (numba's np.partition would do, but is slow to compile.)"""
    cap = 4 * len(counts)  # loops, not array expressions: numba compiles those slowly
    histogram = np.zeros(cap + 1, np.int64)
    for count in counts:
        histogram[min(count, cap)] += 1
    if histogram[cap] >= rank:
        return _largest_from(counts, rank, cap)
    above = histogram[cap]
    for value in range(cap - 1, 0, -1):
        above += histogram[value]
        if above >= rank:
            return value
    return 0


@numba.njit(cache=True, nogil=True)
def _largest_from(counts, rank, low):
    """The largest v ≥ low with at least `rank` counts ≥ v (at least `rank` are ≥ low)."""
    high = low
    for count in counts:
        high = max(high, count)
    while low < high:
        middle = low + (high - low + 1) // 2
        at_least = 0
        for count in counts:
            at_least += count >= middle
        if at_least >= rank:
            low = middle
        else:
            high = middle - 1
    return low


@numba.njit(cache=True, nogil=True)
def merge_minimums(hashes_a, hashes_b, capacity):
    """The `capacity` smallest distinct hashes of two ascending arrays of distinct hashes."""
    out = np.empty(min(capacity, len(hashes_a) + len(hashes_b)), np.uint64)
    i = j = k = 0
    while k < len(out) and (i < len(hashes_a) or j < len(hashes_b)):
        if j == len(hashes_b) or (i < len(hashes_a) and hashes_a[i] < hashes_b[j]):
            out[k] = hashes_a[i]
            i += 1
        elif i == len(hashes_a) or hashes_b[j] < hashes_a[i]:
            out[k] = hashes_b[j]
            j += 1
        else:
            out[k] = hashes_a[i]
            i += 1
            j += 1
        k += 1
    return out[:k]


@numba.njit(cache=True, nogil=True)
def _gather_strings(a_offsets, a_data, b_offsets, b_data, source):
    """Strings `source` of a's strings then b's (each as int64 offsets into its bytes; b's need
    not start at 0), as (offsets from 0, bytes)."""
    kept = len(a_offsets) - 1
    offsets = np.empty(len(source) + 1, np.int64)
    offsets[0] = 0
    for i in range(len(source)):
        j = source[i]
        if j < kept:
            length = a_offsets[j + 1] - a_offsets[j]
        else:
            length = b_offsets[j - kept + 1] - b_offsets[j - kept]
        offsets[i + 1] = offsets[i] + length
    data = np.empty(offsets[-1], np.uint8)
    for i in range(len(source)):
        j = source[i]
        if j < kept:
            start, other = a_offsets[j], a_data
        else:
            start, other = b_offsets[j - kept], b_data
        data[offsets[i] : offsets[i + 1]] = other[start : start + offsets[i + 1] - offsets[i]]
    return offsets, data


def binary_array(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    """Strings at int64 `offsets` into `data` (not necessarily from 0), without a copy."""
    return pa.Array.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A large_binary array's offsets (its own slice of them) and bytes, without a copy."""
    _, offsets, data = strings.buffers()
    offsets = np.frombuffer(offsets, np.int64)[strings.offset : strings.offset + len(strings) + 1]
    return offsets, np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)


def _decode(data: bytes, dtype) -> np.ndarray:
    return np.frombuffer(data, dtype).copy()


_NO_STRINGS = pa.array([], pa.large_binary())


class TopK:
    """Misra-Gries counters over hashes (ascending), with one string per counter."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.hashes = np.zeros(0, np.uint64)
        self.counts = np.zeros(0, np.int64)
        self.values = _NO_STRINGS

    def add(
        self, hashes: np.ndarray, counts: np.ndarray, strings: pa.Array, positions: np.ndarray
    ) -> None:
        """Add distinct values: ascending `hashes`, their counts, and their strings
        `strings[positions]` (large_binary)."""
        self.hashes, self.counts, source = merge_counters(
            self.hashes, self.counts, hashes, counts, positions, self.capacity
        )
        # One compiled call over the buffers: a string column's batches call this per split,
        # and Arrow's concatenate-then-take was most of that call's time at thousands of columns.
        self.values = binary_array(
            *_gather_strings(*_buffers(self.values), *_buffers(strings), source)
        )

    def merge(self, other: TopK) -> None:
        self.add(other.hashes, other.counts, other.values, np.arange(len(other.hashes)))

    def to_dict(self) -> dict:
        offsets, data = self.values.buffers()[1:]
        return {
            "capacity": self.capacity,
            "hashes": self.hashes.tobytes(),
            "counts": self.counts.tobytes(),
            "offsets": np.frombuffer(offsets, np.int64)[: len(self.values) + 1].tobytes(),
            "data": data.to_pybytes() if data is not None else b"",
        }

    @classmethod
    def from_dict(cls, data: dict) -> TopK:
        top = cls(data["capacity"])
        top.hashes = _decode(data["hashes"], np.uint64)
        top.counts = _decode(data["counts"], np.int64)
        top.values = binary_array(
            np.frombuffer(data["offsets"], np.int64), np.frombuffer(data["data"], np.uint8)
        )
        return top


class DistinctCount:
    """The `capacity` smallest distinct hashes seen (K-minimum values)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.hashes = np.zeros(0, np.uint64)

    def add(self, hashes: np.ndarray) -> None:
        """Add ascending distinct hashes."""
        self.hashes = merge_minimums(self.hashes, hashes, self.capacity)

    def merge(self, other: DistinctCount) -> None:
        self.add(other.hashes)

    def estimate(self) -> int:
        """As tfx_bsl's KmvSketch::Estimate."""
        if len(self.hashes) < self.capacity:
            return len(self.hashes)
        return round((self.capacity - 1) * 2.0**64 / float(self.hashes[-1]))

    def to_dict(self) -> dict:
        return {"capacity": self.capacity, "hashes": self.hashes.tobytes()}

    @classmethod
    def from_dict(cls, data: dict) -> DistinctCount:
        distinct = cls(data["capacity"])
        distinct.hashes = _decode(data["hashes"], np.uint64)
        return distinct

"""tfx_tabular.statistics.sketches: the string sketches keyed by 64-bit hashes (Misra-Gries top-k and
K-minimum values), exact where the docs say, within their bounds beyond, mergeable."""

import numpy as np
import pyarrow as pa
import pytest

from tfx_tabular.statistics.sketches import (
    DistinctCount,
    TopK,
    _largest,
    hash_order,
    string_hash,
    string_table,
)


def dictionary(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    array = pa.array(strings, pa.large_binary())
    offsets = np.frombuffer(array.buffers()[1], np.int64)[: len(array) + 1]
    return offsets, np.frombuffer(array.buffers()[2] or b"", np.uint8), array


def add_batch(top: TopK, distinct: DistinctCount, strings: list[bytes]) -> None:
    """Count a batch's strings as the statistics do: distinct entries, then both sketches."""
    entries, codes = np.unique(np.array(strings, dtype=object), return_inverse=True)
    offsets, data, array = dictionary(list(entries))
    counts = np.bincount(codes, minlength=len(entries)).reshape(-1, 1)
    hashes, first, grouped, _ = string_table(offsets, data, counts)
    top.add(hashes, grouped[:, 0], array, first)
    distinct.add(hashes)


def test_string_table_groups_repeated_entries_and_sorts_by_hash():
    offsets, data, _ = dictionary([b"a", b"bb", b"a", b"", b"bb", b"ccc"])
    counts = np.array([[1, 0], [2, 1], [3, 0], [0, 4], [0, 5], [7, 7]], np.int64)
    hashes, first, grouped, ascii = string_table(offsets, data, counts)
    assert ascii
    assert np.all(hashes[:-1] < hashes[1:])
    by_first = dict(zip(first.tolist(), grouped.tolist(), strict=True))
    assert by_first == {0: [4, 0], 1: [2, 6], 3: [0, 4], 5: [7, 7]}


def test_hashes_tell_apart_lengths_and_orders():
    strings = [b"", b"\x00", b"\x00\x00", b"ab", b"ba", b"a" * 9, b"a" * 10]
    offsets, data, _ = dictionary(strings)
    hashes, _, _, _ = string_table(offsets, data, np.ones((len(strings), 1), np.int64))
    assert len(hashes) == len(strings)


def test_exact_below_capacity_in_any_batching_and_merge_order():
    rng = np.random.default_rng(0)
    values = [f"v{i}".encode() for i in rng.integers(0, 900, 50_000)]
    expected = dict(
        zip(*np.unique(np.array(values, dtype=object), return_counts=True), strict=True)
    )
    results = []
    for batch, parts in ((50_000, 1), (777, 3)):
        sketches = [(TopK(1000), DistinctCount(1024)) for _ in range(parts)]
        for index, start in enumerate(range(0, len(values), batch)):
            add_batch(*sketches[index % parts], values[start : start + batch])
        top, distinct = TopK(1000), DistinctCount(1024)
        for other_top, other_distinct in reversed(sketches):
            top.merge(TopK.from_dict(other_top.to_dict()))  # as part files carry them
            distinct.merge(DistinctCount.from_dict(other_distinct.to_dict()))
        counted = dict(zip(top.values.to_pylist(), top.counts.tolist(), strict=True))
        assert counted == expected
        assert distinct.estimate() == len(expected)
        results.append(top.to_dict())
    assert results[0]["hashes"] == results[1]["hashes"]


@pytest.mark.parametrize("distinct_values", [1023, 1024, 5_000, 200_000])
def test_unique_within_three_standard_errors(distinct_values):
    """Exact below 1,024 distinct values; beyond, within 3/sqrt(1,024) (KMV's standard error):
    sequential names are the hash's hard case."""
    distinct = DistinctCount(1024)
    names = [f"user-{i}".encode() for i in range(distinct_values)]
    for start in range(0, distinct_values, 10_000):
        offsets, data, _ = dictionary(names[start : start + 10_000])
        hashes, _, _, _ = string_table(offsets, data, np.ones((len(offsets) - 1, 1), np.int64))
        distinct.add(hashes)
    estimate = distinct.estimate()
    if distinct_values < 1024:
        assert estimate == distinct_values
    assert abs(estimate - distinct_values) <= 3 / np.sqrt(1024) * distinct_values


def test_heavy_hitters_kept_and_counts_within_bound():
    rng = np.random.default_rng(2)
    values = [f"w{w}".encode() for w in rng.zipf(1.2, 100_000) % 30_000]
    top, distinct = TopK(100), DistinctCount(1024)
    for start in range(0, len(values), 4096):
        add_batch(top, distinct, values[start : start + 4096])
    exact = dict(zip(*np.unique(np.array(values, dtype=object), return_counts=True), strict=True))
    bound = len(values) / 101
    counted = dict(zip(top.values.to_pylist(), top.counts.tolist(), strict=True))
    assert len(counted) <= 100
    for value, count in counted.items():
        assert 0 <= exact[value] - count <= bound, value
    assert {v for v, c in exact.items() if c > bound} <= set(counted)


@pytest.mark.parametrize("strings", [["a", "été"], ["a", b"\xff"]])
def test_non_ascii_dictionaries_are_flagged_for_the_utf8_check(strings):
    offsets, data, _ = dictionary([s.encode() if isinstance(s, str) else s for s in strings])
    assert not string_table(offsets, data, np.ones((len(strings), 1), np.int64))[3]


@pytest.mark.parametrize("size", [0, 1, 2, 1000, 6600])
def test_hash_order_sorts_like_numpy_repeats_included(size):
    hashes = np.random.default_rng(size).integers(0, 2**64, size, dtype=np.uint64)
    for case in (
        hashes,
        np.repeat(hashes[:1], size),
        np.concatenate([hashes, hashes[: size // 2]]),
    ):
        assert np.array_equal(case[hash_order(case)], np.sort(case))


@pytest.mark.parametrize("high", [3, 50, 10**9])
def test_largest_is_the_partitions_answer(high):
    """Small counts are read off a histogram, large ones partitioned: the same rank-th largest."""
    counts = np.random.default_rng(high).integers(1, high + 1, 7000)
    for rank in (1, 1001, 7000):
        assert _largest(counts, rank) == np.sort(counts)[-rank]


def test_string_hash_is_the_tables_hash():
    offsets, data, _ = dictionary([b"__LARGE_BYTES__"])
    assert string_table(offsets, data, np.ones((1, 1), np.int64))[0][0] == string_hash(
        b"__LARGE_BYTES__"
    )

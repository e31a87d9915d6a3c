"""The statistics of a split's scalar string features, all at once: one compiled call per batch
and split counts, hashes and sketches every feature's values.

Per feature and batch, the general path (`accumulators.FeatureStatistics.add`) dictionary-encodes or
reads the batch's strings, then updates the feature's top-k and distinct-count sketches through
a dozen Python calls and Arrow arrays; at hundreds of string columns and batches of a thousand
rows, those calls, contending for the GIL between converting threads, were most of the
statistics' cost. Here the kernel reads a batch's strings where the encoder pooled them
(`pools.PooledColumns`: a scalar's row r is slot firsts[f] + r of the string pool), counts a
dictionary-encoded column's present values per dictionary code (so each entry is hashed once)
and hashes other columns' values each, counts them per distinct hash (`sketches`' hash), and
merges them into the feature's sketches exactly as `FeatureStatistics` does: the same
sketches, counters and labels.

The block holds each feature's sketches as numba typed lists of arrays (sizes differ between
features); `ScalarStrings.features` gives them back as `sketches.TopK` and `DistinctCount`,
which the split's part files and merges use, so a block lives only between a shard's first
batch and its part.

numba caches each kernel by its own file: after changing `sketches`' kernels, change this file
too (its kernels inline them), or clear its cache.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

import numba
import numpy as np
from numba import types
from numba.typed import List
from tfx_bsl.arrow import array_util

from tfx_tabular.coders.flatten import FeatureValues
from tfx_tabular.coders.pools import PooledColumns
from tfx_tabular.statistics.sketches import (
    DistinctCount,
    TopK,
    binary_array,
    hash_bytes,
    hash_order,
    merge_counters,
    merge_minimums,
    string_hash,
)

# The fields of `ScalarStrings.counts`, as `accumulators.FeatureStatistics` names them.
FIELDS = ("num_non_missing", "total_bytes", "invalid_utf8")


class Limits(NamedTuple):
    """The sketches' sizes and top-k's rule for long strings (the accumulators', as TFDV's)."""

    top_values: int  # top-k counters
    distinct_hashes: int  # distinct-count hashes kept
    long_length: int  # strings longer count as one placeholder value in top-k
    placeholder: bytes


@numba.njit(cache=True, nogil=True)
def _distinct(hashes, starts, ends, weights):
    """Values by hash, each of `weights` occurrences: (distinct hashes ascending, their counts,
    the pool range of each). Deduplicated in an open-addressing table (the hashes are
    uniform), so a column of a few frequent values costs no more than one of many."""
    n = len(hashes)
    width = 1
    while width < 2 * n:
        width *= 2
    mask = np.uint64(width - 1)
    table = np.full(width, -1, np.int64)
    unique = np.empty(n, np.uint64)
    counts = np.zeros(n, np.int64)
    first = np.empty(n, np.int64)
    size = 0
    for i in range(n):
        at = np.int64(hashes[i] & mask)
        while table[at] >= 0 and unique[table[at]] != hashes[i]:
            at = (at + 1) & (width - 1)
        if table[at] < 0:
            table[at] = size
            unique[size], first[size] = hashes[i], i
            size += 1
        counts[table[at]] += weights[i]
    order = hash_order(unique[:size])
    picked = first[:size][order]
    return unique[:size][order], counts[:size][order], starts[picked], ends[picked]


@numba.njit(cache=True, nogil=True)
def _merged_strings(order, offsets, data, starts, ends, pool):
    """The counters' strings after a merge: counter i's is the kept string order[i] (an old
    counter's, offsets/data) or, from len(offsets) - 1 on, new value order[i] - kept (pool
    bytes starts:ends). (offsets from 0, bytes)."""
    kept = len(offsets) - 1
    out = np.empty(len(order) + 1, np.int64)
    out[0] = 0
    for i in range(len(order)):
        j = order[i]
        size = offsets[j + 1] - offsets[j] if j < kept else ends[j - kept] - starts[j - kept]
        out[i + 1] = out[i] + size
    bytes_out = np.empty(out[-1], np.uint8)
    for i in range(len(order)):
        j = order[i]
        if j < kept:
            bytes_out[out[i] : out[i + 1]] = data[offsets[j] : offsets[j + 1]]
        else:
            bytes_out[out[i] : out[i + 1]] = pool[starts[j - kept] : ends[j - kept]]
    return out, bytes_out


@numba.njit(cache=True, nogil=True)
def _add_top(sketches, f, capacity, hashes, counts, starts, ends, pool):
    """`TopK.add` to feature f's counters (its items of `sketches`) of distinct values:
    ascending `hashes`, their `counts`, their strings pool[starts[i]:ends[i]]."""
    top_hashes, top_counts, top_offsets, top_data, _ = sketches
    old = top_hashes[f]
    merged, merged_counts, source = merge_counters(
        old, top_counts[f], hashes, counts, np.arange(len(hashes)), capacity
    )
    unchanged = len(source) == len(old)
    for i in range(len(source)):
        if source[i] != i:
            unchanged = False
            break
    if not unchanged:  # counters came or went: their strings are gathered anew
        top_offsets[f], top_data[f] = _merged_strings(
            source, top_offsets[f], top_data[f], starts, ends, pool
        )
    top_hashes[f], top_counts[f] = merged, merged_counts


@numba.njit(cache=True, nogil=True)
def _present_slots(first, valid, split_ids, split):
    """The pool slots of a feature's values in a split."""
    slots = np.empty(len(valid), np.int64)
    size = 0
    for r in range(len(valid)):  # no branch: rows are split at random
        slots[size] = first + r
        size += valid[r] & (split_ids[r] == split)
    return slots[:size]


@numba.njit(cache=True, nogil=True)
def _present(pool_starts, pool_ends, pool, first, valid, split_ids, split):
    """A feature's values in a split, not dictionary-encoded (each its own pool range): (hashes,
    pool starts and ends, how many values each stands for, whether all are ASCII)."""
    slots = _present_slots(first, valid, split_ids, split)
    starts, ends = pool_starts[slots], pool_ends[slots]
    hashes = np.empty(len(slots), np.uint64)
    ored = 0
    for i in range(len(slots)):
        hashes[i], value_bits = hash_bytes(pool, starts[i], ends[i])
        ored |= value_bits
    return hashes, starts, ends, np.ones(len(slots), np.int64), ored < 0x80


@numba.njit(cache=True, nogil=True)
def _count_entries(codes, valid, entry_at, split_ids, splits):
    """Each dictionary entry's present rows per split: counts[entry, split], feature f's codes
    codes[f] (of null rows arbitrary, never read) counting entries entry_at[f]:entry_at[f + 1].
    One pass per feature for every split."""
    counts = np.zeros((entry_at[-1], splits), np.int64)
    for f in range(len(codes)):
        base = entry_at[f]
        for r in range(codes.shape[1]):
            if valid[f, r]:
                counts[base + codes[f, r], split_ids[r]] += 1
    return counts


@numba.njit(cache=True, nogil=True)
def _hash_entries(starts, ends, pool, counts):
    """The hash and bytes OR-ed together of each dictionary entry a row uses (0 for others)."""
    hashes = np.zeros(len(starts), np.uint64)
    bits = np.zeros(len(starts), np.uint8)
    for i in range(len(starts)):
        used = False
        for split in range(counts.shape[1]):
            used |= counts[i, split] > 0
        if used:
            hashes[i], bits[i] = hash_bytes(pool, starts[i], ends[i])
    return hashes, bits


@numba.njit(cache=True, nogil=True)
def _present_coded(first, end, coded, split):
    """`_present` of the dictionary-encoded feature whose entries are first:end of `coded`: one
    value per entry the split's rows use, standing for their count (`pooled_columns`' entry
    counts, so each entry was hashed once for every split)."""
    entry_starts, entry_ends, counts, hashes, bits = coded
    used = first + np.flatnonzero(counts[first:end, split])
    ored = 0
    for i in used:
        ored |= bits[i]
    return hashes[used], entry_starts[used], entry_ends[used], counts[used, split], ored < 0x80


@numba.njit(cache=True, nogil=True)
def _add_split(columns, split_ids, split, counts, sketches, limits, placeholder):
    """Add the rows of `split` of every feature f of `columns` (`pooled_columns`: row r is pool
    slot firsts[f] + r, present if valid[rows_of[f], r]; a dictionary-encoded one's entries
    coded[entries[f, 0]:entries[f, 1]]) to `counts` (a row per FIELDS entry but invalid_utf8)
    and its `sketches` (top-k hashes, counts, string offsets and bytes; distinct hashes).
    `limits`: `Limits`' numbers and the placeholder's hash. Returns which features had a value
    that is not ASCII (their invalid UTF-8 is counted apart)."""
    pool_starts, pool_ends, pool, firsts, valid, rows_of, entries, coded = columns
    top_values, distinct_hashes, long_length, placeholder_hash = limits
    unicode = np.zeros(len(firsts), np.bool_)
    for f in range(len(firsts)):
        if entries[f, 0] >= 0:
            hashes, starts, ends, weights, ascii = _present_coded(
                entries[f, 0], entries[f, 1], coded, split
            )
        else:
            hashes, starts, ends, weights, ascii = _present(
                pool_starts, pool_ends, pool, firsts[f], valid[rows_of[f]], split_ids, split
            )
        if not len(hashes):
            continue
        unicode[f] = not ascii
        counts[0, f] += weights.sum()
        counts[1, f] += ((ends - starts) * weights).sum()
        unique, value_counts, unique_starts, unique_ends = _distinct(hashes, starts, ends, weights)
        sketches[4][f] = merge_minimums(sketches[4][f], unique, distinct_hashes)
        short = unique_ends - unique_starts <= long_length
        long_values = value_counts[~short].sum()
        if long_values:  # as TFDV, top-k counts them as one placeholder value
            only = np.zeros(1, np.int64)
            _add_top(
                sketches, f, top_values, np.full(1, placeholder_hash, np.uint64),
                np.full(1, long_values, np.int64), only, only + len(placeholder), placeholder,
            )  # fmt: skip
        _add_top(
            sketches, f, top_values, unique[short], value_counts[short], unique_starts[short],
            unique_ends[short], pool,
        )  # fmt: skip
    return unicode


@numba.njit(cache=True, nogil=True)
def _split_values(pool_starts, pool_ends, pool, first, valid, split_ids, split):
    """A feature's values in a split, end to end: (offsets from 0, bytes)."""
    slots = _present_slots(first, valid, split_ids, split)
    offsets = np.zeros(len(slots) + 1, np.int64)
    offsets[1:] = np.cumsum(pool_ends[slots] - pool_starts[slots])
    data = np.empty(offsets[-1], np.uint8)
    for i in range(len(slots)):
        data[offsets[i] : offsets[i + 1]] = pool[pool_starts[slots[i]] : pool_ends[slots[i]]]
    return offsets, data


def pooled_columns(
    pooled: PooledColumns,
    positions: np.ndarray,
    values: Sequence[FeatureValues],
    split_ids: np.ndarray,
    splits: int,
) -> tuple:
    """The scalar string columns at `positions` of a batch's `pooled` features (`values`, in the
    same order), as `ScalarStrings.add` reads them for each of `splits` splits (row r in split
    split_ids[r]): (the string pool's starts, ends and bytes, each one's first slot there, the
    batch's validity, positions, the range of each one's dictionary entries (-1: not
    dictionary-encoded) and the entries: pool starts, ends, rows per split, hashes, bytes
    OR-ed)."""
    _, _, starts, ends, data = pooled.pools
    at = positions.tolist()
    coded = [i for i, position in enumerate(at) if values[position].codes is not None]
    dictionaries = [values[at[i]].values for i in coded]
    sizes = np.array([len(offsets) - 1 for offsets in dictionaries], np.int64)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    entries = np.full((len(positions), 2), -1, np.int64)
    entries[coded, 0], entries[coded, 1] = bounds[:-1], bounds[1:]
    # pool coordinates: each dictionary's offsets plus where its bytes start in the pool
    bases = np.repeat(pooled.data_starts[positions[coded]], sizes)
    entry_starts = _joined_or_empty([offsets[:-1] for offsets in dictionaries]) + bases
    entry_ends = _joined_or_empty([offsets[1:] for offsets in dictionaries]) + bases
    codes = np.empty((len(coded), pooled.rows), np.int32)
    for j, i in enumerate(coded):
        codes[j] = values[at[i]].codes
    counts = _count_entries(codes, pooled.valid[positions[coded]], bounds, split_ids, splits)
    hashes, bits = _hash_entries(entry_starts, entry_ends, data, counts)
    return (
        starts, ends, data, pooled.firsts[positions], pooled.valid, positions, entries,
        (entry_starts, entry_ends, counts, hashes, bits),
    )  # fmt: skip


def _joined_or_empty(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)


_UINT64S, _INT64S, _BYTES = types.uint64[::1], types.int64[::1], types.uint8[::1]


@numba.njit(cache=True, nogil=True)
def _empty_sketches(features):
    """`features` empty sketches, as `_add_split` takes them (typed lists made here: each
    append from Python is a call into compiled code)."""
    top_hashes, distinct = List.empty_list(_UINT64S), List.empty_list(_UINT64S)
    top_counts, top_offsets = List.empty_list(_INT64S), List.empty_list(_INT64S)
    top_data = List.empty_list(_BYTES)
    for _ in range(features):
        top_hashes.append(np.zeros(0, np.uint64))
        top_counts.append(np.zeros(0, np.int64))
        top_offsets.append(np.zeros(1, np.int64))
        top_data.append(np.zeros(0, np.uint8))
        distinct.append(np.zeros(0, np.uint64))
    return top_hashes, top_counts, top_offsets, top_data, distinct


@numba.njit(cache=True, nogil=True)
def _joined(arrays):
    """A typed list's arrays end to end, and where each starts (len + 1 offsets)."""
    starts = np.zeros(len(arrays) + 1, np.int64)
    for i in range(len(arrays)):
        starts[i + 1] = starts[i] + len(arrays[i])
    out = np.empty(starts[-1], arrays[0].dtype)  # a block has one feature or more
    for i in range(len(arrays)):
        out[starts[i] : starts[i + 1]] = arrays[i]
    return out, starts


class ScalarStrings:
    """One split's scalar string features: `names`, their counts (`counts`, a row per FIELDS
    entry) and sketches (`sketches`: per feature its top-k counters' hashes, counts, string
    offsets and bytes, and its distinct-count hashes, in typed lists)."""

    def __init__(self, names: list[str], limits: Limits):
        self.names = names
        self.limits = limits
        self.counts = np.zeros((len(FIELDS), len(names)), np.int64)
        self.sketches = _empty_sketches(len(names))
        self._placeholder = np.frombuffer(limits.placeholder, np.uint8)
        self._numbers = (
            limits.top_values,
            limits.distinct_hashes,
            limits.long_length,
            np.uint64(string_hash(limits.placeholder)),
        )

    def add(self, columns: tuple, split_ids: np.ndarray, split: int) -> None:
        """Add the rows of `split` of `columns` (`pooled_columns`: one per name)."""
        unicode = _add_split(
            columns, split_ids, split, self.counts, self.sketches, self._numbers, self._placeholder
        )
        starts, ends, data, firsts, valid, rows_of, _, _ = columns
        for f in np.flatnonzero(unicode):
            strings = binary_array(
                *_split_values(starts, ends, data, firsts[f], valid[rows_of[f]], split_ids, split)
            )
            self.counts[2, f] += array_util.CountInvalidUTF8(strings)

    def features(self) -> Iterator[tuple[str, dict, TopK, DistinctCount]]:
        """Each feature's name, fields (FIELDS) and sketches."""
        top_hashes, top_counts, top_offsets, top_data, distinct = (
            _joined(items) for items in self.sketches
        )
        for f, (name, values) in enumerate(zip(self.names, self.counts.T.tolist(), strict=True)):
            top = TopK(self.limits.top_values)
            top.hashes = _part(top_hashes, f)
            top.counts = _part(top_counts, f)
            offsets = _part(top_offsets, f)
            top.values = binary_array(offsets, _part(top_data, f))
            count = DistinctCount(self.limits.distinct_hashes)
            count.hashes = _part(distinct, f)
            yield name, dict(zip(FIELDS, values, strict=True)), top, count


def _part(joined: tuple[np.ndarray, np.ndarray], index: int) -> np.ndarray:
    values, starts = joined
    return values[starts[index] : starts[index + 1]]

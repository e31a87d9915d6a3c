"""The statistics of a split's scalar numeric features, all of one kind at once: one compiled
call per batch and split updates every feature's counts, moments and quantiles sketch.

Per feature and batch, the general path (`accumulators.FeatureStatistics.add`) costs a few Python
calls and numpy operations; at thousands of columns and batches of a thousand rows that overhead,
not the values, was the statistics' cost. Here the kernel reads a batch's features where the
encoder pooled them (`pools.PooledColumns`: a scalar feature's values are one slot per row,
end to end in its kind's pool, a null row's slot unused), with no copy of its own.

numba caches each kernel by its own file: after changing `quantiles`' kernels or constants,
change this file too (its kernel inlines them), or clear its cache.
"""

from __future__ import annotations

import numba
import numpy as np

from tfx_tabular.coders.pools import PooledColumns
from tfx_tabular.source.mapping import Kind
from tfx_tabular.statistics import quantiles as kll

# The fields of `ScalarNumerics.state`, as `accumulators.FeatureStatistics` names them.
FIELDS = (
    "num_non_missing",
    "count",
    "num_nan",
    "pos_inf",
    "num_zeros",
    "min",
    "max",
    "finite_min",
    "finite_max",
    "mean",
    "m2",
)


@numba.njit(cache=True, nogil=True)
def _moments(values, count, mean, m2):
    """Chan et al.'s update of (count, mean, squared deviations) with `values`."""
    size = len(values)
    if not size:
        return count, mean, m2
    total = 0.0
    for x in values:
        total += x
    batch_mean = total / size
    batch_m2 = 0.0
    for x in values:
        batch_m2 += (x - batch_mean) ** 2
    merged = count + size
    delta = batch_mean - mean
    return (
        merged,
        mean + delta * size / merged,
        m2 + batch_m2 + delta * delta * count * size / merged,
    )


@numba.njit(cache=True, nogil=True)
def _add_split(pool, starts, valid, rows_of, split_ids, split, state, items, sizes, scratch):
    """Add the rows of `split` of every feature f (its row r: pool[starts[f] + r], present if
    valid[rows_of[f], r]) to `state` (a row per FIELDS entry) and each feature's sketch
    (`scratch`: kll.STORE items)."""
    chosen = np.empty(valid.shape[1], np.float64)
    for f in range(len(starts)):
        nan = pos_inf = zeros = 0
        low = finite_low = np.inf
        high = finite_high = -np.inf
        start, row = starts[f], rows_of[f]
        present = 0
        for r in range(valid.shape[1]):  # no branch: rows are split at random
            chosen[present] = float(pool[start + r])
            present += valid[row, r] & (split_ids[r] == split)
        size = 0
        for i in range(present):
            x = chosen[i]
            if np.isnan(x):
                nan += 1
                continue
            chosen[size] = x
            size += 1
            zeros += x == 0
            low, high = min(low, x), max(high, x)
            if np.isfinite(x):
                finite_low, finite_high = min(finite_low, x), max(finite_high, x)
            elif x > 0:
                pos_inf += 1
        state[0, f] += present
        state[2, f] += nan
        state[3, f] += pos_inf
        state[4, f] += zeros
        state[5, f] = min(state[5, f], low)
        state[6, f] = max(state[6, f], high)
        state[7, f] = min(state[7, f], finite_low)
        state[8, f] = max(state[8, f], finite_high)
        state[1, f], state[9, f], state[10, f] = _moments(
            chosen[:size], state[1, f], state[9, f], state[10, f]
        )
        kll.add(items[f], sizes[f], chosen[:size], scratch)


def pooled_columns(pooled: PooledColumns, kind: Kind, positions: np.ndarray) -> tuple:
    """The scalar columns of `kind` at `positions` of a batch's `pooled` features, as
    `ScalarNumerics.add` reads them: (kind's pool, each one's first slot there, the batch's
    validity, positions)."""
    pool = pooled.pools[0] if kind == Kind.INT else pooled.pools[1]
    starts = pooled.firsts[positions]
    return pool, starts, pooled.valid, positions


class ScalarNumerics:
    """One split's scalar features of one numeric kind: `names`, their counts and moments
    (`state`, a row per FIELDS entry), and their sketches (`kll` arrays, a row per feature)."""

    def __init__(self, names: list[str]):
        self.names = names
        self.state = np.zeros((len(FIELDS), len(names)), np.float64)
        self.state[[5, 7]] = np.inf
        self.state[[6, 8]] = -np.inf
        self.items, self.sizes = kll.empty(len(names))

    def add(self, columns: tuple, split_ids: np.ndarray, split: int):
        """Add the rows of `split` of `columns` (`pooled_columns`: one per name)."""
        scratch = np.empty(kll.STORE, np.float64)
        _add_split(*columns, split_ids, split, self.state, self.items, self.sizes, scratch)

    def feature(self, index: int) -> tuple[dict, kll.Quantiles]:
        """Feature `index`'s fields (FIELDS) and its sketch (a view of the block's rows)."""
        fields = dict(zip(FIELDS, self.state[:, index].tolist(), strict=True))
        for name in ("num_non_missing", "count", "num_nan", "pos_inf", "num_zeros"):
            fields[name] = int(fields[name])
        return fields, kll.Quantiles(self.items[index], self.sizes[index])

    def merge(self, other: ScalarNumerics) -> None:
        """Add `other`'s rows (a block of the same names): the sums, extremes and moments as
        `accumulators.FeatureStatistics.merge` adds them, feature by feature in one array operation,
        and every sketch in one compiled call."""
        if other.names != self.names:
            raise ValueError("merging statistics blocks of different features")
        mine, theirs = self.state, other.state
        for row in (0, 2, 3, 4):
            mine[row] += theirs[row]
        for row, pick in ((5, np.minimum), (6, np.maximum), (7, np.minimum), (8, np.maximum)):
            pick(mine[row], theirs[row], out=mine[row])
        _merge_moments(mine[1], mine[9], mine[10], theirs[1], theirs[9], theirs[10])
        kll.merge_rows(self.items, self.sizes, other.items, other.sizes)

    def to_part(self) -> dict:
        """The block as a part file holds it: its names, and its arrays' bytes (each sketch's
        used items only, end to end)."""
        return {
            "names": self.names,
            "state": self.state.tobytes(),
            "sizes": self.sizes.tobytes(),
            "items": self.items[_used(self.sizes)].tobytes(),
        }

    @classmethod
    def from_part(cls, part: dict) -> ScalarNumerics:
        block = cls(part["names"])
        block.state[:] = np.frombuffer(part["state"], np.float64).reshape(block.state.shape)
        block.sizes[:] = np.frombuffer(part["sizes"], np.int64).reshape(block.sizes.shape)
        block.items[_used(block.sizes)] = np.frombuffer(part["items"], np.float64)
        return block


def _used(sizes: np.ndarray) -> np.ndarray:
    """[feature, item]: the items a block's sketches hold (each row's first, its levels' sizes)."""
    return np.arange(kll.STORE) < sizes[:, : kll.MAX_LEVELS].sum(axis=1)[:, None]


def _merge_moments(count, mean, m2, other_count, other_mean, other_m2) -> None:
    """Chan et al.'s pairwise update in place, per feature, where `other_count` is not 0; the
    same expression as `accumulators.FeatureStatistics._merge_moments`, so the same floats."""
    chosen = other_count > 0
    total = count + other_count
    safe = np.where(chosen, total, 1.0)
    with np.errstate(invalid="ignore", over="ignore"):  # infinite values: as Python's floats
        delta = other_mean - mean
        np.copyto(mean, mean + delta * other_count / safe, where=chosen)
        np.copyto(m2, m2 + (other_m2 + delta * delta * count * other_count / safe), where=chosen)
    np.copyto(count, total, where=chosen)

"""Arrow columns → flat numpy buffers, one `FeatureValues` per feature of the type mapping
(`tfx_tabular.source.mapping`): row splits, validity, and the values (int64, float32, or a
string's offsets into its bytes; strings read as Parquet dictionary pages stay dictionary codes).
Arrow kernels do the flattening, with no per-row Python; the compiled writers (`pools`,
`encoding`, `columnar`) and the statistics read these buffers.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfx_tabular.source.mapping import Feature, Kind

_INT64_MAX = np.iinfo(np.int64).max


class ConversionError(ValueError):
    """Data that cannot be written losslessly (the message names the column)."""


@dataclasses.dataclass
class FeatureValues:
    """One feature over a batch: rows r's values are values[row_splits[r]:row_splits[r + 1]]."""

    row_splits: np.ndarray  # int64, n + 1
    valid: np.ndarray  # bool, n; False → null (feature with no kind)
    values: np.ndarray  # int64 | float32 | for BYTES: the int64 offsets (m + 1) into `data`
    data: Optional[np.ndarray] = None  # uint8, BYTES only
    # BYTES kept dictionary-encoded (Parquet's dictionary pages): value i is string codes[i] of
    # the dictionary whose offsets are `values` (codes in null slots are arbitrary). None: value
    # i is string i.
    codes: Optional[np.ndarray] = None
    # A scalar's: row r's value is slot r (row_splits is 0..n), null rows' slots unused.
    slots: bool = False


def _decoded(arr: pa.Array) -> pa.Array:
    return arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr


def _is_string_dictionary(arr: pa.Array, kind: Kind) -> bool:
    t = arr.type
    return (
        kind == Kind.BYTES
        and pa.types.is_dictionary(t)
        and len(arr.dictionary) > 0
        and (pa.types.is_string(t.value_type) or pa.types.is_binary(t.value_type))
    )


def _dictionary_codes(arr: pa.DictionaryArray) -> np.ndarray:
    """Each slot's index into the dictionary, as stored (arbitrary in null slots); no copy."""
    return _slots(arr.indices, arr.indices.type.to_pandas_dtype())


def _validity(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _decimal_text(arr: pa.Array, column: str) -> pa.Array:
    """Decimal → its exact text (pyarrow 10 has no decimal→string cast), vectorized.

    Values whose unscaled integer fits in int64 (up to 18 digits) are exact; others fail."""
    scale = arr.type.scale
    width = arr.type.byte_width // 8  # 2 words for decimal128, 4 for decimal256
    words = np.frombuffer(arr.buffers()[1], dtype=np.int64)[
        width * arr.offset : width * (arr.offset + len(arr))
    ].reshape(-1, width)
    if (
        arr.null_count
    ):  # null slots hold arbitrary words: write them as 0 (the serializer skips them)
        words = np.where(_validity(arr)[:, None], words, 0)
    low = words[:, 0]
    negative = low < 0
    if not (words[:, 1:] == np.where(negative, -1, 0)[:, None]).all():
        raise ConversionError(
            f"column {column!r}: a decimal value beyond 18 digits ({arr.type}) cannot be written "
            "as text (decimal_as='bytes'); use decimal_as='float' (--decimal-as float)"
        )
    unsigned = low.view(np.uint64)
    magnitude = np.where(negative, ~unsigned + np.uint64(1), unsigned)  # |x|, -2**63 included
    sign = pa.array(np.where(negative, "-", ""))
    if scale <= 0:
        return pc.binary_join_element_wise(
            sign, pa.array(magnitude).cast(pa.string()), "0" * -scale, ""
        )
    if scale >= 20:  # 10**scale exceeds every uint64: all digits are fractional
        whole, frac = np.zeros_like(magnitude), magnitude
    else:
        power = np.uint64(10**scale)
        whole, frac = magnitude // power, magnitude % power
    frac_text = pc.utf8_lpad(pa.array(frac).cast(pa.string()), width=scale, padding="0")
    return pc.binary_join_element_wise(sign, pa.array(whole).cast(pa.string()), ".", frac_text, "")


def _slots(arr: pa.Array, dtype) -> np.ndarray:
    """A fixed-width array's value buffer, one value per slot (nulls hold arbitrary values,
    which the serializer skips); no copy."""
    if len(arr) == 0:
        return np.zeros(0, dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset : arr.offset + len(arr)]


def _leaf_values(arr: pa.Array, kind: Kind, column: str):
    """Leaf values as (values, data) for the serializer, one per slot of `arr`."""
    t = arr.type
    if kind == Kind.INT:
        if pa.types.is_temporal(t):
            storage = pa.int32() if t.bit_width == 32 else pa.int64()
            arr = arr.view(storage)
        elif pa.types.is_uint64(t) and len(arr) and (pc.max(arr).as_py() or 0) > _INT64_MAX:
            raise ConversionError(
                f"column {column!r}: uint64 value {pc.max(arr).as_py()} is "
                f"above the int64 maximum {_INT64_MAX}"
            )
        # Arrow's cast rather than numpy's astype for int32 (a wide table's narrowed row
        # groups): numpy's many small arrays fragmented the heap and raised the peak RSS.
        return _slots(arr.cast(pa.int64()), np.int64), None
    if kind == Kind.FLOAT:
        if pa.types.is_decimal(t):
            arr = arr.cast(pa.float64())
        # float64 → float32 keeps float32's precision and range (out-of-range → ±inf).
        with np.errstate(over="ignore"):
            return _slots(arr, arr.type.to_pandas_dtype()).astype(np.float32, copy=False), None
    if pa.types.is_null(t):
        return np.zeros(1, np.int64), np.zeros(0, np.uint8)
    if pa.types.is_fixed_size_binary(t):
        # No cast: pyarrow 10 crashes casting a sliced fixed_size_binary array.
        size = t.byte_width
        data = np.frombuffer(arr.buffers()[1], dtype=np.uint8)[
            size * arr.offset : size * (arr.offset + len(arr))
        ]
        return np.arange(len(arr) + 1, dtype=np.int64) * size, data
    if pa.types.is_decimal(t):
        arr = _decimal_text(arr, column)
    arr = arr.cast(pa.large_binary())
    offsets_buf, data_buf = arr.buffers()[1:3]
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    return offsets, data


def _flatten(arr: pa.Array) -> pa.Array:
    # pyarrow 10's list_flatten fails on an all-null list array whose nulls hold child values.
    if arr.null_count == len(arr):
        return arr.values.slice(0, 0)
    return pc.list_flatten(arr)


def _list_lengths(arr: pa.Array) -> np.ndarray:
    return pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def cumulative(lengths: np.ndarray) -> np.ndarray:
    """Where each of `lengths`' items starts when laid end to end, then the end: 0 and the
    running sums."""
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


@functools.lru_cache(maxsize=8)
def _slot_splits(rows: int) -> np.ndarray:
    """0..rows, a scalar feature's row splits (row r's value is slot r): one read-only array
    shared by a batch's scalar features (a wide table has thousands of them)."""
    splits = np.arange(rows + 1, dtype=np.int64)
    splits.setflags(write=False)
    return splits


def feature_values(column: pa.Array, feature: Feature, partitions: Sequence[Feature] = ()):
    """A values feature (and its ragged row-length partitions) of one column over a batch."""
    arr = column
    top_valid: Optional[np.ndarray] = None
    levels: list[np.ndarray] = []  # cumulative offsets: items of level k-1 → items of level k
    for step in feature.path:
        arr = _decoded(arr)
        nested = top_valid is not None
        if nested and arr.null_count:
            what = "list" if step == "list" else "struct"
            raise ConversionError(
                f"column {feature.column!r} (feature {feature.name!r}): a null "
                f"{what} inside a list cannot be represented in tf.Example"
            )
        if step == "list":
            if not nested:
                top_valid = _validity(arr)
            levels.append(cumulative(_list_lengths(arr)))
            arr = _flatten(arr)
        else:
            arr = arr.flatten()[arr.type.get_field_index(step)]
    # Strings read as dictionary pages stay encoded: each value is written from the dictionary.
    keep_dictionary = _is_string_dictionary(arr, feature.kind)
    if not keep_dictionary:
        arr = _decoded(arr)
    slots = top_valid is None
    if slots:  # a scalar: row r's value is slot r (skipped where null)
        top_valid = _validity(arr)
        levels.append(_slot_splits(len(arr)))
    elif arr.null_count:
        raise ConversionError(
            f"column {feature.column!r} (feature {feature.name!r}): a null "
            "value inside a list cannot be represented in tf.Example"
        )
    if pa.types.is_null(arr.type):
        top_valid = np.zeros(len(column), dtype=bool)
        levels = [np.zeros(len(column) + 1, dtype=np.int64)]
        slots = False
    codes = _dictionary_codes(arr) if keep_dictionary else None
    values, data = _leaf_values(
        arr.dictionary if keep_dictionary else arr, feature.kind, feature.column
    )

    def composed(depth: int) -> np.ndarray:
        splits = levels[0]
        for offsets in levels[1:depth]:
            splits = offsets[splits]
        return splits

    out = [FeatureValues(composed(len(levels)), top_valid, values, data, codes, slots)]
    for partition in partitions:
        out.append(
            FeatureValues(composed(partition.level), top_valid, np.diff(levels[partition.level]))
        )
    return out


def _partitions(features: Sequence[Feature]) -> dict[str, list[Feature]]:
    partitions: dict[str, list[Feature]] = {}
    for f in features:
        if f.row_lengths_of is not None:
            partitions.setdefault(f.row_lengths_of, []).append(f)
    return partitions


def written_order(features: Sequence[Feature]) -> list[Feature]:
    """The order `feature_columns` yields features in: each values feature, then its partitions."""
    partitions = _partitions(features)
    return [
        g for f in features if f.row_lengths_of is None for g in [f, *partitions.get(f.name, [])]
    ]


def feature_columns(
    batch: pa.RecordBatch, features: Sequence[Feature]
) -> list[tuple[Feature, FeatureValues]]:
    """Every feature of `batch` (from `features_of`) as flat buffers, in `written_order`."""
    partitions = _partitions(features)
    ordered: list[tuple[Feature, FeatureValues]] = []
    for f in features:
        if f.row_lengths_of is not None:
            continue
        parts = partitions.get(f.name, [])
        column = batch.column(batch.schema.get_field_index(f.column))
        ordered.extend(zip([f, *parts], feature_values(column, f, parts), strict=True))
    return ordered

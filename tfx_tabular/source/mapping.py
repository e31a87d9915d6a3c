"""The one Arrow → tf.Example type mapping.

ParquetExampleGen writes by it, schema inference describes it, and parsing specs are derived from
it. Every Arrow column becomes one or more tf.Example features:

* scalars and lists of scalars → one feature of kind INT (int64), FLOAT (float32) or BYTES;
* lists of lists (any depth) → a values feature plus one ``<name>.row_lengths_<k>`` feature per
  inner level, the layout of a RaggedTensor with row-length partitions;
* structs → one feature per leaf, named ``parent.child``.

Value conversions (documented in the README's type table):
bool → INT 0/1; int8–int64, uint8–uint64 → INT (uint64 above 2**63-1 is an error);
float16/32/64 → FLOAT (float32 precision); decimal → FLOAT, or BYTES of its text with
``decimal_as="bytes"``; date32 → INT days since epoch; date64 → INT ms since epoch;
timestamp(unit, tz) → INT since the UTC epoch in the column's own unit; time32/64 and duration →
INT in their own unit; string/binary/fixed_size_binary → BYTES, byte for byte; dictionary → its
value type; null (an all-null column) → BYTES, always absent.

A top-level null becomes a feature with no kind set (what tfx_bsl writes and reads as null); an
empty list becomes an empty typed list. Nulls *inside* a list cannot be represented in tf.Example
and are rejected, naming the column.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Iterator, Optional, Tuple

import pyarrow as pa

ROW_LENGTHS_SUFFIX = ".row_lengths_"


class Kind(enum.IntEnum):
    """Feature value kinds; the numbers match tensorflow_metadata's FeatureType."""

    BYTES = 1
    INT = 2
    FLOAT = 3


class UnsupportedColumnError(ValueError):
    """A column whose Arrow type has no tf.Example representation."""


@dataclasses.dataclass(frozen=True)
class Feature:
    """One tf.Example feature derived from a (possibly nested) Arrow column.

    ``path`` walks from the top-level column to the leaf: ``"list"`` steps into list values, any
    other string steps into that struct field. ``row_lengths_of`` is set on the partition features
    of a ragged feature: it names the values feature, and ``level`` is the partition's depth (1 is
    the outermost inner list).
    """

    name: str
    column: str
    path: Tuple[str, ...]
    kind: Kind
    leaf_type: pa.DataType
    # Sizes of fixed_size_list levels along the path (None for variable-length levels).
    list_sizes: Tuple[Optional[int], ...] = ()
    row_lengths_of: Optional[str] = None
    level: int = 0

    @property
    def list_depth(self) -> int:
        return len(self.list_sizes)

    @property
    def is_ragged_values(self) -> bool:
        return self.row_lengths_of is None and self.list_depth > 1

    @property
    def unit(self) -> Optional[str]:
        """The epoch/time unit of an INT feature converted from a temporal type."""
        t = self.leaf_type
        if pa.types.is_time(t):
            # pyarrow 10 hands time32/time64 types out as plain DataType, without `.unit`.
            return str(t)[len("time32[") : -1]  # "time32[ms]" → "ms"
        if pa.types.is_timestamp(t) or pa.types.is_duration(t):
            return t.unit
        if pa.types.is_date32(t):
            return "D"
        if pa.types.is_date64(t):
            return "ms"
        return None


def row_lengths_name(values_name: str, level: int) -> str:
    return f"{values_name}{ROW_LENGTHS_SUFFIX}{level}"


def is_bytes_like(t: pa.DataType) -> bool:
    """Strings and binaries of every width: written byte for byte as BYTES."""
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
    )


def leaf_kind(arrow_type: pa.DataType, decimal_as: str = "float") -> Kind:
    """The feature kind of a non-list, non-struct Arrow type, or UnsupportedColumnError."""
    t = arrow_type
    if pa.types.is_dictionary(t):
        return leaf_kind(t.value_type, decimal_as)
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_temporal(t):
        return Kind.INT
    if pa.types.is_floating(t):
        return Kind.FLOAT
    if pa.types.is_decimal(t):
        if decimal_as not in ("float", "bytes"):
            raise ValueError(f"decimal_as must be 'float' or 'bytes', not {decimal_as!r}")
        return Kind.FLOAT if decimal_as == "float" else Kind.BYTES
    if is_bytes_like(t) or pa.types.is_null(t):
        return Kind.BYTES
    raise UnsupportedColumnError(f"type {t} has no tf.Example representation")


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _walk(
    name: str,
    column: str,
    t: pa.DataType,
    path: Tuple[str, ...],
    list_sizes: Tuple[Optional[int], ...],
    decimal_as: str,
) -> Iterator[Feature]:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if _is_list(t):
        size = t.list_size if pa.types.is_fixed_size_list(t) else None
        yield from _walk(
            name, column, t.value_type, path + ("list",), list_sizes + (size,), decimal_as
        )
    elif pa.types.is_struct(t):
        for child in t:
            yield from _walk(
                f"{name}.{child.name}",
                column,
                child.type,
                path + (child.name,),
                list_sizes,
                decimal_as,
            )
    else:
        values = Feature(name, column, path, leaf_kind(t, decimal_as), t, list_sizes)
        yield values
        for level in range(1, len(list_sizes)):
            yield Feature(
                row_lengths_name(name, level),
                column,
                path,
                Kind.INT,
                pa.int64(),
                list_sizes[:level],
                row_lengths_of=name,
                level=level,
            )


def features_of(schema: pa.Schema, decimal_as: str = "float") -> list[Feature]:
    """The tf.Example features of an Arrow schema, in column order.

    Raises UnsupportedColumnError naming the column for map, union, extension and other types
    without a representation, and ValueError when two features would share a name.
    """
    features: list[Feature] = []
    for field in schema:
        try:
            features.extend(_walk(field.name, field.name, field.type, (), (), decimal_as))
        except UnsupportedColumnError as e:
            raise UnsupportedColumnError(f"column {field.name!r}: {e}") from None
    seen: dict[str, str] = {}
    for f in features:
        if f.name in seen and seen[f.name] == f.column:
            raise ValueError(
                f"column {f.column!r} holds two struct fields that both make feature "
                f"{f.name!r}; rename one"
            )
        if f.name in seen:
            raise ValueError(
                f"feature name {f.name!r} comes from both column {seen[f.name]!r} "
                f"and column {f.column!r}; rename or exclude one"
            )
        seen[f.name] = f.column
    return features

"""A partitioned Parquet dataset resolved from its footers alone (`open_dataset`): its files,
one schema unified over them, and its partition columns and their types, so bad input fails
before a single output byte exists."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import decimal
import logging
import re
from typing import Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.fs as pafs

from tfx_tabular.source import tables
from tfx_tabular.source.errors import ColumnError, InputError
from tfx_tabular.source.files import ColumnStats, ParquetFileInfo, QuickPickle, read_footer
from tfx_tabular.source.filesystems import resolve_filesystem
from tfx_tabular.source.listing import list_files, table_files
from tfx_tabular.source.mapping import Feature, features_of, is_bytes_like

log = logging.getLogger(__name__)
_INTEGER = re.compile(r"^-?\d{1,18}$")


@dataclasses.dataclass(frozen=True)
class Dataset(QuickPickle):
    """A resolved input: its files and the schema every batch is conformed to."""

    filesystem: pafs.FileSystem
    base: str
    files: tuple[ParquetFileInfo, ...]
    schema: pa.Schema  # unified file columns, then partition columns
    partition_columns: tuple[str, ...]
    decimal_as: str = "float"

    @property
    def num_rows(self) -> int:
        return sum(f.num_rows for f in self.files)

    @property
    def features(self) -> list[Feature]:
        return features_of(self.schema, self.decimal_as)

    def for_reading(self) -> Dataset:
        """This dataset without its footers' column statistics, which reading does not use:
        what a converting worker is sent (several copies of it live in each worker, and at
        thousands of columns those statistics are tens of MiB of Python objects)."""
        return dataclasses.replace(
            self, files=tuple(dataclasses.replace(f, column_stats=()) for f in self.files)
        )

    def column_stats(self) -> dict[str, ColumnStats]:
        """Footer statistics per top-level column over all files; a column missing from a file
        counts as that many nulls, a partition column only its null partitions' rows. Files
        without rows do not count: their footers hold no statistics (pandas writes one when a
        filter leaves nothing), which would make every column unknown."""
        merged: dict[str, ColumnStats] = {}
        for info in (f for f in self.files if f.num_rows):
            per_file = dict(info.column_stats)
            partitions = dict(info.partitions)
            # A set: Schema.names builds a new list on every access (quadratic for wide files).
            file_names = set(info.schema.names)
            for name in self.schema.names:
                if name in partitions and name not in file_names:
                    current = ColumnStats(info.num_rows if partitions[name] is None else 0)
                elif name in per_file:
                    current = per_file[name]
                elif name not in file_names:
                    current = ColumnStats(info.num_rows)
                else:
                    current = ColumnStats(None)
                merged[name] = merged[name].merge(current) if name in merged else current
        return {name: merged.get(name, ColumnStats(0)) for name in self.schema.names}

    def partition_values(self) -> dict[str, tuple[str, ...]]:
        """Each partition column's distinct values over the files, sorted (nulls left out)."""
        return {
            key: tuple(sorted({dict(f.partitions)[key] for f in self.files} - {None}))
            for key in self.partition_columns
        }


def _family(t: pa.DataType) -> str:
    # Types that mean the same values whatever their width or encoding. bool and int64, or a
    # time32("ms") and a timestamp("ms"), write the same feature kind but mean different things.
    for family, test in (
        ("integer", pa.types.is_integer),
        ("floating", pa.types.is_floating),
        ("decimal", pa.types.is_decimal),
        ("timestamp", pa.types.is_timestamp),
        ("date", pa.types.is_date),
        ("time", pa.types.is_time),
        ("duration", pa.types.is_duration),
    ):
        if test(t):
            return family
    if is_bytes_like(t):
        return "bytes"
    return str(t)


def _signature(field: pa.Field, decimal_as: str):
    return [
        (f.name, f.kind, f.list_sizes, f.unit, _family(f.leaf_type))
        for f in features_of(pa.schema([field]), decimal_as)
    ]


def _wider(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        return pa.int64()
    if pa.types.is_floating(a) and pa.types.is_floating(b):
        return pa.float64()
    return b if pa.types.is_null(a) else a


def unify_schemas(files: Sequence[ParquetFileInfo], decimal_as: str = "float") -> pa.Schema:
    """One schema for all files, or InputError naming both files and the column.

    Columns that yield the same tf.Example features (int32 and int64, string and large_string,
    float32 and float64, a type and null) unify. A column missing from some files is null there,
    if it is nullable where present.
    """
    fields: dict[str, tuple[pa.Field, ParquetFileInfo]] = {}
    # Files of one dataset mostly share their fields: each distinct field's signature once.
    signatures: dict[tuple[str, str], list] = {}

    def signature_of(field: pa.Field) -> list:
        key = (field.name, str(field.type))  # extension types are not hashable
        if key not in signatures:
            signatures[key] = _signature(field, decimal_as)
        return signatures[key]

    previous = None
    for info in files:
        # A file with the schema of the file before it (most datasets' files) adds nothing.
        if previous is not None and info.schema.equals(previous):
            continue
        previous = info.schema
        for field in info.schema:
            try:
                signature = signature_of(field)
            except ValueError as e:  # unsupported types, duplicate struct fields
                raise ColumnError(f"{info.path}: {e}") from None
            if field.name not in fields:
                fields[field.name] = (field, info)
                continue
            first, first_info = fields[field.name]
            if signature != signature_of(first) and not (
                pa.types.is_null(first.type) or pa.types.is_null(field.type)
            ):
                raise ColumnError(
                    f"column {field.name!r} is {first.type} in {first_info.path} but {field.type} in "
                    f"{info.path}: these types do not convert to the same tf.Example feature"
                )
            # A column first seen as null-typed takes its type from this file: name this one.
            owner = (
                info
                if pa.types.is_null(first.type) and not pa.types.is_null(field.type)
                else first_info
            )
            fields[field.name] = (
                first.with_type(_wider(first.type, field.type)).with_nullable(
                    first.nullable or field.nullable
                ),
                owner,
            )
    for name, (field, first_info) in fields.items():
        for info in files:
            if info.schema.get_field_index(name) < 0 and not field.nullable:
                raise ColumnError(
                    f"column {name!r} is required (not nullable) in {first_info.path} "
                    f"but missing from {info.path}"
                )
    return pa.schema([field for field, _ in fields.values()])


def _partition_type(key: str, values: Sequence[Optional[str]], wanted) -> pa.DataType:
    """A partition column's type: a table's own (an Arrow type), declared ('int' / 'string'),
    or int64 when every non-null value is an integer written the way int64 writes it back."""
    if isinstance(wanted, pa.DataType):
        return wanted
    if wanted not in (None, "int", "string"):
        raise ValueError(f"partition type for {key!r} must be 'int' or 'string', not {wanted!r}")
    present = [v for v in values if v is not None]
    if wanted is None:
        # Only values an int64 writes back the same: zip=02134 or id=007 stay text.
        integers = all(_INTEGER.match(v) and str(int(v)) == v for v in present)
        wanted = "int" if integers else "string"
    if wanted == "int":
        bad = next((v for v in present if not _INTEGER.match(v)), None)
        if bad is not None:
            raise InputError(
                f"partition {key}={bad!r} is not an integer, but {key!r} was declared 'int'"
            )
    return pa.int64() if wanted == "int" else pa.string()


def _partition_schema(
    files: Sequence[ParquetFileInfo], types: Mapping[str, object], file_schema: pa.Schema
) -> list[pa.Field]:
    """The partition columns; one the files also hold keeps the files' type (`conform` checks
    that its values agree with the folder's)."""
    keys: dict[str, list[Optional[str]]] = {}
    for info in files:
        for key, value in info.partitions:
            keys.setdefault(key, []).append(value)
    fields = []
    for key, values in keys.items():
        if file_schema.get_field_index(key) >= 0:
            fields.append(file_schema.field(key))
        else:
            fields.append(pa.field(key, _partition_type(key, values, types.get(key))))
    for info in files:
        present = [k for k, _ in info.partitions]
        if sorted(present) != sorted(keys):
            raise InputError(
                f"{info.path}: partition folders {present} differ from the dataset's {sorted(keys)}"
            )
    # A folder value the column's type cannot hold fails now, not mid-run. Any text is a string
    # (the usual partition type): not checked, which also spares footer-only runs pyarrow's
    # import of pandas on its first array built from Python values.
    typed = {f.name: f.type for f in fields if not _is_text(f.type)}
    for info in files:
        for key, value in info.partitions:
            if key in typed:
                partition_value(info, key, value, typed[key])
    return fields


def _is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def partition_value(
    info: ParquetFileInfo, key: str, value: Optional[str], t: pa.DataType
) -> pa.Array:
    """A partition folder's text as a one-value array of the column's type (null for None)."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    try:
        if value is None:
            return pa.nulls(1, t)
        if pa.types.is_decimal(t):
            return pa.array([decimal.Decimal(value)], t)
        if pa.types.is_date(t):  # pyarrow 10 casts text to timestamps, not to dates
            return pa.array([value]).cast(pa.timestamp("s")).cast(t)
        return pa.array([value]).cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, decimal.InvalidOperation):
        raise ColumnError(
            f"{info.path}: partition value {key}={value!r} is not a {t} (the column's type)"
        ) from None


def _read_files(
    input_base: str, patterns: Sequence[str], table_version: Optional[int]
) -> tuple[pafs.FileSystem, str, list[ParquetFileInfo], Optional[tables.Snapshot]]:
    """The data files' footers: a table's snapshot's files, or the folder's Parquet files."""
    filesystem, base = resolve_filesystem(input_base)
    snapshot = tables.read_snapshot(filesystem, base, table_version)
    if snapshot is None:
        infos = list_files(filesystem, base, patterns)
    else:
        infos = table_files(filesystem, base, snapshot, patterns)
    if not infos:
        raise InputError(f"no Parquet files under {input_base} match {list(patterns)}")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        files = list(pool.map(lambda i: read_footer(filesystem, base, i), infos))
    if snapshot is not None:  # partition values as the table records them, not its folder names
        recorded = {f.relative: f.partitions for f in snapshot.files}
        files = [dataclasses.replace(f, partitions=recorded[f.relative]) for f in files]
    return filesystem, base, files, snapshot


def _warn_case_twins(files: Sequence[ParquetFileInfo], names: Sequence[str]) -> None:
    """Columns whose names differ only in case and never meet in one file (`Age` in old files,
    `age` in new ones): most likely one column renamed, which would become two features, each
    missing where the other is. Said, not refused: the data converts as it is, and two such
    columns in one file are two columns (decision 0027)."""
    spellings: dict[str, list[str]] = {}
    for name in names:
        spellings.setdefault(name.casefold(), []).append(name)
    for twins in (t for t in spellings.values() if len(t) > 1):
        holders = [next(f for f in files if name in f.schema.names) for name in twins]
        if any(len(set(twins) & set(f.schema.names)) > 1 for f in files):
            continue
        log.warning(
            "columns %s differ only in case and no file holds two of them (%s): they become "
            "separate features, each missing where the other is; if they are one column, "
            "rename it in the files (or exclude_columns / --exclude-columns one)",
            " and ".join(repr(n) for n in twins),
            ", ".join(f"{n!r} in {f.relative}" for n, f in zip(twins, holders, strict=True)),
        )


def _ignored_index_columns(
    files: Sequence[ParquetFileInfo], excluded: set[str], columns: Optional[Sequence[str]]
) -> set[str]:
    """The index columns pandas wrote (an index, not data: pandas reads them back as the
    index), said once. A name that is an index in one file but data in another stays data."""
    indexes = {name for f in files for name in f.index_columns} - excluded - set(columns or ())
    data = {name for f in files for name in f.schema.names if name not in f.index_columns}
    ignored = indexes - data
    if ignored:
        log.warning(
            "ignoring pandas index column(s) %s: pandas reads them back as the index, not as "
            "data; keep_index_columns (--keep-index-columns) keeps them",
            ", ".join(sorted(ignored)),
        )
    return ignored


def open_dataset(
    input_base: str,
    patterns: Sequence[str] = ("*",),
    *,
    columns: Optional[Sequence[str]] = None,
    exclude_columns: Sequence[str] = (),
    partition_filter: Optional[Mapping[str, Sequence[str]]] = None,
    partition_types: Optional[Mapping[str, str]] = None,
    decimal_as: str = "float",
    table_version: Optional[int] = None,
    keep_index_columns: bool = False,
) -> Dataset:
    """List, read footers (in parallel) and unify the schema of a partitioned Parquet dataset,
    or of a Delta Lake / Iceberg table's snapshot (its current one, or `table_version`).
    pandas' index columns are left out unless `keep_index_columns` or named in `columns`."""
    filesystem, base, files, snapshot = _read_files(input_base, patterns, table_version)
    types: Mapping[str, object] = dict(partition_types or {})
    excluded = set(exclude_columns)
    if snapshot is not None:
        types = {**types, **snapshot.partition_types}
        # Columns of the files that are not the snapshot's (dropped from the table) are not read.
        excluded |= {n for f in files for n in f.schema.names if n not in snapshot.columns}
    if partition_filter:
        files = [
            f
            for f in files
            if all(
                dict(f.partitions).get(k) in set(map(str, v)) for k, v in partition_filter.items()
            )
        ]
        if not files:
            raise InputError(
                f"no files under {input_base} pass the partition filter {dict(partition_filter)}"
            )
    if columns is not None:
        excluded |= {name for f in files for name in f.schema.names if name not in set(columns)}
    if not keep_index_columns:
        excluded |= _ignored_index_columns(files, excluded, columns)
    files = [
        dataclasses.replace(f, schema=pa.schema([x for x in f.schema if x.name not in excluded]))
        for f in files
    ]
    file_schema = unify_schemas(files, decimal_as)
    _warn_case_twins(files, file_schema.names)
    partition_fields = [
        p for p in _partition_schema(files, types, file_schema) if p.name not in excluded
    ]
    # A partition column the files also hold (Polars, DuckDB's WRITE_PARTITION_COLUMNS) stays
    # where the files have it.
    schema = pa.schema(
        list(file_schema) + [p for p in partition_fields if p.name not in file_schema.names]
    )
    if columns is not None:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise InputError(f"columns {missing} are in no file under {input_base}")
    try:
        features_of(schema, decimal_as)
    except ValueError as e:  # a column without a tf.Example representation
        raise ColumnError(f"{input_base}: {e}") from None
    return Dataset(
        filesystem, base, tuple(files), schema, tuple(p.name for p in partition_fields), decimal_as
    )

"""Partitioned Parquet datasets: listing, hive partitions, footers, schema unification, batches.

Everything here reads Parquet *metadata* up front (O(files), no pass over rows), so a conversion
knows its files, row counts, unified schema and partition types before it writes anything, and
bad input fails before a single output byte exists.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import fnmatch
import json
import os
import pickle
import posixpath
import re
import urllib.parse
from typing import Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from tfx_tabular.source.mapping import Feature, features_of, is_bytes_like

_INTEGER = re.compile(r"^-?\d{1,18}$")


class InputError(ValueError):
    """Input that cannot be converted; the message names the file (and column)."""


class InputNotFoundError(InputError):
    """The input folder does not exist."""


class ColumnError(InputError):
    """Input that fails on one column, which the message names: the file can be fixed, or the
    column left out."""


@dataclasses.dataclass(frozen=True)
class ColumnStats:
    """Footer statistics of a top-level non-nested column, over a file or a dataset.

    `null_count` is None when some row group has no statistics; min/max only for numbers and bools.
    """

    null_count: Optional[int]
    min: Optional[Union[int, float, bool]] = None
    max: Optional[Union[int, float, bool]] = None

    def merge(self, other: ColumnStats) -> ColumnStats:
        nulls = (
            None
            if self.null_count is None or other.null_count is None
            else self.null_count + other.null_count
        )
        lows = [v for v in (self.min, other.min) if v is not None]
        highs = [v for v in (self.max, other.max) if v is not None]
        both = self.min is not None and other.min is not None
        return ColumnStats(nulls, min(lows) if both else None, max(highs) if both else None)


def _footer_stats(
    metadata: pq.FileMetaData, schema: pa.Schema
) -> tuple[tuple[str, ColumnStats], ...]:
    # Leaf statistics describe rows only for flat top-level columns (names may contain dots).
    flat = {f.name for f in schema if not pa.types.is_nested(f.type)}
    stats: dict[str, ColumnStats] = {}
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            if column.path_in_schema not in flat:
                continue
            st = column.statistics
            numeric = (
                st is not None
                and st.has_min_max
                and column.physical_type in ("BOOLEAN", "INT32", "INT64", "FLOAT", "DOUBLE")
                and st.logical_type.type in ("NONE", "INT")
            )
            current = ColumnStats(
                st.null_count if st is not None and st.has_null_count else None,
                st.min if numeric else None,
                st.max if numeric else None,
            )
            name = column.path_in_schema
            stats[name] = stats[name].merge(current) if name in stats else current
    return tuple(stats.items())


def _unpickle(cls, schema: bytes, state: bytes):
    return cls(schema=pa.ipc.read_schema(pa.py_buffer(schema)), **pickle.loads(state))


class _QuickPickle:
    """Beam pickles the conversion's DoFn, and with it every file's schema and footer statistics,
    with dill several times a run: slow for wide files (thousands of columns), where Arrow IPC
    and the C pickler are orders of magnitude faster."""

    def __reduce__(self):
        state = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "schema"
        }
        return _unpickle, (type(self), self.schema.serialize().to_pybytes(), pickle.dumps(state))


@dataclasses.dataclass(frozen=True)
class ParquetFileInfo(_QuickPickle):
    """One data file, described from its footer."""

    path: str  # filesystem path, as pyarrow.fs takes it
    relative: str  # relative to the input base, '/'-separated
    partitions: tuple[tuple[str, str], ...]  # hive key=value pairs along the path, raw text
    num_rows: int
    row_group_rows: tuple[int, ...]
    schema: pa.Schema
    size: int
    mtime_ns: int
    column_stats: tuple[tuple[str, ColumnStats], ...] = ()


_META = "tfx_tabular."
# Where ParquetExampleGen keeps a SourceMetadata: beside the Split-* folders of its Examples.
SOURCE_METADATA_FILE = "source_schema.arrow"


@dataclasses.dataclass(frozen=True)
class SourceMetadata:
    """What schema inference and training need to know of a source, without a data pass:
    its Arrow schema, footer statistics per column, row count and partition columns.

    ParquetExampleGen stores it in the Examples artifact as SOURCE_METADATA_FILE (an Arrow schema
    whose metadata carries the rest), so later components need no access to the Parquet files.
    """

    schema: pa.Schema
    column_stats: Mapping[str, ColumnStats]
    num_rows: int
    partition_columns: tuple[str, ...] = ()
    decimal_as: str = "float"
    partition_values: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def to_arrow_schema(self) -> pa.Schema:
        fields = []
        for field in self.schema:
            stats = self.column_stats.get(field.name)
            meta = (
                {}
                if stats is None
                else {_META + "stats": json.dumps([stats.null_count, stats.min, stats.max])}
            )
            fields.append(field.with_metadata(meta))
        return pa.schema(
            fields,
            metadata={
                _META + "num_rows": str(self.num_rows),
                _META + "partition_columns": json.dumps(list(self.partition_columns)),
                _META + "partition_values": json.dumps(
                    {k: list(v) for k, v in self.partition_values.items()}
                ),
                _META + "decimal_as": self.decimal_as,
            },
        )

    def without(self, columns: Sequence[str]) -> SourceMetadata:
        """The same source with `columns` left out (unknown names are an InputError)."""
        unknown = [c for c in columns if c not in self.schema.names]
        if unknown:
            raise InputError(
                f"columns {unknown} to exclude are not in the source "
                f"(columns: {', '.join(self.schema.names[:20])}...)"
            )
        dropped = set(columns)
        return dataclasses.replace(
            self,
            schema=pa.schema([f for f in self.schema if f.name not in dropped]),
            column_stats={k: v for k, v in self.column_stats.items() if k not in dropped},
            partition_columns=tuple(c for c in self.partition_columns if c not in dropped),
            partition_values={k: v for k, v in self.partition_values.items() if k not in dropped},
        )

    @classmethod
    def from_arrow_schema(cls, schema: pa.Schema) -> SourceMetadata:
        meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
        stats = {}
        for field in schema:
            field_meta = {k.decode(): v.decode() for k, v in (field.metadata or {}).items()}
            if _META + "stats" in field_meta:
                stats[field.name] = ColumnStats(*json.loads(field_meta[_META + "stats"]))
        return cls(
            pa.schema([f.remove_metadata() for f in schema]),
            stats,
            int(meta.get(_META + "num_rows", 0)),
            tuple(json.loads(meta.get(_META + "partition_columns", "[]"))),
            meta.get(_META + "decimal_as", "float"),
            {
                k: tuple(v)
                for k, v in json.loads(meta.get(_META + "partition_values", "{}")).items()
            },
        )


@dataclasses.dataclass(frozen=True)
class Dataset(_QuickPickle):
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

    def column_stats(self) -> dict[str, ColumnStats]:
        """Footer statistics per top-level column over all files; a column missing from a file
        counts as that many nulls."""
        merged: dict[str, ColumnStats] = {}
        for info in self.files:
            per_file = dict(info.column_stats)
            # A set: Schema.names builds a new list on every access (quadratic for wide files).
            file_names = set(info.schema.names)
            for name in self.schema.names:
                if name in self.partition_columns:
                    continue
                if name in per_file:
                    current = per_file[name]
                elif name not in file_names:
                    current = ColumnStats(info.num_rows)
                else:
                    current = ColumnStats(None)
                merged[name] = merged[name].merge(current) if name in merged else current
        return merged

    def source_metadata(self) -> SourceMetadata:
        values = {
            key: tuple(sorted({dict(f.partitions)[key] for f in self.files}))
            for key in self.partition_columns
        }
        return SourceMetadata(
            self.schema,
            self.column_stats(),
            self.num_rows,
            self.partition_columns,
            self.decimal_as,
            values,
        )


def read_source_metadata(examples_uri: str) -> SourceMetadata:
    """The SourceMetadata ParquetExampleGen stored in an Examples artifact's folder."""
    filesystem, folder = resolve_filesystem(examples_uri)
    path = posixpath.join(folder, SOURCE_METADATA_FILE)
    try:
        with filesystem.open_input_file(path) as handle:
            schema = pa.ipc.read_schema(handle.read_buffer())
    except FileNotFoundError:
        raise InputError(
            f"{examples_uri}/{SOURCE_METADATA_FILE} is missing: these Examples were "
            "not written by ParquetExampleGen; give `input_base` instead"
        ) from None
    return SourceMetadata.from_arrow_schema(schema)


def is_examples_folder(uri: str) -> bool:
    """Whether `uri` is an Examples folder ParquetExampleGen wrote (local or object store)."""
    filesystem, folder = resolve_filesystem(uri)
    info = filesystem.get_file_info(posixpath.join(folder, SOURCE_METADATA_FILE))
    return info.type == pafs.FileType.File


def resolve_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" in uri:
        filesystem, path = pafs.FileSystem.from_uri(uri)
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if emulator and filesystem.type_name == "gcs":
            # google-cloud-storage, and so Beam's gcsio that writes the output, sends gs:// to the
            # GCS emulator STORAGE_EMULATOR_HOST names (e.g. http://localhost:4443), anonymously.
            # pyarrow 10's GcsFileSystem ignores that variable (it would read real GCS, or retry
            # for credentials for 15 minutes), so read from the emulator the output goes to.
            endpoint = urllib.parse.urlsplit(
                emulator if "://" in emulator else "http://" + emulator
            )
            filesystem = pafs.GcsFileSystem(
                anonymous=True, scheme=endpoint.scheme, endpoint_override=endpoint.netloc
            )
        return filesystem, path
    return pafs.LocalFileSystem(), posixpath.abspath(uri)


def _is_hidden(name: str) -> bool:
    # Spark and Hive leave _SUCCESS, _metadata, _committed_*, .crc files beside the data.
    return name.startswith(("_", "."))


def _partitions_of(relative: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for part in relative.split("/")[:-1]:
        if "=" in part:
            key, value = part.split("=", 1)
            try:  # strict: the default replaces invalid UTF-8 with U+FFFD, silently changing values
                pairs.append(
                    (
                        urllib.parse.unquote(key, errors="strict"),
                        urllib.parse.unquote(value, errors="strict"),
                    )
                )
            except UnicodeDecodeError:
                raise InputError(
                    f"{relative}: partition folder {part!r} is not percent-encoded UTF-8"
                ) from None
    return tuple(pairs)


def matches_pattern(relative: str, pattern: str) -> bool:
    """A relative file path matches a glob if it, or one of its folders, does."""
    parts = relative.split("/")
    return any(fnmatch.fnmatchcase("/".join(parts[: i + 1]), pattern) for i in range(len(parts)))


def list_files(
    filesystem: pafs.FileSystem, base: str, patterns: Sequence[str] = ("*",)
) -> list[pafs.FileInfo]:
    """Data files under `base` whose relative path, or one of its folders, matches a pattern."""
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    except FileNotFoundError:
        raise InputNotFoundError(f"input folder {base} does not exist") from None
    except NotADirectoryError:
        raise InputError(
            f"input {base} is a file; give the folder that holds the Parquet files"
        ) from None
    chosen = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        relative = posixpath.relpath(info.path, base)
        parts = relative.split("/")
        if any(_is_hidden(p) for p in parts):
            continue
        if any(matches_pattern(relative, pattern) for pattern in patterns):
            chosen.append(info)
    if isinstance(filesystem, pafs.LocalFileSystem):
        # Listing follows symbolic links: a link back up the tree would read the same rows again
        # (many times over, until the OS stops resolving the loop).
        seen: dict[str, str] = {}
        for info in chosen:
            real = os.path.realpath(info.path)
            if real in seen:
                raise InputError(
                    f"{info.path} and {seen[real]} are the same file (through a "
                    "symbolic link); its rows would be read twice"
                )
            seen[real] = info.path
    return sorted(chosen, key=lambda i: i.path)


def _check_unique_names(path: str, schema: pa.Schema) -> None:
    # Parquet allows two top-level columns of one name; Arrow then hands out either one by name,
    # so the feature would silently hold the wrong column's values.
    seen = set()
    for name in schema.names:
        if name in seen:
            raise ColumnError(
                f"{path}: column {name!r} appears {schema.names.count(name)} times; "
                "rename the duplicates (tf.Example features need unique names)"
            )
        seen.add(name)


def _read_footer(filesystem: pafs.FileSystem, base: str, info: pafs.FileInfo) -> ParquetFileInfo:
    try:
        with filesystem.open_input_file(info.path) as handle:
            metadata = pq.ParquetFile(handle).metadata
            schema = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{info.path}: not a readable Parquet file ({e})") from None
    _check_unique_names(info.path, schema)
    relative = posixpath.relpath(info.path, base)
    return ParquetFileInfo(
        path=info.path,
        relative=relative,
        partitions=_partitions_of(relative),
        num_rows=metadata.num_rows,
        row_group_rows=tuple(
            metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)
        ),
        schema=schema.remove_metadata(),
        size=info.size,
        mtime_ns=info.mtime_ns or 0,
        column_stats=_footer_stats(metadata, schema),
    )


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

    for info in files:
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


def _partition_schema(files: Sequence[ParquetFileInfo], types: Mapping[str, str]) -> list[pa.Field]:
    keys: dict[str, list[str]] = {}
    for info in files:
        for key, value in info.partitions:
            keys.setdefault(key, []).append(value)
    fields = []
    for key, values in keys.items():
        wanted = types.get(key)
        if wanted not in (None, "int", "string"):
            raise ValueError(
                f"partition type for {key!r} must be 'int' or 'string', not {wanted!r}"
            )
        if wanted is None:
            # Only values an int64 writes back the same: zip=02134 or id=007 stay text.
            wanted = (
                "int" if all(_INTEGER.match(v) and str(int(v)) == v for v in values) else "string"
            )
        if wanted == "int":
            bad = next((v for v in values if not _INTEGER.match(v)), None)
            if bad is not None:
                raise InputError(
                    f"partition {key}={bad!r} is not an integer, but {key!r} was declared 'int'"
                )
        fields.append(pa.field(key, pa.int64() if wanted == "int" else pa.string()))
    for info in files:
        present = [k for k, _ in info.partitions]
        if sorted(present) != sorted(keys):
            raise InputError(
                f"{info.path}: partition folders {present} differ from the dataset's {sorted(keys)}"
            )
    return fields


def open_dataset(
    input_base: str,
    patterns: Sequence[str] = ("*",),
    *,
    columns: Optional[Sequence[str]] = None,
    exclude_columns: Sequence[str] = (),
    partition_filter: Optional[Mapping[str, Sequence[str]]] = None,
    partition_types: Optional[Mapping[str, str]] = None,
    decimal_as: str = "float",
) -> Dataset:
    """List, read footers (in parallel) and unify the schema of a partitioned Parquet dataset."""
    filesystem, base = resolve_filesystem(input_base)
    infos = list_files(filesystem, base, patterns)
    if not infos:
        raise InputError(f"no Parquet files under {input_base} match {list(patterns)}")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        files = list(pool.map(lambda i: _read_footer(filesystem, base, i), infos))
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
    excluded = set(exclude_columns)
    if columns is not None:
        excluded |= {name for f in files for name in f.schema.names if name not in set(columns)}
    files = [
        dataclasses.replace(f, schema=pa.schema([x for x in f.schema if x.name not in excluded]))
        for f in files
    ]
    file_schema = unify_schemas(files, decimal_as)
    partition_fields = [
        p for p in _partition_schema(files, partition_types or {}) if p.name not in excluded
    ]
    for field in partition_fields:
        if field.name in file_schema.names:
            owner = next(f for f in files if field.name in f.schema.names)
            raise ColumnError(
                f"{owner.path}: column {field.name!r} is also a partition key in the "
                "folder names; rename the column or the partition folders "
                f"(exclude_columns=[{field.name!r}] drops both)"
            )
    schema = pa.schema(list(file_schema) + partition_fields)
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


def conform(batch: pa.RecordBatch, dataset: Dataset, info: ParquetFileInfo) -> pa.RecordBatch:
    """A file's batch with the dataset's columns: missing ones as nulls, partitions appended."""
    n = batch.num_rows
    partitions = dict(info.partitions)
    names = set(batch.schema.names)  # once: Schema.names builds a new list on every access
    arrays = []
    for field in dataset.schema:
        if field.name in dataset.partition_columns:
            value = partitions[field.name]
            scalar = pa.array(
                [int(value) if pa.types.is_integer(field.type) else value], field.type
            )
            arrays.append(scalar.take(pa.array(np.zeros(n, dtype=np.int32))))
        elif field.name in names:
            arrays.append(batch.column(batch.schema.get_field_index(field.name)))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.RecordBatch.from_arrays(
        arrays,
        schema=pa.schema(
            [pa.field(f.name, a.type) for f, a in zip(dataset.schema, arrays, strict=True)]
        ),
    )


def _dictionary_columns(metadata: pq.FileMetaData, row_group: int, columns) -> list[str]:
    """The string and binary columns stored as dictionary pages in `row_group`."""
    wanted = set(columns)
    chunks = (metadata.row_group(row_group).column(i) for i in range(metadata.num_columns))
    return [
        chunk.path_in_schema
        for chunk in chunks
        if chunk.path_in_schema in wanted
        and chunk.has_dictionary_page
        and chunk.physical_type == "BYTE_ARRAY"
    ]


def read_batches(
    dataset: Dataset,
    info: ParquetFileInfo,
    row_groups: Sequence[int],
    batch_size: int,
    string_dictionaries: bool = False,
) -> Iterator[pa.RecordBatch]:
    """A file's row groups as conformed batches of at most `batch_size` rows (bounded memory).
    With `string_dictionaries`, string columns stored as dictionary pages (those of the first
    row group) come as dictionary arrays: their values are not decoded nor hashed again."""
    wanted = set(dataset.schema.names)  # a set: quadratic in columns otherwise
    columns = [name for name in info.schema.names if name in wanted]
    try:
        with dataset.filesystem.open_input_file(info.path) as handle:
            reader = pq.ParquetFile(handle)
            if string_dictionaries and row_groups:
                dictionaries = _dictionary_columns(reader.metadata, row_groups[0], columns)
                reader = pq.ParquetFile(
                    handle, metadata=reader.metadata, read_dictionary=dictionaries
                )
            for batch in reader.iter_batches(
                batch_size=batch_size,
                row_groups=list(row_groups),
                columns=columns,
                use_threads=False,
            ):
                yield conform(batch, dataset, info)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{info.path}: reading failed ({e})") from None

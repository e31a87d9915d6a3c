"""Partitioned Parquet datasets: listing, hive partitions, footers, schema unification, batches.

Everything here reads Parquet *metadata* up front (O(files), no pass over rows), so a conversion
knows its files, row counts, unified schema and partition types before it writes anything, and
bad input fails before a single output byte exists.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import decimal
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
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from tfx_tabular.source import footer, tables
from tfx_tabular.source.errors import (  # noqa: F401 (callers import the errors from here)
    ColumnError,
    InputError,
    InputNotFoundError,
)
from tfx_tabular.source.mapping import Feature, features_of, is_bytes_like

_INTEGER = re.compile(r"^-?\d{1,18}$")


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


# What avoids an encoding pyarrow 10 cannot decode, in the writers that choose it.
_ENCODING_REMEDY = (
    "write without it (DuckDB: the default PARQUET_VERSION V1; pyarrow: no column_encoding "
    "or use_byte_stream_split for it)"
)


def _check_encoding(column: pq.ColumnChunkMetaData) -> None:
    """Encodings newer writers choose that pyarrow 10 cannot decode: a ColumnError naming the
    column, before anything is read (DuckDB's PARQUET_VERSION V2 writes both)."""
    encodings = column.encodings
    if "DELTA_LENGTH_BYTE_ARRAY" in encodings:
        encoding = "DELTA_LENGTH_BYTE_ARRAY"
    elif "BYTE_STREAM_SPLIT" in encodings and column.physical_type not in ("FLOAT", "DOUBLE"):
        encoding = f"BYTE_STREAM_SPLIT ({column.physical_type})"
    else:
        return
    raise ColumnError(
        f"column {column.path_in_schema!r} is stored with the {encoding} encoding, which "
        f"pyarrow 10 cannot read; {_ENCODING_REMEDY}"
    )


def _leaf_count(t: pa.DataType) -> int:
    """How many Parquet leaf columns an Arrow column of type `t` is stored as."""
    if pa.types.is_struct(t):
        return sum(_leaf_count(t[i].type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_count(t.value_type)
    return 1


def _footer_stats(
    metadata: pq.FileMetaData, schema: pa.Schema
) -> tuple[tuple[tuple[str, ColumnStats], ...], tuple[tuple[str, int], ...]]:
    """Footer statistics per flat top-level column, and each top-level column's uncompressed
    bytes over all row groups; checks every column chunk's encodings too (one walk over the
    chunks: footers of thousands of columns are long)."""
    # Leaf statistics describe rows only for flat top-level columns (names may contain dots).
    flat = {f.name for f in schema if not pa.types.is_nested(f.type)}
    # Leaves come in the schema's order, each top-level column's together.
    owners = [f.name for f in schema for _ in range(_leaf_count(f.type))]
    sizes = dict.fromkeys(schema.names, 0)
    stats: dict[str, ColumnStats] = {}
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            _check_encoding(column)
            if c < len(owners):
                sizes[owners[c]] += column.total_uncompressed_size
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
    return tuple(stats.items()), tuple(sizes.items())


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
    # hive key=value pairs along the path (or a table's log), unescaped text; None: a null value
    partitions: tuple[tuple[str, Optional[str]], ...]
    num_rows: int
    row_group_rows: tuple[int, ...]
    schema: pa.Schema
    size: int
    mtime_ns: int
    column_stats: tuple[tuple[str, ColumnStats], ...] = ()
    # Each column's uncompressed bytes over all row groups, from the footer: how wide a row is.
    column_bytes: tuple[tuple[str, int], ...] = ()


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

    def for_reading(self) -> Dataset:
        """This dataset without its footers' column statistics, which reading does not use:
        what a converting worker is sent (several copies of it live in each worker, and at
        thousands of columns those statistics are tens of MiB of Python objects)."""
        return dataclasses.replace(
            self, files=tuple(dataclasses.replace(f, column_stats=()) for f in self.files)
        )

    def column_stats(self) -> dict[str, ColumnStats]:
        """Footer statistics per top-level column over all files; a column missing from a file
        counts as that many nulls, a partition column only its null partitions' rows."""
        merged: dict[str, ColumnStats] = {}
        for info in self.files:
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
        return merged

    def source_metadata(self) -> SourceMetadata:
        values = {
            key: tuple(sorted({dict(f.partitions)[key] for f in self.files} - {None}))
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


# The folder name Hive, Spark, pyarrow, pandas, DuckDB and Polars all write for a null partition value.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def _partitions_of(relative: str) -> tuple[tuple[str, Optional[str]], ...]:
    """The hive `key=value` folders along a relative path, unescaped; None for a null value."""
    pairs = []
    for part in relative.split("/")[:-1]:
        if "=" in part:
            key, value = part.split("=", 1)
            try:  # strict: the default replaces invalid UTF-8 with U+FFFD, silently changing values
                key = urllib.parse.unquote(key, errors="strict")
                value = urllib.parse.unquote(value, errors="strict")
            except UnicodeDecodeError:
                raise InputError(
                    f"{relative}: partition folder {part!r} is not percent-encoded UTF-8"
                ) from None
            pairs.append((key, None if value == NULL_PARTITION else value))
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


# The footer key of the Arrow schema a writer stores beside the Parquet one, as Thrift's compact
# protocol encodes it: its length (12), then its bytes.
_ARROW_SCHEMA_KEY = b"\x0cARROW:schema"


def _footer_bytes(handle: pa.NativeFile) -> bytes:
    """The file's Thrift footer, as stored before its length and the closing magic."""
    size = handle.size()
    handle.seek(size - 8)
    length = int.from_bytes(handle.read(4), "little")
    handle.seek(size - 8 - length)
    return handle.read(length)


def _footer_without_arrow_schema(handle: pa.NativeFile) -> Optional[pq.FileMetaData]:
    """The file's footer with the stored Arrow schema hidden (renamed in place, same length),
    so pyarrow derives the types from the Parquet schema; None if there is none to hide."""
    raw = _footer_bytes(handle)
    at = raw.rfind(_ARROW_SCHEMA_KEY)
    if at < 0:
        return None
    hidden = raw[: at + 1] + b"ARROW:hidden" + raw[at + len(_ARROW_SCHEMA_KEY) :]
    blob = b"PAR1" + hidden + len(hidden).to_bytes(4, "little") + b"PAR1"
    return pq.read_metadata(pa.BufferReader(blob))


def _raise_newer_logical_types(handle: pa.NativeFile) -> None:
    """A ColumnError naming the columns whose Parquet logical type pyarrow 10 cannot read."""
    columns = footer.newer_logical_types(_footer_bytes(handle))
    if columns:
        name, logical = columns[0]
        kind, remedy = footer.NEWER_LOGICAL_TYPES[logical]
        raise ColumnError(
            f"column {name!r} has the Parquet logical type {kind}, newer than pyarrow 10 (which "
            f"this reader uses) reads; {remedy}"
        )


def open_parquet(handle: pa.NativeFile) -> pq.ParquetFile:
    """A Parquet file's reader. Newer writers store Arrow types pyarrow 10 does not know in the
    Arrow schema beside the Parquet one (string and binary views: pyarrow ≥ 16 and DataFusion,
    so delta-rs); their columns are then read by their Parquet types (views as strings and
    binaries: the same values)."""
    try:
        return pq.ParquetFile(handle)
    except (pa.ArrowException, OSError) as e:  # pyarrow raises footer errors as OSError too
        if "LogicalType that is not recognized" in str(e):
            _raise_newer_logical_types(handle)
        if "Unrecognized type" not in str(e):
            raise
        metadata = _footer_without_arrow_schema(handle)
        if metadata is None:
            raise
        return pq.ParquetFile(handle, metadata=metadata)


def _read_footer(filesystem: pafs.FileSystem, base: str, info: pafs.FileInfo) -> ParquetFileInfo:
    try:
        with filesystem.open_input_file(info.path) as handle:
            metadata = open_parquet(handle).metadata
            schema = metadata.schema.to_arrow_schema()
    except ColumnError as e:
        raise ColumnError(f"{info.path}: {e}") from None
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{info.path}: not a readable Parquet file ({e})") from None
    _check_unique_names(info.path, schema)
    try:
        stats, sizes = _footer_stats(metadata, schema)
    except ColumnError as e:
        raise ColumnError(f"{info.path}: {e}") from None
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
        column_stats=stats,
        column_bytes=sizes,
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


def _table_files(
    filesystem: pafs.FileSystem, base: str, snapshot: tables.Snapshot, patterns: Sequence[str]
) -> list[pafs.FileInfo]:
    """The snapshot's data files that match a pattern; each must exist."""
    chosen = [
        f.relative for f in snapshot.files if any(matches_pattern(f.relative, p) for p in patterns)
    ]
    infos = filesystem.get_file_info([posixpath.join(base, r) for r in chosen])
    missing = next((i.path for i in infos if i.type != pafs.FileType.File), None)
    if missing is not None:
        raise InputError(
            f"{missing}: listed by the {snapshot.format} table (version {snapshot.version}) "
            "but missing"
        )
    return sorted(infos, key=lambda i: i.path)


def _read_files(
    input_base: str, patterns: Sequence[str], table_version: Optional[int]
) -> tuple[pafs.FileSystem, str, list[ParquetFileInfo], Optional[tables.Snapshot]]:
    """The data files' footers: a table's snapshot's files, or the folder's Parquet files."""
    filesystem, base = resolve_filesystem(input_base)
    snapshot = tables.read_snapshot(filesystem, base, table_version)
    if snapshot is None:
        infos = list_files(filesystem, base, patterns)
    else:
        infos = _table_files(filesystem, base, snapshot, patterns)
    if not infos:
        raise InputError(f"no Parquet files under {input_base} match {list(patterns)}")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        files = list(pool.map(lambda i: _read_footer(filesystem, base, i), infos))
    if snapshot is not None:  # partition values as the table records them, not its folder names
        recorded = {f.relative: f.partitions for f in snapshot.files}
        files = [dataclasses.replace(f, partitions=recorded[f.relative]) for f in files]
    return filesystem, base, files, snapshot


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
) -> Dataset:
    """List, read footers (in parallel) and unify the schema of a partitioned Parquet dataset,
    or of a Delta Lake / Iceberg table's snapshot (its current one, or `table_version`)."""
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
    files = [
        dataclasses.replace(f, schema=pa.schema([x for x in f.schema if x.name not in excluded]))
        for f in files
    ]
    file_schema = unify_schemas(files, decimal_as)
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


def _check_partition_column(
    column: pa.Array, info: ParquetFileInfo, key: str, value: Optional[str], t: pa.DataType
) -> None:
    """A partition column a file also holds must hold its folder's value in every row."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    expected = partition_value(info, key, value, t)
    if value is None:
        differs = pc.is_valid(column)
    else:
        differs = pc.invert(pc.fill_null(pc.equal(column, expected[0]), False))
    if pc.any(differs).as_py():
        found = column.filter(differs)[0].as_py()
        raise ColumnError(
            f"{info.path}: column {key!r} holds {found!r} but the partition folder says "
            f"{key}={value!r}; the file and its folder must agree"
        )


def conform(batch: pa.RecordBatch, dataset: Dataset, info: ParquetFileInfo) -> pa.RecordBatch:
    """A file's batch with the dataset's columns: missing ones as nulls, partitions appended."""
    n = batch.num_rows
    partitions = dict(info.partitions)
    names = set(batch.schema.names)  # once: Schema.names builds a new list on every access
    arrays = []
    for field in dataset.schema:
        if field.name in names:
            column = batch.column(batch.schema.get_field_index(field.name))
            if field.name in partitions:
                _check_partition_column(
                    column, info, field.name, partitions[field.name], field.type
                )
            arrays.append(column)
        elif field.name in partitions:
            value = partition_value(info, field.name, partitions[field.name], field.type)
            arrays.append(value.take(pa.array(np.zeros(n, dtype=np.int32))))
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


def row_bytes(info: ParquetFileInfo) -> float:
    """A row's uncompressed bytes in `info`'s columns (those read), from its footer: dictionary
    pages counted once, so decoded rows are somewhat wider; 1 for a file without rows."""
    wanted = set(info.schema.names)
    total = sum(size for name, size in info.column_bytes if name in wanted)
    return max(1.0, total / info.num_rows) if info.num_rows else 1.0


def rows_for_bytes(info: ParquetFileInfo, budget: int, most: int) -> int:
    """Rows of `info` per batch: at most `most`, and about `budget` bytes of them (at least 1)."""
    return max(1, min(most, int(budget // row_bytes(info))))


# pyarrow's and Spark's default data page size.
_PAGE_BYTES = 1 << 20
# Row groups above this many bytes whose chunks are about a page are read whole (below it the
# streaming reader's memory is small either way, and it is no slower).
_WHOLE_ROW_GROUP_BYTES = 64 << 20
# Columns decoded together when a row group is read whole.
_COLUMN_SLICE = 100


def _reads_whole_row_groups(info: ParquetFileInfo, columns: Sequence[str]) -> bool:
    """True for large row groups whose chunks of `columns` average at most a page (wide
    tables): pyarrow's streaming reader then holds every column's whole chunk at once,
    compressed, decompressed and its dictionary decoded, about twice the decoded row group.
    Those row groups are read whole instead, a slice of columns at a time."""
    if not info.row_group_rows or not columns:
        return False
    wanted = set(columns)
    group = sum(size for name, size in info.column_bytes if name in wanted) / len(
        info.row_group_rows
    )
    return group > _WHOLE_ROW_GROUP_BYTES and group <= len(columns) * _PAGE_BYTES


def _whole_row_groups(
    reader: pq.ParquetFile,
    row_groups: Sequence[int],
    columns: Sequence[str],
    batch_size: int,
    narrowed: set[str],
) -> Iterator[pa.RecordBatch]:
    """`row_groups` decoded one at a time, `_COLUMN_SLICE` columns at a time, as batches; the
    columns named in `narrowed` held narrowed (`_held_narrowed`) as soon as they are decoded."""
    for group in row_groups:
        arrays = [
            _held_narrowed(column) if name in narrowed else column
            for start in range(0, len(columns), _COLUMN_SLICE)
            for name, column in zip(
                columns[start : start + _COLUMN_SLICE],
                reader.read_row_group(
                    group, columns=columns[start : start + _COLUMN_SLICE], use_threads=False
                ).columns,
                strict=True,
            )
        ]
        table = pa.Table.from_arrays(arrays, names=list(columns))
        del arrays
        yield from table.to_batches(max_chunksize=batch_size)
        del table  # before the next row group is decoded


def _narrowed(column):
    """A float64 column as float32 (rounded to nearest, out of range to infinity, as numpy casts);
    other columns as they are."""
    if column.type != pa.float64():
        return column
    return column.cast(pa.float32(), safe=False)


def _held_narrowed(column):
    """`_narrowed`, and an int64 column as int32 when every value of it fits (the same values in
    half the bytes, for a whole row group held while it is encoded)."""
    if column.type != pa.int64():
        return _narrowed(column)
    try:
        return column.cast(pa.int32())
    except pa.ArrowInvalid:  # a value outside int32
        return column


def read_batches(
    dataset: Dataset,
    info: ParquetFileInfo,
    row_groups: Sequence[int],
    batch_size: int,
    string_dictionaries: bool = False,
    narrow: bool = False,
) -> Iterator[pa.RecordBatch]:
    """A file's row groups as conformed batches of at most `batch_size` rows (bounded memory).
    With `string_dictionaries`, string columns stored as dictionary pages (those of the first
    row group) come as dictionary arrays: their values are not decoded nor hashed again. With
    `narrow`, float64 columns but partition columns (checked against the folder's
    values as read) come as float32, what a tf.Example's FloatList holds, and int64 columns of a
    wide table's row groups (read whole) come as int32 where every value of the row group fits:
    a whole row group is then held at half its doubles' and small integers' bytes."""
    wanted = set(dataset.schema.names)  # a set: quadratic in columns otherwise
    columns = [name for name in info.schema.names if name in wanted]
    narrowed = set(columns) - set(dict(info.partitions)) if narrow else set()
    try:
        with dataset.filesystem.open_input_file(info.path) as handle:
            reader = open_parquet(handle)
            if string_dictionaries and row_groups:
                dictionaries = _dictionary_columns(reader.metadata, row_groups[0], columns)
                reader = pq.ParquetFile(
                    handle, metadata=reader.metadata, read_dictionary=dictionaries
                )
            if _reads_whole_row_groups(info, columns):
                batches = _whole_row_groups(reader, row_groups, columns, batch_size, narrowed)
            else:
                batches = reader.iter_batches(
                    batch_size=batch_size,
                    row_groups=list(row_groups),
                    columns=columns,
                    use_threads=False,
                )
                if narrowed:
                    batches = (
                        pa.RecordBatch.from_arrays(
                            [
                                _narrowed(c) if name in narrowed else c
                                for name, c in zip(b.schema.names, b.columns, strict=True)
                            ],
                            names=b.schema.names,
                        )
                        for b in batches
                    )
            for batch in batches:
                yield conform(batch, dataset, info)
    except (pa.ArrowException, OSError) as e:
        column = _failing_column(dataset, info, row_groups, columns)
        where = "" if column is None else f" column {column!r}:"
        raise InputError(f"{info.path}:{where} reading failed ({e})") from None


def _failing_column(
    dataset: Dataset, info: ParquetFileInfo, row_groups: Sequence[int], columns: Sequence[str]
) -> Optional[str]:
    """After a failed read: the first column that fails alone (None if none does, e.g. the file
    itself is damaged), so the error names it."""
    for name in columns:
        try:
            with dataset.filesystem.open_input_file(info.path) as handle:
                open_parquet(handle).read_row_groups(list(row_groups), columns=[name])
        except (pa.ArrowException, OSError):
            return name
    return None

"""Partitioned Parquet datasets: listing, hive partitions, footers, schema unification, batches.

Everything here reads Parquet *metadata* up front (O(files), no pass over rows), so a conversion
knows its files, row counts, unified schema and partition types before it writes anything, and
bad input fails before a single output byte exists.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import fnmatch
import hashlib
import posixpath
import re
import urllib.parse
from typing import Iterator, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from tfx_tabular.schemas.mapping import Feature, UnsupportedColumnError, features_of

_INTEGER = re.compile(r"^-?\d{1,18}$")


class InputError(ValueError):
    """Input that cannot be converted; the message names the file (and column)."""


@dataclasses.dataclass(frozen=True)
class ParquetFileInfo:
    """One data file, described from its footer."""

    path: str  # filesystem path, as pyarrow.fs takes it
    relative: str  # relative to the input base, '/'-separated
    partitions: tuple[tuple[str, str], ...]  # hive key=value pairs along the path, raw text
    num_rows: int
    row_group_rows: tuple[int, ...]
    schema: pa.Schema
    size: int
    mtime_ns: int


@dataclasses.dataclass(frozen=True)
class Dataset:
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

    def fingerprint(self) -> str:
        """Changes when any file is added, removed, resized or rewritten."""
        digest = hashlib.sha256()
        for f in self.files:
            digest.update(f"{f.relative}\0{f.size}\0{f.mtime_ns}\n".encode())
        return digest.hexdigest()


def resolve_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" in uri:
        return pafs.FileSystem.from_uri(uri)
    return pafs.LocalFileSystem(), posixpath.abspath(uri)


def _is_hidden(name: str) -> bool:
    # Spark and Hive leave _SUCCESS, _metadata, _committed_*, .crc files beside the data.
    return name.startswith(("_", "."))


def _partitions_of(relative: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for part in relative.split("/")[:-1]:
        if "=" in part:
            key, value = part.split("=", 1)
            pairs.append((urllib.parse.unquote(key), urllib.parse.unquote(value)))
    return tuple(pairs)


def matches_pattern(relative: str, pattern: str) -> bool:
    """A relative file path matches a glob if it, or one of its folders, does."""
    parts = relative.split("/")
    return any(fnmatch.fnmatchcase("/".join(parts[: i + 1]), pattern) for i in range(len(parts)))


def list_files(filesystem: pafs.FileSystem, base: str,
               patterns: Sequence[str] = ("*",)) -> list[pafs.FileInfo]:
    """Data files under `base` whose relative path, or one of its folders, matches a pattern."""
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    except FileNotFoundError:
        raise InputError(f"input folder {base} does not exist") from None
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
    return sorted(chosen, key=lambda i: i.path)


def _read_footer(filesystem: pafs.FileSystem, base: str, info: pafs.FileInfo) -> ParquetFileInfo:
    try:
        with filesystem.open_input_file(info.path) as handle:
            metadata = pq.ParquetFile(handle).metadata
            schema = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{info.path}: not a readable Parquet file ({e})") from None
    relative = posixpath.relpath(info.path, base)
    return ParquetFileInfo(
        path=info.path, relative=relative, partitions=_partitions_of(relative),
        num_rows=metadata.num_rows,
        row_group_rows=tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)),
        schema=schema.remove_metadata(), size=info.size, mtime_ns=info.mtime_ns or 0)


def _signature(field: pa.Field, decimal_as: str):
    return [(f.name, f.kind, f.list_sizes, f.unit) for f in
            features_of(pa.schema([field]), decimal_as)]


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
    for info in files:
        for field in info.schema:
            try:
                signature = _signature(field, decimal_as)
            except UnsupportedColumnError as e:
                raise InputError(f"{info.path}: {e}") from None
            if field.name not in fields:
                fields[field.name] = (field, info)
                continue
            first, first_info = fields[field.name]
            if signature != _signature(first, decimal_as) and not (
                    pa.types.is_null(first.type) or pa.types.is_null(field.type)):
                raise InputError(
                    f"column {field.name!r} is {first.type} in {first_info.path} but {field.type} in "
                    f"{info.path}: these types do not convert to the same tf.Example feature")
            fields[field.name] = (first.with_type(_wider(first.type, field.type))
                                  .with_nullable(first.nullable or field.nullable), first_info)
    for name, (field, first_info) in fields.items():
        for info in files:
            if info.schema.get_field_index(name) < 0 and not field.nullable:
                raise InputError(f"column {name!r} is required (not nullable) in {first_info.path} "
                                 f"but missing from {info.path}")
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
            raise ValueError(f"partition type for {key!r} must be 'int' or 'string', not {wanted!r}")
        if wanted is None:
            wanted = "int" if all(_INTEGER.match(v) for v in values) else "string"
        if wanted == "int":
            bad = next((v for v in values if not _INTEGER.match(v)), None)
            if bad is not None:
                raise InputError(f"partition {key}={bad!r} is not an integer, but {key!r} was "
                                 "declared 'int'")
        fields.append(pa.field(key, pa.int64() if wanted == "int" else pa.string()))
    for info in files:
        present = [k for k, _ in info.partitions]
        if sorted(present) != sorted(keys):
            raise InputError(f"{info.path}: partition folders {present} differ from the "
                             f"dataset's {sorted(keys)}")
    return fields


def open_dataset(input_base: str, patterns: Sequence[str] = ("*",), *,
                 columns: Optional[Sequence[str]] = None,
                 exclude_columns: Sequence[str] = (),
                 partition_filter: Optional[Mapping[str, Sequence[str]]] = None,
                 partition_types: Optional[Mapping[str, str]] = None,
                 decimal_as: str = "float") -> Dataset:
    """List, read footers (in parallel) and unify the schema of a partitioned Parquet dataset."""
    filesystem, base = resolve_filesystem(input_base)
    infos = list_files(filesystem, base, patterns)
    if not infos:
        raise InputError(f"no Parquet files under {input_base} match {list(patterns)}")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        files = list(pool.map(lambda i: _read_footer(filesystem, base, i), infos))
    if partition_filter:
        files = [f for f in files if all(dict(f.partitions).get(k) in set(map(str, v))
                                          for k, v in partition_filter.items())]
        if not files:
            raise InputError(f"no files under {input_base} pass the partition filter "
                             f"{dict(partition_filter)}")
    excluded = set(exclude_columns)
    if columns is not None:
        excluded |= {name for f in files for name in f.schema.names if name not in set(columns)}
    files = [dataclasses.replace(f, schema=pa.schema([x for x in f.schema if x.name not in excluded]))
             for f in files]
    file_schema = unify_schemas(files, decimal_as)
    partition_fields = [p for p in _partition_schema(files, partition_types or {})
                        if p.name not in excluded]
    for field in partition_fields:
        if field.name in file_schema.names:
            owner = next(f for f in files if field.name in f.schema.names)
            raise InputError(f"{owner.path}: column {field.name!r} is also a partition key in the "
                             "folder names; exclude the column or rename the partition")
    schema = pa.schema(list(file_schema) + partition_fields)
    if columns is not None:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise InputError(f"columns {missing} are in no file under {input_base}")
    try:
        features_of(schema, decimal_as)
    except ValueError as e:
        raise InputError(f"{input_base}: {e}") from None
    return Dataset(filesystem, base, tuple(files), schema,
                   tuple(p.name for p in partition_fields), decimal_as)


def conform(batch: pa.RecordBatch, dataset: Dataset, info: ParquetFileInfo) -> pa.RecordBatch:
    """A file's batch with the dataset's columns: missing ones as nulls, partitions appended."""
    n = batch.num_rows
    partitions = dict(info.partitions)
    arrays = []
    for field in dataset.schema:
        if field.name in dataset.partition_columns:
            value = partitions[field.name]
            scalar = pa.array([int(value) if pa.types.is_integer(field.type) else value], field.type)
            arrays.append(scalar.take(pa.array(np.zeros(n, dtype=np.int32))))
        elif field.name in batch.schema.names:
            arrays.append(batch.column(batch.schema.get_field_index(field.name)))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(
        [pa.field(f.name, a.type) for f, a in zip(dataset.schema, arrays)]))


def read_batches(dataset: Dataset, info: ParquetFileInfo, row_groups: Sequence[int],
                 batch_size: int) -> Iterator[pa.RecordBatch]:
    """A file's row groups as conformed batches of at most `batch_size` rows (bounded memory)."""
    columns = [name for name in info.schema.names if name in dataset.schema.names]
    try:
        with dataset.filesystem.open_input_file(info.path) as handle:
            reader = pq.ParquetFile(handle)
            for batch in reader.iter_batches(batch_size=batch_size, row_groups=list(row_groups),
                                             columns=columns, use_threads=False):
                yield conform(batch, dataset, info)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{info.path}: reading failed ({e})") from None

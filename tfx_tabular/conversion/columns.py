"""The column names of a source, from its footers alone, and the check that the names a command
line gives (`--label`, `--exclude-columns`, `--split-by-partition`, ...) are among them, with a "did you
mean" for near misses.

It reads each Parquet file's footer schema (in parallel), or the source schema an Examples folder
ParquetExampleGen wrote keeps: a fraction of a second, so a misspelt name fails before any
conversion starts rather than after it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import difflib
import posixpath
import urllib.parse
from typing import Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.fs as pafs

from tfx_tabular.conversion.source_metadata import is_examples_folder, read_source_metadata
from tfx_tabular.source import tables
from tfx_tabular.source.errors import ColumnError, InputError
from tfx_tabular.source.files import open_parquet
from tfx_tabular.source.filesystems import resolve_filesystem
from tfx_tabular.source.listing import list_files
from tfx_tabular.source.mapping import features_of

# How many names a hint lists before "and N more".
LISTED_NAMES = 12


class UnknownColumnError(InputError):
    """A name given on the command line that is no column (or partition key) of the source;
    `hint` says what the flag takes."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


@dataclasses.dataclass(frozen=True)
class SourceNames:
    """A source's names: its columns in file order then its partition keys, the feature names
    struct columns add (`parent.child`), and the partition keys alone."""

    columns: tuple[str, ...]
    features: tuple[str, ...]
    partition_keys: tuple[str, ...]


def _footer_schema(filesystem: pafs.FileSystem, path: str) -> pa.Schema:
    """A file's schema as the conversion reads it (`open_parquet`)."""
    try:
        with filesystem.open_input_file(path) as handle:
            return open_parquet(handle).schema_arrow
    except ColumnError as e:
        raise ColumnError(f"{path}: {e}") from None
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable Parquet file ({e})") from None


def _struct_features(fields: Sequence[pa.Field]) -> list[str]:
    """The leaf feature names of struct columns; a column without a tf.Example representation
    adds none (the conversion names it in its own error)."""
    names = []
    for field in fields:
        if pa.types.is_struct(field.type):
            try:
                names += [f.name for f in features_of(pa.schema([field]))]
            except ValueError:
                continue
    return names


def _names_of(fields: Sequence[pa.Field], partition_keys: Sequence[str]) -> SourceNames:
    columns = list(dict.fromkeys([f.name for f in fields] + list(partition_keys)))
    return SourceNames(
        tuple(columns), tuple(dict.fromkeys(_struct_features(fields))), tuple(partition_keys)
    )


def _partition_keys(relative: str) -> list[str]:
    """The keys of a file's hive folders (`day=2024-01-01/part-0.parquet` → day); the conversion
    checks their values."""
    return [
        urllib.parse.unquote(part.split("=", 1)[0])
        for part in relative.split("/")[:-1]
        if "=" in part
    ]


def _data_files(filesystem: pafs.FileSystem, base: str, uri: str) -> tuple[list, list, tuple]:
    """(the data files' paths, the partition keys, the columns a table's snapshot has or None):
    a Delta Lake or Iceberg table's current snapshot, else the folder's Parquet files."""
    snapshot = tables.read_snapshot(filesystem, base)
    if snapshot is None:
        relatives = [posixpath.relpath(i.path, base) for i in list_files(filesystem, base)]
        if not relatives:
            raise InputError(f"no Parquet files under {uri}")
        keys = [key for relative in relatives for key in _partition_keys(relative)]
        return [posixpath.join(base, r) for r in relatives], keys, None
    keys = [key for file in snapshot.files for key, _ in file.partitions]
    keys += list(snapshot.partition_types)
    return [posixpath.join(base, f.relative) for f in snapshot.files], keys, snapshot.columns


def source_names(uri: str) -> SourceNames:
    """The names of a source's columns (over every data file's footer) and partition keys: a
    Parquet folder, a Delta Lake or Iceberg table, or the source an Examples folder
    ParquetExampleGen wrote."""
    if is_examples_folder(uri):
        metadata = read_source_metadata(uri)
        return _names_of(list(metadata.schema), metadata.partition_columns)
    filesystem, base = resolve_filesystem(uri)
    paths, keys, table_columns = _data_files(filesystem, base, uri)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        schemas = list(pool.map(lambda path: _footer_schema(filesystem, path), paths))
    fields = list({f.name: f for schema in schemas for f in schema}.values())
    if table_columns is not None:  # the files' columns the table dropped are not its
        fields = [f for f in fields if f.name in table_columns]
    return _names_of(fields, list(dict.fromkeys(keys)))


def _near(name: str, choices: Sequence[str]) -> list[str]:
    """The choices closest to `name`, ignoring case: a misspelling or a wrong case."""
    lowered = {choice.lower(): choice for choice in choices}
    return [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=3)]


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:LISTED_NAMES])
    more = len(names) - LISTED_NAMES
    return shown + (f" and {more} more" if more > 0 else "")


def _unknown(flag: str, name: str, uri: str, choices: Sequence[str], what: str):
    near = _near(name, choices)
    guess = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
    if choices:
        hint = f"{flag} takes a {what} of {uri}: {_listing(choices)}"
    else:
        hint = f"{uri} has no {what}s (hive folders KEY=VALUE); leave {flag} out"
    return UnknownColumnError(f"{flag} {name!r} is not a {what} of {uri}{guess}", hint)


def check_names(
    uri: str,
    names: SourceNames,
    column_flags: Mapping[str, Sequence[str]],
    partition_flags: Optional[Mapping[str, Sequence[str]]] = None,
) -> None:
    """Every name each flag gives is a column (or a struct's feature) of the source, and every
    name a partition flag gives is a partition key; else UnknownColumnError naming the flag, the
    name and the closest names."""
    known = set(names.columns) | set(names.features)
    for flag, given in column_flags.items():
        for name in given:
            if name not in known:
                raise _unknown(flag, name, uri, names.columns, "column")
    for flag, given in (partition_flags or {}).items():
        for name in given:
            if name not in names.partition_keys:
                raise _unknown(flag, name, uri, names.partition_keys, "partition key")

"""One Parquet file as its footer describes it (`ParquetFileInfo`: rows, row groups, schema,
footer statistics, column sizes), read without a pass over its rows, and opened despite what
pyarrow 10 cannot read in newer writers' footers (`open_parquet`)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import posixpath
from typing import Optional, Union

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from tfx_tabular.source import footer
from tfx_tabular.source.errors import ColumnError, InputError
from tfx_tabular.source.listing import partitions_of


@dataclasses.dataclass(frozen=True)
class ColumnStats:
    """Footer statistics of a top-level non-nested column, over a file or a dataset.

    `null_count` None: the footers say nothing of the column somewhere (a row group written
    without statistics, or numbers with values but no min/max): unknown, not "has nulls".
    Otherwise min/max (numbers and bools only) are over the values there are; None when there
    are none (every row null) or the type has none.
    """

    null_count: Optional[int]
    min: Optional[Union[int, float, bool]] = None
    max: Optional[Union[int, float, bool]] = None

    @property
    def known(self) -> bool:
        return self.null_count is not None

    def merge(self, other: ColumnStats) -> ColumnStats:
        if not (self.known and other.known):
            return ColumnStats(None)
        # A side without min/max holds no values (an all-null row group, a file without the
        # column): the other side's extremes are the column's.
        lows = [v for v in (self.min, other.min) if v is not None]
        highs = [v for v in (self.max, other.max) if v is not None]
        return ColumnStats(
            self.null_count + other.null_count,
            min(lows) if lows else None,
            max(highs) if highs else None,
        )


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


# The physical types whose footer min/max are numbers (with logical type none or INT).
_NUMERIC = ("BOOLEAN", "INT32", "INT64", "FLOAT", "DOUBLE")


def _chunk_stats(column: pq.ColumnChunkMetaData, rows: int) -> ColumnStats:
    """A flat column chunk's statistics; unknown where the writer left out what inference
    reads (pyarrow's write_statistics=False; fastparquet writes no min/max)."""
    st = column.statistics
    if st is None or not st.has_null_count:
        return ColumnStats(None)
    numeric = column.physical_type in _NUMERIC and st.logical_type.type in ("NONE", "INT")
    if not numeric:
        return ColumnStats(st.null_count)
    if not st.has_min_max:
        # No values, or values whose extremes the writer did not record.
        return ColumnStats(st.null_count) if st.null_count >= rows else ColumnStats(None)
    return ColumnStats(st.null_count, st.min, st.max)


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
            current = _chunk_stats(column, group.num_rows)
            name = column.path_in_schema
            stats[name] = stats[name].merge(current) if name in stats else current
    return tuple(stats.items()), tuple(sizes.items())


def _unpickle(cls, schema: bytes, state: bytes):
    return cls(schema=pa.ipc.read_schema(pa.py_buffer(schema)), **pickle.loads(state))


class QuickPickle:
    """Beam pickles the conversion's DoFn, and with it every file's schema and footer statistics,
    with dill several times a run: slow for wide files (thousands of columns), where Arrow IPC
    and the C pickler are orders of magnitude faster."""

    def __reduce__(self):
        state = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "schema"
        }
        return _unpickle, (type(self), self.schema.serialize().to_pybytes(), pickle.dumps(state))


@dataclasses.dataclass(frozen=True)
class ParquetFileInfo(QuickPickle):
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
    # The columns pandas stored its index in (its b"pandas" metadata), which it reads back as
    # the index, not as data.
    index_columns: tuple[str, ...] = ()


def _pandas_index_columns(schema: pa.Schema) -> tuple[str, ...]:
    """The index columns pandas' metadata lists: `__index_level_0__` for an unnamed index, the
    name of a named one. A RangeIndex is stored as metadata only (a dict here), no column."""
    try:
        listed = json.loads((schema.metadata or {}).get(b"pandas", b"{}")).get("index_columns", [])
    except (ValueError, AttributeError):  # metadata another writer filled otherwise
        return ()
    names = set(schema.names)
    return tuple(c for c in listed if isinstance(c, str) and c in names)


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


def read_footer(filesystem: pafs.FileSystem, base: str, info: pafs.FileInfo) -> ParquetFileInfo:
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
        partitions=partitions_of(relative),
        num_rows=metadata.num_rows,
        row_group_rows=tuple(
            metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)
        ),
        schema=schema.remove_metadata(),
        size=info.size,
        mtime_ns=info.mtime_ns or 0,
        column_stats=stats,
        column_bytes=sizes,
        index_columns=_pandas_index_columns(schema),
    )

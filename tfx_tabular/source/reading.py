"""Reading a dataset's files as batches conformed to its schema (missing columns as nulls,
partition columns appended and checked), in bounded memory: row groups streamed, or a wide
table's read whole a slice of columns at a time; strings kept as dictionary pages and wide
numbers narrowed where asked."""

from __future__ import annotations

from typing import Iterator, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tfx_tabular.source.dataset import Dataset, partition_value
from tfx_tabular.source.errors import ColumnError, InputError
from tfx_tabular.source.files import ParquetFileInfo, open_parquet


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
        raise _read_error(dataset, info, row_groups, columns, e) from None


# pyarrow 10 writes a fixed_size_list column with null rows to Parquet but cannot read it back.
_FIXED_SIZE_NULLS = "Expected all lists to be of size"


def _read_error(
    dataset: Dataset,
    info: ParquetFileInfo,
    row_groups: Sequence[int],
    columns: Sequence[str],
    error: Exception,
) -> InputError:
    """The error of a failed read, in one line naming the file and the column that fails."""
    reason = " ".join(str(error).split())  # Arrow's messages may span lines (Thrift's do)
    column = _failing_column(dataset, info, row_groups, columns)
    if column is None:
        return InputError(f"{info.path}: reading failed ({reason})")
    if _FIXED_SIZE_NULLS in reason and _has_fixed_size_list(info.schema.field(column).type):
        return ColumnError(
            f"{info.path}: column {column!r}: a fixed_size_list column with null rows, which "
            "pyarrow 10 cannot read back from Parquet; fill the nulls or write a variable-size "
            f"list ({reason})"
        )
    return InputError(f"{info.path}: column {column!r}: reading failed ({reason})")


def _has_fixed_size_list(t: pa.DataType) -> bool:
    if pa.types.is_fixed_size_list(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_fixed_size_list(t.value_type)
    if pa.types.is_struct(t):
        return any(_has_fixed_size_list(t.field(i).type) for i in range(t.num_fields))
    return False


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

"""Footer statistics completed by reading the columns whose footers say nothing
(`read_column_stats`): footer statistics are an optimisation, and files written without
them (pyarrow's write_statistics=False, fastparquet's missing min/max) must still give every
column its presence and domain. Only the affected columns of the affected files are read, one
row group at a time."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging

import pyarrow as pa
import pyarrow.compute as pc

from tfx_tabular.source.dataset import Dataset
from tfx_tabular.source.files import ColumnStats, ParquetFileInfo, open_parquet

log = logging.getLogger(__name__)


def _unknown_columns(info: ParquetFileInfo) -> list[str]:
    """The flat columns of a file with rows whose footer statistics say nothing."""
    if not info.num_rows:
        return []
    stats = dict(info.column_stats)
    return [
        field.name
        for field in info.schema
        if not pa.types.is_nested(field.type) and not stats.get(field.name, ColumnStats(None)).known
    ]


def _has_extremes(t: pa.DataType) -> bool:
    """The types whose footer min/max schema inference reads (`files._chunk_stats`)."""
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _stats_of(column: pa.ChunkedArray) -> ColumnStats:
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not _has_extremes(column.type) or column.null_count == len(column):
        return ColumnStats(column.null_count)
    extremes = pc.min_max(column)
    return ColumnStats(column.null_count, extremes["min"].as_py(), extremes["max"].as_py())


def _read_stats(dataset: Dataset, info: ParquetFileInfo, columns: list[str]) -> ParquetFileInfo:
    merged: dict[str, ColumnStats] = {}
    with dataset.filesystem.open_input_file(info.path) as handle:
        parquet = open_parquet(handle)
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group, columns=columns)
            for name, column in zip(table.column_names, table.columns, strict=True):
                current = _stats_of(column)
                merged[name] = merged[name].merge(current) if name in merged else current
    stats = {**dict(info.column_stats), **merged}
    return dataclasses.replace(info, column_stats=tuple(stats.items()))


def read_column_stats(dataset: Dataset) -> tuple[Dataset, tuple[str, ...]]:
    """`dataset` with the statistics its footers lack read from the columns themselves, and
    the names of the columns read."""
    wanted = {info.path: _unknown_columns(info) for info in dataset.files}
    to_read = [info for info in dataset.files if wanted[info.path]]
    columns = tuple(sorted({name for info in to_read for name in wanted[info.path]}))
    if not to_read:
        return dataset, columns
    log.info(
        "footers without statistics for %d column(s) in %d file(s), e.g. %r in %s: reading them",
        len(columns),
        len(to_read),
        columns[0],
        to_read[0].path,
    )
    # A few files at a time: each read holds one row group of its columns.
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        read = list(pool.map(lambda i: _read_stats(dataset, i, wanted[i.path]), to_read))
    by_path = {info.path: info for info in read}
    files = tuple(by_path.get(info.path, info) for info in dataset.files)
    return dataclasses.replace(dataset, files=files), columns

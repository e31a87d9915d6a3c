"""The Examples artifact's side file: what ParquetExampleGen stores of its source beside the
Split-* folders (`SourceMetadata`, as SOURCE_METADATA_FILE), so that schema inference and
training need no access to the Parquet files."""

from __future__ import annotations

import dataclasses
import json
import posixpath
from typing import Mapping, Sequence

import pyarrow as pa
import pyarrow.fs as pafs

from tfx_tabular.source.dataset import Dataset
from tfx_tabular.source.errors import InputError
from tfx_tabular.source.files import ColumnStats
from tfx_tabular.source.filesystems import resolve_filesystem

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
    def of(cls, dataset: Dataset) -> SourceMetadata:
        """What the side file keeps of `dataset`."""
        return cls(
            dataset.schema,
            dataset.column_stats(),
            dataset.num_rows,
            dataset.partition_columns,
            dataset.decimal_as,
            dataset.partition_values(),
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

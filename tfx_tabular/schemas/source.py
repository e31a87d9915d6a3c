"""The schema of a source, the one way the CLI and ParquetSchemaGen make it: from a Parquet folder
or an Examples folder ParquetExampleGen wrote (local or object store), then the constraints the
example statistics of every split prove (optional; or sample statistics, TFDV over a sample),
then a curated overlay (optional). Where the footers say nothing of a column, the example
statistics, or else a read of that column, describe it instead."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import pyarrow as pa
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.conversion.source_metadata import (
    SourceMetadata,
    is_examples_folder,
    read_source_metadata,
)
from tfx_tabular.schemas.infer import SchemaError, infer_schema, overlay
from tfx_tabular.schemas.sample_statistics import (
    DEFAULT_MAX_VOCABULARY_SIZE,
    DEFAULT_SAMPLE_ROWS,
    SampleStatisticsReport,
    sample_statistics_overlay,
)
from tfx_tabular.source.column_reads import read_column_stats
from tfx_tabular.source.dataset import Dataset, open_dataset
from tfx_tabular.source.files import ColumnStats


@dataclasses.dataclass
class InferredSchema:
    schema: schema_pb2.Schema
    metadata: SourceMetadata
    from_examples: bool
    num_files: int  # Parquet files whose footers were read (0 for an Examples folder)
    # Columns read because some footer says nothing of them (files written without statistics)
    read_columns: tuple[str, ...] = ()
    sample_statistics: Optional[SampleStatisticsReport] = None


def _example_files(examples_uri: str) -> list[str]:
    import tensorflow as tf

    return sorted(tf.io.gfile.glob(f"{examples_uri.rstrip('/')}/Split-*/*"))


def _completed(metadata: SourceMetadata, known: Mapping[str, ColumnStats]) -> SourceMetadata:
    """`metadata` with the flat columns its footers say nothing of described by `known`."""
    flat = _flat_names(metadata)
    stats = {
        name: known[name] if not current.known and name in flat and name in known else current
        for name, current in metadata.column_stats.items()
    }
    return dataclasses.replace(metadata, column_stats=stats)


def _source_metadata(
    uri: str, from_examples: bool, exclude_columns: Sequence[str], keep_index_columns: bool, splits
) -> tuple[SourceMetadata, Optional[Dataset], tuple[str, ...]]:
    """The source's metadata, where its footers say nothing completed by the example
    statistics `splits` or, without them, by a read of those columns of a Parquet folder
    (which are returned too)."""
    dataset, read = None, ()
    if from_examples:
        metadata = read_source_metadata(uri).without(exclude_columns)
    else:
        dataset = open_dataset(
            uri, exclude_columns=exclude_columns, keep_index_columns=keep_index_columns
        )
        if splits is None:
            dataset, read = read_column_stats(dataset)
        metadata = SourceMetadata.of(dataset)
    if splits is not None:
        from tfx_tabular.schemas.example_statistics import column_stats_of

        metadata = _completed(metadata, column_stats_of(splits))
    return metadata, dataset, read


def _check_label_known(metadata: SourceMetadata, label: Optional[str], uri: str) -> None:
    """A label whose nulls and values are unknown would get a task by chance (an integer
    without a domain trains as regression): refused, naming what would tell."""
    stats = metadata.column_stats.get(label) if label is not None else None
    if stats is not None and not stats.known and label in _flat_names(metadata):
        raise SchemaError(
            f"label {label!r}: the footers under {uri} hold no statistics for it (written "
            "without them), so its nulls and values, and with them its task, are unknown; give "
            "the example statistics of these Examples (--example-statistics DIR) or infer "
            "from the Parquet folder"
        )


def _flat_names(metadata: SourceMetadata) -> set[str]:
    return {f.name for f in metadata.schema if not pa.types.is_nested(f.type)}


def schema_of(
    uri: str,
    *,
    label: Optional[str] = None,
    exclude_columns: Sequence[str] = (),
    sample_statistics: bool = False,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    max_vocabulary_size: int = DEFAULT_MAX_VOCABULARY_SIZE,
    curated_schema: Optional[str] = None,
    beam_pipeline_args: Sequence[str] = (),
    examples: Optional[bool] = None,
    example_statistics: Optional[str] = None,
    keep_index_columns: bool = False,
) -> InferredSchema:
    """Infer the schema of `uri`: an Examples folder ParquetExampleGen wrote (`examples=True`),
    a Parquet folder (False), or whichever it is (None). `exclude_columns` are left out, and
    pandas' index columns of a Parquet folder unless `keep_index_columns`.
    `example_statistics`: an ExampleStatistics folder (`Split-<name>/FeatureStats.pb`) of the
    same data, whose constraints hold on every split (`schemas.example_statistics`).
    `sample_statistics`: TFDV over `sample_rows` sampled rows (`schemas.sample_statistics`).
    Keywords are named as ParquetSchemaGen's parameters."""
    if sample_statistics and example_statistics:
        raise SchemaError(
            "give either example statistics or sample statistics, not both: "
            "the example statistics already cover every row"
        )
    from tfx_tabular import schemas

    splits = None
    if example_statistics:
        # Imported here: it loads the conversion's statistics package (tfx_bsl, numba), which
        # footer-only inference never needs.
        from tfx_tabular.schemas.example_statistics import load_example_statistics

        splits = load_example_statistics(example_statistics)
    from_examples = is_examples_folder(uri) if examples is None else examples
    metadata, dataset, read = _source_metadata(
        uri, from_examples, exclude_columns, bool(keep_index_columns), splits
    )
    if not curated_schema:
        _check_label_known(metadata, label, uri)
    result = InferredSchema(
        infer_schema(metadata, label=label),
        metadata,
        from_examples,
        0 if dataset is None else len(dataset.files),
        read,
    )
    if splits is not None:
        from tfx_tabular.schemas.example_statistics import apply_example_statistics

        result.schema = apply_example_statistics(result.schema, splits, max_vocabulary_size)
    if sample_statistics:
        sample_source = _example_files(uri) if from_examples else dataset
        result.schema, result.sample_statistics = sample_statistics_overlay(
            sample_source, sample_rows, max_vocabulary_size, beam_pipeline_args, base=result.schema
        )
    if curated_schema:
        result.schema = overlay(result.schema, schemas.load_schema(curated_schema))
    return result

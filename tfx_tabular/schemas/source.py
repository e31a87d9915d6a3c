"""The schema of a source, the one way the CLI and ParquetSchemaGen make it: from a Parquet folder
or an Examples folder ParquetExampleGen wrote (local or object store), then the constraints the
example statistics of every split prove (optional; or sample statistics, TFDV over a sample),
then a curated overlay (optional)."""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

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
from tfx_tabular.source.dataset import open_dataset


@dataclasses.dataclass
class InferredSchema:
    schema: schema_pb2.Schema
    metadata: SourceMetadata
    from_examples: bool
    num_files: int  # Parquet files whose footers were read (0 for an Examples folder)
    sample_statistics: Optional[SampleStatisticsReport] = None


def _example_files(examples_uri: str) -> list[str]:
    import tensorflow as tf

    return sorted(tf.io.gfile.glob(f"{examples_uri.rstrip('/')}/Split-*/*"))


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
) -> InferredSchema:
    """Infer the schema of `uri`: an Examples folder ParquetExampleGen wrote (`examples=True`),
    a Parquet folder (False), or whichever it is (None). `exclude_columns` are left out.
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

    dataset = None
    from_examples = is_examples_folder(uri) if examples is None else examples
    if from_examples:
        metadata = read_source_metadata(uri).without(exclude_columns)
    else:
        dataset = open_dataset(uri, exclude_columns=exclude_columns)
        metadata = SourceMetadata.of(dataset)
    result = InferredSchema(
        infer_schema(metadata, label=label),
        metadata,
        from_examples,
        0 if dataset is None else len(dataset.files),
    )
    if example_statistics:
        # Imported here: it loads the conversion's statistics package (tfx_bsl, numba), which
        # footer-only inference never needs.
        from tfx_tabular.schemas.example_statistics import (
            apply_example_statistics,
            load_example_statistics,
        )

        result.schema = apply_example_statistics(
            result.schema, load_example_statistics(example_statistics), max_vocabulary_size
        )
    if sample_statistics:
        sample_source = _example_files(uri) if from_examples else dataset
        result.schema, result.sample_statistics = sample_statistics_overlay(
            sample_source, sample_rows, max_vocabulary_size, beam_pipeline_args, base=result.schema
        )
    if curated_schema:
        result.schema = overlay(result.schema, schemas.load_schema(curated_schema))
    return result

"""ParquetSchemaGen: a tensorflow_metadata Schema from Parquet metadata, as a standard `Schema`
artifact that stock ExampleValidator, Transform and Trainer accept."""

from __future__ import annotations

from typing import List, Optional

from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import channel, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec

from tfx_tabular.components.parameters import execution_parameters
from tfx_tabular.components.parquet_schema_gen import executor, spec


class ParquetSchemaGenSpec(ComponentSpec):
    PARAMETERS = execution_parameters(spec.PARAMETERS)
    INPUTS = {
        spec.EXAMPLES: ChannelParameter(type=standard_artifacts.Examples, optional=True),
        spec.STATISTICS: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
    }
    OUTPUTS = {spec.SCHEMA: ChannelParameter(type=standard_artifacts.Schema)}


class ParquetSchemaGen(base_beam_component.BaseBeamComponent):
    """Infers the Schema of ParquetExampleGen's output from Parquet footers (no data pass).

    Give `examples` (ParquetExampleGen's output: it carries the source's Arrow schema and footer
    statistics) or `input_base` (a Parquet folder). `label` marks the label (absent in the
    SERVING environment). `statistics`, as stock SchemaGen's (ExampleStatistics: ParquetExampleGen's
    `statistics` output, or stock StatisticsGen's): presence, value counts, string domains (up to
    `max_vocabulary_size`) and numeric ranges that hold on every split, so ExampleValidator finds
    no anomaly on the data the schema came from. Or `sample_statistics=True`: string domains up to
    `max_vocabulary_size`, value counts and presence from TFDV over `sample_rows` sampled rows.
    `curated_schema`: a schema.pbtxt path or URI whose features' settings win over the inferred.
    """

    SPEC_CLASS = ParquetSchemaGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

    def __init__(
        self,
        examples: Optional[channel.BaseChannel] = None,
        statistics: Optional[channel.BaseChannel] = None,
        input_base: Optional[str] = None,
        label: Optional[str] = None,
        curated_schema: Optional[str] = None,
        sample_statistics: Optional[bool] = None,
        sample_rows: Optional[int] = None,
        max_vocabulary_size: Optional[int] = None,
        exclude_columns: Optional[List[str]] = None,
        keep_index_columns: Optional[bool] = None,
    ):
        """Parameters left None take their defaults from `spec.PARAMETERS`."""
        if (examples is None) == (input_base is None):
            raise ValueError("give exactly one of `examples` and `input_base`")
        super().__init__(
            ParquetSchemaGenSpec(
                examples=examples,
                statistics=statistics,
                input_base=input_base,
                label=label,
                curated_schema=curated_schema,
                sample_statistics=None if sample_statistics is None else int(sample_statistics),
                sample_rows=sample_rows,
                max_vocabulary_size=max_vocabulary_size,
                exclude_columns=exclude_columns,
                keep_index_columns=None if keep_index_columns is None else int(keep_index_columns),
                schema=channel.Channel(type=standard_artifacts.Schema),
            )
        )

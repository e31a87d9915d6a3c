"""ParquetExampleGen: partitioned Parquet → TFRecord tf.Example splits, a drop-in for TFX's
FileBasedExampleGen (same `examples` output, input_config / output_config / range_config)."""

from __future__ import annotations

from typing import Dict, List, Optional

from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.proto import example_gen_pb2, range_config_pb2
from tfx.types import channel, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from tfx_tabular.components.parameters import execution_parameters
from tfx_tabular.components.parquet_example_gen import driver, executor, spec

DEFAULT_INPUT_CONFIG = example_gen_pb2.Input(
    splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*")]
)
DEFAULT_OUTPUT_CONFIG = example_gen_pb2.Output(
    split_config=example_gen_pb2.SplitConfig(
        splits=[
            example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=buckets)
            for name, buckets in spec.DEFAULT_SPLIT_BUCKETS.items()
        ]
    )
)


class ParquetExampleGenSpec(ComponentSpec):
    PARAMETERS = {
        standard_component_specs.INPUT_BASE_KEY: ExecutionParameter(type=str),
        standard_component_specs.INPUT_CONFIG_KEY: ExecutionParameter(type=example_gen_pb2.Input),
        standard_component_specs.OUTPUT_CONFIG_KEY: ExecutionParameter(type=example_gen_pb2.Output),
        standard_component_specs.RANGE_CONFIG_KEY: ExecutionParameter(
            type=range_config_pb2.RangeConfig, optional=True
        ),
        **execution_parameters(spec.PARAMETERS),
    }
    INPUTS = {}
    OUTPUTS = {
        spec.EXAMPLES: ChannelParameter(type=standard_artifacts.Examples),
        spec.STATISTICS: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
    }


class ParquetExampleGen(base_beam_component.BaseBeamComponent):
    """Converts a (hive-partitioned) Parquet dataset into an `Examples` artifact.

    Splits: hash buckets from `output_config` (over the whole row, or over `split_keys` /
    `output_config.split_config.partition_feature_name`), or by a partition value
    (`split_by_partition="day"`: the last `eval_last_partitions` values → eval, the rest → train),
    or by input_config patterns (one split per pattern, like FileBasedExampleGen). Patterns may
    name folders (`day=2024-01-0[1-6]`) and support {SPAN}/{VERSION} with `range_config`.

    The artifact gets FileBasedExampleGen's properties (span, version, input_fingerprint,
    payload_format) plus `row_counts` (per split), `compression`, `num_shards`, and the source
    Arrow schema as `source_schema.arrow` beside the Split-* folders.

    `compute_example_statistics` (default on): a second output, `statistics`, the
    `ExampleStatistics` stock StatisticsGen would write for the same Examples
    (`Split-<name>/FeatureStats.pb`), computed while converting (`tfx_tabular.statistics`);
    stock SchemaGen, ExampleValidator and ParquetSchemaGen read it.

    `columnar_batch_rows` (default 0: off; `create_pipeline` sets 8192, its trainer being
    TabularTrainer): the same rows also as columnar batch records,
    `columnar_batch_rows` rows per record, in `columnar/Split-<name>/` with `columnar/columnar.json`
    (layout version, rows per record, features, rows per split; also the artifact's
    `columnar_batch_rows`, `columnar_layout_version` and `columnar_strings` properties). Stock components read only
    the `Split-<name>` folders; `tfx_tabular.input_fn` (TabularTrainer) reads the batches. They
    hold strings as fingerprints; `columnar_strings` (default off; `create_pipeline` sets it when
    its trainer reads exact strings) adds the strings themselves.

    Every parameter's meaning and default: its declaration in `spec.py`.
    """

    SPEC_CLASS = ParquetExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
    DRIVER_CLASS = driver.Driver

    def __init__(
        self,
        input_base: str,
        input_config: Optional[example_gen_pb2.Input] = None,
        output_config: Optional[example_gen_pb2.Output] = None,
        range_config: Optional[range_config_pb2.RangeConfig] = None,
        columns: Optional[List[str]] = None,
        exclude_columns: Optional[List[str]] = None,
        partition_filter: Optional[Dict[str, List[str]]] = None,
        partition_types: Optional[Dict[str, str]] = None,
        split_keys: Optional[List[str]] = None,
        split_by_partition: Optional[str] = None,
        eval_last_partitions: Optional[int] = None,
        decimal_as: Optional[str] = None,
        table_version: Optional[int] = None,
        keep_index_columns: Optional[bool] = None,
        compression: Optional[str] = None,
        compression_level: Optional[int] = None,
        num_shards: Optional[int] = None,
        read_batch_rows: Optional[int] = None,
        read_batch_bytes: Optional[int] = None,
        columnar_batch_rows: Optional[int] = None,
        columnar_strings: Optional[bool] = None,
        compute_example_statistics: Optional[bool] = None,
    ):
        """Parameters left None take their defaults from `spec.PARAMETERS`."""
        input_config = input_config or DEFAULT_INPUT_CONFIG
        with_output = (
            spec.PARAMETERS["compute_example_statistics"].default
            if compute_example_statistics is None
            else compute_example_statistics
        )
        if output_config is None:
            output_config = (
                example_gen_pb2.Output()
                if len(input_config.splits) > 1 or split_by_partition
                else DEFAULT_OUTPUT_CONFIG
            )
        super().__init__(
            ParquetExampleGenSpec(
                input_base=input_base,
                input_config=input_config,
                output_config=output_config,
                range_config=range_config,
                columns=columns,
                exclude_columns=exclude_columns,
                partition_filter=partition_filter,
                partition_types=partition_types,
                split_keys=split_keys,
                split_by_partition=split_by_partition,
                eval_last_partitions=eval_last_partitions,
                decimal_as=decimal_as,
                table_version=table_version,
                keep_index_columns=None if keep_index_columns is None else int(keep_index_columns),
                compression=compression,
                compression_level=compression_level,
                num_shards=num_shards,
                read_batch_rows=read_batch_rows,
                read_batch_bytes=read_batch_bytes,
                columnar_batch_rows=columnar_batch_rows,
                columnar_strings=None if columnar_strings is None else int(columnar_strings),
                compute_example_statistics=(
                    None if compute_example_statistics is None else int(compute_example_statistics)
                ),
                examples=channel.Channel(type=standard_artifacts.Examples),
                statistics=channel.Channel(type=standard_artifacts.ExampleStatistics)
                if with_output
                else None,
            )
        )

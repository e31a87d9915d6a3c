"""ParquetExampleGen's executor: resolves its parameters and runs `tfx_tabular.conversion.convert`."""

from __future__ import annotations

from typing import Any, Dict, List

from tfx.components.example_gen import driver as tfx_driver
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from tfx_tabular.coders import columnar
from tfx_tabular.components.beam_executor import BeamExecutor
from tfx_tabular.components.parameters import resolve
from tfx_tabular.components.parquet_example_gen import driver, spec
from tfx_tabular.conversion import convert, plan
from tfx_tabular.runners.progress import Progress


def _plan(exec_properties: Dict[str, Any]) -> tuple:
    """The dataset, its splits and the output options these properties ask for."""
    params = resolve(exec_properties, spec.PARAMETERS)
    input_config = proto_utils.json_to_proto(
        exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
    )
    output_config = proto_utils.json_to_proto(
        exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output()
    )
    split_config = output_config.split_config
    split_keys = params["split_keys"] or (
        [split_config.partition_feature_name] if split_config.partition_feature_name else []
    )
    config = plan.ConversionConfig.from_parameters(
        {
            **params,
            "patterns": {s.name: s.pattern for s in input_config.splits},
            "buckets": {s.name: s.hash_buckets for s in split_config.splits} or None,
            "split_keys": split_keys,
        }
    )
    dataset, splits = plan.plan_conversion(
        exec_properties[standard_component_specs.INPUT_BASE_KEY], config.source
    )
    return dataset, splits, config.output


def _record_statistics(statistics, examples, split_names: List[str]) -> None:
    """The properties stock StatisticsGen gives its ExampleStatistics artifact."""
    statistics.split_names = artifact_utils.encode_split_names(split_names)
    statistics.span = examples.span


def _record(examples, result: convert.ConversionResult, split_names: List[str]) -> None:
    examples.split_names = artifact_utils.encode_split_names(split_names)
    examples_utils.set_payload_format(examples, example_gen_pb2.FORMAT_TF_EXAMPLE)
    examples.set_json_value_custom_property("row_counts", result.rows)
    examples.set_string_custom_property("compression", result.compression)
    examples.set_int_custom_property("num_shards", result.num_shards)
    examples.set_float_custom_property("conversion_seconds", result.seconds)
    if result.columnar_batch_rows:
        examples.set_int_custom_property("columnar_batch_rows", result.columnar_batch_rows)
        examples.set_int_custom_property("columnar_layout_version", columnar.LAYOUT_VERSION)
        examples.set_int_custom_property("columnar_strings", int(result.columnar_strings))


class Executor(BeamExecutor):
    def Do(
        self,
        input_dict: Dict[str, List],
        output_dict: Dict[str, List],
        exec_properties: Dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        examples = artifact_utils.get_single_instance(output_dict[spec.EXAMPLES])
        if example_gen_utils.SPAN_PROPERTY_NAME not in exec_properties:
            # Kubeflow and Vertex run the executor without the driver: do its work here (span,
            # version, {SPAN} patterns, the input fingerprint on the artifact).
            exec_properties = driver.Driver(None).resolve_exec_properties(
                dict(exec_properties), None, None
            )
            tfx_driver.update_output_artifact(exec_properties, examples.mlmd_artifact)
        dataset, splits, options = _plan(exec_properties)
        statistics = (
            artifact_utils.get_single_instance(output_dict[spec.STATISTICS])
            if output_dict.get(spec.STATISTICS)
            else None
        )
        self._beam_pipeline_args = convert.beam_args_with_defaults(self._beam_pipeline_args or [])
        print(
            f"ParquetExampleGen: converting {dataset.num_rows:,} rows in {len(dataset.files)} "
            f"files into {', '.join(splits.names)}",
            flush=True,
        )
        with Progress("ParquetExampleGen", dataset.num_rows, "rows") as progress:
            result = convert.run_conversion(
                dataset,
                splits,
                examples.uri,
                options,
                self._make_beam_pipeline(),
                on_progress=progress.update,
                example_statistics_dir=statistics.uri if statistics else None,
            )
            progress.update(sum(result.rows.values()))
        _record(examples, result, splits.names)
        if statistics:
            _record_statistics(statistics, examples, splits.names)
        print(
            f"ParquetExampleGen: {sum(result.rows.values()):,} rows in {result.seconds:.1f} s "
            f"({result.rows_per_second:,.0f} rows/s)",
            flush=True,
        )

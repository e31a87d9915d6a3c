"""ParquetExampleGen's executor: parses properties and runs `tfx_tabular.convert`."""
from __future__ import annotations

import json
import time
from typing import Any, Dict, List

from tfx.components.example_gen import driver as tfx_driver
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from tfx_tabular import convert
from tfx_tabular.components.parquet_example_gen import driver


def _json_property(exec_properties: Dict[str, Any], key: str):
    # TFX hands Dict/List parameters to executors as JSON text.
    value = exec_properties.get(key)
    return json.loads(value) if isinstance(value, str) else value


class Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict: Dict[str, List], output_dict: Dict[str, List],
           exec_properties: Dict[str, Any]) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        examples = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.EXAMPLES_KEY])
        if example_gen_utils.SPAN_PROPERTY_NAME not in exec_properties:
            # Kubeflow and Vertex run the executor without the driver: do its work here (span,
            # version, {SPAN} patterns, the input fingerprint on the artifact).
            exec_properties = driver.Driver(None).resolve_exec_properties(
                dict(exec_properties), None, None)
            tfx_driver.update_output_artifact(exec_properties, examples.mlmd_artifact)
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input())
        output_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output())

        hash_splits = output_config.split_config.splits
        split_keys = _json_property(exec_properties, "split_keys") or (
            [output_config.split_config.partition_feature_name]
            if output_config.split_config.partition_feature_name else [])
        dataset, splits = convert.plan_conversion(
            exec_properties[standard_component_specs.INPUT_BASE_KEY],
            patterns={s.name: s.pattern for s in input_config.splits},
            buckets={s.name: s.hash_buckets for s in hash_splits} or None,
            split_keys=split_keys,
            split_by_partition=exec_properties.get("split_by_partition"),
            eval_last_partitions=exec_properties.get("eval_last_partitions") or 1,
            columns=_json_property(exec_properties, "columns"),
            exclude_columns=_json_property(exec_properties, "exclude_columns") or [],
            partition_filter=_json_property(exec_properties, "partition_filter"),
            partition_types=_json_property(exec_properties, "partition_types"),
            decimal_as=exec_properties.get("decimal_as") or "float")
        options = convert.OutputOptions(
            compression=exec_properties.get("compression") or "none",
            compression_level=exec_properties.get("compression_level") or 6,
            num_shards=exec_properties.get("num_shards") or 0,
            batch_size=exec_properties.get("batch_size") or convert.DEFAULT_BATCH_SIZE)

        self._beam_pipeline_args = convert.beam_args_with_defaults(self._beam_pipeline_args or [])
        temp_dir = convert.temp_dir_for(examples.uri)
        print(f"ParquetExampleGen: converting {dataset.num_rows:,} rows in {len(dataset.files)} "
              f"files into {', '.join(splits.names)}", flush=True)
        start = time.perf_counter()
        write = convert.WriteExamples(dataset, splits, temp_dir, options)
        try:
            with self._make_beam_pipeline() as pipeline:
                _ = pipeline | "WriteExamples" >> write
            result = convert.finalize(dataset, splits, temp_dir, examples.uri,
                                      len(write.shards), options)
        except BaseException:
            convert.discard(examples.uri)
            raise

        examples.split_names = artifact_utils.encode_split_names(splits.names)
        examples_utils.set_payload_format(examples, example_gen_pb2.FORMAT_TF_EXAMPLE)
        examples.set_json_value_custom_property("row_counts", result.rows)
        examples.set_string_custom_property("compression", result.compression)
        examples.set_int_custom_property("num_shards", result.num_shards)
        seconds = time.perf_counter() - start
        examples.set_float_custom_property("conversion_seconds", seconds)
        print(f"ParquetExampleGen: {sum(result.rows.values()):,} rows in {seconds:.1f} s "
              f"({sum(result.rows.values()) / seconds:,.0f} rows/s)", flush=True)

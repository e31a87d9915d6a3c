"""ParquetSchemaGen's executor: parses properties and calls `tfx_tabular.schemas`."""
from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List

from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils
from tfx.utils import io_utils

from tfx_tabular import schemas
from tfx_tabular.parquet_source import open_dataset


class Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict: Dict[str, List], output_dict: Dict[str, List],
           exec_properties: Dict[str, Any]) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        start = time.perf_counter()
        examples = input_dict.get("examples") or []
        exclude = exec_properties.get("exclude_columns") or []
        if isinstance(exclude, str):  # TFX hands List parameters to executors as JSON text
            exclude = json.loads(exclude)
        if examples:
            summary = schemas.read_summary(artifact_utils.get_single_instance(examples).uri)
            source = schemas.example_files(artifact_utils.get_single_instance(examples))
        else:
            source = open_dataset(exec_properties["input_base"], exclude_columns=exclude)
            summary = source.summary()
        schema = schemas.infer_schema(summary, label=exec_properties.get("label") or None)
        output = artifact_utils.get_single_instance(output_dict["schema"])
        if exec_properties.get("statistics"):
            schema, report = schemas.statistics_overlay(
                source, exec_properties.get("sample_rows") or 100_000,
                exec_properties.get("max_vocabulary_size") or 1_000,
                self._beam_pipeline_args or [], base=schema)
            output.set_int_custom_property("statistics_rows", report.rows)
            output.set_float_custom_property("statistics_seconds", report.seconds)
        if exec_properties.get("curated_schema"):
            schema = schemas.overlay(schema, schemas.load_schema(exec_properties["curated_schema"]))
        io_utils.write_pbtxt_file(os.path.join(output.uri, schemas.SCHEMA_FILE), schema)
        output.set_int_custom_property("num_features", len(schema.feature))
        output.set_float_custom_property("inference_seconds", time.perf_counter() - start)

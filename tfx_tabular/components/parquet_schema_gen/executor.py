"""ParquetSchemaGen's executor: resolves its parameters and calls `tfx_tabular.schemas.source`."""

from __future__ import annotations

import time
from typing import Any, Dict, List

from tfx.types import artifact_utils

from tfx_tabular import schemas
from tfx_tabular.components.beam_executor import BeamExecutor
from tfx_tabular.components.parameters import resolve
from tfx_tabular.components.parquet_schema_gen import spec
from tfx_tabular.schemas.source import schema_of


class Executor(BeamExecutor):
    def Do(
        self,
        input_dict: Dict[str, List],
        output_dict: Dict[str, List],
        exec_properties: Dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        start = time.perf_counter()
        params = resolve(exec_properties, spec.PARAMETERS)
        examples = input_dict.get(spec.EXAMPLES) or []
        statistics = input_dict.get(spec.STATISTICS) or []
        source = (
            artifact_utils.get_single_instance(examples).uri if examples else params["input_base"]
        )
        inferred = schema_of(
            source,
            label=params["label"] or None,
            exclude_columns=params["exclude_columns"],
            keep_index_columns=bool(params["keep_index_columns"]),
            sample_statistics=bool(params["sample_statistics"]),
            sample_rows=params["sample_rows"],
            max_vocabulary_size=params["max_vocabulary_size"],
            curated_schema=params["curated_schema"],
            beam_pipeline_args=self._beam_pipeline_args or [],
            examples=bool(examples),
            example_statistics=(
                artifact_utils.get_single_instance(statistics).uri if statistics else None
            ),
        )
        output = artifact_utils.get_single_instance(output_dict[spec.SCHEMA])
        report = inferred.sample_statistics
        if report is not None:
            output.set_int_custom_property("sample_statistics_rows", report.rows)
            output.set_float_custom_property("sample_statistics_seconds", report.seconds)
        schemas.write_schema(inferred.schema, output.uri)
        output.set_int_custom_property("num_features", len(inferred.schema.feature))
        output.set_float_custom_property("inference_seconds", time.perf_counter() - start)

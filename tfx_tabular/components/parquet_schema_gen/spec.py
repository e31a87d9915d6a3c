"""ParquetSchemaGen's parameters and their defaults, for component, executor and CLI alike."""

from __future__ import annotations

from typing import List

from tfx_tabular.components.parameters import Parameter
from tfx_tabular.schemas.sample_statistics import DEFAULT_MAX_VOCABULARY, DEFAULT_SAMPLE_ROWS

EXAMPLES = "examples"
# ExampleStatistics of the same Examples (optional): TFX's channel name, as stock SchemaGen's.
STATISTICS = "statistics"
SCHEMA = "schema"

PARAMETERS = {
    "input_base": Parameter(str),
    "label": Parameter(str),
    "curated_schema": Parameter(str),
    # 1: TFDV over `sample_rows` sampled rows adds string domains, value counts and presence.
    "sample_statistics": Parameter(int, default=0),
    "sample_rows": Parameter(int, default=DEFAULT_SAMPLE_ROWS),
    "max_vocabulary_size": Parameter(int, default=DEFAULT_MAX_VOCABULARY),
    "exclude_columns": Parameter(List[str], default=[]),
}

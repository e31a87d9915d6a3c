"""ParquetSchemaGen's parameters and their defaults, for component, executor and CLI alike."""

from __future__ import annotations

from typing import List

from tfx_tabular.components.parameters import Parameter
from tfx_tabular.schemas.statistics import DEFAULT_MAX_VOCABULARY, DEFAULT_SAMPLE_ROWS

EXAMPLES = "examples"
EXAMPLE_STATISTICS = "example_statistics"  # ExampleStatistics of the same Examples (optional)
SCHEMA = "schema"

PARAMETERS = {
    "input_base": Parameter(str),
    "label": Parameter(str),
    "curated_schema": Parameter(str),
    "statistics": Parameter(int, default=0),
    "sample_rows": Parameter(int, default=DEFAULT_SAMPLE_ROWS),
    "max_vocabulary_size": Parameter(int, default=DEFAULT_MAX_VOCABULARY),
    "exclude_columns": Parameter(List[str], default=[]),
}

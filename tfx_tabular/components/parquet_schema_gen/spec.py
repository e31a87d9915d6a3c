"""ParquetSchemaGen's parameters and their defaults, for component, executor and CLI alike."""

from __future__ import annotations

from typing import List

from tfx_tabular.components.parameters import Parameter
from tfx_tabular.schemas.sample_statistics import DEFAULT_MAX_VOCABULARY_SIZE, DEFAULT_SAMPLE_ROWS

EXAMPLES = "examples"
# ExampleStatistics of the same Examples (optional): TFX's channel name, as stock SchemaGen's.
STATISTICS = "statistics"
SCHEMA = "schema"

PARAMETERS = {
    "input_base": Parameter(str, help="a Parquet folder (instead of the examples channel)"),
    "label": Parameter(
        str,
        help="the label column: required in the TRAINING environment, absent in SERVING "
        "(default: no label)",
    ),
    "curated_schema": Parameter(
        str, metavar="SCHEMA", help="a schema.pbtxt whose features' settings win"
    ),
    "sample_statistics": Parameter(
        int,
        default=0,
        switch=True,
        help="add string domains, value counts and presence from TFDV over sample_rows "
        "sampled rows",
    ),
    "sample_rows": Parameter(
        int,
        default=DEFAULT_SAMPLE_ROWS,
        minimum=1,
        metavar="ROWS",
        help="with sample statistics: how many rows TFDV samples",
    ),
    "max_vocabulary_size": Parameter(
        int,
        default=DEFAULT_MAX_VOCABULARY_SIZE,
        minimum=1,
        metavar="N",
        help="string columns with more distinct values get no domain",
    ),
    "exclude_columns": Parameter(
        List[str], default=[], metavar="COLUMN,...", help="drop these columns (comma-separated)"
    ),
    "keep_index_columns": Parameter(
        int,
        default=0,
        switch=True,
        help="from a Parquet folder: keep pandas' index columns (__index_level_0__, a named "
        "index) as features, as the conversion's keep_index_columns does",
    ),
}

"""ParquetExampleGen's parameters and their defaults, for component, executor and CLI alike.

Input, output and range configs are FileBasedExampleGen's protos, handled by the component; the
defaults of the conversion itself come from `tfx_tabular.conversion.plan`, which runs it.
"""

from __future__ import annotations

from typing import Dict, List

from tfx_tabular.components.parameters import Parameter
from tfx_tabular.conversion.plan import DEFAULT_BUCKETS, OutputOptions, SourceOptions

EXAMPLES = "examples"
# The optional ExampleStatistics output, computed while converting: TFX's channel name (stock
# StatisticsGen's output, stock SchemaGen's and ExampleValidator's input).
STATISTICS = "statistics"
DEFAULT_SPLIT_BUCKETS = dict(DEFAULT_BUCKETS)

PARAMETERS = {
    "columns": Parameter(List[str]),
    "exclude_columns": Parameter(List[str], default=list(SourceOptions.exclude_columns)),
    "partition_filter": Parameter(Dict[str, List[str]]),
    "partition_types": Parameter(Dict[str, str]),
    "split_keys": Parameter(List[str], default=list(SourceOptions.split_keys)),
    "split_by_partition": Parameter(str),
    "eval_last_partitions": Parameter(int, default=SourceOptions.eval_last_partitions),
    "decimal_as": Parameter(str, default=SourceOptions.decimal_as),
    # A Delta Lake version or Iceberg snapshot id to read (default: the table's current one).
    "table_version": Parameter(int),
    "compression": Parameter(str, default=OutputOptions.compression),
    "compression_level": Parameter(int, default=OutputOptions.compression_level),
    "num_shards": Parameter(int, default=OutputOptions.num_shards),
    "read_batch_rows": Parameter(int, default=OutputOptions.read_batch_rows),
    # About this many bytes per batch read and encoded (wide rows: fewer than read_batch_rows rows).
    "read_batch_bytes": Parameter(int, default=OutputOptions.read_batch_bytes),
    # Rows per columnar batch record, written beside the per-row Examples (`columnar/`) for
    # TabularTrainer's input; 0 (the default): not written. `create_pipeline` sets
    # columnar.DEFAULT_BATCH_ROWS.
    "columnar_batch_rows": Parameter(int, default=OutputOptions.columnar_batch_rows),
    # 1: also output the example statistics of each split (stock StatisticsGen's artifact,
    # ExampleStatistics), in the same pass.
    "compute_example_statistics": Parameter(int, default=1),
}

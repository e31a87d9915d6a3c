"""ParquetExampleGen's parameters and their defaults, for component, executor and CLI alike.

Input, output and range configs are FileBasedExampleGen's protos, handled by the component; the
defaults of the conversion itself come from `tfx_tabular.conversion.plan`, which runs it.
"""

from __future__ import annotations

from typing import Dict, List

from tfx_tabular.coders import columnar
from tfx_tabular.components.parameters import Parameter
from tfx_tabular.conversion.plan import COMPRESSIONS, DEFAULT_BUCKETS, OutputOptions, SourceOptions

EXAMPLES = "examples"
# The optional ExampleStatistics output, computed while converting: TFX's channel name (stock
# StatisticsGen's output, stock SchemaGen's and ExampleValidator's input).
STATISTICS = "statistics"
DEFAULT_SPLIT_BUCKETS = dict(DEFAULT_BUCKETS)

PARAMETERS = {
    "columns": Parameter(
        List[str], metavar="COLUMN,...", help="only these columns (comma-separated)"
    ),
    "exclude_columns": Parameter(
        List[str],
        default=list(SourceOptions.exclude_columns),
        metavar="COLUMN,...",
        help="drop these columns (comma-separated)",
    ),
    "partition_filter": Parameter(
        Dict[str, List[str]],
        metavar="KEY=V1,V2",
        help="keep files whose partition KEY is one of the values (repeatable)",
    ),
    "partition_types": Parameter(
        Dict[str, str],
        metavar="KEY=int|string",
        help="override a partition value's type (repeatable)",
    ),
    "split_keys": Parameter(
        List[str],
        default=list(SourceOptions.split_keys),
        metavar="COLUMN,...",
        help="hash these columns (comma-separated), not the whole row",
    ),
    "split_by_partition": Parameter(
        str,
        metavar="KEY",
        help="split by a partition value: the last eval_last_partitions values → eval",
    ),
    "eval_last_partitions": Parameter(
        int,
        default=SourceOptions.eval_last_partitions,
        minimum=1,
        metavar="N",
        help="splitting by partition: how many of the last partition values go to eval",
    ),
    "decimal_as": Parameter(
        str,
        default=SourceOptions.decimal_as,
        choices=("float", "bytes"),
        help="decimal columns as float32 features, or as bytes of their exact text",
    ),
    "table_version": Parameter(
        int,
        minimum=0,
        metavar="VERSION",
        help="a Delta Lake version or Iceberg snapshot id to read (default: the current one)",
    ),
    "keep_index_columns": Parameter(
        int,
        default=int(SourceOptions.keep_index_columns),
        switch=True,
        help="keep pandas' index columns (__index_level_0__, a named index) as features; "
        "pandas reads them back as the index, so they are left out by default",
    ),
    "compression": Parameter(
        str,
        default=OutputOptions.compression,
        choices=COMPRESSIONS,
        help="the TFRecord shards' compression (gzip: .gz shards)",
    ),
    "compression_level": Parameter(
        int,
        default=OutputOptions.compression_level,
        choices=range(10),
        metavar="0-9",
        help="gzip's level, with gzip compression",
    ),
    "num_shards": Parameter(
        int,
        default=OutputOptions.num_shards,
        minimum=0,
        metavar="N",
        help="TFRecord shards per split; 0: one per ~1M rows, at least 2",
    ),
    "read_batch_rows": Parameter(
        int,
        default=OutputOptions.read_batch_rows,
        minimum=1,
        metavar="ROWS",
        help="rows per Arrow batch read and encoded at a time, at most",
    ),
    "read_batch_bytes": Parameter(
        int,
        default=OutputOptions.read_batch_bytes,
        minimum=1,
        metavar="BYTES",
        help="about this many bytes per batch read (rows sized by the footers' uncompressed "
        "column sizes): wide rows come fewer than read_batch_rows at a time, and columnar "
        "records hold fewer rows",
    ),
    "columnar_batch_rows": Parameter(
        int,
        default=OutputOptions.columnar_batch_rows,
        minimum=0,
        metavar="ROWS",
        help=f"also write columnar batch records of ROWS rows ({columnar.DEFAULT_BATCH_ROWS}, as "
        "pipelines do, is a good start) beside the per-row Examples, which "
        "tfx_tabular.input_fn reads several times faster (docs/trainer.md#columnar-batches); "
        "0: none",
    ),
    "columnar_strings": Parameter(
        int,
        default=int(OutputOptions.columnar_strings),
        switch=True,
        help="the columnar batch records also hold each string feature's strings, so that a "
        "trainer reading exact strings (a stock run_fn, a Transform graph, "
        "input_form='exact') reads them too, not the per-row Examples; they cost disk and "
        "conversion time",
    ),
    "compute_example_statistics": Parameter(
        int,
        default=1,
        switch=True,
        help="also output the example statistics of each split (stock StatisticsGen's "
        "artifact, ExampleStatistics), computed in the same pass",
    ),
}

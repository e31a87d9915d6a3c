"""Planning a conversion from Parquet footers alone: the dataset, its splits, the output options
and the shards (row groups dealt into files), and the stage's one config (`ConversionConfig`). No
Beam here: planning fails on bad input before a pipeline starts, and the components' specs and
the CLI take their defaults from these classes.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa

from tfx_tabular.coders import columnar
from tfx_tabular.source.dataset import Dataset, open_dataset
from tfx_tabular.source.errors import InputError
from tfx_tabular.source.listing import matches_pattern
from tfx_tabular.source.reading import row_bytes, rows_for_bytes

COMPRESSIONS = ("none", "gzip")
DEFAULT_BUCKETS = (("train", 2), ("eval", 1))  # FileBasedExampleGen's default split
DEFAULT_READ_BATCH_BYTES = 16 << 20


@dataclasses.dataclass(frozen=True)
class Splits:
    """How rows are assigned to splits.

    Either `file_splits` (every row of a file goes to its file's split: by partition value or by
    input patterns), or hash `buckets` over the whole serialized row or over the `keys` columns.
    Hash assignment depends only on the row's content: the same on every run and any worker count.
    """

    buckets: tuple[tuple[str, int], ...] = DEFAULT_BUCKETS
    keys: tuple[str, ...] = ()
    file_splits: Optional[Mapping[str, str]] = None  # relative path → split name

    @property
    def names(self) -> list[str]:
        if self.file_splits is not None:
            return sorted(set(self.file_splits.values()))
        return [name for name, _ in self.buckets]


def splits_by_partition(
    dataset: Dataset,
    key: str,
    values: Mapping[str, Sequence[str]] = None,
    last: int = 0,
    last_split: str = "eval",
    rest: str = "train",
) -> Splits:
    """Splits by a partition value: explicit `values` per split, or the `last` N values → eval."""
    if key not in dataset.partition_columns:
        raise InputError(
            f"{key!r} is not a partition key of {dataset.base} "
            f"(keys: {list(dataset.partition_columns)})"
        )
    by_value: dict[str, str] = {}
    for split, split_values in (values or {}).items():
        by_value.update({str(v): split for v in split_values})
    if last:
        integer = pa.types.is_integer(dataset.schema.field(key).type)
        # A null partition value (the writer's null marker) sorts first: it is never held out.
        distinct = sorted(
            {dict(f.partitions)[key] for f in dataset.files},
            key=lambda v: (v is not None, (int(v) if integer else v) if v is not None else 0),
        )
        if len(distinct) <= last:
            raise InputError(
                f"partition {key!r} has {len(distinct)} values; cannot hold out {last}"
            )
        by_value.update({v: last_split for v in distinct[-last:]})
    return Splits(
        file_splits={f.relative: by_value.get(dict(f.partitions)[key], rest) for f in dataset.files}
    )


def splits_by_patterns(dataset: Dataset, patterns: Mapping[str, str]) -> Splits:
    """Splits like FileBasedExampleGen's input_config: a glob (relative to the base) per split."""
    file_splits = {}
    for info in dataset.files:
        matches = [
            name for name, pattern in patterns.items() if matches_pattern(info.relative, pattern)
        ]
        if len(matches) > 1:
            raise InputError(f"{info.path} matches the patterns of splits {matches}")
        if matches:
            file_splits[info.relative] = matches[0]
    # As FileBasedExampleGen: a split whose pattern matches nothing is an error, not a split
    # silently missing from the output.
    used = set(file_splits.values())
    empty = [f"{name}: {pattern!r}" for name, pattern in patterns.items() if name not in used]
    if empty:
        raise InputError(
            f"split patterns match no Parquet file under {dataset.base}: {', '.join(empty)}"
        )
    return Splits(file_splits=file_splits)


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    """What to read and how to split it: the options the CLI and the component share.

    Several `patterns` → one split per pattern; otherwise `split_by_partition` (the last
    `eval_last_partitions` values → eval), otherwise hash `buckets` (default train=2, eval=1)
    over the whole row or over `split_keys`.
    """

    patterns: Optional[Mapping[str, str]] = None
    buckets: Optional[Mapping[str, int]] = None
    split_keys: Sequence[str] = ()
    split_by_partition: Optional[str] = None
    eval_last_partitions: int = 1
    columns: Optional[Sequence[str]] = None
    exclude_columns: Sequence[str] = ()
    partition_filter: Optional[Mapping[str, Sequence[str]]] = None
    partition_types: Optional[Mapping[str, str]] = None
    decimal_as: str = "float"
    table_version: Optional[int] = None  # a Delta Lake version or Iceberg snapshot id to read
    keep_index_columns: bool = False  # pandas' index columns as features too


def plan_conversion(
    input_base: str, options: SourceOptions = SourceOptions()
) -> tuple[Dataset, Splits]:
    """Open the dataset and choose its splits (see `SourceOptions`)."""
    patterns = dict(options.patterns or {"single_split": "*"})
    dataset = open_dataset(
        input_base,
        list(patterns.values()),
        columns=options.columns,
        exclude_columns=options.exclude_columns,
        partition_filter=options.partition_filter,
        partition_types=options.partition_types,
        decimal_as=options.decimal_as,
        table_version=options.table_version,
        keep_index_columns=bool(options.keep_index_columns),
    )
    if len(patterns) > 1:
        return dataset, splits_by_patterns(dataset, patterns)
    if options.split_by_partition:
        return dataset, splits_by_partition(
            dataset, options.split_by_partition, last=options.eval_last_partitions
        )
    missing = [k for k in options.split_keys if k not in dataset.schema.names]
    if missing:
        raise InputError(f"split keys {missing} are not columns of {input_base}")
    buckets = tuple((options.buckets or dict(DEFAULT_BUCKETS)).items())
    if any(n <= 0 for _, n in buckets):
        raise ValueError(f"hash buckets must be positive: {dict(buckets)}")
    return dataset, Splits(buckets=buckets, keys=tuple(options.split_keys))


@dataclasses.dataclass(frozen=True)
class OutputOptions:
    compression: str = "none"
    compression_level: int = 6
    num_shards: int = 0  # 0: one per ~1M rows, at least 2, at most one per row group
    read_batch_rows: int = 8192  # rows per Arrow batch read and encoded at a time, at most
    # Bytes per batch read, encoded and buffered for a columnar record, about (rows of a file
    # sized by its footer's uncompressed column sizes): rows of thousands of columns would
    # otherwise make batches of hundreds of MiB. Narrow rows stay at `read_batch_rows`.
    read_batch_bytes: int = DEFAULT_READ_BATCH_BYTES
    # Rows per columnar batch record (`columnar/` beside the per-row shards); 0: none written.
    # Off unless asked: only `tfx_tabular.input_fn` reads them, and they cost conversion time
    # (`create_pipeline` asks for them, its trainer being TabularTrainer).
    columnar_batch_rows: int = 0
    # Also the strings themselves in the columnar records, for a trainer that reads them exactly
    # (a stock run_fn, a Transform graph): they cost disk and conversion time.
    columnar_strings: bool = False

    def __post_init__(self):
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, not {self.compression!r}")
        if self.read_batch_bytes <= 0:
            raise ValueError(f"read_batch_bytes must be positive, not {self.read_batch_bytes}")
        if self.columnar_batch_rows < 0:
            raise ValueError(
                f"columnar_batch_rows must be 0 (none) or positive, not {self.columnar_batch_rows}"
            )
        if self.columnar_strings and not self.columnar_batch_rows:
            raise ValueError(
                "columnar_strings puts the strings in the columnar batch records: it needs "
                f"columnar_batch_rows too (e.g. {columnar.DEFAULT_BATCH_ROWS})"
            )

    @property
    def suffix(self) -> str:
        return ".gz" if self.compression == "gzip" else ""


def sized_for(options: OutputOptions, dataset: Dataset) -> OutputOptions:
    """`options` with the columnar records' rows cut to about `read_batch_bytes` of the widest file's
    rows (whole runs of rows, at least one): each converting thread buffers a record's rows per split.
    The same on every worker (footers only), and the layout records it."""
    if not options.columnar_batch_rows or not dataset.files:
        return options
    widest = max(dataset.files, key=row_bytes)
    rows = rows_for_bytes(widest, options.read_batch_bytes, options.columnar_batch_rows)
    if rows < options.columnar_batch_rows:
        rows = max(columnar.RUN_ROWS, rows // columnar.RUN_ROWS * columnar.RUN_ROWS)
    return dataclasses.replace(options, columnar_batch_rows=min(rows, options.columnar_batch_rows))


def plan_shards(dataset: Dataset, num_shards: int) -> list[list[tuple[int, tuple[int, ...]]]]:
    """Row groups dealt into shards of about equal rows (deterministic); each item is
    (file index, row group indices)."""
    units = [
        (i, g, rows) for i, f in enumerate(dataset.files) for g, rows in enumerate(f.row_group_rows)
    ]
    if num_shards <= 0:
        num_shards = max(2, round(dataset.num_rows / 1_000_000))
    num_shards = max(1, min(num_shards, len(units)))
    loads = np.zeros(num_shards, dtype=np.int64)
    shards: list[dict[int, list[int]]] = [{} for _ in range(num_shards)]
    for file_index, group, rows in sorted(units, key=lambda u: -u[2]):
        target = int(np.argmin(loads))
        loads[target] += rows
        shards[target].setdefault(file_index, []).append(group)
    return [[(fi, tuple(sorted(groups))) for fi, groups in sorted(s.items())] for s in shards]


def shard_name(index: int, count: int, options: OutputOptions) -> str:
    return f"data_tfrecord-{index:05d}-of-{count:05d}{options.suffix}"


def columnar_shard_name(index: int, count: int, options: OutputOptions) -> str:
    return f"data_columnar-{index:05d}-of-{count:05d}{options.suffix}"


@dataclasses.dataclass(frozen=True)
class ConversionConfig:
    """The conversion stage's settings, built once (from ParquetExampleGen's parameters or the
    CLI's flags) and passed down: what to read and how to split it (`source`), how to write
    (`output`)."""

    source: SourceOptions = SourceOptions()
    output: OutputOptions = OutputOptions()

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, object]) -> ConversionConfig:
        """The config of these parameters, named as the options' fields (ParquetExampleGen's spec
        uses the same names); other names are ignored, missing or None ones take the defaults."""

        def pick(options_class) -> dict:
            names = {f.name for f in dataclasses.fields(options_class)}
            # Lists (JSON-decoded parameters, CLI flags) as tuples: a config is immutable.
            return {
                k: tuple(v) if isinstance(v, list) else v
                for k, v in parameters.items()
                if k in names and v is not None
            }

        return cls(SourceOptions(**pick(SourceOptions)), OutputOptions(**pick(OutputOptions)))

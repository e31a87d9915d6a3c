"""Partitioned Parquet → TFRecord tf.Example shards, as one Beam pipeline.

Work is planned from Parquet footers: row groups are dealt into `num_shards` shards, and each
shard is one DoFn call that streams its row groups in bounded batches, encodes them
(`tfx_tabular.encoding`), hashes rows into splits and appends framed records to one temporary file
per split. No data passes through Beam's shuffle, so memory stays flat whatever the dataset size.
`finalize` checks every row was written and only then moves the shards into `Split-<name>/`.
A failed or killed run leaves nothing in place; a retried shard rewrites its own files whole.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import posixpath
import time
import uuid
import zlib
from typing import Iterator, Mapping, Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from tfx_tabular import encoding, parquet_source
from tfx_tabular.parquet_source import Dataset, InputError
from tfx_tabular.schemas.mapping import features_of

COMPRESSIONS = ("none", "gzip")
DEFAULT_BATCH_SIZE = 8192
DEFAULT_BUCKETS = (("train", 2), ("eval", 1))  # FileBasedExampleGen's default split
_TEMP_DIR = ".tfx-tabular-incomplete"
# The source's Arrow schema (partition columns included) with footer statistics and row count in
# its metadata (parquet_source.SourceSummary), beside the Split-* folders.
SOURCE_SCHEMA_FILE = "source_schema.arrow"


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


def splits_by_partition(dataset: Dataset, key: str, values: Mapping[str, Sequence[str]] = None,
                        last: int = 0, last_split: str = "eval", rest: str = "train") -> Splits:
    """Splits by a partition value: explicit `values` per split, or the `last` N values → eval."""
    if key not in dataset.partition_columns:
        raise InputError(f"{key!r} is not a partition key of {dataset.base} "
                         f"(keys: {list(dataset.partition_columns)})")
    by_value: dict[str, str] = {}
    for split, split_values in (values or {}).items():
        by_value.update({str(v): split for v in split_values})
    if last:
        integer = pa.types.is_integer(dataset.schema.field(key).type)
        distinct = sorted({dict(f.partitions)[key] for f in dataset.files},
                          key=(int if integer else str))
        if len(distinct) <= last:
            raise InputError(f"partition {key!r} has {len(distinct)} values; cannot hold out {last}")
        by_value.update({v: last_split for v in distinct[-last:]})
    return Splits(file_splits={f.relative: by_value.get(dict(f.partitions)[key], rest)
                               for f in dataset.files})


def splits_by_patterns(dataset: Dataset, patterns: Mapping[str, str]) -> Splits:
    """Splits like FileBasedExampleGen's input_config: a glob (relative to the base) per split."""
    file_splits = {}
    for info in dataset.files:
        matches = [name for name, pattern in patterns.items()
                   if parquet_source.matches_pattern(info.relative, pattern)]
        if len(matches) > 1:
            raise InputError(f"{info.path} matches the patterns of splits {matches}")
        if matches:
            file_splits[info.relative] = matches[0]
    # As FileBasedExampleGen: a split whose pattern matches nothing is an error, not a split
    # silently missing from the output.
    used = set(file_splits.values())
    empty = [f"{name}: {pattern!r}" for name, pattern in patterns.items() if name not in used]
    if empty:
        raise InputError(f"split patterns match no Parquet file under {dataset.base}: "
                         f"{', '.join(empty)}")
    return Splits(file_splits=file_splits)


def plan_conversion(input_base: str, *, patterns: Optional[Mapping[str, str]] = None,
                    buckets: Optional[Mapping[str, int]] = None, split_keys: Sequence[str] = (),
                    split_by_partition: Optional[str] = None, eval_last_partitions: int = 1,
                    columns: Optional[Sequence[str]] = None, exclude_columns: Sequence[str] = (),
                    partition_filter: Optional[Mapping[str, Sequence[str]]] = None,
                    partition_types: Optional[Mapping[str, str]] = None,
                    decimal_as: str = "float") -> tuple[Dataset, Splits]:
    """Open the dataset and choose its splits, from the options the CLI and the component share.

    Several `patterns` → one split per pattern; otherwise `split_by_partition` (the last
    `eval_last_partitions` values → eval), otherwise hash `buckets` (default train=2, eval=1)
    over the whole row or over `split_keys`.
    """
    patterns = dict(patterns or {"single_split": "*"})
    dataset = parquet_source.open_dataset(
        input_base, list(patterns.values()), columns=columns, exclude_columns=exclude_columns,
        partition_filter=partition_filter, partition_types=partition_types, decimal_as=decimal_as)
    if len(patterns) > 1:
        return dataset, splits_by_patterns(dataset, patterns)
    if split_by_partition:
        return dataset, splits_by_partition(dataset, split_by_partition, last=eval_last_partitions)
    missing = [k for k in split_keys if k not in dataset.schema.names]
    if missing:
        raise InputError(f"split keys {missing} are not columns of {input_base}")
    buckets = tuple((buckets or dict(DEFAULT_BUCKETS)).items())
    if any(n <= 0 for _, n in buckets):
        raise ValueError(f"hash buckets must be positive: {dict(buckets)}")
    return dataset, Splits(buckets=buckets, keys=tuple(split_keys))


@dataclasses.dataclass(frozen=True)
class OutputOptions:
    compression: str = "none"
    compression_level: int = 6
    num_shards: int = 0  # 0: one per ~1M rows, at least 2, at most one per row group
    batch_size: int = DEFAULT_BATCH_SIZE

    def __post_init__(self):
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, not {self.compression!r}")

    @property
    def suffix(self) -> str:
        return ".gz" if self.compression == "gzip" else ""


def plan_shards(dataset: Dataset, num_shards: int) -> list[list[tuple[int, tuple[int, ...]]]]:
    """Row groups dealt into shards of about equal rows (deterministic); each item is
    (file index, row group indices)."""
    units = [(i, g, rows) for i, f in enumerate(dataset.files) for g, rows in enumerate(f.row_group_rows)]
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


class _FileWriter:
    """Appends bytes to a new file (through Beam's filesystems), optionally gzip-compressed."""

    def __init__(self, path: str, options: OutputOptions):
        # UNCOMPRESSED: Beam would otherwise gzip *.gz paths a second time.
        self._handle = FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
        self._gzip = (zlib.compressobj(options.compression_level, zlib.DEFLATED, 31)
                      if options.compression == "gzip" else None)

    def write(self, data) -> None:  # bytes or a uint8 array (no copy)
        self._handle.write(self._gzip.compress(data) if self._gzip else data)

    def close(self) -> None:
        if self._gzip:
            self._handle.write(self._gzip.flush())
        self._handle.close()


class ConvertShard(beam.DoFn):
    """Converts one shard (a list of row groups) into one temporary file per split."""

    def __init__(self, dataset: Dataset, shards, splits: Splits, temp_dir: str,
                 options: OutputOptions):
        self._dataset = dataset
        self._shards = shards
        self._splits = splits
        self._temp_dir = temp_dir
        self._options = options

    def setup(self):
        self._features = self._dataset.features
        self._key_features = (features_of(pa.schema([self._dataset.schema.field(k)
                                                     for k in self._splits.keys]),
                                          self._dataset.decimal_as)
                              if self._splits.keys else None)
        names = self._splits.names
        self._split_index = {name: i for i, name in enumerate(names)}
        if self._splits.file_splits is None:
            self._bucket_split = np.repeat(np.arange(len(names), dtype=np.int64),
                                           [n for _, n in self._splits.buckets])

    def _split_ids(self, encoded: encoding.EncodedBatch, batch, relative: str) -> np.ndarray:
        if self._splits.file_splits is not None:
            return np.full(len(encoded), self._split_index[self._splits.file_splits[relative]])
        if self._key_features is not None:
            keys = pa.RecordBatch.from_arrays(
                [batch.column(batch.schema.get_field_index(k)) for k in self._splits.keys],
                list(self._splits.keys))
            hashes = encoding.encode(keys, self._key_features).fingerprints()
        else:
            hashes = encoded.fingerprints()
        return self._bucket_split[hashes % np.uint64(len(self._bucket_split))]

    def process(self, shard_index: int) -> Iterator[dict]:
        count = len(self._shards)
        names = self._splits.names
        writers = []
        try:
            for name in names:
                writers.append(_FileWriter(posixpath.join(
                    self._temp_dir, name, shard_name(shard_index, count, self._options)),
                    self._options))
            rows = self._write_shard(shard_index, writers)
        except BaseException:
            # Close on errors too: an object store would otherwise upload the partial files
            # whenever the writers are garbage-collected, possibly after `discard` ran. A close
            # failing now must not hide the error that names the bad file.
            for writer in writers:
                with contextlib.suppress(Exception):
                    writer.close()
            raise
        for writer in writers:
            writer.close()
        stats = {"shard": shard_index, "rows": dict(zip(names, rows.tolist()))}
        with FileSystems.create(posixpath.join(self._temp_dir, "stats",
                                               f"shard-{shard_index:05d}.json")) as handle:
            handle.write(json.dumps(stats).encode())
        yield stats

    def _write_shard(self, shard_index: int, writers: list[_FileWriter]) -> np.ndarray:
        """Encodes the shard's row groups into the split writers; returns rows per split."""
        rows = np.zeros(len(writers), dtype=np.int64)
        for file_index, row_groups in self._shards[shard_index]:
            info = self._dataset.files[file_index]
            if self._splits.file_splits is not None and info.relative not in self._splits.file_splits:
                continue
            for batch in parquet_source.read_batches(self._dataset, info, row_groups,
                                                     self._options.batch_size):
                try:
                    encoded = encoding.encode(batch, self._features, framed=True)
                except encoding.ConversionError as e:
                    raise InputError(f"{info.path}: {e}") from None
                split_ids = self._split_ids(encoded, batch, info.relative)
                for s, writer in enumerate(writers):
                    chosen = np.flatnonzero(split_ids == s)
                    if len(chosen) == len(split_ids):
                        writer.write(encoded.buffer)
                    elif len(chosen):
                        writer.write(encoding.gather_records(encoded.buffer, encoded.offsets,
                                                             chosen))
                    rows[s] += len(chosen)
        return rows


class WriteExamples(beam.PTransform):
    """Root transform: writes the dataset's shards into `temp_dir` (see `finalize`)."""

    def __init__(self, dataset: Dataset, splits: Splits, temp_dir: str, options: OutputOptions):
        super().__init__()
        self._dataset, self._splits, self._temp_dir, self._options = dataset, splits, temp_dir, options
        files = [f for f in dataset.files
                 if splits.file_splits is None or f.relative in splits.file_splits]
        if not sum(f.num_rows for f in files):
            # An Examples artifact without rows only fails later and less clearly (the Trainer's
            # steps per epoch would be 0): refuse it here, naming the files.
            shown = ", ".join(f.relative for f in files[:5]) + (", ..." if len(files) > 5 else "")
            raise InputError(f"no rows to convert: the {len(files)} Parquet file(s) under "
                             f"{dataset.base} hold 0 rows ({shown})")
        self.shards = plan_shards(dataset, options.num_shards)

    def expand(self, pipeline):
        return (pipeline
                | "ShardIds" >> beam.Create(range(len(self.shards)))
                | "Distribute" >> beam.Reshuffle()
                | "ConvertShard" >> beam.ParDo(ConvertShard(self._dataset, self.shards,
                                                            self._splits, self._temp_dir,
                                                            self._options)))


@dataclasses.dataclass
class ConversionResult:
    output_dir: str
    rows: dict[str, int]
    num_shards: int
    compression: str
    seconds: float = 0.0

    @property
    def rows_per_second(self) -> float:
        return sum(self.rows.values()) / self.seconds if self.seconds else 0.0


def temp_dir_for(output_dir: str) -> str:
    return posixpath.join(output_dir, _TEMP_DIR, uuid.uuid4().hex)


def finalize(dataset: Dataset, splits: Splits, temp_dir: str, output_dir: str,
             num_shards: int, options: OutputOptions) -> ConversionResult:
    """Check every row was written, then move the shards into `Split-<name>/` folders."""
    stats_files = FileSystems.match([posixpath.join(temp_dir, "stats", "*.json")])[0].metadata_list
    if len(stats_files) != num_shards:
        raise RuntimeError(f"{len(stats_files)} of {num_shards} shards finished; output not published")
    rows = dict.fromkeys(splits.names, 0)
    for meta in stats_files:
        with FileSystems.open(meta.path) as handle:
            for name, count in json.loads(handle.read())["rows"].items():
                rows[name] += count
    expected = (dataset.num_rows if splits.file_splits is None else
                sum(f.num_rows for f in dataset.files if f.relative in splits.file_splits))
    if sum(rows.values()) != expected:
        raise RuntimeError(f"wrote {sum(rows.values())} rows but the footers count {expected}; "
                           "output not published")
    sources, targets = [], []
    for name in splits.names:
        for i in range(num_shards):
            sources.append(posixpath.join(temp_dir, name, shard_name(i, num_shards, options)))
            targets.append(posixpath.join(output_dir, f"Split-{name}", shard_name(i, num_shards, options)))
    for target_dir in {posixpath.dirname(t) for t in targets}:
        if not FileSystems.exists(target_dir):
            FileSystems.mkdirs(target_dir)
    FileSystems.rename(sources, targets)
    with FileSystems.create(posixpath.join(output_dir, SOURCE_SCHEMA_FILE)) as handle:
        handle.write(dataset.summary().to_arrow_schema().serialize().to_pybytes())
    delete_tree(posixpath.dirname(temp_dir))
    return ConversionResult(output_dir, rows, num_shards, options.compression)


# Threads, not processes: the encoder kernels, Arrow's readers and file writes all release the GIL,
# so one thread per core scales like worker processes without their ~5 s start-up per run.
DIRECT_RUNNER_DEFAULTS = ["--direct_running_mode=multi_threading", "--direct_num_workers=0"]


def beam_args_with_defaults(beam_pipeline_args: Sequence[str]) -> list[str]:
    """Local runs use every core: the DirectRunner with one thread per core, unless told otherwise."""
    args = list(beam_pipeline_args)
    if not any(a.startswith(("--runner", "--direct_running_mode", "--direct_num_workers"))
               for a in args):
        args += DIRECT_RUNNER_DEFAULTS
    return args


def convert(dataset: Dataset, output_dir: str, splits: Splits = Splits(),
            options: OutputOptions = OutputOptions(),
            beam_pipeline_args: Sequence[str] = ()) -> ConversionResult:
    """Run the conversion as its own Beam pipeline and publish the splits under `output_dir`."""
    existing = FileSystems.match([posixpath.join(output_dir, "Split-*", "*")])[0].metadata_list
    if existing:
        raise InputError(f"{output_dir} already holds Split-* output; choose an empty folder")
    temp_dir = temp_dir_for(output_dir)
    start = time.perf_counter()
    write = WriteExamples(dataset, splits, temp_dir, options)
    try:
        with beam.Pipeline(options=PipelineOptions(beam_args_with_defaults(beam_pipeline_args))) as p:
            _ = p | "WriteExamples" >> write
        result = finalize(dataset, splits, temp_dir, output_dir, len(write.shards), options)
    except BaseException:
        discard(output_dir)
        raise
    result.seconds = time.perf_counter() - start
    return result


def discard(output_dir: str) -> None:
    """Remove the temporary output of failed runs."""
    delete_tree(posixpath.join(output_dir, _TEMP_DIR))


def delete_tree(folder: str) -> None:
    """Delete a folder and everything below it, on file systems and object stores alike."""
    if FileSystems.exists(folder):  # a real directory: deleted recursively
        FileSystems.delete([folder])
        return
    # On gs:// and s3:// a folder is only a name prefix: delete the objects under it.
    objects = FileSystems.match([folder.rstrip("/") + "/**"])[0].metadata_list
    if objects:
        FileSystems.delete([m.path for m in objects])

"""The Beam conversion: partitioned Parquet → TFRecord tf.Example shards in a staging folder.

Work is planned from Parquet footers (`plan`): row groups are dealt into `num_shards` shards, and
each shard is one DoFn call that streams its row groups in bounded batches, encodes them
(`tfx_tabular.coders.encoding`), hashes rows into splits and appends framed records to one
temporary file per split; with statistics, each shard's split statistics go to a part file
beside them. No data passes through Beam's shuffle, so memory stays flat whatever the dataset
size. `publish` then checks and moves the files; a retried shard rewrites its own files whole.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import threading
import time
import zlib
from typing import Callable, Iterator, Optional

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from tfx_tabular import statistics
from tfx_tabular.coders import columnar, encoding, flatten
from tfx_tabular.coders.pools import PooledColumns, StringFingerprints
from tfx_tabular.conversion.plan import (
    OutputOptions,
    Splits,
    columnar_shard_name,
    plan_shards,
    shard_name,
)
from tfx_tabular.runners import allocator
from tfx_tabular.source.dataset import Dataset
from tfx_tabular.source.errors import ColumnError, InputError
from tfx_tabular.source.files import ParquetFileInfo
from tfx_tabular.source.mapping import features_of
from tfx_tabular.source.reading import read_batches, row_bytes, rows_for_bytes

PROGRESS_DIR = "progress"
# In the staging folder: one file per finished shard with its rows per split; written last, so
# `publish` knows the shard is complete.
ROW_COUNTS_DIR = "row_counts"
# Rows read at a time with statistics (encoded `read_batch_rows` rows at a time): a row group of the
# common writers' size, so the statistics count whole row groups, each dictionary page once
# (the price: each converting thread holds a decoded row group, not `read_batch_rows` rows), unless
# that exceeds `OutputOptions.read_batch_bytes` (wide rows).
STATISTICS_READ_ROWS = 65_536
# A step's encoded records are held with each split's copy of its share of them, beside the read
# batch: a step encodes at most this share of `read_batch_bytes` (a step is one compiled call, so
# smaller steps cost about nothing; on wide rows this is tens of MiB less per converting thread).
ENCODED_STEP_SHARE = 0.25
FEATURE_STATS_DIR = "feature_stats"  # in the staging folder: Split-<name>/FeatureStats.pb
# In the staging folder: <split>/shard-<index>, each shard's SplitStatistics bytes, merged by
# `publish`. Files, not Beam outputs: the parts a runner held until a merge stage made peak
# memory grow with the number of shards, and that stage's start-up and GIL-bound merges cost more
# than the merge itself.
STATISTICS_PARTS_DIR = "statistics_parts"
# In the staging folder: <split>/<columnar shard>, each shard's columnar batch records.
COLUMNAR_DIR = "columnar"
# In the staging folder: shard-<index>.json, the input error a shard stopped on (its message,
# and whether a column's). Recorded, not raised: each runner carries an exception raised in a
# worker back differently (the DirectRunner's threads and processes as a RuntimeError holding a
# traceback's text, portable runners and Dataflow inside a failed job's message), and prints or
# logs its traceback on the way. The staging folder, which every runner's workers and the driver
# share, carries the error back whole on all of them, and tells the other shards to stop.
FAILURES_DIR = "failures"


def columnar_part(temp_dir: str, split: str, shard_index: int, count: int, options) -> str:
    return posixpath.join(
        temp_dir, COLUMNAR_DIR, split, columnar_shard_name(shard_index, count, options)
    )


def statistics_part(temp_dir: str, split: str, shard_index: int) -> str:
    return posixpath.join(temp_dir, STATISTICS_PARTS_DIR, split, f"shard-{shard_index:05d}")


def _record_failure(temp_dir: str, shard_index: int, error: InputError) -> None:
    kind = "column" if isinstance(error, ColumnError) else "input"
    path = posixpath.join(temp_dir, FAILURES_DIR, f"shard-{shard_index:05d}.json")
    with FileSystems.create(path) as handle:
        handle.write(json.dumps({"kind": kind, "message": str(error)}).encode())


def _failures(temp_dir: str) -> list[str]:
    found = FileSystems.match([posixpath.join(temp_dir, FAILURES_DIR, "*.json")])[0]
    return sorted(meta.path for meta in found.metadata_list)


def recorded_failure(temp_dir: str) -> Optional[InputError]:
    """The input error the first failed shard (by index: the same whatever order they ran in)
    recorded, as its type (a ColumnError keeps its hint and exit code); None if none failed."""
    failures = _failures(temp_dir)
    if not failures:
        return None
    with FileSystems.open(failures[0]) as handle:
        record = json.loads(handle.read())
    return (ColumnError if record["kind"] == "column" else InputError)(record["message"])


class _ShardProgress:
    """A shard's written rows: a Beam counter (runner UIs, the final metrics) and, at most every
    `every` seconds, a small file in the staging folder that the driver polls for its progress
    display (the DirectRunner gives its driver no metrics before the pipeline ends). At the same
    pace it looks for another shard's recorded failure: `stopped` then says to stop converting."""

    ROWS = Metrics.counter("tfx_tabular", "rows_converted")

    def __init__(self, temp_dir: str, shard_index: int, every: float = 1.0):
        self._temp_dir = temp_dir
        self._path = posixpath.join(temp_dir, PROGRESS_DIR, f"shard-{shard_index:05d}.json")
        self._every, self._last, self.rows = every, float("-inf"), 0
        self.stopped = False

    def add(self, rows: int) -> None:
        self.ROWS.inc(rows)
        self.rows += rows
        if time.monotonic() - self._last >= self._every:
            self.write()
            self.stopped = bool(_failures(self._temp_dir))

    def write(self) -> None:
        self._last = time.monotonic()
        with FileSystems.create(self._path) as handle:
            handle.write(json.dumps({"rows": self.rows}).encode())


def _rows_written(temp_dir: str) -> int:
    files = FileSystems.match([posixpath.join(temp_dir, PROGRESS_DIR, "*.json")])[0].metadata_list
    total = 0
    for meta in files:
        with contextlib.suppress(Exception):  # a file being rewritten: counted next time
            with FileSystems.open(meta.path) as handle:
                total += json.loads(handle.read())["rows"]
    return total


@contextlib.contextmanager
def watching(temp_dir: str, on_progress: Optional[Callable[[int], None]], every: float = 0.5):
    """Call `on_progress(rows written)` from a thread while the pipeline runs."""
    if on_progress is None:
        yield
        return
    stop = threading.Event()

    def poll():
        while not stop.wait(every):
            with contextlib.suppress(Exception):
                on_progress(_rows_written(temp_dir))

    thread = threading.Thread(target=poll, daemon=True, name="conversion-progress")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class _FileWriter:
    """Appends bytes to a new file (through Beam's filesystems), optionally gzip-compressed."""

    def __init__(self, path: str, options: OutputOptions):
        # UNCOMPRESSED: Beam would otherwise gzip *.gz paths a second time.
        self._handle = FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
        self._gzip = (
            zlib.compressobj(options.compression_level, zlib.DEFLATED, 31)
            if options.compression == "gzip"
            else None
        )

    def write(self, data) -> None:  # bytes or a uint8 array (no copy)
        self._handle.write(self._gzip.compress(data) if self._gzip else data)

    def close(self) -> None:
        if self._gzip:
            self._handle.write(self._gzip.flush())
        self._handle.close()


class _ColumnarBatches:
    """A shard's columnar batch records, one writer per split (none: not written)."""

    def __init__(self, features, writers: list[_FileWriter], options: OutputOptions):
        order = flatten.written_order(features)
        self._writers = writers
        self._buffers = [
            columnar.RecordBuffer(order, options.columnar_batch_rows, options.columnar_strings)
            for _ in writers
        ]

    def add(self, pooled: PooledColumns, split_ids: np.ndarray) -> None:
        if not self._writers:
            return
        for s, (writer, buffer) in enumerate(zip(self._writers, self._buffers, strict=True)):
            chosen = None if len(self._writers) == 1 else np.flatnonzero(split_ids == s)
            for record in buffer.add(pooled, chosen):
                writer.write(record)

    def flush(self) -> None:
        for writer, buffer in zip(self._writers, self._buffers, strict=True):
            for record in buffer.flush():
                writer.write(record)


class ConvertShard(beam.DoFn):
    """Converts one shard (a list of row groups) into one temporary file per split; with
    `with_example_statistics`, also writes each split's SplitStatistics into STATISTICS_PARTS_DIR."""

    def __init__(
        self,
        dataset: Dataset,
        shards,
        splits: Splits,
        temp_dir: str,
        options: OutputOptions,
        with_example_statistics: bool = False,
    ):
        self._dataset = dataset.for_reading()
        self._shards = shards
        self._splits = splits
        self._temp_dir = temp_dir
        self._options = options
        self._with_example_statistics = with_example_statistics

    def setup(self):
        allocator.reuse_freed_memory()
        self._features = self._dataset.features
        self._written_names = [f.name for f in flatten.written_order(self._features)]
        # A record's bytes per row beyond the values: each feature's key and field headers.
        self._key_bytes = sum(len(f.name.encode()) + 8 for f in self._features)
        self._key_features = (
            features_of(
                pa.schema([self._dataset.schema.field(k) for k in self._splits.keys]),
                self._dataset.decimal_as,
            )
            if self._splits.keys
            else None
        )
        names = self._splits.names
        self._split_index = {name: i for i, name in enumerate(names)}
        if self._splits.file_splits is None:
            self._bucket_split = np.repeat(
                np.arange(len(names), dtype=np.int64), [n for _, n in self._splits.buckets]
            )

    def _split_ids(self, encoded: encoding.EncodedBatch, batch, relative: str) -> np.ndarray:
        if self._splits.file_splits is not None:
            return np.full(len(encoded), self._split_index[self._splits.file_splits[relative]])
        if self._key_features is not None:
            keys = pa.RecordBatch.from_arrays(
                [batch.column(batch.schema.get_field_index(k)) for k in self._splits.keys],
                list(self._splits.keys),
            )
            hashes = encoding.encode(keys, self._key_features).fingerprints()
        else:
            hashes = encoded.fingerprints()
        return self._bucket_split[hashes % np.uint64(len(self._bucket_split))]

    def process(self, shard_index: int) -> Iterator[dict]:
        try:
            written = self._convert(shard_index)
        except InputError as error:  # the input's fault: recorded for the driver (FAILURES_DIR)
            _record_failure(self._temp_dir, shard_index, error)
            return
        if written is None:  # another shard failed: this one stopped, and counts nothing
            return
        rows, non_finite = written
        row_counts = {
            "shard": shard_index,
            "rows": dict(zip(self._splits.names, rows.tolist(), strict=True)),
            "non_finite": {
                self._written_names[f]: non_finite[f].tolist()
                for f in np.flatnonzero(non_finite.any(axis=1))
            },
        }
        with FileSystems.create(
            posixpath.join(self._temp_dir, ROW_COUNTS_DIR, f"shard-{shard_index:05d}.json")
        ) as handle:
            handle.write(json.dumps(row_counts).encode())
        yield row_counts

    def _open_writers(self, shard_index: int, writers: list[_FileWriter]) -> None:
        """Appends the shard's writers, one per split (and one per split of columnar records),
        to `writers` as each opens (those opened before a failure are closed with the others)."""
        count = len(self._shards)
        for name in self._splits.names:
            path = posixpath.join(
                self._temp_dir, name, shard_name(shard_index, count, self._options)
            )
            writers.append(_FileWriter(path, self._options))
        if self._options.columnar_batch_rows:
            for name in self._splits.names:
                path = columnar_part(self._temp_dir, name, shard_index, count, self._options)
                writers.append(_FileWriter(path, self._options))

    def _convert(self, shard_index: int) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """Writes the shard's files (and statistics parts); returns its rows per split and its
        non-finite counts (`_write_shard`), or None if it stopped because another shard failed."""
        names = self._splits.names
        writers: list[_FileWriter] = []
        try:
            self._open_writers(shard_index, writers)
            split_statistics = (
                [statistics.SplitStatistics(self._features) for _ in names]
                if self._with_example_statistics
                else None
            )
            written = self._write_shard(shard_index, writers, split_statistics)
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
        if written is not None and split_statistics is not None:
            for name, split in zip(names, split_statistics, strict=True):
                with FileSystems.create(
                    statistics_part(self._temp_dir, name, shard_index)
                ) as handle:
                    handle.write(statistics.encode_part(split))
        return written

    def _write_shard(
        self,
        shard_index: int,
        writers: list[_FileWriter],
        split_statistics: Optional[list[statistics.SplitStatistics]],
    ) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """Encodes the shard's row groups into the split writers (and their rows into
        `split_statistics`, if given); returns rows per split and each written feature's count
        of NaN, +inf and -inf values ([feature, 3], in `_written_names`' order), or None if it
        stopped because another shard failed."""
        splits = len(self._splits.names)
        writers, columnar_writers = writers[:splits], writers[splits:]
        batches = _ColumnarBatches(self._features, columnar_writers, self._options)
        rows = np.zeros(len(writers), dtype=np.int64)
        non_finite = np.zeros((len(self._written_names), 3), np.int64)
        progress = _ShardProgress(self._temp_dir, shard_index)
        fingerprints = StringFingerprints() if columnar_writers else None
        for file_index, row_groups in self._shards[shard_index]:
            info = self._dataset.files[file_index]
            if (
                self._splits.file_splits is not None
                and info.relative not in self._splits.file_splits
            ):
                continue
            read_rows, step = self._batch_rows(info, split_statistics is not None)
            for batch in read_batches(
                self._dataset,
                info,
                row_groups,
                read_rows,
                string_dictionaries=True,
                narrow=True,
            ):
                try:
                    columns = flatten.feature_columns(batch, self._features)
                except flatten.ConversionError as e:
                    raise ColumnError(f"{info.path}: {e}") from None
                pooled = PooledColumns(columns, fingerprints)
                split_ids = self._write_batch(writers, rows, batch, pooled, info.relative, step)
                batches.add(pooled, split_ids)
                pooled.count_non_finite(non_finite)
                if split_statistics is not None:
                    statistics.add_batch(split_statistics, columns, pooled, split_ids)
                progress.add(len(split_ids))
                # Freed before the next batch is read and decoded, not when it replaces them:
                # a wide table's batch arrays held twice made a converting thread's peak.
                del batch, columns, pooled
                if progress.stopped:
                    return None
        batches.flush()
        progress.write()
        return rows, non_finite

    def _batch_rows(self, info: ParquetFileInfo, with_example_statistics: bool) -> tuple[int, int]:
        """Rows of `info` read at a time, and encoded at a time: `read_batch_rows` (with statistics,
        STATISTICS_READ_ROWS read), at most about `read_batch_bytes` of them read, and
        ENCODED_STEP_SHARE of that encoded (a record also holds every feature's name: wide rows
        grow several times when encoded)."""
        budget, most = self._options.read_batch_bytes, self._options.read_batch_rows
        if with_example_statistics:
            most = max(most, STATISTICS_READ_ROWS)
        read_rows = rows_for_bytes(info, budget, most)
        encoded_row = row_bytes(info) + self._key_bytes
        encoded_budget = budget * ENCODED_STEP_SHARE
        step = max(
            1, min(read_rows, self._options.read_batch_rows, int(encoded_budget // encoded_row))
        )
        return read_rows, step

    def _write_batch(self, writers, rows, batch: pa.RecordBatch, pooled, relative: str, step):
        """Encodes a read batch (`pooled`) `step` rows at a time into the split writers; returns
        each row's split."""
        all_ids = []
        for start in range(0, batch.num_rows, step):
            stop = min(start + step, batch.num_rows)
            encoded = encoding.encode_rows(pooled, start, stop, framed=True)
            split_ids = self._split_ids(encoded, batch.slice(start, stop - start), relative)
            for s, writer in enumerate(writers):
                chosen = np.flatnonzero(split_ids == s)
                if len(chosen) == len(split_ids):
                    writer.write(encoded.buffer)
                elif len(chosen):
                    writer.write(encoding.gather_records(encoded.buffer, encoded.offsets, chosen))
                rows[s] += len(chosen)
            all_ids.append(split_ids)
            del encoded  # before the next step's records are encoded beside it
        return np.concatenate(all_ids) if all_ids else np.zeros(0, np.int64)


class WriteExamples(beam.PTransform):
    """Root transform: writes the dataset's shards into `temp_dir` (see `publish`) and, with
    `with_example_statistics`, each shard's statistics per split (`statistics_part`)."""

    def __init__(
        self,
        dataset: Dataset,
        splits: Splits,
        temp_dir: str,
        options: OutputOptions,
        with_example_statistics: bool = False,
    ):
        super().__init__()
        self._dataset, self._splits, self._temp_dir, self._options = (
            dataset,
            splits,
            temp_dir,
            options,
        )
        self._with_example_statistics = with_example_statistics
        files = [
            f
            for f in dataset.files
            if splits.file_splits is None or f.relative in splits.file_splits
        ]
        if not sum(f.num_rows for f in files):
            # An Examples artifact without rows only fails later and less clearly (the Trainer's
            # steps per epoch would be 0): refuse it here, naming the files.
            shown = ", ".join(f.relative for f in files[:5]) + (", ..." if len(files) > 5 else "")
            raise InputError(
                f"no rows to convert: the {len(files)} Parquet file(s) under "
                f"{dataset.base} hold 0 rows ({shown})"
            )
        self.shards = plan_shards(dataset, options.num_shards)

    def expand(self, pipeline):
        convert = ConvertShard(
            self._dataset,
            self.shards,
            self._splits,
            self._temp_dir,
            self._options,
            self._with_example_statistics,
        )
        shards = (
            pipeline
            | "ShardIds" >> beam.Create(range(len(self.shards)))
            | "Distribute" >> beam.Reshuffle()
        )
        return shards | "ConvertShard" >> beam.ParDo(convert)

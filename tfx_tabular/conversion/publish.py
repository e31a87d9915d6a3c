"""Publishing a conversion: check that every row was written, merge each split's statistics,
claim the output (one run of two racing for a folder publishes) and only then move the shards
into `Split-<name>/`. A failed or killed run leaves nothing in place (`staging`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import json
import posixpath
from typing import Iterator, Optional, Sequence

from apache_beam.io.filesystems import FileSystems

from tfx_tabular import statistics
from tfx_tabular.coders import columnar, flatten
from tfx_tabular.conversion.plan import OutputOptions, Splits, columnar_shard_name, shard_name
from tfx_tabular.conversion.source_metadata import SOURCE_METADATA_FILE, SourceMetadata
from tfx_tabular.conversion.staging import Staging
from tfx_tabular.conversion.transform import (
    FEATURE_STATS_DIR,
    ROW_COUNTS_DIR,
    columnar_part,
    statistics_part,
)
from tfx_tabular.runners.interrupts import uninterruptible
from tfx_tabular.source.column_reads import read_column_stats
from tfx_tabular.source.dataset import Dataset

# Where the warning about non-finite values points people.
NON_FINITE_DOCS = "docs/examplegen.md#non-finite-values"


@dataclasses.dataclass(frozen=True)
class NonFinite:
    """A float feature's NaN, +inf and -inf values, as written into the Examples."""

    column: str
    feature: str
    nan: int
    pos_inf: int
    neg_inf: int

    @classmethod
    def of(cls, dataset: Dataset, counts: dict[str, list[int]]) -> list[NonFinite]:
        columns = {f.name: f.column for f in dataset.features}
        return [cls(columns[name], name, *counted) for name, counted in counts.items()]

    def warning(self, rows: int) -> str:
        named = f"column {self.column!r}"
        if self.feature != self.column:
            named += f" (feature {self.feature!r})"
        counted = [(self.pos_inf, "+inf"), (self.neg_inf, "-inf"), (self.nan, "NaN")]
        held = ", ".join(f"{count:,} {what}" for count, what in counted if count)
        return (
            f"{named} holds non-finite values ({held} in {rows:,} rows), kept in the Examples "
            f"as written; see {NON_FINITE_DOCS}"
        )


@dataclasses.dataclass
class ConversionResult:
    output_dir: str
    rows: dict[str, int]
    num_shards: int
    compression: str
    seconds: float = 0.0
    example_statistics_dir: Optional[str] = None  # Split-<name>/FeatureStats.pb, when computed
    columnar_batch_rows: int = 0  # rows per columnar batch record (`columnar/`); 0: none
    columnar_strings: bool = False  # whether the columnar batches hold the strings too
    non_finite: list[NonFinite] = dataclasses.field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """A line per float feature holding NaN or ±inf (the run logs them)."""
        return [counted.warning(sum(self.rows.values())) for counted in self.non_finite]

    @property
    def rows_per_second(self) -> float:
        return sum(self.rows.values()) / self.seconds if self.seconds else 0.0


# Files per shard that `publish` reads (row counts, statistics parts), read this many ahead: an
# object store's latency per read would otherwise add up over thousands of shards; memory stays
# bounded by this many files.
READ_AHEAD = 8


def _read_ahead(paths: Sequence[str], depth: int = READ_AHEAD) -> Iterator[bytes]:
    """The files' contents in order, up to `depth` of them read concurrently ahead."""

    def read(path: str) -> bytes:
        with FileSystems.open(path) as handle:
            return handle.read()

    with concurrent.futures.ThreadPoolExecutor(depth) as pool:
        pending = collections.deque()
        for path in paths:
            pending.append(pool.submit(read, path))
            if len(pending) == depth:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _rows_per_split(temp_dir: str, splits: Splits, num_shards: int) -> tuple[dict, dict]:
    """Rows per split, and each feature's NaN, +inf and -inf values where it has any, summed
    over the shards' row counts."""
    counted = FileSystems.match([posixpath.join(temp_dir, ROW_COUNTS_DIR, "*.json")])[
        0
    ].metadata_list
    if len(counted) != num_shards:
        raise RuntimeError(f"{len(counted)} of {num_shards} shards finished; output not published")
    rows = dict.fromkeys(splits.names, 0)
    non_finite: dict[str, list[int]] = {}
    for data in _read_ahead([meta.path for meta in counted]):
        shard = json.loads(data)
        for name, count in shard["rows"].items():
            rows[name] += count
        for name, counts in shard["non_finite"].items():
            total = non_finite.setdefault(name, [0, 0, 0])
            total[:] = [a + b for a, b in zip(total, counts, strict=True)]
    return rows, dict(sorted(non_finite.items()))


def _move_shards(staging: Staging, splits: Splits, num_shards: int, options: OutputOptions):
    sources, targets = [], []
    for name in splits.names:
        for i in range(num_shards):
            shard = shard_name(i, num_shards, options)
            sources.append(posixpath.join(staging.folder, name, shard))
            targets.append(posixpath.join(staging.output_dir, f"Split-{name}", shard))
    for target_dir in {posixpath.dirname(t) for t in targets}:
        if not FileSystems.exists(target_dir):
            FileSystems.mkdirs(target_dir)
    FileSystems.rename(sources, targets)


def _move_columnar(
    staging: Staging, dataset: Dataset, rows: dict, num_shards: int, options: OutputOptions
) -> None:
    """The columnar batch records into `columnar/Split-<name>/`, and the layout that says what
    they hold (written last: a reader finds records only with their layout)."""
    folder = posixpath.join(staging.output_dir, columnar.FOLDER)
    sources, targets = [], []
    for name in rows:
        for i in range(num_shards):
            sources.append(columnar_part(staging.folder, name, i, num_shards, options))
            targets.append(
                posixpath.join(folder, f"Split-{name}", columnar_shard_name(i, num_shards, options))
            )
    for target_dir in {posixpath.dirname(t) for t in targets}:
        if not FileSystems.exists(target_dir):
            FileSystems.mkdirs(target_dir)
    FileSystems.rename(sources, targets)
    layout = columnar.layout_of(
        flatten.written_order(dataset.features),
        options.columnar_batch_rows,
        rows,
        options.columnar_strings,
    )
    with FileSystems.create(posixpath.join(folder, columnar.LAYOUT_FILE)) as handle:
        handle.write(layout.to_json().encode())


def _merge_statistics(staging: Staging, splits: Splits, num_shards: int) -> list[str]:
    """Each split's statistics, merged from its shards' parts in shard order (the same result
    whatever order the shards finished in, on any runner), written into the staging folder as
    stock StatisticsGen writes them; returns their paths."""
    paths = []
    for name in splits.names:
        merged = statistics.SplitStatistics()
        parts = [statistics_part(staging.folder, name, i) for i in range(num_shards)]
        for part in _read_ahead(parts):
            merged.merge(statistics.decode_part(part))
        paths.append(
            posixpath.join(staging.folder, FEATURE_STATS_DIR, f"Split-{name}", statistics.FILE_NAME)
        )
        with FileSystems.create(paths[-1]) as handle:
            handle.write(statistics.serialized_statistics_list(merged))
    return paths


def _move_statistics(sources: list[str], splits: Splits, example_statistics_dir: str) -> None:
    targets = [
        posixpath.join(example_statistics_dir, f"Split-{name}", statistics.FILE_NAME)
        for name in splits.names
    ]
    for target in targets:
        if not FileSystems.exists(posixpath.dirname(target)):
            FileSystems.mkdirs(posixpath.dirname(target))
    FileSystems.rename(sources, targets)


def publish(
    dataset: Dataset,
    splits: Splits,
    staging: Staging,
    num_shards: int,
    options: OutputOptions,
    example_statistics_dir: Optional[str] = None,
) -> ConversionResult:
    """Check every row was written (and merge the statistics), claim the output, then move the
    shards into `Split-<name>/` (and the statistics into `example_statistics_dir`/`Split-<name>/`)."""
    rows, non_finite = _rows_per_split(staging.folder, splits, num_shards)
    expected = (
        dataset.num_rows
        if splits.file_splits is None
        else sum(f.num_rows for f in dataset.files if f.relative in splits.file_splits)
    )
    if sum(rows.values()) != expected:
        raise RuntimeError(
            f"wrote {sum(rows.values())} rows but the footers count {expected}; "
            "output not published"
        )
    merged_statistics = (
        _merge_statistics(staging, splits, num_shards)
        if example_statistics_dir is not None
        else None
    )
    # The side file holds every column's presence and exact domain, those its footers say
    # nothing of read from the columns: inference from the Examples needs no Parquet access.
    side_file = SourceMetadata.of(read_column_stats(dataset)[0]).to_arrow_schema().serialize()
    # From the claim on, all of the output or none of it: a Ctrl-C or SIGTERM waits until the
    # files are in place.
    with uninterruptible():
        staging.claim(rows)
        _move_shards(staging, splits, num_shards, options)
        if options.columnar_batch_rows:
            _move_columnar(staging, dataset, rows, num_shards, options)
        if merged_statistics is not None:
            _move_statistics(merged_statistics, splits, example_statistics_dir)
        metadata_path = posixpath.join(staging.output_dir, SOURCE_METADATA_FILE)
        with FileSystems.create(metadata_path) as handle:
            handle.write(side_file.to_pybytes())
        staging.discard()
    return ConversionResult(
        staging.output_dir,
        rows,
        num_shards,
        options.compression,
        example_statistics_dir=example_statistics_dir,
        columnar_batch_rows=options.columnar_batch_rows,
        columnar_strings=bool(options.columnar_batch_rows and options.columnar_strings),
        non_finite=NonFinite.of(dataset, non_finite),
    )

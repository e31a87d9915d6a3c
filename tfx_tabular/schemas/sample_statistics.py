"""Sample statistics, an option of schema inference: TFDV on Beam over a row sample.

Adds what footers cannot tell: string domains (vocabularies up to a size cap), value-count ranges
of list features and observed presence fractions. The sample spans the source: an equal share of
every row group of every Parquet file, or records round-robin across the TFRecord shards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import posixpath
import tempfile
import time
import uuid
from typing import Optional, Sequence

from tensorflow_metadata.proto.v0 import schema_pb2

DEFAULT_SAMPLE_ROWS = 100_000
DEFAULT_MAX_VOCABULARY_SIZE = 1_000


@dataclasses.dataclass
class SampleStatisticsReport:
    """What the sample statistics cost and added: rows sampled, seconds, string domains."""

    rows: int
    seconds: float
    string_domains: int


def sample_parquet(dataset, rows: int, path: str) -> int:
    """Write up to `rows` rows of a Parquet dataset as tf.Examples, through the ExampleGen encoder:
    an equal share from the start of every row group of every file, so the sample spans files,
    partitions and the row groups within each file."""
    from tfx_tabular.coders import encoding
    from tfx_tabular.source.reading import read_batches

    units = [(info, group) for info in dataset.files for group in range(len(info.row_group_rows))]
    if not units:
        return 0
    share = max(1, -(-rows // len(units)))
    from apache_beam.io.filesystems import FileSystems

    count = 0
    with FileSystems.create(path) as out:
        for info, group in units:
            if count >= rows:
                break
            take = min(share, rows - count, info.row_group_rows[group])
            if take <= 0:
                continue
            batch = next(read_batches(dataset, info, [group], take), None)
            if batch is None:
                continue
            out.write(
                encoding.encode(
                    batch.slice(0, take), dataset.features, framed=True
                ).buffer.tobytes()
            )
            count += min(take, batch.num_rows)
    return count


def sample_examples(files: Sequence[str], rows: int, path: str) -> int:
    """Write up to `rows` records, round-robin across `files`, as one TFRecord file."""
    import tensorflow as tf

    gzip = [f for f in files if f.endswith(".gz")]
    plain = [f for f in files if not f.endswith(".gz")]
    parts = []
    for group, compression in ((plain, ""), (gzip, "GZIP")):
        if group:
            parts.append(
                tf.data.Dataset.from_tensor_slices(group).interleave(
                    lambda f, c=compression: tf.data.TFRecordDataset(f, compression_type=c),
                    cycle_length=len(group),
                    block_length=1,
                )
            )
    dataset = parts[0] if len(parts) == 1 else parts[0].concatenate(parts[1])
    count = 0
    with tf.io.TFRecordWriter(path) as writer:
        for record in dataset.take(rows):
            writer.write(record.numpy())
            count += 1
    return count


@contextlib.contextmanager
def _shared_folder(beam_pipeline_args: Sequence[str]):
    """A folder for the sample and its statistics that the runner's workers can read and write:
    `--temp_location` when given, else (the local DirectRunner only) a local temporary folder."""
    from apache_beam.options.pipeline_options import (
        GoogleCloudOptions,
        PipelineOptions,
        PortableOptions,
        StandardOptions,
    )

    from tfx_tabular.conversion.staging import delete_tree

    options = PipelineOptions(list(beam_pipeline_args))
    temp_location = options.view_as(GoogleCloudOptions).temp_location
    if temp_location:
        folder = posixpath.join(temp_location, f"tfx-tabular-sample-statistics-{uuid.uuid4().hex}")
        try:
            yield folder
        finally:
            delete_tree(folder)
        return
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    if (
        runner not in ("DirectRunner", "direct")
        or options.view_as(PortableOptions).environment_type
    ):
        from tfx_tabular.source.errors import InputError

        raise InputError(
            f"sample statistics on {runner} need --temp_location, a folder its workers share "
            "(gs://... or another Beam filesystem): the sample is staged there, not on this disk"
        )
    with tempfile.TemporaryDirectory() as folder:
        yield folder


def _generate_statistics(sample: str, output: str, max_vocabulary_size: int, beam_pipeline_args):
    """TFDV's generate_statistics_from_tfrecord, with the result read back through Beam's
    filesystems (TFDV reads it with tf.io.gfile, which knows fewer stores than the workers)."""
    import apache_beam as beam
    import tensorflow_data_validation as tfdv
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    from tensorflow_metadata.proto.v0 import statistics_pb2
    from tfx_bsl.public import tfxio

    stats_options = tfdv.StatsOptions(num_top_values=max_vocabulary_size + 1)
    source = tfxio.TFExampleRecord(file_pattern=sample, telemetry_descriptors=["tfx_tabular"])
    with beam.Pipeline(options=PipelineOptions(list(beam_pipeline_args))) as p:
        _ = (
            p
            | "ReadSample" >> source.BeamSource(stats_options.desired_batch_size)
            | "GenerateStatistics" >> tfdv.GenerateStatistics(stats_options)
            | "WriteStatistics" >> tfdv.WriteStatisticsToBinaryFile(output)
        )
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    with FileSystems.open(output) as handle:
        stats.ParseFromString(handle.read())
    return stats


def sample_statistics_overlay(
    source,
    sample_rows: int,
    max_vocabulary_size: int,
    beam_pipeline_args: Sequence[str] = (),
    base: Optional[schema_pb2.Schema] = None,
) -> tuple[schema_pb2.Schema, SampleStatisticsReport]:
    """`base` with string domains, value counts and presence from TFDV over a sample of
    `source`: a list of TFRecord tf.Example shards, or a `source.dataset.Dataset`. The sample and the
    statistics pass through a folder the runner's workers share (see `_shared_folder`)."""
    import tensorflow_data_validation as tfdv

    from tfx_tabular.runners.workers import check_sdk_workers

    start = time.perf_counter()
    with _shared_folder(beam_pipeline_args) as folder:
        from apache_beam.options.pipeline_options import PipelineOptions

        check_sdk_workers(PipelineOptions(list(beam_pipeline_args)))
        sample = posixpath.join(folder, "sample.tfrecord")
        sampler = sample_examples if isinstance(source, (list, tuple)) else sample_parquet
        rows = sampler(source, sample_rows, sample)
        stats = _generate_statistics(
            sample, posixpath.join(folder, "stats.pb"), max_vocabulary_size, beam_pipeline_args
        )
    observed = tfdv.infer_schema(
        stats, max_string_domain_size=max_vocabulary_size, infer_feature_shape=False
    )
    result = schema_pb2.Schema()
    if base is not None:
        result.CopyFrom(base)
    by_name = {f.name: f for f in result.feature}
    domains = {d.name: d for d in observed.string_domain}
    added = 0
    feature_stats = {f.path.step[0]: f for f in stats.datasets[0].features if f.path.step}
    for seen in observed.feature:
        target = by_name.get(seen.name)
        if target is None:
            continue
        if (
            seen.HasField("domain")
            and seen.domain in domains
            and not target.HasField("string_domain")
            and target.type == schema_pb2.BYTES
        ):
            target.string_domain.CopyFrom(domains[seen.domain])
            target.string_domain.name = seen.name
            added += 1
        common = _common_stats(feature_stats.get(seen.name))
        if common is None:
            continue
        if not target.HasField("shape") and common.max_num_values > 1:
            target.value_count.min = int(common.min_num_values)
            target.value_count.max = int(common.max_num_values)
        if rows and not target.presence.min_fraction == 1.0:
            # A constraint from a sample: 3 standard errors below the sampled fraction, so the
            # full data (or the next sample) does not trip ExampleValidator by chance.
            fraction = common.num_non_missing / rows
            bound = fraction - 3 * math.sqrt(fraction * (1 - fraction) / rows)
            target.presence.min_fraction = max(0.0, math.floor(bound * 1000) / 1000)
    return result, SampleStatisticsReport(rows, time.perf_counter() - start, added)


def _common_stats(feature):
    if feature is None:
        return None
    for kind in ("num_stats", "string_stats", "bytes_stats", "struct_stats"):
        if feature.HasField(kind):
            return getattr(feature, kind).common_stats
    return None

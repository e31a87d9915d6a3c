"""The tf.data input pipeline over TFRecord tf.Example shards, driven by a Schema.

files (seeded per-epoch shuffle) → shard by worker at file level → parallel interleave of
per-file blocks of `block_size` records → shuffle of blocks → rebatch to `batch_size` →
`parse_example` on whole batches (never per record) → projection and label split → optional
cache → shuffle of cached batches → repeat → prefetch.

Every tf.data operation here runs once per block or batch, never once per record: per-record
`shuffle` and parallel `interleave` each cost microseconds per element, which at 300k records/s
is most of a core (measured in `make bench`). An exact record-level shuffle is available with
`shuffle_buffer` (records), at that cost. Records are not reordered within a batch: a batch's
gradient does not depend on its order (each replica gets its own batches).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import logging
import posixpath
from typing import Callable, Optional, Sequence, Union

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular import schemas
from tfx_tabular.coders import tfrecord
from tfx_tabular.runners import allocator
from tfx_tabular.schemas.infer import label_of
from tfx_tabular.schemas.parsing import feature_spec
from tfx_tabular.training import columnar, forms
from tfx_tabular.training import data_service as service
from tfx_tabular.training.config import EXACT
from tfx_tabular.training.forms import InputForm

AUTOTUNE = tf.data.AUTOTUNE
_LOG = logging.getLogger(__name__)
# Columnar records (thousands of rows each) shuffled whole in a buffer of this many, before the
# rows of several records are mixed in each batch.
COLUMNAR_RECORD_SHUFFLE = 16
# The per-row block shuffle holds at most this many bytes of serialized records: a wide table's
# records are tens of KiB each, and 256 blocks of 256 of them held gigabytes.
BLOCK_SHUFFLE_BYTES = 256 << 20


@dataclasses.dataclass(frozen=True)
class InputConfig:
    """`input_fn`'s reading options, built from its keyword arguments (which hold the defaults)
    and handed to its steps; see `input_fn` for each one."""

    batch_size: int
    training: bool
    num_epochs: Optional[int]
    block_size: int
    block_shuffle_buffer: int
    shuffle_buffer: int
    seed: Optional[int]
    deterministic: bool
    cycle_length: int
    cache: Optional[str]
    input_context: Optional[tf.distribute.InputContext]
    prefetch_to_device: Optional[str]
    ram_budget_bytes: Optional[int]
    threadpool_size: Optional[int]
    data_service: Optional[str] = None
    data_service_job: Optional[str] = None

    @property
    def workers(self) -> int:
        """Input pipelines sharing the files out among themselves: one through the service,
        whose dispatcher shares them out among its workers."""
        if self.input_context is None or self.data_service:
            return 1
        return self.input_context.num_input_pipelines

    def check(self) -> None:
        if not self.data_service:
            return
        if self.cache is not None:
            raise ValueError(
                "input_fn: cache cannot be combined with data_service (the service's workers "
                "read every epoch again); drop one of them"
            )
        consumers = self.input_context.num_input_pipelines if self.input_context else 1
        if consumers > 1 and not self.data_service_job:
            raise ValueError(
                f"input_fn: {consumers} input pipelines read from data_service without a "
                "data_service_job: give them one job name to share, or each reads every row"
            )


def as_ragged(features: dict) -> dict:
    """SparseTensors (what a Transform graph yields for variable-length features) as
    RaggedTensors, the one representation `feature_spec` and the models use."""
    return {
        k: tf.RaggedTensor.from_sparse(v) if isinstance(v, tf.SparseTensor) else v
        for k, v in features.items()
    }


def _files(file_pattern: Union[str, Sequence[str]]) -> list[str]:
    patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
    files = sorted({f for p in patterns for f in tf.io.gfile.glob(p)})
    if not files:
        raise FileNotFoundError(f"no files match {file_pattern}")
    return files


def _compression(files: Sequence[str]) -> str:
    # The same rule as TFX's readers: the .gz suffix means GZIP.
    kinds = {f.endswith(".gz") for f in files}
    if len(kinds) > 1:
        raise ValueError("a mix of .gz and uncompressed shards; read them separately")
    return "GZIP" if kinds.pop() else ""


@dataclasses.dataclass(frozen=True)
class RecordChoice:
    """Which records `input_fn` reads, and why: the columnar batches (`payload`) or, when
    `payload` is None, the per-row records. The two give the same tensors, but differ in the
    order of rows and in a training epoch's last partial batch."""

    payload: Optional[columnar.Payload]
    reason: str

    @property
    def kind(self) -> str:
        return "columnar batches" if self.payload is not None else "per-row records"


def choose_records(
    files: Sequence[str], spec: dict, config: InputConfig, columnar_batches: bool, form: InputForm
) -> RecordChoice:
    """The records to read `files` from: the columnar batches holding the same rows, when they
    exist and every condition for reading them holds; else the per-row records, with the first
    condition that failed as the reason."""
    per_row = functools.partial(RecordChoice, None)
    if not columnar_batches:
        return per_row("columnar_batches=False")
    if config.shuffle_buffer > 1:
        return per_row(f"shuffle_buffer={config.shuffle_buffer} asks for a record-level shuffle")
    reason = columnar.unreadable(spec)
    if reason is not None:
        return per_row(reason)
    payload = columnar.find_payload(files)
    if payload is None:
        return per_row(
            "the files are not all the shards of one split of an Examples artifact with "
            "columnar batches"
        )
    reason = columnar.strings_missing(payload.layout, form)
    if reason is not None:
        return per_row(reason)
    if len(payload.files) < config.workers:
        # Records are shared out among workers, and a few columnar records (thousands of rows
        # each) would leave workers without data; per-row blocks are finer.
        return per_row(f"{len(payload.files)} columnar files for {config.workers} input pipelines")
    return RecordChoice(
        payload, f"the {len(payload.files)} columnar files of split {payload.split} hold its rows"
    )


def input_fn(
    file_pattern: Union[str, Sequence[str]],
    schema: Union[schema_pb2.Schema, str],
    batch_size: int,
    label_key: Optional[str] = None,
    *,
    features: Optional[Sequence[str]] = None,
    training: bool = True,
    num_epochs: Optional[int] = None,
    block_size: int = 256,
    block_shuffle_buffer: int = 256,
    shuffle_buffer: int = 0,
    seed: Optional[int] = None,
    deterministic: bool = False,
    cycle_length: int = AUTOTUNE,
    cache: Optional[str] = None,
    input_context: Optional[tf.distribute.InputContext] = None,
    prefetch_to_device: Optional[str] = None,
    ram_budget_bytes: Optional[int] = None,
    threadpool_size: Optional[int] = None,
    transform_output=None,
    split: Optional[str] = None,
    columnar_batches: bool = True,
    input_form: str = EXACT,
    sparse: bool = False,
    data_service: Optional[str] = None,
    data_service_job: Optional[str] = None,
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of `(features, label)` batches (or `features` without a label).

    Args:
      file_pattern: a glob or a list of globs/files (`.gz` shards are read as GZIP).
      schema: a Schema proto, or a schema.pbtxt path / Schema artifact folder.
      batch_size: rows per batch (per replica: pass the per-replica size under a strategy).
      label_key: the label feature; default: the schema's label annotation, if any.
      features: keep only these features (the ones the model uses); default all.
      training: shuffle files and blocks, drop the last partial batch,
        repeat `num_epochs` (None: forever); otherwise read every record once, in file order
        (columnar batches: every row once, in a fixed order).
      block_size / block_shuffle_buffer: records per read block, and blocks in the shuffle buffer
        (fewer where they would hold more than BLOCK_SHUFFLE_BYTES of records: wide tables).
      shuffle_buffer: > 0 adds an exact record-level shuffle of that many records (slower).
      cache: None, "memory", or a file path prefix: cache parsed batches after the first epoch.
        Later epochs then shuffle whole batches, not records.
      input_context: from `strategy.distribute_datasets_from_function`; shards files by worker.
      prefetch_to_device: e.g. "/gpu:0" to prefetch onto the device.
      ram_budget_bytes / threadpool_size: tf.data autotune RAM budget and private thread pool.
      transform_output: a `tft.TFTransformOutput`: parse with its raw spec, then apply its
        Transform graph to each batch; `label_key` and `features` name transformed features.
      split: with `file_pattern` an Examples artifact folder, the split to read.
      columnar_batches: read the artifact's columnar batches when `file_pattern` names all the
        per-row shards of one of its splits: the same tensors, several times faster (see
        docs/trainer.md#columnar-batches). False: always the per-row records. They are also
        read per row when `shuffle_buffer` asks for an exact record-level shuffle, and for
        exact strings unless the batches hold them (ParquetExampleGen's `columnar_strings`). Which records are read, and why, is logged
        (`choose_records` decides).
      input_form: "exact" (`tf.io.parse_example`'s tensors for the schema's spec) or
        "integers" (no strings: each string's int64 Fingerprint64, nullable scalars dense
        with a `<name>.present` mask); see `tfx_tabular.training.forms`.
      sparse: variable-length features (lists, nullable scalars) as SparseTensors, as TFXIO
        gives them (a stock `run_fn` expects them so), not RaggedTensors; features the schema
        declares ragged stay RaggedTensors.
      data_service: a tf.data service dispatcher's HOST:PORT: its workers read and parse the
        files (each file by one worker per epoch) and this process receives the batches; an
        address nothing answers at fails within seconds. Not with `cache`.
      data_service_job: the job name that input pipelines of several trainer workers share
        (each batch then goes to one of them); None: this pipeline's own job.
    """
    if isinstance(schema, str):
        schema = schemas.load_schema(schema)
    label_key = label_key if label_key is not None else label_of(schema)
    spec, finish = _parsing(schema, label_key, features, transform_output, sparse)
    if transform_output is not None and input_form != EXACT:
        raise ValueError(
            "input_fn: a Transform graph takes the raw features as parsed: input_form must be "
            f"'exact' with transform_output, not {input_form!r}"
        )
    form = forms.input_form(input_form, schema, spec)
    config = InputConfig(
        batch_size=batch_size,
        training=training,
        num_epochs=num_epochs,
        block_size=block_size,
        block_shuffle_buffer=block_shuffle_buffer,
        shuffle_buffer=shuffle_buffer,
        seed=seed,
        deterministic=deterministic,
        cycle_length=cycle_length,
        cache=cache,
        input_context=input_context,
        prefetch_to_device=prefetch_to_device,
        ram_budget_bytes=ram_budget_bytes,
        threadpool_size=threadpool_size,
        data_service=data_service,
        data_service_job=data_service_job,
    )
    config.check()
    patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
    if split is not None:  # an Examples artifact folder and a split
        patterns = [posixpath.join(patterns[0], f"Split-{split}", "*")]
    files = _files(patterns)
    choice = choose_records(files, spec, config, columnar_batches, form)
    _LOG.info("input_fn reads %s: %s", choice.kind, choice.reason)
    payload = choice.payload
    if payload is not None:
        files = list(payload.files)
    # Fewer files than workers: every worker reads every file and keeps its share of record
    # blocks, in an order all workers agree on (as tf.data's DATA auto-shard policy does).
    shard_records = config.workers > 1 and len(files) < config.workers
    ordered = config.deterministic or not config.training or shard_records
    if payload is not None:
        if not config.data_service:  # else the service's workers decode (and keep buffers)
            allocator.reuse_freed_memory(allocator.INPUT_KEPT_BYTES)
        decoder = columnar.GroupDecoder(payload.layout, spec, form)
        records = _records(files, config, ordered)
        parsed = columnar.batches(
            records, decoder, batch_size, config.training, config.seed, ordered
        )
        return _finished(parsed.map(finish), config, ordered)
    config = dataclasses.replace(config, block_shuffle_buffer=_blocks_held(files, config))
    blocks = _blocks(files, config, shard_records, ordered)
    dataset = blocks.rebatch(config.batch_size, drop_remainder=config.training)
    dataset = dataset.map(
        lambda serialized: finish(form.from_parsed(tf.io.parse_example(serialized, spec))),
        num_parallel_calls=AUTOTUNE,
        deterministic=ordered,
    )
    return _finished(dataset, config, ordered)


def _file_dataset(files, config: InputConfig, shard_records: bool) -> tf.data.Dataset:
    """This worker's files (all of them when `shard_records`), shuffled when training."""
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if config.workers > 1 and not shard_records:
        dataset = dataset.shard(config.workers, config.input_context.input_pipeline_id)
    # Through the service, the dispatcher hands the files out one at a time as workers ask: a
    # shuffle buffer of all files would have the first worker take them all.
    if config.training and not config.data_service:
        # With record sharding, every worker must shuffle the files alike.
        file_seed = 0 if shard_records and config.seed is None else config.seed
        dataset = dataset.shuffle(len(files), seed=file_seed, reshuffle_each_iteration=True)
    return dataset


def _records(files, config: InputConfig, ordered: bool) -> tf.data.Dataset:
    """This worker's columnar records (its share of the files), read from the files in parallel;
    shuffled (whole records, `COLUMNAR_RECORD_SHUFFLE` at a time) when training."""
    compression = _compression(files)
    dataset = _file_dataset(files, config, shard_records=False).interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression, buffer_size=8 << 20),
        cycle_length=config.cycle_length,
        num_parallel_calls=AUTOTUNE,
        deterministic=ordered,
    )
    if config.training:
        dataset = dataset.shuffle(
            COLUMNAR_RECORD_SHUFFLE, seed=config.seed, reshuffle_each_iteration=True
        )
    return dataset


def _blocks(files, config: InputConfig, shard_records: bool, ordered: bool) -> tf.data.Dataset:
    """This worker's blocks of `block_size` records, read from the files in parallel: its share
    of the files, or of the blocks when `shard_records`; shuffled when training."""
    compression = _compression(files)
    dataset = _file_dataset(files, config, shard_records).interleave(
        lambda f: tf.data.TFRecordDataset(
            f, compression_type=compression, buffer_size=8 * 1024 * 1024
        ).batch(config.block_size),
        cycle_length=config.cycle_length,
        num_parallel_calls=AUTOTUNE,
        deterministic=ordered,
    )
    if shard_records:
        dataset = dataset.shard(config.workers, config.input_context.input_pipeline_id)
    if config.training:
        dataset = _shuffled_blocks(dataset, config)
    return dataset


def _finished(dataset, config: InputConfig, ordered: bool) -> tf.data.Dataset:
    """Parsed batches, cached, repeated and prefetched as asked."""
    if config.cache is not None:
        dataset = dataset.cache("" if config.cache == "memory" else config.cache)
        if config.training:
            dataset = dataset.shuffle(64, seed=config.seed, reshuffle_each_iteration=True)
    if config.training:
        dataset = dataset.repeat(config.num_epochs)
    dataset = dataset.with_options(_options(ordered, config))
    if config.data_service:  # all of the above runs on the service's workers
        dataset = service.distribute(dataset, config.data_service, config.data_service_job)
    if config.prefetch_to_device:
        return dataset.apply(tf.data.experimental.prefetch_to_device(config.prefetch_to_device))
    return dataset.prefetch(AUTOTUNE)


def _parsing(schema, label_key, features, transform_output, sparse) -> tuple[dict, Callable]:
    """The spec to parse with (projected: unused features are never decoded), or Transform's raw
    spec, and the function from its parsed tensors to features (and the label), through the
    Transform graph when there is one."""
    if transform_output is not None:
        spec = transform_output.raw_feature_spec()
        output_names = list(transform_output.transformed_feature_spec())
        tft_layer = transform_output.transform_features_layer()
    else:
        spec = feature_spec(schema, sparse=sparse)
        output_names = list(spec)
        tft_layer = None
    keep = list(features) if features is not None else [k for k in output_names if k != label_key]
    unknown = [k for k in keep + ([label_key] if label_key else []) if k not in output_names]
    if unknown:
        raise ValueError(f"features {unknown} are not in the schema's parsing spec")
    if tft_layer is None:
        spec = {k: v for k, v in spec.items() if k in keep or k == label_key}

    def finish(parsed):
        if tft_layer is not None:
            parsed = as_ragged(tft_layer(parsed))
            parsed = {k: v for k, v in parsed.items() if k in keep or k == label_key}
        if label_key is None:
            return parsed
        label = parsed.pop(label_key)
        parsed.pop(forms.present_key(label_key), None)
        return parsed, label

    return spec, finish


def _blocks_held(files, config: InputConfig) -> int:
    """Blocks in the shuffle buffer: `block_shuffle_buffer`, fewer (two at least) where that
    many blocks of records the size of the first would hold more than BLOCK_SHUFFLE_BYTES."""
    # Not training, or records shuffled instead (`shuffle_buffer`): no block shuffle to size.
    if not config.training or config.shuffle_buffer > 1 or config.block_shuffle_buffer <= 2:
        return config.block_shuffle_buffer
    if not files:
        return config.block_shuffle_buffer
    record = _first_record_bytes(files[0], _compression(files))
    fitting = BLOCK_SHUFFLE_BYTES // max(1, record * config.block_size)
    return max(2, min(config.block_shuffle_buffer, fitting))


def _first_record_bytes(path: str, compression: str) -> int:
    """The length of a TFRecord file's first record (`coders.tfrecord`'s framing), 0 for an
    empty file."""
    with tf.io.gfile.GFile(path, "rb") as f:
        stream = gzip.GzipFile(fileobj=f) if compression == "GZIP" else f
        header = stream.read(tfrecord.LENGTH_BYTES)
    return int.from_bytes(header, "little") if len(header) == tfrecord.LENGTH_BYTES else 0


def _shuffled_blocks(dataset, config: InputConfig):
    """Blocks of records shuffled whole (cheap), or records shuffled exactly when asked."""
    if config.shuffle_buffer > 1:
        return (
            dataset.unbatch()
            .shuffle(config.shuffle_buffer, seed=config.seed, reshuffle_each_iteration=True)
            .batch(config.block_size)
        )
    if config.block_shuffle_buffer > 1:
        return dataset.shuffle(
            config.block_shuffle_buffer, seed=config.seed, reshuffle_each_iteration=True
        )
    return dataset


def _options(ordered: bool, config: InputConfig) -> tf.data.Options:
    options = tf.data.Options()
    options.autotune.enabled = True
    if config.ram_budget_bytes:
        options.autotune.ram_budget = config.ram_budget_bytes
    if config.threadpool_size:
        options.threading.private_threadpool_size = config.threadpool_size
    options.deterministic = ordered
    return options

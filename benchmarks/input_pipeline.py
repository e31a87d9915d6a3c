"""Trainer input pipelines, examples/s on the same TFRecords (batch 4096): ours
(`tfx_tabular.input_fn` on the conversion's columnar batches, first epoch and cached epochs, and
on its per-row tf.Examples; first epochs also with the page cache cold, and in batches of a
GPU's size) versus TFX's TFXIO
(`fn_args.data_accessor.tf_dataset_factory`; default and with its record shuffle off), a
stock-Trainer `run_fn`'s input under the stock Trainer and under TabularTrainer (the same
`data_accessor` call), `make_batched_features_dataset`, per-record
`parse_single_example`, a Python generator over Parquet (`from_generator`), and the raw bound
(`TFRecordDataset → batch → parse_example`). Plus peak RSS of ours as the data grows 10x."""

from __future__ import annotations

import glob
import os
import shutil
import time

from benchmarks import harness, targets
from benchmarks.harness import Context
from benchmarks.results import Recorder

BATCH = 4096
BATCHES = 150  # measured batches per method, after the first (start-up) batch
SLOW_BATCHES = 20  # for the per-record methods, too slow for BATCHES
# A GPU's batch: NVIDIA's DLRM (TensorFlow 2) trains on one A100 with batches of 65,536, its
# Wide & Deep with 131,072.
GPU_BATCH = 65_536
GPU_BATCHES = 20
# Training the reference model: steps per epoch; the second epoch is measured (the first traces).
TRAIN_STEPS = 30
LARGE_SCALE = 10  # peak RSS of ours also on 10x the main dataset
# Batches read by each peak-RSS run (main and 10x data alike): tf.data's buffers and the
# allocator's pools keep growing for the first few hundred batches, so a shorter run compares
# where each happened to stop on that ramp, not the data's sizes.
MEMORY_BATCHES = 1000
# Ours is read in the integer form on both paths (the same tensors; the per-row path
# fingerprints the strings it parses), as TabularTrainer's reference model reads it.
FORM = "integers"


def _setup(examples_dir: str):
    import tensorflow as tf  # noqa: F401  (imported before timing)

    from tfx_tabular.conversion.source_metadata import read_source_metadata
    from tfx_tabular.schemas.infer import infer_schema

    schema = infer_schema(read_source_metadata(examples_dir), label="label")
    files = sorted(glob.glob(os.path.join(examples_dir, "Split-train", "*")))
    return schema, files


def _rows(label):
    import tensorflow as tf

    if isinstance(label, tf.SparseTensor):
        return label.dense_shape[0]
    if isinstance(label, tf.RaggedTensor):
        return label.nrows(out_type=tf.int64)
    return tf.shape(label, out_type=tf.int64)[0]


def _drainer():
    """A compiled function taking `batches` batches from an iterator, as a training step takes
    them (Keras `fit`'s and TabularTrainer's steps call `next` inside the compiled step), so a
    batch's composite tensors are never rebuilt in Python; it returns their examples."""
    import tensorflow as tf

    @tf.function
    def drain(iterator, batches):
        examples = tf.constant(0, tf.int64)
        for _ in tf.range(batches):
            _, label = next(iterator)  # every method gives (features, label)
            examples += _rows(label)
        return examples

    return drain


def _measure(dataset, batches: int = BATCHES, warm_up: int = 1) -> dict:
    """Examples/s over `batches` batches, after `warm_up` batches (start-up: threads, tracing,
    first reads; or a first epoch that fills a cache)."""
    import tensorflow as tf

    iterator, drain = iter(dataset), _drainer()
    drain(iterator, tf.constant(warm_up))  # traced here, with a tensor count: not again below
    start = time.perf_counter()
    examples = int(drain(iterator, tf.constant(batches)))
    seconds = time.perf_counter() - start
    return {"examples_per_second": examples / seconds, "examples": examples}


def _files_under(folder: str) -> list[str]:
    return [os.path.join(root, name) for root, _, names in os.walk(folder) for name in names]


def _evict_from_page_cache(folder: str) -> None:
    """Drop `folder`'s files from the page cache (flushed first: the kernel keeps dirty pages),
    so that their next reads come from the disk."""
    for path in _files_under(folder):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _read_into_page_cache(folder: str) -> None:
    for path in _files_under(folder):
        with open(path, "rb") as handle:
            while handle.read(16 << 20):
                pass


def task_ours(
    examples_dir: str,
    cached: bool = False,
    columnar: bool = True,
    batches: int = BATCHES,
    batch_size: int = BATCH,
) -> dict:
    from tfx_tabular import input_fn

    schema, files = _setup(examples_dir)
    if not cached:
        dataset = input_fn(
            files, schema, batch_size, num_epochs=None, columnar_batches=columnar, input_form=FORM
        )
        return _measure(dataset, batches)
    dataset = input_fn(files, schema, BATCH, num_epochs=None, cache="memory", input_form=FORM)
    return _measure(dataset, BATCHES, warm_up=_train_rows(examples_dir) // BATCH)


def _train_rows(examples_dir: str) -> int:
    import tensorflow as tf

    files = glob.glob(os.path.join(examples_dir, "Split-train", "*"))
    return sum(
        int(n) for n in tf.data.TFRecordDataset(files).batch(65536).map(lambda b: tf.shape(b)[0])
    )


def tfxio_dataset(examples_dir: str, batch_size: int = BATCH, shuffle: bool = True):
    """TFXIO's dataset over the train split (the `peers` section's too)."""
    from tfx_bsl.public import tfxio

    schema, files = _setup(examples_dir)
    source = tfxio.TFExampleRecord(file_pattern=files, schema=schema)
    options = tfxio.TensorFlowDatasetOptions(
        batch_size=batch_size, label_key="label", shuffle=shuffle
    )
    return source.TensorFlowDataset(options)


def task_tfxio(examples_dir: str, shuffle: bool = True) -> dict:
    return _measure(tfxio_dataset(examples_dir, shuffle=shuffle))


def task_tfxio_unshuffled(examples_dir: str) -> dict:
    """TFXIO without its default 10,000-record shuffle buffer (ours shuffles blocks instead)."""
    return task_tfxio(examples_dir, shuffle=False)


def _accessor_call(examples_dir: str, factory_for):
    """What a stock-Trainer `run_fn` does with `fn_args.data_accessor`: call its
    tf_dataset_factory with the train files, TFXIO's default options and the schema."""
    from tfx.types import standard_artifacts
    from tfx_bsl.public import tfxio

    schema, _ = _setup(examples_dir)
    examples = standard_artifacts.Examples()
    examples.uri = examples_dir
    examples.split_names = '["train", "eval"]'
    options = tfxio.TensorFlowDatasetOptions(batch_size=BATCH, label_key="label")
    pattern = [os.path.join(examples_dir, "Split-train", "*")]
    return _measure(factory_for(examples, schema)(pattern, options, schema))


def task_accessor_stock(examples_dir: str) -> dict:
    from tfx.components.util import tfxio_utils

    return _accessor_call(
        examples_dir,
        lambda examples, _: tfxio_utils.get_tf_dataset_factory_from_artifact([examples], []),
    )


def task_accessor_ours(examples_dir: str) -> dict:
    from tfx_tabular.components.tabular_trainer import user_code

    return _accessor_call(examples_dir, lambda _, schema: user_code.dataset_factory(schema))


def task_batched_features(examples_dir: str) -> dict:
    import tensorflow as tf

    from tfx_tabular import feature_spec

    schema, files = _setup(examples_dir)
    return _measure(
        tf.data.experimental.make_batched_features_dataset(
            files, BATCH, feature_spec(schema), label_key="label"
        )
    )


def _parser(examples_dir: str, parse_fn):
    """(files, a function parsing records with the schema's spec into (features, label))."""
    from tfx_tabular import feature_spec

    schema, files = _setup(examples_dir)
    spec = feature_spec(schema)

    def parse(records):
        features = parse_fn(records, spec)
        return features, features.pop("label")

    return files, parse


def task_parse_single(examples_dir: str) -> dict:
    import tensorflow as tf

    files, parse = _parser(examples_dir, tf.io.parse_single_example)
    return _measure(
        tf.data.TFRecordDataset(files)
        .repeat()
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        .apply(tf.data.experimental.dense_to_ragged_batch(BATCH))
        .prefetch(2),
        batches=SLOW_BATCHES,
    )


def task_generator(parquet_dir: str) -> dict:
    """A seed-style Python generator over Parquet rows (what users write today)."""
    import pyarrow.parquet as pq
    import tensorflow as tf

    paths = sorted(glob.glob(os.path.join(parquet_dir, "**", "*.parquet"), recursive=True))
    ints = ["label"] + [f"I{i}" for i in range(1, 14)]
    strings = [f"C{i}" for i in range(1, 27)]

    def rows():
        while True:
            for path in paths:
                for batch in pq.ParquetFile(path).iter_batches(batch_size=8192):
                    for row in batch.to_pylist():
                        features = {k: row[k] or 0 for k in ints}
                        features.update({k: (row[k] or "").encode() for k in strings})
                        features["price"] = row["price"] or 0.0
                        features["history"] = row["history"] or []
                        label = features.pop("label")
                        yield features, label

    signature = (
        {
            **{k: tf.TensorSpec([], tf.int64) for k in ints if k != "label"},
            **{k: tf.TensorSpec([], tf.string) for k in strings},
            "price": tf.TensorSpec([], tf.float32),
            "history": tf.TensorSpec([None], tf.int64),
        },
        tf.TensorSpec([], tf.int64),
    )
    dataset = tf.data.Dataset.from_generator(rows, output_signature=signature)
    return _measure(
        dataset.apply(tf.data.experimental.dense_to_ragged_batch(BATCH)).prefetch(2),
        batches=SLOW_BATCHES,
    )


def task_raw(examples_dir: str) -> dict:
    import tensorflow as tf

    files, parse = _parser(examples_dir, tf.io.parse_example)
    return _measure(
        tf.data.TFRecordDataset(files)
        .repeat()
        .batch(BATCH)
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


METHODS = [  # (label, task, input)
    ("ours: tfx_tabular.input_fn, columnar batches, first epoch", "task_ours", "examples"),
    ("ours: input_fn, per-row tf.Example, first epoch", "task_ours_per_row", "examples"),
    (
        "ours: input_fn, columnar batches, first epoch, page cache cold",
        "task_ours_cold",
        "examples",
    ),
    (
        "ours: input_fn, per-row tf.Example, first epoch, page cache cold",
        "task_ours_per_row_cold",
        "examples",
    ),
    ("ours: cached epochs", "task_ours_cached", "examples"),
    ("TFXIO (TFX data_accessor.tf_dataset_factory)", "task_tfxio", "examples"),
    ("TFXIO, shuffle off", "task_tfxio_unshuffled", "examples"),
    ("run_fn input under the stock Trainer (its data_accessor)", "task_accessor_stock", "examples"),
    (
        "run_fn input under TabularTrainer (its data_accessor), columnar with strings",
        "task_accessor_ours",
        "examples with strings",
    ),
    (
        "run_fn input under TabularTrainer (its data_accessor), per-row records",
        "task_accessor_ours",
        "examples",
    ),
    ("make_batched_features_dataset", "task_batched_features", "examples"),
    ("per-record parse_single_example", "task_parse_single", "examples"),
    ("Python generator over Parquet (from_generator)", "task_generator", "parquet"),
    ("raw bound: TFRecordDataset → batch → parse_example", "task_raw", "examples"),
]


def task_ours_cached(examples_dir: str) -> dict:
    return task_ours(examples_dir, cached=True)


def task_ours_per_row(examples_dir: str) -> dict:
    return task_ours(examples_dir, columnar=False)


def task_ours_gpu_batch(examples_dir: str, columnar: bool = True) -> dict:
    return task_ours(examples_dir, columnar=columnar, batches=GPU_BATCHES, batch_size=GPU_BATCH)


def task_ours_per_row_gpu_batch(examples_dir: str) -> dict:
    return task_ours_gpu_batch(examples_dir, columnar=False)


def task_ours_cold(examples_dir: str, columnar: bool = True) -> dict:
    """`input_fn`'s first epoch with the examples' files evicted from the page cache first (and
    read back in after, for the methods measured next); one epoch only, at most its batches but
    one, so that no batch comes from a second, cached read of a file."""
    from tfx_tabular import input_fn

    schema, files = _setup(examples_dir)
    batches = min(BATCHES, _train_rows(examples_dir) // BATCH - 1)
    _evict_from_page_cache(examples_dir)
    try:
        dataset = input_fn(
            files, schema, BATCH, num_epochs=1, columnar_batches=columnar, input_form=FORM
        )
        return _measure(dataset, batches)
    finally:
        _read_into_page_cache(examples_dir)


def task_ours_per_row_cold(examples_dir: str) -> dict:
    return task_ours_cold(examples_dir, columnar=False)


def task_train(examples_dir: str, columnar: bool) -> dict:
    """The reference model trained (TabularTrainer's loop, default strategy, batch BATCH) from
    columnar batches or per-row records: the second epoch's examples/s and input wait."""
    import tempfile

    from tfx_tabular.training import loop
    from tfx_tabular.training.config import TrainingConfig

    schema, files = _setup(examples_dir)
    eval_files = sorted(glob.glob(os.path.join(examples_dir, "Split-eval", "*")))
    config = TrainingConfig(
        batch_size=BATCH,
        steps_per_epoch=TRAIN_STEPS,
        epochs=2,
        learning_rate=1e-3,
        mixed_precision=False,
        eval_steps=1,
        columnar_batches=columnar,
    )
    with tempfile.TemporaryDirectory() as run_dir:
        epoch = loop.train(files, eval_files, schema, run_dir, None, config).epochs[-1]
    return {
        "examples_per_second": epoch.examples_per_second,
        "steps_per_second": epoch.examples_per_second / BATCH,
        "input_wait_fraction": epoch.input_wait_fraction,
    }


def task_train_columnar(examples_dir: str) -> dict:
    return task_train(examples_dir, columnar=True)


def task_train_per_row(examples_dir: str) -> dict:
    return task_train(examples_dir, columnar=False)


GPU_BATCH_METHODS = [  # (label, task), on the LARGE_SCALE data: a batch is a small share of it
    (f"ours: input_fn, columnar batches, batch {GPU_BATCH:,}", "task_ours_gpu_batch"),
    (f"ours: input_fn, per-row tf.Example, batch {GPU_BATCH:,}", "task_ours_per_row_gpu_batch"),
]

TRAINING = [  # (label, task)
    ("reference model, columnar batches", "task_train_columnar"),
    ("reference model, per-row tf.Example", "task_train_per_row"),
]


# The demo as a new user runs it (`tfx-tabular demo --rows N --epochs E --json`), training from
# columnar batches (its default) and per row (`--columnar-batch-rows 0`): whether the coarser
# shuffle of columnar batches costs small data its AUC.
DEMO = [(targets.DEMO_COLUMNAR, "task_demo_columnar"), (targets.DEMO_PER_ROW, "task_demo_per_row")]


def task_demo(columnar: bool) -> dict:
    """`tfx-tabular demo --rows N --epochs E --json` in a scratch folder: its learned eval AUC."""
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as workdir:
        rows = str(targets.DEMO_ROWS)
        command = [sys.executable, "-m", "tfx_tabular.cli", "demo", "--rows", rows]
        command += ["--epochs", str(targets.DEMO_EPOCHS), "--workdir", workdir, "--json"]
        if not columnar:
            command += ["--columnar-batch-rows", "0"]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
    demo = json.loads(done.stdout)["demo"]
    return {"eval_auc": demo["learned_auc"], "ceiling_auc": demo["ceiling_auc"]}


def task_demo_columnar() -> dict:
    return task_demo(columnar=True)


def task_demo_per_row() -> dict:
    return task_demo(columnar=False)


def _auc(result: dict) -> str:
    return f"AUC {result['eval_auc']:.3f} (ceiling {result['ceiling_auc']:.3f})"


MEMORY = {  # data scale → configuration of the peak-RSS runs
    1: f"peak RSS: ours, columnar batches, {MEMORY_BATCHES:,} batches, main data",
    LARGE_SCALE: f"peak RSS: ours, columnar batches, {MEMORY_BATCHES:,} batches, {LARGE_SCALE}x data",
}


def _interleaved(recorder: Recorder, ctx: Context, methods: list, shown, **params) -> None:
    """`methods` ((label, task) pairs) run in turn, `ctx.repeats` times, so that drift in the
    machine's speed hits each alike; each run recorded under its label."""
    for repeat in range(ctx.repeats):
        for label, task in methods:
            run = harness.run_task(
                ctx, f"input-{task}-{repeat}", f"input_pipeline:{task}", **params
            )
            recorder.add(label, harness.sample(run))
            print(f"  {label} {repeat + 1}/{ctx.repeats}: {shown(run.result)}", flush=True)


def _examples_per_second(result: dict) -> str:
    return f"{result['examples_per_second']:,.0f} ex/s"


def _large_runs(recorder: Recorder, ctx: Context, examples: str) -> None:
    """On LARGE_SCALE times the main rows: ours' peak RSS (columnar batches, MEMORY_BATCHES each,
    beside the main rows: whether it grows with the data), and GPU-sized batches, of which the
    main data holds too few for an epoch not to end every few batches."""
    large_rows = LARGE_SCALE * ctx.rows
    large_examples = ctx.path("input", "examples-large")
    harness.run_task(
        ctx,
        "input-convert-large",
        "schema_inference:task_convert",
        input_base=ctx.dataset(large_rows),
        output_dir=large_examples,
    )
    for repeat in range(ctx.repeats):  # a single run's peak moves with tf.data's autotuning
        for scale, folder in ((1, examples), (LARGE_SCALE, large_examples)):
            run = harness.run_task(
                ctx,
                f"input-memory-{scale}-{repeat}",
                "input_pipeline:task_ours",
                examples_dir=folder,
                batches=MEMORY_BATCHES,
            )
            recorder.add(MEMORY[scale], {"rows": scale * ctx.rows, **harness.sample(run)})
    _interleaved(
        recorder, ctx, GPU_BATCH_METHODS, _examples_per_second, examples_dir=large_examples
    )
    shutil.rmtree(large_examples, ignore_errors=True)


def _training_rates(result: dict) -> str:
    return (
        f"{result['steps_per_second']:.2f} steps/s, input wait {result['input_wait_fraction']:.0%}"
    )


def run(ctx: Context) -> list[dict]:
    """Measure the section; returns its rows (see `results`)."""
    data = ctx.dataset(ctx.rows)
    examples = ctx.path("schema", "examples")
    harness.run_task(
        ctx, "input-convert", "schema_inference:task_convert", input_base=data, output_dir=examples
    )
    with_strings = ctx.path("input", "examples-with-strings")
    harness.run_task(
        ctx,
        "input-convert-strings",
        "schema_inference:task_convert",
        input_base=data,
        output_dir=with_strings,
        strings=True,
    )
    sources = {
        "examples": {"examples_dir": examples},
        "examples with strings": {"examples_dir": with_strings},
        "parquet": {"parquet_dir": data},
    }
    recorder = Recorder("input_pipeline")
    for repeat in range(ctx.repeats):  # interleaved, so drift in machine speed hits every method
        for index, (label, task, source) in enumerate(METHODS):
            run = harness.run_task(
                ctx, f"input-{index}-{task}-{repeat}", f"input_pipeline:{task}", **sources[source]
            )
            recorder.add(label, harness.sample(run))
            print(
                f"  {label} {repeat + 1}/{ctx.repeats}: {_examples_per_second(run.result)}",
                flush=True,
            )
    shutil.rmtree(with_strings, ignore_errors=True)
    _large_runs(recorder, ctx, examples)
    _interleaved(recorder, ctx, TRAINING, _training_rates, examples_dir=examples)
    _interleaved(recorder, ctx, DEMO, _auc)
    return recorder.rows()

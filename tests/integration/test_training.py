"""input_fn, distribution strategies and fault tolerance, for real: MirroredStrategy over 2 logical
CPU devices, MultiWorkerMirroredStrategy with 2 worker processes on loopback, and a trainer killed
with SIGKILL mid-training that resumes and ends with the same number of steps."""

import collections
import json
import logging
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from conftest import convert_to_examples, few_features
from tfx.utils import io_utils

from tfx_tabular import input_fn
from tfx_tabular.conversion.source_metadata import read_source_metadata
from tfx_tabular.demo import criteo
from tfx_tabular.schemas.infer import infer_schema

WORKER = str(pathlib.Path(__file__).with_name("train_worker.py"))


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    root = tmp_path_factory.mktemp("training")
    criteo.write_dataset(str(root / "data"), 4000, days=2, files_per_day=2, row_group_size=500)
    out = str(root / "examples")
    convert_to_examples(str(root / "data"), out, num_shards=4)
    schema_path = str(root / "schema.pbtxt")
    schema = infer_schema(read_source_metadata(out), label="label")
    io_utils.write_pbtxt_file(schema_path, schema)
    io_utils.write_pbtxt_file(_worker_schema(schema_path), few_features(schema))
    return out, schema_path


def _worker_schema(schema_path: str) -> str:
    """The schema the training processes use: a few features (see conftest.FEW_COLUMNS)."""
    return os.path.join(os.path.dirname(schema_path), "few.pbtxt")


def test_input_fn_batches_projects_and_splits_the_label(examples):
    out, schema_path = examples
    ds = input_fn(
        os.path.join(out, "Split-train", "*"),
        schema_path,
        100,
        features=["I1", "C1", "history"],
        num_epochs=1,
    )
    features, label = next(iter(ds))
    assert set(features) == {"I1", "C1", "history"} and label.shape == (100, 1)
    assert isinstance(features["history"], tf.RaggedTensor)
    # Evaluation mode: every row once, in file order, the last batch partial.
    rows = sum(
        int(labels.shape[0])
        for _, labels in input_fn(
            os.path.join(out, "Split-eval", "*"), schema_path, 128, training=False
        )
    )
    total = sum(
        1 for _ in tf.data.TFRecordDataset(tf.io.gfile.glob(os.path.join(out, "Split-eval", "*")))
    )
    assert rows == total


def test_input_fn_shards_files_by_worker_and_caches(examples, tmp_path):
    out, schema_path = examples
    pattern = os.path.join(out, "Split-train", "*")
    seen = []
    for worker in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker)
        ds = input_fn(pattern, schema_path, 1, training=False, input_context=ctx)
        seen.append({int(labels.numpy()[0][0] * 0) + i for i, (_, labels) in enumerate(ds)})
    total = sum(1 for _ in tf.data.TFRecordDataset(tf.io.gfile.glob(pattern)))
    assert sum(len(s) for s in seen) == total  # each file read by exactly one worker
    cached = input_fn(
        pattern,
        schema_path,
        512,
        num_epochs=2,
        cache=str(tmp_path / "cache"),
        input_form="integers",
    )
    # Columnar batches, as the per-row records: each epoch's last partial batch dropped.
    assert [int(labels.shape[0]) for _, labels in cached] == [512] * 2 * (total // 512)
    per_row = input_fn(
        pattern, schema_path, 50, num_epochs=2, cache="memory", columnar_batches=False
    )
    assert sum(1 for _ in per_row) == 2 * (total // 50)  # the last partial batch dropped
    assert tf.io.gfile.glob(str(tmp_path / "cache") + "*")
    with pytest.raises(FileNotFoundError):
        input_fn(os.path.join(out, "nothing-*"), schema_path, 10)


def _record_keys(dataset) -> collections.Counter:
    """Each row of `dataset`'s batches (features and label) as text, counted."""

    def rows(v) -> list:
        if isinstance(v, tf.SparseTensor):
            v = tf.RaggedTensor.from_sparse(v)
        return v.to_list() if isinstance(v, tf.RaggedTensor) else v.numpy().tolist()

    counts = collections.Counter()
    for features, label in dataset:
        columns = sorted((k, rows(v)) for k, v in {**features, "label": label}.items())
        for r in range(int(label.shape[0])):
            counts[repr([(k, values[r]) for k, values in columns])] += 1
    return counts


def test_input_fn_shards_records_when_workers_outnumber_files(examples):
    out, schema_path = examples
    pattern = os.path.join(out, "Split-train", "*")
    workers = len(tf.io.gfile.glob(pattern)) + 2
    # A few features keep the per-row comparison short; batches of 1 keep every row of a
    # training pass (its last partial batch is dropped).
    features = ["I1", "C1", "price", "history"]
    everything = _record_keys(
        input_fn(pattern, schema_path, 256, features=features, training=False)
    )
    shares = [
        _record_keys(
            input_fn(
                pattern,
                schema_path,
                1,
                features=features,
                training=True,
                num_epochs=1,
                input_context=tf.distribute.InputContext(
                    num_input_pipelines=workers, input_pipeline_id=worker
                ),
            )
        )
        for worker in range(workers)
    ]
    assert all(shares)
    assert sum(shares, collections.Counter()) == everything  # each record on exactly one worker


def _run_worker(examples, tmp_path, kind, steps_per_epoch=6, epochs=2, env=None, name="run"):
    out, schema_path = examples
    return subprocess.run(
        [
            sys.executable,
            WORKER,
            out,
            _worker_schema(schema_path),
            str(tmp_path / name),
            str(tmp_path / f"{name}-model"),
            kind,
            str(steps_per_epoch),
            str(epochs),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_mirrored_strategy_over_two_logical_cpus(examples, tmp_path):
    result = _run_worker(examples, tmp_path, "mirrored2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "total_steps=12 replicas=2" in result.stdout
    assert (tmp_path / "run-model" / "saved_model.pb").exists()


def test_the_train_step_is_traced_once_whatever_the_columnar_batch_sizes(
    examples, tmp_path, monkeypatch
):
    """The train step and the evaluation take their batches from the iterator inside their
    compiled functions: traced at their first call only, although an evaluation's last batch
    is shorter."""
    from tfx_tabular import schemas
    from tfx_tabular.training import loop
    from tfx_tabular.training.config import TrainingConfig

    out, schema_path = examples
    built, traces = [], []

    def step_functions(*args):
        built.append(real(*args))
        return built[-1]

    real = loop._step_functions
    monkeypatch.setattr(loop, "_step_functions", step_functions)
    train = sorted(tf.io.gfile.glob(os.path.join(out, "Split-train", "*")))
    shapes = {
        int(labels.shape[0])
        for _, labels in input_fn(train, schema_path, 512, training=False, input_form="integers")
    }
    assert len(shapes) > 1, shapes  # full and short batches
    config = TrainingConfig(
        label="label",
        batch_size=512,
        steps_per_epoch=len(train) * 3,  # more than an epoch of the data: every batch size
        epochs=2,
        learning_rate=1e-3,
        mixed_precision=False,
    )
    eval_files = sorted(tf.io.gfile.glob(os.path.join(out, "Split-eval", "*")))
    result = loop.train(
        train,
        eval_files,
        schemas.load_schema(_worker_schema(schema_path)),
        str(tmp_path),
        None,
        config,
        on_epoch=lambda _: traces.append([f.experimental_get_tracing_count() for f in built[0]]),
    )
    assert result.total_steps == 2 * config.steps_per_epoch
    # Two traces of the train step, both at the first call, as for a one-step run: the first
    # creates the optimizer's variables, so tf.function traces the step again without creating
    # them. One of the evaluation, which reads the whole eval split (full and short batches).
    assert traces == [[2, 1], [2, 1]]
    assert all(0 <= epoch.input_wait_fraction < 1 for epoch in result.epochs)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_multi_worker_mirrored_strategy_two_processes_on_loopback(examples, tmp_path):
    out, schema_path = examples
    workers = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    procs = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    WORKER,
                    out,
                    _worker_schema(schema_path),
                    str(tmp_path / "run"),
                    str(tmp_path / "model"),
                    "multi_worker",
                    "4",
                    "2",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "TF_CONFIG": json.dumps(tf_config)},
            )
        )
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (stdout, stderr) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, stderr[-3000:]
        assert "total_steps=8 replicas=2" in stdout
    # Only the chief (worker 0) keeps its export.
    assert (tmp_path / "model" / "saved_model.pb").exists()


@pytest.mark.slow
def test_trainer_killed_mid_training_resumes_with_the_same_total_steps(examples, tmp_path):
    out, schema_path = examples
    args = [
        sys.executable,
        WORKER,
        out,
        _worker_schema(schema_path),
        str(tmp_path / "run"),
        str(tmp_path / "model"),
        "default",
        "10",
        "3",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    # Kill it mid-way through the second epoch: as soon as its step-15 checkpoint exists (one
    # every 5 steps). A fixed delay instead would race the training speed.
    checkpoint_dir = str(tmp_path / "run" / "checkpoints")

    def latest_step():
        checkpoints = tf.train.get_checkpoint_state(checkpoint_dir)
        return int(checkpoints.model_checkpoint_path.rsplit("-", 1)[1]) if checkpoints else 0

    deadline = time.monotonic() + 300
    while latest_step() < 15 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed_from = latest_step()
    assert 15 <= resumed_from < 30
    result = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "total_steps=30 " in result.stdout
    epochs_run = [line for line in result.stdout.splitlines() if line.startswith("epoch")]
    assert not any(line.startswith("epoch 1 ") for line in epochs_run)  # epoch 1 is not redone


def test_the_conversions_columnar_batches_give_the_per_row_tensors(examples):
    """ParquetExampleGen's conversion writes columnar batches; input_fn reads them when given all
    of a split's shards (or the artifact folder and a split), per row otherwise."""
    from tfx_tabular.training import columnar

    out, schema_path = examples
    shards = sorted(tf.io.gfile.glob(os.path.join(out, "Split-eval", "*")))
    payload = columnar.find_payload(shards)
    assert payload is not None and payload.split == "eval"
    assert columnar.find_payload(shards[:-1]) is None  # a subset of the rows: read per row
    integers = {"training": False, "input_form": "integers"}
    per_row = input_fn(shards, schema_path, 512, columnar_batches=False, **integers)
    by_columns = input_fn(out, schema_path, 512, split="eval", **integers)
    assert _record_keys(by_columns) == _record_keys(per_row)
    # Training: every row at most once per epoch, in batches of the size asked, the last
    # partial one dropped as the per-row records' is.
    train_shards = os.path.join(out, "Split-train", "*")
    train = input_fn(train_shards, schema_path, 500, num_epochs=1, input_form="integers")
    sizes = [int(label.shape[0]) for _, label in train]
    layout = columnar.find_payload(sorted(tf.io.gfile.glob(train_shards))).layout
    assert set(sizes) == {500} and len(sizes) == layout.rows["train"] // 500


@pytest.mark.parametrize(
    "shards, kwargs, expected",
    [
        ("all", {}, r"columnar batches: the \d+ columnar files of split eval hold its rows"),
        ("all", {"columnar_batches": False}, "per-row records: columnar_batches=False"),
        ("all", {"shuffle_buffer": 1000}, "per-row records: shuffle_buffer=1000 asks for"),
        ("all", {"input_form": "exact"}, "per-row records: input_form='exact' asks for strings"),
        ("some", {}, "per-row records: the files are not all the shards of one split"),
    ],
)
def test_input_fn_logs_which_records_it_reads_and_why(examples, caplog, shards, kwargs, expected):
    out, schema_path = examples
    files = sorted(tf.io.gfile.glob(os.path.join(out, "Split-eval", "*")))
    kwargs = {"batch_size": 512, "input_form": "integers", **kwargs}
    with caplog.at_level(logging.INFO, logger="tfx_tabular.training.input_fn"):
        input_fn(files if shards == "all" else files[:-1], schema_path, training=False, **kwargs)
    assert re.search(f"input_fn reads {expected}", caplog.text), caplog.text


@pytest.mark.parametrize("columnar_batches, kept", [(True, [True]), (False, [])])
def test_input_fn_reading_columnar_batches_has_glibc_keep_freed_buffers(
    examples, monkeypatch, columnar_batches, kept
):
    from tfx_tabular.runners import allocator

    asked, reuse = [], allocator.reuse_freed_memory
    monkeypatch.setattr(
        allocator, "reuse_freed_memory", lambda kept_bytes: asked.append(reuse(kept_bytes))
    )
    out, schema_path = examples
    files = sorted(tf.io.gfile.glob(os.path.join(out, "Split-eval", "*")))
    read = {"columnar_batches": columnar_batches, "input_form": "integers"}
    input_fn(files, schema_path, 512, training=False, **read)
    assert asked == kept  # and glibc took the settings


def _fit_and_score(train: str, eval_pattern: str, schema, columnar_batches: bool) -> dict:
    """The reference model fitted for two epochs on `train` read with or without columnar
    batches, then scored on the per-row eval split: {"auc", "loss"}."""
    import tf_keras as keras

    from tfx_tabular.training.model import build_reference_model

    keras.utils.set_random_seed(0)
    model = build_reference_model(schema, "label", hidden_units=(32,))
    model.compile(keras.optimizers.Adam(3e-3), "binary_crossentropy", [keras.metrics.AUC()])
    read = {"input_form": "integers", "columnar_batches": columnar_batches}
    model.fit(input_fn(train, schema, 1024, num_epochs=2, seed=0, **read), epochs=1, verbose=0)
    scores = model.evaluate(
        input_fn(eval_pattern, schema, 1024, training=False, columnar_batches=False), verbose=0
    )
    return dict(zip(("loss", "auc"), scores, strict=True))


@pytest.mark.slow
def test_a_model_trained_on_columnar_batches_scores_as_one_trained_per_row(tmp_path):
    """The reference model on the demo's signal columns, trained from columnar batches and from
    per-row Examples (same rows, same seed), scores alike on the eval split, and learns."""
    criteo.write_dataset(str(tmp_path / "data"), 60_000, days=3, files_per_day=2)
    out = str(tmp_path / "examples")
    convert_to_examples(str(tmp_path / "data"), out, num_shards=4)
    schema = infer_schema(read_source_metadata(out), label="label")
    small = few_features(schema, ["label", *criteo.SIGNAL_COLUMNS])
    train = sorted(tf.io.gfile.glob(os.path.join(out, "Split-train", "*")))
    eval_pattern = os.path.join(out, "Split-eval", "*")
    columnar = _fit_and_score(train, eval_pattern, small, columnar_batches=True)
    per_row = _fit_and_score(train, eval_pattern, small, columnar_batches=False)
    assert columnar["auc"] > 0.6 and per_row["auc"] > 0.6, (columnar, per_row)
    assert abs(columnar["auc"] - per_row["auc"]) < 0.02, (columnar, per_row)
    assert abs(columnar["loss"] - per_row["loss"]) < 0.02, (columnar, per_row)


@pytest.mark.slow
def test_transform_applies_inside_input_fn_to_columnar_batches(examples, tmp_path):
    """A Transform graph (analyzed by tf.Transform over the per-row Examples, as TFX's Transform
    does) applied by input_fn gives the same transformed tensors from columnar batches as from
    per-row records, on raw features without strings (a graph taking strings reads them per
    row: the columnar batches hold their fingerprints)."""
    import apache_beam as beam
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io
    from tfx_bsl.public import tfxio

    from tfx_tabular.pipelines.preprocessing import preprocessing_fn

    out, schema_path = examples
    schema = io_utils.parse_pbtxt_file(_worker_schema(schema_path), schema_pb2.Schema())
    numeric = few_features(schema, [f.name for f in schema.feature if f.type != schema_pb2.BYTES])
    assert any(f.type == schema_pb2.BYTES for f in schema.feature)
    schema = numeric
    train = os.path.join(out, "Split-train", "*")
    source = tfxio.TFExampleRecord(train, schema=schema)
    with beam.Pipeline() as pipeline, tft_beam.Context(temp_dir=str(tmp_path / "tmp")):
        transform_fn = (
            pipeline | source.BeamSource(),
            source.TensorAdapterConfig(),
        ) | tft_beam.AnalyzeDataset(lambda inputs: preprocessing_fn(inputs, {"label": "label"}))
        _ = transform_fn | tft_beam.WriteTransformFn(str(tmp_path / "transform"))
    # The raw schema beside the graph, as TFX's Transform writes it.
    metadata_io.write_metadata(
        dataset_metadata.DatasetMetadata(schema),
        str(tmp_path / "transform" / tft.TFTransformOutput.RAW_METADATA_DIR),
    )
    output = tft.TFTransformOutput(str(tmp_path / "transform"))
    shards = sorted(tf.io.gfile.glob(train))
    read = {
        columnar: input_fn(
            shards, schema, 512, training=False, transform_output=output, columnar_batches=columnar
        )
        for columnar in (True, False)
    }
    assert {"I1"} <= set(read[False].element_spec[0])
    assert _record_keys(read[True]) == _record_keys(read[False])

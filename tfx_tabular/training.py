"""Distributed training with an input-bound meter, checkpoint resume and a tf.Example serving export.

A custom loop under a `tf.distribute` strategy rather than `Model.fit`: the time spent in
`next(iterator)` is the time the accelerators wait for input, which `fit` cannot separate from
compute. That fraction is logged per epoch to TensorBoard and the console, and returned.
Checkpoints (model, optimizer, global step) go to the run folder; a restarted trainer restores the
latest one and runs the remaining steps, so the total number of steps is the same.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
import time
from typing import Callable, Optional, Sequence

import tensorflow as tf
import tf_keras as keras
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.input import as_ragged, input_fn
from tfx_tabular.schemas.infer import feature_spec, label_of

log = logging.getLogger(__name__)
ModelFn = Callable[[schema_pb2.Schema, str], keras.Model]


@dataclasses.dataclass
class EpochStats:
    epoch: int
    steps: int
    loss: float
    examples_per_second: float
    input_wait_fraction: float


@dataclasses.dataclass
class TrainResult:
    total_steps: int
    epochs: list[EpochStats]
    eval_metrics: dict[str, float]
    serving_model_dir: Optional[str]


def configure_gpus(memory_growth: bool = True, memory_limit_mb: Optional[int] = None) -> int:
    """GPU memory growth, or a per-GPU cap (like NVTabular's TF_MEMORY_ALLOCATION). Returns the
    GPU count. Must run before TensorFlow touches a GPU."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        if memory_limit_mb:
            tf.config.set_logical_device_configuration(
                gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=memory_limit_mb)])
        elif memory_growth:
            tf.config.experimental.set_memory_growth(gpu, True)
    return len(gpus)


def choose_strategy(kind: str = "auto") -> tf.distribute.Strategy:
    """`auto`: MultiWorkerMirroredStrategy when TF_CONFIG names several workers, MirroredStrategy
    over several local GPUs, one GPU, else the CPU. `mirrored` / `multi_worker` / `default` force."""
    cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    workers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
    if kind == "multi_worker" or (kind == "auto" and workers > 1):
        # Before anything lists logical devices: collectives must be configured at start-up.
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    if kind == "mirrored" or (kind == "auto" and len(gpus) > 1):
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    if kind == "auto" and len(gpus) == 1:
        return tf.distribute.OneDeviceStrategy(gpus[0].name)
    if kind not in ("auto", "default"):
        raise ValueError(f"unknown distribution {kind!r}")
    return tf.distribute.get_strategy()


def strategy_name(strategy: tf.distribute.Strategy) -> str:
    """The public name (TF's MultiWorkerMirroredStrategy class is CollectiveAllReduceStrategy)."""
    for cls, name in ((tf.distribute.MultiWorkerMirroredStrategy, "MultiWorkerMirroredStrategy"),
                      (tf.distribute.MirroredStrategy, "MirroredStrategy"),
                      (tf.distribute.OneDeviceStrategy, "OneDeviceStrategy")):
        if isinstance(strategy, cls):
            return name
    return "the default strategy"


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker" and resolver.task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict())


def _writable_dir(path: str, scratch: Optional[tempfile.TemporaryDirectory]) -> str:
    # Under MultiWorkerMirroredStrategy every worker must save; only the chief's copy is kept,
    # the others write into their scratch folder, deleted when training ends.
    return path if scratch is None else tempfile.mkdtemp(dir=scratch.name)


def export_serving_model(model: keras.Model, schema: schema_pb2.Schema, label: str,
                         export_dir: str, transform_output=None) -> None:
    """SavedModel whose `serving_default` takes serialized tf.Examples (`examples`), parsed with
    the schema's SERVING spec (label excluded), transformed by the Transform graph if any."""
    if transform_output is not None:
        raw_spec = {k: v for k, v in transform_output.raw_feature_spec().items()
                    if k != label and k in feature_spec(schema, environment="SERVING")}
        tft_layer = transform_output.transform_features_layer()
    else:
        raw_spec = feature_spec(schema, environment="SERVING", exclude=(label,))
        tft_layer = None
    model.tft_layer = tft_layer  # tracked, so the Transform graph's assets are saved

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized):
        features = tf.io.parse_example(serialized, raw_spec)
        if tft_layer is not None:
            features = as_ragged(tft_layer(features))
        return {"outputs": model(features)}

    tf.saved_model.save(model, export_dir, signatures={"serving_default": serve})


def train(train_files: Sequence[str], eval_files: Sequence[str], schema: schema_pb2.Schema,
          run_dir: str, serving_model_dir: Optional[str], *,
          label: Optional[str] = None, model_fn: Optional[ModelFn] = None,
          batch_size: int = 1024, steps_per_epoch: int, epochs: int = 1,
          train_steps: Optional[int] = None,
          eval_steps: Optional[int] = None, learning_rate: float = 1e-3,
          cache: Optional[str] = None, seed: int = 0, strategy: Optional[tf.distribute.Strategy] = None,
          checkpoint_every: int = 200, mixed_precision: bool = False,
          transform_output=None, on_epoch: Optional[Callable[[EpochStats], None]] = None,
          stop_after_steps: Optional[int] = None) -> TrainResult:
    """Train `model_fn(schema, label)` (default: the reference model) for `epochs` epochs of
    `steps_per_epoch` global batches of `batch_size` (or `train_steps` steps in all); evaluate
    `eval_steps` batches (None: the whole eval split once); export the serving model (the
    chief's copy is kept).

    `stop_after_steps` stops early without exporting (used to test resumption).
    """
    from tfx_tabular.model import build_reference_model

    label = label or label_of(schema)
    if not label:
        raise ValueError("no label: pass `label` or annotate one in the schema")
    strategy = strategy or choose_strategy()
    chief = is_chief(strategy)
    # Deleted when train returns, or by its finalizer (at exit at the latest) if training fails.
    scratch = None if chief else tempfile.TemporaryDirectory(prefix="tfx-tabular-worker-")
    if scratch is not None:
        log.info("not the chief: checkpoints, summaries and the export go to %s (deleted at the "
                 "end; the chief's copy is kept)", scratch.name)
    if mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_float16")
    model_schema = schema
    if transform_output is not None:
        # The transformed schema loses a passed-through label's domain, which picks the head.
        model_schema = schema_pb2.Schema()
        model_schema.CopyFrom(transform_output.transformed_metadata.schema)
        raw_label = next((f for f in schema.feature if f.name == label), None)
        for feature in model_schema.feature:
            if raw_label is not None and feature.name == label:
                for domain in ("int_domain", "bool_domain"):
                    if raw_label.HasField(domain):
                        getattr(feature, domain).CopyFrom(getattr(raw_label, domain))
    build = model_fn or build_reference_model
    per_replica = batch_size // strategy.num_replicas_in_sync
    if per_replica * strategy.num_replicas_in_sync != batch_size:
        raise ValueError(f"batch_size {batch_size} is not a multiple of the "
                         f"{strategy.num_replicas_in_sync} replicas")

    with strategy.scope():
        model = build(model_schema, label)
        binary = getattr(model, "binary_label", True)
        optimizer = keras.optimizers.Adam(learning_rate)
        if mixed_precision:
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
        loss_object = (keras.losses.BinaryCrossentropy if binary else keras.losses.MeanSquaredError)(
            reduction=keras.losses.Reduction.NONE)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        eval_metrics = ({"auc": keras.metrics.AUC(name="auc"), "loss": keras.metrics.Mean("loss")}
                        if binary else {"rmse": keras.metrics.RootMeanSquaredError(),
                                        "loss": keras.metrics.Mean("loss")})
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    checkpoint_dir = os.path.join(run_dir, "checkpoints")
    manager = tf.train.CheckpointManager(checkpoint, _writable_dir(checkpoint_dir, scratch),
                                         max_to_keep=2)
    # Every worker resumes from the chief's checkpoints: a restarted worker starting at step 0
    # would run more steps than the others and hang their collectives.
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    if latest:
        checkpoint.restore(latest)
        log.info("resumed from %s at step %d", latest, int(step.numpy()))

    def dataset(files, training):
        def make(ctx: tf.distribute.InputContext):
            return input_fn(files, schema, ctx.get_per_replica_batch_size(batch_size), label,
                            training=training, cache=cache if training else None,
                            seed=seed + int(step.numpy()), input_context=ctx,
                            transform_output=transform_output)
        return strategy.distribute_datasets_from_function(make)

    def step_fn(features, labels):
        with tf.GradientTape() as tape:
            predictions = tf.cast(model(features, training=True), tf.float32)
            per_example = loss_object(tf.cast(labels, tf.float32), predictions)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=batch_size)
            scaled = optimizer.get_scaled_loss(loss) if mixed_precision else loss
        gradients = tape.gradient(scaled, model.trainable_variables)
        if mixed_precision:
            gradients = optimizer.get_unscaled_gradients(gradients)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    @tf.function
    def train_step(batch):
        losses = strategy.run(step_fn, args=batch)
        step.assign_add(1)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    def eval_fn(features, labels):
        predictions = tf.cast(model(features, training=False), tf.float32)
        labels = tf.cast(labels, tf.float32)
        eval_metrics["loss"].update_state(loss_object(labels, predictions))
        for name, metric in eval_metrics.items():
            if name != "loss":
                metric.update_state(labels, predictions)

    @tf.function
    def eval_step(batch):
        strategy.run(eval_fn, args=batch)

    total_steps = train_steps or steps_per_epoch * epochs
    writer = tf.summary.create_file_writer(_writable_dir(os.path.join(run_dir, "train"), scratch))

    def finished(eval_results: dict, exported: bool) -> TrainResult:
        if scratch is not None:
            writer.close()
            scratch.cleanup()
        return TrainResult(int(step.numpy()), history, eval_results,
                           serving_model_dir if exported and chief else None)

    history: list[EpochStats] = []
    iterator = iter(dataset(train_files, training=True))
    while int(step.numpy()) < total_steps:
        epoch = int(step.numpy()) // steps_per_epoch
        epoch_end = min((epoch + 1) * steps_per_epoch, total_steps)
        if stop_after_steps is not None:
            epoch_end = min(epoch_end, stop_after_steps)
        start, waiting, steps, loss = time.perf_counter(), 0.0, 0, tf.constant(0.0)
        while int(step.numpy()) < epoch_end:
            fetch = time.perf_counter()
            batch = next(iterator)
            waiting += time.perf_counter() - fetch
            loss = train_step(batch)
            steps += 1
            if int(step.numpy()) % checkpoint_every == 0:
                manager.save(checkpoint_number=step)
        loss_value = float(loss.numpy())  # waits for the last step
        seconds = time.perf_counter() - start
        stats = EpochStats(epoch + 1, steps, loss_value,
                           steps * batch_size / seconds if seconds else 0.0,
                           waiting / seconds if seconds else 0.0)
        history.append(stats)
        manager.save(checkpoint_number=step)
        with writer.as_default(step=int(step.numpy())):
            tf.summary.scalar("loss", stats.loss)
            tf.summary.scalar("examples_per_second", stats.examples_per_second)
            tf.summary.scalar("input_wait_fraction", stats.input_wait_fraction)
        if on_epoch:
            on_epoch(stats)
        if stop_after_steps is not None and int(step.numpy()) >= stop_after_steps:
            return finished({}, exported=False)

    eval_iterator = iter(dataset(eval_files, training=False))
    done = 0
    while eval_steps is None or done < eval_steps:
        batch = next(eval_iterator, None)
        if batch is None:
            break
        eval_step(batch)
        done += 1
    results = {name: float(metric.result().numpy()) for name, metric in eval_metrics.items()}
    if serving_model_dir is not None:
        export_serving_model(model, schema, label, _writable_dir(serving_model_dir, scratch),
                             transform_output)
    return finished(results, exported=serving_model_dir is not None)

"""Distributed training with an input-bound meter, checkpoint resume and a tf.Example serving export.

A custom loop under a `tf.distribute` strategy rather than `Model.fit`: the time spent in
`next(iterator)` is the time the accelerators wait for input, which `fit` cannot separate from
compute. That fraction is logged per epoch to TensorBoard and the console, and returned.
Checkpoints (model, optimizer, global step) go to the run folder; a restarted trainer restores the
latest one and runs the remaining steps, so the total number of steps is the same.

`train` runs named steps: the label and model schema, the model and its task (loss, metrics),
checkpoints, the distributed datasets and step functions, the epoch loop, evaluation, export.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
import time
from typing import Callable, Iterator, Optional, Sequence

import tensorflow as tf
import tf_keras as keras
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.schemas.infer import label_of
from tfx_tabular.training.export import export_serving_model
from tfx_tabular.training.input_fn import input_fn
from tfx_tabular.training.strategy import choose_strategy, is_chief

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


@dataclasses.dataclass
class _Trainable:
    """What the loop updates and checkpoints: the model, its optimizer, loss and eval metrics."""

    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    loss: keras.losses.Loss
    eval_metrics: dict[str, keras.metrics.Metric]
    step: tf.Variable
    mixed_precision: bool


@dataclasses.dataclass(frozen=True)
class _Run:
    """Where a run writes: its run folder, or (a non-chief replica) a scratch folder."""

    run_dir: str
    scratch: Optional[tempfile.TemporaryDirectory]

    def writable(self, path: str) -> str:
        # Under MultiWorkerMirroredStrategy every worker must save; only the chief's copy is kept,
        # the others write into their scratch folder, deleted when training ends.
        return path if self.scratch is None else tempfile.mkdtemp(dir=self.scratch.name)


@contextlib.contextmanager
def _precision_policy(mixed_precision: bool) -> Iterator[None]:
    """mixed_float16 while training; the process-wide Keras policy is restored afterwards."""
    previous = keras.mixed_precision.global_policy()
    if mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def _model_schema(schema: schema_pb2.Schema, label: str, transform_output) -> schema_pb2.Schema:
    """The schema the model sees: the transformed one under Transform, else the raw one."""
    if transform_output is None:
        return schema
    # The transformed schema loses a passed-through label's domain, which picks the head.
    model_schema = schema_pb2.Schema()
    model_schema.CopyFrom(transform_output.transformed_metadata.schema)
    raw_label = next((f for f in schema.feature if f.name == label), None)
    for feature in model_schema.feature:
        if raw_label is not None and feature.name == label:
            for domain in ("int_domain", "bool_domain"):
                if raw_label.HasField(domain):
                    getattr(feature, domain).CopyFrom(getattr(raw_label, domain))
    return model_schema


def _build_trainable(
    build: ModelFn,
    schema: schema_pb2.Schema,
    label: str,
    learning_rate: float,
    mixed_precision: bool,
) -> _Trainable:
    """Under the strategy's scope: the model, and a head (loss, metrics) its label implies."""
    model = build(schema, label)
    binary = getattr(model, "binary_label", True)
    optimizer = keras.optimizers.Adam(learning_rate)
    if mixed_precision:
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    loss = (keras.losses.BinaryCrossentropy if binary else keras.losses.MeanSquaredError)(
        reduction=keras.losses.Reduction.NONE
    )
    metrics = (
        {"auc": keras.metrics.AUC(name="auc")}
        if binary
        else {"rmse": keras.metrics.RootMeanSquaredError()}
    )
    metrics["loss"] = keras.metrics.Mean("loss")
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    return _Trainable(model, optimizer, loss, metrics, step, mixed_precision)


def _restore_checkpoints(trainable: _Trainable, run: _Run) -> tf.train.CheckpointManager:
    checkpoint = tf.train.Checkpoint(
        model=trainable.model, optimizer=trainable.optimizer, step=trainable.step
    )
    checkpoint_dir = os.path.join(run.run_dir, "checkpoints")
    manager = tf.train.CheckpointManager(checkpoint, run.writable(checkpoint_dir), max_to_keep=2)
    # Every worker resumes from the chief's checkpoints: a restarted worker starting at step 0
    # would run more steps than the others and hang their collectives.
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    if latest:
        checkpoint.restore(latest)
        log.info("resumed from %s at step %d", latest, int(trainable.step.numpy()))
    return manager


def _step_functions(strategy: tf.distribute.Strategy, t: _Trainable, global_batch: int):
    """The compiled train step (returns the summed loss) and eval step, over all replicas."""

    def replica_train(features, labels):
        with tf.GradientTape() as tape:
            predictions = tf.cast(t.model(features, training=True), tf.float32)
            per_example = t.loss(tf.cast(labels, tf.float32), predictions)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            scaled = t.optimizer.get_scaled_loss(loss) if t.mixed_precision else loss
        gradients = tape.gradient(scaled, t.model.trainable_variables)
        if t.mixed_precision:
            gradients = t.optimizer.get_unscaled_gradients(gradients)
        t.optimizer.apply_gradients(zip(gradients, t.model.trainable_variables, strict=True))
        return loss

    def replica_eval(features, labels):
        predictions = tf.cast(t.model(features, training=False), tf.float32)
        labels = tf.cast(labels, tf.float32)
        t.eval_metrics["loss"].update_state(t.loss(labels, predictions))
        for name, metric in t.eval_metrics.items():
            if name != "loss":
                metric.update_state(labels, predictions)

    @tf.function
    def train_step(batch):
        losses = strategy.run(replica_train, args=batch)
        t.step.assign_add(1)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    @tf.function
    def eval_step(batch):
        strategy.run(replica_eval, args=batch)

    return train_step, eval_step


def _write_summary(writer, step: int, values: dict) -> None:
    with writer.as_default(step=step):
        for name, value in values.items():
            tf.summary.scalar(name, value)


@dataclasses.dataclass
class _Loop:
    """The epoch loop: train to each epoch's end, checkpoint, evaluate, write TensorBoard
    summaries (train/ and eval/), report progress."""

    trainable: _Trainable
    train_step: Callable
    eval_step: Callable
    eval_dataset: Callable[[], object]
    manager: tf.train.CheckpointManager
    writers: dict  # "train" / "eval" → summary writer
    batch_size: int
    checkpoint_every: int
    eval_steps: Optional[int]
    on_epoch: Optional[Callable[[EpochStats], None]]
    on_progress: Optional[Callable[[int, str], None]]

    def _progress(self, steps: int, start: float, waiting: float, loss) -> None:
        seconds = time.perf_counter() - start
        self.on_progress(
            int(self.trainable.step.numpy()),
            f"loss {float(loss.numpy()):.4f}, "
            f"{steps * self.batch_size / seconds:,.0f} examples/s, "
            f"input wait {waiting / seconds:.0%}",
        )

    def epoch(self, iterator, number: int, epoch_end: int) -> EpochStats:
        """Steps to `epoch_end`, timing the wait for input apart from the steps."""
        step = self.trainable.step
        start, waiting, steps, loss = time.perf_counter(), 0.0, 0, tf.constant(0.0)
        reported = start
        while int(step.numpy()) < epoch_end:
            fetch = time.perf_counter()
            batch = next(iterator)
            waiting += time.perf_counter() - fetch
            loss = self.train_step(batch)
            steps += 1
            if int(step.numpy()) % self.checkpoint_every == 0:
                self.manager.save(checkpoint_number=step)
            if self.on_progress and time.perf_counter() - reported >= 1.0:
                reported = time.perf_counter()
                self._progress(steps, start, waiting, loss)
        loss_value = float(loss.numpy())  # waits for the last step
        seconds = time.perf_counter() - start
        return EpochStats(
            number,
            steps,
            loss_value,
            steps * self.batch_size / seconds if seconds else 0.0,
            waiting / seconds if seconds else 0.0,
        )

    def evaluate(self) -> dict[str, float]:
        """`eval_steps` batches (None: the whole eval split once)."""
        for metric in self.trainable.eval_metrics.values():
            metric.reset_state()
        iterator, done = iter(self.eval_dataset()), 0
        while self.eval_steps is None or done < self.eval_steps:
            batch = next(iterator, None)
            if batch is None:
                break
            self.eval_step(batch)
            done += 1
        return {name: float(m.result().numpy()) for name, m in self.trainable.eval_metrics.items()}

    def run(self, iterator, steps_per_epoch: int, last_step: int, evaluate: bool):
        """Epochs up to `last_step`, each evaluated when `evaluate`; (history, last metrics)."""
        history, metrics, step = [], {}, self.trainable.step
        while int(step.numpy()) < last_step:
            epoch = int(step.numpy()) // steps_per_epoch
            stats = self.epoch(iterator, epoch + 1, min((epoch + 1) * steps_per_epoch, last_step))
            history.append(stats)
            self.manager.save(checkpoint_number=step)
            _write_summary(
                self.writers["train"],
                int(step.numpy()),
                {
                    "loss": stats.loss,
                    "examples_per_second": stats.examples_per_second,
                    "input_wait_fraction": stats.input_wait_fraction,
                },
            )
            if evaluate:
                metrics = self.evaluate()
                _write_summary(self.writers["eval"], int(step.numpy()), metrics)
            if self.on_epoch:
                self.on_epoch(stats)
        if evaluate and not history:  # resumed after the last step: evaluate what was restored
            metrics = self.evaluate()
        return history, metrics


def train(
    train_files: Sequence[str],
    eval_files: Sequence[str],
    schema: schema_pb2.Schema,
    run_dir: str,
    serving_model_dir: Optional[str],
    *,
    label: Optional[str] = None,
    model_fn: Optional[ModelFn] = None,
    batch_size: int,
    steps_per_epoch: int,
    epochs: int = 1,
    train_steps: Optional[int] = None,
    eval_steps: Optional[int] = None,
    learning_rate: float,
    cache: Optional[str] = None,
    seed: int = 0,
    strategy: Optional[tf.distribute.Strategy] = None,
    checkpoint_every: int = 200,
    mixed_precision: bool = False,
    transform_output=None,
    on_epoch: Optional[Callable[[EpochStats], None]] = None,
    on_progress: Optional[Callable[[int, str], None]] = None,
    stop_after_steps: Optional[int] = None,
) -> TrainResult:
    """Train `model_fn(schema, label)` (default: the reference model) for `epochs` epochs of
    `steps_per_epoch` global batches of `batch_size` (or `train_steps` steps in all); evaluate
    `eval_steps` batches (None: the whole eval split once); export the serving model (the
    chief's copy is kept).

    Every epoch ends with a checkpoint, an evaluation and TensorBoard summaries (`train/`: loss,
    examples/s, input wait; `eval/`: the metrics). `on_progress(step, note)` is called at most
    once a second. `stop_after_steps` stops early without evaluating or exporting (used to test
    resumption).
    """
    from tfx_tabular.training.model import build_reference_model

    label = label or label_of(schema)
    if not label:
        raise ValueError("no label: pass `label` or annotate one in the schema")
    strategy = strategy or choose_strategy()
    if batch_size % strategy.num_replicas_in_sync:
        raise ValueError(
            f"batch_size {batch_size} is not a multiple of the "
            f"{strategy.num_replicas_in_sync} replicas"
        )
    chief = is_chief(strategy)
    # Deleted when train returns, or by its finalizer (at exit at the latest) if training fails.
    run = _Run(
        run_dir, None if chief else tempfile.TemporaryDirectory(prefix="tfx-tabular-worker-")
    )
    if run.scratch is not None:
        log.info(
            "not the chief: checkpoints, summaries and the export go to %s (deleted at the "
            "end; the chief's copy is kept)",
            run.scratch.name,
        )

    def distributed(files, training: bool):
        def make(ctx: tf.distribute.InputContext):
            return input_fn(
                files,
                schema,
                ctx.get_per_replica_batch_size(batch_size),
                label,
                training=training,
                cache=cache if training else None,
                seed=seed + int(trainable.step.numpy()),
                input_context=ctx,
                transform_output=transform_output,
            )

        return strategy.distribute_datasets_from_function(make)

    with _precision_policy(mixed_precision), strategy.scope():
        trainable = _build_trainable(
            model_fn or build_reference_model,
            _model_schema(schema, label, transform_output),
            label,
            learning_rate,
            mixed_precision,
        )
    manager = _restore_checkpoints(trainable, run)
    train_step, eval_step = _step_functions(strategy, trainable, batch_size)
    writers = {
        name: tf.summary.create_file_writer(run.writable(os.path.join(run_dir, name)))
        for name in ("train", "eval")
    }
    loop = _Loop(
        trainable,
        train_step,
        eval_step,
        lambda: distributed(eval_files, training=False),
        manager,
        writers,
        batch_size,
        checkpoint_every,
        eval_steps,
        on_epoch,
        on_progress,
    )
    total_steps = train_steps or steps_per_epoch * epochs
    last_step = min(total_steps, stop_after_steps or total_steps)
    finished = last_step == total_steps  # stopped early: no evaluation, no export
    try:
        with _precision_policy(mixed_precision):
            history, metrics = loop.run(
                iter(distributed(train_files, training=True)),
                steps_per_epoch,
                last_step,
                evaluate=finished,
            )
            if finished and serving_model_dir is not None:
                export_serving_model(
                    trainable.model,
                    schema,
                    label,
                    run.writable(serving_model_dir),
                    transform_output,
                )
    finally:
        for writer in writers.values():
            writer.close()
        if run.scratch is not None:
            run.scratch.cleanup()
    exported = finished and serving_model_dir is not None and chief
    return TrainResult(
        int(trainable.step.numpy()), history, metrics, serving_model_dir if exported else None
    )

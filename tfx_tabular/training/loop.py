"""Distributed training with an input-bound meter, checkpoint resume and a tf.Example serving export.

A custom loop under a `tf.distribute` strategy rather than `Model.fit`: the time a step waits
for its batch is the time the accelerators wait for input, which `fit` does not report. The
train step takes its batch from the iterator inside the compiled step (as `fit`'s does: a
training batch of ragged features never goes through Python) and times that wait in the graph;
the loop waits for each step to finish (it reads the global step), so one step's wait never
overlaps the last one's compute. The fraction is logged per epoch to TensorBoard and the
console, and returned.
Checkpoints (model, optimizer, global step) go to the run folder; a restarted trainer restores the
latest one and runs the remaining steps, so the total number of steps is the same.

`train` takes the data and folders of a run and one `TrainingConfig` (config.py), and runs named
steps: the label and model schema, the model and its task (loss, metrics), checkpoints, the
distributed datasets and step functions, the epoch loop, evaluation, export.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import logging
import math
import os
import tempfile
import time
from typing import Any, Callable, Iterator, Optional, Sequence

import tensorflow as tf
import tf_keras as keras
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.schemas.infer import label_of
from tfx_tabular.schemas.parsing import feature_spec
from tfx_tabular.training.columnar import MAX_FEATURES
from tfx_tabular.training.config import TrainingConfig
from tfx_tabular.training.export import export_serving_model
from tfx_tabular.training.input_fn import input_fn
from tfx_tabular.training.model import build_reference_model
from tfx_tabular.training.strategy import choose_strategy, is_chief
from tfx_tabular.training.task import (
    REGRESSION,
    LabelValuesError,
    Task,
    non_finite_label_message,
    task_of,
)

log = logging.getLogger(__name__)


def _autograph_skips_tf_keras() -> None:
    """Autograph calls Keras' own code unconverted, as TensorFlow's rules do for `keras`; Keras 2
    is the `tf_keras` package, which they do not name, so tracing a train step transpiled
    hundreds of its functions (10-20 s at every run's first step). Layers still convert a
    subclassed model's `call`, as under Keras' own `fit`."""
    from tensorflow.python.autograph.core import config

    rule = config.DoNotConvert("tf_keras")
    if not any(getattr(r, "_prefix", None) == "tf_keras" for r in config.CONVERSION_RULES):
        config.CONVERSION_RULES = (rule, *config.CONVERSION_RULES)


_autograph_skips_tf_keras()


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
    export_seconds: Optional[float] = None  # writing the serving SavedModel (None: no export)


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
    # The transformed schema loses a passed-through label's domain, which picks the task.
    model_schema = schema_pb2.Schema()
    model_schema.CopyFrom(transform_output.transformed_metadata.schema)
    raw_label = next((f for f in schema.feature if f.name == label), None)
    for feature in model_schema.feature:
        if raw_label is not None and feature.name == label:
            for domain in ("int_domain", "bool_domain", "string_domain"):
                if raw_label.HasField(domain) and not feature.HasField("domain"):
                    getattr(feature, domain).CopyFrom(getattr(raw_label, domain))
    return model_schema


def check_label(schema: schema_pb2.Schema, label: str) -> None:
    """Before anything is built: the label is a feature with a value in every row."""
    spec = feature_spec(schema)
    if label not in spec:
        raise ValueError(
            f"label {label!r} is not a feature of the schema "
            f"(features: {', '.join(sorted(spec)[:20])})"
        )
    if not isinstance(spec[label], tf.io.FixedLenFeature):
        raise ValueError(
            f"label {label!r} has missing values (the schema gives it no fixed shape, as for a "
            "column with nulls): drop or fill those rows, or transform the label"
        )
    feature = next(f for f in schema.feature if f.name == label)
    bounds = (feature.float_domain.min, feature.float_domain.max)
    if feature.HasField("float_domain") and not all(math.isfinite(b) for b in bounds):
        raise LabelValuesError(non_finite_label_message(label))  # the footers saw ±inf


def _checked_inputs(
    train_files, eval_files, schema, label: str, task: Optional[str], transform_output
) -> tuple[schema_pb2.Schema, Task]:
    """Before anything is built: files in both splits, a label with a value in every row, and
    the task it can have; returns the schema the model sees and the task."""
    for split, files in (("train", train_files), ("eval", eval_files)):
        if not files:
            raise ValueError(f"no {split} files to read")
    model_schema = _model_schema(schema, label, transform_output)
    check_label(model_schema, label)
    return model_schema, task_of(model_schema, label, task)


def _model_arguments(model_fn: Callable, offered: dict) -> dict:
    """The keyword arguments among `offered` (task, hyperparameters, custom_config) that the
    user's `model_fn(schema, label, ...)` declares; a `**kwargs` takes them all."""
    parameters = inspect.signature(model_fn).parameters.values()
    if any(p.kind == p.VAR_KEYWORD for p in parameters):
        return dict(offered)
    names = {p.name for p in parameters}
    return {k: v for k, v in offered.items() if k in names}


def _compiled_loss(model: keras.Model) -> keras.losses.Loss:
    """The loss a compiled model was given, as per-example losses."""
    loss = keras.losses.get(model.loss)
    if isinstance(loss, keras.losses.Loss):
        return type(loss).from_config({**loss.get_config(), "reduction": "none"})
    if callable(loss):  # a function of (labels, predictions) → per-example losses
        return keras.losses.LossFunctionWrapper(loss, reduction=keras.losses.Reduction.NONE)
    raise ValueError(f"model_fn's model has a loss this trainer cannot use: {model.loss!r}")


def _compiled_metrics(model: keras.Model, task: Task) -> dict[str, keras.metrics.Metric]:
    """The metrics a compiled model was given ("accuracy" read for the task, as Keras does)."""
    metrics = {}
    for config in model.get_compile_config().get("metrics") or []:
        if config in ("accuracy", "acc"):
            metric = task.metrics()["accuracy"] if task.kind != REGRESSION else None
        else:
            metric = keras.metrics.get(config)
        if metric is None:
            continue
        if not isinstance(metric, keras.metrics.Metric):
            metric = keras.metrics.MeanMetricWrapper(metric, name=metric.__name__)
        metrics[metric.name] = metric
    return metrics


def _build_trainable(
    config: TrainingConfig, schema: schema_pb2.Schema, label: str, task: Task
) -> _Trainable:
    """Under the strategy's scope: the model, its optimizer, loss and metrics — the compiled
    model's own when `model_fn` compiled it, else Adam(`learning_rate`) and the task's."""
    model_fn = config.model_fn
    if model_fn is None:
        model = build_reference_model(schema, label, task)
    else:
        offered = {"task": task, **config.model_arguments}
        model = model_fn(schema, label, **_model_arguments(model_fn, offered))
    compiled = model.get_compile_config() is not None
    if compiled:
        log.info("model_fn compiled its model: training with its optimizer, loss and metrics")
    optimizer = model.optimizer if compiled else keras.optimizers.Adam(config.learning_rate)
    if config.mixed_precision:
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    loss = _compiled_loss(model) if compiled else task.loss()
    metrics = _compiled_metrics(model, task) if compiled else task.metrics()
    metrics["loss"] = keras.metrics.Mean("loss")
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    return _Trainable(model, optimizer, loss, metrics, step, config.mixed_precision)


def _warm_start(model: keras.Model, base_model: str) -> None:
    """The weights of a previous serving export (whose root object is its Keras model): every
    variable of `model` must find its value there, or the architectures differ."""
    variables = os.path.join(base_model, "variables", "variables")
    try:
        # `read`, not `restore`: the checkpoint's own save counter is not the model's.
        status = tf.train.Checkpoint(model).read(variables).expect_partial()
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.NotFoundError) as error:
        raise ValueError(
            f"base_model {base_model} cannot warm-start this model (a different "
            f"architecture or not a Keras export): {error}"
        ) from error
    log.info("warm start: weights from %s", base_model)


def _restore_checkpoints(
    trainable: _Trainable, run: _Run, base_model: Optional[str] = None
) -> tf.train.CheckpointManager:
    """Resume the run's latest checkpoint; without one, warm-start from `base_model` if given."""
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
    elif base_model:
        _warm_start(trainable.model, base_model)
    return manager


def _step_functions(strategy: tf.distribute.Strategy, t: _Trainable, global_batch: int):
    """The compiled train step over all replicas, which takes its batch from the training
    iterator and returns the summed loss, the batch's examples and the seconds it waited for
    the batch; and the compiled evaluation, which takes batches from an eval iterator until it
    ends or `steps` (negative: no limit) and returns how many it took. Batches never leave the
    graph (in Python, each would become ~40 ragged tensor objects), and neither function is
    traced again for another batch size (an evaluation's last batch is shorter)."""

    def replica_train(features, labels):
        with tf.GradientTape() as tape:
            predictions = tf.cast(t.model(features, training=True), tf.float32)
            per_example = t.loss(labels, predictions)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            if t.model.losses:  # the model's regularizers, as Keras' own fit adds them
                loss += tf.nn.scale_regularization_loss(tf.add_n(t.model.losses))
            scaled = t.optimizer.get_scaled_loss(loss) if t.mixed_precision else loss
        gradients = tape.gradient(scaled, t.model.trainable_variables)
        if t.mixed_precision:
            gradients = t.optimizer.get_unscaled_gradients(gradients)
        t.optimizer.apply_gradients(zip(gradients, t.model.trainable_variables, strict=True))
        return loss, tf.shape(labels, out_type=tf.int64)[0]

    def replica_eval(features, labels):
        predictions = tf.cast(t.model(features, training=False), tf.float32)
        t.eval_metrics["loss"].update_state(t.loss(labels, predictions))
        for name, metric in t.eval_metrics.items():
            if name != "loss":
                metric.update_state(labels, predictions)

    @tf.function
    def train_step(iterator):
        started = tf.timestamp()
        with tf.control_dependencies([started]):
            batch = next(iterator)
        with tf.control_dependencies(tf.nest.flatten(batch, expand_composites=True)):
            waited = tf.timestamp() - started
        losses, examples = strategy.run(replica_train, args=batch)
        t.step.assign_add(1)
        return (
            strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None),
            strategy.reduce(tf.distribute.ReduceOp.SUM, examples, axis=None),
            waited,
        )

    @tf.function
    def evaluate_batches(iterator, steps):
        done = tf.constant(0, tf.int64)
        while steps < 0 or done < steps:
            batch = iterator.get_next_as_optional()
            if not batch.has_value():
                break
            strategy.run(replica_eval, args=batch.get_value())
            done += 1
        return done

    return train_step, evaluate_batches


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
    evaluate_batches: Callable  # (eval iterator, steps) → batches evaluated
    eval_dataset: object  # iterated once per evaluation
    manager: tf.train.CheckpointManager
    writers: dict  # "train" / "eval" → summary writer
    config: TrainingConfig
    on_epoch: Optional[Callable[[EpochStats], None]]
    on_progress: Optional[Callable[[int, str], None]]

    def _progress(self, examples, start: float, waiting: float, loss) -> None:
        seconds = time.perf_counter() - start
        self.on_progress(
            int(self.trainable.step.numpy()),
            f"loss {float(loss.numpy()):.4f}, "
            f"{int(examples.numpy()) / seconds:,.0f} examples/s, "
            f"input wait {waiting / seconds:.0%}",
        )

    def epoch(self, iterator, number: int, epoch_end: int) -> EpochStats:
        """Steps to `epoch_end`, timing the wait for input apart from the steps."""
        step = self.trainable.step
        start, steps, loss = time.perf_counter(), 0, tf.constant(0.0)
        examples, waited = tf.constant(0, tf.int64), tf.constant(0.0, tf.float64)
        reported = start
        while int(step.numpy()) < epoch_end:
            loss, batch_examples, batch_waited = self.train_step(iterator)
            examples += batch_examples
            waited += batch_waited
            steps += 1
            if int(step.numpy()) % self.config.checkpoint_every == 0:
                self.manager.save(checkpoint_number=step)
            if self.on_progress and time.perf_counter() - reported >= 1.0:
                reported = time.perf_counter()
                self._progress(examples, start, float(waited.numpy()), loss)
        loss_value = float(loss.numpy())  # waits for the last step
        seconds, waiting = time.perf_counter() - start, float(waited.numpy())
        return EpochStats(
            number,
            steps,
            loss_value,
            int(examples.numpy()) / seconds if seconds else 0.0,
            waiting / seconds if seconds else 0.0,
        )

    def evaluate(self) -> dict[str, float]:
        """`eval_steps` batches (None: the whole eval split once)."""
        for metric in self.trainable.eval_metrics.values():
            metric.reset_state()
        steps = -1 if self.config.eval_steps is None else self.config.eval_steps
        self.evaluate_batches(iter(self.eval_dataset), tf.constant(steps, tf.int64))
        return {name: float(m.result().numpy()) for name, m in self.trainable.eval_metrics.items()}

    def run(self, train_data):
        """Epochs up to the config's total steps, each evaluated; (history, last metrics)."""
        history, metrics, step = [], {}, self.trainable.step
        steps_per_epoch, last_step = self.config.steps_per_epoch, self.config.total_steps
        iterator = iter(train_data)
        while int(step.numpy()) < last_step:
            epoch = int(step.numpy()) // steps_per_epoch
            stats = self.epoch(iterator, epoch + 1, min((epoch + 1) * steps_per_epoch, last_step))
            if int(step.numpy()) >= last_step:
                # Its prefetched batches are not needed any more: freed before the last
                # evaluation and the export, not held under them (wide tables: hundreds of MiB).
                iterator = None
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
            metrics = self.evaluate()
            _write_summary(self.writers["eval"], int(step.numpy()), metrics)
            if self.on_epoch:
                self.on_epoch(stats)
        if not history:  # resumed after the last step: evaluate what was restored
            metrics = self.evaluate()
        return history, metrics


@contextlib.contextmanager
def _label_values_checked(label: str) -> Iterator[None]:
    """The label encoder's check of a batch (non-finite labels), failing inside the compiled
    step, as the one-line error it is rather than TensorFlow's node and call stack."""
    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        message = non_finite_label_message(label)
        if message in error.message:
            raise LabelValuesError(message) from None
        raise


def _checked_setup(schema, config: TrainingConfig):
    """The label (given, or the schema's) and the strategy, whose replicas split the batch."""
    label = config.label or label_of(schema)
    if not label:
        raise ValueError("no label: pass `label` or annotate one in the schema")
    strategy = config.strategy or choose_strategy()
    if config.batch_size % strategy.num_replicas_in_sync:
        raise ValueError(
            f"batch_size {config.batch_size} is not a multiple of the "
            f"{strategy.num_replicas_in_sync} replicas"
        )
    return label, strategy


def _open_run(run_dir: str, strategy: tf.distribute.Strategy) -> _Run:
    """The chief writes to `run_dir`; another replica to a scratch folder, deleted when train
    returns, or by its finalizer (at exit at the latest) if training fails."""
    if is_chief(strategy):
        return _Run(run_dir, None)
    run = _Run(run_dir, tempfile.TemporaryDirectory(prefix="tfx-tabular-worker-"))
    log.info(
        "not the chief: checkpoints, summaries and the export go to %s (deleted at the "
        "end; the chief's copy is kept)",
        run.scratch.name,
    )
    return run


def _summary_writers(run: _Run) -> dict:
    return {
        name: tf.summary.create_file_writer(run.writable(os.path.join(run.run_dir, name)))
        for name in ("train", "eval")
    }


def _close_run(run: _Run, writers: dict) -> None:
    for writer in writers.values():
        writer.close()
    if run.scratch is not None:
        run.scratch.cleanup()


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """The run's distributed datasets: `input_fn` per replica (its share of the global batch and
    of the files), labels encoded for the task (string classes → ids)."""

    strategy: tf.distribute.Strategy
    schema: schema_pb2.Schema
    label: str
    task: Task
    config: TrainingConfig
    transform_output: Any
    step: tf.Variable
    run_dir: str

    def dataset(self, files, *, training: bool):
        # The training dataset repeats without end (input_fn's default `num_epochs`): the train
        # step's fetch then never synchronizes workers over the end of the data.
        # Seeded by the global step: a resumed run does not replay the first epoch's order.
        seed = self.config.seed + int(self.step.numpy())
        # The train split through the tf.data service, if asked: evaluation stays here (it
        # reads its split again at every epoch's end, each time a job of its own would start).
        service = self.config.data_service if training else None
        form = self.config.input_form_for(
            self.transform_output, len(feature_spec(self.schema)) <= MAX_FEATURES
        )

        def make(ctx: tf.distribute.InputContext):
            encode = self.task.label_encoder(self.label)
            dataset = input_fn(
                files,
                self.schema,
                ctx.get_per_replica_batch_size(self.config.batch_size),
                self.label,
                training=training,
                cache=self.config.cache if training else None,
                columnar_batches=self.config.columnar_batches,
                input_form=form,
                seed=seed,
                input_context=ctx,
                transform_output=self.transform_output,
                data_service=service,
                data_service_job=self._service_job(seed) if service else None,
            )
            return dataset.map(lambda features, labels: (features, encode(labels)))

        return self.strategy.distribute_datasets_from_function(make)

    def _service_job(self, seed: int) -> str:
        """The job every worker of this run shares (so each batch goes to one of them); new with
        each start or resume of the run, as the seed is."""
        digest = hashlib.sha256(self.run_dir.encode()).hexdigest()[:16]
        return f"tfx-tabular-{digest}-{seed}"


def train(
    train_files: Sequence[str],
    eval_files: Sequence[str],
    schema: schema_pb2.Schema,
    run_dir: str,
    serving_model_dir: Optional[str],
    config: TrainingConfig,
    *,
    base_model: Optional[str] = None,
    transform_output=None,
    on_epoch: Optional[Callable[[EpochStats], None]] = None,
    on_progress: Optional[Callable[[int, str], None]] = None,
) -> TrainResult:
    """Train as `config` says, checkpointing into `run_dir`; evaluate; export the serving model
    to `serving_model_dir` (None: no export; of several workers', the chief's copy is kept).

    `base_model`: a serving SavedModel (a previous Model artifact's) whose weights start the
    training, unless a checkpoint of this run is resumed. `transform_output`: a
    `tft.TFTransformOutput` whose graph the input pipeline and the export apply.

    Every epoch ends with a checkpoint, an evaluation and TensorBoard summaries (`train/`: loss,
    examples/s, input wait; `eval/`: the metrics), then `on_epoch(stats)`.
    `on_progress(step, note)` is called at most once a second.
    """
    label, strategy = _checked_setup(schema, config)
    model_schema, task = _checked_inputs(
        train_files, eval_files, schema, label, config.task, transform_output
    )
    run = _open_run(run_dir, strategy)
    with _precision_policy(config.mixed_precision), strategy.scope():
        trainable = _build_trainable(config, model_schema, label, task)
    manager = _restore_checkpoints(trainable, run, base_model)
    inputs = _Inputs(
        strategy, schema, label, task, config, transform_output, trainable.step, run_dir
    )
    train_data = inputs.dataset(train_files, training=True)
    eval_data = inputs.dataset(eval_files, training=False)
    train_step, evaluate_batches = _step_functions(strategy, trainable, config.batch_size)
    writers = _summary_writers(run)
    loop = _Loop(
        trainable,
        train_step,
        evaluate_batches,
        eval_data,
        manager,
        writers,
        config,
        on_epoch,
        on_progress,
    )
    try:
        with _precision_policy(config.mixed_precision), _label_values_checked(label):
            history, metrics = loop.run(train_data)
            exporting, export_seconds = time.perf_counter(), None
            if serving_model_dir is not None:
                export_serving_model(
                    trainable.model,
                    schema,
                    label,
                    task,
                    run.writable(serving_model_dir),
                    transform_output,
                )
                export_seconds = time.perf_counter() - exporting
    finally:
        _close_run(run, writers)
    exported = serving_model_dir is not None and is_chief(strategy)
    return TrainResult(
        int(trainable.step.numpy()),
        history,
        metrics,
        serving_model_dir if exported else None,
        export_seconds,
    )

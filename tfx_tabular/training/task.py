"""The learning task a label implies — binary, multiclass or regression — and what follows from
it: the model's head, the loss, the metrics, the label's encoding and the serving outputs.

From the schema's label feature, with no data pass:
* binary: a bool label, or integers with the domain 0..1 (footer min/max);
* multiclass: a string label (classes from its `string_domain`: partition values, the example
  statistics ParquetSchemaGen builds the schema from, sample statistics or a curated schema), or
  integers with a domain inside [0, MAX_INT_CLASSES);
* regression: floats, or integers with a wider range (or no domain).
An explicit `task` overrides the inference where the label allows it. TensorFlow is imported
where it is used, so the CLI can read TASKS cheaply.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Optional

from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.source.errors import InputError

if TYPE_CHECKING:
    import tensorflow as tf
    import tf_keras as keras

BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"
TASKS = (BINARY, MULTICLASS, REGRESSION)
# An integer label whose values all lie in [0, 32) is read as class ids; a wider range (ages,
# counts, prices) as a quantity. `task=` decides otherwise.
MAX_INT_CLASSES = 32


class TaskError(ValueError):
    """A task the label cannot have (e.g. multiclass over floats, classes without a domain)."""


class LabelValuesError(InputError):
    """A label holding values no loss can learn from (NaN, ±inf): the data's, so the command
    line exits 1 with the message alone."""


def non_finite_label_message(label: str) -> str:
    return (
        f"label {label!r} holds NaN or infinite values, which no model can learn from: drop "
        "those rows or give them a value before training"
    )


@dataclasses.dataclass(frozen=True)
class Task:
    kind: str
    num_classes: int = 1
    vocabulary: tuple[str, ...] = ()  # string labels: class i is vocabulary[i]

    @property
    def output_units(self) -> int:
        return self.num_classes if self.kind == MULTICLASS else 1

    @property
    def activation(self) -> Optional[str]:
        return {BINARY: "sigmoid", MULTICLASS: "softmax", REGRESSION: None}[self.kind]

    def loss(self) -> keras.losses.Loss:
        """Per-example losses (the loop averages over the global batch)."""
        import tf_keras as keras

        loss = {
            BINARY: keras.losses.BinaryCrossentropy,
            MULTICLASS: keras.losses.SparseCategoricalCrossentropy,
            REGRESSION: keras.losses.MeanSquaredError,
        }[self.kind]
        return loss(reduction=keras.losses.Reduction.NONE)

    def metrics(self) -> dict[str, keras.metrics.Metric]:
        """The evaluation metrics (besides the loss)."""
        import tf_keras as keras

        if self.kind == BINARY:
            return {
                "auc": keras.metrics.AUC(name="auc"),
                "accuracy": keras.metrics.BinaryAccuracy(),
            }
        if self.kind == MULTICLASS:
            return {"accuracy": keras.metrics.SparseCategoricalAccuracy()}
        return {
            "rmse": keras.metrics.RootMeanSquaredError(),
            "mae": keras.metrics.MeanAbsoluteError(),
        }

    def label_encoder(self, label: str) -> Callable[[tf.Tensor], tf.Tensor]:
        """Labels as the loss takes them: string classes → their ids (a batch holding a class
        outside the vocabulary fails, naming the label), anything else → float32 (a batch
        holding a NaN or infinite label fails, naming it, before a step learns from it: the
        footers' min and max leave NaN out, so no schema can tell beforehand)."""
        import tensorflow as tf

        def finite(labels: tf.Tensor) -> tf.Tensor:
            labels = tf.cast(labels, tf.float32)
            return tf.debugging.assert_all_finite(labels, non_finite_label_message(label))

        if not self.vocabulary:
            return finite
        from tfx_tabular.training.categorical import vocabulary_fingerprints

        ids = tf.range(len(self.vocabulary), dtype=tf.int64)
        by_string = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(self.vocabulary), ids), -1
        )
        # The integer input form gives a string label as its fingerprint.
        by_fingerprint = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocabulary_fingerprints(self.vocabulary)), ids
            ),
            -1,
        )

        def encode(labels: tf.Tensor) -> tf.Tensor:
            table = by_string if labels.dtype == tf.string else by_fingerprint
            ids = table.lookup(labels)
            check = tf.debugging.assert_non_negative(
                ids,
                message=f"label {label!r} holds a class that is not in its schema's "
                "string_domain (the classes the model was built for)",
            )
            with tf.control_dependencies([check]):
                return tf.cast(ids, tf.float32)

        return encode

    def serving_outputs(self, predictions: tf.Tensor) -> dict[str, tf.Tensor]:
        """Multiclass: `scores` per class and the class names in `classes` (what TFMA reads to map
        string labels); otherwise the prediction in `outputs`."""
        import tensorflow as tf

        if self.kind != MULTICLASS:
            return {"outputs": predictions}
        names = self.vocabulary or tuple(str(i) for i in range(self.num_classes))
        classes = tf.tile(tf.constant([names]), [tf.shape(predictions)[0], 1])
        return {"scores": predictions, "classes": classes}


def _int_classes(feature: schema_pb2.Feature) -> Optional[int]:
    """The number of classes an integer label's domain allows, if it is one of class ids."""
    if not feature.HasField("int_domain") or not feature.int_domain.HasField("max"):
        return None
    domain = feature.int_domain
    if domain.HasField("min") and domain.min >= 0 and domain.max < MAX_INT_CLASSES:
        return int(domain.max) + 1
    return None


def _inferred_kind(feature: schema_pb2.Feature) -> str:
    if feature.HasField("bool_domain"):
        return BINARY
    if feature.type == schema_pb2.BYTES:
        return MULTICLASS
    if feature.type == schema_pb2.INT:
        classes = _int_classes(feature)
        if classes == 2:
            return BINARY
        if classes is not None and classes > 2:
            return MULTICLASS
    return REGRESSION


def _multiclass(feature: schema_pb2.Feature) -> Task:
    if feature.type == schema_pb2.BYTES:
        vocabulary = tuple(feature.string_domain.value)
        if len(vocabulary) < 2:
            raise TaskError(
                f"label {feature.name!r} is a string with no known classes (its schema has no "
                "string_domain): build the schema from example statistics that list all its "
                "values (create_pipeline's default, not with_example_statistics=False; "
                "infer-schema --example-statistics DIR; at most max_vocabulary_size classes), "
                "use sample_statistics=True, or list the classes in a curated schema "
                "(--curated-schema)"
            )
        return Task(MULTICLASS, len(vocabulary), vocabulary)
    classes = _int_classes(feature)
    if feature.type != schema_pb2.INT or classes is None:
        raise TaskError(
            f"label {feature.name!r} cannot be multiclass: it needs integer class ids with a "
            f"domain inside [0, {MAX_INT_CLASSES}) or a string domain"
        )
    return Task(MULTICLASS, max(classes, 2))


def kind_of(schema: schema_pb2.Schema, label: str, task: Optional[str] = None) -> str:
    """The task's kind alone (no class vocabulary needed): `task` when given, else inferred."""
    feature = next((f for f in schema.feature if f.name == label), None)
    if feature is None:
        raise TaskError(f"label {label!r} is not in the schema")
    kind = task or _inferred_kind(feature)
    if kind not in TASKS:
        raise TaskError(f"task {kind!r} is not one of {', '.join(TASKS)}")
    if kind != MULTICLASS and feature.type == schema_pb2.BYTES:
        raise TaskError(f"label {label!r} holds strings: its task can only be {MULTICLASS}")
    return kind


def task_of(schema: schema_pb2.Schema, label: str, task: Optional[str] = None) -> Task:
    """The task of `label` in `schema`: `task` when given (and possible), else inferred."""
    kind = kind_of(schema, label, task)
    if kind == MULTICLASS:
        return _multiclass(next(f for f in schema.feature if f.name == label))
    return Task(kind, 2 if kind == BINARY else 1)

"""The reference model, built from a Schema with no data pass.

Features are handled in groups, not one by one, so that a table of thousands of columns builds,
traces, trains and exports about as fast as one of forty: the model's operations and weights
grow with the number of kinds of feature, not with the number of features.

* numeric features of a fixed shape → one concatenation per dtype, each value taken to
  sign·log1p and scaled min-max by its domain (the schema's int/float domain, footer min/max,
  taken the same way), or sign·log1p alone without a finite one; float columns get a non-finite
  indicator. The log first: counts and prices are heavy-tailed, and a min-max over their raw
  footer range squeezes most values into a few percent of [0, 1];
* numeric features with a variable number of values (nullable scalars, lists, nested lists) →
  the mean of their scaled values and log1p of their count (0 for a null: the missing
  indicator), all of them in one segment sum over their values laid end to end;
* categorical features (bytes, bools, categorical ints) → hashed into ONE embedding table, each
  feature into its own region of HASH_BINS rows while the table stays under MAX_TABLE_ROWS, past
  that each feature offset by its own salt (features then share rows at random, never value for
  value), mean-pooled over each row's values. In training each row's categorical feature reads
  as missing with probability CATEGORICAL_DROPOUT: hashed ids seen once or twice (most of a
  Zipf-distributed column's distinct values) otherwise let the embeddings memorise the train
  rows within a few epochs of small data.

Non-finite numbers (NaN, ±inf) count as missing: they are left out of means and counts, a fixed
float column's scaled value is 0 with its indicator set, and non-finite domain bounds are ignored.
The head follows the label's task (`task.py`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np
import tensorflow as tf
import tf_keras as keras
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.schemas.parsing import feature_spec
from tfx_tabular.training.categorical import bucket_ids
from tfx_tabular.training.forms import ragged_scalars
from tfx_tabular.training.task import Task, task_of

HASH_BINS = 10_007  # rows per categorical feature while the shared table is under its cap
MAX_TABLE_ROWS = 1_048_573  # a prime near 2**20: 32 MiB of float32 embeddings at 8 dimensions
EMBEDDING_DIM = 8
CATEGORICAL_DROPOUT = 0.5  # in training, the chance a row's categorical feature reads as missing
_SALT_SEED = 48  # the salts must be the same at every build: checkpoints and warm starts


def is_categorical(feature: schema_pb2.Feature) -> bool:
    if feature.type == schema_pb2.BYTES or feature.HasField("bool_domain"):
        return True
    return feature.type == schema_pb2.INT and feature.int_domain.is_categorical


def _signed_log1p(value: float) -> float:
    return math.copysign(math.log1p(abs(value)), value)


def _domain_scale(feature: schema_pb2.Feature) -> tuple[float, float]:
    """(offset, 1/span) of a numeric feature's sign·log1p values: its domain's bounds taken the
    same way, or (0, 1) without a domain. A domain with a non-finite bound (a column holding inf
    has an inf footer max) or a span float32 cannot hold says nothing: a min-max over it would
    scale every finite value to 0."""
    domain = None
    if feature.HasField("int_domain"):
        domain = feature.int_domain
    elif feature.HasField("float_domain"):
        domain = feature.float_domain
    if domain is None or not (domain.HasField("min") and domain.HasField("max")):
        return 0.0, 1.0
    low, high = float(domain.min), float(domain.max)
    if not (math.isfinite(low) and math.isfinite(high)) or not 0 < high - low < 3e38:
        return 0.0, 1.0
    low, high = _signed_log1p(low), _signed_log1p(high)
    return low, 1.0 / (high - low)


def _scaled(values: tf.Tensor, offset, inverse_span) -> tuple[tf.Tensor, tf.Tensor]:
    """(sign·log1p of the values scaled by `offset`, `inverse_span` (which broadcast against
    `values`), float32, with non-finite values as 0; whether each value was finite)."""
    x = tf.cast(values, tf.float32)
    finite = tf.math.is_finite(x)
    x = tf.where(finite, x, 0.0)
    return (tf.sign(x) * tf.math.log1p(tf.abs(x)) - offset) * inverse_span, finite


def _hash(values: tf.Tensor, bins: int, strings: bool) -> tf.Tensor:
    """Bucket ids of a group's values: strings, or their fingerprints (the integer input form),
    by `bucket_ids` (the same ids either way); integer categories by a multiplicative hash."""
    if strings:
        return bucket_ids(values, bins)
    return tf.math.floormod(tf.cast(values, tf.int64) * 2654435761, bins)


def _stacked_rows(tensors: list) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """N features' values laid end to end as n × batch rows, feature-major: (values, each value's
    row in [0, n × batch), each value's feature in [0, n)). A dense [batch, k] feature is k values
    a row; nested lists are flattened per row."""
    values, splits = [], []
    for x in tensors:
        if isinstance(x, tf.RaggedTensor):
            x = x.merge_dims(1, -1) if x.ragged_rank > 1 else x
            values.append(x.flat_values)
            splits.append(x.row_splits)
        else:
            shape = tf.shape(x, out_type=tf.int64)
            values.append(tf.reshape(x, [-1]))
            splits.append(tf.range(shape[0] + 1) * tf.reduce_prod(shape[1:]))
    splits = tf.stack(splits)  # [n, batch + 1]
    lengths = tf.reshape(splits[:, 1:] - splits[:, :-1], [-1])
    rows = tf.repeat(tf.range(tf.size(lengths, out_type=tf.int64)), lengths)
    features = tf.repeat(tf.range(len(tensors), dtype=tf.int64), splits[:, -1] - splits[:, 0])
    return tf.concat(values, 0), rows, features


def _per_row(sums: tf.Tensor, n: int, depth: int = 1) -> tf.Tensor:
    """[n × batch, depth] segment results → [batch, n × depth], one example a row (a static
    width: the Dense layers after it are built from it)."""
    by_feature = tf.reshape(sums, [n, -1, depth])
    return tf.reshape(tf.transpose(by_feature, [1, 0, 2]), [-1, n * depth])


@dataclasses.dataclass(frozen=True)
class _Groups:
    """Feature names by how they are read: dense numbers by dtype (with their column-wise scale),
    variable-length numbers by dtype (scale per feature), categoricals by dtype."""

    dense: dict  # dtype name → ([names], [widths], offsets, inverse spans)
    ragged: dict  # dtype name → ([names], offsets, inverse spans)
    categorical: dict  # dtype name → ([names], per-feature offsets into the table)
    table_rows: int
    bins: int


def _group_features(features: list, spec: dict) -> _Groups:
    dense, ragged, categorical = {}, {}, {}
    for feature in (f for f in features if not is_categorical(f)):
        parsing = spec[feature.name]
        offset, inverse = _domain_scale(feature)
        if isinstance(parsing, tf.io.FixedLenFeature):
            width = int(np.prod(parsing.shape or [1]))
            group = dense.setdefault(parsing.dtype.name, ([], [], [], []))
            columns = ([feature.name], [width], [offset] * width, [inverse] * width)
        else:
            group = ragged.setdefault(parsing.dtype.name, ([], [], []))
            columns = ([feature.name], [offset], [inverse])
        for into, values in zip(group, columns, strict=True):
            into.extend(values)
    names = [f.name for f in features if is_categorical(f)]
    if len(names) * HASH_BINS <= MAX_TABLE_ROWS:  # a region of its own per feature
        table_rows, bins = len(names) * HASH_BINS, HASH_BINS
        offsets = np.arange(len(names), dtype=np.int64) * HASH_BINS
    else:  # the whole table per feature, salted
        table_rows = bins = MAX_TABLE_ROWS
        offsets = np.random.default_rng(_SALT_SEED).integers(0, MAX_TABLE_ROWS, len(names))
    for name, offset in zip(names, offsets, strict=True):
        group = categorical.setdefault(spec[name].dtype.name, ([], []))
        group[0].append(name)
        group[1].append(int(offset))
    return _Groups(dense, ragged, categorical, table_rows, bins)


class SchemaFeatures(keras.layers.Layer):
    """Parsed features (dense or ragged) → one dense float vector per example."""

    def __init__(self, schema: schema_pb2.Schema, label: Optional[str], **kwargs):
        super().__init__(**kwargs)
        spec = feature_spec(schema)
        features = [f for f in schema.feature if f.name in spec and f.name != label]
        self._groups = _group_features(features, spec)
        if self._groups.categorical:
            self._embeddings = keras.layers.Embedding(
                self._groups.table_rows, EMBEDDING_DIM, name="embeddings"
            )

    def _dense(self, inputs, names, widths, offsets, inverse_spans):
        """Fixed-shape numbers of one dtype: scaled columns, then (floats) their indicators of a
        non-finite value."""
        columns = [tf.reshape(inputs[n], [-1, w]) for n, w in zip(names, widths, strict=True)]
        x = tf.concat(columns, axis=1)
        scaled, finite = _scaled(x, offsets, inverse_spans)
        if not x.dtype.is_floating:
            return [scaled]
        return [scaled, 1.0 - tf.cast(finite, tf.float32)]

    def _ragged(self, inputs, names, offsets, inverse_spans):
        """Variable-length numbers of one dtype: the mean of each row's finite scaled values and
        log1p of their count, per feature."""
        values, rows, features = _stacked_rows([inputs[n] for n in names])
        scaled, finite = _scaled(
            values,
            tf.gather(tf.constant(offsets, tf.float32), features),
            tf.gather(tf.constant(inverse_spans, tf.float32), features),
        )
        segments = len(names) * tf.shape(inputs[names[0]], out_type=tf.int64)[0]
        total = tf.math.unsorted_segment_sum(scaled, rows, segments)
        count = tf.math.unsorted_segment_sum(tf.cast(finite, tf.float32), rows, segments)
        mean, present = total / tf.maximum(count, 1.0), tf.math.log1p(count)
        return [_per_row(mean, len(names)), _per_row(present, len(names))]

    def _categorical(self, inputs, names, offsets, strings, training):
        """Categoricals of one dtype: each row's values hashed into the feature's rows of the
        shared table, their embeddings averaged (a row without values → zeros; in training,
        also a row's feature dropped as CATEGORICAL_DROPOUT says)."""
        values, rows, features = _stacked_rows([inputs[n] for n in names])
        salt = tf.gather(tf.constant(offsets, tf.int64), features)
        buckets = _hash(values, self._groups.bins, strings)
        ids = tf.math.floormod(buckets + salt, self._groups.table_rows)
        segments = len(names) * tf.shape(inputs[names[0]], out_type=tf.int64)[0]
        # float32 whatever the precision policy: the other groups' parts are
        embedded = tf.cast(self._embeddings(ids), tf.float32)
        total = tf.math.unsorted_segment_sum(embedded, rows, segments)
        count = tf.math.unsorted_segment_sum(tf.ones_like(rows, tf.float32), rows, segments)
        mean = total / tf.maximum(count, 1.0)[:, None]
        if training:
            kept = tf.random.uniform(tf.shape(mean)[:1]) >= CATEGORICAL_DROPOUT
            mean = tf.where(kept[:, None], mean, 0.0)
        return [_per_row(mean, len(names), EMBEDDING_DIM)]

    def call(self, inputs, training=None):
        inputs = ragged_scalars(inputs)  # either input form
        parts = []
        for group in self._groups.dense.values():
            parts += self._dense(inputs, *group)
        for group in self._groups.ragged.values():
            parts += self._ragged(inputs, *group)
        for dtype, group in self._groups.categorical.items():
            strings = dtype == tf.string.name
            parts += self._categorical(inputs, *group, strings=strings, training=training)
        return tf.concat(parts, axis=1)


class ReferenceModel(keras.Model):
    """The schema's features → hidden layers → the task's head. A subclassed model: a
    functional one would hold a Keras Input (and its layer) per feature."""

    def __init__(self, schema, label, task: Task, hidden_units: tuple[int, ...], **kwargs):
        super().__init__(**kwargs)
        self.features = SchemaFeatures(schema, label, name="schema_features")
        self.hidden = [
            keras.layers.Dense(units, activation="relu", name=f"hidden_{depth}")
            for depth, units in enumerate(hidden_units)
        ]
        self.head = keras.layers.Dense(task.output_units, activation=task.activation, name="output")

    def call(self, inputs, training=None):
        x = self.features(inputs, training=training)
        for layer in self.hidden:
            x = layer(x)
        return self.head(x)


def build_reference_model(
    schema: schema_pb2.Schema,
    label: str,
    task: Optional[Task] = None,
    hidden_units: tuple[int, ...] = (256, 128),
) -> keras.Model:
    """An uncompiled Keras 2 model (the trainer owns the optimizer and the loop) taking a dict of
    parsed features keyed by name, whose head follows `task` (default: the task the schema's
    label implies). Its weights are built here, from the parsing spec's shapes."""
    spec = feature_spec(schema)
    task = task or task_of(schema, label)
    model = ReferenceModel(schema, label, task, hidden_units, name="reference_model")
    model({name: _empty(s) for name, s in spec.items() if name != label}, training=False)
    return model


def _empty(spec):
    """A batch of no examples parsed by `spec` (a FixedLenFeature or a RaggedFeature): what
    builds the model's weights."""
    if isinstance(spec, tf.io.FixedLenFeature):
        return tf.zeros([0, *spec.shape], spec.dtype)
    batch = tf.zeros([0], spec.dtype)
    for _ in range(1 + len(spec.partitions)):
        batch = tf.RaggedTensor.from_row_splits(batch, tf.zeros([1], tf.int64))
    return batch

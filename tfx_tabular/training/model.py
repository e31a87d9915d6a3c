"""The reference model, built from a Schema with no data pass.

numeric features → scaled by the schema's int/float domain (footer min/max), or sign·log1p without
one, plus a missing indicator when nullable; categorical features (bytes, bools, categorical ints)
→ hashing + embeddings; variable-length and nested lists → hashed embeddings mean-pooled over the
ragged values (numeric lists: mean and count). The head follows the label's task (`task.py`).
"""

from __future__ import annotations

import re
from typing import Optional

import tensorflow as tf
import tf_keras as keras
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.schemas.parsing import feature_spec
from tfx_tabular.training.task import Task, task_of

HASH_BINS = 10_007
EMBEDDING_DIM = 8


def is_categorical(feature: schema_pb2.Feature) -> bool:
    if feature.type == schema_pb2.BYTES or feature.HasField("bool_domain"):
        return True
    return feature.type == schema_pb2.INT and feature.int_domain.is_categorical


def _hash(values: tf.Tensor) -> tf.Tensor:
    if values.dtype == tf.string:
        return tf.strings.to_hash_bucket_fast(values, HASH_BINS)
    return tf.math.floormod(tf.cast(values, tf.int64) * 2654435761, HASH_BINS)


def _pool(ragged: tf.RaggedTensor) -> tf.Tensor:
    """Mean over each row's values (rows without values → 0)."""
    while ragged.ragged_rank > 1:
        ragged = ragged.merge_dims(1, 2)
    total = tf.reduce_sum(ragged, axis=1)
    count = tf.cast(ragged.row_lengths(), total.dtype)
    return (
        total / tf.expand_dims(tf.maximum(count, 1.0), -1)
        if total.shape.rank == 2
        else total / tf.maximum(count, 1.0)
    )


class SchemaFeatures(keras.layers.Layer):
    """Parsed features (dense or ragged) → one dense float vector per example."""

    def __init__(self, schema: schema_pb2.Schema, label: Optional[str], **kwargs):
        super().__init__(**kwargs)
        self._schema_bytes = schema.SerializeToString()
        spec = feature_spec(schema)
        self._features = [f for f in schema.feature if f.name in spec and f.name != label]
        self._spec = spec
        self._embeddings = {
            f.name: keras.layers.Embedding(
                HASH_BINS, EMBEDDING_DIM, name=f"embed_{layer_name(i, f.name)}"
            )
            for i, f in enumerate(self._features)
            if is_categorical(f)
        }

    def _scale(self, feature: schema_pb2.Feature, x: tf.Tensor) -> tf.Tensor:
        x = tf.cast(x, tf.float32)
        domain = (
            feature.int_domain
            if feature.HasField("int_domain")
            else (feature.float_domain if feature.HasField("float_domain") else None)
        )
        if domain is not None and domain.max > domain.min:
            return (x - domain.min) / (domain.max - domain.min)
        return tf.sign(x) * tf.math.log1p(tf.abs(x))

    def call(self, inputs):
        parts = []
        for feature in self._features:
            x = inputs[feature.name]
            if is_categorical(feature):
                embed = self._embeddings[feature.name]
                if isinstance(x, tf.RaggedTensor):
                    ids = tf.ragged.map_flat_values(_hash, x)
                    parts.append(_pool(tf.ragged.map_flat_values(embed, ids)))
                else:
                    parts.append(tf.reduce_mean(embed(_hash(x)), axis=1))
            elif isinstance(x, tf.RaggedTensor):
                scaled = tf.ragged.map_flat_values(lambda v, f=feature: self._scale(f, v), x)
                while scaled.ragged_rank > 1:
                    scaled = scaled.merge_dims(1, 2)
                count = tf.cast(scaled.row_lengths(), tf.float32)
                parts += [
                    tf.expand_dims(_pool(scaled), -1),
                    tf.expand_dims(tf.math.log1p(count), -1),
                ]
            else:
                scaled = self._scale(feature, x)
                parts.append(scaled if scaled.shape.rank == 2 else tf.expand_dims(scaled, -1))
        return tf.concat(parts, axis=1)


def layer_name(index: int, feature: str) -> str:
    """A Keras layer name for a feature: Parquet allows any column name (`dense`, `été`, `a b`,
    `schema_features`, names that differ only in case), Keras needs unique names of ASCII
    letters, digits and `_` that no layer of the model already has. The index makes it unique;
    the feature name, kept where it is safe, makes it readable."""
    return f"f{index}_" + re.sub(r"[^A-Za-z0-9_]", "_", feature)[:48]


def _input_for(name: str, spec) -> keras.Input:
    # The model takes a dict keyed by feature name; the Input's own name only has to be valid.
    if isinstance(spec, tf.io.FixedLenFeature):
        return keras.Input(shape=tuple(spec.shape), dtype=spec.dtype, name=name)
    ragged_rank = 1 + len(spec.partitions)
    return keras.Input(shape=(None,) * ragged_rank, dtype=spec.dtype, ragged=True, name=name)


def build_reference_model(
    schema: schema_pb2.Schema,
    label: str,
    task: Optional[Task] = None,
    hidden_units: tuple[int, ...] = (256, 128),
) -> keras.Model:
    """An uncompiled Keras 2 model (the trainer owns the optimizer and the loop) whose head
    follows `task` (default: the task the schema's label implies)."""
    spec = feature_spec(schema)
    task = task or task_of(schema, label)
    features = [name for name in spec if name != label]
    inputs = {name: _input_for(layer_name(i, name), spec[name]) for i, name in enumerate(features)}
    x = SchemaFeatures(schema, label, name="schema_features")(inputs)
    for depth, units in enumerate(hidden_units):
        x = keras.layers.Dense(units, activation="relu", name=f"hidden_{depth}")(x)
    output = keras.layers.Dense(task.output_units, activation=task.activation, name="output")(x)
    return keras.Model(inputs=inputs, outputs=output)

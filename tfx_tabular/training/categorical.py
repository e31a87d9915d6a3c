"""Ids of categorical values from either their strings or their 64-bit fingerprints, the same id
for the same value either way, so a model trained on fingerprints scores strings at serving.

A fingerprint is FarmHash `Fingerprint64` of the string's bytes (`coders.fingerprint`), its 64
bits held in an int64. `bucket_ids` equals `tf.strings.to_hash_bucket_fast` on the strings (and
so tf-keras' `Hashing` without a salt): that function takes the fingerprint as an unsigned
number modulo the bucket count, so the int64 is reinterpreted as uint64 first (in signed
arithmetic the half of all fingerprints at or above 2^63 would land in other buckets).
`VocabularyIds` equals `StringLookup(vocabulary)` (out-of-vocabulary 0, the vocabulary 1..n).
"""

from __future__ import annotations

from typing import Sequence, Union

import numpy as np
import pyarrow as pa
import tensorflow as tf
import tf_keras as keras

from tfx_tabular.coders.fingerprint import fingerprints

Values = Union[tf.Tensor, tf.RaggedTensor]


def _flat(function, values: Values) -> Values:
    if isinstance(values, tf.RaggedTensor):
        return tf.ragged.map_flat_values(function, values)
    return function(values)


def fingerprint_strings(values: Values) -> Values:
    """Fingerprint64 of each string, as int64 (what the columnar records hold for strings)."""

    def fingerprint(strings):
        raw = tf.fingerprint(tf.reshape(strings, [-1]), method="farmhash64")
        ids = tf.bitcast(raw, tf.int64)  # little-endian bytes, as tf.fingerprint writes them
        return tf.reshape(ids, tf.shape(strings))

    return _flat(fingerprint, values)


def bucket_ids(values: Values, num_buckets: int) -> Values:
    """Hash bucket ids in [0, num_buckets) of strings, or of int64 fingerprints of strings."""

    def buckets(x):
        if x.dtype == tf.string:
            return tf.strings.to_hash_bucket_fast(x, num_buckets)
        if x.dtype != tf.int64:
            raise TypeError(f"bucket ids need strings or int64 fingerprints, not {x.dtype.name}")
        unsigned = tf.math.floormod(tf.bitcast(x, tf.uint64), tf.constant(num_buckets, tf.uint64))
        return tf.cast(unsigned, tf.int64)

    return _flat(buckets, values)


def vocabulary_fingerprints(vocabulary: Sequence[Union[str, bytes]]) -> np.ndarray:
    """The vocabulary's fingerprints as int64, refusing duplicates as `StringLookup` does."""
    values = [v.encode() if isinstance(v, str) else bytes(v) for v in vocabulary]
    if len(set(values)) != len(values):
        raise ValueError("the vocabulary holds a value twice")
    keys = fingerprints(pa.array(values, pa.binary())).view(np.int64)
    if len(np.unique(keys)) != len(keys):
        raise ValueError("two vocabulary values share a 64-bit fingerprint; drop one of them")
    return keys


class BucketIds(keras.layers.Layer):
    """`bucket_ids` as a Keras layer: strings (serving, per-row records) or int64 fingerprints
    (columnar records) → ids in [0, num_buckets)."""

    def __init__(self, num_buckets: int, **kwargs):
        super().__init__(**kwargs)
        self.num_buckets = num_buckets

    def call(self, inputs):
        return bucket_ids(inputs, self.num_buckets)

    def get_config(self):
        return {**super().get_config(), "num_buckets": self.num_buckets}


class VocabularyIds(keras.layers.Layer):
    """Ids of a vocabulary's values, equal to `StringLookup(vocabulary)`: 0 for a value outside
    it, 1..n for its values in order; from strings or from int64 fingerprints."""

    def __init__(self, vocabulary: Sequence[Union[str, bytes]], **kwargs):
        super().__init__(**kwargs)
        self.vocabulary = [v.decode() if isinstance(v, bytes) else v for v in vocabulary]
        ids = tf.range(1, len(self.vocabulary) + 1, dtype=tf.int64)
        self._by_fingerprint = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocabulary_fingerprints(self.vocabulary)), ids
            ),
            default_value=0,
        )

    def call(self, inputs):
        if inputs.dtype == tf.string:
            inputs = fingerprint_strings(inputs)
        return _flat(self._by_fingerprint.lookup, inputs)

    def get_config(self):
        return {**super().get_config(), "vocabulary": self.vocabulary}

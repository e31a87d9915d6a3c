"""tfx_tabular.training.categorical: the same ids from strings and from their fingerprints (as
the conversion computes them and as TensorFlow does), equal to tf-keras' `Hashing` and
`StringLookup` on the strings, dense and ragged, missing values included."""

import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
import tf_keras as keras

from tfx_tabular.coders.fingerprint import fingerprints
from tfx_tabular.training.categorical import (
    BucketIds,
    VocabularyIds,
    bucket_ids,
    fingerprint_strings,
    vocabulary_fingerprints,
)

# "" is what the per-row parse gives a missing scalar string without a schema default.
VALUES = ["", "a", "été", "a\x00b", "x" * 17, "y" * 40, "z" * 100, "€" * 3, "tail"]
BUCKETS = [1, 2, 10_007, 2**31 - 1, 2**62 + 7, 2**63 - 1]


def _strings():
    return tf.constant(VALUES)


def _conversion_fingerprints():
    """The conversion's fingerprints as the columnar records hold them: uint64 bits in int64."""
    return tf.constant(fingerprints(pa.array(VALUES)).view(np.int64))


def test_fingerprints_in_tensorflow_equal_the_conversions():
    np.testing.assert_array_equal(fingerprint_strings(_strings()), _conversion_fingerprints())
    # Half of all fingerprints are negative as int64: the values here include both halves.
    assert (_conversion_fingerprints().numpy() < 0).any()
    assert (_conversion_fingerprints().numpy() >= 0).any()


@pytest.mark.parametrize("num_buckets", BUCKETS)
def test_bucket_ids_from_strings_and_fingerprints_are_equal(num_buckets):
    from_strings = bucket_ids(_strings(), num_buckets)
    np.testing.assert_array_equal(from_strings, bucket_ids(_conversion_fingerprints(), num_buckets))
    expected = tf.strings.to_hash_bucket_fast(_strings(), num_buckets)
    np.testing.assert_array_equal(from_strings, expected)


def test_bucket_ids_equal_keras_hashing_and_work_on_ragged_lists():
    hashing = keras.layers.Hashing(10_007)
    np.testing.assert_array_equal(
        BucketIds(10_007)(_conversion_fingerprints()), hashing(_strings())
    )
    ragged = tf.RaggedTensor.from_row_lengths(_strings(), [3, 0, 6])
    ragged_fingerprints = tf.RaggedTensor.from_row_lengths(_conversion_fingerprints(), [3, 0, 6])
    ids = bucket_ids(ragged_fingerprints, 97)
    assert ids.to_list() == bucket_ids(ragged, 97).to_list()


def test_other_types_are_refused():
    with pytest.raises(TypeError, match="not int32"):
        bucket_ids(tf.constant([1, 2], tf.int32), 5)


def test_vocabulary_ids_equal_string_lookup():
    vocabulary = ["a", "été", "tail", "never seen"]
    lookup = keras.layers.StringLookup(vocabulary=vocabulary)
    layer = VocabularyIds(vocabulary)
    np.testing.assert_array_equal(layer(_strings()), lookup(_strings()))
    np.testing.assert_array_equal(layer(_conversion_fingerprints()), lookup(_strings()))
    ragged = tf.RaggedTensor.from_row_lengths(_conversion_fingerprints(), [4, 5])
    expected = tf.RaggedTensor.from_row_lengths(lookup(_strings()), [4, 5])
    assert layer(ragged).to_list() == expected.to_list()


def test_layers_rebuild_from_their_config():
    for layer in (BucketIds(31), VocabularyIds(["a", "tail"])):
        clone = type(layer).from_config(layer.get_config())
        np.testing.assert_array_equal(clone(_strings()), layer(_conversion_fingerprints()))


def test_duplicate_vocabulary_values_are_refused():
    with pytest.raises(ValueError, match="holds a value twice"):
        vocabulary_fingerprints(["a", "b", "a"])

"""tfx_tabular.coders.fingerprint gives TensorFlow's FarmHash Fingerprint64 of every value: the
same 64 bits as `tf.fingerprint(s, "farmhash64")` and, modulo any n, the bucket id of
`tf.strings.to_hash_bucket_fast(s, n)`, on every length range the function branches on."""

import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tfx_tabular.coders.fingerprint import fingerprints

# The lengths where farmhashna::Hash64 changes branch (0, 1–3, 4–7, 8–16, 17–32, 33–64, over
# 64 in 64-byte blocks with a trailing partial block), and either side of each.
BOUNDARY_LENGTHS = [0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200]
BUCKETS = [1, 2, 10_007, 2**31 - 1, 2**62 + 7, 2**63 - 1]


def tensorflow_fingerprints(values: list) -> np.ndarray:
    raw = tf.fingerprint(tf.constant(values, tf.string), "farmhash64").numpy()
    return np.frombuffer(raw.tobytes(), "<u8")


def _random_values(lengths) -> list:
    rng = np.random.default_rng(47)
    return [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in lengths for _ in range(4)]


def test_every_length_range_equals_tensorflow():
    values = _random_values(BOUNDARY_LENGTHS) + _random_values(range(300))
    ours = fingerprints(pa.array(values, pa.binary()))
    np.testing.assert_array_equal(ours, tensorflow_fingerprints(values))


def test_bucket_ids_equal_to_hash_bucket_fast_for_every_n():
    values = _random_values(BOUNDARY_LENGTHS)
    ours = fingerprints(pa.array(values, pa.binary()))
    for n in BUCKETS:
        buckets = tf.strings.to_hash_bucket_fast(tf.constant(values), n).numpy()
        np.testing.assert_array_equal(ours % np.uint64(n), buckets.astype(np.uint64), str(n))


def test_text_nul_bytes_and_empty_strings():
    values = ["", "a", "été", "€uro", "a\x00b", "\x00" * 9, "日本語のテキスト" * 5, " "]
    encoded = [v.encode() for v in values]
    expected = tensorflow_fingerprints(encoded)
    for type_ in (pa.string(), pa.large_string()):
        np.testing.assert_array_equal(fingerprints(pa.array(values, type_)), expected)
    np.testing.assert_array_equal(fingerprints(pa.array(encoded, pa.large_binary())), expected)


def test_slices_dictionaries_and_nulls():
    values = [f"value-{i}" * (i % 11) for i in range(100)]
    expected = tensorflow_fingerprints([v.encode() for v in values])
    array = pa.array(values)
    np.testing.assert_array_equal(fingerprints(array.slice(17, 50)), expected[17:67])
    np.testing.assert_array_equal(fingerprints(array.dictionary_encode()), expected)
    with_nulls = fingerprints(pa.array(["x", None, "y"]))
    np.testing.assert_array_equal(with_nulls, tensorflow_fingerprints([b"x", b"", b"y"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=20))
def test_any_bytes_equal_tensorflow(values):
    ours = fingerprints(pa.array(values, pa.binary()))
    np.testing.assert_array_equal(ours, tensorflow_fingerprints(values))


def test_other_types_are_refused_by_name():
    with pytest.raises(TypeError, match="string or binary values, not int64"):
        fingerprints(pa.array([1, 2]))


def test_a_threads_batches_get_their_own_dictionarys_fingerprints():
    """StringFingerprints reuses a dictionary's hashes for the next batch only when it carries
    the same strings: a copy of it, not one of the same length or the same bytes cut otherwise."""
    from tfx_tabular.coders import flatten
    from tfx_tabular.coders.pools import PooledColumns, StringFingerprints
    from tfx_tabular.source.mapping import features_of

    codes = [1, 0, None, 1, 0]
    fingerprints = StringFingerprints()
    for words in [["ab", "c"], ["ab", "c"], ["xy", "z"], ["x", "yz"], ["x", "yz"]]:
        column = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(words))
        batch = pa.RecordBatch.from_arrays([column], ["s"])
        columns = flatten.feature_columns(batch, features_of(batch.schema))
        assert columns[0][1].codes is not None  # kept dictionary-coded
        got = PooledColumns(columns, fingerprints).fingerprints.view(np.uint64)
        valid = [c is not None for c in codes]
        expected = tensorflow_fingerprints([words[c].encode() for c in codes if c is not None])
        np.testing.assert_array_equal(got[valid], expected)

"""The reference model's features in groups: its weights and graph stay small however many
features the schema has, and non-finite numbers count as missing."""

import math

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("tf_keras")

from tensorflow_metadata.proto.v0 import schema_pb2  # noqa: E402

from tfx_tabular.schemas.parsing import feature_spec  # noqa: E402
from tfx_tabular.training.model import SchemaFeatures, build_reference_model  # noqa: E402

KINDS = ("int", "float", "nullable int", "nullable float", "string", "nullable string", "list")


def _schema(features: int) -> schema_pb2.Schema:
    """A binary label and `features` features cycling through every kind the model groups."""
    schema = schema_pb2.Schema()
    label = schema.feature.add(name="label", type=schema_pb2.INT)
    label.shape.dim.add(size=1)
    label.int_domain.min, label.int_domain.max = 0, 1
    for i in range(features):
        kind = KINDS[i % len(KINDS)]
        dtype = {"float": schema_pb2.FLOAT, "string": schema_pb2.BYTES}
        feature = schema.feature.add(
            name=f"{kind} {i}", type=dtype.get(kind.split()[-1], schema_pb2.INT)
        )
        if kind.startswith("nullable"):
            feature.value_count.min = feature.value_count.max = 1
        elif kind != "list":
            feature.shape.dim.add(size=1)
        if kind.endswith("int"):
            feature.int_domain.min, feature.int_domain.max = 0, 100
        elif kind.endswith("float"):
            feature.float_domain.min, feature.float_domain.max = -1.0, 1.0
    return schema


def _batch(schema: schema_pb2.Schema, rows: int, seed: int = 0) -> dict:
    """Parsed tf.Examples of random values for every feature (a tenth of nullables null)."""
    rng = np.random.default_rng(seed)
    records = []
    for _ in range(rows):
        example = tf.train.Example()
        for feature in schema.feature:
            values = example.features.feature[feature.name]
            if feature.name == "label":
                values.int64_list.value.append(int(rng.random() < 0.5))
            elif feature.HasField("value_count") and rng.random() < 0.1:
                continue
            elif feature.type == schema_pb2.FLOAT:
                values.float_list.value.append(float(rng.uniform(-1, 1)))
            elif feature.type == schema_pb2.BYTES:
                values.bytes_list.value.append(b"v%d" % rng.integers(20))
            else:
                at_most_one = feature.HasField("shape") or feature.HasField("value_count")
                count = 1 if at_most_one else rng.integers(0, 4)
                values.int64_list.value.extend(rng.integers(0, 100, count))
        records.append(example.SerializeToString())
    return tf.io.parse_example(tf.constant(records), feature_spec(schema))


def _train_step_ops(model, features, labels) -> tuple[int, float]:
    """(operations in the traced train step, the loss after one step)."""
    optimizer, loss = keras.optimizers.Adam(1e-2), keras.losses.BinaryCrossentropy()

    @tf.function
    def step(features, labels):
        with tf.GradientTape() as tape:
            value = loss(labels, model(features, training=True))
        gradients = tape.gradient(value, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return value

    traced = step.get_concrete_function(features, labels)
    return len(traced.graph.get_operations()), float(step(features, labels))


@pytest.mark.slow  # traces a 1,050-feature train step: in `make test`, not `make test-fast`
def test_a_thousand_feature_schema_builds_a_small_model_that_trains_a_step():
    """Ten times the features: the same weights and layers, and a train step whose graph grows
    by a few operations per feature (each feature's input, gathered once per group)."""
    built = {}
    for features in (70, 1_050):
        schema = _schema(features)
        model = build_reference_model(schema, "label", hidden_units=(16,))
        batch = _batch(schema, 64)
        labels = tf.cast(batch.pop("label"), tf.float32)
        before = [w.numpy().copy() for w in model.trainable_weights]
        ops, loss = _train_step_ops(model, batch, labels)
        assert math.isfinite(loss)
        changed = [
            not np.array_equal(b, w.numpy())
            for b, w in zip(before, model.trainable_weights, strict=True)
        ]
        assert all(changed), changed
        built[features] = (len(model.layers), len(model.weights), ops)
    (layers, weights, ops), (wide_layers, wide_weights, wide_ops) = built[70], built[1_050]
    assert (wide_layers, wide_weights) == (layers, weights), built
    assert len(model.layers) <= 4 and len(model.weights) <= 8, built
    assert (wide_ops - ops) / (1_050 - 70) < 8, built


def _float_schema(low: float, high: float) -> schema_pb2.Schema:
    schema = schema_pb2.Schema()
    feature = schema.feature.add(name="x", type=schema_pb2.FLOAT)
    feature.shape.dim.add(size=1)
    feature.float_domain.min, feature.float_domain.max = low, high
    nullable = schema.feature.add(name="y", type=schema_pb2.FLOAT)
    nullable.value_count.min = nullable.value_count.max = 1
    nullable.float_domain.min, nullable.float_domain.max = low, high
    return schema


def test_non_finite_values_count_as_missing_and_non_finite_bounds_are_ignored():
    """A footer max of inf (the column holds inf) does not scale every finite value to 0; the
    inf itself reads as missing: a fixed column's 0 with its indicator set, and a variable one's
    value left out of the mean and the count (as a null)."""
    layer = SchemaFeatures(_float_schema(-2.0, math.inf), None)
    inf, nan = math.inf, math.nan
    x = tf.constant([[-1.0], [0.5], [2.0], [inf], [nan]])
    y = tf.ragged.constant([[-1.0], [0.5], [2.0], [inf], []], row_splits_dtype=tf.int64)
    out = layer({"x": x, "y": y}).numpy()
    log1p = np.sign([-1.0, 0.5, 2.0]) * np.log1p(np.abs([-1.0, 0.5, 2.0]))
    # columns: x scaled, x non-finite, y's mean, y's log1p(count)
    np.testing.assert_allclose(out[:, 0], [*log1p, 0, 0], rtol=1e-6)
    np.testing.assert_array_equal(out[:, 1], [0, 0, 0, 1, 1])
    np.testing.assert_allclose(out[:, 2], [*log1p, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(out[:, 3], [math.log(2)] * 3 + [0, 0], rtol=1e-6)
    # Finite bounds scale the sign·log1p values min-max, the bounds taken the same way.
    finite = SchemaFeatures(_float_schema(-2.0, 2.0), None)
    out = finite({"x": x[:3], "y": y[:3]}).numpy()
    np.testing.assert_allclose(out[:, 0], (log1p + math.log(3)) / (2 * math.log(3)), rtol=1e-6)


def test_categoricals_share_one_table_without_colliding_value_for_value():
    """Past the table's cap features share its rows, each salted: the same string in two
    features does not land on the same embedding."""
    schema = schema_pb2.Schema()
    for i in range(300):
        schema.feature.add(name=f"c{i}", type=schema_pb2.BYTES).shape.dim.add(size=1)
    layer = SchemaFeatures(schema, None)
    out = layer({f"c{i}": tf.constant([["same"]]) for i in range(300)}).numpy()
    embeddings = out.reshape(300, -1)
    assert len(layer.weights) == 1
    assert len({row.tobytes() for row in embeddings}) == 300


def test_the_model_scores_either_input_form_alike_and_its_ids_are_the_string_hashes():
    """The integer form (fingerprints, dense nullable scalars with their masks) and the exact
    form (strings, ragged nullables) give the same outputs; a string's bucket is the one
    `to_hash_bucket_fast` gives it (what the model used before it took fingerprints)."""
    from tfx_tabular.training import forms
    from tfx_tabular.training.config import INTEGERS
    from tfx_tabular.training.model import _hash

    schema = _schema(21)
    model = build_reference_model(schema, "label")
    exact = _batch(schema, 64)
    exact.pop("label")
    spec = {k: v for k, v in feature_spec(schema).items() if k != "label"}
    integers = forms.input_form(INTEGERS, schema, spec).from_parsed(dict(exact))
    assert forms.present_key("nullable string 5") in integers
    assert all(t.dtype != tf.string for t in integers.values())
    np.testing.assert_allclose(model(exact).numpy(), model(integers).numpy(), rtol=1e-6)
    strings = tf.constant([b"", b"a", b"v7", "é".encode() * 40])
    fingerprints = tf.bitcast(tf.fingerprint(strings, "farmhash64"), tf.int64)
    expected = tf.strings.to_hash_bucket_fast(strings, 10_007).numpy().tolist()
    assert _hash(strings, 10_007, True).numpy().tolist() == expected
    assert _hash(fingerprints, 10_007, True).numpy().tolist() == expected


def test_categorical_dropout_drops_whole_features_in_training_only():
    """In training a row's categorical feature reads as missing (its pooled embedding zero) about
    CATEGORICAL_DROPOUT of the time, its numbers untouched; outside training (evaluation, the
    serving signature's call without `training`) every feature is read, the same way each time."""
    from tfx_tabular.training.model import CATEGORICAL_DROPOUT, EMBEDDING_DIM

    schema = schema_pb2.Schema()
    schema.feature.add(name="x", type=schema_pb2.FLOAT).shape.dim.add(size=1)
    for i in range(4):
        schema.feature.add(name=f"c{i}", type=schema_pb2.BYTES).shape.dim.add(size=1)
    layer = SchemaFeatures(schema, None)
    rows = 2_000
    batch = {"x": tf.fill([rows, 1], 0.5), **{f"c{i}": tf.fill([rows, 1], "v") for i in range(4)}}
    served = layer(batch).numpy()
    assert np.array_equal(served, layer(batch, training=False).numpy())
    trained = layer(batch, training=True).numpy()
    np.testing.assert_array_equal(trained[:, :2], served[:, :2])  # x and its non-finite indicator
    embedded = trained[:, 2:].reshape(rows, 4, EMBEDDING_DIM)
    dropped = (embedded == 0).all(axis=2)
    kept = (embedded == served[:, 2:].reshape(rows, 4, EMBEDDING_DIM)).all(axis=2)
    assert (dropped | kept).all()
    assert abs(dropped.mean() - CATEGORICAL_DROPOUT) < 0.05

"""The task from the label, for real: the loop trains and exports binary, multiclass (integer and
string classes) and regression models; a compiled user model keeps its optimizer, loss and
metrics; model_fn gets the task, hyperparameters and custom_config; a base model warm-starts;
bad labels and missing splits fail before the first step."""

import glob
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from conftest import convert_to_examples
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.conversion.source_metadata import read_source_metadata
from tfx_tabular.schemas.infer import infer_schema
from tfx_tabular.training import loop
from tfx_tabular.training.config import TrainingConfig

pytestmark = pytest.mark.slow
COLORS = ["red", "green", "blue"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """1,200 rows: features x, cat; labels of every kind, one with nulls."""
    root = tmp_path_factory.mktemp("tasks")
    rng = np.random.default_rng(0)
    n = 1200
    x = rng.normal(size=n)
    classes = np.digitize(x, [-0.5, 0.5])  # 0, 1, 2: learnable from x
    table = pa.table(
        {
            "x": x,
            "cat": pa.array([COLORS[i % 3] for i in range(n)]),
            "y_binary": (x > 0).astype(np.int64),
            "y_class": classes.astype(np.int64),
            "y_color": pa.array([COLORS[c] for c in classes]),
            "y_amount": 3.0 * x + rng.normal(scale=0.1, size=n),
            "y_null": pa.array(x, mask=np.arange(n) % 10 == 0),
        }
    )
    os.makedirs(root / "data")
    pq.write_table(table, root / "data" / "part-0.parquet", row_group_size=300)
    out = str(root / "examples")
    convert_to_examples(str(root / "data"), out, num_shards=2)
    schema = infer_schema(read_source_metadata(out))
    # The classes of a string label, as ParquetSchemaGen's statistics or a curated schema give them.
    color = next(f for f in schema.feature if f.name == "y_color")
    color.string_domain.value.extend(COLORS)
    files = {s: sorted(glob.glob(f"{out}/Split-{s}/*")) for s in ("train", "eval")}
    return files, schema


def _train(data, tmp_path, label, **kwargs):
    files, schema = data
    others = {"y_binary", "y_class", "y_color", "y_amount", "y_null"} - {label}
    model_schema = schema_pb2.Schema()
    model_schema.CopyFrom(schema)
    for feature in model_schema.feature:  # the other labels are not features of this model
        if feature.name in others:
            feature.lifecycle_stage = schema_pb2.DEPRECATED
    options = {"batch_size": 64, "steps_per_epoch": 15, "epochs": 2, "learning_rate": 0.01}
    eval_files, base_model = kwargs.pop("eval_files", files["eval"]), kwargs.pop("base_model", None)
    result = loop.train(
        files["train"],
        eval_files,
        model_schema,
        str(tmp_path / "run"),
        str(tmp_path / "model"),
        TrainingConfig(label=label, mixed_precision=False, **{**options, **kwargs}),
        base_model=base_model,
    )
    return result, tf.saved_model.load(str(tmp_path / "model")).signatures["serving_default"]


def _serialized(values: dict) -> tf.Tensor:
    example = tf.train.Example()
    for name, value in values.items():
        feature = example.features.feature[name]
        if isinstance(value, str):
            feature.bytes_list.value.append(value.encode())
        else:
            feature.float_list.value.append(value)
    return tf.constant([example.SerializeToString()])


def test_binary_label_gets_a_sigmoid_auc_and_accuracy(data, tmp_path):
    result, serve = _train(data, tmp_path, "y_binary")
    assert set(result.eval_metrics) == {"auc", "accuracy", "loss"}
    assert result.eval_metrics["accuracy"] > 0.8
    outputs = serve(examples=_serialized({"x": 2.0, "cat": "red"}))
    assert set(outputs) == {"outputs"} and 0.5 < float(outputs["outputs"][0, 0]) <= 1.0


def test_string_classes_train_as_multiclass_and_serve_scores_and_class_names(data, tmp_path):
    result, serve = _train(data, tmp_path, "y_color")
    assert set(result.eval_metrics) == {"accuracy", "loss"}
    assert result.eval_metrics["accuracy"] > 0.7
    outputs = serve(examples=_serialized({"x": 2.0, "cat": "red"}))
    assert outputs["scores"].shape == (1, 3)
    assert [c.decode() for c in outputs["classes"].numpy()[0]] == COLORS
    assert int(tf.argmax(outputs["scores"][0])) == COLORS.index("blue")  # x > 0.5 → class 2


def test_small_integer_classes_are_multiclass_and_floats_are_regression(data, tmp_path):
    result, serve = _train(data, tmp_path / "class", "y_class")
    assert set(result.eval_metrics) == {"accuracy", "loss"}
    assert serve(examples=_serialized({"x": 0.0, "cat": "red"}))["scores"].shape == (1, 3)
    result, serve = _train(data, tmp_path / "amount", "y_amount")
    assert set(result.eval_metrics) == {"rmse", "mae", "loss"}
    assert result.eval_metrics["rmse"] < 1.5  # the label's own std is 3


def test_task_overrides_the_inferred_one(data, tmp_path):
    result, _ = _train(data, tmp_path, "y_binary", task="regression")
    assert set(result.eval_metrics) == {"rmse", "mae", "loss"}


@pytest.mark.parametrize(
    "label, kwargs, message",
    [
        ("y_null", {}, "label 'y_null' has missing values"),
        ("y_nope", {}, "label 'y_nope' is not a feature"),
        ("y_amount", {"task": "multiclass"}, "cannot be multiclass"),
        ("y_binary", {"eval_files": []}, "no eval files"),
    ],
)
def test_bad_labels_and_missing_splits_fail_before_the_first_step(
    data, tmp_path, label, kwargs, message
):
    with pytest.raises(ValueError, match=message):
        _train(data, tmp_path, label, **kwargs)
    assert not os.path.exists(tmp_path / "run")  # nothing was built or written


_BUILT = {}


def compiled_model_fn(schema, label, task, hyperparameters, custom_config):
    """A user's compiled tf.keras model (Keras 2 in every entry point)."""
    _BUILT.update(task=task, hyperparameters=hyperparameters, custom_config=custom_config)
    inputs = {"x": tf.keras.Input(shape=(1,), name="x")}
    hidden = tf.keras.layers.Dense(hyperparameters["units"], activation="relu")(inputs["x"])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(hidden))
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.05),
        loss=tf.keras.losses.Huber(),
        metrics=["mae", tf.keras.metrics.MeanSquaredError(name="my_mse")],
    )
    _BUILT["model"] = model
    return model


def test_a_compiled_user_model_keeps_its_optimizer_loss_and_metrics(data, tmp_path):
    result, serve = _train(
        data,
        tmp_path,
        "y_amount",
        model_fn=compiled_model_fn,
        model_arguments={"hyperparameters": {"units": 4}, "custom_config": {"team": "ml"}},
    )
    model = _BUILT["model"]
    assert _BUILT["task"].kind == "regression"
    assert _BUILT["custom_config"] == {"team": "ml"}
    assert model.layers[1].units == 4
    assert isinstance(model.optimizer, tf.keras.optimizers.SGD)
    assert int(model.optimizer.iterations.numpy()) == 30  # it stepped, every step
    assert set(result.eval_metrics) == {"mean_absolute_error", "my_mse", "loss"}
    assert serve(examples=_serialized({"x": 1.0}))["outputs"].shape == (1, 1)


def test_a_base_model_warm_starts_the_weights(data, tmp_path):
    _train(data, tmp_path / "first", "y_amount")
    first = tf.saved_model.load(str(tmp_path / "first" / "model"))
    # No learning: the second model's weights are exactly the base model's.
    _train(
        data,
        tmp_path / "second",
        "y_amount",
        base_model=str(tmp_path / "first" / "model"),
        learning_rate=0.0,
        train_steps=1,
    )
    second = tf.saved_model.load(str(tmp_path / "second" / "model"))
    weights = [sorted((v.name, v.numpy().tolist()) for v in m.variables) for m in (first, second)]
    assert weights[0] == weights[1]


def test_a_base_model_of_another_architecture_is_refused(data, tmp_path):
    _train(data, tmp_path / "first", "y_color")
    with pytest.raises(ValueError, match="cannot warm-start"):
        _train(data, tmp_path / "second", "y_amount", base_model=str(tmp_path / "first" / "model"))

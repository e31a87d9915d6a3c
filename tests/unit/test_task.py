"""The task a label implies, from the schema alone, and what an explicit task may override."""

import pytest
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.training.task import MAX_INT_CLASSES, MULTICLASS, Task, TaskError, kind_of, task_of


def _schema(**label_fields) -> schema_pb2.Schema:
    schema = schema_pb2.Schema()
    schema.feature.add(name="x", type=schema_pb2.FLOAT)
    label = schema.feature.add(name="y", type=label_fields.pop("type"))
    for domain, values in label_fields.items():
        target = getattr(label, domain)
        target.SetInParent()
        for key, value in values.items():
            if key == "value":
                target.value.extend(value)
            else:
                setattr(target, key, value)
    return schema


@pytest.mark.parametrize(
    "label, kind, classes",
    [
        ({"type": schema_pb2.INT, "bool_domain": {}}, "binary", 2),
        ({"type": schema_pb2.INT, "int_domain": {"min": 0, "max": 1}}, "binary", 2),
        ({"type": schema_pb2.INT, "int_domain": {"min": 0, "max": 4}}, "multiclass", 5),
        ({"type": schema_pb2.INT, "int_domain": {"min": 1, "max": 3}}, "multiclass", 4),
        (
            {"type": schema_pb2.INT, "int_domain": {"min": 0, "max": MAX_INT_CLASSES}},
            "regression",
            1,
        ),
        ({"type": schema_pb2.INT, "int_domain": {"min": -1, "max": 1}}, "regression", 1),
        ({"type": schema_pb2.INT}, "regression", 1),  # no domain: a quantity
        ({"type": schema_pb2.FLOAT, "float_domain": {"min": 0, "max": 1}}, "regression", 1),
        (
            {"type": schema_pb2.BYTES, "string_domain": {"value": ["cat", "dog", "owl"]}},
            "multiclass",
            3,
        ),
    ],
)
def test_the_task_follows_the_label(label, kind, classes):
    task = task_of(_schema(**label), "y")
    assert (task.kind, task.output_units if kind == "multiclass" else classes) == (kind, classes)
    assert task.activation == {"binary": "sigmoid", "multiclass": "softmax"}.get(kind)


def test_string_classes_keep_their_order_as_the_vocabulary():
    task = task_of(_schema(type=schema_pb2.BYTES, string_domain={"value": ["b", "a"]}), "y")
    assert task.vocabulary == ("b", "a") and task.num_classes == 2


def test_an_explicit_task_overrides_the_inferred_one():
    binary = _schema(type=schema_pb2.INT, int_domain={"min": 0, "max": 1})
    assert task_of(binary, "y", "regression").kind == "regression"
    assert task_of(binary, "y", "multiclass").num_classes == 2
    wide = _schema(type=schema_pb2.INT, int_domain={"min": 0, "max": 99})
    assert task_of(wide, "y", "binary").kind == "binary"


@pytest.mark.parametrize(
    "label, task, message",
    [
        ({"type": schema_pb2.BYTES}, None, "no known classes.*statistics=True"),
        (
            {"type": schema_pb2.BYTES, "string_domain": {"value": ["a", "b"]}},
            "regression",
            "strings",
        ),
        ({"type": schema_pb2.FLOAT}, "multiclass", "cannot be multiclass"),
        ({"type": schema_pb2.INT, "int_domain": {"min": 0, "max": 1}}, "ranking", "not one of"),
    ],
)
def test_impossible_tasks_fail_naming_the_label(label, task, message):
    with pytest.raises(TaskError, match=message):
        task_of(_schema(**label), "y", task)


def test_the_kind_needs_no_vocabulary_and_an_absent_label_is_named():
    assert kind_of(_schema(type=schema_pb2.BYTES), "y") == "multiclass"
    with pytest.raises(TaskError, match="label 'z' is not in the schema"):
        kind_of(_schema(type=schema_pb2.FLOAT), "z")


def test_importing_the_task_module_loads_no_tensorflow():
    import subprocess
    import sys

    code = "import sys, tfx_tabular.training.task; print('tensorflow' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        == "False\n"
    )


def test_a_string_label_encodes_alike_from_its_strings_and_its_fingerprints():
    import tensorflow as tf

    from tfx_tabular.training.categorical import fingerprint_strings

    task = Task(MULTICLASS, 3, ("basic", "family", "pro"))
    encode = task.label_encoder("plan")
    strings = tf.constant([[b"pro"], [b"basic"], [b"family"]])
    assert encode(strings).numpy().tolist() == [[2.0], [0.0], [1.0]]
    assert encode(fingerprint_strings(strings)).numpy().tolist() == [[2.0], [0.0], [1.0]]
    with pytest.raises(tf.errors.InvalidArgumentError, match="not in its schema"):
        encode(fingerprint_strings(tf.constant([b"gold"])))

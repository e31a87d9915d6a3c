"""TabularTrainer in a real TFX pipeline: the Schema artifact resolved through ML Metadata drives
parsing (a curated schema changes the parsing spec), and the Model serves serialized tf.Examples."""

import glob
import os

import pytest
import tensorflow as tf
from conftest import run_local_pipeline
from tfx import v1 as tfx

from tfx_tabular.components import ParquetExampleGen, ParquetSchemaGen, TabularTrainer
from tfx_tabular.demo import criteo

pytestmark = pytest.mark.slow


def _run(tmp_path, data, curated=None):
    example_gen = ParquetExampleGen(input_base=data)
    schema_gen = ParquetSchemaGen(
        examples=example_gen.outputs["examples"], label="label", curated_schema=curated
    )
    trainer = TabularTrainer(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        batch_size=128,
        epochs=2,
        eval_args=tfx.proto.EvalArgs(num_steps=2),
    )
    artifacts = run_local_pipeline(
        tmp_path, "trainer-test", [example_gen, schema_gen, trainer], enable_cache=True
    )
    [examples] = artifacts("Examples")
    run, model = artifacts("ModelRun")[-1], artifacts("Model")[-1]
    train_rows = int(examples.custom_properties["row_counts"].struct_value["train"])
    return run, model, train_rows


def _scalar_tags(run_dir: str, name: str) -> set:
    """The scalar tags in a TensorBoard folder, each required at both epochs' steps."""
    steps: dict = {}
    for path in glob.glob(os.path.join(run_dir, name, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                steps.setdefault(value.tag, set()).add(event.step)
    assert all(len(s) == 2 for s in steps.values()), steps  # 2 epochs
    return set(steps)


def _parsed_features(run):
    return list(run.custom_properties["parsed_features"].struct_value["__value__"])


def test_trainer_uses_the_schema_artifact_and_exports_a_serving_model(tmp_path):
    data = str(tmp_path / "data")
    criteo.write_dataset(data, 1500, days=2, files_per_day=1, row_group_size=500)
    run, model, train_rows = _run(tmp_path, data)
    props = run.custom_properties
    # Steps per epoch from the recorded row count (no data pass), 2 epochs.
    assert props["total_steps"].int_value == 2 * (train_rows // 128)
    features = _parsed_features(run)
    assert "C1" in features and "label" in features
    assert 0 <= props["input_wait_fraction"].double_value <= 1
    assert props["examples_per_second"].double_value > 0
    assert "eval_auc" in props
    # TensorBoard: per epoch, the training figures and the eval metrics, at the epoch's last step.
    assert _scalar_tags(run.uri, "train") == {"loss", "examples_per_second", "input_wait_fraction"}
    assert _scalar_tags(run.uri, "eval") == {"auc", "accuracy", "loss"}  # the binary task's

    serving = tf.saved_model.load(os.path.join(model.uri, "Format-Serving"))
    records = glob.glob(
        os.path.join(
            str(tmp_path / "root"), "ParquetExampleGen", "examples", "*", "Split-eval", "*"
        )
    )
    batch = next(iter(tf.data.TFRecordDataset(records).batch(5)))
    outputs = serving.signatures["serving_default"](examples=batch)["outputs"].numpy()
    assert outputs.shape == (5, 1) and ((outputs >= 0) & (outputs <= 1)).all()

    curated = tmp_path / "curated.pbtxt"
    curated.write_text('feature { name: "C1" deprecated: true }\n')
    run2, _, _ = _run(tmp_path, data, curated=str(curated))
    assert run2.id != run.id and set(features) - set(_parsed_features(run2)) == {"C1"}


def test_hyperparameters_custom_config_and_base_model_reach_the_trainer(tmp_path):
    """Through the component and ML Metadata: a dict of hyperparameters and custom_config reach
    model_fn; a HyperParameters artifact (as the stock Tuner writes it, brought in by TFX's
    Importer) does too; a second trainer warm-starts from the first one's Model."""
    import json

    import keras_tuner

    data = str(tmp_path / "data")
    criteo.write_dataset(data, 900, days=1, files_per_day=1, row_group_size=300)
    tuned = tmp_path / "tuned"
    tuned.mkdir()
    space = keras_tuner.HyperParameters()
    space.Fixed("units", 3)
    (tuned / "best_hyperparameters.txt").write_text(json.dumps(space.get_config()))

    example_gen = ParquetExampleGen(input_base=data)
    schema_gen = ParquetSchemaGen(examples=example_gen.outputs["examples"], label="label")
    importer = tfx.dsl.Importer(
        source_uri=str(tuned), artifact_type=tfx.types.standard_artifacts.HyperParameters
    ).with_id("tuned")
    common = dict(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        model_fn="hyper_module:model_fn",
        custom_config={"layer_name": "from_config"},
        batch_size=32,
    )
    first = TabularTrainer(**common, hyperparameters={"units": 3}, epochs=1)
    warm = TabularTrainer(
        **common,
        hyperparameters=importer.outputs["result"],
        base_model=first.outputs["model"],
        learning_rate=0.0,  # no learning: the weights stay the base model's
        train_args=tfx.proto.TrainArgs(num_steps=1),
    ).with_id("warm")
    artifacts = run_local_pipeline(
        tmp_path, "hyper", [example_gen, schema_gen, importer, first, warm]
    )
    models = artifacts("Model")
    loaded = [tf.saved_model.load(os.path.join(a.uri, "Format-Serving")) for a in models]
    # Layer names Keras generates differ between the two models of one process (dense, dense_1):
    # compare the values, in the model's own variable order.
    values = [[v.numpy().tolist() for v in model.variables] for model in loaded]
    assert values[0] == values[1]
    kernels = [v for v in loaded[0].variables if v.name.startswith("from_config/kernel")]
    assert [tuple(v.shape) for v in kernels] == [(1, 3)]

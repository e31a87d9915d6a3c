"""Existing TFX modules run unchanged in TabularTrainer: a stock-Trainer `run_fn` gets TFX's own
FnArgs with `data_accessor.tf_dataset_factory` served by our input_fn — shaped as TFXIO shapes it
— including TFX's own Chicago taxi module behind stock Transform; the stock Tuner's
hyperparameters artifact reaches user code."""

import glob
import json
import os
import pathlib

import keras_tuner
import pytest
import tensorflow as tf
from conftest import convert_to_examples, run_local_pipeline
from tfx import v1 as tfx
from tfx.components.util import tfxio_utils
from tfx.types import standard_artifacts
from tfx.utils import io_utils
from tfx_bsl.public import tfxio

from tfx_tabular.components import ParquetExampleGen, ParquetSchemaGen, TabularTrainer
from tfx_tabular.components.tabular_trainer import user_code
from tfx_tabular.conversion.source_metadata import read_source_metadata
from tfx_tabular.demo import criteo
from tfx_tabular.schemas.infer import infer_schema

pytestmark = pytest.mark.slow
HERE = pathlib.Path(__file__).parent


def _examples(root, columnar_strings: bool = False):
    criteo.write_dataset(str(root / "data"), 900, days=1, files_per_day=1, row_group_size=300)
    out = str(root / "examples")
    convert_to_examples(str(root / "data"), out, num_shards=2, columnar_strings=columnar_strings)
    artifact = standard_artifacts.Examples()
    artifact.uri = out
    artifact.split_names = '["train", "eval"]'
    return artifact, infer_schema(read_source_metadata(out), label="label")


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    return _examples(tmp_path_factory.mktemp("modules"))


@pytest.fixture(scope="module")
def examples_with_strings(tmp_path_factory):
    """Examples whose columnar batches hold the strings: the factory reads them, not the
    per-row records."""
    return _examples(tmp_path_factory.mktemp("modules-strings"), columnar_strings=True)


def _rows(dataset) -> list[str]:
    """Every row a dataset of (features, label) batches gives, each as the repr of its values
    (NaN compares equal as text), sorted: the rows whatever order they came in."""
    rows = []
    for features, label in dataset:
        columns = {**features, "label": label}
        values = {
            name: (tf.RaggedTensor.from_sparse(t) if isinstance(t, tf.SparseTensor) else t)
            for name, t in sorted(columns.items())
        }
        as_lists = [
            v.to_list() if isinstance(v, tf.RaggedTensor) else v.numpy().tolist()
            for v in values.values()
        ]
        rows += [repr(row) for row in zip(*as_lists, strict=True)]
    return sorted(rows)


@pytest.mark.parametrize("with_strings", [False, True])
def test_the_dataset_factory_gives_the_rows_tfxio_gives(
    examples, examples_with_strings, with_strings, caplog
):
    """The same tensor kinds and the same rows as TFXIO, whether our factory reads the per-row
    records or (when they hold the strings) the columnar batches."""
    artifact, schema = examples_with_strings if with_strings else examples
    files = [io_utils.all_files_pattern(f"{artifact.uri}/Split-eval")]
    options = tfxio.TensorFlowDatasetOptions(
        batch_size=100, label_key="label", shuffle=False, num_epochs=1
    )
    stock = tfxio_utils.get_tf_dataset_factory_from_artifact([artifact], [])(files, options, schema)
    with caplog.at_level("INFO", logger="tfx_tabular.training.input_fn"):
        ours = user_code.dataset_factory(schema)(files, options, None)
    read = "columnar batches" if with_strings else "per-row records"
    assert f"input_fn reads {read}" in caplog.text
    assert _kinds(next(iter(ours))) == _kinds(next(iter(stock)))
    assert _rows(ours) == _rows(stock)


def _kinds(batch):
    features, label = batch
    describe = {
        name: (type(value).__name__, value.dtype.name, value.shape.rank)
        for name, value in features.items()
    }
    return describe, (label.dtype.name, label.shape.rank)


def test_the_dataset_factory_repeats_as_tfxio_does(examples):
    artifact, schema = examples
    files = [io_utils.all_files_pattern(f"{artifact.uri}/Split-eval")]
    repeating = tfxio.TensorFlowDatasetOptions(batch_size=100, label_key="label")
    taken = user_code.dataset_factory(schema)(files, repeating).take(50)
    assert sum(1 for _ in taken) == 50  # num_epochs=None repeats, as TFXIO does


def test_the_tuners_hyperparameters_artifact_reaches_user_code(tmp_path):
    space = keras_tuner.HyperParameters()
    space.Int("units", 4, 16, default=8)
    artifact = standard_artifacts.HyperParameters()
    artifact.uri = str(tmp_path)
    with open(tmp_path / "best_hyperparameters.txt", "w") as handle:
        json.dump(space.get_config(), handle)  # what the stock Tuner writes
    config = user_code.hyperparameters({"hyperparameters": [artifact]}, None)
    assert keras_tuner.HyperParameters.from_config(config).get("units") == 8  # run_fn's view
    assert user_code.hyperparameter_values(config) == {"units": 8}  # model_fn's view
    assert user_code.hyperparameters({}, {"units": 3}) == {"units": 3}


def _run(tmp_path, components):
    [model] = run_local_pipeline(tmp_path, "user-modules", components)("Model")
    return os.path.join(model.uri, "Format-Serving")


def test_a_stock_trainer_module_runs_unchanged(tmp_path):
    data = str(tmp_path / "data")
    criteo.write_dataset(data, 600, days=2, files_per_day=1, row_group_size=300)
    example_gen = ParquetExampleGen(input_base=data)
    schema_gen = ParquetSchemaGen(examples=example_gen.outputs["examples"], label="label")
    trainer = TabularTrainer(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        module_file=str(HERE / "stock_trainer_module.py"),  # asserts TFXIO's SparseTensors
        batch_size=32,
        epochs=1,  # no num_steps: the row counts give fn_args.train_steps
    )
    serving = _run(tmp_path, [example_gen, schema_gen, trainer])
    assert os.path.exists(os.path.join(serving, "saved_model.pb"))


def test_tfx_chicago_taxi_module_with_stock_transform(tmp_path, tfx_parquet_testdata):
    import tfx.examples.chicago_taxi_pipeline as taxi

    module = os.path.join(os.path.dirname(taxi.__file__), "taxi_utils_native_keras.py")
    example_gen = ParquetExampleGen(input_base=tfx_parquet_testdata)
    schema_gen = ParquetSchemaGen(examples=example_gen.outputs["examples"])
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        module_file=module,
    )
    trainer = TabularTrainer(
        module_file=module,
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        train_args=tfx.proto.TrainArgs(num_steps=20),
        eval_args=tfx.proto.EvalArgs(num_steps=5),
    )
    serving = _run(tmp_path, [example_gen, schema_gen, transform, trainer])
    model = tf.saved_model.load(serving)
    raw = glob.glob(
        os.path.join(tmp_path, "root", "ParquetExampleGen", "examples", "*", "Split-eval", "*")
    )
    compression = "GZIP" if raw[0].endswith(".gz") else ""
    records = list(tf.data.TFRecordDataset(raw, compression_type=compression).take(4))
    scores = model.signatures["serving_default"](examples=tf.stack(records))
    assert next(iter(scores.values())).shape[0] == 4  # scores raw tf.Examples

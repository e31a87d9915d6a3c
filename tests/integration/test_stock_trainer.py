"""Stock TFX Trainer accepts ParquetExampleGen's Examples and ParquetSchemaGen's Schema."""

import os
import pathlib

import pytest
from conftest import run_local_pipeline
from tfx import v1 as tfx

from tfx_tabular.components import ParquetExampleGen, ParquetSchemaGen
from tfx_tabular.demo import criteo

pytestmark = pytest.mark.slow


def test_stock_trainer_reads_our_examples_with_our_schema(tmp_path):
    data = str(tmp_path / "data")
    criteo.write_dataset(data, 600, days=2, files_per_day=1, row_group_size=300)
    example_gen = ParquetExampleGen(input_base=data)
    schema_gen = ParquetSchemaGen(examples=example_gen.outputs["examples"], label="label")
    trainer = tfx.components.Trainer(
        module_file=str(pathlib.Path(__file__).with_name("stock_trainer_module.py")),
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        train_args=tfx.proto.TrainArgs(num_steps=5),
        eval_args=tfx.proto.EvalArgs(num_steps=1),
    )
    artifacts = run_local_pipeline(tmp_path, "stock-trainer", [example_gen, schema_gen, trainer])
    [model] = artifacts("Model")
    assert os.path.exists(os.path.join(model.uri, "Format-Serving", "saved_model.pb"))

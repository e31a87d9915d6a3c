"""Any column name Parquet allows flows through ExampleGen, schema, feature_spec, input_fn, the
reference model, checkpoints and the serving signature, and the export scores tf.Examples."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import IN_MEMORY_BEAM
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

tf = pytest.importorskip("tensorflow")

from tfx_tabular.conversion import convert, plan  # noqa: E402
from tfx_tabular.conversion.source_metadata import read_source_metadata  # noqa: E402
from tfx_tabular.schemas.infer import infer_schema  # noqa: E402
from tfx_tabular.training import loop  # noqa: E402
from tfx_tabular.training.config import TrainingConfig  # noqa: E402

# Keras layer and scope names, our own layer names, and what Parquet allows beyond them.
KERAS_NAMES = ["dense", "output", "input", "model", "embed_x", "schema_features", "hidden_0"]
names = st.text(
    st.sampled_from(list("abcXYZ019 ._-/éüß漢") + ["é", "ü"]), min_size=1, max_size=12
).filter(lambda n: "row_lengths" not in n and n.strip(". ") == n)


def _run(tmp_path, columns: list[str]) -> np.ndarray:
    rows = 16
    rng = np.random.default_rng(0)
    kinds = [
        pa.array(rng.normal(size=rows)),
        pa.array(rng.integers(0, 5, rows)),
        pa.array([f"v{i % 3}" for i in range(rows)]),
    ]
    table = pa.table(
        {name: kinds[i % 3] for i, name in enumerate(columns)}
        | {"label": pa.array(rng.integers(0, 2, rows))}
    )
    os.makedirs(tmp_path / "in", exist_ok=True)
    pq.write_table(table, tmp_path / "in" / "part.parquet")
    dataset, _ = plan.plan_conversion(str(tmp_path / "in"))
    out = str(tmp_path / "out")
    convert.convert(
        dataset,
        out,
        plan.Splits(buckets=(("train", 1), ("eval", 1))),
        beam_pipeline_args=IN_MEMORY_BEAM,
    )
    schema = infer_schema(read_source_metadata(out), label="label")
    files = {s: sorted(tf.io.gfile.glob(f"{out}/Split-{s}/*")) for s in ("train", "eval")}
    export = str(tmp_path / "export")
    loop.train(
        files["train"],
        files["eval"],
        schema,
        str(tmp_path / "run"),
        export,
        TrainingConfig(
            batch_size=2,
            steps_per_epoch=2,
            epochs=1,
            learning_rate=1e-2,
            mixed_precision=False,
            eval_steps=1,
        ),
    )
    served = tf.saved_model.load(export).signatures["serving_default"]
    records = list(tf.data.TFRecordDataset(files["eval"] + files["train"]).take(4))
    return served(examples=tf.stack(records))["outputs"].numpy()


@pytest.mark.slow
@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(names, min_size=2, max_size=4, unique=True))
@example(KERAS_NAMES)
@example(["été", "a b", "a.b", "a/b", "1st", "A", "a"])
def test_any_column_name_trains_checkpoints_and_serves(tmp_path_factory, columns):
    columns = [c for c in columns if c != "label"]
    tmp_path = tmp_path_factory.mktemp("names")
    outputs = _run(tmp_path, columns)
    assert outputs.shape == (4, 1) and np.isfinite(outputs).all()


@pytest.mark.slow
def test_awkward_names_through_stock_transform_and_the_serving_signature(tmp_path):
    """Names Keras, TFT's vocabulary files or the file system could trip on, through the whole
    pipeline with stock Transform: the export scores raw tf.Examples carrying those names."""
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

    from tfx_tabular.pipelines import create_pipeline
    from tfx_tabular.pipelines.pipeline import local_metadata_path

    awkward = ["dense", "a b", "été", "a.b", "1st", "A b", "x/y", "output"]  # odd: strings
    rows = 60
    rng = np.random.default_rng(0)
    columns = {
        name: pa.array([f"{k}:v{i % 3}" for i in range(rows)])
        if k % 2
        else pa.array(rng.normal(size=rows))
        for k, name in enumerate(awkward)
    }
    os.makedirs(tmp_path / "data")
    table = pa.table(columns | {"label": pa.array(rng.integers(0, 2, rows))})
    pq.write_table(table, tmp_path / "data" / "part.parquet")
    root = str(tmp_path / "root")
    BeamDagRunner().run(
        create_pipeline(
            "names",
            root,
            str(tmp_path / "data"),
            metadata_path=local_metadata_path(root),
            batch_size=8,
            epochs=1,
            with_transform=True,
            beam_pipeline_args=IN_MEMORY_BEAM,
        )
    )
    [serving] = tf.io.gfile.glob(f"{root}/TabularTrainer/model/*/Format-Serving")
    example = tf.train.Example()
    for k, name in enumerate(awkward):
        feature = example.features.feature[name]
        if k % 2:
            feature.bytes_list.value.append(f"{k}:v1".encode())
        else:
            feature.float_list.value.append(0.5)
    scores = tf.saved_model.load(serving).signatures["serving_default"](
        examples=tf.constant([example.SerializeToString()])
    )["outputs"]
    assert scores.shape == (1, 1) and 0.0 <= float(scores[0, 0]) <= 1.0
    # Each string column has a vocabulary of its own values ("a b" and "a.b" share no file).
    [assets] = tf.io.gfile.glob(f"{root}/Transform/transform_graph/*/transform_fn/assets")
    vocabularies = {
        frozenset(tf.io.gfile.GFile(f"{assets}/{name}").read().split())
        for name in tf.io.gfile.listdir(assets)
    }
    expected = {frozenset(f"{k}:v{i}" for i in range(3)) for k in range(1, len(awkward), 2)}
    assert vocabularies == expected

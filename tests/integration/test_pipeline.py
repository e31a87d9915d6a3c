"""The whole pipeline with TFX's BeamDagRunner and SQLite ML Metadata, stock components included:
StatisticsGen + ExampleValidator, Transform (the schema-driven preprocessing_fn; the Transform graph
is applied in the input_fn and in the serving signature) and Evaluator; the run's summary (the
demo's learned AUC beside its ceiling, the Evaluator's metrics and blessing)."""

import glob
import json
import os
import tempfile

import pytest
import tensorflow as tf
from conftest import IN_MEMORY_BEAM
from tfx.orchestration import metadata
from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

from tfx_tabular.demo import criteo
from tfx_tabular.pipelines import create_pipeline
from tfx_tabular.pipelines.pipeline import local_metadata_path
from tfx_tabular.pipelines.run_report import collect_run_report, format_run_report
from tfx_tabular.schemas import load_schema

pytestmark = pytest.mark.slow


def test_full_pipeline_with_stock_components(tmp_path, monkeypatch):
    temporary = tmp_path / "temporary"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", None)
    data = str(tmp_path / "data")
    criteo.write_dataset(data, 3000, days=3, files_per_day=1, row_group_size=500)
    root = str(tmp_path / "root")
    BeamDagRunner().run(
        create_pipeline(
            "full",
            root,
            data,
            metadata_path=local_metadata_path(root),
            split_by_partition="day",
            batch_size=64,
            epochs=2,  # 62 steps: the demo's label is learned well above chance
            with_example_statistics=True,
            with_transform=True,
            with_evaluator=True,
            beam_pipeline_args=IN_MEMORY_BEAM,
        )
    )

    with metadata.Metadata(
        metadata.sqlite_metadata_connection_config(local_metadata_path(root))
    ) as m:
        names = {t.name for t in m.store.get_artifact_types()}
        [model] = m.store.get_artifacts_by_type("Model")
        [evaluation] = m.store.get_artifacts_by_type("ModelEvaluation")
    assert {
        "Examples",
        "Schema",
        "ExampleStatistics",
        "ExampleAnomalies",
        "TransformGraph",
        "Model",
        "ModelRun",
        "ModelEvaluation",
    } <= names
    assert os.listdir(evaluation.uri)
    # Given Beam arguments, no Beam component (stock Transform and Evaluator included) built
    # TFX's sdist for this local run (`tfx.utils.dependency_utils.build_ephemeral_package`).
    assert not glob.glob(str(temporary / "*" / "build" / "tfx"))

    # The serving signature parses raw tf.Examples and applies the Transform graph itself.
    serving = tf.saved_model.load(os.path.join(model.uri, "Format-Serving"))
    # TabularTrainer's pipeline has ParquetExampleGen write columnar batches for it too.
    [examples_uri] = glob.glob(os.path.join(root, "ParquetExampleGen", "examples", "*"))
    assert os.path.isfile(os.path.join(examples_uri, "columnar", "columnar.json"))
    records = glob.glob(os.path.join(examples_uri, "Split-eval", "*"))
    batch = next(iter(tf.data.TFRecordDataset(records).batch(4)))
    assert serving.signatures["serving_default"](examples=batch)["outputs"].shape == (4, 1)

    report = collect_run_report(local_metadata_path(root))
    summary = "\n".join(format_run_report(report, "full"))
    assert json.loads(json.dumps(report)) == report  # `run --json` prints it
    assert report["examples"]["rows"] == {"eval": 1000, "train": 2000}
    assert report["training"]["tensorboard"].startswith("tensorboard --logdir ")
    assert "Split-train: 2,000 rows" in summary and "Split-eval: 1,000 rows" in summary
    # The model learned the demo's label: clearly above chance, below the known function's AUC.
    demo = report["demo"]
    assert demo["learned_auc"] == report["training"]["eval"]["auc"] > 0.6, demo
    assert 0.75 < demo["ceiling_auc"] < 0.88 and demo["rows"] == 1000, demo
    assert (
        f"learned AUC {demo['learned_auc']:.4f} vs ceiling {demo['ceiling_auc']:.4f} (chance 0.5)"
        in summary
    )
    evaluator = report["evaluator"]
    assert evaluator["uri"] == evaluation.uri and evaluator["metrics"]["example_count"] == 1000
    assert evaluator["metrics"]["auc"] > 0.6 and "binary_accuracy" in evaluator["metrics"]
    assert evaluator["blessed"] is True  # its AUC is at least chance's, the threshold
    assert os.path.exists(os.path.join(evaluator["blessing_uri"], "BLESSED"))
    assert f"Evaluator auc {evaluator['metrics']['auc']:.4f}" in summary
    assert f"  blessed  {evaluator['blessing_uri']}" in summary
    assert "waiting on input:" in summary
    lineage = next(line for line in summary.splitlines() if line.startswith("Lineage"))
    assert (
        lineage.split()[1].startswith("Examples#")
        and "→ Schema#" in lineage
        and lineage.rstrip().split()[-1].startswith("Model#")
    )


def test_a_string_label_trains_multiclass_by_default_and_the_evaluator_follows_the_task(tmp_path):
    """The classes come from the example statistics ParquetExampleGen computes while converting,
    with no option: ParquetSchemaGen builds the schema, the label's string domain included, from
    them."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import tensorflow_model_analysis as tfma

    rng = np.random.default_rng(1)
    x = rng.normal(size=900)
    colors = np.array(["red", "green", "blue"])[np.digitize(x, [-0.5, 0.5])]
    os.makedirs(tmp_path / "data")
    pq.write_table(pa.table({"x": x, "color": colors}), tmp_path / "data" / "part.parquet")
    root = str(tmp_path / "root")
    BeamDagRunner().run(
        create_pipeline(
            "multiclass",
            root,
            str(tmp_path / "data"),
            label="color",
            metadata_path=local_metadata_path(root),
            batch_size=32,
            epochs=12,  # ~200 steps at the default learning rate
            with_evaluator=True,
            beam_pipeline_args=IN_MEMORY_BEAM,
        )
    )
    with metadata.Metadata(
        metadata.sqlite_metadata_connection_config(local_metadata_path(root))
    ) as m:
        [model] = m.store.get_artifacts_by_type("Model")
        [evaluation] = m.store.get_artifacts_by_type("ModelEvaluation")
        [schema] = m.store.get_artifacts_by_type("Schema")
        [statistics] = m.store.get_artifacts_by_type("ExampleStatistics")
        assert not m.store.get_artifacts_by_type("ExampleAnomalies")  # validation not asked for
    serving = tf.saved_model.load(os.path.join(model.uri, "Format-Serving"))
    example = tf.train.Example()
    example.features.feature["x"].float_list.value.append(2.0)
    outputs = serving.signatures["serving_default"](examples=[example.SerializeToString()])
    assert sorted(c.decode() for c in outputs["classes"].numpy()[0]) == ["blue", "green", "red"]
    assert outputs["scores"].shape == (1, 3)
    [metrics] = list(tfma.load_metrics(evaluation.uri))
    names = {m.key.name for m in metrics.metric_keys_and_values}
    assert {"example_count", "sparse_categorical_accuracy"} <= names, names
    accuracy = next(
        m.value.double_value.value
        for m in metrics.metric_keys_and_values
        if m.key.name == "sparse_categorical_accuracy"
    )
    assert accuracy > 0.6  # string labels were mapped to the classes the model scores

    report = collect_run_report(local_metadata_path(root))
    assert report["evaluator"]["metrics"]["sparse_categorical_accuracy"] == accuracy
    assert report["evaluator"]["blessed"] is None and report["demo"] is None
    summary = format_run_report(report, "multiclass")
    assert "  not validated: the Evaluator has no thresholds for this task" in summary
    [color] = [f for f in load_schema(schema.uri).feature if f.name == "color"]
    assert list(color.string_domain.value) == ["blue", "green", "red"]
    assert statistics.uri.startswith(os.path.join(root, "ParquetExampleGen", "statistics"))


def test_example_statistics_build_the_schema_by_default_and_validate_when_asked(tmp_path):
    def built(with_example_statistics):
        pipeline = create_pipeline(
            "p",
            str(tmp_path),
            str(tmp_path),
            with_example_statistics=with_example_statistics,
            task="binary",
        )
        return {c.id: c for c in pipeline.components}

    ours = built(True)
    assert "StatisticsGen" not in ours
    validator_input = ours["ExampleValidator"].inputs["statistics"]
    assert validator_input.producer_component_id == "ParquetExampleGen"
    assert ours["ParquetSchemaGen"].inputs["statistics"] is validator_input
    # Unset: ours still build the schema (a string label's classes come from them), unvalidated.
    default = built(None)
    assert "ExampleValidator" not in default and "StatisticsGen" not in default
    schema_input = default["ParquetSchemaGen"].inputs["statistics"]
    assert schema_input.producer_component_id == "ParquetExampleGen"
    assert default["ParquetExampleGen"].exec_properties["compute_example_statistics"] == 1
    stock = built("stock")
    stock_statistics = stock["ExampleValidator"].inputs["statistics"]
    assert stock_statistics.producer_component_id == "StatisticsGen"
    assert stock["ParquetSchemaGen"].inputs["statistics"] is stock_statistics
    assert "statistics" not in stock["ParquetExampleGen"].outputs  # nobody would read them
    off = built(False)
    assert "ExampleValidator" not in off and "statistics" not in off["ParquetSchemaGen"].inputs
    assert "statistics" not in off["ParquetExampleGen"].outputs
    with pytest.raises(ValueError, match="with_example_statistics must be"):
        built("both")


def test_columnar_batches_are_written_for_the_pipelines_trainer_only(tmp_path):
    """ParquetExampleGen alone writes per-row Examples only; create_pipeline, whose trainer is
    TabularTrainer (their reader), asks for columnar batches unless told 0."""
    from tfx_tabular.coders import columnar
    from tfx_tabular.components import ParquetExampleGen
    from tfx_tabular.conversion import plan

    def example_gen(**options):
        pipeline = create_pipeline("p", str(tmp_path), str(tmp_path), task="binary", **options)
        [component] = [c for c in pipeline.components if c.id == "ParquetExampleGen"]
        return component.exec_properties["columnar_batch_rows"]

    assert example_gen() == columnar.DEFAULT_BATCH_ROWS
    assert example_gen(columnar_batch_rows=0) == 0
    assert example_gen(columnar_batch_rows=4096) == 4096
    alone = ParquetExampleGen(input_base=str(tmp_path)).exec_properties
    assert alone["columnar_batch_rows"] is None  # unset: the executor takes spec's default, 0
    assert plan.ConversionConfig.from_parameters({}).output.columnar_batch_rows == 0


def test_columnar_batches_hold_the_strings_when_the_pipelines_trainer_reads_them(tmp_path):
    """The strings go into the columnar batches when the Trainer's input form is exact (asked,
    or a model_fn or Transform without one), not for the reference model's integers."""

    def strings(**options):
        pipeline = create_pipeline("p", str(tmp_path), str(tmp_path), task="binary", **options)
        [component] = [c for c in pipeline.components if c.id == "ParquetExampleGen"]
        return component.exec_properties["columnar_strings"]

    assert strings() == 0
    assert strings(input_form="integers", model_fn="m:f") == 0
    assert strings(model_fn="m:f") == 1
    assert strings(with_transform=True) == 1
    assert strings(input_form="exact") == 1
    assert strings(input_form="exact", columnar_batch_rows=0) == 0

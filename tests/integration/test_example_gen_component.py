"""ParquetExampleGen in a real TFX pipeline (BeamDagRunner, SQLite ML Metadata): stock
StatisticsGen and SchemaGen consume its Examples artifact unchanged."""

import os

import pytest
import tensorflow as tf
from conftest import IN_MEMORY_BEAM
from ml_metadata.proto import metadata_store_pb2
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import v1 as tfx
from tfx.orchestration import metadata
from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

from tfx_tabular.components import ParquetExampleGen
from tfx_tabular.demo import criteo

pytestmark = pytest.mark.slow


def _pipeline(root, data, **example_gen_args):
    example_gen = ParquetExampleGen(input_base=data, **example_gen_args)
    statistics = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema = tfx.components.SchemaGen(statistics=statistics.outputs["statistics"])
    return tfx.dsl.Pipeline(
        pipeline_name="parquet-example-gen-test",
        pipeline_root=os.path.join(root, "pipeline"),
        components=[example_gen, statistics, schema],
        enable_cache=True,
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            os.path.join(root, "metadata.sqlite")
        ),
        beam_pipeline_args=IN_MEMORY_BEAM,
    )


def test_stock_components_consume_parquet_example_gen_output(tmp_path):
    data = str(tmp_path / "data")
    criteo.write_dataset(data, 3000, days=3, files_per_day=1, row_group_size=500)
    pipeline = _pipeline(
        str(tmp_path),
        data,
        split_by_partition="day",
        columnar_batch_rows=1024,
        columnar_strings=True,
    )
    BeamDagRunner().run(pipeline)

    config = metadata.sqlite_metadata_connection_config(str(tmp_path / "metadata.sqlite"))
    with metadata.Metadata(config) as m:
        [examples] = m.store.get_artifacts_by_type("Examples")
        [schema_artifact] = m.store.get_artifacts_by_type("Schema")
    assert examples.state == metadata_store_pb2.Artifact.LIVE
    props = examples.properties
    assert props["split_names"].string_value == '["eval", "train"]'
    assert props["span"].int_value == 0
    custom = examples.custom_properties
    assert custom["payload_format"].string_value == "FORMAT_TF_EXAMPLE"
    assert custom["input_fingerprint"].string_value.startswith("sha256:")
    rows = custom["row_counts"].struct_value
    assert (rows["train"], rows["eval"]) == (2000, 1000)
    assert custom["columnar_batch_rows"].int_value == 1024
    assert custom["columnar_layout_version"].int_value == 3
    assert custom["columnar_strings"].int_value == 1
    assert os.path.exists(os.path.join(examples.uri, "source_schema.arrow"))

    schema = tfx.utils.parse_pbtxt_file(
        os.path.join(schema_artifact.uri, "schema.pbtxt"), schema_pb2.Schema()
    )
    names = {f.name for f in schema.feature}
    assert {"label", "I1", "C1", "price", "history", "day"} <= names
    # Zeros survive: stock TFX's dict_to_example would have dropped label == 0.
    files = tf.io.gfile.glob(os.path.join(examples.uri, "Split-train", "*"))
    labels = [
        tf.train.Example.FromString(r.numpy()).features.feature["label"].int64_list.value[0]
        for r in tf.data.TFRecordDataset(files)
    ]
    assert len(labels) == 2000 and labels.count(0) > 1000


def test_second_run_with_unchanged_input_is_cached_and_changed_input_is_not(tmp_path):
    data = str(tmp_path / "data")
    criteo.write_dataset(data, 600, days=2, files_per_day=1, row_group_size=300)
    for _ in range(2):
        BeamDagRunner().run(_pipeline(str(tmp_path), data))
    config = metadata.sqlite_metadata_connection_config(str(tmp_path / "metadata.sqlite"))
    with metadata.Metadata(config) as m:
        assert len(m.store.get_artifacts_by_type("Examples")) == 1
    extra = str(tmp_path / "extra")
    criteo.write_dataset(extra, 100, days=1, files_per_day=1)
    os.rename(os.path.join(extra, "day=2024-01-01"), os.path.join(data, "day=2024-01-09"))
    BeamDagRunner().run(_pipeline(str(tmp_path), data))
    with metadata.Metadata(config) as m:
        assert len(m.store.get_artifacts_by_type("Examples")) == 2


def test_compute_example_statistics_turns_the_statistics_output_on_and_off():
    on = ParquetExampleGen(input_base="data")
    off = ParquetExampleGen(input_base="data", compute_example_statistics=False)
    assert "statistics" in on.outputs  # on by default
    assert off.exec_properties["compute_example_statistics"] == 0
    assert "statistics" not in off.outputs

"""ParquetSchemaGen in a real TFX pipeline: the Schema artifact is registered in ML Metadata with
its lineage, and stock ExampleValidator accepts it."""

import os

import pytest
from conftest import IN_MEMORY_BEAM
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2
from tfx import v1 as tfx
from tfx.orchestration import metadata
from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner
from tfx.utils import io_utils

from tfx_tabular.components import ParquetExampleGen, ParquetSchemaGen
from tfx_tabular.demo import criteo

pytestmark = pytest.mark.slow


def test_schema_from_examples_feeds_stock_example_validator(tmp_path):
    data = str(tmp_path / "data")
    criteo.write_dataset(data, 2000, days=2, files_per_day=1, row_group_size=500)
    curated = tmp_path / "curated.pbtxt"
    curated.write_text(
        'feature { name: "I2" deprecated: true }\n'
        'feature { name: "price" float_domain { min: 0 max: 100000 } }\n'
    )
    example_gen = ParquetExampleGen(input_base=data)
    schema_gen = ParquetSchemaGen(
        examples=example_gen.outputs["examples"],
        label="label",
        sample_statistics=True,
        sample_rows=500,
        max_vocabulary_size=5,
        curated_schema=str(curated),
    )
    statistics = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    validator = tfx.components.ExampleValidator(
        statistics=statistics.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    BeamDagRunner().run(
        tfx.dsl.Pipeline(
            pipeline_name="schema-gen-test",
            pipeline_root=str(tmp_path / "root"),
            components=[example_gen, schema_gen, statistics, validator],
            metadata_connection_config=metadata.sqlite_metadata_connection_config(
                str(tmp_path / "mlmd.sqlite")
            ),
            beam_pipeline_args=IN_MEMORY_BEAM,
        )
    )

    with metadata.Metadata(
        metadata.sqlite_metadata_connection_config(str(tmp_path / "mlmd.sqlite"))
    ) as m:
        [schema_artifact] = m.store.get_artifacts_by_type("Schema")
        [examples] = m.store.get_artifacts_by_type("Examples")
        # Lineage: the SchemaGen execution consumed the Examples and produced the Schema.
        events = m.store.get_events_by_artifact_ids([schema_artifact.id])
        [execution_id] = {e.execution_id for e in events if e.type == e.OUTPUT}
        inputs = [
            e.artifact_id
            for e in m.store.get_events_by_execution_ids([execution_id])
            if e.type == e.INPUT
        ]
        assert inputs == [examples.id]
        [anomalies_artifact] = m.store.get_artifacts_by_type("ExampleAnomalies")
    assert schema_artifact.custom_properties["sample_statistics_rows"].int_value == 500

    schema_path = os.path.join(schema_artifact.uri, "schema.pbtxt")
    # String domains are written in the text format's list syntax; TFX reads them so.
    assert "value: [" in open(schema_path).read()
    schema = io_utils.parse_pbtxt_file(schema_path, schema_pb2.Schema())
    by_name = {f.name: f for f in schema.feature}
    assert by_name["I2"].deprecated and by_name["price"].float_domain.max == 100000
    assert list(by_name["label"].not_in_environment) == ["SERVING"]
    assert by_name["label"].shape.dim[0].size == 1
    assert set(by_name["day"].string_domain.value) == {"2024-01-01", "2024-01-02"}

    anomalies = anomalies_pb2.Anomalies()
    for split in ("train", "eval"):
        path = os.path.join(anomalies_artifact.uri, f"Split-{split}", "SchemaDiff.pb")
        anomalies.ParseFromString(open(path, "rb").read())
        assert not anomalies.anomaly_info, dict(anomalies.anomaly_info)

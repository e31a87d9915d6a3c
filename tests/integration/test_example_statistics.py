"""ParquetExampleGen's `statistics` output in a real TFX pipeline: stock SchemaGen and stock
ExampleValidator read it, it matches stock StatisticsGen on the same Examples field by field, and
ParquetSchemaGen given it writes a schema that validates every split, including a column with a
single value that only one split holds (issue 16's failing case)."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import IN_MEMORY_BEAM
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2
from tfx import v1 as tfx
from tfx.orchestration import metadata
from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner
from tfx.utils import io_utils

from tfx_tabular.components import ParquetExampleGen, ParquetSchemaGen

pytestmark = pytest.mark.slow

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")  # the last day is the eval split
ROWS_PER_DAY = 400


def day_table(day_index: int) -> pa.Table:
    ids = np.arange(day_index * ROWS_PER_DAY, (day_index + 1) * ROWS_PER_DAY)
    cities = np.array(["paris", "rome", "oslo", "lima"])[ids % 4].astype(object)
    if day_index == len(DAYS) - 1:
        cities[::50] = "only_in_eval"
    return pa.table(
        {
            "id": pa.array(ids),
            "x": pa.array(ids * 0.1, mask=ids % 7 == 0),  # 0.1 steps: float32 rounds them up
            "city": pa.array(cities, pa.string()),
            "tags": pa.array(
                [list(range(i % 4)) if i % 13 else None for i in ids], pa.list_(pa.int64())
            ),
            # One value in 1,200 rows, in the first day only: the eval split never holds it.
            "rare": pa.array([1.5 if i == 3 else None for i in ids], pa.float64()),
            "flag": pa.array(ids % 3 == 0),
            "label": pa.array(ids % 2),
        }
    )


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    """One pipeline: ParquetExampleGen (with statistics) → stock SchemaGen → stock
    ExampleValidator; ParquetSchemaGen with the statistics → ExampleValidator; ParquetSchemaGen
    from footers alone → ExampleValidator; stock StatisticsGen on the same Examples."""
    root = tmp_path_factory.mktemp("statistics")
    for i, day in enumerate(DAYS):
        folder = root / "data" / f"day={day}"
        folder.mkdir(parents=True)
        pq.write_table(day_table(i), folder / "part.parquet", row_group_size=150)
    example_gen = ParquetExampleGen(input_base=str(root / "data"), split_by_partition="day")
    ours = example_gen.outputs["statistics"]
    stock_schema = tfx.components.SchemaGen(statistics=ours)
    with_stats = ParquetSchemaGen(
        examples=example_gen.outputs["examples"], statistics=ours, label="label"
    ).with_id("schema_from_statistics")
    footers = ParquetSchemaGen(examples=example_gen.outputs["examples"], label="label").with_id(
        "schema_from_footers"
    )
    stock_stats = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    validators = {
        "stock": tfx.components.ExampleValidator(
            statistics=ours, schema=stock_schema.outputs["schema"]
        ).with_id("validate_stock_schema"),
        "statistics": tfx.components.ExampleValidator(
            statistics=ours, schema=with_stats.outputs["schema"]
        ).with_id("validate_statistics_schema"),
        "footers": tfx.components.ExampleValidator(
            statistics=ours, schema=footers.outputs["schema"]
        ).with_id("validate_footers_schema"),
    }
    mlmd = metadata.sqlite_metadata_connection_config(str(root / "mlmd.sqlite"))
    BeamDagRunner().run(
        tfx.dsl.Pipeline(
            pipeline_name="example-statistics",
            pipeline_root=str(root / "root"),
            components=[example_gen, stock_schema, with_stats, footers, stock_stats]
            + list(validators.values()),
            metadata_connection_config=mlmd,
            beam_pipeline_args=IN_MEMORY_BEAM,
        )
    )
    with metadata.Metadata(mlmd) as m:
        return {
            (node_of(m, artifact), type_name): artifact.uri
            for type_name in ("ExampleStatistics", "Schema", "ExampleAnomalies")
            for artifact in m.store.get_artifacts_by_type(type_name)
        }


def node_of(m, artifact) -> str:
    """The id of the node that produced `artifact`."""
    [execution_id] = {
        e.execution_id
        for e in m.store.get_events_by_artifact_ids([artifact.id])
        if e.type == e.OUTPUT
    }
    [node] = [
        c.name.rsplit(".", 1)[-1]
        for c in m.store.get_contexts_by_execution(execution_id)
        if c.type_id == m.store.get_context_type("node").id
    ]
    return node


def split_stats(uri: str, split: str) -> statistics_pb2.DatasetFeatureStatisticsList:
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    with open(os.path.join(uri, f"Split-{split}", "FeatureStats.pb"), "rb") as handle:
        stats.ParseFromString(handle.read())
    return stats


def anomalies_of(uri: str, split: str) -> dict:
    anomalies = anomalies_pb2.Anomalies()
    with open(os.path.join(uri, f"Split-{split}", "SchemaDiff.pb"), "rb") as handle:
        anomalies.ParseFromString(handle.read())
    return {name: info.description for name, info in anomalies.anomaly_info.items()}


def features_by_name(stats) -> dict:
    [dataset] = stats.datasets
    return {f.path.step[0]: f for f in dataset.features}


def test_stock_schema_gen_and_example_validator_read_our_statistics(pipeline_run):
    ours = pipeline_run[("ParquetExampleGen", "ExampleStatistics")]
    schema = io_utils.parse_pbtxt_file(
        os.path.join(pipeline_run[("SchemaGen", "Schema")], "schema.pbtxt"), schema_pb2.Schema()
    )
    types = {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}
    assert types == {
        "id": "INT",
        "x": "FLOAT",
        "city": "BYTES",
        "tags": "INT",
        "rare": "FLOAT",
        "flag": "INT",
        "label": "INT",
        "day": "BYTES",  # the partition column
    }
    assert split_stats(ours, "train").datasets[0].num_examples == 2 * ROWS_PER_DAY
    assert split_stats(ours, "eval").datasets[0].num_examples == ROWS_PER_DAY
    for split in ("train", "eval"):  # stock ExampleValidator ran on both splits
        anomalies_of(pipeline_run[("validate_stock_schema", "ExampleAnomalies")], split)


def test_schema_from_statistics_validates_every_split(pipeline_run):
    uri = pipeline_run[("validate_statistics_schema", "ExampleAnomalies")]
    assert anomalies_of(uri, "train") == {}
    assert anomalies_of(uri, "eval") == {}
    schema = io_utils.parse_pbtxt_file(
        os.path.join(pipeline_run[("schema_from_statistics", "Schema")], "schema.pbtxt"),
        schema_pb2.Schema(),
    )
    by_name = {f.name: f for f in schema.feature}
    # One value in the train split, none in eval: no presence the eval split breaks.
    assert not by_name["rare"].presence.min_count
    assert by_name["id"].presence.min_fraction == 1 and by_name["id"].presence.min_count == 1
    assert by_name["x"].presence.min_count == 1 and not by_name["x"].presence.min_fraction
    assert set(by_name["city"].string_domain.value) == {
        "paris",
        "rome",
        "oslo",
        "lima",
        "only_in_eval",
    }
    assert (by_name["tags"].value_count.min, by_name["tags"].value_count.max) == (0, 3)
    assert by_name["x"].float_domain.max == np.float32((3 * ROWS_PER_DAY - 1) * 0.1)  # as written
    assert list(by_name["label"].not_in_environment) == ["SERVING"]


def test_footer_schema_asserts_nothing_a_split_may_not_hold(pipeline_run):
    uri = pipeline_run[("validate_footers_schema", "ExampleAnomalies")]
    assert anomalies_of(uri, "train") == {}
    assert anomalies_of(uri, "eval") == {}


EXACT_COMMON = ("num_non_missing", "num_missing", "min_num_values", "max_num_values")
EXACT_NUMERIC = ("num_zeros", "min", "max", "median")
EXACT_STRING = ("unique", "top_values", "rank_histogram")


def assert_same_feature(name: str, ours, stock) -> None:
    """Field by field. Exact fields equal (floats to their rounding); the sketched ones too,
    since every split here holds fewer values than the sketches' exact ranges (the bounds are
    tested at scale in tests/unit/test_statistics.py)."""
    kind = stock.WhichOneof("stats")
    if getattr(stock, kind).common_stats.num_non_missing == 0:
        # No value in the split: stock TFDV types the feature STRING, we keep the written type.
        assert getattr(ours, ours.WhichOneof("stats")).common_stats.num_non_missing == 0
        return
    assert ours.type == stock.type, name
    ours_stats, stock_stats = getattr(ours, kind), getattr(stock, kind)
    for field in EXACT_COMMON + ("tot_num_values",):
        assert getattr(ours_stats.common_stats, field) == getattr(stock_stats.common_stats, field)
    assert ours_stats.common_stats.avg_num_values == pytest.approx(
        stock_stats.common_stats.avg_num_values, rel=1e-6
    )
    assert (
        ours_stats.common_stats.num_values_histogram
        == stock_stats.common_stats.num_values_histogram
    )
    if kind == "num_stats":
        for field in EXACT_NUMERIC:
            assert getattr(ours_stats, field) == getattr(stock_stats, field), (name, field)
        assert ours_stats.mean == pytest.approx(stock_stats.mean, rel=1e-12)
        assert ours_stats.std_dev == pytest.approx(stock_stats.std_dev, rel=1e-9)
        assert len(ours_stats.histograms) == len(stock_stats.histograms) == 2
        for mine, theirs in zip(ours_stats.histograms, stock_stats.histograms, strict=True):
            assert mine.type == theirs.type and mine.num_nan == theirs.num_nan
            for a, b in zip(mine.buckets, theirs.buckets, strict=True):
                assert (a.low_value, a.high_value) == pytest.approx((b.low_value, b.high_value))
                assert a.sample_count == pytest.approx(b.sample_count, rel=1e-9)
    else:
        for field in EXACT_STRING:
            assert getattr(ours_stats, field) == getattr(stock_stats, field), (name, field)
        assert ours_stats.avg_length == pytest.approx(stock_stats.avg_length, rel=1e-6)


@pytest.mark.parametrize("split", ["train", "eval"])
def test_statistics_match_stock_statistics_gen(pipeline_run, split):
    ours = split_stats(pipeline_run[("ParquetExampleGen", "ExampleStatistics")], split)
    stock = split_stats(pipeline_run[("StatisticsGen", "ExampleStatistics")], split)
    assert ours.datasets[0].num_examples == stock.datasets[0].num_examples
    mine, theirs = features_by_name(ours), features_by_name(stock)
    assert list(mine) == list(theirs)  # the same features, in the same order
    for name in mine:
        assert_same_feature(name, mine[name], theirs[name])

"""tfx_tabular.source: null partitions, partition values typed as a table or a file records them,
table detection and Iceberg's current metadata file, and the footer walk that names columns of
logical types newer than pyarrow 10. (Real writers' output: tests/integration/test_writers.py.)"""

import datetime
import decimal

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from tfx_tabular.conversion.plan import splits_by_partition
from tfx_tabular.conversion.source_metadata import SourceMetadata
from tfx_tabular.schemas.infer import infer_schema
from tfx_tabular.source import footer, tables
from tfx_tabular.source.dataset import open_dataset, partition_value
from tfx_tabular.source.errors import ColumnError, InputError
from tfx_tabular.source.files import ParquetFileInfo, _footer_bytes
from tfx_tabular.source.reading import read_batches


def _write(path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def test_null_partition_marker_is_a_null_value_and_makes_the_feature_optional(tmp_path):
    _write(tmp_path / "day=3" / "a.parquet", pa.table({"id": [1, 2]}))
    _write(tmp_path / "day=__HIVE_DEFAULT_PARTITION__" / "b.parquet", pa.table({"id": [3]}))
    dataset = open_dataset(str(tmp_path))
    assert dataset.schema.field("day").type == pa.int64()  # the null does not make it text
    by_file = {
        f.relative: next(read_batches(dataset, f, [0], 10)).column(1).to_pylist()
        for f in dataset.files
    }
    assert by_file == {
        "day=3/a.parquet": [3, 3],
        "day=__HIVE_DEFAULT_PARTITION__/b.parquet": [None],
    }
    metadata = SourceMetadata.of(dataset)
    assert metadata.column_stats["day"].null_count == 1
    day = next(f for f in infer_schema(metadata).feature if f.name == "day")
    assert not day.HasField("presence") and not day.HasField("shape")
    always = next(
        f
        for f in infer_schema(SourceMetadata.of(open_dataset(str(tmp_path / "day=3")))).feature
        if f.name == "id"
    )
    assert always.presence.min_fraction == 1.0
    # Held out by partition: the null value sorts first (never the "last" day).
    splits = splits_by_partition(dataset, "day", last=1).file_splits
    assert splits == {
        "day=3/a.parquet": "eval",
        "day=__HIVE_DEFAULT_PARTITION__/b.parquet": "train",
    }


@pytest.mark.parametrize(
    "text, arrow_type, value",
    [
        ("2024-02-29", pa.date32(), datetime.date(2024, 2, 29)),
        ("-12.50", pa.decimal128(9, 2), decimal.Decimal("-12.50")),
        ("true", pa.bool_(), True),
        (
            "2024-01-01 12:00:00.123456",
            pa.timestamp("us"),
            datetime.datetime(2024, 1, 1, 12, 0, 0, 123456),
        ),
        ("007", pa.int32(), 7),
        (None, pa.string(), None),
    ],
)
def test_partition_values_take_the_type_a_table_or_a_file_gives_the_column(text, arrow_type, value):
    info = ParquetFileInfo("f.parquet", "f.parquet", (), 0, (), pa.schema([]), 0, 0)
    assert partition_value(info, "k", text, arrow_type).to_pylist() == [value]


def test_partition_value_the_column_type_cannot_hold_names_file_and_column():
    info = ParquetFileInfo("d/f.parquet", "f.parquet", (), 0, (), pa.schema([]), 0, 0)
    with pytest.raises(ColumnError, match=r"d/f.parquet: partition value k='x y' is not a int64"):
        partition_value(info, "k", "x y", pa.int64())


def test_a_plain_folder_is_no_table_and_takes_no_table_version(tmp_path):
    _write(tmp_path / "a.parquet", pa.table({"id": [1]}))
    filesystem = pafs.LocalFileSystem()
    assert tables.read_snapshot(filesystem, str(tmp_path)) is None
    with pytest.raises(InputError, match="neither a Delta Lake nor an Iceberg table"):
        open_dataset(str(tmp_path), table_version=3)


@pytest.mark.parametrize(
    "names, hint, current",
    [
        (
            ["00001-b.metadata.json", "00012-a.metadata.json", "00002-c.metadata.json"],
            None,
            "00012-a",
        ),
        (["v1.metadata.json", "v2.metadata.json", "v10.metadata.json"], None, "v10"),
        (["v1.metadata.json", "v2.metadata.json"], "1", "v1"),  # Hadoop tables' version hint
    ],
)
def test_iceberg_current_metadata_is_the_newest_version(tmp_path, names, hint, current):
    metadata = tmp_path / "metadata"
    metadata.mkdir()
    for name in names:
        (metadata / name).write_text("{}")
    if hint:
        (metadata / "version-hint.text").write_text(hint)
    filesystem = pafs.LocalFileSystem()
    assert tables.table_format(filesystem, str(tmp_path)) == tables.ICEBERG
    chosen = tables._current_iceberg_metadata(filesystem, str(tmp_path))
    assert chosen == str(metadata / f"{current}.metadata.json")


def test_footer_walk_reads_every_schema_element_of_a_real_footer(tmp_path):
    table = pa.table(
        {
            "flag": [True, False],
            "text": ["a", None],
            "tags": pa.array([[1.5], []], pa.list_(pa.float64())),
            "st": [{"a": 1, "b": "x"}, None],
            "when": pa.array([0, 1], pa.timestamp("ms", "UTC")),
            "half": pa.array([1, 2], pa.int16()),
        }
    )
    _write(tmp_path / "a.parquet", table)
    with pafs.LocalFileSystem().open_input_file(str(tmp_path / "a.parquet")) as handle:
        raw = _footer_bytes(handle)
    reader = footer._Reader(raw)
    ids = []
    for field, kind in reader.fields():
        ids.append(field)
        reader.skip(kind)
    assert reader.pos == len(raw)  # every value skipped exactly: the walk ends at the footer's end
    assert ids[:4] == [1, 2, 3, 4]  # FileMetaData: version, schema, num_rows, row_groups
    assert footer.newer_logical_types(raw) == []  # pyarrow 10 writes none

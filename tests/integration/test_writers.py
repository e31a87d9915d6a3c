"""Parquet as real writers write it: Spark, DuckDB, Polars, the newest pyarrow and pandas, each run
in its own environment (tests/writers/), with its defaults and with partitioning.

Every case converts with our library (the conversion `tfx-tabular convert` and ParquetExampleGen
run) and must equal, row for row (matched by the key `k`) and value for value, what the writer
itself reads back from its own output; the schema ParquetSchemaGen infers from the same folder
describes every feature (kind, time unit). Cases pyarrow 10 cannot read fail with a one-line
error naming the file, the column and the writer's setting that avoids it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pytest
from conftest import IN_MEMORY_BEAM, convert_to_examples

WRITERS = Path(__file__).resolve().parent.parent / "writers"
sys.path.insert(0, str(WRITERS))
from environment import writers_python  # noqa: E402

tf = pytest.importorskip("tensorflow")
from tensorflow.core.example import example_pb2  # noqa: E402
from tensorflow_metadata.proto.v0 import schema_pb2  # noqa: E402

from tfx_tabular.conversion.convert import convert  # noqa: E402
from tfx_tabular.conversion.plan import (  # noqa: E402
    OutputOptions,
    SourceOptions,
    plan_conversion,
)
from tfx_tabular.conversion.source_metadata import SourceMetadata  # noqa: E402
from tfx_tabular.schemas.infer import UNIT_TAG, infer_schema  # noqa: E402
from tfx_tabular.schemas.source import schema_of  # noqa: E402
from tfx_tabular.source.dataset import open_dataset  # noqa: E402
from tfx_tabular.source.errors import InputError  # noqa: E402

# Nanoseconds per unit of a time domain the inferred schema declares.
_NS_PER = {
    schema_pb2.TimeDomain.UNIX_DAYS: 86_400 * 10**9,
    schema_pb2.TimeDomain.UNIX_SECONDS: 10**9,
    schema_pb2.TimeDomain.UNIX_MILLISECONDS: 10**6,
    schema_pb2.TimeDomain.UNIX_MICROSECONDS: 10**3,
    schema_pb2.TimeDomain.UNIX_NANOSECONDS: 1,
}
_NS_PER_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
KEY = "k"


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """Every writer's cases, written once, each script in its own process side by side (Spark's
    slow start overlaps the others)."""
    python = writers_python()
    out = tmp_path_factory.mktemp("writers")
    scripts = ["write_spark.py", "write_python.py", "write_tables.py"]

    def run(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [python, str(WRITERS / script), str(out)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(WRITERS)},
            check=False,
        )

    with concurrent.futures.ThreadPoolExecutor(len(scripts)) as pool:
        for script, done in zip(scripts, pool.map(run, scripts), strict=True):
            assert done.returncode == 0, f"{script} failed:\n{done.stderr[-4000:]}"
    return out


def _read_back(path: Path) -> pa.Table:
    with pa.OSFile(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def _temporal_as_ns(table: pa.Table) -> pa.Table:
    """The read-back with dates and timestamps as int64 nanoseconds since the epoch: one scale
    for the writer's unit and ours (INT96 reads as ns here, Spark reads it back as us)."""
    for i, field in enumerate(table.schema):
        t = field.type
        if pa.types.is_timestamp(t):
            factor = _NS_PER_UNIT[t.unit]
        elif pa.types.is_date32(t):
            factor = 86_400 * 10**9
        elif pa.types.is_date64(t):
            factor = 10**6
        elif pa.types.is_time(t):
            factor = _NS_PER_UNIT[str(t)[len("time32[") : -1]]
        else:
            continue
        narrow = pa.types.is_date32(t) or t in (pa.time32("s"), pa.time32("ms"))
        storage = pa.int32() if narrow else pa.int64()
        column = table.column(i).cast(storage).combine_chunks()
        values = column.fill_null(0).to_numpy()
        mask = column.is_null().to_numpy(zero_copy_only=False)
        table = table.set_column(
            i, field.name, pa.array(values.astype(np.int64) * factor, pa.int64(), mask=mask)
        )
    return table


def _leaf(value, path: list[str]):
    """The values a feature takes from one cell: walk struct fields, flatten lists."""
    if value is None:
        return None
    if not path:
        return [value]
    step, rest = path[0], path[1:]
    if step == "list":
        out = []
        for item in value:
            inner = _leaf(item, rest)
            out.extend(inner or [])
        return out
    return _leaf(value.get(step), rest)


def _canonical_expected(values, leaf_type: pa.DataType):
    if values is None:
        return None
    if pa.types.is_floating(leaf_type) or pa.types.is_decimal(leaf_type):
        return [float(np.float32(float(v))) for v in values]
    if pa.types.is_boolean(leaf_type) or pa.types.is_integer(leaf_type):
        return [int(v) for v in values]
    if pa.types.is_string(leaf_type) or pa.types.is_large_string(leaf_type):
        return [v.encode() for v in values]
    return list(values)  # binaries, and temporals already as ns


def _leaf_type(t: pa.DataType, path: list[str]) -> pa.DataType:
    for step in path:
        t = t.value_type if step == "list" else t[t.get_field_index(step)].type
    return t


def _our_rows(out: str) -> dict:
    rows = {}
    files = sorted(tf.io.gfile.glob(os.path.join(out, "Split-*", "*")))
    for record in tf.data.TFRecordDataset(files):
        features = example_pb2.Example.FromString(record.numpy()).features.feature
        row = {}
        for name, feature in features.items():
            kind = feature.WhichOneof("kind")
            row[name] = None if kind is None else list(getattr(feature, kind).value)
        key = row[KEY][0]
        assert key not in rows, f"key {key} written twice"
        rows[key] = row
    return rows


def _path_of(name: str, columns: list[str]) -> tuple[str, list[str]]:
    """A feature's column and the struct steps below it (`st.a` → ("st", ["a"]))."""
    column = next(c for c in sorted(columns, key=len, reverse=True) if name.split(".")[0] == c)
    return column, name.split(".")[1:]


def _convert(data: Path, out: str, table_version: Optional[int]) -> schema_pb2.Schema:
    """Convert `data` into `out` as ParquetExampleGen does, and infer its schema as
    ParquetSchemaGen does (footers only)."""
    if table_version is None:
        convert_to_examples(str(data), out)
        return schema_of(str(data)).schema
    dataset, splits = plan_conversion(str(data), SourceOptions(table_version=table_version))
    convert(dataset, out, splits, OutputOptions(num_shards=2), IN_MEMORY_BEAM)
    return infer_schema(SourceMetadata.of(dataset))


def assert_same_as_read_back(
    case: str, data: Path, tmp_path: Path, table_version: Optional[int] = None
) -> None:
    """Convert `data`, and compare every row and value with the writer's read-back
    (`<case>.arrow` beside `data`)."""
    expected = _temporal_as_ns(_read_back(data.parent / f"{case}.arrow"))
    out = str(tmp_path / "examples")
    inferred = _convert(data, out, table_version)
    ours = _our_rows(out)
    by_key = {row[KEY]: row for row in expected.to_pylist()}
    assert sorted(ours) == sorted(by_key), f"{case}: rows differ"
    columns = expected.column_names
    ours_columns = {_path_of(f.name, columns)[0] for f in inferred.feature}
    assert ours_columns == set(columns), f"{case}: columns differ"
    for feature in inferred.feature:
        column, steps = _path_of(feature.name, columns)
        field_type = expected.schema.field(column).type
        path = _list_steps(field_type, steps)
        leaf_type = _leaf_type(field_type, path)
        factor = _nanoseconds_per_value(feature)
        for key, row in by_key.items():
            want = _canonical_expected(_leaf(row[column], path), leaf_type)
            got = ours[key].get(feature.name)
            if got is not None and factor != 1:
                got = [v * factor for v in got]
            assert got == want, f"{case}: row {KEY}={key}, feature {feature.name}"


def _nanoseconds_per_value(feature: schema_pb2.Feature) -> int:
    """The inferred schema's time unit of a feature: its time domain, or its unit tag (times)."""
    if feature.HasField("time_domain"):
        return _NS_PER[feature.time_domain.integer_format]
    units = [t[len(UNIT_TAG) :] for t in feature.annotation.tag if t.startswith(UNIT_TAG)]
    return _NS_PER_UNIT[units[0]] if units else 1


def _list_steps(t: pa.DataType, struct_steps: list[str]) -> list[str]:
    """The path through `t` to the leaf named by `struct_steps`, with its list levels."""
    path, steps = [], list(struct_steps)
    while True:
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            path.append("list")
            t = t.value_type
        elif pa.types.is_struct(t) and steps:
            step = steps.pop(0)
            path.append(step)
            t = t[t.get_field_index(step)].type
        else:
            return path


CASES = [
    "pyarrow_plain",
    "pyarrow_partitioned",
    "pyarrow_integer_decimals_v2_pages_zstd",
    "pyarrow_string_view",  # read by the files' Parquet types: pyarrow 10 knows no views
    "pyarrow_gzip_brotli_lz4",
    "bigquery_export_layout",
    "pandas_plain",
    "pandas_partitioned",
    "duckdb_plain",
    "duckdb_partitioned",
    "duckdb_partition_columns_kept",
    "duckdb_zstd_small_row_groups",
    "polars_plain",
    "polars_partitioned",
    "spark_plain",
    "spark_partitioned",
    "spark_micros_zstd_legacy",
]


@pytest.mark.parametrize("case", CASES)
def test_conversion_equals_the_writers_own_read_back(written, case, tmp_path):
    assert_same_as_read_back(case, written / case, tmp_path)


UNREADABLE = {  # case: what the one-line error must say (file, column, the setting to change)
    "pyarrow_float16": ["data.parquet", "'half'", "FLOAT16", "cast float16 columns to float32"],
    "duckdb_parquet_v2": ["data.parquet", "'s'", "DELTA_LENGTH_BYTE_ARRAY", "PARQUET_VERSION V1"],
    "pyarrow_byte_stream_split_ints": [
        "data.parquet",
        "'k'",
        "BYTE_STREAM_SPLIT (INT64)",
        "use_byte_stream_split",
    ],
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_what_pyarrow_10_cannot_read_fails_naming_file_column_and_setting(written, case, tmp_path):
    with pytest.raises(InputError) as error:
        convert_to_examples(str(written / case), str(tmp_path / "examples"))
    message = str(error.value)
    assert "\n" not in message
    for part in UNREADABLE[case]:
        assert part in message, message


# --- tables: Delta Lake (delta-rs) and Iceberg (pyiceberg) -----------------------------------


@pytest.mark.parametrize(
    "case",
    ["delta_table", "delta_deletion_vectors_enabled", "delta_temporal_partitions", "iceberg_table"],
)
def test_table_converts_its_current_snapshot_only(written, case, tmp_path):
    """Appends, an overwrite (its replaced files stay in the folder) and an added column; a
    table partitioned by a date and a timestamp (values as the log records them, nulls too)."""
    assert_same_as_read_back(case, written / case, tmp_path)


@pytest.mark.parametrize("case", ["delta_table", "iceberg_table"])
def test_table_converts_an_earlier_version(written, case, tmp_path):
    earlier = _read_back(written / f"{case}@1.arrow").schema.metadata
    version = int(earlier.get(b"snapshot", b"1"))  # Delta: version 1; Iceberg: a snapshot id
    assert_same_as_read_back(f"{case}@1", written / case, tmp_path, table_version=version)


TABLE_REFUSALS = {
    "delta_column_mapping": "Delta column mapping (delta.columnMapping.mode=name) is not supported",
    "iceberg_renamed": "Iceberg column 's' (string) became 'text' (string)",
}


@pytest.mark.parametrize("case", sorted(TABLE_REFUSALS))
def test_table_feature_we_cannot_honour_fails_naming_it(written, case):
    with pytest.raises(InputError, match=re.escape(TABLE_REFUSALS[case])):
        open_dataset(str(written / case))


def test_delta_deletion_vectors_in_use_fail_naming_them(written, tmp_path):
    """delta-rs writes no deletion vectors (Spark and Databricks do): the real table's log gets
    one added to a file it lists, as those writers record it."""
    table = tmp_path / "table"
    shutil.copytree(written / "delta_deletion_vectors_enabled", table)
    last = sorted((table / "_delta_log").glob("*.json"))[-1]
    actions = [json.loads(line) for line in last.read_text().splitlines()]
    add = next(a["add"] for a in actions if "add" in a)
    add["deletionVector"] = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
                             "offset": 1, "sizeInBytes": 36, "cardinality": 2}  # fmt: skip
    last.write_text("".join(json.dumps(a) + "\n" for a in actions))
    with pytest.raises(InputError, match="deletion vectors are not supported"):
        open_dataset(str(table))


def test_a_new_table_version_changes_parquet_example_gen_input_fingerprint(written, tmp_path):
    """TFX's cache reuses an ExampleGen output while the input fingerprint is unchanged: a Delta
    commit that only removes files (they stay in the folder) must change it too. Here the table
    loses its last commit, its data files untouched."""
    from tfx.proto import example_gen_pb2

    from tfx_tabular.components.parquet_example_gen.driver import Driver

    table = tmp_path / "table"
    shutil.copytree(written / "delta_table", table)
    splits = [example_gen_pb2.Input.Split(name="single_split", pattern="*")]

    def fingerprint() -> str:
        processor = Driver.__new__(Driver).get_input_processor(splits, None, str(table))
        return processor.get_input_fingerprint(0, None)

    before = fingerprint()
    assert fingerprint() == before
    sorted((table / "_delta_log").glob("*.json"))[-1].unlink()
    assert fingerprint() != before


def _input_rows(out: str, schema: schema_pb2.Schema, columnar_batches: bool) -> list[str]:
    """The train split through input_fn in the exact form, every row as the repr of its values
    (NaN compares equal as text), sorted: the rows whatever order they came in."""
    from tfx_tabular import input_fn

    dataset = input_fn(
        out, schema, 64, split="train", training=False, columnar_batches=columnar_batches
    )
    rows = []
    for features, label in dataset:
        columns = [v for _, v in sorted({**features, "label": label}.items())]
        lists = [
            c.to_list() if isinstance(c, tf.RaggedTensor) else c.numpy().tolist() for c in columns
        ]
        rows += [repr(row) for row in zip(*lists, strict=True)]
    return sorted(rows)


@pytest.mark.parametrize(
    "case",
    [
        "pandas_plain",
        "duckdb_partitioned",
        "polars_plain",
        "spark_partitioned",
        "pyarrow_string_view",
        "delta_temporal_partitions",
    ],
)
def test_columnar_strings_read_as_the_per_row_records_parse(written, case, tmp_path, caplog):
    """Each writer's strings (and everything else) from columnar batches holding them equal
    the per-row records' parse, which the test above holds to the writer's own read-back."""
    out = str(tmp_path / "examples")
    dataset, splits = plan_conversion(str(written / case))
    options = OutputOptions(num_shards=2, columnar_batch_rows=512, columnar_strings=True)
    convert(dataset, out, splits, options, IN_MEMORY_BEAM)
    schema = infer_schema(SourceMetadata.of(dataset), label=KEY)
    assert any(f.type == schema_pb2.BYTES for f in schema.feature), f"{case}: no strings"
    with caplog.at_level("INFO", logger="tfx_tabular.training.input_fn"):
        columnar = _input_rows(out, schema, True)
    assert "input_fn reads columnar batches" in caplog.text, caplog.text
    assert columnar == _input_rows(out, schema, False), case

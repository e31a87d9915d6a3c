"""Bad input, systematically: Parquet → `open_dataset` → `convert` (and `infer_schema` / `overlay`).

Every case ends in exactly one of two ways:
  (a) a clear error — InputError (the input), SchemaError (a schema), ConversionError wrapped in an
      InputError naming the file (values) — naming the file and the column where there is one,
      with nothing published (no Split-*, no .tfx-tabular-incomplete left behind); or
  (b) lossless handling: the run succeeds and the values read back equal the source.

The matrix: case → behaviour → test (`module::test` when another module covers it). These run
on the in-memory DirectRunner; the errors raised inside the conversion (values, pages) are also
run through `tfx-tabular convert` as users run it, its default runner mode, worker processes and
the portable runner (integration/test_cli_errors.py, test_portable_runner.py).

- truncated Parquet file → (a) naming the file → test_convert::
  test_unreadable_file_is_an_input_error_naming_it_and_nothing_is_written[truncated]; pages corrupt
  behind a good footer → test_convert::test_corrupt_data_pages_fail_the_conversion_naming_...
- a non-Parquet file among the data → (a) naming it → test_convert::test_unreadable_file_...
  [not_parquet] and [empty] (0 bytes). Spark/Hive junk (_SUCCESS, _metadata, .crc, _temporary/) is
  ignored → test_convert::test_hive_dataset_partitions_become_typed_features
- empty input: a missing or empty folder, only ignored files, a file given as the folder → (a)
  test_no_input_is_an_input_error_naming_it; a split pattern matching no file → (a)
  test_a_split_pattern_matching_no_file_is_an_input_error
- zero-row files alone → (a) "no rows to convert" naming the files →
  test_zero_row_files_alone_are_an_input_error; among others → (b)
  test_zero_row_files_among_others_convert_losslessly
- schema drift, type change → (a) naming both files and the column →
  test_type_change_across_files_is_an_input_error (bool/int, int/float, timestamp units,
  time/timestamp, decimal/float, scalar/list), test_convert::test_conflicting_column_types_name_...
  (string/int), and after an all-null file
  test_type_conflict_after_an_all_null_file_names_the_conflicting_files. Safe widenings (int32 and
  int64, ...) → (b) test_convert::test_schema_unification_widens_ints_and_fills_missing_columns
- schema drift, column added / removed → (b) null where missing, for every type; a required
  (non-nullable) column missing → (a) → test_columns_added_and_removed_are_null_where_missing
- unsupported types → (a) naming the file and column, and exclude_columns proceeds →
  test_unsupported_types_are_input_errors_naming_file_and_column (map in a struct, list of map, a
  registered extension type, also in a list); a top-level map → test_convert::
  test_map_column_is_an_input_error_naming_the_file_and_column; union → Parquet cannot hold one →
  test_union_columns_cannot_come_from_parquet (and test_encoding::
  test_map_and_union_columns_are_unsupported_naming_the_column). An extension type *not
  registered* in the converting process is read as its storage type (lossless).
- a partition key that is also a column → (a) →
  test_partition_key_that_is_also_a_column_is_an_input_error
- partition values of mixed types → (b) bytes of the folder text (k=1, k=abc → b"1", b"abc";
  k=007 stays b"007"); int64 only when every value is an integer as written →
  test_partition_values_keep_their_text; partition_types →
  test_partition_types_override_and_refuse_what_does_not_fit
- partition path tricks → (b) decoded values (k=a%2Fb → "a/b", k=a%20b → "a b", k=.. → ".."),
  nothing read or written outside the folders → test_partition_path_tricks_are_plain_values; (a)
  invalid percent-encoded UTF-8, a key twice along a path, a symlink loop →
  test_undecodable_or_ambiguous_paths_are_input_errors
- non-UTF-8 strings → (b) byte for byte, in binary and string columns →
  test_non_utf8_bytes_round_trip (binary also in test_schemas)
- NaN / ±inf → (b) test_nan_and_infinities_round_trip, counted and warned about per column →
  test_non_finite_values_are_counted_as_written_and_warned_about (also test_encoding::
  test_the_conventions_spelled_out and test_schemas)
- uint64 above the int64 maximum → (a) conversion and schema inference name the file / column →
  test_uint64_above_int64_max_fails_naming_file_and_column (encoder: test_encoding::
  test_uint64_above_int64_max_is_a_conversion_error)
- an all-null column, every type → (b) no kind in every row, and the inferred schema does not
  demand presence the footers prove absent → test_all_null_columns_of_every_type; an all-null
  fixed_size_list, or one with a null row, which pyarrow 10 writes but cannot read back → (a)
  test_fixed_size_list_with_null_rows_from_parquet_fails_naming_file_and_column
- time32 / time64 / duration (they crashed) → (b) in the stored unit →
  test_time_of_day_and_duration_columns_round_trip
- very wide rows (10,000 columns) → (b) test_very_wide_rows_convert_losslessly
- deep nesting (5 list levels) with nulls and empties → (b)
  test_five_level_lists_with_nulls_and_empties; a null inner list → (a)
  test_a_null_inside_a_deep_list_fails_naming_file_and_column
- a label missing from some files → (b) the schema keeps it nullable (a RaggedFeature, no invented
  0); an all-null label, a required label missing → (a) →
  test_label_missing_from_some_files_is_not_treated_as_present
- an overlay naming unknown features → (a) SchemaError → test_schemas::
  test_curated_overlay_wins_and_unknown_features_fail (features, wrong type); in tensor
  representations → test_overlay_tensor_representations_of_unknown_features_fail
"""

import datetime
import decimal
import math
import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import IN_MEMORY_BEAM
from test_convert import assert_published, features, read_split, run

from tfx_tabular.conversion import convert as conversion
from tfx_tabular.conversion import plan
from tfx_tabular.conversion.plan import OutputOptions, Splits, splits_by_partition
from tfx_tabular.conversion.source_metadata import SourceMetadata, read_source_metadata
from tfx_tabular.source.dataset import open_dataset
from tfx_tabular.source.errors import ColumnError, InputError
from tfx_tabular.source.reading import read_batches

tf = pytest.importorskip("tensorflow")
from tensorflow.core.example import example_pb2  # noqa: E402
from tensorflow_metadata.proto.v0 import schema_pb2  # noqa: E402

from tfx_tabular.schemas.infer import SchemaError, infer_schema, overlay  # noqa: E402
from tfx_tabular.schemas.parsing import feature_spec  # noqa: E402

ONE_SPLIT = Splits(buckets=(("all", 1),))
INT64_MAX = 2**63 - 1


def write(path, table: pa.Table, **kwargs) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, str(path), **kwargs)


def convert_all(base, out, **open_args) -> dict:
    """Convert into one split; {id: features of the row} (ids are unique)."""
    dataset = open_dataset(str(base), **open_args)
    result = run(dataset, out, ONE_SPLIT, OutputOptions(num_shards=2))
    assert_published(out, ["all"])
    rows = {}
    for record in read_split(str(out), "all"):
        row = features(record)
        assert row["id"][0] not in rows
        rows[row["id"][0]] = row
    assert len(rows) == result.rows["all"] == dataset.num_rows
    return rows


def assert_nothing_published(out) -> None:
    # Not even an empty .tfx-tabular-incomplete folder.
    assert not os.path.exists(out) or not os.listdir(out), os.listdir(out)


def assert_fails_unpublished(dataset, out, *named):
    """The conversion fails with an InputError naming each of `named`; nothing is published."""
    with pytest.raises(InputError) as error:
        run(dataset, out, ONE_SPLIT, OutputOptions(num_shards=2))
    for text in named:
        assert text in str(error.value), str(error.value)
    assert_nothing_published(out)
    return str(error.value)


def f32(value) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def same_floats(got, want) -> bool:
    return len(got) == len(want) and all(
        (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w))
        for g, w in zip(got, want, strict=True)
    )


# --- empty input ------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["missing", "empty", "only_ignored_files", "a_file"])
def test_no_input_is_an_input_error_naming_it(tmp_path, layout):
    base = tmp_path / "in"
    if layout == "a_file":
        write(base, pa.table({"id": [1]}))  # a Parquet file given where a folder is expected
    elif layout != "missing":
        base.mkdir()
    if layout == "only_ignored_files":
        (base / "_SUCCESS").write_bytes(b"")
        (base / ".part-0.parquet.crc").write_bytes(b"crc")
        write(base / "_temporary" / "0" / "part-0.parquet", pa.table({"id": [1]}))
    with pytest.raises(InputError, match=re.escape(str(base))):
        open_dataset(str(base))


def test_a_split_pattern_matching_no_file_is_an_input_error(tmp_path):
    """FileBasedExampleGen fails on a split pattern that matches nothing; silently publishing the
    other splits (no Split-eval at all) would be worse."""
    for day in (1, 2):
        write(tmp_path / "in" / f"day={day}" / "part.parquet", pa.table({"id": [day]}))
    with pytest.raises(InputError, match=r"eval: 'day=9\*'"):
        plan.plan_conversion(
            str(tmp_path / "in"),
            plan.SourceOptions(patterns={"train": "day=[12]", "eval": "day=9*"}),
        )
    _, splits = plan.plan_conversion(
        str(tmp_path / "in"), plan.SourceOptions(patterns={"train": "day=1", "eval": "day=2"})
    )
    assert sorted(splits.names) == ["eval", "train"]


# --- zero-row files ---------------------------------------------------------------------------


def _typed(rows: int, first_id: int = 0) -> pa.Table:
    ids = list(range(first_id, first_id + rows))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([f"s{i}" if i % 2 else None for i in ids], pa.string()),
            "tags": pa.array([list(range(i % 3)) for i in ids], pa.list_(pa.int64())),
        }
    )


def test_zero_row_files_alone_are_an_input_error(tmp_path):
    write(tmp_path / "in" / "day=1" / "a.parquet", _typed(0))
    write(tmp_path / "in" / "day=2" / "b.parquet", _typed(0))
    dataset = open_dataset(str(tmp_path / "in"))  # the footers are fine: the schema is known
    assert dataset.num_rows == 0 and dataset.schema.names == ["id", "s", "tags", "day"]
    message = assert_fails_unpublished(
        dataset, tmp_path / "out", "day=1/a.parquet", "day=2/b.parquet"
    )
    assert "0 rows" in message
    # The same when the files a split configuration selects hold no rows.
    write(tmp_path / "in" / "day=3" / "c.parquet", _typed(4))
    dataset = open_dataset(str(tmp_path / "in"))
    with pytest.raises(InputError, match="0 rows"):
        run(
            dataset,
            tmp_path / "out",
            Splits(file_splits={"day=1/a.parquet": "x", "day=2/b.parquet": "x"}),
        )
    assert_nothing_published(tmp_path / "out")


def test_zero_row_files_among_others_convert_losslessly(tmp_path):
    base = tmp_path / "in"
    write(base / "day=1" / "a.parquet", _typed(5, 0))
    write(base / "day=1" / "b-empty.parquet", _typed(0))
    # What pandas writes for an empty frame: object columns become null-typed, a column is absent.
    write(
        base / "day=2" / "c-empty.parquet",
        pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], pa.null())}),
    )
    write(base / "day=3" / "d.parquet", _typed(3, 5))
    dataset = open_dataset(str(base))
    assert dataset.schema.field("s").type == pa.string()
    assert dataset.schema.field("tags").type == pa.list_(pa.int64())
    rows = convert_all(base, tmp_path / "out")
    assert sorted(rows) == list(range(8))
    for i, row in rows.items():
        assert row == {
            "id": [i],
            "s": [f"s{i}".encode()] if i % 2 else None,
            "tags": list(range(i % 3)),
            "day": [1 if i < 5 else 3],
        }


# --- schema drift -----------------------------------------------------------------------------

DRIFT = {
    "bool_then_int": (pa.array([True, False]), pa.array([5, 0])),
    "int_then_float": (pa.array([1, 2]), pa.array([1.5, 2.5])),
    "timestamp_ms_then_us": (
        pa.array([1, 2], pa.timestamp("ms")),
        pa.array([1, 2], pa.timestamp("us")),
    ),
    "time_then_timestamp": (
        pa.array([1, 2], pa.time32("ms")),
        pa.array([1, 2], pa.timestamp("ms")),
    ),
    "decimal_then_float": (
        pa.array([decimal.Decimal("1.50"), None], pa.decimal128(5, 2)),
        pa.array([1.5, 2.0]),
    ),
    "scalar_then_list": (pa.array(["a", "b"]), pa.array([["a"], []])),
}


@pytest.mark.parametrize("case", DRIFT)
def test_type_change_across_files_is_an_input_error(tmp_path, case):
    """bool/int, time/timestamp and decimal/float write the same feature kind but do not mean the
    same values: unifying them would silently mix meanings under the first file's type (which the
    schema and the trainer then believe)."""
    first, second = DRIFT[case]
    write(tmp_path / "in" / "day=1" / "first.parquet", pa.table({"id": [1, 2], "v": first}))
    write(tmp_path / "in" / "day=2" / "second.parquet", pa.table({"id": [3, 4], "v": second}))
    with pytest.raises(InputError) as error:
        open_dataset(str(tmp_path / "in"))
    message = str(error.value)
    assert "'v'" in message and "first.parquet" in message and "second.parquet" in message, message


def test_type_conflict_after_an_all_null_file_names_the_conflicting_files(tmp_path):
    write(tmp_path / "in" / "a.parquet", pa.table({"id": [1], "v": pa.nulls(1)}))
    write(tmp_path / "in" / "b.parquet", pa.table({"id": [2], "v": pa.array([7])}))
    write(tmp_path / "in" / "c.parquet", pa.table({"id": [3], "v": pa.array(["x"])}))
    with pytest.raises(InputError) as error:
        open_dataset(str(tmp_path / "in"))
    message = str(error.value)
    assert "'v'" in message and "b.parquet" in message and "c.parquet" in message, message
    assert "a.parquet" not in message, message  # v is null-typed there: it conflicts with nothing


UTC = datetime.timezone.utc
# Columns of many types, each with two non-null values.
MANY_TYPES = {
    "i32": (pa.int32(), [1, -2]),
    "flag": (pa.bool_(), [True, False]),
    "f64": (pa.float64(), [0.5, -1.0]),
    "text": (pa.string(), ["x", ""]),
    "dict": (pa.dictionary(pa.int32(), pa.string()), ["a", "b"]),
    "ts": (
        pa.timestamp("ms", tz="UTC"),
        [datetime.datetime(2024, 1, 1, tzinfo=UTC), datetime.datetime(1969, 12, 31, tzinfo=UTC)],
    ),
    "dec": (pa.decimal128(5, 2), [decimal.Decimal("1.25"), decimal.Decimal("-0.50")]),
    "fsb": (pa.binary(2), [b"ab", b"\x00\xff"]),
    "ints": (pa.list_(pa.int64()), [[1, 2], []]),
    "fsl": (pa.list_(pa.float32(), 2), [[1, 2], [3, 4]]),
    "nested": (pa.list_(pa.list_(pa.string())), [[["a"], []], []]),
    "st": (
        pa.struct([("x", pa.int64()), ("y", pa.string())]),
        [{"x": 1, "y": "a"}, {"x": None, "y": "b"}],
    ),
    "lst": (pa.list_(pa.struct([("z", pa.float32())])), [[{"z": 1.0}], []]),
}


def _many_types_table(first_id: int) -> pa.Table:
    arrays = {"id": pa.array([first_id, first_id + 1])}
    for name, (arrow_type, values) in MANY_TYPES.items():
        arrays[name] = (
            pa.array(values).dictionary_encode()
            if pa.types.is_dictionary(arrow_type)
            else pa.array(values, arrow_type)
        )
    return pa.table(arrays)


def test_columns_added_and_removed_are_null_where_missing(tmp_path):
    """old.parquet has every column of MANY_TYPES; new.parquet drops them all and adds one.
    Rows of old.parquet convert exactly as when converted alone; rows of new.parquet have no value
    (a feature with no kind) for every removed column, and old rows none for the added one."""
    write(tmp_path / "alone" / "old.parquet", _many_types_table(0))
    reference = convert_all(tmp_path / "alone", tmp_path / "reference")
    write(tmp_path / "in" / "old.parquet", _many_types_table(0))
    write(tmp_path / "in" / "new.parquet", pa.table({"id": [10, 11], "added": [0.25, None]}))
    rows = convert_all(tmp_path / "in", tmp_path / "out")
    removed = set(reference[0]) - {"id"}
    assert len(removed) >= len(MANY_TYPES)  # struct and nested columns give several features
    for i in (0, 1):
        assert rows[i] == {**reference[i], "added": None}
    assert rows[10] == {"id": [10], "added": [0.25], **dict.fromkeys(removed)}
    assert rows[11] == {"id": [11], "added": None, **dict.fromkeys(removed)}

    # A column declared required (not nullable) cannot be missing from a file.
    required = pa.schema([pa.field("id", pa.int64()), pa.field("must", pa.int64(), nullable=False)])
    write(tmp_path / "strict" / "a.parquet", pa.table({"id": [1], "must": [1]}, schema=required))
    write(tmp_path / "strict" / "b.parquet", pa.table({"id": [2]}))
    with pytest.raises(InputError) as error:
        open_dataset(str(tmp_path / "strict"))
    message = str(error.value)
    assert "'must'" in message and "a.parquet" in message and "b.parquet" in message, message


# --- unsupported types ------------------------------------------------------------------------


class _Money(pa.ExtensionType):
    """An extension type (cents, over int64) registered by this test only."""

    def __init__(self):
        super().__init__(pa.int64(), "tfx_tabular_test.money")

    def __arrow_ext_serialize__(self):
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


@pytest.fixture
def money_type():
    pa.register_extension_type(_Money())
    try:
        yield _Money()
    finally:
        pa.unregister_extension_type("tfx_tabular_test.money")


def _unsupported(kind: str, money: pa.DataType) -> pa.Array:
    cents = pa.ExtensionArray.from_storage(money, pa.array([150, 299]))
    return {
        "map_in_struct": pa.array(
            [{"m": [("k", 1)]}, {"m": []}], pa.struct([("m", pa.map_(pa.string(), pa.int64()))])
        ),
        "list_of_map": pa.array([[[("k", 1)]], []], pa.list_(pa.map_(pa.string(), pa.int64()))),
        "extension": cents,
        "extension_in_list": pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), cents),
    }[kind]


@pytest.mark.parametrize("kind", ["map_in_struct", "list_of_map", "extension", "extension_in_list"])
def test_unsupported_types_are_input_errors_naming_file_and_column(tmp_path, money_type, kind):
    write(tmp_path / "in" / "fine.parquet", pa.table({"id": [0, 1]}))
    write(
        tmp_path / "in" / "odd.parquet",
        pa.table({"id": [2, 3], "price": _unsupported(kind, money_type)}),
    )
    with pytest.raises(InputError) as error:
        open_dataset(str(tmp_path / "in"))
    assert "odd.parquet" in str(error.value) and "'price'" in str(error.value), str(error.value)
    # Excluding the column proceeds, losing nothing else.
    rows = convert_all(tmp_path / "in", tmp_path / "out", exclude_columns=["price"])
    assert rows == {i: {"id": [i]} for i in range(4)}


def test_union_columns_cannot_come_from_parquet(tmp_path):
    union = pa.UnionArray.from_sparse(
        pa.array([0, 1], pa.int8()), [pa.array([1, 2]), pa.array(["a", "b"])]
    )
    with pytest.raises(pa.ArrowNotImplementedError):
        pq.write_table(pa.table({"u": union}), str(tmp_path / "u.parquet"))


# --- partitions -------------------------------------------------------------------------------


def test_partition_key_that_is_also_a_column_must_agree_with_its_folder(tmp_path):
    # Polars and DuckDB (WRITE_PARTITION_COLUMNS) keep the partition column in the files too.
    write(tmp_path / "in" / "day=1" / "a.parquet", pa.table({"id": [1], "day": [1]}))
    write(tmp_path / "in" / "day=2" / "b.parquet", pa.table({"id": [2], "day": [3]}))  # disagrees
    dataset = open_dataset(str(tmp_path / "in"))
    assert dataset.schema.names == ["id", "day"] and dataset.partition_columns == ("day",)
    first, second = dataset.files
    assert next(read_batches(dataset, first, [0], 10)).column(1).to_pylist() == [1]
    with pytest.raises(InputError) as error:
        next(read_batches(dataset, second, [0], 10))
    message = str(error.value)
    assert "b.parquet" in message and "'day'" in message and "day='2'" in message, message
    assert open_dataset(str(tmp_path / "in"), exclude_columns=["day"]).schema.names == ["id"]


PARTITION_LAYOUTS = {
    # folder values → (expected feature values, in folder order)
    "int_and_text": (["1", "abc", "20"], [[b"1"], [b"abc"], [b"20"]]),
    "leading_zeros": (["007", "12"], [[b"007"], [b"12"]]),  # an int64 would write 7
    "plus_and_minus_zero": (["+5", "-0", "3"], [[b"+5"], [b"-0"], [b"3"]]),
    "beyond_int64": (["99999999999999999999", "1"], [[b"99999999999999999999"], [b"1"]]),
    "integers": (["-3", "0", "12"], [[-3], [0], [12]]),
}


@pytest.mark.parametrize("layout", PARTITION_LAYOUTS)
def test_partition_values_keep_their_text(tmp_path, layout):
    """int64 only when every value is an integer written as an int64 writes it back; otherwise
    bytes of the folder's text, so no value changes."""
    values, expected = PARTITION_LAYOUTS[layout]
    for i, value in enumerate(values):
        write(tmp_path / "in" / f"k={value}" / "part.parquet", pa.table({"id": [i]}))
    rows = convert_all(tmp_path / "in", tmp_path / "out")
    assert [rows[i]["k"] for i in range(len(values))] == expected


def test_partition_types_override_and_refuse_what_does_not_fit(tmp_path):
    for i, value in enumerate(["1", "abc"]):
        write(tmp_path / "in" / f"k={value}" / "part.parquet", pa.table({"id": [i]}))
    with pytest.raises(InputError, match="'abc'"):
        open_dataset(str(tmp_path / "in"), partition_types={"k": "int"})
    assert (
        open_dataset(str(tmp_path / "in"), partition_types={"k": "string"}).schema.field("k").type
        == pa.string()
    )


def _tree(root) -> set:
    return {
        os.path.relpath(os.path.join(d, n), root)
        for d, dirs, files in os.walk(root)
        for n in dirs + files
    }


def test_partition_path_tricks_are_plain_values(tmp_path):
    """Folder names are hive-decoded into values and never used as paths: `k=..` is the value
    "..", `k=a%2Fb` the value "a/b" (Hive escapes "/" so), and splits are named by the user."""
    folders = {
        "k=..": "..",
        "k=a%2Fb": "a/b",
        "k=a%20b": "a b",
        "k=%2E%2E%2F%2E%2E": "../..",
        "k=a+b": "a+b",
        "k=": "",
        "k=%25": "%",
        "k=caf%C3%A9": "café",
        "k=%2Fetc%2Fpasswd": "/etc/passwd",
    }
    for i, folder in enumerate(folders):
        write(tmp_path / "in" / folder / "part.parquet", pa.table({"id": [i]}))
    before = _tree(tmp_path)
    dataset = open_dataset(str(tmp_path / "in"))
    assert dataset.schema.field("k").type == pa.string()
    splits = splits_by_partition(dataset, "k", values={"eval": ["..", "a/b"]})
    run(dataset, tmp_path / "out", splits, OutputOptions(num_shards=2))
    assert set(os.listdir(tmp_path / "out")) == {
        "Split-train",
        "Split-eval",
        "source_schema.arrow",
        "_tfx_tabular_published.json",
    }
    assert {p for p in _tree(tmp_path) - before if not p.startswith("out")} == set()
    expected = {i: value.encode() for i, value in enumerate(folders.values())}
    held_out = {b"..", b"a/b"}
    for split, wanted in (("eval", held_out), ("train", set(expected.values()) - held_out)):
        rows = [features(r) for r in read_split(str(tmp_path / "out"), split)]
        assert {row["k"][0] for row in rows} == wanted
        assert all(row["k"] == [expected[row["id"][0]]] for row in rows)


def test_undecodable_or_ambiguous_paths_are_input_errors(tmp_path):
    # Invalid percent-encoded UTF-8 was silently decoded to U+FFFD.
    write(tmp_path / "bad" / "k=%FF" / "part.parquet", pa.table({"id": [1]}))
    with pytest.raises(InputError, match="k=%FF"):
        open_dataset(str(tmp_path / "bad"))
    # The same key twice along one path.
    write(tmp_path / "twice" / "k=1" / "k=2" / "part.parquet", pa.table({"id": [1]}))
    with pytest.raises(InputError, match="part.parquet"):
        open_dataset(str(tmp_path / "twice"))
    # A symbolic link back up the tree: listing follows it, so every file was read again and again.
    write(tmp_path / "loop" / "part.parquet", pa.table({"id": [1]}))
    os.symlink(".", tmp_path / "loop" / "again")
    with pytest.raises(InputError, match="same file"):
        open_dataset(str(tmp_path / "loop"))


# --- values -----------------------------------------------------------------------------------

NOT_UTF8 = [b"\xff\xfe", b"caf\xe9", b"", b"\x00", b"\xc3\x28", None]


def _unvalidated_strings(values: list) -> pa.Array:
    """A string array holding invalid UTF-8 (as some writers produce; pyarrow does not check)."""
    data = [v or b"" for v in values]
    offsets = np.cumsum([0] + [len(v) for v in data]).astype(np.int32)
    validity = pa.array([v is not None for v in values]).buffers()[1]
    return pa.Array.from_buffers(
        pa.string(),
        len(values),
        [validity, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(data))],
    )


def test_non_utf8_bytes_round_trip(tmp_path):
    n = len(NOT_UTF8)
    write(
        tmp_path / "in" / "part.parquet",
        pa.table(
            {
                "id": range(n),
                "bin": pa.array(NOT_UTF8, pa.binary()),
                "str": _unvalidated_strings(NOT_UTF8),
                "bins": pa.array(
                    [[v] if v is not None else [] for v in NOT_UTF8], pa.list_(pa.binary())
                ),
                "dict": pa.array(NOT_UTF8, pa.binary()).dictionary_encode(),
            }
        ),
    )
    rows = convert_all(tmp_path / "in", tmp_path / "out")
    for i, value in enumerate(NOT_UTF8):
        scalar = None if value is None else [value]
        assert rows[i] == {
            "id": [i],
            "bin": scalar,
            "str": scalar,
            "dict": scalar,
            "bins": [] if value is None else [value],
        }


def test_nan_and_infinities_round_trip(tmp_path):
    nan, inf = float("nan"), float("inf")
    f64 = [nan, inf, -inf, -0.0, 1e300, -1e300, 5e-324, None]
    write(
        tmp_path / "in" / "part.parquet",
        pa.table(
            {
                "id": range(len(f64)),
                "f64": pa.array(f64, pa.float64()),
                "f32": pa.array(f64[:4] + [3.5, -3.5, 0.0, None], pa.float32()),
                "floats": pa.array(
                    [[nan, inf], [], [-inf, -0.0], None, [1e300], [], [nan], [0.0]],
                    pa.list_(pa.float64()),
                ),
            }
        ),
    )
    out = tmp_path / "out"
    rows = convert_all(tmp_path / "in", out)
    # float64 keeps float32's precision and range: 1e300 → inf, 5e-324 → 0.0 (documented).
    for i, value in enumerate(f64):
        if value is None:
            assert rows[i]["f64"] is None
        else:
            assert same_floats(rows[i]["f64"], [f32(value)])
    assert same_floats(rows[0]["f32"], [nan])
    assert rows[1]["f32"] == [inf] and rows[2]["f32"] == [-inf]
    assert same_floats(rows[3]["f32"], [-0.0]) and rows[7]["f32"] is None
    assert same_floats(rows[0]["floats"], [nan, inf])
    assert same_floats(rows[2]["floats"], [-inf, -0.0])
    assert rows[3]["floats"] is None and rows[4]["floats"] == [inf] and rows[1]["floats"] == []

    # The footer-inferred schema parses them back, and its domain admits every value.
    schema = infer_schema(read_source_metadata(str(out)))
    domain = {f.name: f.float_domain for f in schema.feature}["f64"]
    assert (domain.min, domain.max) == (-inf, inf)
    records = sorted(read_split(str(out), "all"), key=lambda r: features(r)["id"][0])
    parsed = tf.io.parse_example(tf.stack(records), feature_spec(schema))
    got = parsed["f64"].to_list()
    assert [len(g) for g in got] == [1] * 7 + [0]  # a null is an empty row, never a made-up 0
    assert same_floats([g[0] for g in got[:7]], [f32(v) for v in f64[:7]])


NON_FINITE = {
    "f64": [float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 1.0, None],
    "floats": [[float("nan"), float("nan")], [], [float("inf")], None, [-1e300], [0.0], [1.0]],
    "fine": [1.0, 2.0, None, 4.0, 5.0, 6.0, 7.0],
}


@pytest.mark.parametrize("with_statistics", [False, True])
def test_non_finite_values_are_counted_as_written_and_warned_about(
    tmp_path, caplog, with_statistics
):
    """Per float feature, its NaN, +inf and -inf as the Examples hold them (float64 beyond float32's
    range is ±inf there), whether or not the example statistics are computed: a warning each."""
    write(tmp_path / "in" / "part.parquet", pa.table({"id": range(7), **NON_FINITE}))
    dataset = open_dataset(str(tmp_path / "in"))
    statistics = str(tmp_path / "statistics") if with_statistics else None
    with caplog.at_level("WARNING", logger="tfx_tabular.conversion.convert"):
        result = conversion.convert(
            dataset,
            str(tmp_path / "out"),
            ONE_SPLIT,
            OutputOptions(num_shards=2),
            beam_pipeline_args=IN_MEMORY_BEAM,
            example_statistics_dir=statistics,
        )
    counted = {c.feature: (c.nan, c.pos_inf, c.neg_inf) for c in result.non_finite}
    assert counted == {"f64": (1, 2, 2), "floats": (2, 1, 1)}
    assert [r.getMessage() for r in caplog.records] == result.warnings
    assert result.warnings[0] == (
        "column 'f64' holds non-finite values (2 +inf, 2 -inf, 1 NaN in 7 rows), kept in the "
        "Examples as written; see docs/examplegen.md#non-finite-values"
    )


def test_time_of_day_and_duration_columns_round_trip(tmp_path):
    """Found while testing drift: every Parquet file with a time32/time64 column failed with a bare
    AttributeError (pyarrow 10's time types have no `.unit`)."""
    write(
        tmp_path / "in" / "part.parquet",
        pa.table(
            {
                "id": range(3),
                "t_s": pa.array(
                    [0, 59, None], pa.time32("s")
                ),  # Parquet has no seconds: stored as ms
                "t_ms": pa.array([0, 86_399_999, None], pa.time32("ms")),
                "t_ns": pa.array([1, None, 86_399_999_999_999], pa.time64("ns")),
                "d_us": pa.array([-5, 0, None], pa.duration("us")),
                "t_list": pa.array([[1, 2], [], None], pa.list_(pa.time64("us"))),
            }
        ),
        version="2.6",
    )
    out = tmp_path / "out"
    rows = convert_all(tmp_path / "in", out)
    assert [rows[i]["t_s"] for i in range(3)] == [[0], [59_000], None]
    assert [rows[i]["t_ms"] for i in range(3)] == [[0], [86_399_999], None]
    assert [rows[i]["t_ns"] for i in range(3)] == [[1], None, [86_399_999_999_999]]
    assert [rows[i]["d_us"] for i in range(3)] == [[-5], [0], None]
    assert [rows[i]["t_list"] for i in range(3)] == [[1, 2], [], None]
    schema = infer_schema(read_source_metadata(str(out)))
    tags = {f.name: list(f.annotation.tag) for f in schema.feature}
    assert tags["t_s"] == tags["t_ms"] == ["tfx_tabular:unit=ms"]
    assert tags["t_ns"] == ["tfx_tabular:unit=ns"] and tags["d_us"] == ["tfx_tabular:unit=us"]
    assert tags["t_list"] == ["tfx_tabular:unit=us"]


def test_uint64_above_int64_max_fails_naming_file_and_column(tmp_path):
    write(tmp_path / "in" / "small.parquet", pa.table({"id": [1], "u": pa.array([5], pa.uint64())}))
    write(
        tmp_path / "in" / "big.parquet",
        pa.table({"id": [2, 3], "u": pa.array([INT64_MAX, INT64_MAX + 2], pa.uint64())}),
    )
    dataset = open_dataset(str(tmp_path / "in"))
    assert_fails_unpublished(dataset, tmp_path / "out", "big.parquet", "'u'", str(INT64_MAX + 2))
    # Schema inference from the same footers: a SchemaError, not protobuf's bare ValueError.
    with pytest.raises(SchemaError, match="'u'"):
        infer_schema(SourceMetadata.of(dataset))
    # At the int64 maximum it converts exactly.
    os.remove(tmp_path / "in" / "big.parquet")
    write(
        tmp_path / "in" / "max.parquet",
        pa.table({"id": [2], "u": pa.array([INT64_MAX], pa.uint64())}),
    )
    rows = convert_all(tmp_path / "in", tmp_path / "out2")
    assert rows[2]["u"] == [INT64_MAX] and rows[1]["u"] == [5]


# Every type of the README's table, for all-null columns (decimal128 and timestamps included).
ALL_NULL_TYPES = {
    "bool": pa.bool_(),
    "i8": pa.int8(),
    "u64": pa.uint64(),
    "f32": pa.float32(),
    "f64": pa.float64(),
    "dec": pa.decimal128(7, 2),
    "d32": pa.date32(),
    "d64": pa.date64(),
    "ts": pa.timestamp("us", tz="UTC"),
    "t64": pa.time64("us"),
    "dur": pa.duration("ms"),
    "str": pa.string(),
    "lstr": pa.large_string(),
    "bin": pa.binary(),
    "fsb": pa.binary(4),
    "dict": pa.dictionary(pa.int32(), pa.string()),
    "null": pa.null(),
    "list": pa.list_(pa.int64()),
    "large_list": pa.large_list(pa.string()),
    "nested": pa.list_(pa.list_(pa.list_(pa.int64()))),
    "st": pa.struct([("x", pa.int64()), ("y", pa.string())]),
    "list_of_struct": pa.list_(pa.struct([("z", pa.float64())])),
}
FLAT = {name for name, t in ALL_NULL_TYPES.items() if not pa.types.is_nested(t)}


def test_all_null_columns_of_every_type(tmp_path):
    n = 5
    write(
        tmp_path / "in" / "part.parquet",
        pa.table({"id": range(n), **{name: pa.nulls(n, t) for name, t in ALL_NULL_TYPES.items()}}),
    )
    out = tmp_path / "out"
    rows = convert_all(tmp_path / "in", out)
    for i in range(n):
        assert rows[i]["id"] == [i]
        assert {k: v for k, v in rows[i].items() if k != "id"} == dict.fromkeys(
            set(rows[i]) - {"id"}
        ), rows[i]  # no kind: absent, never 0 / "" / []
    assert {"st.x", "st.y", "list_of_struct.z", "nested.row_lengths_2"} <= set(rows[0])

    schema = infer_schema(read_source_metadata(str(out)))
    by_name = {f.name: f for f in schema.feature}
    # The footers prove these never have a value: TFDV infers min_count 0 for such a feature, and
    # with min_count 1 ExampleValidator reports "Column dropped" on the very data the schema came
    # from. (Nested columns have no per-row null counts in the footers: min_count stays 1.)
    for name in FLAT:
        assert by_name[name].presence.min_count == 0, name
        assert not by_name[name].HasField("shape"), name
    assert by_name["id"].presence.min_count == 1
    records = read_split(str(out), "all")
    parsed = tf.io.parse_example(tf.stack(records), feature_spec(schema))
    for name, tensor in parsed.items():
        if name != "id":
            assert tensor.to_list() == [[]] * n, name


@pytest.mark.parametrize(
    "rows", [[None, None], [[1.0, 2.0, 3.0], None]], ids=["all_null", "one_null_row"]
)
def test_fixed_size_list_with_null_rows_from_parquet_fails_naming_file_and_column(tmp_path, rows):
    """Pyarrow 10 writes a fixed_size_list column with null rows to Parquet but cannot read it
    back ("Expected all lists to be of size=3"): a ColumnError naming the file and the column
    and saying why, nothing published. (The encoder itself handles them:
    test_encoding::test_all_null_list_columns_encode.)"""
    write(tmp_path / "in" / "fine.parquet", pa.table({"id": [0, 1]}))
    write(
        tmp_path / "in" / "vectors.parquet",
        pa.table({"id": [2, 3], "v": pa.array(rows, pa.list_(pa.float32(), 3))}),
    )
    dataset = open_dataset(str(tmp_path / "in"))
    message = assert_fails_unpublished(dataset, tmp_path / "out", "vectors.parquet", "'v'")
    assert "fixed_size_list column with null rows" in message
    with pytest.raises(ColumnError):
        run(dataset, tmp_path / "out2", ONE_SPLIT, OutputOptions(num_shards=2))


@pytest.mark.slow  # ~20 s: in `make test`, not the inner loop
def test_very_wide_rows_convert_losslessly(tmp_path):
    """10,000 columns, 200 rows. Reading them was quadratic in the column count (~35 s a batch),
    and pickling the DoFn for Beam took ~7 s."""
    n, width = 200, 10_000
    ids = np.arange(n)
    arrays = {"id": pa.array(ids)}
    for c in range(1, width):
        kind = c % 4
        if kind == 0:
            arrays[f"c{c}"] = pa.array(ids * c)
        elif kind == 1:
            arrays[f"c{c}"] = pa.array(ids + c / 8, mask=ids % 5 == c % 5)
        elif kind == 2:
            arrays[f"c{c}"] = pa.array([f"{c}:{i}" for i in ids])
        else:
            arrays[f"c{c}"] = pa.array([[c, i] if i % 3 else [] for i in ids])
    write(tmp_path / "in" / "part.parquet", pa.table(arrays))
    out = tmp_path / "out"
    result = run(open_dataset(str(tmp_path / "in")), out, ONE_SPLIT)
    assert result.rows == {"all": n}
    examples = [
        example_pb2.Example.FromString(record).features.feature
        for record in read_split(str(out), "all")
    ]
    assert sorted(e["id"].int64_list.value[0] for e in examples) == list(range(n))
    for example in examples:
        i = example["id"].int64_list.value[0]
        assert len(example) == width
        # Every column of 5 rows, a sample of the columns of the others.
        for c in range(1, width, 1 if i % 40 == 0 else 97):
            kind, feature = c % 4, example[f"c{c}"]
            if kind == 0:
                assert feature.int64_list.value == [i * c]
            elif kind == 1:
                if i % 5 == c % 5:
                    assert feature.WhichOneof("kind") is None
                else:
                    assert feature.float_list.value == [f32(i + c / 8)]
            elif kind == 2:
                assert feature.bytes_list.value == [f"{c}:{i}".encode()]
            else:
                assert feature.WhichOneof("kind") == "int64_list"
                assert feature.int64_list.value == ([c, i] if i % 3 else [])


DEEP = pa.list_(pa.list_(pa.list_(pa.list_(pa.list_(pa.int64())))))
DEEP_ROWS = [
    [[[[[1, 2]], [[]]], []], [[[[3]]]]],
    None,
    [],
    [[[[[]]]]],
    [[], [[]], [[[]]], [[[[4, 5, 6]]]]],
    [[[[[0]]], [[[-1], []]]]],
]


def _levels(row, depth: int = 5):
    """(values, row_lengths_1..depth-1) of a nested list, computed independently of the encoder."""
    lengths, level = [], row
    for _ in range(depth - 1):
        lengths.append([len(x) for x in level])
        level = [y for x in level for y in x]
    return level, lengths


def test_five_level_lists_with_nulls_and_empties(tmp_path):
    write(
        tmp_path / "in" / "part.parquet",
        pa.table({"id": range(len(DEEP_ROWS)), "deep": pa.array(DEEP_ROWS, DEEP)}),
    )
    out = tmp_path / "out"
    rows = convert_all(tmp_path / "in", out)
    for i, source in enumerate(DEEP_ROWS):
        names = ["deep"] + [f"deep.row_lengths_{k}" for k in range(1, 5)]
        if source is None:
            assert [rows[i][name] for name in names] == [None] * 5
            continue
        values, lengths = _levels(source)
        assert [rows[i][name] for name in names] == [values] + lengths, i

    schema = infer_schema(read_source_metadata(str(out)))
    ragged = schema.tensor_representation_group[""].tensor_representation["deep"].ragged_tensor
    assert [p.row_length for p in ragged.partition] == [
        f"deep.row_lengths_{k}" for k in range(1, 5)
    ]
    records = sorted(read_split(str(out), "all"), key=lambda r: features(r)["id"][0])
    parsed = tf.io.parse_example(tf.stack(records), feature_spec(schema))["deep"]
    assert parsed.ragged_rank == 5
    assert parsed.to_list() == [[] if r is None else r for r in DEEP_ROWS]


def test_a_null_inside_a_deep_list_fails_naming_file_and_column(tmp_path):
    write(
        tmp_path / "in" / "good.parquet",
        pa.table({"id": [0], "deep": pa.array([[[[[[1]]]]]], DEEP)}),
    )
    write(
        tmp_path / "in" / "holes.parquet",
        pa.table({"id": [1], "deep": pa.array([[[[[[1]]], None]]], DEEP)}),
    )
    dataset = open_dataset(str(tmp_path / "in"))
    assert_fails_unpublished(dataset, tmp_path / "out", "holes.parquet", "'deep'")


# --- schema inference and overlays ------------------------------------------------------------


def test_label_missing_from_some_files_is_not_treated_as_present(tmp_path):
    base = tmp_path / "in"
    write(base / "day=1" / "a.parquet", pa.table({"id": [0, 1, 2], "label": [0, 1, 1]}))
    write(base / "day=2" / "b.parquet", pa.table({"id": [3, 4]}))  # no label column at all
    out = tmp_path / "out"
    convert_all(base, out)
    for summary in (
        read_source_metadata(str(out)),
        SourceMetadata.of(open_dataset(str(base))),
    ):
        schema = infer_schema(summary, label="label")
        label = {f.name: f for f in schema.feature}["label"]
        # Not shape [1] (a FixedLenFeature would invent 0 for rows 3 and 4), not always present.
        assert not label.HasField("shape") and label.presence.min_fraction < 1
        assert "tfx_tabular:label" in label.annotation.tag
        spec = feature_spec(schema)
        assert isinstance(spec["label"], tf.io.RaggedFeature)
    records = sorted(read_split(str(out), "all"), key=lambda r: features(r)["id"][0])
    parsed = tf.io.parse_example(tf.stack(records), spec)
    assert parsed["label"].to_list() == [[0], [1], [1], [], []]

    # A label with no value in any row is no label.
    write(
        tmp_path / "nulls" / "a.parquet", pa.table({"id": [0, 1], "label": pa.nulls(2, pa.int64())})
    )
    with pytest.raises(SchemaError, match="'label'"):
        infer_schema(SourceMetadata.of(open_dataset(str(tmp_path / "nulls"))), label="label")
    # A label declared required in one file and missing from another.
    required = pa.schema(
        [pa.field("id", pa.int64()), pa.field("label", pa.int64(), nullable=False)]
    )
    write(tmp_path / "strict" / "a.parquet", pa.table({"id": [0], "label": [1]}, schema=required))
    write(tmp_path / "strict" / "b.parquet", pa.table({"id": [1]}))
    with pytest.raises(InputError, match="'label'"):
        open_dataset(str(tmp_path / "strict"))


def test_overlay_tensor_representations_of_unknown_features_fail(tmp_path):
    write(
        tmp_path / "in" / "part.parquet",
        pa.table({"id": [0], "nested": pa.array([[[1]]], pa.list_(pa.list_(pa.int64())))}),
    )
    inferred = infer_schema(SourceMetadata.of(open_dataset(str(tmp_path / "in"))))
    dense = schema_pb2.Schema()
    reps = dense.tensor_representation_group[""].tensor_representation
    reps["x"].dense_tensor.column_name = "idd"
    with pytest.raises(SchemaError, match="idd"):
        overlay(inferred, dense)
    ragged = schema_pb2.Schema()
    rep = ragged.tensor_representation_group["g"].tensor_representation["r"].ragged_tensor
    rep.feature_path.step.append("nested")
    rep.partition.add(row_length="nested.row_lengths_9")
    with pytest.raises(SchemaError, match="nested.row_lengths_9"):
        overlay(inferred, ragged)
    # Representations of features the data has are added.
    good = schema_pb2.Schema()
    good.tensor_representation_group["g"].tensor_representation[
        "id"
    ].dense_tensor.column_name = "id"
    assert (
        overlay(inferred, good)
        .tensor_representation_group["g"]
        .tensor_representation["id"]
        .dense_tensor.column_name
        == "id"
    )


# --- names Parquet allows but tf.Example cannot hold twice --------------------------------------


def test_duplicate_top_level_columns_fail_naming_file_and_column(tmp_path):
    """Arrow hands out either of two same-named columns: they converted silently with the wrong
    values (`a` held the label's). Now an InputError, also as the CLI's one-line error."""
    from tfx_tabular import cli

    table = pa.Table.from_arrays(
        [pa.array([1, 2]), pa.array([3, 4]), pa.array([0, 1])], names=["a", "a", "label"]
    )
    write(tmp_path / "in" / "part.parquet", table)
    with pytest.raises(InputError, match=r"part\.parquet: column 'a' appears 2 times"):
        open_dataset(str(tmp_path / "in"))
    assert cli.main(["convert", str(tmp_path / "in"), str(tmp_path / "out")]) != 0
    assert_nothing_published(tmp_path / "out")


def test_duplicate_struct_fields_are_an_input_error_naming_file_and_column(tmp_path):
    struct = pa.StructArray.from_arrays([pa.array([1, 2]), pa.array([3, 4])], names=["x", "x"])
    write(tmp_path / "in" / "part.parquet", pa.Table.from_arrays([struct], names=["st"]))
    with pytest.raises(
        InputError,
        match=r"part\.parquet: column 'st' holds two struct fields "
        r"that both make feature 'st\.x'",
    ):
        open_dataset(str(tmp_path / "in"))


# --- schema inference honours exclusions and samples the whole source ---------------------------


def test_schema_of_examples_honours_exclude_columns(tmp_path):
    from tfx_tabular.schemas.source import schema_of

    write(
        tmp_path / "in" / "part.parquet",
        pa.table({"id": [1, 2, 3], "x": [0.5, 1.5, None], "label": [0, 1, 0]}),
    )
    run(open_dataset(str(tmp_path / "in")), str(tmp_path / "out"), ONE_SPLIT, OutputOptions())
    inferred = schema_of(str(tmp_path / "out"), exclude_columns=["x"])
    assert inferred.from_examples
    assert [f.name for f in inferred.schema.feature] == ["id", "label"]
    with pytest.raises(InputError, match="nope"):
        schema_of(str(tmp_path / "out"), exclude_columns=["nope"])


def test_statistics_sample_spans_every_row_group_of_every_file(tmp_path):
    from tfx_tabular.schemas.sample_statistics import sample_parquet

    for i in range(2):  # 2 files × 4 row groups of 25 rows; ids 0..199
        write(
            tmp_path / "in" / f"part-{i}.parquet",
            pa.table({"id": np.arange(i * 100, i * 100 + 100, dtype=np.int64)}),
            row_group_size=25,
        )
    sample = str(tmp_path / "sample.tfrecord")
    assert sample_parquet(open_dataset(str(tmp_path / "in")), 16, sample) == 16
    ids = sorted(features(r)["id"][0] for r in tf.data.TFRecordDataset(sample).as_numpy_iterator())
    # Two rows from the start of each of the 8 row groups, not the first 8 rows of each file.
    assert ids == sorted(g * 25 + k for g in range(8) for k in range(2))

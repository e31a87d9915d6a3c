"""tfx_tabular.conversion.columns: a source's names from its footers, and the check of the names a
command line gives, with a "did you mean" for near misses."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import convert_to_examples

from tfx_tabular.conversion import columns
from tfx_tabular.conversion.columns import UnknownColumnError
from tfx_tabular.source.errors import InputError


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    """Two days of hive folders; the second file adds a column and a struct."""
    root = tmp_path_factory.mktemp("columns") / "data"
    first = pa.table({"Label": [0, 1], "trip_miles": [1.5, 2.0]})
    second = first.append_column("pickup", pa.array([{"lat": 1.0, "lon": 2.0}] * 2))
    for day, table in (("2024-01-01", first), ("2024-01-02", second)):
        (root / f"day={day}").mkdir(parents=True)
        pq.write_table(table, root / f"day={day}" / "part-0.parquet")
    (root / "_SUCCESS").write_text("")  # ignored, as the conversion ignores it
    return str(root)


def test_names_come_from_every_footer_and_the_hive_folders(source):
    names = columns.source_names(source)
    assert names.columns == ("Label", "trip_miles", "pickup", "day")
    assert names.features == ("pickup.lat", "pickup.lon")
    assert names.partition_keys == ("day",)


def test_names_of_an_examples_folder_are_its_sources(source, tmp_path):
    convert_to_examples(source, str(tmp_path / "examples"))
    names = columns.source_names(str(tmp_path / "examples"))
    assert names.columns == ("Label", "trip_miles", "pickup", "day")
    assert names.partition_keys == ("day",)


@pytest.mark.parametrize(
    "flag, name, message",
    [
        ("--label", "label", "--label 'label' is not a column of {}; did you mean 'Label'?"),
        (
            "--exclude-columns",
            "trip_mile",
            "--exclude-columns 'trip_mile' is not a column of {}; did you mean ",
        ),
        ("--label", "fare", "--label 'fare' is not a column of {}"),
    ],
)
def test_a_name_that_is_no_column_fails_naming_the_flag_and_the_closest(
    source, flag, name, message
):
    names = columns.source_names(source)
    with pytest.raises(UnknownColumnError) as error:
        columns.check_names(source, names, {flag: [name]})
    assert str(error.value).startswith(message.format(source))
    assert ("did you mean" in str(error.value)) == (name != "fare")
    assert error.value.hint == f"{flag} takes a column of {source}: Label, trip_miles, pickup, day"


def test_columns_struct_features_and_partition_keys_pass(source):
    names = columns.source_names(source)
    given = {"--label": ["pickup.lat"], "--exclude-columns": ["trip_miles", "day"]}
    columns.check_names(source, names, given, {"--split-by-partition": ["day"]})


def test_a_partition_flag_takes_partition_keys_only(source, tmp_path):
    names = columns.source_names(source)
    with pytest.raises(UnknownColumnError, match="'Label' is not a partition key of ") as error:
        columns.check_names(source, names, {}, {"--split-by-partition": ["Label"]})
    assert error.value.hint == f"--split-by-partition takes a partition key of {source}: day"
    flat = tmp_path / "flat"
    flat.mkdir()
    pq.write_table(pa.table({"x": [1]}), flat / "part-0.parquet")
    with pytest.raises(UnknownColumnError) as error:
        columns.check_names(str(flat), columns.source_names(str(flat)), {}, {"--eval": ["day"]})
    assert (
        error.value.hint
        == f"{flat} has no partition keys (hive folders KEY=VALUE); leave --eval out"
    )


def test_the_listing_in_a_hint_stops_at_a_dozen(tmp_path):
    pq.write_table(pa.table({f"c{i}": [i] for i in range(30)}), tmp_path / "wide.parquet")
    with pytest.raises(UnknownColumnError) as error:
        columns.check_names(str(tmp_path), columns.source_names(str(tmp_path)), {"--label": ["y"]})
    assert error.value.hint.endswith("c10, c11 and 18 more")


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    (tmp_path / "notes.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="notes.parquet: not a readable Parquet file"):
        columns.source_names(str(tmp_path))

"""Columnar batch records (`tfx_tabular.coders.columnar`, read by `tfx_tabular.training.columnar`)
give exactly the tensors the per-row tf.Examples parse to, for every kind of the type mapping."""

from __future__ import annotations

import datetime
import decimal
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfx_tabular.coders import columnar, encoding, flatten  # noqa: E402
from tfx_tabular.coders.pools import PooledColumns  # noqa: E402
from tfx_tabular.schemas.parsing import feature_spec  # noqa: E402
from tfx_tabular.schemas.source import schema_of  # noqa: E402
from tfx_tabular.source.mapping import features_of  # noqa: E402
from tfx_tabular.training import columnar as reader  # noqa: E402

ROWS = 53


def _table() -> pa.Table:
    rng = np.random.default_rng(7)
    n = ROWS
    null = rng.random(n) < 0.2
    return pa.table(
        {
            "key": pa.array(np.arange(n, dtype=np.int64)),
            "label": pa.array(rng.integers(0, 2, n)),
            "count with space": pa.array(rng.integers(0, 9, n), mask=null),
            "price": pa.array(rng.random(n), mask=np.roll(null, 1)),
            "name/odd": pa.array(
                [None if m else f"[v{i}]\x00é".encode() for i, m in enumerate(null)], pa.binary()
            ),
            "city": pa.array(
                ["ab", "cd", None, "ab"] * (n // 4) + ["x"] * (n % 4)
            ).dictionary_encode(),
            "empty": pa.nulls(n),
            "when": pa.array(
                [datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i) for i in range(n)],
                pa.timestamp("us"),
            ),
            "amount": pa.array([decimal.Decimal(f"{i}.25") for i in range(n)], pa.decimal128(9, 2)),
            "history": pa.array(
                [None if i % 7 == 0 else list(range(i % 4)) for i in range(n)], pa.list_(pa.int64())
            ),
            "nested": pa.array(
                [[[i], [], [i, i + 1]] if i % 3 else ([] if i % 2 else None) for i in range(n)],
                pa.list_(pa.list_(pa.int64())),
            ),
            "point": pa.array(
                [{"x": float(i), "tags": ["a"] * (i % 3)} for i in range(n)],
                pa.struct([("x", pa.float64()), ("tags", pa.list_(pa.string()))]),
            ),
        }
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    table = _table()
    folder = tmp_path_factory.mktemp("columnar")
    pq.write_table(table, str(folder / "part.parquet"))
    schema = schema_of(str(folder), label="label").schema
    batch = table.combine_chunks().to_batches()[0]
    features = features_of(batch.schema)
    per_row = tf.io.parse_example(encoding.encode(batch, features).records(), feature_spec(schema))
    return batch, features, schema, per_row


def _records(
    batch, features, batch_rows: int, pieces: int, slice_rows: int = columnar.SLICE_ROWS
) -> tuple[list, columnar.ColumnarLayout]:
    """Columnar records of `batch`, added in `pieces` row selections as a conversion adds a
    shard's read batches (split by rows chosen, not slices)."""
    order = flatten.written_order(features)
    buffer = columnar.RecordBuffer(order, batch_rows, slice_rows)
    records = []
    for rows in np.array_split(np.arange(batch.num_rows), pieces):
        pooled = PooledColumns(flatten.feature_columns(batch, features))
        records.extend(buffer.add(pooled, rows))
    records.extend(buffer.flush())
    layout = columnar.layout_of(order, batch_rows, {"train": batch.num_rows}, slice_rows)
    return [r.tobytes()[12:-4] for r in records], layout


def _read(records, layout, spec, batch_size: int, shuffle: bool) -> dict:
    parser = reader.SliceParser(layout, spec)
    dataset = reader.batches(
        tf.data.Dataset.from_tensor_slices(records), parser, batch_size, shuffle, 1, not shuffle
    )
    parts: dict = {}
    for batch in dataset:
        for name, tensor in batch.items():
            parts.setdefault(name, []).append(tensor)
    return {
        name: tf.sparse.concat(0, ts, expand_nonconcat_dims=True)
        if isinstance(ts[0], tf.SparseTensor)
        else tf.concat(ts, 0)
        for name, ts in parts.items()
    }


def _as_lists(tensor):
    if isinstance(tensor, tf.SparseTensor):
        tensor = tf.RaggedTensor.from_sparse(tensor)
    return tensor.to_list() if isinstance(tensor, tf.RaggedTensor) else tensor.numpy().tolist()


def _keys(got: dict) -> list[int]:
    return [row[0] for row in _as_lists(got["key"])] if "key" in got else []


def _by_key(tensor, keys: list[int]) -> list:
    """A read tensor's rows, ordered by the `key` column's values `keys` (row r has key r)."""
    rows = _as_lists(tensor)
    return [row for _, row in sorted(zip(keys, rows, strict=True), key=lambda kv: kv[0])]


@pytest.mark.parametrize(
    "batch_rows, pieces, batch_size, slice_rows",
    [
        (8, 3, 8, 512),
        (16, 1, 32, 512),
        (100, 4, 50, 25),
        (1, 2, 3, 512),
        (10, 2, 6, 3),
        # Batches of more records' slices than one parse takes: parses of 2 records joined by
        # 17, of 12 records by 3.
        (1, 1, 34, 1),
        (2, 3, 36, 1),
    ],
)
def test_columnar_batches_read_as_the_per_row_records_parse(
    data, batch_rows, pieces, batch_size, slice_rows
):
    """Every row once (in another order than the per-row records), every kind as the per-row
    parse gives it."""
    batch, features, schema, per_row = data
    records, layout = _records(batch, features, batch_rows, pieces, slice_rows)
    assert len(records) == -(-ROWS // batch_rows)
    assert reader.readable_batches(layout, batch_size)
    got = _read(records, layout, feature_spec(schema), batch_size, shuffle=False)
    assert set(got) == set(per_row)
    keys = _keys(got)
    assert sorted(keys) == list(range(ROWS))
    for name, expected in per_row.items():
        assert type(got[name]) is type(expected), name
        assert got[name].dtype == expected.dtype, name
        assert _by_key(got[name], keys) == _as_lists(expected), name


def test_a_batch_size_that_is_not_a_multiple_of_the_slice_rows_is_not_read_columnar(data):
    batch, features, _, _ = data
    _, layout = _records(batch, features, 8, 1, slice_rows=4)
    assert reader.readable_batches(layout, 8) and not reader.readable_batches(layout, 6)


def test_sliced_batches_mix_records_and_hold_every_row_once_with_its_own_values(data):
    """Training: each batch is one slice of several records, parsed at once, shuffled."""
    batch, features, schema, per_row = data
    records, layout = _records(batch, features, 8, 1, slice_rows=2)
    assert layout.slices == 4
    parser = reader.SliceParser(layout, feature_spec(schema))
    dataset = reader.batches(tf.data.Dataset.from_tensor_slices(records), parser, 6, True, 1, False)
    expected = _as_lists(per_row["nested"])
    seen = []
    for got in dataset:
        keys = _keys(got)
        # A whole batch: two neighbouring rows from each of three records.
        assert len(keys) < 6 or len({k // 8 for k in keys}) == 3, keys
        assert _as_lists(got["nested"]) == [expected[k] for k in keys]
        seen += keys
    assert sorted(seen) == list(range(ROWS)) and seen != sorted(seen)


@pytest.mark.parametrize(
    "batch_records, per_parse", [(8, 8), (16, 16), (128, 16), (36, 12), (34, 2), (17, 1)]
)
def test_a_parse_takes_the_largest_share_of_a_batchs_records_up_to_parse_records(
    batch_records, per_parse
):
    assert reader.PARSE_RECORDS == 16
    assert reader._records_per_parse(batch_records) == per_parse


def test_a_batch_of_more_records_than_one_parse_takes_joins_several_shuffled_parses(data):
    """Training with batches of more than PARSE_RECORDS records' slices: each batch is whole
    parses of different groups of records, every row once, in batches of the size asked."""
    batch, features, schema, per_row = data
    records, layout = _records(batch, features, 2, 1, slice_rows=1)
    batch_size = 2 * reader.PARSE_RECORDS + 2  # parses of 2 records, joined by PARSE_RECORDS + 1
    parser = reader.SliceParser(layout, feature_spec(schema))
    dataset = reader.batches(
        tf.data.Dataset.from_tensor_slices(records), parser, batch_size, True, 1, False
    )
    expected = _as_lists(per_row["nested"])
    seen, sizes = [], []
    for got in dataset:
        keys = _keys(got)
        assert _as_lists(got["nested"]) == [expected[k] for k in keys]
        seen += keys
        sizes.append(len(keys))
    assert sorted(seen) == list(range(ROWS)) and seen != sorted(seen)
    # 27 parses hold rows (of 2 rows, but the last record's single row), joined 17 at a time.
    # Which batch gets the single-row parse depends on which parse finishes first.
    assert len(sizes) == 2 and max(sizes) <= batch_size and sum(sizes) == ROWS


def test_var_len_features_come_as_sparse_tensors_as_parse_example_gives_them(data):
    batch, features, _, _ = data
    spec = {"history": tf.io.VarLenFeature(tf.int64), "city": tf.io.VarLenFeature(tf.string)}
    spec["key"] = tf.io.FixedLenFeature([1], tf.int64)
    records, layout = _records(batch, features, 8, 1)
    got = _read(records, layout, spec, 16, shuffle=False)
    per_row = tf.io.parse_example(encoding.encode(batch, features).records(), spec)
    keys = _keys(got)
    for name in ("history", "city"):
        assert isinstance(got[name], tf.SparseTensor)
        assert _by_key(got[name], keys) == _as_lists(per_row[name])


def test_null_scalars_take_the_specs_defaults_and_empty_rows_as_parse_example_gives_them(data):
    """A scalar's null read under another FixedLen default, a ragged or a VarLen entry: as the
    per-row parse gives it."""
    batch, features, _, _ = data
    spec = {
        "key": tf.io.FixedLenFeature([], tf.int64),
        "count with space": tf.io.FixedLenFeature([1], tf.int64, default_value=-1),
        "city as read": tf.io.RaggedFeature(tf.string, value_key="city"),
        "price": tf.io.FixedLenFeature([], tf.float32, default_value=0.5),
        "name/odd": tf.io.FixedLenFeature([], tf.string, default_value=b"none"),
        "when": tf.io.VarLenFeature(tf.int64),
    }
    records, layout = _records(batch, features, 8, 2)
    got = _read(records, layout, spec, 16, shuffle=False)
    per_row = tf.io.parse_example(encoding.encode(batch, features).records(), spec)
    keys = _keys({"key": got["key"][:, None]})
    assert [row[0] for row in _by_key(got["count with space"], keys)].count(-1) > 0
    for name, expected in per_row.items():
        assert type(got[name]) is type(expected), name
        assert _by_key(got[name], keys) == _as_lists(expected), name


def test_a_required_feature_missing_in_a_row_fails_as_parse_example_does(data):
    batch, features, _, _ = data
    spec = {"count with space": tf.io.FixedLenFeature([], tf.int64)}
    records, layout = _records(batch, features, 8, 1)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_example(encoding.encode(batch, features).records(), spec)
    with pytest.raises(tf.errors.InvalidArgumentError, match="required but missing"):
        _read(records, layout, spec, 16, shuffle=False)


def test_columnar_records_are_smaller_than_the_per_row_records(data):
    batch, features, _, _ = data
    records, _ = _records(batch, features, ROWS, 1)
    assert len(records[0]) < len(encoding.encode(batch, features).buffer)


def test_a_layout_of_another_version_is_refused_naming_the_file():
    layout = columnar.layout_of([], 8, {"train": 1})
    version = f'"layout_version": {columnar.LAYOUT_VERSION}'
    text = layout.to_json().replace(version, '"layout_version": 99')
    assert text != layout.to_json()
    with pytest.raises(ValueError, match="gs://b/columnar/columnar.json.*version 99"):
        columnar.ColumnarLayout.from_json(text, "gs://b/columnar/columnar.json")


def test_uniform_partitions_and_sparse_features_are_read_per_row():
    assert reader.readable({"a": tf.io.RaggedFeature(tf.int64)})
    assert not reader.readable(
        {"a": tf.io.RaggedFeature(tf.int64, partitions=[tf.io.RaggedFeature.UniformRowLength(2)])}
    )
    assert not reader.readable({"a": tf.io.SparseFeature("i", "v", tf.float32, 4)})


def test_a_table_without_a_kind_of_value_reads_as_the_per_row_records_parse(tmp_path):
    """No float feature: its kind's features are none, in the records as in the reader."""
    table = pa.table(
        {
            "label": pa.array(np.arange(1_500) % 2),
            "key": pa.array(np.arange(1_500)),
            "s": pa.array([f"v{i % 7}" for i in range(1_500)], mask=np.arange(1_500) % 5 == 0),
        }
    )
    _assert_read_as_the_per_row_records_parse(table, tmp_path)


def _assert_read_as_the_per_row_records_parse(table: pa.Table, folder) -> list:
    """Columnar records of `table` (records of 1,024 rows, added in two pieces) read back in
    batches of 512: every row once, as the per-row parse gives it. Returns the records."""
    pq.write_table(table, str(folder / "part.parquet"))
    schema = schema_of(str(folder), label="label").schema
    batch = table.to_batches()[0]
    features = features_of(batch.schema)
    spec = feature_spec(schema)
    per_row = tf.io.parse_example(encoding.encode(batch, features).records(), spec)
    records, layout = _records(batch, features, 1_024, 2)
    got = _read(records, layout, spec, 512, shuffle=False)
    keys = _keys(got)
    assert sorted(keys) == list(range(table.num_rows))
    for name, expected in per_row.items():
        assert _by_key(got[name], keys) == _as_lists(expected), name
    return records


def test_a_dictionarys_long_strings_repeated_in_every_row_are_staged_whole(tmp_path):
    """Rows repeating a dictionary's few long strings take many times the batch's string bytes:
    staging makes more room for them instead of writing past it."""
    rows = 1_500
    long = ["a" * 300, "b" * 200 + "é"]
    table = pa.table(
        {
            "label": pa.array(np.arange(rows) % 2),
            "key": pa.array(np.arange(rows)),
            "text": pa.array(
                [long[i % 2] for i in range(rows)], mask=np.arange(rows) % 9 == 0
            ).dictionary_encode(),
        }
    )
    records = _assert_read_as_the_per_row_records_parse(table, tmp_path)
    assert sum(len(r) for r in records) > rows * 200  # every row's string, written whole

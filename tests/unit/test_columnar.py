"""Columnar batch records (`tfx_tabular.coders.columnar`, read by `tfx_tabular.training.columnar`)
give exactly the tensors the per-row tf.Examples parse to, in either input form, for every kind
of the type mapping; training batches have the size asked and mix several records' rows."""

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
from tfx_tabular.coders.pools import PooledColumns, StringFingerprints  # noqa: E402
from tfx_tabular.schemas.parsing import feature_spec  # noqa: E402
from tfx_tabular.schemas.source import schema_of  # noqa: E402
from tfx_tabular.source.mapping import features_of  # noqa: E402
from tfx_tabular.training import columnar as reader  # noqa: E402
from tfx_tabular.training import forms  # noqa: E402
from tfx_tabular.training.categorical import fingerprint_strings  # noqa: E402
from tfx_tabular.training.config import EXACT, INTEGERS  # noqa: E402

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


def _form(name, schema, spec=None) -> forms.InputForm:
    return forms.input_form(name, schema, spec if spec is not None else feature_spec(schema))


def _keys_and_lists(schema) -> dict:
    """The spec of `key` and `nested` (a list of lists): enough to follow rows through a
    shuffle, and a fraction of all features' tracing."""
    spec = feature_spec(schema)
    return {name: spec[name] for name in ("key", "nested")}


def _records(
    batch, features, batch_rows: int, pieces: int, strings: bool = False
) -> tuple[list, columnar.ColumnarLayout]:
    """Columnar records of `batch` (with its `strings` or not), added in `pieces` row selections
    as a conversion adds a shard's read batches."""
    order = flatten.written_order(features)
    buffer = columnar.RecordBuffer(order, batch_rows, strings)
    records, fingerprints = [], StringFingerprints()
    for rows in np.array_split(np.arange(batch.num_rows), pieces):
        pooled = PooledColumns(flatten.feature_columns(batch, features), fingerprints)
        records.extend(buffer.add(pooled, rows))
    records.extend(buffer.flush())
    layout = columnar.layout_of(order, batch_rows, {"train": batch.num_rows}, strings)
    return [r.tobytes()[12:-4] for r in records], layout


def _batches(records, layout, spec, form, batch_size, training, run_rows=2, group_records=4):
    decoder = reader.GroupDecoder(layout, spec, form, run_rows=run_rows, short_run_rows=1)
    return reader.batches(
        tf.data.Dataset.from_tensor_slices(records),
        decoder,
        batch_size,
        training,
        1,
        not training,
        group_records=group_records,
    )


def _read(records, layout, spec, form, batch_size: int, training: bool = False, **kw) -> dict:
    parts: dict = {}
    for batch in _batches(records, layout, spec, form, batch_size, training, **kw):
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


# Forms read: the integer form, the exact form from records holding the strings, the exact
# form's numbers only from records without them.
STRINGS, NUMBERS = "exact, strings held", "exact, numbers only"


@pytest.mark.parametrize(
    "batch_rows, pieces, batch_size, form_name",
    [
        (8, 3, 8, INTEGERS),
        (4, 1, 34, STRINGS),
        # the other cases in `make test` only: each costs seconds of tracing
        *[
            pytest.param(*shape, form, marks=pytest.mark.slow)
            for shape in [(8, 3, 8), (4, 1, 34), (16, 1, 32), (100, 4, 50), (1, 2, 3), (10, 2, 6)]
            for form in (INTEGERS, STRINGS, NUMBERS)
            if (*shape, form) not in ((8, 3, 8, INTEGERS), (4, 1, 34, STRINGS))
        ],
    ],
)
def test_columnar_batches_read_as_the_per_row_records_parse_in_either_form(
    data, batch_rows, pieces, batch_size, form_name
):
    """Every row once (in another order than the per-row records), every kind as the per-row
    parse gives it, turned into the form (the exact form: its strings from records holding
    them, or only its numbers)."""
    batch, features, schema, per_row = data
    spec = feature_spec(schema)
    if form_name == NUMBERS:
        spec = {k: v for k, v in spec.items() if v.dtype != tf.string}
    form = _form(INTEGERS if form_name == INTEGERS else EXACT, schema, spec)
    expected = form.from_parsed({k: v for k, v in per_row.items() if k in spec})
    records, layout = _records(batch, features, batch_rows, pieces, form_name == STRINGS)
    assert len(records) == -(-ROWS // batch_rows)
    got = _read(records, layout, spec, form, batch_size)
    assert set(got) == set(expected)
    keys = _keys(got)
    assert sorted(keys) == list(range(ROWS))
    for name, tensor in expected.items():
        assert type(got[name]) is type(tensor), name
        assert got[name].dtype == tensor.dtype, name
        assert _by_key(got[name], keys) == _as_lists(tensor), name


def test_the_integer_form_holds_no_string_and_fingerprints_equal_tensorflows(data):
    batch, features, schema, per_row = data
    form = _form(INTEGERS, schema)
    records, layout = _records(batch, features, 16, 2)
    got = _read(records, layout, feature_spec(schema), form, 16)
    assert all(t.dtype != tf.string for t in got.values())
    keys = _keys(got)
    for name in ("name/odd", "city", "point.tags"):
        strings = per_row[name]
        fingerprints = tf.ragged.map_flat_values(
            lambda s: tf.bitcast(tf.fingerprint(s, "farmhash64"), tf.int64), strings
        )
        present = _by_key(got[forms.present_key(name)], keys) if name != "point.tags" else None
        values = _by_key(got[name], keys)
        for row, expected in enumerate(_as_lists(fingerprints)):
            if present is None:
                assert values[row] == expected, name
            elif present[row] == [True]:
                assert values[row] == expected, name
            else:  # a null: the empty string's fingerprint, as from_parsed fills it
                assert values[row] == [columnar.EMPTY_STRING_FINGERPRINT], name
    empty = fingerprint_strings(tf.constant([b""])).numpy().tolist()
    assert empty == [columnar.EMPTY_STRING_FINGERPRINT]


def test_training_batches_have_the_size_asked_and_mix_several_records_runs(data):
    """Records of 8 rows read 4 at a time, in runs of 2: every batch of 6 but the dropped last
    is whole and holds runs of 3 different records; every row at most once; each epoch in
    another order."""
    batch, features, schema, per_row = data
    spec = _keys_and_lists(schema)
    form = _form(INTEGERS, schema, spec)
    records, layout = _records(batch, features, 8, 1)
    expected = _as_lists(form.from_parsed({n: per_row[n] for n in spec})["nested"])
    epochs = []
    dataset = _batches(records, layout, spec, form, 6, training=True)
    for _ in range(2):
        seen = []
        for got in dataset:
            keys = _keys(got)
            assert len(keys) == 6
            assert _as_lists(got["nested"]) == [expected[k] for k in keys]
            seen += keys
        epochs.append(seen)
    for seen in epochs:
        assert len(seen) == len(set(seen)) == ROWS // 6 * 6
    mixed = [len({k // 8 for k in epochs[0][i : i + 6]}) for i in range(0, len(epochs[0]), 6)]
    assert max(mixed) >= 3
    assert epochs[0] != epochs[1]


@pytest.mark.parametrize("group_records", [4, 16])
def test_training_mixes_the_strings_with_their_rows(data, group_records):
    """Strings made from the records' bytes after their places are mixed: each row's strings
    are still its own, in groups of full records (run-major) and in one holding a shorter
    record."""
    batch, features, schema, per_row = data
    spec = feature_spec(schema)
    spec = {n: e for n, e in spec.items() if e.dtype == tf.string or n == "key"}
    assert len(spec) >= 3
    form = _form(EXACT, schema, spec)
    records, layout = _records(batch, features, 8, 2, strings=True)
    got = _read(records, layout, spec, form, 6, training=True, group_records=group_records)
    keys = _keys(got)
    assert len(keys) == len(set(keys)) == ROWS // 6 * 6
    assert keys != sorted(keys)
    for name in spec:
        expected = _as_lists(per_row[name])
        assert _as_lists(got[name]) == [expected[k] for k in keys], name


def test_a_group_holding_a_shorter_record_is_shuffled_row_by_row(data):
    """All of a small split in one group (records of 8 rows, the last of 5): its rows are mixed
    one by one, not left in record order, each epoch anew; every row at most once, a list's
    values still its row's."""
    batch, features, schema, per_row = data
    spec = _keys_and_lists(schema)
    form = _form(INTEGERS, schema, spec)
    records, layout = _records(batch, features, 8, 1)
    expected = _as_lists(form.from_parsed({n: per_row[n] for n in spec})["nested"])
    dataset = _batches(records, layout, spec, form, 6, True, group_records=16)
    epochs = []
    for _ in range(2):
        batches = []
        for got in dataset:
            keys = _keys(got)
            assert _as_lists(got["nested"]) == [expected[k] for k in keys]
            batches.append(keys)
        epochs.append(batches)
    for batches in epochs:
        seen = [k for keys in batches for k in keys]
        assert len(seen) == len(set(seen)) == ROWS // 6 * 6
        pairs = [(a, b) for keys in batches for a, b in zip(keys, keys[1:], strict=False)]
        assert sum(b - a == 1 for a, b in pairs) <= len(pairs) // 4
    assert epochs[0] != epochs[1]


def test_a_batch_larger_than_a_group_joins_groups_to_the_size_asked(data):
    batch, features, schema, _ = data
    spec = _keys_and_lists(schema)
    records, layout = _records(batch, features, 4, 3)
    dataset = _batches(records, layout, spec, _form(INTEGERS, schema, spec), 20, training=False)
    sizes = [len(_keys(got)) for got in dataset]
    assert sizes == [20, 20, ROWS - 40]


@pytest.mark.parametrize("form_name", [INTEGERS, STRINGS])
def test_var_len_features_come_as_sparse_tensors_as_parse_example_gives_them(data, form_name):
    """Lists and nullable scalars (numbers, strings) as VarLenFeatures: the same values, and in
    one batch of all rows the same dense shape."""
    batch, features, schema, _ = data
    names = ("history", "city", "name/odd", "count with space", "empty")
    spec = {n: tf.io.VarLenFeature(feature_spec(schema)[n].dtype) for n in names}
    spec["key"] = tf.io.FixedLenFeature([1], tf.int64)
    form = _form(INTEGERS if form_name == INTEGERS else EXACT, schema, spec)
    records, layout = _records(batch, features, 8, 1, strings=form_name == STRINGS)
    per_row = form.from_parsed(
        tf.io.parse_example(encoding.encode(batch, features).records(), spec)
    )
    for batch_size in (16, ROWS):
        got = _read(records, layout, spec, form, batch_size)
        keys = _keys(got)
        for name in names:
            assert isinstance(got[name], tf.SparseTensor)
            assert got[name].dtype == per_row[name].dtype
            assert _by_key(got[name], keys) == _as_lists(per_row[name]), name
    for name in names:
        assert got[name].dense_shape.numpy().tolist() == per_row[name].dense_shape.numpy().tolist()


def test_null_scalars_take_the_specs_defaults_and_empty_rows_as_parse_example_gives_them(data):
    """A scalar's null read under another FixedLen default, a ragged or a VarLen entry: as the
    per-row parse gives it (a string default as its fingerprint)."""
    batch, features, schema, _ = data
    spec = {
        "key": tf.io.FixedLenFeature([], tf.int64),
        "count with space": tf.io.FixedLenFeature([1], tf.int64, default_value=-1),
        "city as read": tf.io.RaggedFeature(tf.string, value_key="city"),
        "price": tf.io.FixedLenFeature([], tf.float32, default_value=0.5),
        "name/odd": tf.io.FixedLenFeature([], tf.string, default_value=b"none"),
        "when": tf.io.VarLenFeature(tf.int64),
    }
    form = _form(INTEGERS, schema, spec)
    records, layout = _records(batch, features, 8, 2)
    got = _read(records, layout, spec, form, 16)
    per_row = form.from_parsed(
        tf.io.parse_example(encoding.encode(batch, features).records(), spec)
    )
    keys = _keys({"key": got["key"][:, None]})
    assert [row[0] for row in _by_key(got["count with space"], keys)].count(-1) > 0
    for name, expected in per_row.items():
        assert type(got[name]) is type(expected), name
        assert _by_key(got[name], keys) == _as_lists(expected), name


def test_a_required_feature_missing_in_a_row_fails_as_parse_example_does(data):
    batch, features, schema, _ = data
    spec = {"count with space": tf.io.FixedLenFeature([], tf.int64)}
    records, layout = _records(batch, features, 8, 1)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_example(encoding.encode(batch, features).records(), spec)
    with pytest.raises(tf.errors.InvalidArgumentError, match="required but missing"):
        _read(records, layout, spec, _form(INTEGERS, schema, spec), 16)


def test_columnar_records_are_smaller_than_the_per_row_records(data):
    batch, features, _, _ = data
    records, _ = _records(batch, features, ROWS, 1)
    assert len(records[0]) < len(encoding.encode(batch, features).buffer)


def test_a_layout_of_another_version_is_refused_naming_the_file():
    layout = columnar.layout_of([], 8, {"train": 1})
    version = f'"layout_version": {columnar.LAYOUT_VERSION}'
    text = layout.to_json().replace(version, '"layout_version": 2')
    assert text != layout.to_json()
    with pytest.raises(ValueError, match="gs://b/columnar/columnar.json.*version 2"):
        columnar.ColumnarLayout.from_json(text, "gs://b/columnar/columnar.json")


def test_uniform_partitions_sparse_features_and_strings_not_held_are_read_per_row(data):
    batch, features, schema, _ = data
    assert reader.unreadable({"a": tf.io.RaggedFeature(tf.int64)}) is None
    uniform = tf.io.RaggedFeature(tf.int64, partitions=[tf.io.RaggedFeature.UniformRowLength(2)])
    assert "partition" in reader.unreadable({"a": uniform})
    sparse = tf.io.SparseFeature("i", "v", tf.float32, 4)
    assert "cannot give" in reader.unreadable({"a": sparse})
    spec = {"city": tf.io.RaggedFeature(tf.string)}
    exact, integers = _form(EXACT, schema, spec), _form(INTEGERS, schema, spec)
    _, fingerprints_only = _records(batch, features, 8, 1)
    _, with_strings = _records(batch, features, 8, 1, strings=True)
    assert "columnar_strings" in reader.strings_missing(fingerprints_only, exact)
    assert reader.strings_missing(with_strings, exact) is None
    assert reader.strings_missing(fingerprints_only, integers) is None


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
    batches of 512 in the integer form: every row once, as the per-row parse gives it. Returns
    the records."""
    pq.write_table(table, str(folder / "part.parquet"))
    schema = schema_of(str(folder), label="label").schema
    batch = table.to_batches()[0]
    features = features_of(batch.schema)
    spec = feature_spec(schema)
    form = _form(INTEGERS, schema, spec)
    per_row = form.from_parsed(
        tf.io.parse_example(encoding.encode(batch, features).records(), spec)
    )
    records, layout = _records(batch, features, 1_024, 2)
    got = _read(records, layout, spec, form, 512)
    keys = _keys(got)
    assert sorted(keys) == list(range(table.num_rows))
    for name, expected in per_row.items():
        assert _by_key(got[name], keys) == _as_lists(expected), name
    return records


def test_a_dictionarys_long_strings_are_hashed_once_and_read_as_their_fingerprints(tmp_path):
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
    assert sum(len(r) for r in records) < rows * 40  # a fingerprint per row, not the strings


def test_data_smaller_than_a_batch_still_trains_in_one_shorter_batch(data):
    """Training drops an epoch's last partial batch, but not its only one: a split smaller than
    a batch gives each epoch one batch of all its rows."""
    batch, features, schema, _ = data
    spec = _keys_and_lists(schema)
    records, layout = _records(batch, features, 8, 1)
    dataset = _batches(records, layout, spec, _form(INTEGERS, schema, spec), ROWS + 10, True)
    for _ in range(2):
        assert [sorted(_keys(got)) for got in dataset] == [list(range(ROWS))]


def test_a_spec_of_more_features_than_the_reader_takes_is_read_per_row(data):
    _, _, schema, _ = data
    spec = {f"f{i}": tf.io.FixedLenFeature([1], tf.int64) for i in range(reader.MAX_FEATURES + 1)}
    reason = reader.unreadable(spec)
    assert (
        reason == f"{reader.MAX_FEATURES + 1} features, more than the 256 the columnar reader takes"
    )


def test_staged_strings_are_the_pools_bytes_whatever_their_length_and_place():
    """Strings of 0 to 20 bytes (the last ones at the pool's very end, where a word copy would
    read past it), picked in any order, nulls empty."""
    rng = np.random.default_rng(3)
    words = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in rng.integers(0, 21, 300)]
    words += [b"abc", b"abcdefgh", b"x"]
    data = np.frombuffer(b"".join(words), np.uint8)
    ends = np.cumsum([len(w) for w in words])
    starts = ends - [len(w) for w in words]
    slots = rng.permutation(len(words)).astype(np.int64)
    present = rng.random(len(words)) < 0.9
    out, lengths = columnar._strings_at(slots, present, starts, ends, data)
    expected = [words[s] if p else b"" for s, p in zip(slots, present, strict=True)]
    assert lengths.tolist() == [len(w) for w in expected]
    assert out.tobytes() == b"".join(expected)


def test_strings_without_columnar_batch_records_are_refused_naming_both():
    from tfx_tabular.conversion import plan

    with pytest.raises(ValueError, match="columnar_strings .* needs columnar_batch_rows too"):
        plan.OutputOptions(columnar_strings=True)
    options = plan.ConversionConfig.from_parameters(
        {"columnar_batch_rows": 512, "columnar_strings": 1}
    ).output
    assert (options.columnar_batch_rows, options.columnar_strings) == (512, 1)

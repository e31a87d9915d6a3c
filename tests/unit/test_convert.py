"""tfx_tabular.conversion.convert: partitioned Parquet → Split-*/data_tfrecord-* shards, as a Beam pipeline."""

import collections
import dataclasses
import glob
import gzip
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import HIVE_FILES, IN_MEMORY_BEAM

from tfx_tabular.coders import encoding
from tfx_tabular.conversion import convert as conversion
from tfx_tabular.conversion import publish, transform
from tfx_tabular.conversion.plan import (
    OutputOptions,
    Splits,
    splits_by_partition,
    splits_by_patterns,
)
from tfx_tabular.conversion.staging import STAGING_DIR
from tfx_tabular.source.dataset import open_dataset
from tfx_tabular.source.errors import ColumnError, InputError

tf = pytest.importorskip("tensorflow")
from tensorflow.core.example import example_pb2  # noqa: E402

TEMP_DIR = STAGING_DIR


def split_files(output_dir: str, split: str) -> list:
    return sorted(glob.glob(os.path.join(output_dir, f"Split-{split}", "data_tfrecord-*")))


def read_split(output_dir: str, split: str, compression: str = "") -> list:
    """The serialized records of a split, read by tf.data."""
    files = split_files(output_dir, split)
    assert files, f"no shards in Split-{split}: {os.listdir(output_dir)}"
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type=compression)]


def features(record: bytes) -> dict:
    """{name: None (no kind) | list of values}."""
    out = {}
    for key, feature in example_pb2.Example.FromString(record).features.feature.items():
        kind = feature.WhichOneof("kind")
        out[key] = None if kind is None else list(getattr(feature, kind).value)
    return out


def run(dataset, output_dir, splits=Splits(), options=OutputOptions(), args=IN_MEMORY_BEAM):
    return conversion.convert(dataset, str(output_dir), splits, options, beam_pipeline_args=args)


def all_records(output_dir, names=("train", "eval")) -> dict:
    return {name: sorted(read_split(str(output_dir), name)) for name in names}


def assert_published(output_dir, names):
    entries = os.listdir(output_dir)
    assert {f"Split-{n}" for n in names} <= set(entries)
    assert not [e for e in entries if e.startswith(".")], entries  # no temporary folder remains
    assert not glob.glob(os.path.join(str(output_dir), "**", "*incomplete*"), recursive=True)
    for name in names:
        assert os.listdir(os.path.join(output_dir, f"Split-{name}"))
        assert all(
            os.path.basename(f).startswith("data_tfrecord-")
            for f in glob.glob(os.path.join(str(output_dir), f"Split-{name}", "*"))
        )


# --- 1. a hive dataset ----------------------------------------------------------------------


def test_hive_dataset_partitions_become_typed_features(hive_dataset, tmp_path):
    dataset = open_dataset(hive_dataset)
    assert len(dataset.files) == len(HIVE_FILES)  # _SUCCESS, _metadata, .crc, ... ignored
    assert sorted(f.relative for f in dataset.files) == sorted(
        f"region={r}/day={d}/part.parquet" for r, d, _, _ in HIVE_FILES
    )
    assert dataset.partition_columns == ("region", "day")
    assert dataset.schema.field("day").type == pa.int64()
    assert dataset.schema.field("region").type == pa.string()

    result = run(dataset, tmp_path / "out", options=OutputOptions(num_shards=3))
    total = sum(rows for _, _, _, rows in HIVE_FILES)
    assert sum(result.rows.values()) == total == dataset.num_rows
    assert_published(tmp_path / "out", ["train", "eval"])

    by_id = {}
    for split in ("train", "eval"):
        records = read_split(str(tmp_path / "out"), split)
        assert len(records) == result.rows[split]
        for record in records:
            example = example_pb2.Example.FromString(record).features.feature
            assert example["day"].WhichOneof("kind") == "int64_list"
            assert example["region"].WhichOneof("kind") == "bytes_list"
            row = features(record)
            assert row["id"][0] not in by_id
            by_id[row["id"][0]] = row
    assert sorted(by_id) == list(range(total))
    assert 0.2 < result.rows["eval"] / total < 0.45  # the default train:eval = 2:1 hash buckets
    for region, day, first, rows in HIVE_FILES:
        for i in range(first, first + rows):
            row = by_id[i]
            assert row["region"] == [region.encode()] and row["day"] == [day]
            assert row["x"] is None if i % 7 == 0 else row["x"] == [i * 0.5]
            assert row["s"] == [f"s{i % 5}".encode() if i % 11 else b""]
            assert row["tags"] == (None if i % 13 == 0 else list(range(i % 4)))


def test_output_folder_with_splits_is_refused(hive_dataset, tmp_path):
    """A second conversion into a folder that already holds Split-* output must be refused:
    otherwise shards of two runs mix (here 3 old + 2 new shards would be read as one split).

    Guards against a regression to matching the folders: FileSystems.match(["<out>/Split-*"])
    matches files only, never the Split-* folders, so a check on that pattern never fires;
    convert() looks for the files inside them and the publish marker.
    """
    dataset = open_dataset(hive_dataset)
    run(dataset, tmp_path / "out", options=OutputOptions(num_shards=3))
    before = sorted(glob.glob(str(tmp_path / "out" / "Split-*" / "*")))
    with pytest.raises(InputError, match="already holds"):
        run(dataset, tmp_path / "out", options=OutputOptions(num_shards=2))
    assert sorted(glob.glob(str(tmp_path / "out" / "Split-*" / "*"))) == before


# --- 2. deterministic splits ----------------------------------------------------------------


def test_hash_splits_are_deterministic_across_runs_shards_and_workers(demo_dataset, tmp_path):
    dataset = open_dataset(demo_dataset)
    run(dataset, tmp_path / "a")
    reference = all_records(tmp_path / "a")
    assert sum(len(r) for r in reference.values()) == 3000
    run(dataset, tmp_path / "b")
    assert all_records(tmp_path / "b") == reference

    # Other shard counts, batch sizes and worker counts; then the default mode and worker processes.
    other = run(
        dataset,
        tmp_path / "c",
        options=OutputOptions(num_shards=5, read_batch_rows=123),
        args=["--direct_num_workers=2", "--direct_running_mode=in_memory"],
    )
    assert other.num_shards == 5 and len(split_files(str(tmp_path / "c"), "train")) == 5
    assert all_records(tmp_path / "c") == reference


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [[], ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]],
    ids=["default", "processes"],
)
def test_parallel_modes_write_the_same_records(demo_dataset, tmp_path, args):
    """The default (one thread per core) and worker processes (DoFn pickled, as on a cluster)."""
    dataset = open_dataset(demo_dataset)
    reference = run(dataset, tmp_path / "ref")
    parallel = run(
        dataset,
        tmp_path / "par",
        options=OutputOptions(num_shards=4, read_batch_rows=700),
        args=args,
    )
    assert parallel.rows == reference.rows and parallel.num_shards == 4
    assert_published(tmp_path / "par", ["train", "eval"])
    assert all_records(tmp_path / "par") == all_records(tmp_path / "ref")


def test_hash_by_key_columns_keeps_each_key_in_one_split(demo_dataset, tmp_path):
    dataset = open_dataset(demo_dataset)
    result = run(
        dataset,
        tmp_path / "out",
        Splits(keys=("C1",)),
        OutputOptions(num_shards=3, read_batch_rows=256),
    )
    keys = {}
    for split in ("train", "eval"):
        seen = collections.Counter(
            None if row["C1"] is None else row["C1"][0]
            for row in map(features, read_split(str(tmp_path / "out"), split))
        )
        assert sum(seen.values()) == result.rows[split]
        keys[split] = seen
    assert not set(keys["train"]) & set(keys["eval"])  # no key (null included) in both splits
    assert sum(c for k in keys.values() for c in k.values()) == 3000
    assert max(keys["train"].values()) > 1  # keys repeat (Zipf), so this says something
    assert len(keys["eval"]) > 5


# --- 3. file-based splits -------------------------------------------------------------------


def test_splits_by_partition_hold_out_the_last_day(hive_dataset, tmp_path):
    dataset = open_dataset(hive_dataset)
    splits = splits_by_partition(dataset, "day", last=1)
    # day is an int partition: 10 is the last day (as text it would sort before 3).
    assert {rel: s for rel, s in splits.file_splits.items() if s == "eval"} == {
        "region=us/day=10/part.parquet": "eval"
    }
    result = run(dataset, tmp_path / "out", splits)
    assert result.rows == {"eval": 50, "train": 350}
    assert_published(tmp_path / "out", ["train", "eval"])
    assert {features(r)["day"][0] for r in read_split(str(tmp_path / "out"), "eval")} == {10}
    assert {features(r)["day"][0] for r in read_split(str(tmp_path / "out"), "train")} == {3, 4}

    explicit = splits_by_partition(dataset, "day", values={"eval": [3]})
    assert sorted(rel for rel, s in explicit.file_splits.items() if s == "eval") == [
        "region=eu/day=3/part.parquet",
        "region=us/day=3/part.parquet",
    ]
    with pytest.raises(InputError, match="not a partition key"):
        splits_by_partition(dataset, "id", last=1)


def test_splits_by_patterns(hive_dataset, tmp_path):
    dataset = open_dataset(hive_dataset)
    splits = splits_by_patterns(dataset, {"train": "region=eu/*", "eval": "region=us/day=3/*"})
    result = run(dataset, tmp_path / "out", splits)
    assert result.rows == {"train": 200, "eval": 150}  # region=us/day=10 matches neither: skipped
    records = all_records(tmp_path / "out")
    assert {(features(r)["region"][0], features(r)["day"][0]) for r in records["train"]} == {
        (b"eu", 3),
        (b"eu", 4),
    }
    assert {(features(r)["region"][0], features(r)["day"][0]) for r in records["eval"]} == {
        (b"us", 3)
    }
    with pytest.raises(InputError, match="matches the patterns of splits"):
        splits_by_patterns(dataset, {"train": "region=eu/*", "eval": "*/day=3/*"})


# --- 4. schema unification ------------------------------------------------------------------


def test_schema_unification_widens_ints_and_fills_missing_columns(tmp_path):
    (tmp_path / "in").mkdir()
    pq.write_table(
        pa.table({"id": pa.array([1, 2], pa.int32()), "s": ["a", None]}),
        tmp_path / "in" / "a.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "id": pa.array([3, 2**40], pa.int64()),
                "s": ["c", "d"],
                "extra": pa.array([0.5, None]),
            }
        ),
        tmp_path / "in" / "b.parquet",
    )
    dataset = open_dataset(str(tmp_path / "in"))
    assert dataset.schema.field("id").type == pa.int64()
    assert dataset.schema.names == ["id", "s", "extra"]
    run(dataset, tmp_path / "out", Splits(buckets=(("train", 1),)))
    rows = sorted(map(features, read_split(str(tmp_path / "out"), "train")), key=lambda r: r["id"])
    assert rows == [
        {"id": [1], "s": [b"a"], "extra": None},
        {"id": [2], "s": None, "extra": None},
        {"id": [3], "s": [b"c"], "extra": [0.5]},
        {"id": [2**40], "s": [b"d"], "extra": None},
    ]


def test_conflicting_column_types_name_both_files_and_the_column(tmp_path):
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"id": [1], "code": ["x"]}), tmp_path / "in" / "first.parquet")
    pq.write_table(pa.table({"id": [2], "code": [7]}), tmp_path / "in" / "second.parquet")
    with pytest.raises(InputError) as error:
        open_dataset(str(tmp_path / "in"))
    message = str(error.value)
    assert "'code'" in message and "first.parquet" in message and "second.parquet" in message


def test_map_column_is_an_input_error_naming_the_file_and_column(tmp_path):
    (tmp_path / "in").mkdir()
    pq.write_table(
        pa.table({"id": [1], "attrs": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))}),
        tmp_path / "in" / "maps.parquet",
    )
    with pytest.raises(InputError) as error:
        open_dataset(str(tmp_path / "in"))
    assert "maps.parquet" in str(error.value) and "'attrs'" in str(error.value)
    assert open_dataset(str(tmp_path / "in"), exclude_columns=["attrs"]).schema.names == ["id"]


# --- 5. unreadable files --------------------------------------------------------------------


def _good_file(path):
    pq.write_table(pa.table({"id": np.arange(1000), "s": [str(i) for i in range(1000)]}), path)


@pytest.mark.parametrize("damage", ["truncated", "not_parquet", "empty"])
def test_unreadable_file_is_an_input_error_naming_it_and_nothing_is_written(tmp_path, damage):
    (tmp_path / "in" / "day=1").mkdir(parents=True)
    _good_file(tmp_path / "in" / "day=1" / "good.parquet")
    bad = tmp_path / "in" / "day=1" / "x.parquet"
    if damage == "truncated":
        _good_file(bad)
        bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    else:
        bad.write_bytes(b"id,s\n1,a\n" if damage == "not_parquet" else b"")
    out = tmp_path / "out"
    with pytest.raises(InputError, match="x.parquet"):
        run(open_dataset(str(tmp_path / "in")), out)
    assert not glob.glob(str(out / "Split-*")) and not glob.glob(str(out / "*"))


def test_corrupt_data_pages_fail_the_conversion_naming_the_file_and_nothing_is_published(tmp_path):
    """A footer that reads fine over pages that do not: the error comes from inside Beam."""
    (tmp_path / "in").mkdir()
    _good_file(tmp_path / "in" / "good.parquet")
    bad = tmp_path / "in" / "x.parquet"
    _good_file(bad)
    data = bytearray(bad.read_bytes())
    data[4:64] = b"\xff" * 60  # the first page header, after the "PAR1" magic
    bad.write_bytes(bytes(data))
    dataset = open_dataset(str(tmp_path / "in"))  # footers are intact
    out = tmp_path / "out"
    with pytest.raises(InputError, match="x.parquet"):
        run(dataset, out, options=OutputOptions(num_shards=2))
    assert not glob.glob(str(out / "Split-*"))
    assert not os.path.exists(out) or not os.listdir(out)


def test_a_bad_shard_records_its_error_and_the_others_stop_on_seeing_it(tmp_path):
    """Inside the runner a shard does not raise bad input: it records the error in the staging
    folder (carried back whole on every runner, `transform.FAILURES_DIR`), and a shard that finds
    a record stops at its next check (its first batch here) without counting its rows."""
    (tmp_path / "in").mkdir()
    pq.write_table(
        pa.table({"u": pa.array(np.arange(10_000), pa.uint64())}),
        tmp_path / "in" / "good.parquet",
        row_group_size=1_000,
    )
    pq.write_table(pa.table({"u": pa.array([2**63], pa.uint64())}), tmp_path / "in" / "bad.parquet")
    dataset = open_dataset(str(tmp_path / "in"))
    bad_file = next(i for i, f in enumerate(dataset.files) if f.relative == "bad.parquet")
    shards = [[(bad_file, (0,))], [(1 - bad_file, tuple(range(10)))]]
    staging = str(tmp_path / "staging")
    convert = transform.ConvertShard(dataset, shards, Splits(), staging, OutputOptions())
    convert.setup()
    assert transform.recorded_failure(staging) is None
    assert list(convert.process(0)) == []
    failure = transform.recorded_failure(staging)
    assert isinstance(failure, ColumnError) and "bad.parquet: column 'u'" in str(failure)
    assert list(convert.process(1)) == []  # stopped: no rows counted
    assert not glob.glob(os.path.join(staging, transform.ROW_COUNTS_DIR, "*"))


# --- 6. against stock TFX's Parquet path ------------------------------------------------------


def _stock_examples(path: str) -> list:
    """What the stock ParquetExampleGen executor writes: dict_to_example over rows."""
    from tfx.components.example_gen.utils import dict_to_example

    return [dict_to_example(row) for row in pq.read_table(path).to_pylist()]


def _values(feature):
    kind = feature.WhichOneof("kind")
    return None if kind is None else list(getattr(feature, kind).value)


def _is_zero_or_empty(values) -> bool:
    return values is not None and len(values) == 1 and values[0] in (0, 0.0, b"")


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(
        x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.slow  # reads TFX's own Parquet test data through stock TFX
def test_matches_stock_tfx_parquet_examples_except_dropped_zeros(tfx_parquet_testdata, tmp_path):
    dataset = open_dataset(tfx_parquet_testdata)
    result = run(
        dataset, tmp_path / "out", Splits(buckets=(("train", 1),)), OutputOptions(num_shards=1)
    )
    assert result.rows == {"train": 10_000}
    # One shard and one split: the records are in the file's row order.
    ours = [example_pb2.Example.FromString(r) for r in read_split(str(tmp_path / "out"), "train")]
    stock = _stock_examples(os.path.join(tfx_parquet_testdata, "data.parquet"))
    assert len(ours) == len(stock) == 10_000

    dropped = collections.Counter()
    identical = 0
    for mine, theirs in zip(ours, stock, strict=True):
        if mine == theirs:
            identical += 1
            continue
        mine, theirs = mine.features.feature, theirs.features.feature
        assert sorted(mine) == sorted(theirs)
        for name in mine:
            a, b = _values(mine[name]), _values(theirs[name])
            if _same(a, b):
                continue
            # The only difference allowed: stock wrote 0 / 0.0 / "" as a feature with no value.
            assert b is None and _is_zero_or_empty(a), (name, a, b)
            dropped[name] += 1
    print(
        f"\nstock TFX dropped {sum(dropped.values())} zero/empty values that we keep, in "
        f"{10_000 - identical} of 10000 examples: {dict(dropped)}"
    )
    assert sum(dropped.values()) > 0 and identical > 0
    assert {"tips", "trip_miles"} <= set(dropped)


# --- 7. gzip --------------------------------------------------------------------------------


def test_gzip_shards_read_back_with_tf_data(demo_dataset, tmp_path):
    dataset = open_dataset(demo_dataset)
    run(dataset, tmp_path / "plain", options=OutputOptions(num_shards=2))
    result = run(dataset, tmp_path / "gz", options=OutputOptions(compression="gzip", num_shards=2))
    assert result.compression == "gzip"
    for split in ("train", "eval"):
        files = split_files(str(tmp_path / "gz"), split)
        assert len(files) == 2 and all(f.endswith(".gz") for f in files)
        for f in files:
            once = gzip.decompress(open(f, "rb").read())
            assert once[:2] != b"\x1f\x8b", f"{f} is gzip-compressed twice"
    assert {
        s: sorted(read_split(str(tmp_path / "gz"), s, "GZIP")) for s in ("train", "eval")
    } == all_records(tmp_path / "plain")
    with pytest.raises(ValueError, match="compression"):
        OutputOptions(compression="zstd")


def test_strings_stored_every_way_write_their_values(tmp_path):
    """Strings read as Parquet dictionary pages stay encoded through the encoder and the
    statistics: dictionary pages with nulls, a column whose second row group fell back to plain
    pages (dictionary over its size limit), a column without dictionary, and lists of strings
    write the same records as the values decoded, with and without statistics."""
    rng = np.random.default_rng(3)
    n = 3_000
    few = rng.choice(["a", "", "été", "dense"], n).astype(object)
    few[rng.random(n) < 0.2] = None
    table = pa.table(
        {
            "few": pa.array(few, pa.string()),
            "many": pa.array([f"v{i}-{rng.integers(1 << 40)}" for i in range(n)]),
            "plain": pa.array(rng.choice(["x", "yy"], n)),
            "lists": pa.array([["p", "q"][: i % 3] for i in range(n)], pa.list_(pa.string())),
        }
    )
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "part.parquet"
    pq.write_table(
        table,
        path,
        row_group_size=n // 2,
        use_dictionary=["few", "many", "lists"],
        dictionary_pagesize_limit=4096,
    )
    chunks = [pq.ParquetFile(path).metadata.row_group(g).column(1) for g in range(2)]
    assert all(c.has_dictionary_page for c in chunks)  # "many": fell back to plain pages
    assert "PLAIN" in chunks[1].encodings
    expected = sorted(
        encoding.encode(b, open_dataset(str(tmp_path / "in")).features).records()
        for b in table.to_batches()
    )
    expected = sorted(r for records in expected for r in records)
    for statistics in (False, True):
        dataset = open_dataset(str(tmp_path / "in"))
        out = tmp_path / f"out-{statistics}"
        conversion.convert(
            dataset,
            str(out),
            Splits(buckets=(("train", 1),)),
            OutputOptions(read_batch_rows=700),
            IN_MEMORY_BEAM,
            example_statistics_dir=str(tmp_path / f"stats-{statistics}") if statistics else None,
        )
        assert sorted(read_split(str(out), "train")) == expected


@pytest.mark.parametrize("count", [0, 1, 3, 20])
def test_statistics_parts_are_read_in_shard_order(tmp_path, count):
    paths = []
    for i in range(count):
        paths.append(str(tmp_path / f"part-{i}"))
        (tmp_path / f"part-{i}").write_bytes(b"x" * (count - i) + str(i).encode())
    read = list(publish._read_ahead(paths, depth=3))
    assert read == [b"x" * (count - i) + str(i).encode() for i in range(count)]


def test_the_conversion_config_is_built_from_the_example_gens_parameters():
    """ParquetExampleGen's spec and the config name the same options, with the same defaults: the
    spec's resolved defaults give the default config, and every option reaches its place."""
    from tfx_tabular.components.parquet_example_gen import spec
    from tfx_tabular.conversion import plan

    defaults = {name: p.default for name, p in spec.PARAMETERS.items()}
    assert plan.ConversionConfig.from_parameters(defaults) == plan.ConversionConfig()
    config = plan.ConversionConfig.from_parameters(
        {**defaults, "decimal_as": "string", "num_shards": 3, "split_keys": ["id"], "other": 1}
    )
    assert (config.source.decimal_as, config.source.split_keys) == ("string", ("id",))
    assert (config.output.num_shards, config.output.read_batch_rows) == (
        3,
        OutputOptions.read_batch_rows,
    )
    fields = {
        f.name for c in (plan.SourceOptions, plan.OutputOptions) for f in dataclasses.fields(c)
    }
    assert set(spec.PARAMETERS) - fields == {"compute_example_statistics"}

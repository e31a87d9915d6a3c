"""Wide tables (issue 28): batches sized by bytes from the footers, columnar records capped by
the same budget, and the scalar numeric statistics' fixed-memory quantiles sketch."""

import dataclasses
import glob
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import IN_MEMORY_BEAM

from tfx_tabular.coders import columnar
from tfx_tabular.conversion import convert, plan
from tfx_tabular.source import reading
from tfx_tabular.source.dataset import open_dataset
from tfx_tabular.statistics import quantiles

ROWS = 1_200  # below a quantiles sketch's store: exact statistics whatever the batches


def wide_table(columns: int, rows: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(7)
    arrays = {}
    for i in range(columns):
        if i % 3 == 0:
            arrays[f"i{i}"] = pa.array(rng.integers(0, 1000, rows), mask=rng.random(rows) < 0.1)
        elif i % 3 == 1:
            arrays[f"f{i}"] = pa.array(rng.standard_normal(rows))
        else:
            arrays[f"s{i}"] = pa.array([f"v{j}" for j in rng.integers(0, 50, rows)])
    return pa.table(arrays)


@pytest.fixture(scope="module")
def wide_dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wide")
    pq.write_table(wide_table(300), folder / "part-0.parquet")
    return str(folder)


def test_row_bytes_come_from_the_footers_uncompressed_column_sizes(tmp_path):
    table = pa.table(
        {
            "n": pa.array(np.arange(1000, dtype=np.int64)),
            "s": pa.array([{"a": i, "b": [i, i]} for i in range(1000)]),
            "l": pa.array([[float(i)] * 3 for i in range(1000)]),
        }
    )
    pq.write_table(table, tmp_path / "f.parquet")
    (info,) = open_dataset(str(tmp_path)).files
    metadata = pq.ParquetFile(tmp_path / "f.parquet").metadata
    group = metadata.row_group(0)
    leaves = {
        group.column(c).path_in_schema: group.column(c).total_uncompressed_size
        for c in range(group.num_columns)
    }
    sizes = dict(info.column_bytes)
    assert sizes["n"] == leaves["n"]
    assert sizes["s"] == sum(v for k, v in leaves.items() if k.startswith("s."))
    assert sizes["l"] == sum(v for k, v in leaves.items() if k.startswith("l."))
    assert reading.row_bytes(info) == pytest.approx(sum(leaves.values()) / 1000)
    narrowed = open_dataset(str(tmp_path), columns=["n"]).files[0]
    assert reading.row_bytes(narrowed) == pytest.approx(leaves["n"] / 1000)


def test_the_byte_budget_bites_on_wide_rows_only(wide_dataset, demo_dataset):
    wide = open_dataset(wide_dataset).files[0]
    assert reading.rows_for_bytes(wide, 256 << 10, 8192) < ROWS
    assert reading.rows_for_bytes(wide, 1, 8192) == 1
    for info in open_dataset(demo_dataset).files:  # Criteo-shaped rows: unchanged
        assert reading.rows_for_bytes(info, plan.DEFAULT_READ_BATCH_BYTES, 65_536) == 65_536


def test_columnar_records_are_cut_to_whole_runs_of_the_budget(wide_dataset, demo_dataset):
    wide = open_dataset(wide_dataset)
    on = plan.OutputOptions(columnar_batch_rows=columnar.DEFAULT_BATCH_ROWS)
    sized = plan.sized_for(dataclasses.replace(on, read_batch_bytes=1 << 20), wide)
    assert sized.columnar_batch_rows % columnar.RUN_ROWS == 0
    assert columnar.RUN_ROWS <= sized.columnar_batch_rows < columnar.DEFAULT_BATCH_ROWS
    off = plan.OutputOptions(columnar_batch_rows=0, read_batch_bytes=1)
    assert plan.sized_for(off, wide).columnar_batch_rows == 0
    assert plan.sized_for(on, open_dataset(demo_dataset)) == on


def test_read_batch_bytes_must_be_positive_and_is_a_parameter():
    with pytest.raises(ValueError, match="read_batch_bytes must be positive, not 0"):
        plan.OutputOptions(read_batch_bytes=0)
    config = plan.ConversionConfig.from_parameters({"read_batch_bytes": 12345})
    assert config.output.read_batch_bytes == 12345
    from tfx_tabular.components.parquet_example_gen import spec

    assert spec.PARAMETERS["read_batch_bytes"].default == plan.OutputOptions.read_batch_bytes


def test_small_byte_budgets_write_the_same_records_and_statistics(wide_dataset, tmp_path):
    dataset, splits = plan.plan_conversion(wide_dataset)
    outputs = {}
    for budget in (plan.DEFAULT_READ_BATCH_BYTES, 200_000):
        out = tmp_path / str(budget)
        result = convert.convert(
            dataset,
            str(out / "examples"),
            splits,
            plan.OutputOptions(
                columnar_batch_rows=columnar.DEFAULT_BATCH_ROWS, read_batch_bytes=budget
            ),
            beam_pipeline_args=IN_MEMORY_BEAM,
            example_statistics_dir=str(out / "statistics"),
        )
        records = {}
        for path in sorted(glob.glob(str(out / "examples" / "Split-*" / "data_tfrecord-*"))):
            with open(path, "rb") as handle:
                records[os.path.basename(os.path.dirname(path))] = handle.read()
        stats = {}
        for path in sorted(glob.glob(str(out / "statistics" / "Split-*" / "FeatureStats.pb"))):
            with open(path, "rb") as handle:
                stats[path.split(os.sep)[-2]] = moments_apart(handle.read())
        with open(out / "examples" / columnar.FOLDER / columnar.LAYOUT_FILE) as handle:
            layout = json.load(handle)
        outputs[budget] = records, stats, layout["batch_rows"], result.columnar_batch_rows
    (big, big_stats, big_rows, _), (small, small_stats, small_rows, reported) = outputs.values()
    assert big == small  # one record per row, whatever the batches
    # exact below the sketch's size whatever the batches, but for the moments' last bits
    assert ROWS < quantiles.STORE
    assert [s for s, _ in big_stats.values()] == [s for s, _ in small_stats.values()]
    pairs = zip(big_stats.values(), small_stats.values(), strict=True)
    for (_, big_moments), (_, small_moments) in pairs:
        np.testing.assert_allclose(big_moments, small_moments, rtol=1e-12)
    assert big_rows == columnar.DEFAULT_BATCH_ROWS
    assert small_rows == reported == columnar.RUN_ROWS


def moments_apart(data: bytes) -> tuple[bytes, list[float]]:
    """A split's statistics without the numeric features' mean and std_dev, and those apart
    (summed per batch, then merged: equal to the last bits only)."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    stats = statistics_pb2.DatasetFeatureStatisticsList.FromString(data)
    moments = []
    for feature in stats.datasets[0].features:
        if feature.HasField("num_stats"):
            moments += [feature.num_stats.mean, feature.num_stats.std_dev]
            feature.num_stats.ClearField("mean")
            feature.num_stats.ClearField("std_dev")
    return stats.SerializeToString(), moments


def exact_ranks(values: np.ndarray, boundaries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ordered = np.sort(values)
    return (
        np.searchsorted(ordered, boundaries, side="left"),
        np.searchsorted(ordered, boundaries, side="right"),
    )


def sketch_of(values: np.ndarray, batch: int = 1717) -> quantiles.Quantiles:
    sketch = quantiles.Quantiles.new()
    scratch = np.empty(quantiles.STORE)
    for start in range(0, len(values), batch):
        quantiles.add(sketch.items, sketch.sizes, values[start : start + batch], scratch)
    return sketch


def test_the_sketch_is_exact_until_its_store_is_full():
    values = np.random.default_rng(1).standard_normal(quantiles.STORE)
    boundaries, counts = sketch_of(values).quantiles_and_counts(4)
    ordered = np.sort(values)
    assert boundaries[0] == ordered[0] and boundaries[-1] == ordered[-1]
    _, right = exact_ranks(values, boundaries)
    np.testing.assert_array_equal(counts, right)


@pytest.mark.parametrize("shape", ["normal", "ties", "sorted"])
def test_sketch_ranks_within_the_epsilon_and_as_tfx_bsls(shape):
    from tfx_bsl.sketches import QuantilesSketch

    rng = np.random.default_rng(2)
    values = {
        "normal": rng.standard_normal(200_000),
        "ties": rng.geometric(0.05, 200_000).astype(np.float64),
        "sorted": np.arange(200_000, dtype=np.float64),
    }[shape]
    half = len(values) // 2
    merged = sketch_of(values[:half])
    merged.merge(quantiles.Quantiles.from_bytes(sketch_of(values[half:]).to_bytes()))
    reference = QuantilesSketch(eps=0.01, max_num_elements=1 << 32, num_streams=1)
    reference.AddValues(pa.array(values))
    theirs = reference.GetQuantilesAndCumulativeWeights(100)[0].flatten().to_numpy()
    eps = 0.01 * len(values)
    for boundaries in (merged.quantiles_and_counts(100)[0], theirs):
        left, right = exact_ranks(values, boundaries)
        targets = np.arange(101) / 100 * len(values)
        # a boundary's rank range (ties) comes within eps of its target rank
        assert np.all((left - eps <= targets) & (targets <= right + eps))
    _, counts = merged.quantiles_and_counts(100)
    _, right = exact_ranks(values, merged.quantiles_and_counts(100)[0])
    assert np.max(np.abs(counts - right)) <= eps
    assert counts[-1] == len(values)


def test_a_sketch_holds_at_most_its_store_and_keeps_its_weight():
    sketch = sketch_of(np.random.default_rng(3).random(500_000), batch=65_536)
    assert sketch.sizes[: quantiles.MAX_LEVELS].sum() <= quantiles.STORE
    _, counts = sketch.quantiles_and_counts(10)
    assert counts[-1] == 500_000


def varied_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(3)
    missing = rng.random(rows) < 0.2
    return pa.table(
        {
            "i": pa.array(rng.integers(0, 9, rows), mask=missing),
            "f": pa.array(rng.standard_normal(rows)),
            "s": pa.array([f"v{j}" for j in rng.integers(0, 20, rows)]),
            "t": pa.array(rng.integers(0, 10**15, rows), pa.timestamp("us"), mask=missing),
            "l": pa.array([[j] * (j % 3) if j % 5 else None for j in range(rows)]),
            "st": pa.array([{"a": j, "b": [float(j)]} for j in range(rows)]),
        }
    )


def read_all(dataset, info, batch_size: int) -> tuple[pa.Table, list[int]]:
    groups = list(range(len(info.row_group_rows)))
    batches = list(reading.read_batches(dataset, info, groups, batch_size, True))
    return pa.Table.from_batches(batches), [b.num_rows for b in batches]


def test_whole_row_groups_read_as_the_streaming_reader_reads_them(tmp_path, monkeypatch):
    folder = tmp_path / "day=2024-01-02"
    folder.mkdir()
    pq.write_table(varied_table(5_000), folder / "part-0.parquet", row_group_size=1_500)
    dataset = open_dataset(str(tmp_path))
    (info,) = dataset.files
    streamed, _ = read_all(dataset, info, 700)
    monkeypatch.setattr(reading, "_WHOLE_ROW_GROUP_BYTES", 0)
    monkeypatch.setattr(reading, "_COLUMN_SLICE", 4)  # two slices of the 7 columns
    assert reading._reads_whole_row_groups(info, info.schema.names)
    whole, sizes = read_all(dataset, info, 700)
    assert whole.equals(streamed)
    assert pa.types.is_dictionary(whole.schema.field("s").type)  # the strings' codes kept
    assert max(sizes) == 700 and sum(sizes) == 5_000


@pytest.mark.parametrize("whole", [False, True])
def test_doubles_read_as_float32_round_as_numpy_and_partitions_stay(tmp_path, monkeypatch, whole):
    """Both read paths narrow float64 columns as numpy's astype does, bit for bit; a float64
    partition column kept in the files stays float64 (it is checked against the folder's)."""
    folder = tmp_path / "x=0.1"
    folder.mkdir()
    rng = np.random.default_rng(3)
    values = rng.standard_normal(3_000) * np.exp(rng.uniform(-120, 120, 3_000))
    values[:6] = [1.0000000596046448, 3.4028235677973366e38, 1e-46, -0.0, np.nan, -np.inf]
    table = pa.table(
        {"d": pa.array(values, mask=rng.random(3_000) < 0.1), "x": pa.array([0.1] * 3_000)}
    )
    pq.write_table(table, folder / "part-0.parquet", row_group_size=1_000)
    dataset = open_dataset(str(tmp_path))
    (info,) = dataset.files
    if whole:
        monkeypatch.setattr(reading, "_WHOLE_ROW_GROUP_BYTES", 0)
        monkeypatch.setattr(reading, "_PAGE_BYTES", 1 << 30)
    assert reading._reads_whole_row_groups(info, ["d", "x"]) is whole
    groups = list(range(len(info.row_group_rows)))
    read = pa.Table.from_batches(reading.read_batches(dataset, info, groups, 700, narrow=True))
    assert read.schema.field("d").type == pa.float32()
    assert read.schema.field("x").type == pa.float64()
    got = read.column("d").combine_chunks()
    assert got.is_valid().equals(table.column("d").combine_chunks().is_valid())
    with np.errstate(over="ignore"):
        expected = values.astype(np.float32)
    valid = got.is_valid().to_numpy(zero_copy_only=False)
    bits = got.fill_null(0).to_numpy().view(np.uint32)
    assert (bits[valid] == expected.view(np.uint32)[valid]).all()


def test_whole_row_groups_hold_int64_as_int32_where_every_value_fits(tmp_path, monkeypatch):
    """Read whole and narrowed, a row group's int64 column whose values all fit comes as int32
    (nulls kept), one with a value outside int32 as int64; the streaming reader keeps int64."""
    values = np.arange(3_000, dtype=np.int64) - 1_500
    values[2_500] = 2**31  # in the third row group only
    missing = np.arange(3_000) % 7 == 0
    pq.write_table(
        pa.table({"n": pa.array(values, mask=missing)}),
        tmp_path / "part-0.parquet",
        row_group_size=1_000,
    )
    dataset = open_dataset(str(tmp_path))
    (info,) = dataset.files
    streamed = list(reading.read_batches(dataset, info, [0, 1, 2], 1_000, narrow=True))
    monkeypatch.setattr(reading, "_WHOLE_ROW_GROUP_BYTES", 0)
    monkeypatch.setattr(reading, "_PAGE_BYTES", 1 << 30)
    whole = list(reading.read_batches(dataset, info, [0, 1, 2], 1_000, narrow=True))
    assert [b.schema.field("n").type for b in streamed] == [pa.int64()] * 3
    assert [b.schema.field("n").type for b in whole] == [pa.int32(), pa.int32(), pa.int64()]
    for got in (streamed, whole):
        read = pa.chunked_array([b.column(0).cast(pa.int64()) for b in got]).combine_chunks()
        assert read.equals(pa.array(values, mask=missing))


def test_only_large_row_groups_of_page_sized_chunks_are_read_whole(tmp_path):
    wide = pa.table({f"c{i}": pa.array(np.arange(4_500, dtype=np.int64) * i) for i in range(2_000)})
    pq.write_table(wide, tmp_path / "wide.parquet", use_dictionary=False, compression="none")
    narrow = pa.table({"c": pa.array(np.arange(10_000_000, dtype=np.int64))})
    pq.write_table(narrow, tmp_path / "narrow.parquet", compression="none")
    files = {os.path.basename(f.path): f for f in open_dataset(str(tmp_path)).files}
    # 2,000 chunks of 36 kB: 72 MB, above _WHOLE_ROW_GROUP_BYTES; one chunk of 80 MB: pages
    assert reading._reads_whole_row_groups(files["wide.parquet"], wide.column_names)
    assert not reading._reads_whole_row_groups(files["wide.parquet"], wide.column_names[:100])
    assert not reading._reads_whole_row_groups(files["narrow.parquet"], ["c"])


def test_row_groups_read_whole_convert_to_the_same_records_and_statistics(
    wide_dataset, tmp_path, monkeypatch
):
    dataset, splits = plan.plan_conversion(wide_dataset)

    def outputs(name: str) -> dict[str, bytes]:
        """The records and the statistics of a conversion."""
        out = tmp_path / name
        convert.convert(
            dataset,
            str(out / "examples"),
            splits,
            plan.OutputOptions(),
            example_statistics_dir=str(out / "statistics"),
            beam_pipeline_args=IN_MEMORY_BEAM,
        )
        paths = sorted(
            glob.glob(str(out / "examples" / "Split-*" / "data_tfrecord-*"))
            + glob.glob(str(out / "statistics" / "Split-*" / "FeatureStats.pb"))
        )
        return {os.path.relpath(p, out): open(p, "rb").read() for p in paths}

    streamed = outputs("streamed")
    assert len([p for p in streamed if p.endswith("FeatureStats.pb")]) == len(splits.names)
    monkeypatch.setattr(reading, "_WHOLE_ROW_GROUP_BYTES", 0)
    assert reading._reads_whole_row_groups(dataset.files[0], dataset.schema.names)
    assert outputs("whole") == streamed

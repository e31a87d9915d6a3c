"""tfx_tabular.statistics: exact where TFDV is exact, within the stated bounds where sketched,
mergeable in any batching, deterministic, and readable by TFDV's loaders and visualization."""

import glob
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import IN_MEMORY_BEAM

from tfx_tabular import statistics
from tfx_tabular.coders import encoding, flatten
from tfx_tabular.coders.pools import PooledColumns
from tfx_tabular.conversion import convert, plan, transform
from tfx_tabular.source.mapping import features_of
from tfx_tabular.statistics import options
from tfx_tabular.statistics import quantiles as kll


def split_statistics(table: pa.Table, batch_rows: int, parts: int = 1):
    """Statistics of `table` added in batches of `batch_rows`, each batch's rows dealt into
    `parts` accumulators by a row mask, all merged at the end."""
    features = features_of(table.schema)
    accumulators = [statistics.SplitStatistics(features) for _ in range(parts)]
    for batch in table.to_batches(max_chunksize=batch_rows):
        columns = flatten.feature_columns(batch, features)
        pooled = PooledColumns(columns)
        statistics.add_batch(accumulators, columns, pooled, np.arange(batch.num_rows) % parts)
    merged = statistics.SplitStatistics()
    for accumulator in accumulators:
        merged.merge(statistics.decode_part(statistics.encode_part(accumulator)))  # as shipped
    return merged


def by_name(stats_list):
    return {f.path.step[0]: f for f in stats_list.datasets[0].features}


def test_constants_are_tfdvs():
    import tensorflow_data_validation as tfdv
    from tensorflow_data_validation import constants
    from tensorflow_data_validation.statistics.generators import basic_stats_generator

    stock = tfdv.StatsOptions()
    assert options.NUM_TOP_VALUES == stock.num_top_values
    assert options.NUM_RANK_HISTOGRAM_BUCKETS == stock.num_rank_histogram_buckets
    assert options.NUM_VALUES_HISTOGRAM_BUCKETS == stock.num_values_histogram_buckets
    assert options.NUM_HISTOGRAM_BUCKETS == stock.num_histogram_buckets
    assert options.NUM_QUANTILES_HISTOGRAM_BUCKETS == stock.num_quantiles_histogram_buckets
    assert options.QUANTILES_EPSILON == stock.epsilon
    assert options.FREQUENCY_THRESHOLD == stock.frequency_threshold
    assert options.NON_UTF8_PLACEHOLDER == constants.NON_UTF8_PLACEHOLDER
    assert options.LARGE_BYTES_PLACEHOLDER == constants.LARGE_BYTES_PLACEHOLDER
    assert (
        options.STD_HISTOGRAM_QUANTILES_FACTOR
        == basic_stats_generator._NUM_QUANTILES_FACTOR_FOR_STD_HISTOGRAM
    )


def edge_table() -> pa.Table:
    return pa.table(
        {
            "f": pa.array([1.5, float("nan"), float("inf"), -float("inf"), 0.0, None, -2.0]),
            "lists": pa.array([[], [1, 2], None, [0], [3, 3, 3], [], [7]], pa.list_(pa.int64())),
            "b": pa.array([b"ok", b"\xff\xfe", b"x" * 2000, None, b"", b"ok", b"ok"]),
            "none": pa.nulls(7, pa.string()),
        }
    )


def test_edge_values_as_tfdv_computes_them(tmp_path):
    """NaN, ±inf, empty lists, invalid UTF-8, strings over 1,024 bytes, an all-null column:
    compared with TFDV over the same records."""
    import tensorflow_data_validation as tfdv

    table = edge_table()
    path = str(tmp_path / "edge.tfrecord")
    with open(path, "wb") as out:
        out.write(encoding.encode(table.to_batches()[0], features_of(table.schema), True).buffer)
    stock = by_name(tfdv.generate_statistics_from_tfrecord(path))
    ours = by_name(statistics.statistics_list(split_statistics(table, 3)))
    for name in ("f", "lists"):
        mine, theirs = ours[name].num_stats, stock[name].num_stats
        for field in ("num_zeros", "min", "max", "median"):
            assert getattr(mine, field) == getattr(theirs, field), (name, field)
        assert mine.common_stats == theirs.common_stats, name
        assert [h.num_nan for h in mine.histograms] == [h.num_nan for h in theirs.histograms]
    assert ours["b"].string_stats.common_stats == stock["b"].string_stats.common_stats
    assert ours["b"].string_stats.avg_length == pytest.approx(stock["b"].string_stats.avg_length)
    assert ours["b"].string_stats.invalid_utf8_count == 1
    assert {v.value: v.frequency for v in ours["b"].string_stats.top_values} == {
        "ok": 3,
        "": 1,
        statistics.NON_UTF8_PLACEHOLDER: 1,
        statistics.LARGE_BYTES_PLACEHOLDER: 1,
    }
    # Never a value: TFDV says STRING with every row missing; we keep the written kind (BYTES).
    assert ours["none"].string_stats.common_stats.num_missing == 7
    assert stock["none"].string_stats.common_stats.num_missing == 7


def assert_same_exact_fields(a, b):
    """Two NumericStatistics' counts, extremes and moments (the moments to rounding)."""
    assert a.common_stats.num_non_missing == b.common_stats.num_non_missing
    assert (a.min, a.max, a.num_zeros) == (b.min, b.max, b.num_zeros)
    assert a.mean == pytest.approx(b.mean, rel=1e-12)
    assert a.std_dev == pytest.approx(b.std_dev, rel=1e-12)


def test_exact_fields_do_not_depend_on_batching():
    rng = np.random.default_rng(0)
    n = 20_000
    table = pa.table(
        {
            "x": pa.array(rng.normal(5, 3, n), mask=rng.random(n) < 0.1),
            "k": pa.array(rng.integers(-50, 50, n)),
            "s": pa.array(rng.choice(["a", "bb", "ccc"], n)),
        }
    )
    one = by_name(statistics.statistics_list(split_statistics(table, n)))
    many = by_name(statistics.statistics_list(split_statistics(table, 777, parts=3)))
    for name in ("x", "k"):
        assert_same_exact_fields(one[name].num_stats, many[name].num_stats)
    values = table["x"].drop_null().to_numpy().astype(np.float32).astype(np.float64)
    assert one["x"].num_stats.mean == pytest.approx(values.mean(), rel=1e-12)
    assert one["x"].num_stats.std_dev == pytest.approx(values.std(), rel=1e-12)
    assert one["s"].string_stats == many["s"].string_stats


def test_numeric_blocks_count_each_splits_rows_as_numpy_does():
    """Rows dealt at random into three splits, batches that start with a NaN, infinities, zeros
    and nulls: each split's counts and extremes are its own rows' (numpy over them)."""
    rng = np.random.default_rng(4)
    n = 7_000
    x = rng.choice([0.0, 1.5, -2.0, np.nan, np.inf, -np.inf], n, p=[0.3, 0.3, 0.2, 0.1, 0.05, 0.05])
    x[::700] = np.nan  # each batch's first row
    null = rng.random(n) < 0.1
    k = rng.integers(-3, 4, n)
    table = pa.table({"x": pa.array(x, mask=null), "k": pa.array(k, mask=null[::-1])})
    features = features_of(table.schema)
    split_ids = rng.integers(0, 3, n)
    accumulators = [statistics.SplitStatistics(features) for _ in range(3)]
    for start, batch in zip(range(0, n, 700), table.to_batches(max_chunksize=700), strict=True):
        columns = flatten.feature_columns(batch, features)
        ids = split_ids[start : start + batch.num_rows]
        statistics.add_batch(accumulators, columns, PooledColumns(columns), ids)
    for split, accumulator in enumerate(accumulators):
        got = by_name(statistics.statistics_list(accumulator))
        for name, values, present in (("x", x, ~null), ("k", k, ~null[::-1])):
            mine = values[(split_ids == split) & present].astype(np.float64)
            stats = got[name].num_stats
            assert stats.common_stats.num_non_missing == len(mine)
            assert stats.num_zeros == np.sum(mine == 0)
            assert (stats.min, stats.max) == (np.nanmin(mine), np.nanmax(mine))
            histogram = next(h for h in stats.histograms if h.type == h.STANDARD)
            assert histogram.num_nan == np.sum(np.isnan(mine))


def test_parts_of_other_features_merge_as_their_features():
    """Scalar numeric blocks merge as arrays when their features are the same; parts whose
    blocks hold other features (a column more) are folded first: the same statistics."""
    rng = np.random.default_rng(1)
    n = 5_000
    x = pa.array(rng.normal(2, 1, n), mask=rng.random(n) < 0.2)
    k = pa.array(rng.integers(0, 9, n))
    wide = pa.table({"x": x, "k": k, "y": pa.array(rng.normal(size=n))})
    narrow = wide.select(["x", "k"])
    half = n // 2
    parts = [
        split_statistics(wide.slice(0, half), 1000),
        split_statistics(narrow.slice(half), 1000),
    ]
    merged = statistics.SplitStatistics()
    for part in parts:
        merged.merge(statistics.decode_part(statistics.encode_part(part)))
    got = by_name(statistics.statistics_list(merged))
    whole = by_name(statistics.statistics_list(split_statistics(narrow, 1000, parts=2)))
    # Folded into an accumulator that has blocks of its own, then shipped as a part: kept.
    accumulator = statistics.SplitStatistics(features_of(wide.schema))
    accumulator.merge(statistics.decode_part(statistics.encode_part(parts[1])))
    shipped = statistics.decode_part(statistics.encode_part(accumulator))
    assert_same_exact_fields(
        by_name(statistics.statistics_list(shipped))["x"].num_stats,
        by_name(statistics.statistics_list(parts[1]))["x"].num_stats,
    )
    assert got["y"].num_stats.common_stats.num_non_missing == half
    assert got["y"].num_stats.common_stats.num_missing == n - half
    for name in ("x", "k"):
        assert_same_exact_fields(got[name].num_stats, whole[name].num_stats)
        assert got[name].num_stats.median == pytest.approx(whole[name].num_stats.median, abs=0.05)


@pytest.mark.parametrize("names", [["$bytes"], ["$bytes", "s"]])
def test_part_files_carry_any_column_name(names):
    """A part file's JSON marks where the sketches' bytes are with a key; a column of that name
    (alone, its features object has that one key) is data, not such a mark."""
    table = pa.table({name: pa.array(["x", "yy", None, "x"]) for name in names})
    shipped = by_name(statistics.statistics_list(split_statistics(table, 2, parts=2)))
    assert sorted(shipped) == sorted(names)
    strings = shipped["$bytes"].string_stats
    assert strings.common_stats.num_non_missing == 3
    assert [(v.value, v.frequency) for v in strings.top_values] == [("x", 2), ("yy", 1)]


def dictionary_column(values: list, dictionary: list, null_code: int = 999) -> pa.Array:
    """A string DictionaryArray as Parquet's dictionary pages arrive; null slots hold an
    arbitrary (here out-of-range) code, and `dictionary` may repeat a value."""
    codes = np.array([null_code if v is None else v for v in values], dtype=np.int32)
    valid = np.array([v is not None for v in values])
    indices = pa.Array.from_buffers(
        pa.int32(),
        len(values),
        [pa.array(valid).buffers()[1] if not valid.all() else None, pa.py_buffer(codes)],
    )
    return pa.DictionaryArray.from_arrays(indices, pa.array(dictionary, pa.string()))


def test_dictionary_pages_count_as_their_strings():
    """Strings kept as dictionary codes (repeated dictionary values, arbitrary codes in null
    slots) give the statistics and the records of the same strings decoded."""
    dictionary = ["a", "bb", "a", "ccc", "unused"]
    codes = [0, 1, None, 2, 3, 3, None, 0, 1, 2]
    coded = pa.table({"s": dictionary_column(codes, dictionary)})
    plain = pa.table({"s": pa.array([None if c is None else dictionary[c] for c in codes])})
    assert np.frombuffer(coded.column(0).chunk(0).indices.buffers()[1], np.int32)[2] == 999
    features = features_of(plain.schema)
    assert (
        encoding.encode(coded.to_batches()[0], features).buffer.tobytes()
        == encoding.encode(plain.to_batches()[0], features).buffer.tobytes()
    )
    ours, theirs = (
        by_name(statistics.statistics_list(split_statistics(t, 4, parts=2)))["s"]
        for t in (coded, plain)
    )
    assert ours == theirs
    assert {v.value: v.frequency for v in ours.string_stats.top_values} == {
        "a": 4,
        "bb": 2,
        "ccc": 2,
    }


def test_sketches_within_their_stated_bounds():
    """200,000 values: Misra-Gries counts within N/1,000 and every value more frequent than that
    listed; KMV uniques within 3 standard errors (3/sqrt(1,024)); quantile ranks within eps=1%."""
    rng = np.random.default_rng(1)
    n = 200_000
    words = rng.zipf(1.3, n) % 50_000
    numbers = rng.lognormal(0, 2, n)
    table = pa.table({"w": pa.array([f"w{w}" for w in words]), "v": pa.array(numbers)})
    stats = by_name(statistics.statistics_list(split_statistics(table, 8192, parts=2)))

    string_stats = stats["w"].string_stats
    exact = dict(zip(*np.unique([f"w{w}" for w in words], return_counts=True), strict=True))
    assert abs(string_stats.unique - len(exact)) <= 3 / np.sqrt(1024) * len(exact)
    listed = {b.label: b.sample_count for b in string_stats.rank_histogram.buckets}
    for value, count in listed.items():
        assert abs(count - exact[value]) <= n / 1000, value
    assert {v for v, c in exact.items() if c > n / 1000} <= set(listed)

    numeric = stats["v"].num_stats
    ordered = np.sort(numbers.astype(np.float32))
    rank = np.searchsorted(ordered, numeric.median) / n
    assert abs(rank - 0.5) <= 0.01
    quantiles = [h for h in numeric.histograms if h.type == h.QUANTILES][0]
    for i, bucket in enumerate(quantiles.buckets[:-1]):
        rank = np.searchsorted(ordered, bucket.high_value) / n
        assert abs(rank - (i + 1) / 10) <= 0.01 + 1 / n, i


def test_conversion_statistics_are_deterministic_and_load_in_tfdv(hive_dataset, tmp_path):
    import tensorflow_data_validation as tfdv

    written = []
    # Run b's two threads finish the shards in any order: the merge must not depend on it.
    threaded = ["--direct_running_mode=multi_threading", "--direct_num_workers=2"]
    for run, beam_args in (("a", IN_MEMORY_BEAM), ("b", threaded)):
        dataset, splits = plan.plan_conversion(hive_dataset)
        convert.convert(
            dataset,
            str(tmp_path / run / "examples"),
            splits,
            plan.OutputOptions(num_shards=3, read_batch_rows=50),
            beam_args,
            example_statistics_dir=str(tmp_path / run / "statistics"),
        )
        left = glob.glob(
            str(tmp_path / run / "**" / transform.STATISTICS_PARTS_DIR), recursive=True
        )
        assert not left  # the shards' parts go with the staging folder
        files = sorted(glob.glob(str(tmp_path / run / "statistics" / "Split-*" / "*")))
        assert [os.path.relpath(f, tmp_path / run) for f in files] == [
            os.path.join("statistics", "Split-eval", "FeatureStats.pb"),
            os.path.join("statistics", "Split-train", "FeatureStats.pb"),
        ]
        written.append([open(f, "rb").read() for f in files])
    assert written[0] == written[1]
    loaded = tfdv.load_stats_binary(
        str(tmp_path / "a" / "statistics" / "Split-train" / "FeatureStats.pb")
    )
    html = tfdv.utils.display_util.get_statistics_html(loaded)
    assert "facets-overview" in html and len(html) > 1000
    rows = sum(tfdv.load_stats_binary(f).datasets[0].num_examples for f in files)
    assert rows == 400


def test_statistics_folder_without_splits_is_named(tmp_path):
    from tfx_tabular.schemas.example_statistics import load_example_statistics

    with pytest.raises(ValueError, match=str(tmp_path)):
        load_example_statistics(str(tmp_path))


def test_conversion_without_statistics_writes_none(tmp_path):
    table = edge_table().drop(["none"])
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "part.parquet")
    dataset, splits = plan.plan_conversion(str(tmp_path / "in"))
    result = convert.convert(
        dataset, str(tmp_path / "out"), splits, beam_pipeline_args=IN_MEMORY_BEAM
    )
    assert result.example_statistics_dir is None
    assert not glob.glob(str(tmp_path / "out" / "**" / "FeatureStats.pb"), recursive=True)


def test_nested_lists_have_statistics_per_level():
    """tf.Example holds a list of lists as its flat values plus a row-lengths feature per inner
    level: the outer level's value counts are that feature's value counts, the inner lists'
    lengths its values (min, max, mean, histograms)."""
    table = pa.table(
        {
            "n": pa.array(
                [[[1, 2], [3]], [[4]], None, [[]], [[5, 6, 7]]], pa.list_(pa.list_(pa.int64()))
            )
        }
    )
    stats = by_name(statistics.statistics_list(split_statistics(table, 2)))
    leaves, inner = stats["n"].num_stats, stats["n.row_lengths_1"].num_stats
    assert (leaves.common_stats.min_num_values, leaves.common_stats.max_num_values) == (0, 3)
    outer = inner.common_stats  # lists per row: 2, 1, 1, 1 (one row null)
    assert (outer.num_non_missing, outer.min_num_values, outer.max_num_values) == (4, 1, 2)
    assert outer.tot_num_values == 5
    assert (inner.min, inner.max, inner.mean) == (0, 3, pytest.approx(7 / 5))
    assert inner.num_zeros == 1


def test_published_bytes_hold_the_rank_histograms_and_an_empty_split():
    """The bytes publish writes put each string feature's rank histogram inside its
    string_stats (the TFDV comparisons above read the same bytes); a split without rows is one
    dataset of 0 examples and no features, as TFDV writes it."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    parse = statistics_pb2.DatasetFeatureStatisticsList.FromString
    parsed = by_name(
        parse(statistics.serialized_statistics_list(split_statistics(edge_table(), 3)))
    )
    buckets = parsed["b"].string_stats.rank_histogram.buckets
    assert [(b.label, b.sample_count) for b in buckets][:1] == [("ok", 3.0)]
    assert len(buckets) == 4 and parsed["b"].string_stats.top_values[0].value == "ok"
    empty = parse(statistics.serialized_statistics_list(statistics.SplitStatistics()))
    assert empty == statistics_pb2.DatasetFeatureStatisticsList(
        datasets=[statistics_pb2.DatasetFeatureStatistics(num_examples=0)]
    )


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(2).normal(size=25_000),
        np.random.default_rng(3).integers(0, 5, 25_000).astype(np.float64),
        np.array([1.0, -0.0, 0.0, -np.inf, np.inf, 3.0, 1.0]),
    ],
)
def test_a_sketch_reads_out_its_items_ascending_with_their_weights(values):
    items, sizes = kll.empty(1)
    kll.add(items[0], sizes[0], values, np.empty(kll.STORE))
    expected = []
    for level in range(kll.MAX_LEVELS):
        start = kll._offset(sizes[0], level)
        expected += [(x, 2.0**level) for x in items[0][start : start + sizes[0][level]]]
    got_values, got_weights = kll.weighted(items[0], sizes[0])
    assert (np.diff(got_values) >= 0).all()
    assert sorted(zip(got_values, got_weights, strict=True)) == sorted(expected)
    assert got_weights.sum() == len(values)


def string_table(rows: int, seed: int) -> pa.Table:
    """Scalar strings of every sort the block meets: more distinct values than top-k keeps,
    values over 1,024 bytes, invalid UTF-8 and non-ASCII text, empty strings, nulls,
    dictionary pages (an unused and a repeated entry; a larger dictionary whose entries are
    used by some splits of a batch only, an empty one among them) and a column without a
    value."""
    rng = np.random.default_rng(seed)
    many = np.array([f"v{i}".encode() for i in range(3_000)], dtype=object)[
        rng.zipf(1.2, rows) % 3_000
    ]
    odd = np.array([b"", b"\xff\xfe", "é".encode(), b"x" * 1_500, b"y" * 1_025, b"ok"], object)
    codes = rng.integers(0, 4, rows)
    wide = [f"w{i}" if i % 50 else ("" if i == 0 else "ü") for i in range(600)]
    wide_codes = rng.zipf(1.5, rows) % 700  # codes from 600 on: nulls
    return pa.table(
        {
            "many": pa.array(many, pa.binary(), mask=rng.random(rows) < 0.1),
            "odd": pa.array(odd[rng.integers(0, len(odd), rows)], pa.binary()),
            "coded": dictionary_column(
                [None if c == 3 else int(c) for c in codes], ["a", "bb", "a", "unused"]
            ),
            "coded_wide": dictionary_column(
                [None if c >= len(wide) else int(c) for c in wide_codes], wide
            ),
            "none": pa.nulls(rows, pa.string()),
            "listed": pa.array([[b"a"]] * rows, pa.list_(pa.binary())),
        }
    )


def test_scalar_strings_block_gives_the_general_paths_statistics(monkeypatch):
    """The scalar string block (one compiled call per batch and split) gives the statistics of
    each feature's own accumulator, byte for byte: counts, top-k with its cuts and labels,
    distinct counts, invalid UTF-8 and the long-value placeholder, over batches and splits."""
    table = pa.concat_tables([string_table(3_000, seed) for seed in (1, 2)])
    features = features_of(table.schema)
    split_ids = np.random.default_rng(3).integers(0, 3, table.num_rows)

    def published() -> list[bytes]:
        accumulators = [statistics.SplitStatistics(features) for _ in range(3)]
        start = 0
        for batch in table.to_batches(max_chunksize=700):
            columns = flatten.feature_columns(batch, features)
            ids = split_ids[start : start + batch.num_rows]
            statistics.add_batch(accumulators, columns, PooledColumns(columns), ids)
            start += batch.num_rows
        return [statistics.serialized_statistics_list(a) for a in accumulators]

    assert statistics.SplitStatistics(features).string_block.names == [
        "many",
        "odd",
        "coded",
        "coded_wide",
        "none",
    ]
    with_block = published()
    monkeypatch.setattr(statistics.SplitStatistics, "_new_string_block", lambda self: None)
    assert published() == with_block
    many = by_name(statistics.statistics_list(split_statistics(table, 700)))["many"]
    assert many.string_stats.unique > 1_000  # more than top-k's counters: cuts were made

"""The in-process writers, each with its defaults and then with the settings users change:
`python write_python.py OUT [CASE...]` (in the writers' environment).

Every case writes OUT/<case>/ as the writer lays it out, then reads it back with the same writer's
own reader, defaults again, into OUT/<case>.arrow (common.dump).
"""

from __future__ import annotations

import decimal
import shutil

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from common import ROWS, base_table, dump, main


def _with_wider_types(table: pa.Table) -> pa.Table:
    """The base rows plus the physical types pyarrow writes that the others may not."""
    keys = range(table.num_rows)
    extra = {
        "u8": pa.array([i % 256 for i in keys], pa.uint8()),
        "u64": pa.array([2**63 - 1 - i for i in keys], pa.uint64()),
        "f32": pa.array([i / 4 for i in keys], pa.float32()),
        "ns": pa.array([1_700_000_000_123_456_789 + i for i in keys], pa.timestamp("ns", "UTC")),
        "dec18": pa.array(
            [decimal.Decimal(i * 10**12 + 7).scaleb(-4) for i in keys], pa.decimal128(18, 4)
        ),  # fmt: skip
        "dec38": pa.array(
            [decimal.Decimal(i * 10**30 + 1).scaleb(-10) for i in keys], pa.decimal128(38, 10)
        ),  # fmt: skip
        "cat": pa.array([["red", "green", "blue"][i % 3] for i in keys]).dictionary_encode(),
        "big": pa.array([f"large {i}" for i in keys], pa.large_string()),
        "bin": pa.array([bytes([i, 0, 255]) for i in keys], pa.binary()),
        "st": pa.array(
            [{"a": i, "b": f"b{i}"} for i in keys],
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
        ),  # fmt: skip
    }
    for name, array in extra.items():
        table = table.append_column(name, array)
    return table


def _bigquery_export_layout(path) -> None:
    """What BigQuery's EXPORT DATA (FORMAT PARQUET) writes, per Google's export documentation
    (BigQuery cannot run here): numbered files from the URI's `*`, no partitions nor marker
    files; NUMERIC and BIGNUMERIC as fixed-length DECIMAL(38, 9) and DECIMAL(76, 38), DATETIME
    and TIMESTAMP as INT64 microseconds not adjusted to UTC, TIME as INT64 microseconds, DATE,
    STRING, BYTES, RECORD as a group; SNAPPY compression."""
    keys = list(range(ROWS))
    table = pa.table(
        {
            "k": pa.array(keys, pa.int64()),
            "numeric": pa.array(
                [decimal.Decimal(i * 1001).scaleb(-9) for i in keys], pa.decimal128(38, 9)
            ),  # fmt: skip
            "bignumeric": pa.array(
                [decimal.Decimal(i * 7 + 1).scaleb(-38) * 10**30 for i in keys],
                pa.decimal256(76, 38),
            ),  # fmt: skip
            "datetime": pa.array([1_700_000_000_000_000 + i for i in keys], pa.timestamp("us")),
            "time": pa.array([i * 3_600_000_000 // 7 for i in keys], pa.time64("us")),
            "day": pa.array(keys, pa.int32()).cast(pa.date32()),
            "text": pa.array([None if i % 6 == 0 else f"t{i}" for i in keys]),
            "raw": pa.array([bytes([i]) for i in keys], pa.binary()),
            "record": pa.array([{"x": i, "y": float(i)} for i in keys]),
        }
    )
    for number, rows in enumerate((table.slice(0, 25), table.slice(25))):
        pq.write_table(rows, path / f"{number:012d}.parquet", compression="snappy")


def _pyarrow_cases(out, case):
    table = _with_wider_types(base_table())
    cases = {
        "pyarrow_plain": lambda path: pq.write_table(table, path / "data.parquet"),
        "pyarrow_partitioned": lambda path: pq.write_to_dataset(
            table, path, partition_cols=["p", "q"]
        ),
        "pyarrow_integer_decimals_v2_pages_zstd": lambda path: pq.write_table(
            table,
            path / "data.parquet",
            store_decimal_as_integer=True,
            data_page_version="2.0",
            compression="zstd",
        ),
        "pyarrow_string_view": lambda path: pq.write_table(
            table.set_column(4, "s", table["s"].cast(pa.string_view())), path / "data.parquet"
        ),
        "pyarrow_float16": lambda path: pq.write_table(
            table.append_column("half", pa.array([i / 2 for i in range(ROWS)], pa.float16())),
            path / "data.parquet",
        ),
        "bigquery_export_layout": _bigquery_export_layout,
        "pyarrow_gzip_brotli_lz4": lambda path: [
            pq.write_table(table.slice(i * 14, 14), path / f"{codec}.parquet", compression=codec)
            for i, codec in enumerate(["gzip", "brotli", "lz4"])
        ],
        "pyarrow_byte_stream_split_ints": lambda path: pq.write_table(
            table, path / "data.parquet", use_dictionary=False, use_byte_stream_split=["k", "f64"]
        ),
    }
    return cases, lambda path: pq.read_table(path)


def _pandas_frame() -> pd.DataFrame:
    frame = base_table().to_pandas()
    frame["cat"] = pd.Categorical([["red", "green", "blue"][i % 3] for i in range(ROWS)])
    frame["ns"] = pd.to_datetime(
        [1_700_000_000_123_456_789 + i for i in range(ROWS)], unit="ns", utc=True
    )
    frame["n32"] = pd.array([None if i % 5 == 1 else i for i in range(ROWS)], dtype="Int32")
    return frame


def _pandas_cases(out, case):
    frame = _pandas_frame()
    cases = {
        "pandas_plain": lambda path: frame.to_parquet(path / "data.parquet"),
        # pandas cannot read back its own null partitions ("Cannot yet unify dictionaries with
        # nulls"): this case has none.
        "pandas_partitioned": lambda path: frame.fillna({"p": "none"}).to_parquet(
            path, partition_cols=["p", "q"]
        ),
    }

    def read(path):
        return pa.Table.from_pandas(pd.read_parquet(path), preserve_index=False)

    return cases, read


def _duckdb_cases(out, case):
    db = duckdb.connect()
    db.register("base", base_table())
    db.execute(
        """CREATE TABLE t AS SELECT *,
             CAST(k AS UTINYINT) AS u8, CAST(k * 1000 AS UINTEGER) AS u32,
             CAST(k AS DECIMAL(4, 1)) AS dec4, CAST(k * 1e9 + 0.5 AS DECIMAL(18, 3)) AS dec18,
             CAST(k * 100000000000000000000 AS DECIMAL(38, 5)) AS dec38,
             CAST("at" AS TIMESTAMP_NS) + INTERVAL 1 MICROSECOND AS ns,
             CAST("at" AS TIMESTAMPTZ) AS tz,
             CAST(['red', 'green', 'blue'][k % 3 + 1] AS ENUM ('red', 'green', 'blue')) AS color,
             {'a': k, 'b': s} AS st
           FROM base"""
    )

    def copy(path, options=""):
        db.execute(f"COPY t TO '{path}' (FORMAT parquet{options})")

    cases = {
        "duckdb_plain": lambda path: copy(path / "data.parquet"),
        "duckdb_partitioned": lambda path: copy(path, ", PARTITION_BY (p, q)"),
        "duckdb_partition_columns_kept": lambda path: copy(
            path, ", PARTITION_BY (p, q), WRITE_PARTITION_COLUMNS true"
        ),
        "duckdb_zstd_small_row_groups": lambda path: copy(
            path / "data.parquet", ", COMPRESSION zstd, ROW_GROUP_SIZE 8"
        ),
        "duckdb_parquet_v2": lambda path: copy(path / "data.parquet", ", PARQUET_VERSION V2"),
    }

    def read(path):
        glob = f"{path}/**/*.parquet" if path.is_dir() else str(path)
        return db.sql(
            f"SELECT * FROM read_parquet('{glob}', hive_partitioning = true)"
        ).to_arrow_table()

    return cases, read


def _polars_frame() -> pl.DataFrame:
    frame = pl.from_arrow(base_table())
    keys = pl.col("k")
    return frame.with_columns(
        keys.cast(pl.UInt16).alias("u16"),
        (keys * 3).cast(pl.UInt64).alias("u64"),
        pl.Series("cat", [["red", "green", "blue"][i % 3] for i in range(ROWS)], pl.Categorical),
        pl.col("at").cast(pl.Datetime("ns")).alias("ns"),
        pl.col("at").dt.replace_time_zone("UTC").alias("tz"),
        pl.struct(a=keys, b=pl.col("s")).alias("st"),
    )


def _polars_cases(out, case):
    frame = _polars_frame()
    cases = {
        "polars_plain": lambda path: frame.write_parquet(path / "data.parquet"),
        "polars_partitioned": lambda path: frame.write_parquet(path, partition_by=["p", "q"]),
    }
    return cases, lambda path: pl.read_parquet(path).to_arrow()


WRITERS = [_pyarrow_cases, _pandas_cases, _duckdb_cases, _polars_cases]


def write_cases(out, wanted) -> None:
    for writer in WRITERS:
        cases, read = writer(out, wanted)
        for name, write in cases.items():
            if wanted and name not in wanted:
                continue
            path = out / name
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            write(path)
            data = path / "data.parquet"
            dump(read(data if data.exists() else path), out / f"{name}.arrow", name)


if __name__ == "__main__":
    main(write_cases)

"""Spark (pyspark, local mode) writes every case in one session, its slow start paid once:
`python write_spark.py OUT [CASE...]` (in the writers' environment; Java 17 on the PATH).

Each case is written by `DataFrame.write` with Spark's defaults and then with the settings users
change, and read back by `spark.read.parquet` (partition type inference on, as by default).
"""

from __future__ import annotations

import decimal
import shutil

import pyarrow as pa
from common import base_table, dump, main
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def _session() -> SparkSession:
    return (
        SparkSession.builder.master("local[1]")
        .appName("tfx-tabular writers")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "512m")
        .getOrCreate()
    )


def _frame(spark: SparkSession):
    table = base_table()
    keys = range(table.num_rows)
    table = table.append_column(
        "dec15",
        pa.array(
            [decimal.Decimal(i * 10**9 + 5).scaleb(-3) for i in keys], pa.decimal128(15, 3)
        ),  # fmt: skip
    ).append_column(
        "dec30",
        pa.array(
            [decimal.Decimal(i * 10**20 + 3).scaleb(-6) for i in keys], pa.decimal128(30, 6)
        ),  # fmt: skip
    )
    frame = spark.createDataFrame(table)
    return frame.select(
        "*",
        F.col("k").cast("byte").alias("tiny"),
        F.col("k").cast("short").alias("small"),
        F.col("f64").cast("float").alias("f32"),
        F.struct(F.col("k").alias("a"), F.col("s").alias("b")).alias("st"),
        F.encode(F.col("s"), "UTF-8").alias("bin"),
        F.col("at").cast("timestamp_ntz").alias("ntz"),
    ).repartition(2, "k")


def write_cases(out, wanted) -> None:
    spark = _session()
    frame = _frame(spark)
    cases = {
        "spark_plain": lambda path: frame.write.parquet(path),
        "spark_partitioned": lambda path: frame.write.partitionBy("p", "q").parquet(path),
        "spark_micros_zstd_legacy": lambda path: frame.write.option("compression", "zstd").parquet(
            path
        ),
    }
    settings = {
        "spark_micros_zstd_legacy": {
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
            "spark.sql.parquet.writeLegacyFormat": "true",
        }
    }
    for name, write in cases.items():
        if wanted and name not in wanted:
            continue
        path = out / name
        shutil.rmtree(path, ignore_errors=True)
        for key, value in settings.get(name, {}).items():
            spark.conf.set(key, value)
        write(str(path))
        for key in settings.get(name, {}):
            spark.conf.unset(key)
        dump(spark.read.parquet(str(path)).toArrow(), out / f"{name}.arrow", name)
    spark.stop()


if __name__ == "__main__":
    main(write_cases)

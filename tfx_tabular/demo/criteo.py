"""A Criteo-shaped, hive-partitioned Parquet dataset for the demo, tests and benchmarks.

Columns: `label` (0/1 click), `I1`..`I13` (int64 counts, ~5% null), `C1`..`C26` (8-hex-digit
categoricals, ~5% null, Zipf-distributed ids), `price` (float), `history` (a variable-length list
of int64 item ids). One folder per day: `day=2024-01-01/part-00000.parquet`, ...
"""

from __future__ import annotations

import datetime
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

NUM_INT = 13
NUM_CAT = 26


SCHEMA = pa.schema(
    [("label", pa.int64())]
    + [(f"I{i}", pa.int64()) for i in range(1, NUM_INT + 1)]
    + [(f"C{i}", pa.string()) for i in range(1, NUM_CAT + 1)]
    + [("price", pa.float64()), ("history", pa.list_(pa.int64()))]
)


def criteo_batch(num_rows: int, rng: np.random.Generator) -> pa.Table:
    def with_nulls(values: np.ndarray) -> pa.Array:
        return pa.array(values, mask=rng.random(num_rows) < 0.05)

    columns = {"label": pa.array((rng.random(num_rows) < 0.25).astype(np.int64))}
    for i in range(1, NUM_INT + 1):
        columns[f"I{i}"] = with_nulls(rng.geometric(0.02, num_rows).astype(np.int64) - 1)
    for i in range(1, NUM_CAT + 1):
        ids = (rng.zipf(1.3, num_rows) * 2654435761 + i) % (1 << 32)
        columns[f"C{i}"] = with_nulls(np.char.mod("%08x", ids).astype(object))
    columns["price"] = pa.array(rng.lognormal(2.0, 1.0, num_rows))
    lengths = rng.integers(0, 6, num_rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    columns["history"] = pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(rng.integers(0, 100_000, offsets[-1]).astype(np.int64))
    )
    return pa.table(columns, schema=SCHEMA)


def write_dataset(
    root: str,
    num_rows: int,
    days: int = 7,
    files_per_day: int = 2,
    row_group_size: int = 65_536,
    seed: int = 0,
) -> int:
    """Write `num_rows` rows spread over `days` partition folders; returns the file count."""
    rng = np.random.default_rng(seed)
    count = days * files_per_day
    per_file = np.full(count, num_rows // count)
    per_file[: num_rows % count] += 1
    start = datetime.date(2024, 1, 1)
    written = 0
    for index, rows in enumerate(per_file):
        day = start + datetime.timedelta(days=index // files_per_day)
        folder = os.path.join(root, f"day={day.isoformat()}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"part-{index % files_per_day:05d}.parquet")
        with pq.ParquetWriter(path, SCHEMA) as writer:
            for chunk_start in range(0, int(rows), row_group_size):
                chunk = min(row_group_size, int(rows) - chunk_start)
                writer.write_table(criteo_batch(chunk, rng), row_group_size=row_group_size)
        written += 1
    open(os.path.join(root, "_SUCCESS"), "w").close()  # as Spark leaves it; must be ignored
    return written

"""A Criteo-shaped, hive-partitioned Parquet dataset for the demo, tests and benchmarks.

Columns: `label` (0/1 click), `I1`..`I13` (int64 counts, ~5% null), `C1`..`C26` (8-hex-digit
categoricals, ~5% null, Zipf-distributed ids), `price` (float), `history` (a variable-length list
of int64 item ids). One folder per day: `day=2024-01-01/part-00000.parquet`, ...

The label is learnable: a click with probability `click_probability(row)`, the logistic of a known
function of five features (the rest are noise the model must learn to ignore), so ~25% of rows
are clicks. The log-odds are `LABEL_BIAS` + Σ `INT_WEIGHTS[c]` · (log1p(c) − `LOG_COUNT_CENTER`)
over I1..I3 + `C1_BUCKET_EFFECTS[last hex digit of C1 mod 4]` + `PRICE_WEIGHT` · (log(price) − 2);
a null I or C value adds nothing. The AUC of these probabilities on held-out rows is the best a
model can expect (`roc_auc(labels, click_probability(rows))`): the demo's summary shows it beside
the model's.
"""

from __future__ import annotations

import datetime
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

NUM_INT = 13
NUM_CAT = 26

LABEL_BIAS = -1.62
INT_WEIGHTS = {"I1": 0.8, "I2": -0.6, "I3": 0.5}
LOG_COUNT_CENTER = 3.3  # about the mean of log1p(count) for the counts' geometric(0.02)
C1_BUCKET_EFFECTS = (1.0, -0.6, 0.4, -0.8)
PRICE_WEIGHT = -0.4
SIGNAL_COLUMNS = (*INT_WEIGHTS, "C1", "price")
_HEX_DIGITS = pa.array(list("0123456789abcdef"))

SCHEMA = pa.schema(
    [("label", pa.int64())]
    + [(f"I{i}", pa.int64()) for i in range(1, NUM_INT + 1)]
    + [(f"C{i}", pa.string()) for i in range(1, NUM_CAT + 1)]
    + [("price", pa.float64()), ("history", pa.list_(pa.int64()))]
)


def _scalars(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A column as one value per row (null where absent): Parquet's scalars as they are, or the
    lists of at most one value that tf.Examples decode into."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        return column
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
    first = np.cumsum(lengths) - lengths  # where each row's value is in the flattened values
    values = pc.list_flatten(column)
    return pc.take(values, pa.array(np.minimum(first, max(len(values) - 1, 0)), mask=lengths == 0))


def scalar_values(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numeric column (scalars, or lists of at most one value) as float64, NaN where absent."""
    return _scalars(column).cast(pa.float64()).to_numpy(zero_copy_only=False)


def is_demo_schema(schema: pa.Schema) -> bool:
    """Whether a source has every column of the demo data, each of its type."""
    return all(
        field.name in schema.names and schema.field(field.name).type == field.type
        for field in SCHEMA
    )


def click_probability(table: pa.Table) -> np.ndarray:
    """The known probability of a click for each row of `table` (Parquet rows, or tf.Examples
    decoded into Arrow lists): the function the demo's labels are drawn from (module doc)."""
    logits = np.full(table.num_rows, LABEL_BIAS)
    for name, weight in INT_WEIGHTS.items():
        counts = np.nan_to_num(scalar_values(table.column(name)), nan=np.expm1(LOG_COUNT_CENTER))
        logits += weight * (np.log1p(counts) - LOG_COUNT_CENTER)
    ids = _scalars(table.column("C1")).cast(pa.string())
    digit = pc.index_in(pc.utf8_slice_codeunits(ids, -1), value_set=_HEX_DIGITS)
    digit = pc.fill_null(digit, -1).to_numpy(zero_copy_only=False)
    logits += np.where(digit >= 0, np.asarray(C1_BUCKET_EFFECTS)[digit % 4], 0.0)
    logits += PRICE_WEIGHT * (np.log(scalar_values(table.column("price"))) - 2.0)
    return 1.0 / (1.0 + np.exp(-logits))


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """The area under the ROC curve of `scores` for 0/1 `labels` (tied scores count half)."""
    labels = np.asarray(labels).astype(bool)
    positives = int(labels.sum())
    negatives = labels.size - positives
    if not positives or not negatives:
        raise ValueError("the AUC needs both positive and negative labels")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = (ends - (counts - 1) / 2.0)[inverse]  # average 1-based rank of each tie group
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def criteo_batch(num_rows: int, rng: np.random.Generator) -> pa.Table:
    def with_nulls(values: np.ndarray) -> pa.Array:
        return pa.array(values, mask=rng.random(num_rows) < 0.05)

    columns = {}
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
    probability = click_probability(pa.table({k: columns[k] for k in SIGNAL_COLUMNS}))
    columns["label"] = pa.array((rng.random(num_rows) < probability).astype(np.int64))
    return pa.table(columns).select(SCHEMA.names).cast(SCHEMA)


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

"""What every writer script shares (run in the writers' environment, not ours): the rows they
write, and the dump of what a writer reads back, which tests/integration/test_writers.py compares
with our conversion.

The dump is an Arrow IPC file (metadata V5, uncompressed) that our pinned pyarrow reads: types
newer than it (string/binary views, list views, 32/64-bit decimals) are cast to their older
equivalents first, and dictionaries decoded, which keeps every value.
"""

from __future__ import annotations

import datetime
import decimal
import sys
from pathlib import Path

import pyarrow as pa

ROWS = 40
# The partition values writers must keep apart and encode into folder names: escaping, non-ASCII,
# number- and date-looking text, and None (the writer's null-partition marker).
PARTITION_TEXT = ["x y", "é/ü=%", "007", "2024-01-01", "a:b", None, "Straße", "+1"]


def base_table(rows: int = ROWS) -> pa.Table:
    """The rows every writer writes: key `k` (unique), the types all of them have, two partition
    candidates (`p`: text, `q`: a small integer) and nulls in every nullable column."""
    keys = list(range(rows))

    def maybe(values, every=7):
        return [None if i % every == 3 else v for i, v in zip(keys, values, strict=True)]

    epoch = datetime.datetime(1970, 1, 1)
    return pa.table(
        {
            "k": pa.array(keys, pa.int64()),
            "i32": pa.array(maybe([i * 1000 - 7 for i in keys]), pa.int32()),
            "f64": pa.array(maybe([i / 8 - 1.5 for i in keys]), pa.float64()),
            "flag": pa.array(maybe([i % 3 == 0 for i in keys]), pa.bool_()),
            "s": pa.array(maybe([["", "ä€", "plain", "🙂x"][i % 4] + str(i) for i in keys])),
            "day": pa.array(
                maybe(
                    [datetime.date(1969, 12, 30) + datetime.timedelta(days=37 * i) for i in keys]
                ),
                pa.date32(),
            ),
            "at": pa.array(
                maybe(
                    [epoch + datetime.timedelta(seconds=86_399 * i, microseconds=i) for i in keys]
                ),
                pa.timestamp("us"),
            ),
            "dec": pa.array(
                maybe([decimal.Decimal(i * 125 - 2000).scaleb(-2) for i in keys]),
                pa.decimal128(9, 2),
            ),
            "tags": pa.array(
                maybe([list(range(i % 4)) for i in keys], every=5), pa.list_(pa.int64())
            ),
            "p": pa.array([PARTITION_TEXT[i % len(PARTITION_TEXT)] for i in keys]),
            "q": pa.array([i % 3 for i in keys], pa.int64()),
        }
    )


_NEWER_TYPES = (
    ("is_string_view", pa.large_string()),
    ("is_binary_view", pa.large_binary()),
)


def _older(t: pa.DataType) -> pa.DataType:
    """`t` with types our pinned pyarrow cannot read in IPC replaced by equivalent older ones."""
    for test, older in _NEWER_TYPES:
        if getattr(pa.types, test)(t):
            return older
    if getattr(pa.types, "is_list_view", lambda _: False)(t) or getattr(
        pa.types, "is_large_list_view", lambda _: False
    )(t):
        return pa.large_list(_older(t.value_type))
    if pa.types.is_decimal(t):
        return pa.decimal128(t.precision, t.scale) if t.precision <= 38 else t
    if pa.types.is_list(t):
        return pa.list_(_older(t.value_type))
    if pa.types.is_large_list(t):
        return pa.large_list(_older(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_older(f.type)) for f in t])
    if pa.types.is_dictionary(t):  # decoded: an IPC file holds one dictionary per column
        return _older(t.value_type)
    return t


def dump(table: pa.Table, path: Path, case: str, **metadata: str) -> None:
    """Write a writer's read-back of `case` as `path` (.arrow), `metadata` in its schema."""
    schema = pa.schema([f.with_type(_older(f.type)) for f in table.schema])
    table = table.cast(schema).replace_schema_metadata({"case": case, **metadata})
    options = pa.ipc.IpcWriteOptions(metadata_version=pa.ipc.MetadataVersion.V5)
    with (
        pa.OSFile(str(path), "wb") as sink,
        pa.ipc.new_file(sink, table.schema, options=options) as out,
    ):
        out.write_table(table)


def main(write_cases) -> None:
    """`script OUT [CASE...]`: `write_cases(out, wanted)` writes each case into OUT/<case>/ and its
    read-back into OUT/<case>.arrow (all cases when none are named)."""
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    write_cases(out, set(sys.argv[2:]))

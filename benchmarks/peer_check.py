"""Do a loader's batches equal the Parquet values, nulls included? (the `peers` section)

A sample of a loader's rows, each column as a list of values per row (`per_row`), is matched to
pyarrow's read of the same rows of the original dataset (`reference`) by their `price` (never
null, all but unique in the Criteo-shaped data; a price two rows share is left out), then
compared column by column (`compare`): non-null values must be equal (floats to float32
precision, strings as UTF-8 bytes), and what stands where Parquet has a null is named: kept (no
value), `b'None'`, INT64_MIN, NaN or a fill (0, '').

Runs in every peer's environment: the standard library at the top, numpy and pyarrow inside.
"""

from __future__ import annotations

import math

KEY = "price"
INT64_MIN = -(2**63)
KEPT = "kept as null"
FILLED = "filled (0 / '')"


def per_row(value) -> list[list]:
    """A batch's column as a list of values per row: a tf.SparseTensor's or tf.RaggedTensor's
    values row by row (a row without one: []), a dense tensor's or array's rows (a scalar: [x])."""
    import numpy as np

    if hasattr(value, "dense_shape"):  # tf.SparseTensor: a row may hold no value
        rows = [[] for _ in range(int(value.dense_shape[0]))]
        for (row, *_), item in zip(value.indices.numpy(), value.values.numpy(), strict=True):
            rows[row].append(item)
        return rows
    if hasattr(value, "to_list"):  # tf.RaggedTensor
        return [list(np.ravel(row)) for row in value.to_list()]
    array = np.asarray(value)
    return [list(np.ravel(row)) for row in (array.reshape(len(array), -1) if array.ndim else [])]


def _plain(value):
    """A value as Python compares it: numpy scalars unwrapped, text as bytes."""
    if hasattr(value, "item"):
        value = value.item()
    return value.encode() if isinstance(value, str) else value


def _null_kind(got: list) -> str:
    if not got or got == [None]:
        return KEPT
    if len(got) != 1:
        return f"other ({got!r:.20})"
    value = _plain(got[0])
    if value == b"None":
        return "b'None'"
    if value == INT64_MIN:
        return "INT64_MIN"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if value in (0, b"", 0.0):
        return FILLED
    return f"other ({got!r:.20})"


def _equal(expected, got: list) -> bool:
    wanted = expected if isinstance(expected, list) else [expected]
    if len(wanted) != len(got):
        return False
    for a, b in zip(wanted, (_plain(v) for v in got), strict=True):
        if isinstance(a, float) or isinstance(b, float):
            if not math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-30):
                return False
        elif _plain(a) != b:
            return False
    return True


def compare(expected: list[dict], got: dict[str, list[list]]) -> dict:
    """`expected`: pyarrow's rows (`to_pylist`); `got`: the loader's columns, `per_row` each, in
    the same row order. Returns the columns whose values differ or are missing, and for each
    kind of null stand-in, the columns that use it."""
    differ, missing, nulls = [], [], {}
    for column in expected[0] if expected else []:
        if column not in got:
            missing.append(column)
            continue
        kinds = set()
        for row, values in zip(expected, got[column], strict=True):
            if row[column] is None:
                kinds.add(_null_kind(values))
            elif not _equal(row[column], values):
                differ.append(column)
                break
        for kind in kinds:
            nulls.setdefault(kind, []).append(column)
    return {"rows": len(expected), "differ": differ, "missing": missing, "nulls": nulls}


def verdict(checked: dict, note: str = "") -> str:
    """`compare`'s answer in one line (`note` first: e.g. that the loader read a filled copy)."""
    parts = [note] if note else []
    if not checked["rows"]:
        parts.append("no rows matched to check")
    elif checked["differ"]:
        parts.append(f"values differ: {', '.join(checked['differ'])}")
    else:
        parts.append(f"values equal on {checked['rows']:,} rows")
    if checked["missing"]:
        parts.append(f"columns absent: {', '.join(checked['missing'])}")
    for kind, columns in sorted(checked["nulls"].items()):
        parts.append(f"nulls {kind} ({_columns(columns)})")
    return "; ".join(parts)


def _columns(columns: list[str]) -> str:
    kinds = sorted({c.rstrip("0123456789") for c in columns})
    return f"{len(columns)} columns: {', '.join(k + '…' if k in 'IC' else k for k in kinds)}"


def reference(parquet_dir: str, keys: list[float]) -> tuple[list[dict], list[int]]:
    """The rows pyarrow reads of the original dataset whose (float32) `price` is one of `keys`, and
    the positions in `keys` they answer; keys that no row or several rows hold are left out."""
    import glob
    import os

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = sorted(glob.glob(os.path.join(parquet_dir, "**", "*.parquet"), recursive=True))
    table = pa.concat_tables([pq.read_table(p) for p in paths])
    prices = table.column(KEY).to_numpy().astype(np.float32)
    unique, first, counts = np.unique(prices, return_index=True, return_counts=True)
    wanted = np.asarray(keys, dtype=np.float32)
    found = np.searchsorted(unique, wanted).clip(0, len(unique) - 1)
    ok = (unique[found] == wanted) & (counts[found] == 1)
    positions = np.flatnonzero(ok)
    rows = table.take(pa.array(first[found[positions]])).to_pylist()
    return rows, [int(p) for p in positions]


def _strings_mapped(value, strings_as):
    if isinstance(value, list):
        return [_strings_mapped(v, strings_as) for v in value]
    return strings_as(_plain(value)) if isinstance(value, (str, bytes)) else value


def check(parquet_dir: str, got: dict[str, list[list]], note: str = "", strings_as=None) -> str:
    """The one-line verdict for a loader's sample `got` (columns `per_row`, with `price`);
    `strings_as` maps the Parquet strings to what the loader gives for them (ours' integer form:
    their fingerprints)."""
    if KEY not in got:
        return f"{note + '; ' if note else ''}not checked: no {KEY} column to match rows by"
    rows, positions = reference(parquet_dir, [float(v[0]) for v in got[KEY]])
    if strings_as is not None:
        rows = [{c: _strings_mapped(v, strings_as) for c, v in row.items()} for row in rows]
    sample = {c: [values[p] for p in positions] for c, values in got.items()}
    return verdict(compare(rows, sample), note)

"""tfx_tabular.coders.encoding: Arrow record batches → serialized tf.Example, checked against independent
expectations, tf.io.parse_example, and tfx_bsl's encoder and decoder. No Beam here."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import functools
import os
import struct
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tfx_tabular.coders.encoding import encode
from tfx_tabular.coders.flatten import ConversionError
from tfx_tabular.source.mapping import UnsupportedColumnError, features_of

tf = pytest.importorskip("tensorflow")
from tensorflow.core.example import example_pb2  # noqa: E402
from tfx_bsl.coders import example_coder  # noqa: E402

D = decimal.Decimal
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT, FLOAT, BYTES = "int64_list", "float_list", "bytes_list"
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))
# TFX_TABULAR_EXAMPLES_SCALE=20 runs every property test with 20x the examples (a longer soak).
SCALE = float(os.environ.get("TFX_TABULAR_EXAMPLES_SCALE", "1"))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


# --- the type table, written independently of tfx_tabular.source.mapping ------------------------


def _epoch_int(value, unit: str) -> int:
    """A datetime / pandas Timestamp from to_pylist() → integer since the UTC epoch in `unit`."""
    if isinstance(value, pd.Timestamp):
        ns = value.value
        return ns // {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
    delta = value - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    micros = (delta.days * 86_400 + delta.seconds) * 10**6 + delta.microseconds
    return micros // {"s": 10**6, "ms": 10**3, "us": 1}[unit]


def _days(value: datetime.date) -> int:
    return (value - datetime.date(1970, 1, 1)).days


def _f32(value) -> np.float32:
    with np.errstate(over="ignore"):  # float64 beyond float32's range → ±inf, as documented
        return np.float32(value)


@dataclasses.dataclass
class Scalar:
    """A leaf type: how to build an Arrow array from Python values, and what each becomes."""

    label: str
    arrow_type: pa.DataType
    values: st.SearchStrategy
    kind: str
    expect: Callable[[Any], Any]  # one to_pylist() value → the tf.Example value
    build: Optional[Callable[[list], pa.Array]] = None
    decimal_as: str = "float"

    def array(self, values: list) -> pa.Array:
        if self.build is not None:
            return self.build(values)
        return pa.array(values, self.arrow_type)


def _float16(values: list) -> pa.Array:
    mask = np.array([v is None for v in values], dtype=bool)
    data = np.array([0.0 if v is None else v for v in values], dtype=np.float16)
    return pa.array(data, pa.float16(), mask=mask)


def _dictionary(values: list) -> pa.Array:
    return pa.array(values, pa.string()).dictionary_encode()


def _ints(bits: int, signed: bool = True) -> st.SearchStrategy:
    if signed:
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return st.integers(0, 2**bits - 1)


def _floats(width: int) -> st.SearchStrategy:
    return st.one_of(
        st.floats(width=width, allow_nan=True, allow_infinity=True),
        st.sampled_from([0.0, -0.0, float("nan"), float("inf"), float("-inf")]),
    )


def _decimals(precision: int, scale: int, digits: int) -> st.SearchStrategy:
    bound = 10 ** min(precision, digits) - 1
    return st.integers(-bound, bound).map(lambda u: D(f"{u}E{-scale}"))


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)
TEXT = st.one_of(st.just(""), st.just("ü€😀"), TEXT)
BINARY = st.one_of(st.just(b""), st.just(b"\xff\xfe\x00\x80"), st.binary(max_size=6))
TZ = "America/New_York"
# Timestamps within what datetime / pandas can hand back from to_pylist().
TS_RANGE = {"s": 6 * 10**10, "ms": 6 * 10**13, "us": 6 * 10**16, "ns": 9 * 10**18}

SCALARS = [
    Scalar("bool", pa.bool_(), st.booleans(), INT, int),
    *[Scalar(f"int{b}", getattr(pa, f"int{b}")(), _ints(b), INT, int) for b in (8, 16, 32, 64)],
    *[
        Scalar(f"uint{b}", getattr(pa, f"uint{b}")(), _ints(b, False), INT, int)
        for b in (8, 16, 32)
    ],
    Scalar("uint64", pa.uint64(), st.integers(0, INT64_MAX), INT, int),
    Scalar("float16", pa.float16(), _floats(16), FLOAT, _f32, build=_float16),
    Scalar("float32", pa.float32(), _floats(32), FLOAT, _f32),
    Scalar("float64", pa.float64(), _floats(64), FLOAT, _f32),
    Scalar("string", pa.string(), TEXT, BYTES, lambda v: v.encode()),
    Scalar("large_string", pa.large_string(), TEXT, BYTES, lambda v: v.encode()),
    Scalar("binary", pa.binary(), BINARY, BYTES, bytes),
    Scalar("large_binary", pa.large_binary(), BINARY, BYTES, bytes),
    Scalar("fixed_size_binary", pa.binary(3), st.binary(min_size=3, max_size=3), BYTES, bytes),
    Scalar(
        "dictionary",
        pa.dictionary(pa.int32(), pa.string()),
        st.sampled_from(["a", "", "ß", "a"]),
        BYTES,
        lambda v: v.encode(),
        build=_dictionary,
    ),
    Scalar("date32", pa.date32(), st.integers(-719_162, 2_932_896), INT, _days),
    Scalar(
        "date64",
        pa.date64(),
        st.integers(-719_162, 2_932_896).map(lambda d: d * 86_400_000),
        INT,
        lambda v: _days(v) * 86_400_000,
    ),
    *[
        Scalar(
            f"timestamp_{u}",
            pa.timestamp(u, TZ),
            st.integers(-TS_RANGE[u], TS_RANGE[u]),
            INT,
            functools.partial(_epoch_int, unit=u),
        )
        for u in ("s", "ms", "us", "ns")
    ],
    Scalar(
        "decimal128(10,2)",
        pa.decimal128(10, 2),
        _decimals(10, 2, 10),
        FLOAT,
        lambda v: _f32(float(v)),
    ),
    Scalar(
        "decimal128(38,10)",
        pa.decimal128(38, 10),
        _decimals(38, 10, 38),
        FLOAT,
        lambda v: _f32(float(v)),
    ),
    Scalar(
        "decimal128(10,2)/bytes",
        pa.decimal128(10, 2),
        _decimals(10, 2, 10),
        BYTES,
        lambda v: format(v, "f").encode(),
        decimal_as="bytes",
    ),
    Scalar(
        "decimal128(18,5)/bytes",
        pa.decimal128(18, 5),
        _decimals(18, 5, 18),
        BYTES,
        lambda v: format(v, "f").encode(),
        decimal_as="bytes",
    ),
    Scalar(
        "decimal128(18,0)/bytes",
        pa.decimal128(18, 0),
        _decimals(18, 0, 18),
        BYTES,
        lambda v: format(v, "f").encode(),
        decimal_as="bytes",
    ),
]
BY_LABEL = {s.label: s for s in SCALARS}


@dataclasses.dataclass
class Column:
    """A generated column: its Arrow array, and per row the expected {feature: None | (kind, values)}."""

    name: str
    label: str
    array: pa.Array
    decimal_as: str
    expected: Callable[[pa.Array], list]  # array (possibly sliced) → per-row expectations
    nested: bool = False  # ragged (list of lists): not comparable with tfx_bsl's flat encoder


def _list_array(list_type: pa.DataType, rows: list, child: pa.Array, lengths: list) -> pa.Array:
    """A (large_/fixed_size_) list array over `child` with `lengths[i]` child values per row; a
    None row is null even if it has backing child values (allowed by the Arrow format)."""
    validity = pa.array([r is not None for r in rows], pa.bool_()).buffers()[1]
    if pa.types.is_fixed_size_list(list_type):
        buffers = [validity]
    else:
        dtype = np.int64 if pa.types.is_large_list(list_type) else np.int32
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(dtype)
        buffers = [validity, pa.py_buffer(offsets.tobytes())]
    array = pa.Array.from_buffers(list_type, len(rows), buffers, children=[child])
    array.validate(full=True)
    return array


@st.composite
def columns(draw, name: str, n: int) -> Column:
    shape = draw(
        st.sampled_from(
            ["scalar"] * 4 + ["list", "large_list", "fixed_size_list", "nested", "struct"]
        )
    )
    if shape == "nested":
        rows = draw(
            st.lists(
                st.none()
                | st.lists(st.lists(st.integers(INT64_MIN, INT64_MAX), max_size=3), max_size=3),
                min_size=n,
                max_size=n,
            )
        )
        array = pa.array(rows, pa.list_(pa.list_(pa.int64())))

        def expected(arr):
            out = []
            for row in arr.to_pylist():
                if row is None:
                    out.append({name: None, f"{name}.row_lengths_1": None})
                else:
                    out.append(
                        {
                            name: (INT, [v for inner in row for v in inner]),
                            f"{name}.row_lengths_1": (INT, [len(inner) for inner in row]),
                        }
                    )
            return out

        return Column(name, "list<list<int64>>", array, "float", expected, nested=True)
    if shape == "struct":
        rows = draw(
            st.lists(
                st.none()
                | st.fixed_dictionaries(
                    {"a": st.none() | st.integers(INT64_MIN, INT64_MAX), "b": st.none() | TEXT}
                ),
                min_size=n,
                max_size=n,
            )
        )
        array = pa.array(rows, pa.struct([("a", pa.int64()), ("b", pa.string())]))

        def expected(arr):
            out = []
            for row in arr.to_pylist():
                row = row or {"a": None, "b": None}
                out.append(
                    {
                        f"{name}.a": None if row["a"] is None else (INT, [row["a"]]),
                        f"{name}.b": None if row["b"] is None else (BYTES, [row["b"].encode()]),
                    }
                )
            return out

        return Column(name, "struct<a:int64,b:string>", array, "float", expected)

    scalar = draw(st.sampled_from(SCALARS))
    if shape == "scalar":
        rows = draw(st.lists(st.none() | scalar.values, min_size=n, max_size=n))
        array = scalar.array(rows)
    else:
        size = draw(st.integers(1, 3)) if shape == "fixed_size_list" else None
        lists = st.lists(scalar.values, min_size=size or 0, max_size=size or 4)
        rows = draw(st.lists(st.none() | lists, min_size=n, max_size=n))
        # Null rows of variable-length lists may still own child values ("garbage").
        backing = [
            r
            if r is not None
            else (
                draw(st.lists(scalar.values, min_size=size, max_size=size))
                if size
                else draw(st.lists(scalar.values, max_size=2))
            )
            for r in rows
        ]
        child = scalar.array([v for r in backing for v in r])
        list_type = {"list": pa.list_, "large_list": pa.large_list}.get(shape)
        list_type = list_type(child.type) if list_type else pa.list_(child.type, size)
        array = _list_array(list_type, rows, child, [len(r) for r in backing])

    def expected(arr):
        out = []
        for row in arr.to_pylist():
            if row is None:
                out.append({name: None})
            elif shape == "scalar":
                out.append({name: (scalar.kind, [scalar.expect(row)])})
            else:
                out.append({name: (scalar.kind, [scalar.expect(v) for v in row])})
        return out

    return Column(name, f"{shape}<{scalar.label}>", array, scalar.decimal_as, expected)


@st.composite
def batches(draw):
    """A record batch of 1–4 generated columns, possibly sliced (non-zero offsets)."""
    count = draw(st.integers(1, 4))
    n = draw(st.integers(0, 7))
    prefix = draw(st.sampled_from(["c", "ü€ "]))  # feature names are UTF-8 keys
    cols = [draw(columns(f"{prefix}{i}", n)) for i in range(count)]
    batch = pa.RecordBatch.from_arrays([c.array for c in cols], [c.name for c in cols])
    if draw(st.booleans()):  # a slice: every array gets a non-zero offset
        start = draw(st.integers(0, n))
        batch = batch.slice(start, draw(st.integers(0, n - start)))
    # One decimal_as per batch: keep the columns that agree with the first decimal column's.
    modes = {c.decimal_as for c in cols if "decimal" in c.label}
    decimal_as = "bytes" if modes == {"bytes"} else "float"
    keep = [i for i, c in enumerate(cols) if "decimal" not in c.label or c.decimal_as == decimal_as]
    batch = pa.RecordBatch.from_arrays(
        [batch.column(i) for i in keep], [cols[i].name for i in keep]
    )
    return batch, [cols[i] for i in keep], decimal_as


# --- comparing examples ------------------------------------------------------------------------


def _canon_value(kind: str, value):
    if kind == FLOAT:
        f = _f32(value)
        return "nan" if np.isnan(f) else struct.unpack("<I", struct.pack("<f", f))[0]
    return value


def _canon(kind_values) -> Optional[tuple]:
    if kind_values is None:
        return None
    kind, values = kind_values
    return kind, tuple(_canon_value(kind, v) for v in values)


def parsed(record: bytes) -> dict:
    """A serialized tf.Example → {feature: None (no kind) | (kind, canonical values)}."""
    example = example_pb2.Example.FromString(record)
    out = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        out[key] = None if kind is None else _canon((kind, list(getattr(feature, kind).value)))
    return out


def expected_rows(batch: pa.RecordBatch, cols: list) -> list[dict]:
    rows = [dict() for _ in range(batch.num_rows)]
    for i, col in enumerate(cols):
        for row, features in zip(rows, col.expected(batch.column(i)), strict=True):
            row.update({k: _canon(v) for k, v in features.items()})
    return rows


def _large_list_column(kind: str, cells: list) -> pa.Array:
    """Expected cells of one feature → the large_list<int64|float32|large_binary> tfx_bsl encodes."""
    values = [v for c in cells if c is not None for v in c[1]]
    if kind == INT:
        child = pa.array(values, pa.int64())
    elif kind == FLOAT:
        bits = [0x7FC00000 if v == "nan" else v for v in values]
        child = pa.array(np.array(bits, dtype=np.uint32).view(np.float32), pa.float32())
    else:
        child = pa.array(values, pa.large_binary())
    offsets = np.concatenate([[0], np.cumsum([0 if c is None else len(c[1]) for c in cells])])
    mask = pa.array([c is None for c in cells], pa.bool_())
    return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), child, mask=mask)


def tfx_bsl_records(expected: list[dict], names: list[str], kinds: dict) -> list[bytes]:
    arrays = [_large_list_column(kinds[n], [row[n] for row in expected]) for n in names]
    batch = pa.RecordBatch.from_arrays(arrays, names)
    return example_coder.RecordBatchToExamplesEncoder().encode(batch)


# --- 1. property-based round trip ----------------------------------------------------------------


@settings(max_examples=examples(400), **SETTINGS)
@given(batches())
def test_round_trip_matches_independent_expectations_and_tfx_bsl(generated):
    batch, cols, decimal_as = generated
    features = features_of(batch.schema, decimal_as)
    records = encode(batch, features).records()
    assert len(records) == batch.num_rows
    expected = expected_rows(batch, cols)
    kinds = {f.name: {1: BYTES, 2: INT, 3: FLOAT}[int(f.kind)] for f in features}
    for record, want in zip(records, expected, strict=True):
        got = parsed(record)
        assert got == want, (batch.schema, [c.label for c in cols])
        for name, value in got.items():  # every typed value has the feature's declared kind
            assert value is None or value[0] == kinds[name]

    # tfx_bsl's encoder, on the same data as large_list<int64|float32|large_binary> columns.
    ragged = {c.name for c in cols if c.nested}
    flat = [f.name for f in features if f.column not in ragged]
    if flat and batch.num_rows:
        theirs = tfx_bsl_records(expected, flat, kinds)
        for ours, their in zip(records, theirs, strict=True):
            mine = {k: v for k, v in parsed(ours).items() if k in flat}
            assert mine == parsed(their)


def test_the_conventions_spelled_out():
    """Null → no kind; [] → empty typed list; 0, False, "", NaN, ±inf kept; uint64 at int64 max."""
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([0, None, 7], pa.int64()),
            pa.array([False, True, None]),
            pa.array(["", None, "x"]),
            pa.array([float("nan"), float("inf"), float("-inf")], pa.float64()),
            pa.array([[], None, [1.5]], pa.list_(pa.float32())),
            pa.array([0, INT64_MAX, None], pa.uint64()),
            pa.array([1e300, -1e-300, 0.1], pa.float64()),
            pa.array([[[1], []], [], None], pa.list_(pa.list_(pa.int64()))),
            pa.array(
                [{"a": 0, "b": ""}, None, {"a": None, "b": "y"}],
                pa.struct([("a", pa.int64()), ("b", pa.string())]),
            ),
        ],
        ["i", "b", "s", "f", "l", "u", "d", "n", "st"],
    )
    rows = [parsed(r) for r in encode(batch, features_of(batch.schema)).records()]
    nan = "nan"
    bits = lambda v: _canon_value(FLOAT, v)  # noqa: E731
    assert rows[0] == {
        "i": (INT, (0,)),
        "b": (INT, (0,)),
        "s": (BYTES, (b"",)),
        "f": (FLOAT, (nan,)),
        "l": (FLOAT, ()),
        "u": (INT, (0,)),
        "d": (FLOAT, (bits(float("inf")),)),
        "n": (INT, (1,)),
        "n.row_lengths_1": (INT, (1, 0)),
        "st.a": (INT, (0,)),
        "st.b": (BYTES, (b"",)),
    }
    assert rows[1] == {
        "i": None,
        "b": (INT, (1,)),
        "s": None,
        "f": (FLOAT, (bits(float("inf")),)),
        "l": None,
        "u": (INT, (INT64_MAX,)),
        "d": (FLOAT, (bits(-0.0),)),
        "n": (INT, ()),
        "n.row_lengths_1": (INT, ()),
        "st.a": None,
        "st.b": None,
    }
    assert rows[2] == {
        "i": (INT, (7,)),
        "b": None,
        "s": (BYTES, (b"x",)),
        "f": (FLOAT, (bits(float("-inf")),)),
        "l": (FLOAT, (bits(1.5),)),
        "u": None,
        "d": (FLOAT, (bits(np.float32(0.1)),)),
        "n": None,
        "n.row_lengths_1": None,
        "st.a": None,
        "st.b": (BYTES, (b"y",)),
    }


def test_list_of_struct_and_struct_of_list():
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(
                [[{"a": 1, "b": "x"}, {"a": 2, "b": ""}], [], None],
                pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())])),
            ),
            pa.array([{"l": [1, 2]}, {"l": None}, None], pa.struct([("l", pa.list_(pa.int64()))])),
        ],
        ["ls", "sl"],
    )
    rows = [parsed(r) for r in encode(batch, features_of(batch.schema)).records()]
    assert rows == [
        {"ls.a": (INT, (1, 2)), "ls.b": (BYTES, (b"x", b"")), "sl.l": (INT, (1, 2))},
        {"ls.a": (INT, ()), "ls.b": (BYTES, ()), "sl.l": None},
        {"ls.a": None, "ls.b": None, "sl.l": None},
    ]


@pytest.mark.parametrize(
    "array",
    [
        pa.array([None, None], pa.list_(pa.int64(), 2)),
        pa.array([None], pa.list_(pa.string(), 1)),
        pa.array([[1, 2], None, None], pa.list_(pa.int64(), 2)).slice(1),
        # A null variable-length list may own child values too (the Arrow format allows it).
        pa.Array.from_buffers(
            pa.list_(pa.int64()),
            1,
            [pa.array([False]).buffers()[1], pa.py_buffer(np.array([0, 2], np.int32).tobytes())],
            children=[pa.array([1, 2])],
        ),
    ],
    ids=["fixed_size_list", "fixed_size_list_of_string", "sliced_fixed_size_list", "list"],
)
def test_all_null_list_columns_encode(array):
    """A batch in which a list column is entirely null encodes as "no kind" in every row.

    Guards against a regression to pc.list_flatten on such a column: pyarrow 10's raises
    ArrowInvalid "Must pass at least one array" when every list is null but the nulls own child
    values - always so for fixed_size_list.
    """
    batch = pa.RecordBatch.from_arrays([pa.array(range(len(array))), array], ["i", "l"])
    rows = [parsed(r) for r in encode(batch, features_of(batch.schema)).records()]
    assert [row["l"] for row in rows] == [None] * len(array)


SLICED_FIXED_SIZE_BINARY = """
import pyarrow as pa
from tfx_tabular.coders.encoding import encode
from tfx_tabular.source.mapping import features_of
batch = pa.RecordBatch.from_arrays(
    [pa.array([b"abc", b"def", b"ghi"], pa.binary(3)),
     pa.array([None, [b"abc"], [b"def", b"ghi"]], pa.list_(pa.binary(3)))], ["f", "l"])
for part in (batch.slice(1), batch.slice(2, 1)):
    print(len(encode(part, features_of(part.schema)).records()))
"""


def test_sliced_fixed_size_binary_does_not_crash():
    """Guards against a regression to casting fixed_size_binary values (encoding._leaf_values):
    pyarrow 10 segfaults casting a sliced fixed_size_binary array to large_binary, which would
    kill the process on a sliced batch, or on a list<fixed_size_binary> whose flattened values
    start at an offset. Run in a subprocess, so a crash fails the test, not the suite."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", SLICED_FIXED_SIZE_BINARY],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"exit code {result.returncode}: {result.stderr[-2000:]}"
    assert result.stdout.split() == ["2", "1"]


# --- decimals as text: edge cases ----------------------------------------------------------------


def _decimal_text(values: list, arrow_type: pa.DataType) -> list:
    batch = pa.RecordBatch.from_arrays([pa.array(values, arrow_type)], ["d"])
    return [parsed(r)["d"] for r in encode(batch, features_of(batch.schema, "bytes")).records()]


def test_decimal_text_of_the_int64_minimum():
    # -2**63 fits the 64-bit fast path, but np.abs(-2**63) overflows back to -2**63.
    assert _decimal_text([D(INT64_MIN)], pa.decimal128(19, 0)) == [
        (BYTES, (b"-9223372036854775808",))
    ]
    assert _decimal_text([D(INT64_MIN).scaleb(-2)], pa.decimal128(19, 2)) == [
        (BYTES, (b"-92233720368547758.08",))
    ]


def test_decimal_text_with_a_scale_above_18():
    # The unscaled values fit in int64, but 10**scale does not: a TypeError from pyarrow.compute.
    values = [D("0.5"), D("-0.0000000000000000001"), D(0)]
    assert _decimal_text(values, pa.decimal128(20, 19)) == [
        (BYTES, (format(v.quantize(D(1).scaleb(-19)), "f").encode(),)) for v in values
    ]


def test_decimal256_as_text_is_exact_or_refused():
    values = [D("1.50"), D("-2.25"), None, D("12345678901234.56")]
    try:
        got = _decimal_text(values, pa.decimal256(40, 2))
    except (ConversionError, UnsupportedColumnError):
        return  # refusing decimal256 would be acceptable; silently wrong text is not
    assert got == [
        (BYTES, (b"1.50",)),
        (BYTES, (b"-2.25",)),
        None,
        (BYTES, (b"12345678901234.56",)),
    ]


def test_decimal_text_beyond_18_digits_is_a_conversion_error():
    with pytest.raises(ConversionError, match="18 digits"):
        _decimal_text([D(10) ** 20], pa.decimal128(38, 0))


# --- 2. parsing with TensorFlow ------------------------------------------------------------------

TF_SCALARS = [
    "bool",
    "int8",
    "int64",
    "uint32",
    "uint64",
    "float16",
    "float64",
    "string",
    "binary",
    "large_string",
    "fixed_size_binary",
    "dictionary",
    "date32",
    "timestamp_ns",
    "timestamp_s",
    "decimal128(10,2)",
]


@st.composite
def tf_batches(draw):
    n = draw(st.integers(1, 5))
    arrays, specs = [], []
    for i, label in enumerate(
        draw(st.lists(st.sampled_from(TF_SCALARS), min_size=1, max_size=4, unique=True))
    ):
        scalar = BY_LABEL[label]
        shape = draw(st.sampled_from(["required", "optional", "list", "nested"]))
        name = f"c{i}"
        if shape in ("required", "optional"):
            value = scalar.values if shape == "required" else st.none() | scalar.values
            arrays.append(scalar.array(draw(st.lists(value, min_size=n, max_size=n))))
        elif shape == "list":
            rows = draw(
                st.lists(st.none() | st.lists(scalar.values, max_size=3), min_size=n, max_size=n)
            )
            child = scalar.array([v for r in rows if r is not None for v in r])
            arrays.append(
                _list_array(
                    pa.list_(child.type), rows, child, [0 if r is None else len(r) for r in rows]
                )
            )
        else:
            rows = draw(
                st.lists(
                    st.none() | st.lists(st.lists(scalar.values, max_size=2), max_size=3),
                    min_size=n,
                    max_size=n,
                )
            )
            flat = [v for r in rows if r is not None for inner in r for v in inner]
            inner = _list_array(
                pa.list_(scalar.array(flat).type),
                [v for r in rows if r is not None for v in r],
                scalar.array(flat),
                [len(v) for r in rows if r is not None for v in r],
            )
            arrays.append(
                _list_array(
                    pa.list_(inner.type), rows, inner, [0 if r is None else len(r) for r in rows]
                )
            )
        specs.append((name, scalar, shape))
    return pa.RecordBatch.from_arrays(arrays, [s[0] for s in specs]), specs


def _tf_dtype(kind: str):
    return {INT: tf.int64, FLOAT: tf.float32, BYTES: tf.string}[kind]


def _tf_value(kind: str, v):
    return _canon_value(kind, v)


@settings(max_examples=examples(25), **SETTINGS)
@given(tf_batches())
def test_tf_parse_example_gives_back_the_source_values(generated):
    batch, specs = generated
    records = encode(batch, features_of(batch.schema)).records()
    spec = {}
    for name, scalar, shape in specs:
        dtype = _tf_dtype(scalar.kind)
        if shape == "required":
            spec[name] = tf.io.FixedLenFeature([], dtype)
        elif shape == "optional":
            spec[name] = tf.io.VarLenFeature(dtype)
        elif shape == "list":
            spec[name] = tf.io.RaggedFeature(dtype)
        else:
            spec[name] = tf.io.RaggedFeature(
                dtype,
                value_key=name,
                partitions=[tf.io.RaggedFeature.RowLengths(f"{name}.row_lengths_1")],
            )
    out = tf.io.parse_example(tf.constant(records), spec)
    for i, (name, scalar, shape) in enumerate(specs):
        source = batch.column(i).to_pylist()

        def conv(v, scalar=scalar):
            return _tf_value(scalar.kind, scalar.expect(v))

        def canon(v, scalar=scalar):
            return _tf_value(scalar.kind, v)

        if shape == "required":
            assert [canon(v) for v in out[name].numpy().tolist()] == [conv(v) for v in source]
        elif shape == "optional":
            dense = tf.RaggedTensor.from_sparse(out[name]).to_list()
            assert [[canon(v) for v in row] for row in dense] == [
                [] if v is None else [conv(v)] for v in source
            ]
        elif shape == "list":
            assert [[canon(v) for v in row] for row in out[name].to_list()] == [
                [] if r is None else [conv(v) for v in r] for r in source
            ]
        else:
            assert [
                [[canon(v) for v in inner] for inner in row] for row in out[name].to_list()
            ] == [[] if r is None else [[conv(v) for v in inner] for inner in r] for r in source]


# --- 3. decoding with tfx_bsl --------------------------------------------------------------------


@settings(max_examples=examples(60), **SETTINGS)
@given(batches())
def test_tfx_bsl_decoder_gives_back_nulls_and_empty_lists(generated):
    batch, cols, decimal_as = generated
    assume(batch.num_rows)
    features = features_of(batch.schema, decimal_as)
    records = encode(batch, features).records()
    decoded = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(records)
    expected = expected_rows(batch, cols)
    for f in features:
        column = decoded.column(decoded.schema.get_field_index(f.name)).to_pylist()
        for got, want in zip(column, [row[f.name] for row in expected], strict=True):
            if want is None:
                assert got is None
            else:
                assert got is not None
                assert tuple(_canon_value(want[0], v) for v in got) == want[1]


# --- 4. errors -----------------------------------------------------------------------------------


def _encode(arrays: dict) -> list:
    batch = pa.RecordBatch.from_arrays(list(arrays.values()), list(arrays))
    return encode(batch, features_of(batch.schema)).records()


def test_uint64_above_int64_max_is_a_conversion_error():
    assert len(_encode({"u": pa.array([0, INT64_MAX, None], pa.uint64())})) == 3
    with pytest.raises(ConversionError, match="'big'"):
        _encode({"ok": pa.array([1, 2]), "big": pa.array([1, 2**63], pa.uint64())})
    with pytest.raises(ConversionError, match="'big_list'"):
        _encode({"big_list": pa.array([[2**64 - 1]], pa.list_(pa.uint64()))})


@pytest.mark.parametrize(
    "array",
    [
        pa.array([[1, None]], pa.list_(pa.int64())),
        pa.array([["a", None]], pa.large_list(pa.string())),
        pa.array([[1.0, None]], pa.list_(pa.float64(), 2)),
        pa.array([[[1], None]], pa.list_(pa.list_(pa.int64()))),
        pa.array(
            [[{"a": 1, "b": "x"}, None]],
            pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())])),
        ),
        pa.array(
            [[{"a": None, "b": "x"}]], pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())]))
        ),
    ],
    ids=[
        "list",
        "large_list",
        "fixed_size_list",
        "nested",
        "list_of_null_struct",
        "null_in_struct",
    ],
)
def test_null_inside_a_list_is_a_conversion_error_naming_the_column(array):
    with pytest.raises(ConversionError, match="'the_column'"):
        _encode({"fine": pa.array([1]), "the_column": array})


@pytest.mark.parametrize(
    "arrow_type",
    [
        pa.map_(pa.string(), pa.int64()),
        pa.list_(pa.map_(pa.string(), pa.int64())),
        pa.struct([("m", pa.map_(pa.int64(), pa.int64()))]),
        pa.dense_union([pa.field("i", pa.int64()), pa.field("s", pa.string())]),
        pa.sparse_union([pa.field("i", pa.int64())]),
    ],
    ids=["map", "list_of_map", "struct_of_map", "dense_union", "sparse_union"],
)
def test_map_and_union_columns_are_unsupported_naming_the_column(arrow_type):
    schema = pa.schema([("fine", pa.int64()), ("the_column", arrow_type)])
    with pytest.raises(UnsupportedColumnError, match="'the_column'"):
        features_of(schema)


# --- 5. TFRecord framing -------------------------------------------------------------------------


@settings(max_examples=examples(15), **SETTINGS)
@given(batches())
def test_framed_buffer_is_a_tfrecord_file_of_the_unframed_records(tmp_path_factory, generated):
    batch, _, decimal_as = generated
    features = features_of(batch.schema, decimal_as)
    unframed = encode(batch, features).records()
    framed = encode(batch, features, framed=True)
    assert framed.records() == unframed
    path = tmp_path_factory.mktemp("framed") / "data.tfrecord"
    path.write_bytes(framed.buffer.tobytes())
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == unframed


def test_framing_of_a_large_batch_and_its_fingerprints(tmp_path):
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(np.arange(5000, dtype=np.int64)),
            pa.array([("x" * (i % 300)) for i in range(5000)]),
            pa.array([list(range(i % 50)) for i in range(5000)], pa.list_(pa.int32())),
        ],
        ["i", "s", "l"],
    )
    features = features_of(batch.schema)
    unframed, framed = encode(batch, features), encode(batch, features, framed=True)
    assert np.array_equal(unframed.fingerprints(), framed.fingerprints())
    assert len(set(unframed.fingerprints().tolist())) == 5000
    path = tmp_path / "data.tfrecord"
    path.write_bytes(framed.buffer.tobytes())
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == unframed.records()


@pytest.mark.parametrize("dictionary", [False, True])
def test_short_strings_copied_a_word_at_a_time_end_where_they_should(tmp_path, dictionary):
    """Strings of up to 8 bytes are copied as one 8-byte word where both the source and the
    buffer have 8 bytes left, byte by byte otherwise (the last strings of the data and of the
    buffer): every length, at the data's and the records' ends, framed and not, is the bytes
    protobuf writes for the same Example."""
    for length in range(0, 20):
        values = [bytes([65 + (i + k) % 26 for k in range(length)]) for i in range(3)]
        column = pa.array(values, pa.binary())
        if dictionary:
            column = column.dictionary_encode()
        lists = pa.array([values[: i + 1] for i in range(3)], pa.list_(pa.binary()))
        batch = pa.RecordBatch.from_arrays([column, lists], ["a", "b"])  # protobuf's key order
        features = features_of(batch.schema)
        want = []
        for i, value in enumerate(values):
            example = example_pb2.Example()
            example.features.feature["a"].bytes_list.value.append(value)
            example.features.feature["b"].bytes_list.value.extend(values[: i + 1])
            want.append(example.SerializeToString(deterministic=True))
        assert encode(batch, features).records() == want, length
        framed = encode(batch, features, framed=True)
        path = tmp_path / f"{length}.tfrecord"
        path.write_bytes(framed.buffer.tobytes())
        assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == want, length


# --- 6. kernels: CRC32C, fingerprints, null slots ------------------------------------------------


def test_crc32c_kernels_match_the_standard_check_value_and_each_other():
    from tfx_tabular.coders import intrinsics, tfrecord

    check = np.frombuffer(b"123456789", np.uint8)  # CRC32C("123456789") = 0xE3069283 (RFC 3720)
    data = np.random.default_rng(7).integers(0, 256, 5000).astype(np.uint8)
    kernels = [tfrecord.crc32c_table] + ([tfrecord.crc32c_sse42] if intrinsics.HAS_SSE42 else [])
    for kernel in kernels:
        assert kernel(check, 0, 9, tfrecord.CRC_TABLES) == 0xE3069283
        for start, end in [(0, 5000), (3, 4999), (5, 5), (1, 8), (7, 23)]:
            assert kernel(data, start, end, tfrecord.CRC_TABLES) == tfrecord.crc32c_table(
                data, start, end, tfrecord.CRC_TABLES
            )


def test_fingerprints_are_stable_across_versions():
    """Hash splits put a row where its fingerprint says: changing the hash moves rows between
    splits, so these values (from the first release) must not change."""
    from tfx_tabular.coders.encoding import fingerprints

    buf = np.frombuffer(b"a tf.Example record, 8-byte words and a tail!", np.uint8)
    assert fingerprints(buf, np.array([0, 45, 45]), 0, 0).tolist() == [
        10918353563886088970,
        17665956581633026203,
    ]
    assert fingerprints(buf, np.array([0, 20]), 3, 2).tolist() == [12318048777212289143]


def test_null_slots_with_leftover_values_are_written_as_nulls():
    """Arrow lets a null slot keep bytes or a value under it; the serializer must skip it."""
    strings = pa.Array.from_buffers(
        pa.string(),
        3,
        [
            pa.py_buffer(np.packbits([1, 0, 1], bitorder="little").tobytes()),
            pa.py_buffer(np.array([0, 2, 6, 8], np.int32).tobytes()),
            pa.py_buffer(b"abLEFTcd"),
        ],
    )
    ints = pa.Array.from_buffers(
        pa.int64(),
        3,
        [
            pa.py_buffer(np.packbits([0, 1, 1], bitorder="little").tobytes()),
            pa.py_buffer(np.array([99, 5, 0], np.int64).tobytes()),
        ],
    )
    long_name = "n" * 200  # a map entry longer than one varint byte
    batch = pa.RecordBatch.from_arrays(
        [strings, ints, pa.array([None, 1.5, None])], ["s", "i", long_name]
    )
    rows = [parsed(r) for r in encode(batch, features_of(batch.schema)).records()]
    assert [row["s"] for row in rows] == [_canon((BYTES, [b"ab"])), None, _canon((BYTES, [b"cd"]))]
    assert [row["i"] for row in rows] == [None, _canon((INT, [5])), _canon((INT, [0]))]
    assert [row[long_name] for row in rows] == [None, _canon((FLOAT, [1.5])), None]


def test_non_finite_values_are_counted_per_feature_as_written():
    """NaN, +inf and -inf per float feature of a batch; a null row's slot is no value, whatever
    it holds (here NaN and inf under the nulls, as pandas leaves them)."""
    from tfx_tabular.coders import flatten
    from tfx_tabular.coders.pools import PooledColumns

    nan, inf = float("nan"), float("inf")
    under_nulls = np.array([nan, nan, inf, 1.0])
    batch = pa.RecordBatch.from_pydict(
        {
            "i": pa.array([1, 2, 3, 4]),
            "a": pa.array(under_nulls, mask=np.array([True, False, True, False])),
            "empty": pa.array([[], [], [], []], pa.list_(pa.float32())),
            "l": pa.array([[inf, 1e300], None, [-inf, nan], []], pa.list_(pa.float64())),
            "s": pa.array([{"x": -inf}, None, {"x": 0.0}, {"x": nan}]),
        }
    )
    features = features_of(batch.schema)
    columns = flatten.feature_columns(batch, features)
    counts = np.zeros((len(columns), 3), np.int64)
    PooledColumns(columns).count_non_finite(counts)
    counted = {f.name: counts[i].tolist() for i, (f, _) in enumerate(columns) if counts[i].any()}
    assert counted == {"a": [1, 0, 0], "l": [1, 2, 1], "s.x": [1, 0, 1]}

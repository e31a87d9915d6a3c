"""tfx_tabular.coders.wire, and the writers built on it: the per-row encoder's inline copies
(`encoding._serialize`: entry heads, values, TFRecord frames) write the bytes the wire module's
functions write, and a columnar record is a framed tf.Example of raw column buffers."""

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfx_tabular.coders import columnar, encoding, flatten, tfrecord, wire
from tfx_tabular.coders.fingerprint import fingerprint64
from tfx_tabular.coders.pools import PooledColumns, StringFingerprints
from tfx_tabular.source.mapping import Kind, features_of

LONG_NAME = "n" * 130  # its key's length takes two varint bytes
SCHEMA = pa.schema(
    [
        ("ints", pa.list_(pa.int64())),
        ("score", pa.float32()),
        ("tags", pa.list_(pa.binary())),
        (LONG_NAME, pa.binary()),
    ]
)
KINDS = [Kind.INT, Kind.FLOAT, Kind.BYTES, Kind.BYTES]

_int64 = st.integers(-(2**63), 2**63 - 1)
_float32 = st.floats(width=32, allow_nan=False)
_string = st.binary(max_size=20)  # around the 8-byte word the writers copy short strings in
_row = st.tuples(
    st.none() | st.lists(_int64, max_size=5),
    st.none() | _float32,
    st.none() | st.lists(_string, max_size=5),
    st.none() | _string,
)


def _put(function, *args) -> bytes:
    """What a wire function writes into a fresh buffer."""
    buf = np.zeros(1 << 12, np.uint8)
    return buf[: function(buf, 0, *args)].tobytes()


def _values(kind: Kind, values: list) -> bytes:
    """A value list's values, by the wire module's functions."""
    if kind == Kind.BYTES:
        return b"".join(_put(wire.put_field_head, wire.LIST_VALUE, len(v)) + v for v in values)
    if kind == Kind.FLOAT:
        return np.asarray(values, "<f4").tobytes()
    return b"".join(_put(wire.put_varint, v) for v in values)


def _as_lists(row) -> list:
    """Each feature's values in a row, None for a null (scalars as one-value lists)."""
    ints, score, tags, blob = row
    return [ints, None if score is None else [score], tags, None if blob is None else [blob]]


def _example(row) -> bytes:
    """A row's tf.Example, by the wire module's functions."""
    headers, offsets = wire.key_headers(SCHEMA.names)
    body = b""
    for f, (kind, values) in enumerate(zip(KINDS, _as_lists(row), strict=True)):
        payload = b"" if values is None else _values(kind, values)
        size = -1 if values is None else len(payload)
        header = offsets[f + 1] - offsets[f]
        body += _put(wire.put_entry_head, headers, offsets[f], header, int(kind), size) + payload
    return _put(wire.put_field_head, wire.EXAMPLE_FEATURES, len(body)) + body


def _framed(record: bytes) -> bytes:
    """A record in its TFRecord frame, by the tfrecord module's functions."""
    buf = np.zeros(len(record) + tfrecord.FRAME_BYTES, np.uint8)
    start = tfrecord.put_record_head(buf, 0, len(record), tfrecord.CRC_TABLES)
    buf[start : start + len(record)] = np.frombuffer(record, np.uint8)
    tfrecord.put_masked_crc(
        buf, start + len(record), start, start + len(record), tfrecord.CRC_TABLES
    )
    return buf.tobytes()


def _batch(rows, dictionary: bool = False) -> pa.RecordBatch:
    """The rows as a batch; with `dictionary`, the scalar strings dictionary-encoded, as
    Parquet's dictionary pages are read."""
    columns = [[row[i] for row in rows] for i in range(len(SCHEMA))]
    arrays = [pa.array(c, f.type) for c, f in zip(columns, SCHEMA, strict=True)]
    if dictionary:
        arrays[3] = arrays[3].dictionary_encode()
    return pa.RecordBatch.from_arrays(arrays, names=SCHEMA.names)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_row, min_size=1, max_size=8))
def test_the_encoders_inline_entries_are_the_wire_modules(rows):
    features = features_of(SCHEMA)
    expected = [_example(row) for row in rows]
    assert encoding.encode(_batch(rows), features).records() == expected
    framed = encoding.encode(_batch(rows), features, framed=True).buffer.tobytes()
    assert framed == b"".join(_framed(record) for record in expected)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_row, min_size=1, max_size=8), st.booleans())
def test_a_columnar_record_is_a_framed_example_of_each_features_raw_values(rows, dictionary):
    """The columnar record's frame is the tfrecord module's, its body a tf.Example (as protobuf
    parses it) whose bytes values are each feature's values, validity and row offsets."""
    from tensorflow.core.example import example_pb2

    batch = _batch(rows, dictionary)
    features = flatten.written_order(features_of(SCHEMA))
    pooled = PooledColumns(flatten.feature_columns(batch, features), StringFingerprints())
    (record,) = columnar.RecordBuffer(features, len(rows)).add(pooled, None)
    body = record.tobytes()[tfrecord.HEAD_BYTES : -tfrecord.TAIL_BYTES]
    assert record.tobytes() == _framed(body)
    example = example_pb2.Example.FromString(body).features.feature

    def raw(key: str, dtype) -> list:
        return np.frombuffer(example[key].bytes_list.value[0], dtype).tolist()

    dtypes = {Kind.INT: "<i8", Kind.FLOAT: "<f4", Kind.BYTES: "<i8"}
    fill = {Kind.INT: 0, Kind.FLOAT: 0.0, Kind.BYTES: columnar.EMPTY_STRING_FINGERPRINT}
    for f, kind in enumerate(KINDS):
        lists = [_as_lists(row)[f] for row in rows]
        if kind == Kind.BYTES:
            lists = [None if v is None else [_fingerprint(s) for s in v] for v in lists]
        if kind == Kind.FLOAT:
            lists = [None if v is None else np.asarray(v, "<f4").tolist() for v in lists]
        bits = np.unpackbits(np.array(raw(f"m{f}", np.uint8), np.uint8), bitorder="little")
        assert bits[: len(rows)].tolist() == [int(v is not None) for v in lists]
        assert not bits[len(rows) :].any() and len(bits) == -(-len(rows) // 8) * 8
        values = raw(f"v{f}", dtypes[kind])
        if columnar.shape_of(features[f]) == columnar.SCALAR:
            assert values == [fill[kind] if v is None else v[0] for v in lists]
            assert f"o{f}" not in example
        else:
            assert values == [x for v in lists for x in v or []]
            assert raw(f"o{f}", "<i8") == np.cumsum([0] + [len(v or []) for v in lists]).tolist()


def _fingerprint(value: bytes) -> int:
    data = np.frombuffer(value, np.uint8)
    return int(np.array(fingerprint64(data, 0, len(data)), np.uint64).view(np.int64))


def test_tags_are_the_field_numbers_and_wire_types_of_example_proto():
    from tensorflow.core.example import example_pb2, feature_pb2

    def number(message, field: str) -> int:
        return message.DESCRIPTOR.fields_by_name[field].number

    assert wire.EXAMPLE_FEATURES == wire.tag(number(example_pb2.Example, "features"))
    assert wire.FEATURES_ENTRY == wire.tag(number(feature_pb2.Features, "feature"))
    assert wire.BYTES_LIST == wire.tag(number(feature_pb2.Feature, "bytes_list"))
    assert wire.FLOAT_LIST == wire.tag(number(feature_pb2.Feature, "float_list"))
    assert wire.INT64_LIST == wire.tag(number(feature_pb2.Feature, "int64_list"))
    for values in (feature_pb2.BytesList, feature_pb2.FloatList, feature_pb2.Int64List):
        assert wire.LIST_VALUE == wire.tag(number(values, "value"))


@settings(deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_varints_agree_in_python_and_compiled(value):
    written = _put(wire.put_varint, np.uint64(value))
    assert written == wire.varint(value)
    assert wire.varint_size(np.uint64(value)) == len(written)

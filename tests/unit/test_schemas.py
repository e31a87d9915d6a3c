"""Schema inference from footers and the parsing spec derived from it, over the whole type table:
Parquet → ParquetExampleGen's conversion → inferred schema → tf.io.parse_example → the source.
(float16 is not here: pyarrow 10 cannot write it to Parquet; the encoder tests cover it.)"""

import datetime
import decimal
import glob
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from conftest import IN_MEMORY_BEAM
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular import feature_spec
from tfx_tabular.conversion import convert, plan
from tfx_tabular.conversion.source_metadata import read_source_metadata
from tfx_tabular.schemas.infer import SchemaError, infer_schema, overlay

UTC = datetime.timezone.utc

# name: (arrow type, values with nulls / empty lists, expected parsed python values per row)
COLUMNS = {
    "b": (pa.bool_(), [True, False, None, True], [[1], [0], [], [1]]),
    "i8": (pa.int8(), [-128, 0, None, 127], [[-128], [0], [], [127]]),
    "u32": (pa.uint32(), [0, 4294967295, None, 1], [[0], [4294967295], [], [1]]),
    "u64": (pa.uint64(), [0, 2**63 - 1, None, 5], [[0], [2**63 - 1], [], [5]]),
    "i64_required": (pa.int64(), [0, -1, 2**62, 7], [[0], [-1], [2**62], [7]]),
    "f64": (
        pa.float64(),
        [0.1, float("nan"), None, float("-inf")],
        [[np.float32(0.1)], [math.nan], [], [-math.inf]],
    ),
    "dec": (
        pa.decimal128(7, 2),
        [decimal.Decimal("-1.25"), decimal.Decimal("0.00"), None, decimal.Decimal("99999.99")],
        [[-1.25], [0.0], [], [99999.99]],
    ),
    "d32": (
        pa.date32(),
        [datetime.date(1970, 1, 2), datetime.date(1969, 12, 31), None, datetime.date(2024, 1, 1)],
        [[1], [-1], [], [19723]],
    ),
    "ts_ns": (
        pa.timestamp("ns", tz="Europe/Paris"),
        [
            datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
            None,
            datetime.datetime(2024, 1, 1, tzinfo=UTC),
            datetime.datetime(1970, 1, 1, tzinfo=UTC),
        ],
        [[10**9], [], [1704067200 * 10**9], [0]],
    ),
    # Parquet has no seconds unit: the file stores ms, and the feature is in ms.
    "ts_s": (
        pa.timestamp("s"),
        [datetime.datetime(1970, 1, 1, 0, 1), None, None, datetime.datetime(1970, 1, 1)],
        [[60_000], [], [], [0]],
    ),
    "s": (pa.string(), ["", "héllo", None, "x"], [[b""], ["héllo".encode()], [], [b"x"]]),
    "bin": (pa.binary(), [b"\xff\x00", b"", None, b"a"], [[b"\xff\x00"], [b""], [], [b"a"]]),
    "fsb": (pa.binary(2), [b"ab", b"\x00\x01", None, b"zz"], [[b"ab"], [b"\x00\x01"], [], [b"zz"]]),
    "dict": (
        pa.dictionary(pa.int32(), pa.string()),
        ["a", "b", None, "a"],
        [[b"a"], [b"b"], [], [b"a"]],
    ),
    "ls": (pa.list_(pa.int64()), [[1, 2], [], None, [0]], [[1, 2], [], [], [0]]),
    "lls": (
        pa.large_list(pa.string()),
        [["a"], [], None, ["", "b"]],
        [[b"a"], [], [], [b"", b"b"]],
    ),
    "fsl_required": (
        pa.list_(pa.float32(), 3),
        [[1, 2, 3], [0, 0, 0], [4, 5, 6], [7, 8, 9]],
        [[1, 2, 3], [0, 0, 0], [4, 5, 6], [7, 8, 9]],
    ),
    "nested": (
        pa.list_(pa.list_(pa.int64())),
        [[[1, 2], [3]], [], None, [[], [4]]],
        [[[1, 2], [3]], [], [], [[], [4]]],
    ),
    "st": (
        pa.struct([("x", pa.int64()), ("y", pa.string())]),
        [{"x": 1, "y": "a"}, {"x": None, "y": "b"}, None, {"x": 0, "y": None}],
        None,
    ),
}
NOT_NULL = {"i64_required", "fsl_required"}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("types")
    fields = [pa.field(n, t, nullable=n not in NOT_NULL) for n, (t, _, _) in COLUMNS.items()]
    arrays = [
        pa.array(v, t) if not pa.types.is_dictionary(t) else pa.array(v).dictionary_encode()
        for t, v, _ in COLUMNS.values()
    ]
    (root / "data").mkdir()
    pq.write_table(
        pa.Table.from_arrays(arrays, schema=pa.schema(fields)),
        str(root / "data" / "part.parquet"),
        version="2.6",
    )  # 2.6 keeps ns timestamps
    dataset, _ = plan.plan_conversion(str(root / "data"))
    out = str(root / "examples")
    convert.convert(
        dataset, out, plan.Splits(buckets=(("all", 1),)), beam_pipeline_args=IN_MEMORY_BEAM
    )
    schema = infer_schema(read_source_metadata(out), label="i64_required")
    records = list(tf.data.TFRecordDataset(glob.glob(out + "/Split-all/*")))
    # One shard, one batch: rows keep their order.
    return schema, tf.io.parse_example(tf.stack(records), feature_spec(schema))


def _rows(tensor):
    if isinstance(tensor, tf.RaggedTensor):
        return tensor.to_list()
    return tensor.numpy().tolist()


@pytest.mark.parametrize("name", [n for n in COLUMNS if n != "st"])
def test_every_type_parses_back_to_the_source_values(converted, name):
    schema, parsed = converted
    expected = COLUMNS[name][2]
    got = _rows(parsed[name])
    kind = {f.name: f.type for f in schema.feature}[name]
    for row, (g, e) in enumerate(zip(got, expected, strict=True)):
        if kind == schema_pb2.FLOAT:
            np.testing.assert_allclose(
                np.asarray(g, np.float32), np.asarray(e, np.float32), err_msg=f"{name} row {row}"
            )
        else:
            assert g == e, f"{name} row {row}"


def test_structs_flatten_and_keep_nulls(converted):
    _, parsed = converted
    assert _rows(parsed["st.x"]) == [[1], [], [], [0]]
    assert _rows(parsed["st.y"]) == [[b"a"], [b"b"], [], []]


def test_footer_inference_shapes_domains_and_representations(converted):
    schema, _ = converted
    f = {x.name: x for x in schema.feature}
    assert f["i64_required"].shape.dim[0].size == 1 and f["i64_required"].presence.min_fraction == 1
    assert list(f["i64_required"].not_in_environment) == ["SERVING"]
    assert [d.size for d in f["fsl_required"].shape.dim] == [3]
    assert not f["i8"].HasField("shape") and f["i8"].value_count.max == 1
    assert (f["i8"].int_domain.min, f["i8"].int_domain.max) == (-128, 127)
    assert f["b"].HasField("bool_domain")
    assert f["ts_ns"].time_domain.integer_format == schema_pb2.TimeDomain.UNIX_NANOSECONDS
    assert f["d32"].time_domain.integer_format == schema_pb2.TimeDomain.UNIX_DAYS
    ragged = schema.tensor_representation_group[""].tensor_representation["nested"].ragged_tensor
    assert [p.row_length for p in ragged.partition] == ["nested.row_lengths_1"]
    spec = feature_spec(schema)
    assert isinstance(spec["i64_required"], tf.io.FixedLenFeature)
    assert isinstance(spec["i8"], tf.io.RaggedFeature)
    assert "nested.row_lengths_1" not in spec
    assert "i64_required" not in feature_spec(schema, environment="SERVING")


def test_curated_overlay_wins_and_unknown_features_fail(converted):
    schema, _ = converted
    curated = schema_pb2.Schema()
    curated.feature.add(name="s", deprecated=True)
    curated.feature.add(name="i8").int_domain.max = 5
    merged = overlay(schema, curated)
    f = {x.name: x for x in merged.feature}
    assert f["s"].deprecated and f["i8"].int_domain.max == 5 and f["i8"].int_domain.min == 0
    assert "s" not in feature_spec(merged)
    bad = schema_pb2.Schema()
    bad.feature.add(name="no_such_feature")
    with pytest.raises(SchemaError, match="no_such_feature"):
        overlay(schema, bad)
    wrong_type = schema_pb2.Schema()
    wrong_type.feature.add(name="s", type=schema_pb2.INT)
    with pytest.raises(SchemaError, match="'s'"):
        overlay(schema, wrong_type)


@pytest.fixture(scope="module")
def string_label_conversion(tmp_path_factory):
    """A 3-class string label `plan` and a 40-value string column `city`, converted with the
    example statistics of both splits: (examples folder, statistics folder)."""
    root = tmp_path_factory.mktemp("string_label")
    rng = np.random.default_rng(3)
    plans = np.array(["basic", "family", "pro"])[rng.integers(0, 3, 300)]
    cities = np.char.mod("city-%02d", rng.integers(0, 40, 300)).astype(object)
    (root / "data").mkdir()
    table = pa.table({"x": rng.normal(size=300), "plan": plans, "city": cities})
    pq.write_table(table, str(root / "data" / "part.parquet"))
    dataset, splits = plan.plan_conversion(str(root / "data"))
    examples, statistics = str(root / "examples"), str(root / "statistics")
    convert.convert(
        dataset,
        examples,
        splits,
        beam_pipeline_args=IN_MEMORY_BEAM,
        example_statistics_dir=statistics,
    )
    return examples, statistics


def test_a_string_labels_classes_come_from_the_example_statistics(string_label_conversion):
    from tfx_tabular.schemas.source import schema_of
    from tfx_tabular.training.task import MULTICLASS, task_of

    examples, statistics = string_label_conversion
    schema = schema_of(examples, label="plan", example_statistics=statistics).schema
    label = next(f for f in schema.feature if f.name == "plan")
    assert list(label.string_domain.value) == ["basic", "family", "pro"]
    task = task_of(schema, "plan")
    assert (task.kind, task.vocabulary) == (MULTICLASS, ("basic", "family", "pro"))
    # More values than the vocabulary may hold: no domain, rather than a partial one.
    capped = schema_of(
        examples, label="city", example_statistics=statistics, max_vocabulary_size=39
    )
    assert not next(f for f in capped.schema.feature if f.name == "city").HasField("string_domain")


def test_a_string_label_without_statistics_fails_naming_what_to_add(string_label_conversion):
    from tfx_tabular.schemas.source import schema_of
    from tfx_tabular.training.task import TaskError, task_of

    examples, _ = string_label_conversion
    footers_only = schema_of(examples, label="plan").schema
    with pytest.raises(TaskError) as failure:
        task_of(footers_only, "plan")
    message = str(failure.value)
    assert "\n" not in message and message.startswith("label 'plan' is a string")
    assert "with_example_statistics=False" in message and "--curated-schema" in message


def test_string_domains_are_written_as_lists_and_read_back_exactly(tmp_path):
    from google.protobuf import text_format

    from tfx_tabular import schemas

    awkward = ["", 'a "quoted" value', "back\\slash", "new\nline", "tab\t", "café", "日本", "\x00"]
    schema = schema_pb2.Schema()
    feature = schema.feature.add(name="city", type=schema_pb2.BYTES)
    feature.string_domain.name = "city"
    feature.string_domain.value.extend(awkward)
    schema.feature.add(name="empty", type=schema_pb2.BYTES).string_domain.name = "empty"
    schema.feature.add(name="unnamed", type=schema_pb2.BYTES).string_domain.value.extend(["x"])
    schema.string_domain.add(name="shared", value=["p", "q"])
    path = str(tmp_path / "schema.pbtxt")

    schemas.write_schema(schema, path)

    text = open(path).read()
    assert text.count("value: [") == 3 and 'value: "' not in text
    assert text_format.Parse(text, schema_pb2.Schema()) == schema
    assert schemas.load_schema(path) == schema


LISTED = """feature {
  name: "s"
  type: BYTES
  string_domain {
    value: "before"
    value: [
      "a\\"b",
      "\\303\\251"
    ]
    value: "after"
  }
}
feature {
  name: "nested"
  type: STRUCT
  struct_domain {
    feature {
      name: "inner"
      string_domain {
        value: [
          "x"
        ]
      }
    }
  }
}
string_domain {
  name: "shared"
  value: [
    "p",
    "q"
  ]
}
"""


@pytest.mark.parametrize(
    "text",
    [
        LISTED,
        # lists of other shapes: protobuf's parser reads them, and raises its own errors
        LISTED.replace('"q"\n', '"q",\n'),
        LISTED.replace('"p",\n', '"p", "r",\n'),
        LISTED.replace('"p",\n', '# a comment\n    "p",\n'),
        LISTED.replace('"p",', "'p',"),
        LISTED + "feature {\n  name: 1 2\n}\n",
        LISTED.replace('"x"', '"\\377"'),
    ],
)
def test_schema_files_read_as_protobufs_parser_reads_them(tmp_path, text):
    """Listed string domains (in features, struct domains and the schema) read apart, in order
    with other values; text it does not read so gives protobuf's own message or error."""
    from google.protobuf import text_format

    from tfx_tabular import schemas
    from tfx_tabular.schemas import text as text_module

    path = tmp_path / "schema.pbtxt"
    path.write_text(text)
    try:
        expected = text_format.Parse(text, schema_pb2.Schema())
    except text_format.ParseError as e:
        with pytest.raises(text_format.ParseError, match=re.escape(str(e))):
            schemas.load_schema(str(path))
        return
    assert schemas.load_schema(str(path)) == expected
    if text == LISTED:  # read apart, not left to protobuf's parser
        assert text_module._parse_with_lists_apart(text) == expected
        assert list(expected.feature[0].string_domain.value) == ["before", 'a"b', "é", "after"]

"""Schemas: the one Arrow → tf.Example type mapping (`mapping`), inference from Parquet metadata
(`infer`), optional TFDV statistics over a sample (`statistics`), and parsing specs.

Imported lazily, so `import tfx_tabular.schemas` loads neither TensorFlow nor TFDV.
"""
from __future__ import annotations

import importlib

SCHEMA_FILE = "schema.pbtxt"

_LAZY = {
    "infer_schema": "tfx_tabular.schemas.infer",
    "overlay": "tfx_tabular.schemas.infer",
    "feature_spec": "tfx_tabular.schemas.infer",
    "label_of": "tfx_tabular.schemas.infer",
    "SchemaError": "tfx_tabular.schemas.infer",
    "statistics_overlay": "tfx_tabular.schemas.statistics",
    "features_of": "tfx_tabular.schemas.mapping",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_summary(examples_uri: str):
    """The SourceSummary ParquetExampleGen stored in an Examples artifact's folder."""
    import pyarrow as pa
    from apache_beam.io.filesystems import FileSystems

    from tfx_tabular.convert import SOURCE_SCHEMA_FILE
    from tfx_tabular.parquet_source import SourceSummary

    path = f"{examples_uri.rstrip('/')}/{SOURCE_SCHEMA_FILE}"
    if not FileSystems.exists(path):
        raise FileNotFoundError(f"{path} is missing: these Examples were not written by "
                                "ParquetExampleGen; give `input_base` instead")
    with FileSystems.open(path) as handle:
        return SourceSummary.from_arrow_schema(pa.ipc.read_schema(pa.py_buffer(handle.read())))


def example_files(examples) -> list[str]:
    """All TFRecord shards of an Examples artifact, every split."""
    import tensorflow as tf
    from tfx.types import artifact_utils

    files = []
    for split in artifact_utils.decode_split_names(examples.split_names):
        files += tf.io.gfile.glob(f"{artifact_utils.get_split_uri([examples], split)}/*")
    return sorted(files)


def load_schema(path: str):
    """A Schema from a schema.pbtxt file, or from a folder holding one (a Schema artifact)."""
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    if tf.io.gfile.isdir(path):
        path = f"{path.rstrip('/')}/{SCHEMA_FILE}"
    return io_utils.parse_pbtxt_file(path, schema_pb2.Schema())


def describe(schema) -> str:
    """A schema as a plain-text table: feature, type, shape or value count, presence, domain."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    rows = [("feature", "type", "values", "presence", "domain", "notes")]
    ragged = {name for group in schema.tensor_representation_group.values()
              for name, rep in group.tensor_representation.items() if rep.HasField("ragged_tensor")}
    for f in schema.feature:
        if f.HasField("shape"):
            values = "[" + ", ".join(str(d.size) for d in f.shape.dim) + "]"
        elif f.HasField("value_count"):
            values = f"{f.value_count.min}..{f.value_count.max or '*'}"
        else:
            values = "ragged" if f.name in ragged else "0..*"
        domain = ""
        if f.HasField("int_domain"):
            domain = f"int {f.int_domain.min}..{f.int_domain.max}"
        elif f.HasField("float_domain"):
            domain = f"float {f.float_domain.min:g}..{f.float_domain.max:g}"
        elif f.HasField("bool_domain"):
            domain = "bool"
        elif f.HasField("time_domain"):
            domain = schema_pb2.TimeDomain.IntegerTimeFormat.Name(f.time_domain.integer_format)
        elif f.HasField("string_domain"):
            shown = ", ".join(f.string_domain.value[:3])
            more = len(f.string_domain.value) - 3
            domain = f"{{{shown}{f', +{more}' if more > 0 else ''}}}"
        notes = list(f.annotation.tag)
        if f.deprecated:
            notes.append("deprecated")
        notes += [f"not in {e}" for e in f.not_in_environment]
        rows.append((f.name, schema_pb2.FeatureType.Name(f.type), values,
                     f"{f.presence.min_fraction:g}", domain, ", ".join(notes)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

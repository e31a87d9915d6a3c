"""Schemas: inference from Parquet metadata (`infer`), the optional constraints of example
statistics (`example_statistics`: an ExampleStatistics artifact of every split) or of sample
statistics (`sample_statistics`: TFDV over a row sample), and the parsing spec (`parsing`), all
over the one Arrow → tf.Example mapping in `tfx_tabular.source.mapping`.

No TFX imports, and imported lazily: `import tfx_tabular.schemas` loads neither TensorFlow nor TFDV.
"""

from __future__ import annotations

import importlib

SCHEMA_FILE = "schema.pbtxt"

_LAZY = {
    "infer_schema": "tfx_tabular.schemas.infer",
    "overlay": "tfx_tabular.schemas.infer",
    "label_of": "tfx_tabular.schemas.infer",
    "SchemaError": "tfx_tabular.schemas.infer",
    "feature_spec": "tfx_tabular.schemas.parsing",
    "sample_statistics_overlay": "tfx_tabular.schemas.sample_statistics",
    "schema_rows": "tfx_tabular.schemas.describe",
}
__all__ = ["SCHEMA_FILE", "load_schema", "write_schema", *sorted(_LAZY)]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _schema_path(path: str) -> str:
    """A schema.pbtxt path, or the one inside a folder (a Schema artifact)."""
    if path.endswith(".pbtxt"):
        return path
    return f"{path.rstrip('/')}/{SCHEMA_FILE}"


def _read_text(path: str) -> str:
    if "://" in path:  # object stores through TensorFlow's file systems, loaded only then
        import tensorflow as tf

        with tf.io.gfile.GFile(path) as handle:
            return handle.read()
    with open(path) as handle:
        return handle.read()


def load_schema(path: str):
    """A Schema from a schema.pbtxt file, or from a folder holding one (a Schema artifact)."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    return text_format.Parse(_read_text(_schema_path(path)), schema_pb2.Schema())


def _listed_string_domain(message, indent: int, as_one_line: bool):
    """A StringDomain's text with its values as one list, a value a line (`value: [` ... `]`,
    the text format's list syntax, which protobuf's parsers read): the Python parser, which TFX
    and TFDV load schemas with, reads it much faster than a `value:` field per value, and a wide
    table's schema holds hundreds of thousands. Other messages: None (the printer's own text)."""
    from google.protobuf import text_encoding, text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    if (
        message.DESCRIPTOR is not schema_pb2.StringDomain.DESCRIPTOR
        or not message.value
        or as_one_line
    ):
        return None
    rest = schema_pb2.StringDomain()
    rest.CopyFrom(message)
    rest.ClearField("value")
    pad = " " * (indent + 2)
    # Escaped as the printer escapes a string field's value (as_utf8=False).
    values = ",\n".join(f'{pad}"{text_encoding.CEscape(v.encode(), False)}"' for v in message.value)
    text = text_format.MessageToString(rest, indent=indent)
    text += f"{' ' * indent}value: [\n{values}\n{' ' * indent}]"
    return text[indent:]  # the printer writes the first line's indent itself


def write_schema(schema, path: str) -> None:
    """Write a Schema as text to a .pbtxt path, or into a folder (a Schema artifact)."""
    from google.protobuf import text_format

    path = _schema_path(path)
    text = text_format.MessageToString(schema, message_formatter=_listed_string_domain)
    if "://" in path:
        import tensorflow as tf

        tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
        with tf.io.gfile.GFile(path, "w") as handle:
            handle.write(text)
        return
    import os

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)

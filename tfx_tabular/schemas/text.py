"""Schema files: a Schema in protobuf's text format, written with each string domain's values in
the format's list syntax ([decision 0016](../../docs/decisions/0016-string-domains-in-list-syntax.md))
and read back with those lists taken apart before protobuf's pure-Python parser sees the rest:
it reads a wide table's hundreds of thousands of domain values a token at a time.
"""

from __future__ import annotations

import re
from typing import Iterator

from tfx_tabular.schemas import SCHEMA_FILE

# A string domain's values as `write_schema` lists them: `value: [`, one double-quoted string a
# line (a comma after each but the last), `]`. Only this shape is read apart; any other text is
# protobuf's parser's.
_QUOTED = r'"(?:[^"\\\n]|\\.)*"'
_VALUE_LIST = re.compile(
    rf"^(?P<indent>[ \t]*)value: \[\n(?P<body>(?:[ \t]*{_QUOTED},\n)*[ \t]*{_QUOTED}\n)[ \t]*\]$",
    re.MULTILINE,
)
_STRING = re.compile(rf"^[ \t]*({_QUOTED}),?$", re.MULTILINE)
# What stands for the i-th list in the text protobuf parses (as written there, and as parsed):
# it starts with a NUL, which no writer's domain value starts with.
_PLACEHOLDER_TEXT = "\\000tfx-tabular value list "
_PLACEHOLDER = "\x00tfx-tabular value list "


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

    text = _read_text(_schema_path(path))
    schema = _parse_with_lists_apart(text)
    return schema if schema is not None else text_format.Parse(text, schema_pb2.Schema())


def _parse_with_lists_apart(text: str):
    """The Schema of `text`, its listed string domain values read by `_values`; None if no list
    is in that shape or the text does not read so (protobuf's parser then reads all of it, and
    names where any error is)."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    lists: list[str] = []

    def cut(match: re.Match) -> str:
        lists.append(match.group("body"))
        return f'{match.group("indent")}value: "{_PLACEHOLDER_TEXT}{len(lists) - 1}"'

    shortened = _VALUE_LIST.sub(cut, text)
    if not lists:
        return None
    schema = schema_pb2.Schema()
    try:
        text_format.Parse(shortened, schema)
        filled = sum(_fill(domain, lists) for domain in _string_domains(schema))
    except (text_format.ParseError, UnicodeDecodeError, ValueError):
        return None
    return schema if filled == len(lists) else None


def _fill(domain, lists: list[str]) -> int:
    """Put the listed values in place of their placeholders in a StringDomain; how many."""
    values, filled = [], 0
    for value in domain.value:
        if value.startswith(_PLACEHOLDER):
            values += _values(lists[int(value[len(_PLACEHOLDER) :])])
            filled += 1
        else:
            values.append(value)
    if filled:
        del domain.value[:]
        domain.value.extend(values)
    return filled


def _values(body: str) -> list[str]:
    """A list's strings, unescaped as protobuf's text parser unescapes a string field."""
    from google.protobuf import text_encoding

    return [
        text_encoding.CUnescape(quoted[1:-1]).decode("utf-8") if "\\" in quoted else quoted[1:-1]
        for quoted in _STRING.findall(body)
    ]


def _string_domains(message) -> Iterator:
    """Every StringDomain in a message, however deeply held (features, struct domains, maps)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    if message.DESCRIPTOR is schema_pb2.StringDomain.DESCRIPTOR:
        yield message
        return
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].type != field.TYPE_MESSAGE:
                continue
            children = value.values()
        else:
            children = value if field.label == field.LABEL_REPEATED else [value]
        for child in children:
            yield from _string_domains(child)


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

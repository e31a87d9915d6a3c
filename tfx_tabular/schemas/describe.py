"""A schema as rows of text, for `tfx-tabular show-schema`: feature, type, values, presence,
domain, notes."""

from __future__ import annotations

from tensorflow_metadata.proto.v0 import schema_pb2

HEADER = ("feature", "type", "values", "presence", "domain", "notes")


def _values(f: schema_pb2.Feature, ragged: set) -> str:
    if f.HasField("shape"):
        return "[" + ", ".join(str(d.size) for d in f.shape.dim) + "]"
    if f.HasField("value_count"):
        return f"{f.value_count.min}..{f.value_count.max or '*'}"
    return "ragged" if f.name in ragged else "0..*"


def _presence(f: schema_pb2.Feature) -> str:
    text = f"{f.presence.min_fraction:g}"
    return text + (f", ≥{f.presence.min_count} rows" if f.presence.min_count else "")


def _domain(f: schema_pb2.Feature) -> str:
    if f.HasField("int_domain"):
        return f"int {f.int_domain.min}..{f.int_domain.max}"
    if f.HasField("float_domain"):
        return f"float {f.float_domain.min:g}..{f.float_domain.max:g}"
    if f.HasField("bool_domain"):
        return "bool"
    if f.HasField("time_domain"):
        return schema_pb2.TimeDomain.IntegerTimeFormat.Name(f.time_domain.integer_format)
    if f.HasField("string_domain"):
        shown = ", ".join(f.string_domain.value[:3])
        more = len(f.string_domain.value) - 3
        return f"{{{shown}{f', +{more}' if more > 0 else ''}}}"
    return ""


def _notes(f: schema_pb2.Feature) -> str:
    notes = list(f.annotation.tag) + (["deprecated"] if f.deprecated else [])
    return ", ".join(notes + [f"not in {e}" for e in f.not_in_environment])


def schema_rows(schema: schema_pb2.Schema) -> list[tuple[str, ...]]:
    """One row per feature, in HEADER's order."""
    ragged = {
        name
        for group in schema.tensor_representation_group.values()
        for name, rep in group.tensor_representation.items()
        if rep.HasField("ragged_tensor")
    }
    return [
        (
            f.name,
            schema_pb2.FeatureType.Name(f.type),
            _values(f, ragged),
            _presence(f),
            _domain(f),
            _notes(f),
        )
        for f in schema.feature
    ]

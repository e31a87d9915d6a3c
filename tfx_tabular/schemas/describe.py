"""A schema as a plain-text table, for `tfx-tabular show-schema`."""

from __future__ import annotations

from tensorflow_metadata.proto.v0 import schema_pb2


def describe(schema) -> str:
    """A schema as a plain-text table: feature, type, shape or value count, presence, domain."""
    rows = [("feature", "type", "values", "presence", "domain", "notes")]
    ragged = {
        name
        for group in schema.tensor_representation_group.values()
        for name, rep in group.tensor_representation.items()
        if rep.HasField("ragged_tensor")
    }
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
        rows.append(
            (
                f.name,
                schema_pb2.FeatureType.Name(f.type),
                values,
                f"{f.presence.min_fraction:g}",
                domain,
                ", ".join(notes),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )

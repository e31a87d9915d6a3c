"""A tensorflow_metadata Schema from Parquet metadata (footers only). It follows
`tfx_tabular.source.mapping.features_of`, the mapping ParquetExampleGen writes by.

What the footers tell, per feature:
* type INT / FLOAT / BYTES;
* shape [1] for a scalar column with no nulls in any file (and present in every file); shape [N]
  for a non-nullable fixed_size_list<N>; otherwise a variable number of values;
* presence: min_fraction 1.0 and min_count 1 when never null, nothing otherwise: the footers
  cannot tell how a column's values fall into splits, and a schema must hold on every split
  (example statistics, `schemas.example_statistics`, add what they prove);
* int_domain / float_domain from footer min/max (float_domain widened to float32, as written), bool_domain for bools, time_domain with the epoch
  unit for dates and timestamps, string_domain with the values of string partition columns;
* a RaggedTensor tensor representation for nested lists (row-length partitions);
* annotations: `tfx_tabular:partition` on partition columns, `tfx_tabular:label` on the label,
  `tfx_tabular:unit=<unit>` on time and duration columns;
* environments TRAINING and SERVING, the label absent in SERVING.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.conversion.source_metadata import SourceMetadata
from tfx_tabular.source.mapping import Feature, Kind, features_of

LABEL_TAG = "tfx_tabular:label"
PARTITION_TAG = "tfx_tabular:partition"
UNIT_TAG = "tfx_tabular:unit="
RAGGED_GROUP = ""  # the default tensor representation group, the one TFXIO reads
_INT64_MAX = 2**63 - 1

_TIME_FORMATS = {
    "D": schema_pb2.TimeDomain.UNIX_DAYS,
    "s": schema_pb2.TimeDomain.UNIX_SECONDS,
    "ms": schema_pb2.TimeDomain.UNIX_MILLISECONDS,
    "us": schema_pb2.TimeDomain.UNIX_MICROSECONDS,
    "ns": schema_pb2.TimeDomain.UNIX_NANOSECONDS,
}


class SchemaError(ValueError):
    """A schema that does not fit the data (e.g. an overlay naming unknown features)."""


class LabelError(SchemaError):
    """A label that is not a feature of the data (the message lists the features)."""


def _never_null(feature: Feature, summary: SourceMetadata) -> bool:
    field = summary.schema.field(feature.column)
    if feature.column in summary.partition_columns and feature.column not in summary.column_stats:
        return True  # stored before partition columns had null counts (the null partition)
    if not field.nullable:
        return True
    stats = summary.column_stats.get(feature.column)
    return feature.path == () and stats is not None and stats.null_count == 0


def _never_present(feature: Feature, summary: SourceMetadata) -> bool:
    """The footers prove every row null (or the type is null). TFDV infers `min_count: 0` for
    such a feature; `min_count: 1` would make ExampleValidator report the column as dropped on
    the very data the schema came from."""
    if pa.types.is_null(feature.leaf_type):
        return True  # the encoder writes null-typed columns as absent in every row
    if feature.column in summary.partition_columns or feature.path != ():
        return False  # nested columns carry no per-row null counts in the footers
    stats = summary.column_stats.get(feature.column)
    return (
        stats is not None and stats.null_count is not None and stats.null_count >= summary.num_rows
    )


def _set_domain(out: schema_pb2.Feature, feature: Feature, summary: SourceMetadata) -> None:
    leaf = feature.leaf_type
    if pa.types.is_dictionary(leaf):
        leaf = leaf.value_type
    stats = summary.column_stats.get(feature.column) if feature.path == () else None
    if pa.types.is_boolean(leaf):
        out.bool_domain.SetInParent()
    elif pa.types.is_timestamp(leaf) or pa.types.is_date(leaf):
        out.time_domain.integer_format = _TIME_FORMATS[feature.unit]
    elif feature.kind == Kind.INT and stats is not None and stats.min is not None:
        if int(stats.max) > _INT64_MAX:  # a uint64 column; protobuf would raise a bare ValueError
            raise SchemaError(
                f"column {feature.column!r}: uint64 values up to {int(stats.max)} "
                f"are above the int64 maximum {_INT64_MAX}; tf.Example cannot hold "
                "them (exclude the column)"
            )
        out.int_domain.min, out.int_domain.max = int(stats.min), int(stats.max)
    elif feature.kind == Kind.FLOAT and stats is not None and stats.min is not None:
        out.float_domain.min, out.float_domain.max = _float32_outward(
            float(stats.min), float(stats.max)
        )
    elif feature.column in summary.partition_values and feature.kind == Kind.BYTES:
        out.string_domain.name = feature.name
        out.string_domain.value.extend(summary.partition_values[feature.column])
    if feature.unit and not (pa.types.is_timestamp(leaf) or pa.types.is_date(leaf)):
        out.annotation.tag.append(UNIT_TAG + feature.unit)


def _float32_outward(low: float, high: float) -> tuple[float, float]:
    """[low, high] widened to float32 values: ParquetExampleGen writes floats as float32, and a
    float64 bound can lie just inside its rounded value (0.1 < float32(0.1))."""
    low32, high32 = np.float32(low), np.float32(high)
    if float(low32) > low:
        low32 = np.nextafter(low32, np.float32(-np.inf))
    if float(high32) < high:
        high32 = np.nextafter(high32, np.float32(np.inf))
    return float(low32), float(high32)


def infer_schema(summary: SourceMetadata, label: Optional[str] = None) -> schema_pb2.Schema:
    """The Schema of what ParquetExampleGen writes for `summary`'s source; no data pass."""
    features = features_of(summary.schema, summary.decimal_as)
    if label is not None and label not in {f.name for f in features}:
        raise LabelError(
            f"label {label!r} is not a feature (features: "
            f"{', '.join(f.name for f in features[:20])}...)"
        )
    if label is not None and _never_present(next(f for f in features if f.name == label), summary):
        raise SchemaError(f"label {label!r} is null in every row of the source")
    schema = schema_pb2.Schema()
    schema.default_environment.extend(["TRAINING", "SERVING"])
    for feature in features:
        out = schema.feature.add(name=feature.name, type=int(feature.kind))
        never_null = _never_null(feature, summary)
        if never_null and not _never_present(feature, summary):
            out.presence.min_fraction = 1.0
            out.presence.min_count = 1
        if feature.row_lengths_of is None:
            if feature.list_depth == 0 and never_null:
                out.shape.dim.add(size=1)
            elif feature.list_depth == 1 and feature.list_sizes[0] is not None and never_null:
                out.shape.dim.add(size=feature.list_sizes[0])
            elif feature.list_depth == 0:
                out.value_count.min, out.value_count.max = 1, 1
            _set_domain(out, feature, summary)
        if feature.is_ragged_values:
            ragged = (
                schema.tensor_representation_group[RAGGED_GROUP]
                .tensor_representation[feature.name]
                .ragged_tensor
            )
            ragged.feature_path.step.append(feature.name)
            for partition in (f for f in features if f.row_lengths_of == feature.name):
                ragged.partition.add(row_length=partition.name)
            ragged.row_partition_dtype = schema_pb2.TensorRepresentation.RowPartitionDType.INT64
        if feature.column in summary.partition_columns:
            out.annotation.tag.append(PARTITION_TAG)
        if feature.name == label:
            out.annotation.tag.append(LABEL_TAG)
            out.not_in_environment.append("SERVING")
    return schema


def label_of(schema: schema_pb2.Schema) -> Optional[str]:
    """The feature annotated as the label, if any."""
    labels = [f.name for f in schema.feature if LABEL_TAG in f.annotation.tag]
    return labels[0] if labels else None


_OVERLAID = (
    "presence",
    "shape",
    "value_count",
    "value_counts",
    "domain",
    "int_domain",
    "float_domain",
    "string_domain",
    "bool_domain",
    "time_domain",
)


def overlay(inferred: schema_pb2.Schema, curated: schema_pb2.Schema) -> schema_pb2.Schema:
    """A user's curated schema over the inferred one: for each feature it names, its presence,
    shape, value counts, domains, deprecation, lifecycle stage, environments and annotations
    win; its top-level string domains, environments and tensor representations are added."""
    result = schema_pb2.Schema()
    result.CopyFrom(inferred)
    by_name = {f.name: f for f in result.feature}
    unknown = [f.name for f in curated.feature if f.name not in by_name]
    if unknown:
        raise SchemaError(f"the curated schema names features the data does not have: {unknown}")
    # Tensor representations name features too; an unknown one would only fail at parse time.
    unknown = sorted(
        {
            name
            for group, reps in curated.tensor_representation_group.items()
            for name in _represented(reps)
            if name not in by_name
        }
    )
    if unknown:
        raise SchemaError(
            "the curated schema's tensor representations name features the data "
            f"does not have: {unknown}"
        )
    for user in curated.feature:
        target = by_name[user.name]
        if user.type and user.type != target.type:
            raise SchemaError(
                f"feature {user.name!r}: the curated schema says "
                f"{schema_pb2.FeatureType.Name(user.type)}, the data is "
                f"{schema_pb2.FeatureType.Name(target.type)}"
            )
        for field in _OVERLAID:
            if user.HasField(field):
                target.ClearField(field)
                getattr(target, field).CopyFrom(getattr(user, field))
        if user.HasField("shape"):
            target.ClearField("value_count")
        elif user.HasField("value_count"):
            target.ClearField("shape")
        if user.deprecated:
            target.deprecated = True
        if user.lifecycle_stage:
            target.lifecycle_stage = user.lifecycle_stage
        if user.in_environment or user.not_in_environment:
            del target.in_environment[:]
            del target.not_in_environment[:]
            target.in_environment.extend(user.in_environment)
            target.not_in_environment.extend(user.not_in_environment)
        for tag in user.annotation.tag:
            if tag not in target.annotation.tag:
                target.annotation.tag.append(tag)
    result.string_domain.extend(curated.string_domain)
    for env in curated.default_environment:
        if env not in result.default_environment:
            result.default_environment.append(env)
    for group, reps in curated.tensor_representation_group.items():
        result.tensor_representation_group[group].MergeFrom(reps)
    return result


def _represented(group: schema_pb2.TensorRepresentationGroup) -> list[str]:
    """The features a group of tensor representations reads."""
    names = []
    for rep in group.tensor_representation.values():
        kind = rep.WhichOneof("kind")
        if kind == "dense_tensor":
            names.append(rep.dense_tensor.column_name)
        elif kind == "varlen_sparse_tensor":
            names.append(rep.varlen_sparse_tensor.column_name)
        elif kind == "sparse_tensor":
            names += [*rep.sparse_tensor.index_column_names, rep.sparse_tensor.value_column_name]
        elif kind == "ragged_tensor":
            names += rep.ragged_tensor.feature_path.step[:1]
            names += [p.row_length for p in rep.ragged_tensor.partition if p.HasField("row_length")]
    return names

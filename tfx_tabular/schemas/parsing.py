"""The `tf.io.parse_example` spec of a Schema: what the Trainer, `input_fn` and the serving
signature parse with, so training and serving read a feature the same way."""

from __future__ import annotations

from typing import Optional

from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.schemas.infer import RAGGED_GROUP


def _skipped(feature: schema_pb2.Feature) -> bool:
    return feature.deprecated or feature.lifecycle_stage in (
        schema_pb2.DEPRECATED,
        schema_pb2.DISABLED,
        schema_pb2.PLANNED,
        schema_pb2.ALPHA,
        schema_pb2.DEBUG_ONLY,
    )


def feature_spec(
    schema: schema_pb2.Schema,
    environment: Optional[str] = None,
    exclude: tuple[str, ...] = (),
    sparse: bool = False,
) -> dict:
    """The `tf.io.parse_example` spec of a schema.

    Fixed shapes → FixedLenFeature with a default (0, 0.0 or b""), so a fixed feature never fails
    to parse; variable-length lists and nullable scalars → RaggedFeature (a null stays an empty
    row, never a made-up value), or with `sparse` VarLenFeature (SparseTensors, as TFXIO gives
    them); RaggedTensor representations → RaggedFeature with row-length partitions.
    Deprecated / skipped features, features not in `environment`, and `exclude` are left out.
    """
    import tensorflow as tf

    dtypes = {schema_pb2.INT: tf.int64, schema_pb2.FLOAT: tf.float32, schema_pb2.BYTES: tf.string}
    defaults = {schema_pb2.INT: 0, schema_pb2.FLOAT: 0.0, schema_pb2.BYTES: b""}
    ragged = (
        {
            name: rep.ragged_tensor
            for name, rep in schema.tensor_representation_group[
                RAGGED_GROUP
            ].tensor_representation.items()
            if rep.HasField("ragged_tensor")
        }
        if RAGGED_GROUP in schema.tensor_representation_group
        else {}
    )
    partition_features = {p.row_length for rep in ragged.values() for p in rep.partition}
    spec = {}
    for feature in schema.feature:
        name = feature.name
        if (
            name in partition_features
            or name in exclude
            or _skipped(feature)
            or feature.type not in dtypes
        ):
            continue
        if environment is not None:
            if environment in feature.not_in_environment:
                continue
            if feature.in_environment and environment not in feature.in_environment:
                continue
        dtype = dtypes[feature.type]
        if name in ragged:
            rep = ragged[name]
            partitions = [
                tf.io.RaggedFeature.UniformRowLength(p.uniform_row_length)
                if p.HasField("uniform_row_length")
                else tf.io.RaggedFeature.RowLengths(p.row_length)
                for p in rep.partition
            ]
            spec[name] = tf.io.RaggedFeature(
                dtype,
                value_key=rep.feature_path.step[-1],
                partitions=partitions,
                row_splits_dtype=tf.int64,
            )
        elif feature.HasField("shape"):
            dims = [d.size for d in feature.shape.dim]
            size = 1
            for d in dims:
                size *= d
            spec[name] = tf.io.FixedLenFeature(
                dims, dtype, default_value=[defaults[feature.type]] * size
            )
        elif sparse:
            spec[name] = tf.io.VarLenFeature(dtype)
        else:
            spec[name] = tf.io.RaggedFeature(dtype, value_key=name, row_splits_dtype=tf.int64)
    return spec

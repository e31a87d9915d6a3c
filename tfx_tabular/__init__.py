"""tfx-tabular: train TensorFlow models on partitioned Parquet larger than memory, in TFX.

Public API: `tfx_tabular.components` (ParquetExampleGen, ParquetSchemaGen), `tfx_tabular.schemas`,
and `tfx_tabular.feature_spec(schema)`. Imports are lazy: `import tfx_tabular` loads no TensorFlow.
"""
__version__ = "0.1.0"


def feature_spec(schema, environment=None, exclude=()):
    """The `tf.io.parse_example` spec of a Schema proto, or of a schema.pbtxt path / Schema
    artifact folder (see `tfx_tabular.schemas.infer.feature_spec`)."""
    from tfx_tabular import schemas
    from tfx_tabular.schemas.infer import feature_spec as _feature_spec

    if isinstance(schema, str):
        schema = schemas.load_schema(schema)
    return _feature_spec(schema, environment, exclude)

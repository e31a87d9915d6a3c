"""tfx-tabular: train TensorFlow models on partitioned Parquet larger than memory, in TFX.

Public API: `tfx_tabular.components` (ParquetExampleGen, ParquetSchemaGen), `tfx_tabular.schemas`,
`tfx_tabular.feature_spec(schema)` and `tfx_tabular.input_fn(file_pattern, schema, batch_size)`.
Imports are lazy: `import tfx_tabular` loads no TensorFlow.

TFX 1.16, TFT and TFMA are Keras 2 code: importing tfx_tabular before TensorFlow makes `tf.keras`
Keras 2 (TF_USE_LEGACY_KERAS=1, unless the environment already says otherwise), as the CLI, the
image and compiled tasks do.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

__version__ = "0.1.0"
__all__ = ["feature_spec", "input_fn"]


def feature_spec(schema, environment=None, exclude=()):
    """The `tf.io.parse_example` spec of a Schema proto, or of a schema.pbtxt path / Schema
    artifact folder (see `tfx_tabular.schemas.parsing.feature_spec`)."""
    from tfx_tabular import schemas
    from tfx_tabular.schemas.parsing import feature_spec as _feature_spec

    if isinstance(schema, str):
        schema = schemas.load_schema(schema)
    return _feature_spec(schema, environment, exclude)


def input_fn(file_pattern, schema, batch_size, label_key=None, **options):
    """A tf.data pipeline of (features, label) batches; see `tfx_tabular.training.input_fn.input_fn`."""
    from tfx_tabular.training.input_fn import input_fn as _input_fn

    return _input_fn(file_pattern, schema, batch_size, label_key, **options)

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


def summarize_parquet(input_base: str, **options):
    """The SourceSummary of a Parquet folder, from its footers."""
    from tfx_tabular.parquet_source import open_dataset

    return open_dataset(input_base, **options).summary()


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

"""Schemas: inference from Parquet metadata (`infer`), the optional constraints of example
statistics (`example_statistics`: an ExampleStatistics artifact of every split) or of sample
statistics (`sample_statistics`: TFDV over a row sample), the parsing spec (`parsing`), all
over the one Arrow → tf.Example mapping in `tfx_tabular.source.mapping`, and schema files
(`text`).

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
    "load_schema": "tfx_tabular.schemas.text",
    "write_schema": "tfx_tabular.schemas.text",
}
__all__ = ["SCHEMA_FILE", *sorted(_LAZY)]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

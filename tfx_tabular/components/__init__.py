"""TFX components. Imported lazily: `import tfx_tabular.components` does not load TFX."""

import importlib

_COMPONENTS = {
    "ParquetExampleGen": "tfx_tabular.components.parquet_example_gen.component",
    "ParquetSchemaGen": "tfx_tabular.components.parquet_schema_gen.component",
    "TabularTrainer": "tfx_tabular.components.tabular_trainer.component",
    "VertexTraining": "tfx_tabular.components.tabular_trainer.vertex",
}
__all__ = sorted(_COMPONENTS)


def __getattr__(name):
    if name in _COMPONENTS:
        return getattr(importlib.import_module(_COMPONENTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

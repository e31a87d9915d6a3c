"""ParquetSchemaGen: a Schema artifact from Parquet footers and example statistics, in TFX's
component shape: `component`, `spec` (channel names and parameters, declared once), `executor`."""

__all__ = [
    "component",
    "executor",
    "spec",
]

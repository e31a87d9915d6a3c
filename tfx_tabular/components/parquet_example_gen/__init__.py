"""ParquetExampleGen: Parquet → an Examples artifact (and its example statistics), in TFX's
component shape: `component` (the component and its ComponentSpec), `spec` (channel names and
parameters, declared once), `executor` and `driver`."""

__all__ = [
    "component",
    "driver",
    "executor",
    "spec",
]

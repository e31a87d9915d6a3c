"""The Parquet source (no TFX): `filesystems` (a URI's filesystem, the GCS emulator's too),
`listing` (a folder's or a table snapshot's data files, hive partitions), `files` (one file from
its footer), `dataset` (footers unified into one dataset: `open_dataset`), `reading` (conformed
batches in bounded memory); Delta Lake and Iceberg tables' snapshots (`tables`), the footer walk
that names columns of Parquet types newer than pyarrow 10 (`footer`), the source's errors
(`errors`), and the one Arrow → tf.Example type mapping (`mapping`) that the encoder, schema
inference, `feature_spec` and the trainer all follow. It imports nothing else of tfx_tabular.
"""

__all__ = [
    "dataset",
    "errors",
    "files",
    "filesystems",
    "footer",
    "listing",
    "mapping",
    "reading",
    "tables",
]

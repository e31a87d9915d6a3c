"""The Parquet source: listing, hive partitions, footers, schema unification and batched reads
(`parquet`), Delta Lake and Iceberg tables' snapshots (`tables`), the footer walk that names
columns of Parquet types newer than pyarrow 10 (`footer`), the source's errors (`errors`), and the
one Arrow → tf.Example type mapping (`mapping`) that the encoder, schema inference, `feature_spec`
and the trainer all follow. It imports nothing else of tfx_tabular.
"""

"""The Parquet source: listing, hive partitions, footers, schema unification and batched reads
(`parquet`), and the one Arrow → tf.Example type mapping (`mapping`) that the encoder, schema
inference, `feature_spec` and the trainer all follow. It imports nothing else of tfx_tabular.
"""

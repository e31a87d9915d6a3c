"""The data layer: Parquet listing and footers (`parquet`), the one Arrow → tf.Example type mapping
(`mapping`), the encoder (`encoding`), conversion planning (`plan`) and the Beam conversion
(`convert`). It imports nothing else of tfx_tabular and nothing of TFX orchestration.
"""

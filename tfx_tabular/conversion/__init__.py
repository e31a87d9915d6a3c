"""Conversion: partitioned Parquet → an Examples artifact's TFRecord shards and split statistics,
in one Beam pass. `plan` (splits, output options, shards; no Beam), `transform` (the Beam
PTransform that writes a staging folder), `staging` (a run's own staging folder, the exclusive
publish claim, the abandoned-run sweep), `publish` (check, claim, move), `convert` (the whole
run, for the CLI and the ExampleGen executor) and `peek` (the first records, for `head`).
"""

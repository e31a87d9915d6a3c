"""Conversion (no TFX): partitioned Parquet → an Examples artifact's TFRecord shards and split
statistics, in one Beam pass. `plan` (splits, output options, shards; no Beam), `transform` (the
Beam PTransform that writes a staging folder), `staging` (a run's own staging folder, the
exclusive publish claim, the abandoned-run sweep), `publish` (check, claim, move),
`source_metadata` (the artifact's side file that publish writes: the source's schema and footer
statistics), `convert` (the whole run, for the CLI and the ExampleGen executor), `peek` (the
first records, for `head`), and `columns` (a source's column names, and the CLI's check of the
names its flags give).
"""

__all__ = [
    "columns",
    "convert",
    "peek",
    "plan",
    "publish",
    "source_metadata",
    "staging",
    "transform",
]

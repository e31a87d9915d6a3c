"""The `tfx-tabular` command: `app` (the parser, global flags, JSON output), `common` (exit codes,
errors and their hints by type, output for people, argument helpers), `flags` (the flags of
component and pipeline parameters, generated from their declarations), `data`
(convert, infer-schema, show-schema, show-statistics, head) and `pipelines` (run, demo, compile,
submit, run-compiled) and `services` (data-service).
Heavy imports (TensorFlow, Beam, TFX) happen inside the commands that need them."""

from tfx_tabular.cli.app import main

__all__ = ["main"]

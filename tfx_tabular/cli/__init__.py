"""The `tfx-tabular` command: `app` (flags, exit codes, errors, JSON output), `data` (convert,
infer-schema, show-schema, head) and `pipelines` (run, demo, compile, submit, run-compiled).
Heavy imports (TensorFlow, Beam, TFX) happen inside the commands that need them."""

from tfx_tabular.cli.app import main

__all__ = ["main"]

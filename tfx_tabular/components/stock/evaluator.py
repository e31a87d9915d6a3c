"""Stock Evaluator's executor, without TFX packaging itself for a local Beam runner."""

from tfx.components.evaluator import executor

from tfx_tabular.components.beam_executor import BeamExecutor


class Executor(BeamExecutor, executor.Executor):
    """`tfx.components.evaluator.executor.Executor`, run as `BeamExecutor` makes Beam executors."""

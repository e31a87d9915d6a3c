"""Stock StatisticsGen's executor, without TFX packaging itself for a local Beam runner."""

from tfx.components.statistics_gen import executor

from tfx_tabular.components.beam_executor import BeamExecutor


class Executor(BeamExecutor, executor.Executor):
    """`tfx.components.statistics_gen.executor.Executor`, run as `BeamExecutor` makes Beam executors."""

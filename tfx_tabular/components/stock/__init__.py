"""Stock TFX Beam components' executors as our pipelines run them: each is the stock executor
with `BeamExecutor` before it, so the stock work runs unchanged but, for a Beam runner in this
process, TFX does not build and leave an sdist of itself in the temporary folder at every run
(`beam_executor`). One module per component, imported only when its component is used."""

from __future__ import annotations

from tfx.dsl.components.base import executor_spec

__all__ = ["without_local_packaging"]


def _executor_class(component) -> type:
    """Our executor class for a stock component (imports only its own stock executor)."""
    name = type(component).__name__
    if name == "StatisticsGen":
        from tfx_tabular.components.stock.statistics_gen import Executor
    elif name == "Transform":
        from tfx_tabular.components.stock.transform import Executor
    elif name == "Evaluator":
        from tfx_tabular.components.stock.evaluator import Executor
    else:
        raise ValueError(f"no executor of ours for the stock component {name}")
    return Executor


def without_local_packaging(component):
    """`component` (stock StatisticsGen, Transform or Evaluator) running its executor from here;
    the Beam arguments it was given are kept."""
    given = component.executor_spec
    spec = executor_spec.BeamExecutorSpec(_executor_class(component))
    spec.add_extra_flags(given.extra_flags)
    spec.add_beam_pipeline_args(given.beam_pipeline_args)
    component.executor_spec = spec
    return component

"""Stock TFX Beam components' executors as our pipelines run them: each is the stock executor
with `BeamExecutor` before it, so the stock work runs unchanged but, for a Beam runner in this
process, TFX does not build and leave an sdist of itself in the temporary folder at every run
(`beam_executor`). One module per component, imported only when its component is used."""

from __future__ import annotations

import importlib

from tfx.dsl.components.base import executor_spec

# Stock component class → the module of its executor here (`<module>.Executor`).
_EXECUTORS = {
    "StatisticsGen": "tfx_tabular.components.stock.statistics_gen",
    "Transform": "tfx_tabular.components.stock.transform",
    "Evaluator": "tfx_tabular.components.stock.evaluator",
}


def without_local_packaging(component):
    """`component` (stock StatisticsGen, Transform or Evaluator) running its executor from here;
    the Beam arguments it was given are kept."""
    module = importlib.import_module(_EXECUTORS[type(component).__name__])
    given = component.executor_spec
    spec = executor_spec.BeamExecutorSpec(module.Executor)
    spec.add_extra_flags(given.extra_flags)
    spec.add_beam_pipeline_args(given.beam_pipeline_args)
    component.executor_spec = spec
    return component

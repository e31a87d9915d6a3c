"""Benchmarks for tfx_tabular: `make bench` (= `python -m benchmarks.run`) writes docs/benchmarks.md.

Measuring and rendering are separate. `run.py` measures the sections (one module each, e.g.
`examplegen.py`, whose `run(ctx)` returns its tidy rows: section, configuration, metric, samples;
`results.py`) and saves them all to docs/benchmarks.json, then renders. `report.py` is the one
renderer (`python -m benchmarks.report`): the tables, plot panels and README rows `layout.py`
declares, the targets of `targets.py`, the static method text of `method/*.md`. `harness.py`
holds what the sections share: machine facts, datasets, child-process runs with peak-memory
sampling; `worker.py` is the child-process entry point, so every measured run starts in a fresh
interpreter.
"""

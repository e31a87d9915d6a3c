"""Benchmarks for tfx_tabular: `make bench` (= `python -m benchmarks.run`) writes docs/benchmarks.md.

Measuring and rendering are separate. `run.py` measures the sections (one module each, e.g.
`examplegen.py`, whose `run(ctx)` returns a JSON-serialisable results record) and saves them all to
docs/benchmarks.json, then renders; `report.py` turns such a file into the Markdown and the plot
(`python -m benchmarks.report docs/benchmarks.json`), with one `report_<section>.py` renderer per
section, and `report_readme.py` into README.md's performance table (`--readme`). `harness.py`
holds what they share: machine facts, datasets, child-process runs with peak-RSS sampling, medians
and report pieces; `worker.py` is the child-process entry point, so every measured run starts in a
fresh interpreter.
"""

"""Benchmarks for tfx_tabular: `make bench` (= `python -m benchmarks.run`) writes docs/benchmarks.md.

`run.py` drives the sections (one module each, e.g. `examplegen.py`); `harness.py` holds what they
share: machine facts, datasets, child-process runs with peak-RSS sampling, medians and report
pieces; `worker.py` is the child-process entry point, so every measured run starts in a fresh
interpreter.
"""

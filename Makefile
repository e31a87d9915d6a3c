# The README's first two commands: `make demo` (the main job) and `make test` (the suite).
PY := .venv/bin/python
DEMO_ROWS ?= 200000
DEMO_DIR ?= out/demo
BENCH_ROWS ?= 1000000
BENCH_REPEATS ?= 2
# `make test` runs in this many pytest-xdist workers: one more than the cores here, since many
# tests wait on subprocesses, servers and files rather than compute.
TEST_WORKERS ?= 3

.PHONY: setup demo test test-fast lint format bench lock clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m tfx_tabular.cli demo --rows $(DEMO_ROWS) --workdir $(DEMO_DIR)

# Exit code 5 (no tests collected) is a failure, not a pass.
PYTEST = rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

# Tests sharing a module-scoped fixture stay in one worker; slow tests start first (tests/conftest.py).
test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder; $(PYTEST)

# The inner loop: the unit tests that start no other processes (not the `slow` ones: no TFX
# pipelines, multi-process Beam or servers), in two pytest-xdist workers (one per core: half of
# one process's time is importing TensorFlow and friends).
test-fast: setup
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "not slow" tests/unit; $(PYTEST)

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

format: setup
	.venv/bin/ruff check --fix .
	.venv/bin/ruff format .

bench: setup
	$(PY) -m benchmarks.run --rows $(BENCH_ROWS) --repeats $(BENCH_REPEATS)

# Re-resolve uv.lock after editing pyproject.toml, with the project's Python 3.10 (uv would
# otherwise download one).
lock: setup
	.tools/uv-0.13.9/bin/uv lock --python $(PY)

clean:
	rm -rf out .pytest_cache

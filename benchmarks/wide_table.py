"""Section — wide tables (issues 28 and 48): a 2,000-column dataset converted with and without
the one-pass statistics, beside a Criteo-shaped dataset of the same number of values, each in a
fresh child process (repeats interleaved); then `infer-schema` and `show-schema` on the wide
output; then `tfx-tabular run` for one epoch, as a user types it, on the wide table with a label
and on the Criteo-shaped table of as many rows. Reported per configuration: wall seconds, CPU
seconds of the process tree, peak RSS; for the runs, training steps/s and the export's seconds.

    python -m benchmarks.wide_table DIR [--rows 50000] [--columns 2000] [--label]

writes the wide dataset alone (for trying things by hand; with a label, as the runs use it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

from benchmarks import harness
from benchmarks.harness import Context
from benchmarks.results import Recorder

ROWS = 50_000
COLUMNS = 2_000
FILES = 5  # one row group each, as pyarrow and pandas write a file by default
NULL_SHARE = 0.05
CATEGORIES = 1_000  # distinct strings per string column
CONFIGS = ("wide-without", "wide-with", "criteo-without", "criteo-with")
SCHEMA = "infer-schema, show-schema on the wide output"
RUNS = ("run: 2,000 columns, 1 epoch", "run: Criteo-shaped, 1 epoch")
BATCH_SIZE = 1024  # `run`'s default batch, to turn its examples/s into steps/s


def wide_columns(columns: int) -> list[tuple[str, str]]:
    """(name, type) of the wide table: two fifths int64, two fifths float64, a fifth strings."""
    kinds = ("int", "float", "int", "float", "string")
    return [(f"f{i:04d}_{kinds[i % 5]}", kinds[i % 5]) for i in range(columns)]


def _wide_column(kind: str, rows: int, rng):
    import numpy as np
    import pyarrow as pa

    mask = rng.random(rows) < NULL_SHARE
    if kind == "int":
        return pa.array(rng.geometric(0.01, rows).astype(np.int64), mask=mask)
    if kind == "float":
        return pa.array(rng.standard_normal(rows), mask=mask)
    dictionary = pa.array([f"v{j:07x}" for j in range(CATEGORIES)])
    codes = pa.array(rng.zipf(1.3, rows) % CATEGORIES, mask=mask)
    return dictionary.take(codes)


def _label(arrays: list, rng):
    """A binary label the first ten float columns decide, with noise (nulls read as 0)."""
    import numpy as np
    import pyarrow as pa

    floats = [a.fill_null(0.0).to_numpy() for a in arrays if pa.types.is_float64(a.type)][:10]
    score = np.sum(floats, axis=0) + rng.standard_normal(len(arrays[0])) * 2
    return pa.array(score > 0)


def write_wide_dataset(
    root: str, rows: int = ROWS, columns: int = COLUMNS, label: bool = False
) -> str:
    """`rows` x `columns` in FILES files under `root` (kept and reused when complete); with
    `label`, a bool column `label` besides."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if harness._complete(root, rows):
        return root
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    rng = np.random.default_rng(28)
    names = wide_columns(columns)
    for index, count in enumerate(np.diff(np.linspace(0, rows, FILES + 1).astype(int))):
        arrays = [_wide_column(kind, int(count), rng) for _, kind in names]
        table = pa.table(arrays, names=[name for name, _ in names])
        if label:
            table = table.append_column("label", _label(arrays, rng))
        pq.write_table(table, os.path.join(root, f"part-{index:05d}.parquet"))
    harness._mark_complete(root, rows)
    return root


def task_convert(input_base: str, output_dir: str, with_example_statistics: bool) -> dict:
    from tfx_tabular.conversion import convert, plan

    dataset, splits = plan.plan_conversion(input_base)
    example_statistics_dir = (
        os.path.join(output_dir, "statistics") if with_example_statistics else None
    )
    start, cpu = time.perf_counter(), _cpu_seconds()
    result = convert.convert(
        dataset,
        os.path.join(output_dir, "examples"),
        splits,
        example_statistics_dir=example_statistics_dir,
    )
    seconds, cpu_seconds = time.perf_counter() - start, _cpu_seconds() - cpu
    rows = sum(result.rows.values())
    if rows != dataset.num_rows:
        raise RuntimeError(f"wrote {rows} rows of {dataset.num_rows}")
    values = _values(dataset)
    return {
        "rows": rows,
        "values": values,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "values_per_cpu_second": values / cpu_seconds,
    }


def _cpu_seconds() -> float:
    """CPU time of this process and its waited-for children (Beam's DirectRunner uses threads)."""
    own, children = (
        resource.getrusage(r) for r in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _values(dataset) -> int:
    """The non-null cells of a dataset, from its footers (a list column counts its rows)."""
    stats = dataset.column_stats()
    return sum(dataset.num_rows - (s.null_count or 0) for s in stats.values())


def task_schema(examples_dir: str, example_statistics_dir: str, schema_path: str) -> dict:
    """`infer-schema` then `show-schema`, as a user types them (their CLI functions, timed)."""
    from tfx_tabular.cli import app

    start = time.perf_counter()
    infer = ["infer-schema", examples_dir, "--example-statistics", example_statistics_dir]
    if app.main([*infer, "-o", schema_path]) != 0:
        raise RuntimeError("infer-schema failed")
    inferred = time.perf_counter()
    with open(os.devnull, "w") as sink:
        stdout, sys.stdout = sys.stdout, sink
        try:
            code = app.main(["show-schema", schema_path])
        finally:
            sys.stdout = stdout
    if code != 0:
        raise RuntimeError("show-schema failed")
    return {"infer_seconds": inferred - start, "show_seconds": time.perf_counter() - inferred}


def task_run(data_root: str, pipeline_root: str) -> dict:
    """`tfx-tabular run` for one epoch, default flags otherwise, as a user types it (the
    installed command, in its own process): its wall seconds and what its JSON report says."""
    command = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")
    arguments = ["run", "--data-root", data_root, "--pipeline-root", pipeline_root]
    start = time.perf_counter()
    done = subprocess.run(
        [command, *arguments, "--epochs", "1", "--json"], capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"tfx-tabular run failed ({done.returncode}): {done.stderr[-3000:]}")
    report = json.loads(done.stdout)
    training = report["training"]
    return {
        "seconds": seconds,
        "features": report["schema"]["features"],
        "steps": training["total_steps"],
        "steps_per_second": training["examples_per_second"] / BATCH_SIZE,
        "export_seconds": training["export_seconds"],
        "eval_auc": training["eval"]["auc"],
    }


def _run(ctx: Context, name: str, data: str, target: str) -> dict:
    shutil.rmtree(target, ignore_errors=True)
    run = harness.run_task(ctx, name, "wide_table:task_run", data_root=data, pipeline_root=target)
    r = run.result
    print(
        f"  {name}: {r['seconds']:.1f} s, {r['steps']} steps at {r['steps_per_second']:.2f}/s, "
        f"export {r['export_seconds']:.1f} s, eval AUC {r['eval_auc']:.3f}, "
        f"peak RSS {run.peak_rss / 2**20:,.0f} MiB",
        flush=True,
    )
    shutil.rmtree(target, ignore_errors=True)
    return harness.sample(run)


def _convert(
    ctx: Context, name: str, data: str, target: str, with_example_statistics: bool
) -> dict:
    shutil.rmtree(target, ignore_errors=True)
    run = harness.run_task(
        ctx,
        name,
        "wide_table:task_convert",
        input_base=data,
        output_dir=target,
        with_example_statistics=with_example_statistics,
    )
    r = run.result
    print(
        f"  {name}: {r['seconds']:.2f} s, {r['cpu_seconds']:.1f} CPU-s, "
        f"peak RSS {run.peak_rss / 2**20:,.0f} MiB",
        flush=True,
    )
    return harness.sample(run)


def run(ctx: Context) -> list[dict]:
    """Measure the section; returns its rows (see `results`)."""
    print("Section — wide tables: 2,000 columns vs Criteo-shaped, with and without statistics")
    wide = write_wide_dataset(ctx.path("data", f"wide-{ROWS}x{COLUMNS}"))
    criteo_rows = ROWS * COLUMNS // len(_criteo_columns())
    data = {"wide": wide, "criteo": ctx.dataset(min(criteo_rows, ctx.rows))}
    out = ctx.path("wide")
    _convert(ctx, "wide-warm-up", wide, os.path.join(out, "warm-up"), True)
    recorder = Recorder("wide_table")
    for repeat in range(ctx.repeats):
        for config in CONFIGS:
            source, statistics = config.split("-")
            target = os.path.join(out, f"{config}-{repeat}")
            recorder.add(
                config,
                _convert(ctx, f"{config}-{repeat}", data[source], target, statistics == "with"),
            )
            if repeat or config != "wide-with":
                shutil.rmtree(target, ignore_errors=True)
    kept = os.path.join(out, "wide-with-0")
    schema = harness.run_task(
        ctx,
        "wide-schema",
        "wide_table:task_schema",
        examples_dir=os.path.join(kept, "examples"),
        example_statistics_dir=os.path.join(kept, "statistics"),
        schema_path=os.path.join(out, "schema.pbtxt"),
    ).result
    print(
        f"  infer-schema {schema['infer_seconds']:.2f} s, show-schema "
        f"{schema['show_seconds']:.2f} s",
        flush=True,
    )
    recorder.add(SCHEMA, {"columns": COLUMNS, **schema})
    shutil.rmtree(out, ignore_errors=True)
    labelled = write_wide_dataset(ctx.path("data", f"wide-{ROWS}x{COLUMNS}-label"), label=True)
    for repeat in range(ctx.repeats):
        for name, source in zip(RUNS, (labelled, ctx.dataset(ROWS)), strict=True):
            recorder.add(name, _run(ctx, f"run-{name[5:9]}-{repeat}", source, out))
    shutil.rmtree(out, ignore_errors=True)
    return recorder.rows()


def _criteo_columns() -> list[str]:
    from tfx_tabular.demo import criteo

    return criteo.SCHEMA.names


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.wide_table", description=__doc__)
    p.add_argument("dir")
    p.add_argument("--rows", type=int, default=ROWS)
    p.add_argument("--columns", type=int, default=COLUMNS)
    p.add_argument("--label", action="store_true", help="add the bool column `label`")
    args = p.parse_args(argv)
    print(write_wide_dataset(args.dir, args.rows, args.columns, args.label))
    return 0


if __name__ == "__main__":
    sys.exit(main())

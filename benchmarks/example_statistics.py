"""Section — one-pass statistics: the conversion with and without ParquetExampleGen's statistics
(repeats interleaved, same data, default options), stock StatisticsGen's extra pass over the
Examples ours wrote, and peak memory with statistics at the main size and 10x it."""

from __future__ import annotations

import os
import shutil
import time

from benchmarks import harness
from benchmarks.harness import Context
from benchmarks.schema_inference import stock_statistics_gen

CONFIGS = ("without", "with")
LARGE_SCALE = 10  # peak memory with statistics also at 10x the main dataset (one run)


def task_convert(input_base: str, output_dir: str, with_statistics: bool) -> dict:
    from tfx_tabular.conversion import convert, plan

    dataset, splits = plan.plan_conversion(input_base)
    statistics_dir = os.path.join(output_dir, "statistics") if with_statistics else None
    start = time.perf_counter()
    result = convert.convert(
        dataset, os.path.join(output_dir, "examples"), splits, statistics_dir=statistics_dir
    )
    return {
        "rows": sum(result.rows.values()),
        "expected": dataset.num_rows,
        "seconds": time.perf_counter() - start,
    }


def task_stock(examples_dir: str, output_dir: str) -> dict:
    """Stock TFX StatisticsGen's executor over the Examples ours wrote."""
    start = time.perf_counter()
    stock_statistics_gen(examples_dir, output_dir)
    return {"seconds": time.perf_counter() - start}


def _convert(ctx: Context, name: str, data: str, target: str, with_statistics: bool) -> dict:
    shutil.rmtree(target, ignore_errors=True)
    run = harness.run_task(
        ctx,
        name,
        "example_statistics:task_convert",
        input_base=data,
        output_dir=target,
        with_statistics=with_statistics,
    )
    r = run.result
    print(f"  {name}: {r['seconds']:.2f} s, peak RSS {run.peak_rss / 2**20:,.0f} MiB", flush=True)
    return harness.sample(run)


def run(ctx: Context) -> dict:
    """Measure the section; returns its results record (see `report_example_statistics`)."""
    print("Section — one-pass statistics: with vs without, vs stock StatisticsGen", flush=True)
    data = ctx.dataset(ctx.rows)
    out = ctx.path("statistics")
    # Untimed: the encoder's JIT kernels reach numba's on-disk cache before the first timing.
    _convert(ctx, "statistics-warm-up", data, os.path.join(out, "warm-up"), True)
    samples = {config: [] for config in CONFIGS}
    for repeat in range(ctx.repeats):
        for config in CONFIGS:
            target = os.path.join(out, f"{config}-{repeat}")
            samples[config].append(
                _convert(ctx, f"statistics-{config}-{repeat}", data, target, config == "with")
            )
            if repeat or config == "with":
                shutil.rmtree(target, ignore_errors=True)
    stock = harness.run_task(
        ctx,
        "statistics-stock",
        "example_statistics:task_stock",
        examples_dir=os.path.join(out, "without-0", "examples"),
        output_dir=os.path.join(out, "stock"),
    ).result
    print(f"  stock StatisticsGen: {stock['seconds']:.1f} s", flush=True)
    large_rows = LARGE_SCALE * ctx.rows
    large = _convert(
        ctx, "statistics-with-large", ctx.dataset(large_rows), os.path.join(out, "large"), True
    )
    shutil.rmtree(out, ignore_errors=True)
    return {
        "rows": ctx.rows,
        "large_rows": large_rows,
        "samples": samples,
        "stock": stock,
        "large": large,
    }

"""Section — one-pass statistics and columnar batches: the conversion with and without
ParquetExampleGen's statistics and with and without its columnar batch records (repeats
interleaved, same data, otherwise default options), stock StatisticsGen's extra pass over the
Examples ours wrote, and peak memory with both at the main size and 10x it."""

from __future__ import annotations

import os
import shutil
import time

from benchmarks import harness
from benchmarks.harness import Context
from benchmarks.schema_inference import stock_statistics_gen

# (name, with statistics, with columnar batches)
CONFIGS = (
    ("without", False, False),
    ("with", True, False),
    ("columnar", False, True),
    ("columnar-with", True, True),
)
LARGE_SCALE = 10  # peak memory with both also at 10x the main dataset (one run)
# Runs per configuration, at least: each takes seconds, and the costs compared are tens of
# percent, so two runs on this noisy a machine leave the median to chance.
MIN_REPEATS = 5


def task_convert(
    input_base: str, output_dir: str, with_statistics: bool, columnar: bool = False
) -> dict:
    from tfx_tabular.coders import columnar as layout
    from tfx_tabular.conversion import convert, plan

    dataset, splits = plan.plan_conversion(input_base)
    statistics_dir = os.path.join(output_dir, "statistics") if with_statistics else None
    examples = os.path.join(output_dir, "examples")
    options = plan.OutputOptions(columnar_batch_rows=layout.DEFAULT_BATCH_ROWS if columnar else 0)
    start = time.perf_counter()
    result = convert.convert(dataset, examples, splits, options, statistics_dir=statistics_dir)
    return {
        "rows": sum(result.rows.values()),
        "expected": dataset.num_rows,
        "seconds": time.perf_counter() - start,
        "per_row_bytes": sum(
            harness.folder_bytes(os.path.join(examples, f"Split-{name}")) for name in result.rows
        ),
        "columnar_bytes": harness.folder_bytes(os.path.join(examples, layout.FOLDER)),
    }


def task_stock(examples_dir: str, output_dir: str) -> dict:
    """Stock TFX StatisticsGen's executor over the Examples ours wrote."""
    start = time.perf_counter()
    stock_statistics_gen(examples_dir, output_dir)
    return {"seconds": time.perf_counter() - start}


def _convert(
    ctx: Context, name: str, data: str, target: str, with_statistics: bool, columnar: bool
) -> dict:
    shutil.rmtree(target, ignore_errors=True)
    run = harness.run_task(
        ctx,
        name,
        "example_statistics:task_convert",
        input_base=data,
        output_dir=target,
        with_statistics=with_statistics,
        columnar=columnar,
    )
    r = run.result
    print(f"  {name}: {r['seconds']:.2f} s, peak RSS {run.peak_rss / 2**20:,.0f} MiB", flush=True)
    return harness.sample(run)


def run(ctx: Context) -> dict:
    """Measure the section; returns its results record (see `report_example_statistics`)."""
    print(
        "Section — one-pass statistics and columnar batches: with vs without, vs stock "
        "StatisticsGen",
        flush=True,
    )
    data = ctx.dataset(ctx.rows)
    out = ctx.path("statistics")
    # Untimed: the encoder's JIT kernels reach numba's on-disk cache before the first timing.
    _convert(ctx, "statistics-warm-up", data, os.path.join(out, "warm-up"), True, True)
    samples = {config: [] for config, _, _ in CONFIGS}
    for repeat in range(max(ctx.repeats, MIN_REPEATS)):
        for config, with_statistics, columnar in CONFIGS:
            target = os.path.join(out, f"{config}-{repeat}")
            samples[config].append(
                _convert(
                    ctx, f"statistics-{config}-{repeat}", data, target, with_statistics, columnar
                )
            )
            if repeat or config != "without":
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
        ctx,
        "statistics-columnar-with-large",
        ctx.dataset(large_rows),
        os.path.join(out, "large"),
        True,
        True,
    )
    shutil.rmtree(out, ignore_errors=True)
    return {
        "rows": ctx.rows,
        "large_rows": large_rows,
        "samples": samples,
        "stock": stock,
        "large": large,
    }

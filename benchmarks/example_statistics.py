"""Section — one-pass statistics and columnar batches: the conversion with and without
ParquetExampleGen's statistics and with and without its columnar batch records (with their
strings too, as a trainer reading exact strings has them written, in one more; repeats
interleaved, same data, otherwise default options), stock StatisticsGen's extra pass over the
Examples ours wrote, and peak memory with both at the main size and 10x it."""

from __future__ import annotations

import os
import shutil
import time
from typing import Optional

from benchmarks import harness
from benchmarks.harness import Context
from benchmarks.results import Recorder, with_rate
from benchmarks.schema_inference import stock_statistics_gen

# (configuration, with statistics, columnar batches: none, fingerprints only, with strings)
CONFIGS = (
    ("conversion", False, None),
    ("conversion + statistics", True, None),
    ("conversion + columnar", False, "fingerprints"),
    ("conversion + columnar + statistics", True, "fingerprints"),
    ("conversion + columnar with strings + statistics", True, "strings"),
)
STOCK = "stock StatisticsGen over ours' Examples (extra pass)"
LARGE = "conversion + columnar + statistics, 10x rows (1 run)"
LARGE_SCALE = 10  # peak memory with both also at 10x the main dataset (one run)
# Runs per configuration, at least: each takes seconds, and the costs compared are tens of
# percent, so two runs on this noisy a machine leave the median to chance.
MIN_REPEATS = 5


def task_convert(
    input_base: str, output_dir: str, with_example_statistics: bool, columnar: Optional[str] = None
) -> dict:
    from tfx_tabular.coders import columnar as layout
    from tfx_tabular.conversion import convert, plan

    dataset, splits = plan.plan_conversion(input_base)
    example_statistics_dir = (
        os.path.join(output_dir, "statistics") if with_example_statistics else None
    )
    examples = os.path.join(output_dir, "examples")
    options = plan.OutputOptions(
        columnar_batch_rows=layout.DEFAULT_BATCH_ROWS if columnar else 0,
        columnar_strings=columnar == "strings",
    )
    start = time.perf_counter()
    result = convert.convert(
        dataset, examples, splits, options, example_statistics_dir=example_statistics_dir
    )
    rows = sum(result.rows.values())
    if rows != dataset.num_rows:
        raise RuntimeError(f"wrote {rows} rows of {dataset.num_rows}")
    return {
        "rows": rows,
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
    ctx: Context,
    name: str,
    data: str,
    target: str,
    with_example_statistics: bool,
    columnar: Optional[str],
) -> dict:
    shutil.rmtree(target, ignore_errors=True)
    run = harness.run_task(
        ctx,
        name,
        "example_statistics:task_convert",
        input_base=data,
        output_dir=target,
        with_example_statistics=with_example_statistics,
        columnar=columnar,
    )
    r = run.result
    print(f"  {name}: {r['seconds']:.2f} s, peak RSS {run.peak_rss / 2**20:,.0f} MiB", flush=True)
    return with_rate(harness.sample(run))


def run(ctx: Context) -> list[dict]:
    """Measure the section; returns its rows (see `results`)."""
    print(
        "Section — one-pass statistics and columnar batches: with vs without, vs stock "
        "StatisticsGen",
        flush=True,
    )
    data = ctx.dataset(ctx.rows)
    out = ctx.path("statistics")
    recorder = Recorder("example_statistics")
    # Untimed: the encoder's JIT kernels reach numba's on-disk cache before the first timing.
    _convert(ctx, "statistics-warm-up", data, os.path.join(out, "warm-up"), True, "strings")
    for repeat in range(max(ctx.repeats, MIN_REPEATS)):
        for index, (config, with_example_statistics, columnar) in enumerate(CONFIGS):
            target = os.path.join(out, f"{index}-{repeat}")
            sample = _convert(
                ctx, f"statistics-{index}-{repeat}", data, target, with_example_statistics, columnar
            )
            recorder.add(config, sample)
            if repeat or index:  # stock reads the first conversion's Examples
                shutil.rmtree(target, ignore_errors=True)
    stock = harness.run_task(
        ctx,
        "statistics-stock",
        "example_statistics:task_stock",
        examples_dir=os.path.join(out, "0-0", "examples"),
        output_dir=os.path.join(out, "stock"),
    ).result
    print(f"  stock StatisticsGen: {stock['seconds']:.1f} s", flush=True)
    recorder.add(STOCK, with_rate({"rows": ctx.rows, **stock}))
    large = _convert(
        ctx,
        "statistics-columnar-with-large",
        ctx.dataset(LARGE_SCALE * ctx.rows),
        os.path.join(out, "large"),
        True,
        "fingerprints",
    )
    recorder.add(LARGE, large)
    shutil.rmtree(out, ignore_errors=True)
    return recorder.rows()

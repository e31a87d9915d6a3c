"""Larger than memory: ParquetExampleGen's conversion and the input_fn each run inside a memory
cgroup whose limit is at most a quarter of the data they process, at three data sizes; peak RSS
against rows.

The cap is a cgroup (v1) memory limit, set by this parent and joined by the child before it
imports anything: it bounds the child's resident memory plus its page cache, and the kernel kills
the child if it needs more. (An address-space cap would not do: TensorFlow reserves far more
virtual memory than it uses.) Where no writable cgroup memory controller exists, the section says
so and measures nothing.
"""

from __future__ import annotations

import glob
import os
import shutil

from benchmarks import harness
from benchmarks.harness import Context

CGROUP_ROOT = "/sys/fs/cgroup/memory"
SIZES = (700_000, 2_000_000, 7_000_000)
CAPS = {"convert": 640 * 2**20, "input_fn": 1024 * 2**20}  # each ≥ the process's own baseline


def _join(cgroup: str) -> None:
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as handle:
        handle.write(str(os.getpid()))


def _peaks(cgroup: str) -> dict:
    with open("/proc/self/status") as handle:
        hwm = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmHWM:"))
    with open(os.path.join(cgroup, "memory.max_usage_in_bytes")) as handle:
        cgroup_peak = int(handle.read())
    return {"peak_rss": hwm, "cgroup_peak": cgroup_peak}


def task_convert(cgroup: str, input_base: str, output_dir: str) -> dict:
    _join(cgroup)
    from tfx_tabular.coders import columnar
    from tfx_tabular.conversion import convert, plan
    from tfx_tabular.source.dataset import open_dataset

    dataset = open_dataset(input_base)
    # As a TabularTrainer pipeline converts: columnar batches too (they buffer a record per split).
    options = plan.OutputOptions(columnar_batch_rows=columnar.DEFAULT_BATCH_ROWS)
    result = convert.convert(dataset, output_dir, options=options)
    return {
        "rows": sum(result.rows.values()),
        "expected": dataset.num_rows,
        "seconds": result.seconds,
        **_peaks(cgroup),
    }


def task_arrow_bytes_per_row(input_base: str) -> dict:
    """Decoded (in-memory Arrow) bytes per row, from the first row group."""
    import pyarrow.parquet as pq

    first = sorted(glob.glob(os.path.join(input_base, "**", "*.parquet"), recursive=True))[0]
    table = pq.ParquetFile(first).read_row_group(0)
    return {"bytes_per_row": table.nbytes / table.num_rows}


def task_input_fn(cgroup: str, examples_dir: str) -> dict:
    _join(cgroup)
    import time

    from tfx_tabular import input_fn
    from tfx_tabular.conversion.source_metadata import read_source_metadata
    from tfx_tabular.schemas.infer import infer_schema

    schema = infer_schema(read_source_metadata(examples_dir), label="label")
    files = sorted(glob.glob(os.path.join(examples_dir, "Split-*", "*")))
    start = time.perf_counter()
    examples = 0
    for _, label in input_fn(files, schema, 4096, num_epochs=1, training=False):
        examples += int(label.shape[0])
    return {"examples": examples, "seconds": time.perf_counter() - start, **_peaks(cgroup)}


def _make_cgroup(name: str, limit: int) -> str:
    path = os.path.join(CGROUP_ROOT, "tfx-tabular-bench", name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "memory.limit_in_bytes"), "w") as handle:
        handle.write(str(limit))
    return path


def _unavailable() -> str:
    if not os.path.isdir(CGROUP_ROOT):
        return f"no cgroup v1 memory controller at {CGROUP_ROOT}"
    try:
        _make_cgroup("probe", 2**30)
        os.rmdir(os.path.join(CGROUP_ROOT, "tfx-tabular-bench", "probe"))
    except OSError as e:
        return f"cannot create a memory cgroup under {CGROUP_ROOT} ({e.strerror})"
    return ""


def _run_capped(ctx: Context, name: str, func: str, limit: int, **params) -> dict:
    cgroup = _make_cgroup(name, limit)
    try:
        return harness.run_task(ctx, name, func, cgroup=cgroup, **params).result
    except RuntimeError as e:
        with open(os.path.join(cgroup, "memory.failcnt")) as handle:
            return {
                "error": f"failed under the cap (memory.failcnt {handle.read().strip()}): "
                f"{str(e).splitlines()[0]}"
            }
    finally:
        os.rmdir(cgroup)


def run(ctx: Context) -> dict:
    """Measure the section; returns its results record (see `report_memory_cap`): `unavailable`
    says why nothing was measured, else per size (rows, as a string) each job's result."""
    reason = _unavailable()
    if reason:
        return {"unavailable": reason, "caps": CAPS}
    print("Section — memory cap: preparing datasets", flush=True)
    data = {n: harness.generated_dataset(ctx.path("data"), n) for n in SIZES}
    bytes_per_row = harness.run_task(
        ctx, "cap-arrow-size", "memory_cap:task_arrow_bytes_per_row", input_base=data[SIZES[-1]]
    ).result["bytes_per_row"]
    out = ctx.path("memory-cap")
    shutil.rmtree(out, ignore_errors=True)
    converted, read = {}, {}
    for n in SIZES:
        target = os.path.join(out, f"examples-{n}")
        converted[n] = _run_capped(
            ctx,
            f"cap-convert-{n}",
            "memory_cap:task_convert",
            CAPS["convert"],
            input_base=data[n],
            output_dir=target,
        )
        converted[n]["data_bytes"] = n * bytes_per_row
        print(
            f"  convert {n:,} rows under {harness.mib(CAPS['convert'])}: {converted[n]}", flush=True
        )
        if "error" in converted[n]:
            read[n] = {"error": "no input: the conversion failed"}
            continue
        read[n] = _run_capped(
            ctx, f"cap-input-{n}", "memory_cap:task_input_fn", CAPS["input_fn"], examples_dir=target
        )
        read[n]["data_bytes"] = harness.folder_bytes(target, "data_tfrecord")
        print(f"  input_fn {n:,} rows under {harness.mib(CAPS['input_fn'])}: {read[n]}", flush=True)
        shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    return {
        "caps": CAPS,
        "bytes_per_row": bytes_per_row,
        "convert": {str(n): r for n, r in converted.items()},
        "input_fn": {str(n): r for n, r in read.items()},
    }

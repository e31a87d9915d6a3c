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

from benchmarks import formats, harness
from benchmarks.harness import Context
from benchmarks.results import Recorder, with_rate

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
    rows = sum(result.rows.values())
    if rows != dataset.num_rows:
        raise RuntimeError(f"wrote {rows} rows of {dataset.num_rows}")
    return {"seconds": result.seconds, **_peaks(cgroup)}


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
    for _, label in input_fn(
        files, schema, 4096, num_epochs=1, training=False, input_form="integers"
    ):
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


def run(ctx: Context) -> list[dict]:
    """Measure the section; returns its rows (see `results`): per job and size its result under
    the cap, or an `error`; where no cgroup can be made, one row saying why."""
    recorder = Recorder("memory_cap")
    reason = _unavailable()
    if reason:
        recorder.add("memory cgroup", {"error": reason})
        return recorder.rows()
    print("Section — memory cap: preparing datasets", flush=True)
    data = {n: harness.generated_dataset(ctx.path("data"), n) for n in SIZES}
    bytes_per_row = harness.run_task(
        ctx, "cap-arrow-size", "memory_cap:task_arrow_bytes_per_row", input_base=data[SIZES[-1]]
    ).result["bytes_per_row"]
    out = ctx.path("memory-cap")
    shutil.rmtree(out, ignore_errors=True)
    for n in SIZES:
        target = os.path.join(out, f"examples-{n}")
        converted = _run_capped(
            ctx,
            f"cap-convert-{n}",
            "memory_cap:task_convert",
            CAPS["convert"],
            input_base=data[n],
            output_dir=target,
        )
        _record(recorder, "convert", n, converted, n * bytes_per_row)
        if "error" in converted:
            continue
        read = _run_capped(
            ctx, f"cap-input-{n}", "memory_cap:task_input_fn", CAPS["input_fn"], examples_dir=target
        )
        _record(recorder, "input_fn", n, read, harness.folder_bytes(target, "data_tfrecord"))
        shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    return recorder.rows()


def _record(recorder: Recorder, job: str, rows: int, result: dict, data_bytes: float) -> None:
    """One job's run under its cap; `data_bytes` is what it processed (see the report)."""
    sample = {"rows": rows, "cap": CAPS[job], "data_bytes": data_bytes, **result}
    if "error" not in result:
        sample = with_rate(sample)
    recorder.add(f"{job}, {rows:,} rows", sample)
    print(f"  {job} {rows:,} rows under {formats.mib(CAPS[job])}: {result}", flush=True)

"""Section — the conversion beyond the DirectRunner: Beam's portable runner with a separate SDK
worker pool process, as Flink / Spark deployments on Kubernetes run it, beside the DirectRunner,
on the same data in the same run (repeats interleaved).

* DirectRunner: ours' default (one thread per core, in the converting process);
* portable, 1 SDK worker: `--runner=PortableRunner --job_endpoint=embed --environment_type=EXTERNAL`
  against a `worker_pool_main` process started here (Beam 2.61's Python job service runs one
  worker per job whatever the options say);
* portable, 2 SDK workers: Beam's FnApiRunner (what that job service runs) given the same pool as
  its default environment and `--direct_num_workers=2`.

Every configuration writes the same shards (`NUM_SHARDS`) from local Parquet to a local folder:
the runner's cost is measured, not a store's. Rows/s counts `run_conversion` (plan → Beam →
publish; the pre-flight worker check and interpreter start-up are outside it, reported apart).
"""

from __future__ import annotations

import os
import shutil
import time

from benchmarks import harness
from benchmarks.harness import Context
from benchmarks.results import Recorder, with_rate

NUM_SHARDS = 4
CONFIGS = {  # name → (configuration, the vCPUs it is charged: None for the machine's)
    "direct": ("DirectRunner, one thread per core (ours' default)", None),
    "portable-1": ("PortableRunner (embed job service) + worker pool, 1 SDK worker", 1),
    "portable-2": ("FnApiRunner + the same worker pool, 2 SDK workers", 2),
}


def _pipeline(config: str, pool_port: int):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from tfx_tabular.conversion import convert

    if config == "direct":
        return beam.Pipeline(options=PipelineOptions(convert.beam_args_with_defaults([])))
    if config == "portable-1":
        args = ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=EXTERNAL"]
        args.append(f"--environment_config=localhost:{pool_port}")
        return beam.Pipeline(options=PipelineOptions(args))
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from apache_beam.transforms.environments import ExternalEnvironment

    runner = FnApiRunner(default_environment=ExternalEnvironment(f"localhost:{pool_port}"))
    return beam.Pipeline(runner=runner, options=PipelineOptions(["--direct_num_workers=2"]))


def task_convert(input_base: str, output_dir: str, config: str, pool_port: int) -> dict:
    from tfx_tabular.conversion import convert, plan

    dataset, splits = plan.plan_conversion(input_base)
    pipeline = _pipeline(config, pool_port)
    start = time.perf_counter()
    result = convert.run_conversion(
        dataset, splits, output_dir, plan.OutputOptions(num_shards=NUM_SHARDS), pipeline
    )
    rows = sum(result.rows.values())
    return {
        "rows": rows,
        "missing_rows": dataset.num_rows - rows,
        "seconds": result.seconds,
        # run_conversion's pre-flight worker check comes before its own clock starts.
        "check_seconds": time.perf_counter() - start - result.seconds,
    }


def _start_pool(ctx: Context):
    """A worker pool whose workers run this venv's python and import the code snapshot."""
    from tfx_tabular.runners.worker_pool import start_local_pool

    env = harness.child_env()
    env["PYTHONPATH"] = os.pathsep.join([ctx.code, env.get("PYTHONPATH", "")])
    os.makedirs(ctx.path("logs"), exist_ok=True)
    return start_local_pool(ctx.path("logs", "portable-pool.log"), env=env)


def run(ctx: Context) -> list[dict]:
    """Measure the section; returns its rows (see `results`)."""
    print("Section — portable runner: DirectRunner vs an external SDK worker pool", flush=True)
    data = ctx.dataset(ctx.rows)
    out = ctx.path("portable")
    pool, port = _start_pool(ctx)
    recorder = Recorder("portable_runner")
    try:
        for repeat in range(ctx.repeats):
            for config, (label, vcpus) in CONFIGS.items():
                target = os.path.join(out, f"{config}-{repeat}")
                shutil.rmtree(target, ignore_errors=True)
                run = harness.run_task(
                    ctx,
                    f"portable-{config}-{repeat}",
                    "portable_runner:task_convert",
                    input_base=data,
                    output_dir=target,
                    config=config,
                    pool_port=port,
                )
                sample = with_rate(harness.sample(run))
                recorder.add(label, {**sample, "vcpus": vcpus or os.cpu_count()})
                shutil.rmtree(target, ignore_errors=True)
                print(
                    f"  {config} {repeat + 1}/{ctx.repeats}: {sample['rows_per_second']:,.0f} "
                    f"rows/s ({sample['seconds']:.1f} s, worker check {sample['check_seconds']:.1f} s)",
                    flush=True,
                )
    finally:
        pool.terminate()
        pool.wait(10)
        shutil.rmtree(out, ignore_errors=True)
    return recorder.rows()

"""Section — input workers (tf.data service): a trainer process reading its input through a
dispatcher and two local input worker processes (`tfx-tabular data-service`), against the same
input read in-process, on both paths (columnar batches, per-row records), batches of 4,096.
Reported per configuration: examples/s, and the CPU the trainer process spends per example (the
servers are separate processes, not counted there).

On 2 cores the workers and the trainer share the machine: the examples/s here say what the
service costs, not what it gains; the trainer's CPU per example is what carries over to a
trainer whose input workers run elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from benchmarks import harness, input_pipeline
from benchmarks.harness import Context
from benchmarks.results import Recorder

WORKERS = 2
PATHS = {"columnar batches": True, "per-row records": False}
WHERE = ("in-process", f"{WORKERS} workers")


def label(where: str, path: str) -> str:
    return f"{where}, {path}"


READY = {"dispatcher": "serving on", "worker": "registered with"}


def task_input(examples_dir: str, columnar: bool, data_service: str = "") -> dict:
    """Examples/s of `input_fn` (through the service when `data_service`), and this process's
    CPU seconds per example over the measured batches."""
    import tensorflow as tf

    from tfx_tabular import input_fn

    schema, files = input_pipeline._setup(examples_dir)
    dataset = input_fn(
        files,
        schema,
        input_pipeline.BATCH,
        num_epochs=None,
        columnar_batches=columnar,
        input_form=input_pipeline.FORM,
        data_service=data_service or None,
    )
    iterator, drain = iter(dataset), input_pipeline._drainer()
    drain(iterator, tf.constant(1))
    cpu, start = time.process_time(), time.perf_counter()
    examples = int(drain(iterator, tf.constant(input_pipeline.BATCHES)))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    return {
        "examples": examples,
        "examples_per_second": examples / seconds,
        "trainer_cpu_per_million_examples": cpu_seconds / examples * 1e6,
    }


def _serve(ctx: Context, role: str, *flags: str) -> subprocess.Popen:
    """`tfx-tabular data-service ROLE FLAGS` in its own process, once it says it is up."""
    log = ctx.path("logs", f"data-service-{role}-{time.monotonic_ns()}.log")
    env = {**harness.child_env(), "PYTHONPATH": ctx.code}
    command = [sys.executable, "-m", "tfx_tabular.cli", "data-service", role, *flags]
    process = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while READY[role] not in open(log).read():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"data-service {role} did not start; log {log}")
        time.sleep(0.2)
    return process


def _start_service(ctx: Context) -> tuple[str, list]:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"localhost:{port}"
    processes = [_serve(ctx, "dispatcher", "--port", str(port))]
    processes += [_serve(ctx, "worker", "--dispatcher", address) for _ in range(WORKERS)]
    return address, processes


def run(ctx: Context) -> list[dict]:
    """Measure the section; returns its rows (see `results`)."""
    print(f"Section — input workers: {WORKERS} local tf.data service workers vs in-process")
    examples = ctx.path("schema", "examples")  # the input section's (converted once)
    harness.run_task(
        ctx,
        "data-service-convert",
        "schema_inference:task_convert",
        input_base=ctx.dataset(ctx.rows),
        output_dir=examples,
    )
    os.makedirs(ctx.path("logs"), exist_ok=True)
    address, servers = _start_service(ctx)
    recorder = Recorder("data_service")
    try:
        for repeat in range(ctx.repeats):
            for path, columnar in PATHS.items():
                for where, service in zip(WHERE, ("", address), strict=True):
                    name = label(where, path)
                    run = harness.run_task(
                        ctx,
                        f"data-service-{repeat}-{where}-{columnar}".replace(" ", "-"),
                        "data_service:task_input",
                        examples_dir=examples,
                        columnar=columnar,
                        data_service=service,
                    )
                    r = run.result
                    print(
                        f"  {name}: {r['examples_per_second']:,.0f} examples/s, trainer CPU "
                        f"{r['trainer_cpu_per_million_examples']:.2f} s per 1M examples",
                        flush=True,
                    )
                    recorder.add(name, harness.sample(run))
    finally:
        for process in servers:
            process.terminate()
            process.wait()
    return recorder.rows()

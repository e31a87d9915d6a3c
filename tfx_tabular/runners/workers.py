"""A pre-flight check of the SDK workers a portable runner uses (`--environment_type=EXTERNAL`).

With an external worker pool (`python -m apache_beam.runners.worker.worker_pool_main`, as Flink
and Spark deployments on Kubernetes run beside each task manager), the pool starts each worker as
`python -c ...` with the `python` on ITS PATH. When that Python lacks apache_beam the worker dies
at once, the pool does not notice and the runner waits for it forever: a conversion hangs without
a word. Before the real pipeline, `check_sdk_workers` fails with the cause named when no worker
starts within the time limit: with the embedded job service (`--job_endpoint=embed`) it asks the
pool for one worker itself and waits for its connection; through a job server it runs a
one-element probe job, which also checks the workers load tfx_tabular and the driver's Beam.
"""

from __future__ import annotations

import os
import sys
import threading

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions
from apache_beam.portability.api import beam_fn_api_pb2_grpc
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms.environments import ExternalEnvironment

TIMEOUT_VARIABLE = "TFX_TABULAR_WORKER_START_TIMEOUT"
DEFAULT_TIMEOUT_SECONDS = 120.0


class WorkerStartError(RuntimeError):
    """The runner's SDK workers did not start, or cannot run tfx_tabular."""


def _check_worker(_, driver_beam: str) -> str:
    """Runs in a worker: that it runs at all proves apache_beam and tfx_tabular import there."""
    import tfx_tabular  # noqa: F401  (the worker's interpreter must hold the package)

    if beam.__version__ != driver_beam:
        raise WorkerStartError(
            f"the SDK worker ({sys.executable}) has apache-beam {beam.__version__}, the driver "
            f"{driver_beam}: run the worker pool with the same environment as the driver"
        )
    return sys.executable


def _timeout_seconds() -> float:
    value = os.environ.get(TIMEOUT_VARIABLE, "")
    try:
        return float(value) if value else DEFAULT_TIMEOUT_SECONDS
    except ValueError:
        raise WorkerStartError(f"{TIMEOUT_VARIABLE}={value!r} is not a number of seconds") from None


def _pool_stub(url: str):
    import grpc

    return beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(grpc.insecure_channel(url))


class _FirstContact(beam_fn_api_pb2_grpc.BeamFnControlServicer):
    """A control service that only records that a worker connected, then ends the stream."""

    def __init__(self):
        self.connected = threading.Event()

    def Control(self, request_iterator, context):  # noqa: N802 (the gRPC method's name)
        self.connected.set()
        return iter(())


def _handshake(url: str, timeout: float) -> None:
    """Ask the pool for one worker pointed at a control service of our own and wait until it
    connects. With `--job_endpoint=embed` the runner lives in this process, and a runner waiting
    for a dead worker would keep the process alive even after an error: so no probe pipeline."""
    from concurrent import futures

    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2, endpoints_pb2

    contact = _FirstContact()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    beam_fn_api_pb2_grpc.add_BeamFnControlServicer_to_server(contact, server)
    port = server.add_insecure_port("localhost:0")
    server.start()
    worker_id = f"tfx-tabular-probe-{os.getpid()}"
    try:
        stub = _pool_stub(url)
        try:
            response = stub.StartWorker(
                beam_fn_api_pb2.StartWorkerRequest(
                    worker_id=worker_id,
                    control_endpoint=endpoints_pb2.ApiServiceDescriptor(url=f"localhost:{port}"),
                ),
                timeout=min(timeout, 10),
            )
        except grpc.RpcError as e:
            raise WorkerStartError(
                f"no SDK worker pool answers at {url} (--environment_config): {e.code().name}; "
                "start one with `python -m apache_beam.runners.worker.worker_pool_main "
                "--service_port=PORT`"
            ) from None
        if response.error:
            raise WorkerStartError(
                f"the SDK worker pool at {url} cannot start a worker: {response.error}"
            )
        if not contact.connected.wait(timeout):
            raise _not_started(url, timeout)
        stub.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id=worker_id), timeout=10)
    finally:
        server.stop(0)


def _not_started(url: str, timeout: float) -> WorkerStartError:
    return WorkerStartError(
        f"no SDK worker of the pool at {url} started within {timeout:g} s ({TIMEOUT_VARIABLE}): "
        "the pool starts each worker as `python` from its own PATH, and that Python must have "
        "apache_beam and tfx_tabular installed (the driver's environment; in the image, "
        "/opt/tfx-tabular/.venv/bin comes first on PATH). The pool's log shows the worker's error."
    )


def _probe_pipeline(options: PipelineOptions, url: str, timeout: float) -> None:
    """Run a one-element pipeline on `options` (a job server of its own runs it, so a stuck probe
    is cancelled there and does not hold this process)."""
    probe = beam.Pipeline(options=options)
    _ = (
        probe
        | "Probe" >> beam.Create([None])
        | "CheckWorker" >> beam.Map(_check_worker, driver_beam=beam.__version__)
    )
    result = probe.run()
    try:
        state = result.wait_until_finish(duration=int(timeout * 1000))
    except Exception as e:
        raise WorkerStartError(f"the SDK workers at {url} cannot run tfx_tabular: {e}") from e
    if state != PipelineState.DONE:
        threading.Thread(target=result.cancel, daemon=True, name="cancel-probe").start()
        raise _not_started(url, timeout)


def check_sdk_workers(options: PipelineOptions) -> None:
    """Raise WorkerStartError unless the external SDK workers of `options` start in time (and,
    through a job server, run a probe); a no-op for any other environment (the DirectRunner's,
    Dataflow's containers)."""
    portable = options.view_as(PortableOptions)
    if (portable.environment_type or "").upper() != "EXTERNAL":
        return
    url = ExternalEnvironment.from_options(portable).url
    if portable.job_endpoint == "embed":
        _handshake(url, _timeout_seconds())
    else:
        _probe_pipeline(options, url, _timeout_seconds())

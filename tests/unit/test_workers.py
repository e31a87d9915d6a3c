"""The pre-flight check of external SDK workers, where no worker pool is needed (the pool itself:
tests/integration/test_portable_runner.py)."""

import socket

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tfx_tabular.runners import workers
from tfx_tabular.runners.workers import TIMEOUT_VARIABLE, WorkerStartError, check_sdk_workers


def _external(port: int, *extra: str) -> PipelineOptions:
    return PipelineOptions(
        [
            "--runner=PortableRunner",
            "--job_endpoint=embed",
            "--environment_type=EXTERNAL",
            f"--environment_config=localhost:{port}",
            *extra,
        ]
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--direct_running_mode=multi_processing"],
        ["--runner=DataflowRunner", "--environment_type=DOCKER"],
    ],
)
def test_other_environments_are_not_probed(args, monkeypatch):
    def probed(*_):
        raise AssertionError("probed")

    monkeypatch.setattr(workers, "_handshake", probed)
    monkeypatch.setattr(workers, "_probe_pipeline", probed)
    check_sdk_workers(PipelineOptions(args))


def test_no_pool_at_the_address_fails_without_waiting_for_a_worker(monkeypatch):
    """The refused connection is the error, not the (here hour-long) wait for a worker."""
    monkeypatch.setenv(TIMEOUT_VARIABLE, "3600")
    port = _closed_port()
    with pytest.raises(WorkerStartError, match=f"no SDK worker pool answers at localhost:{port}"):
        check_sdk_workers(_external(port))


def test_a_bad_timeout_is_named(monkeypatch):
    monkeypatch.setenv(TIMEOUT_VARIABLE, "two minutes")
    with pytest.raises(WorkerStartError, match=f"{TIMEOUT_VARIABLE}='two minutes'"):
        check_sdk_workers(_external(_closed_port()))

"""TabularTrainer's input through the tf.data service, on loopback: a dispatcher and two input
workers started as users start them (`tfx-tabular data-service dispatcher|worker`, each its own
process), `input_fn(..., data_service=)` reading every row once per epoch on both paths, a worker
killed mid-epoch, a bad address, and `tfx-tabular run --data-service`."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import convert_to_examples, free_port, hive_table

from tfx_tabular.conversion.source_metadata import read_source_metadata
from tfx_tabular.schemas.infer import infer_schema
from tfx_tabular.training.data_service import DataServiceError
from tfx_tabular.training.input_fn import input_fn

FILES, ROWS_PER_FILE = 4, 6000
BATCH = 512
KILLED_AFTER_BATCHES = 6
READY = {"dispatcher": "serving on", "worker": "registered with"}


def _serve(role: str, log: Path, *flags: str) -> subprocess.Popen:
    """`tfx-tabular data-service ROLE FLAGS`, once it says it is up."""
    command = [sys.executable, "-m", "tfx_tabular.cli", "data-service", role, *flags]
    process = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while READY[role] not in log.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"data-service {role} did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.2)
    return process


class Service:
    """A dispatcher and its workers, each a `tfx-tabular data-service` process."""

    def __init__(self, folder: Path, workers: int = 2):
        self.folder = folder
        self.address = f"localhost:{free_port()}"
        port = self.address.split(":")[1]
        self.dispatcher = _serve("dispatcher", folder / "dispatcher.log", "--port", port)
        self.ports = [str(free_port()) for _ in range(workers)]
        self.workers = [self.start_worker(i) for i in range(workers)]

    def start_worker(self, index: int) -> subprocess.Popen:
        """Worker `index`, at its own port (the same one when it is started again)."""
        log = self.folder / f"worker-{index}-{time.monotonic_ns()}.log"
        flags = ("--dispatcher", self.address, "--port", self.ports[index])
        return _serve("worker", log, *flags)

    def stop(self) -> list[int]:
        """Stops every server as Kubernetes would (SIGTERM); their exit codes."""
        processes = [*self.workers, self.dispatcher]
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        return [process.wait(timeout=30) for process in processes]


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> tuple[str, object, int]:
    """Examples with columnar batches of FILES files of unique `id`s, their schema, and the
    train split's rows."""
    root = tmp_path_factory.mktemp("service")
    data = root / "data"
    data.mkdir()
    for index in range(FILES):
        table = hive_table(index * ROWS_PER_FILE, ROWS_PER_FILE)
        pq.write_table(table, data / f"part-{index}.parquet", row_group_size=1000)
    out = str(root / "examples")
    result = convert_to_examples(str(data), out, num_shards=4)
    schema = infer_schema(read_source_metadata(out))
    return out, schema, result.rows["train"]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    running = Service(tmp_path_factory.mktemp("servers"))
    yield running
    assert running.stop() == [143, 143, 143]  # stopped by SIGTERM, as `kill` or Kubernetes does


def _ids(dataset) -> collections.Counter:
    counts = collections.Counter()
    for batch in dataset:
        counts.update(batch["id"].numpy().ravel().tolist())
    return counts


@pytest.mark.parametrize("columnar", [True, False], ids=["columnar", "per-row"])
def test_every_row_once_per_epoch(examples, service, columnar):
    out, schema, rows = examples
    read = dict(split="train", columnar_batches=columnar, data_service=service.address)
    once = _ids(input_fn(out, schema, BATCH, training=False, **read))
    assert len(once) == rows and set(once.values()) == {1}
    twice = _ids(input_fn(out, schema, BATCH, training=True, num_epochs=2, seed=3, **read))
    assert set(twice) <= set(once) and max(twice.values()) == 2
    # Each worker drops its last partial batch of an epoch when training (every batch full),
    # as each trainer worker's pipeline does without the service.
    assert 2 * rows - sum(twice.values()) < 2 * len(service.workers) * BATCH


def test_a_killed_worker_restarted_at_its_address_reads_no_row_twice(examples, tmp_path):
    """A worker killed mid-epoch (SIGKILL) and started again at the same address, as Kubernetes
    restarts a crashed container in its pod: the epoch ends, and no row is read twice. (The
    service reads each file at most once per epoch: the files the dead worker held are read
    again when it is back in time, and lost for that epoch otherwise; both were seen here. A
    worker's interleave may hold most files when it dies, so only the batches read before the
    kill are sure to be there.)"""
    out, schema, rows = examples
    own = Service(tmp_path, workers=2)
    try:
        dataset = input_fn(
            out, schema, BATCH, split="train", training=False, data_service=own.address
        )
        counts = collections.Counter()
        start = time.monotonic()
        for number, batch in enumerate(dataset):
            counts.update(batch["id"].numpy().ravel().tolist())
            if number == KILLED_AFTER_BATCHES - 1:
                own.workers[0].kill()
                own.workers[0].wait()
                own.workers[0] = own.start_worker(0)
        assert set(counts.values()) == {1}
        assert KILLED_AFTER_BATCHES * BATCH <= len(counts) <= rows
        assert time.monotonic() - start < 300
    finally:
        own.stop()


def test_an_address_nothing_answers_at_fails_within_seconds(examples):
    out, schema, _ = examples
    start = time.monotonic()
    with pytest.raises(DataServiceError, match="no tf.data service dispatcher answers at"):
        input_fn(out, schema, BATCH, split="train", data_service=f"localhost:{free_port()}")
    assert time.monotonic() - start < 30


def test_cache_and_data_service_are_refused_together(examples, service):
    out, schema, _ = examples
    with pytest.raises(ValueError, match="cache cannot be combined with data_service"):
        input_fn(out, schema, BATCH, split="train", cache="memory", data_service=service.address)


def test_run_trains_through_the_service(service, demo_dataset, tmp_path):
    """`tfx-tabular run --data-service` as a user runs it: the trainer's train split is read by
    the service's workers, and the run trains and exports."""
    root = tmp_path / "root"
    done = subprocess.run(
        [sys.executable, "-m", "tfx_tabular.cli", "run", "--data-root", demo_dataset,
         "--pipeline-root", str(root), "--train-steps", "20", "--batch-size", "512",
         "--data-service", service.address],
        capture_output=True, text=True, timeout=900, env={**os.environ},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"train input through the tf.data service at {service.address}" in done.stdout
    assert list(root.rglob("saved_model.pb"))


def test_run_refuses_an_address_nothing_answers_at_before_converting(demo_dataset, tmp_path):
    root = tmp_path / "root"
    done = subprocess.run(
        [sys.executable, "-m", "tfx_tabular.cli", "run", "--data-root", demo_dataset,
         "--pipeline-root", str(root), "--data-service", f"localhost:{free_port()}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("tfx-tabular: error: --data-service: no tf.data service")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not any(root.rglob("*.gz")) and not any(root.rglob("metadata.sqlite"))

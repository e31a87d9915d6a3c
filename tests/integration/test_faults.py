"""Faults in a real TFX run (BeamDagRunner, SQLite ML Metadata): ParquetExampleGen killed with
SIGKILL mid-conversion, then rerun on the same store; then a third, cached run on that store.
(The Trainer's SIGKILL-and-resume test is in test_training.py.)"""

import collections
import glob
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from ml_metadata.proto import metadata_store_pb2
from tfx.orchestration import metadata

from tfx_tabular.demo import criteo

pytestmark = pytest.mark.slow
WORKER = str(pathlib.Path(__file__).with_name("example_gen_worker.py"))
ROWS = 120_000


def _run(data, root, db, batch_size) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, WORKER, data, root, db, str(batch_size)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _records(uri):
    files = sorted(glob.glob(os.path.join(uri, "Split-*", "*")))
    return [r.numpy() for r in tf.data.TFRecordDataset(files)]


def test_example_gen_killed_mid_run_then_rerun_publishes_once_and_completely(tmp_path):
    data, root, db = str(tmp_path / "data"), str(tmp_path / "root"), str(tmp_path / "mlmd.sqlite")
    criteo.write_dataset(data, ROWS, days=2, files_per_day=2, row_group_size=5_000)

    # Small batches make the conversion slow enough to be killed while shards are half written.
    killed = _run(data, root, db, batch_size=64)
    deadline = time.monotonic() + 240
    temp_files = []
    while time.monotonic() < deadline and killed.poll() is None:
        temp_files = [
            f
            for f in glob.glob(
                os.path.join(root, "**", ".tfx-tabular-incomplete", "**", "data_tfrecord-*"),
                recursive=True,
            )
            if os.path.getsize(f) > 0
        ]
        if temp_files:
            break
        time.sleep(0.2)
    assert temp_files, (
        "the conversion never started writing: " + (killed.communicate()[0] or "")[-2000:]
    )
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()

    config = metadata.sqlite_metadata_connection_config(db)
    with metadata.Metadata(config) as m:
        assert not [
            a
            for a in m.store.get_artifacts_by_type("Examples")
            if a.state == metadata_store_pb2.Artifact.LIVE
        ], "a killed run published"
        assert not glob.glob(os.path.join(root, "**", "Split-*"), recursive=True)

    rerun = _run(data, root, db, batch_size=8192)
    output = rerun.communicate(timeout=600)[0]
    assert rerun.returncode == 0, output[-3000:]
    cached = _run(data, root, db, batch_size=8192)  # unchanged input: served from TFX's cache
    output = cached.communicate(timeout=600)[0]
    assert cached.returncode == 0, output[-3000:]

    with metadata.Metadata(config) as m:
        live = [
            a
            for a in m.store.get_artifacts_by_type("Examples")
            if a.state == metadata_store_pb2.Artifact.LIVE
        ]
        assert len(live) == 1, "the cached run must reuse the rerun's artifact"
        executions = m.store.get_executions()
        states = collections.Counter(
            metadata_store_pb2.Execution.State.Name(e.last_known_state) for e in executions
        )
    assert states["COMPLETE"] == 1 and states["CACHED"] == 1, states
    records = _records(live[0].uri)
    assert len(records) == ROWS and len(set(records)) == ROWS  # no duplicate, nothing missing
    rows = live[0].custom_properties["row_counts"].struct_value
    assert sum(rows.values()) == ROWS
    assert not os.path.exists(os.path.join(live[0].uri, ".tfx-tabular-incomplete"))

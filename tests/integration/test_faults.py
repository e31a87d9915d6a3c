"""Faults in a real TFX run (BeamDagRunner, SQLite ML Metadata): ParquetExampleGen killed with
SIGKILL mid-conversion, then rerun on the same store; then a third, cached run on that store.
(The Trainer's SIGKILL-and-resume test is in test_training.py.) Then Ctrl-C and SIGTERM sent to
real `tfx-tabular convert` and `run` processes at several points of a run."""

import collections
import contextlib
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


# --- Ctrl-C and SIGTERM: every command ends within seconds, nothing half-published -----------

CLI = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")
EXIT_BOUND_SECONDS = 15  # generous: a few seconds on an idle machine
SMALL_FILES, ROWS_PER_FILE = 300, 500


@pytest.fixture(scope="module")
def many_files(tmp_path_factory) -> str:
    """150,000 rows in 300 files: planning reads 300 footers, long enough to be interrupted."""
    root = str(tmp_path_factory.mktemp("many") / "data")
    criteo.write_dataset(
        root, SMALL_FILES * ROWS_PER_FILE, days=30, files_per_day=10, row_group_size=ROWS_PER_FILE
    )
    return root


def _start(args, tmp_path, marker: str) -> subprocess.Popen:
    """A command in its own session (so the test signals it alone), marked in its environment
    so that any process it leaves behind can be found."""
    return subprocess.Popen(
        [CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=dict(os.environ, TFX_TABULAR_TEST_RUN=marker),
        cwd=tmp_path,
    )


def _wait_for(proc: subprocess.Popen, condition, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"never {what}: " + proc.communicate()[1][-3000:])
        time.sleep(0.005)


def _interrupt(proc: subprocess.Popen, signum: int) -> tuple[int, str, float]:
    start = time.monotonic()
    proc.send_signal(signum)
    try:
        _, stderr = proc.communicate(timeout=EXIT_BOUND_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("still running: " + proc.communicate()[1][-3000:]) from None
    return proc.returncode, stderr, time.monotonic() - start


def _left_behind(marker: str) -> list[str]:
    """Processes still running with the command's environment marker (its workers)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if f"TFX_TABULAR_TEST_RUN={marker}".encode() in handle.read().split(b"\0"):
                    found.append(pid)
    return found


def _staged(out: str) -> list[str]:
    return glob.glob(os.path.join(out, ".tfx-tabular-incomplete", "*", "*", "*"))


def _published_rows(out: str) -> int:
    files = sorted(glob.glob(os.path.join(out, "Split-*", "*")))
    return int(tf.data.TFRecordDataset(files).reduce(0, lambda count, _: count + 1))


def _assert_interrupted(proc, signum, marker, out):
    """Exit 130 / 143 within the bound, one line; no worker left; no staging; and the output
    folder holds nothing published or all of it."""
    code, stderr, seconds = _interrupt(proc, signum)
    assert code == 128 + signum, stderr[-3000:]
    assert seconds < EXIT_BOUND_SECONDS
    assert stderr.rstrip().endswith("tfx-tabular: interrupted"), stderr[-3000:]
    assert _left_behind(marker) == []
    left = [
        os.path.join(folder, name) for folder, dirs, files in os.walk(out) for name in dirs + files
    ]
    assert left == [], left  # nothing published (no Split-*, no marker), no staging folder


def test_sigterm_while_planning_ends_convert_with_nothing_written(many_files, tmp_path):
    out = str(tmp_path / "out")
    proc = _start(["convert", many_files, out], tmp_path, "planning")

    def reading_footers() -> bool:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{proc.pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{proc.pid}/fd/{fd}").startswith(many_files):
                        return True
        return False

    _wait_for(proc, reading_footers, "read a footer")
    assert not os.path.exists(out)  # planning: nothing written yet
    code, stderr, seconds = _interrupt(proc, signal.SIGTERM)
    assert code == 143 and seconds < EXIT_BOUND_SECONDS, stderr[-3000:]
    assert stderr.rstrip().endswith("tfx-tabular: interrupted")
    assert not os.path.exists(out)


def test_a_crash_mid_conversion_prints_every_threads_stack(many_files, tmp_path):
    """A segfault (here the signal itself) in the command's compiled code says where it was."""
    out = str(tmp_path / "out")
    proc = _start(["convert", many_files, out, "--read-batch-rows", "64"], tmp_path, "crash")
    _wait_for(proc, lambda: any(os.path.getsize(f) for f in _staged(out)), "wrote a shard")
    proc.send_signal(signal.SIGSEGV)
    _, stderr = proc.communicate(timeout=EXIT_BOUND_SECONDS)
    assert proc.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in stderr, stderr[-3000:]
    assert stderr.count("Thread 0x") >= 2, stderr[-3000:]  # the converting threads too


@pytest.mark.parametrize(
    "signum, beam_args",
    [
        (signal.SIGINT, []),
        # Beam's SDK workers as processes of their own: SIGTERM reaches the command alone.
        (
            signal.SIGTERM,
            [
                "--beam-arg=--direct_running_mode=multi_processing",
                "--beam-arg=--direct_num_workers=2",
            ],
        ),
    ],
    ids=["sigint", "sigterm-worker-processes"],
)
def test_signal_mid_conversion_discards_it_and_a_rerun_succeeds(
    many_files, tmp_path, signum, beam_args
):
    out = str(tmp_path / "out")
    marker = f"converting-{signum}"
    args = ["convert", many_files, out, "--example-statistics", out + "-s"]
    slowly = ["--read-batch-rows", "64"]  # small batches: seconds to interrupt the conversion in
    proc = _start([*args, *slowly, *beam_args], tmp_path, marker)
    _wait_for(proc, lambda: any(os.path.getsize(f) for f in _staged(out)), "wrote a shard")
    _assert_interrupted(proc, signum, marker, out)
    assert not glob.glob(os.path.join(out + "-s", "*"))

    rerun = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert _published_rows(out) == SMALL_FILES * ROWS_PER_FILE


def test_sigint_at_publish_leaves_all_of_the_output_or_none(many_files, tmp_path):
    """Signalled as the last shard finishes: statistics merge, claim, move. The claim and the
    moves run to their end before the signal takes effect."""
    out = str(tmp_path / "out")
    args = ["convert", many_files, out, "--num-shards", "8", "--example-statistics", out + "-s"]
    proc = _start(args, tmp_path, "publishing")
    counted = os.path.join(out, ".tfx-tabular-incomplete", "*", "row_counts", "*.json")
    _wait_for(proc, lambda: len(glob.glob(counted)) == 8, "finished the shards")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=EXIT_BOUND_SECONDS)
    assert proc.returncode in (0, 130), stderr[-3000:]  # 0: it had already finished
    assert not os.path.exists(os.path.join(out, ".tfx-tabular-incomplete"))
    if glob.glob(os.path.join(out, "Split-*")):
        assert _published_rows(out) == SMALL_FILES * ROWS_PER_FILE
        assert len(glob.glob(os.path.join(out + "-s", "Split-*", "FeatureStats.pb"))) == 2
    else:
        assert proc.returncode == 130 and not os.listdir(out)
        rerun = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stderr[-3000:]


def test_sigint_during_a_local_pipeline_run_ends_it(many_files, tmp_path):
    """`run`: the interrupt reaches TFX's BeamDagRunner in the main thread while ParquetExampleGen
    converts; the command still exits at once, and the conversion leaves no staging folder."""
    root = str(tmp_path / "root")
    args = ["run", "--data-root", many_files, "--pipeline-root", root, "--train-steps", "10"]
    proc = _start([*args, "--no-enable-cache"], tmp_path, "run")
    staged = os.path.join(root, "**", ".tfx-tabular-incomplete", "*", "*", "*")
    _wait_for(proc, lambda: glob.glob(staged, recursive=True), "started converting")
    code, stderr, seconds = _interrupt(proc, signal.SIGINT)
    assert code == 130 and seconds < EXIT_BOUND_SECONDS, stderr[-3000:]
    assert stderr.rstrip().endswith("tfx-tabular: interrupted")
    assert not glob.glob(os.path.join(root, "**", ".tfx-tabular-incomplete"), recursive=True)
    assert not glob.glob(os.path.join(root, "**", "Split-*"), recursive=True)
    assert _left_behind("run") == []

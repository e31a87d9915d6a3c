"""Real `tfx-tabular convert` processes sharing one output folder: racing, and killed with SIGKILL."""

import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from tfx_tabular.conversion import staging
from tfx_tabular.demo import criteo

tf = pytest.importorskip("tensorflow")

CLI = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")
ROWS = 120_000


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("race") / "data")
    criteo.write_dataset(root, ROWS, days=4, files_per_day=2, row_group_size=5_000)
    return root


def _start(data: str, out: str) -> subprocess.Popen:
    return subprocess.Popen(
        [CLI, "convert", data, out, "--num-shards", "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _published_rows(out: str) -> int:
    files = glob.glob(os.path.join(out, "Split-*", "*"))
    return sum(1 for _ in tf.data.TFRecordDataset(files))


def test_two_runs_into_one_folder_one_publishes_the_other_stops_plainly(data, tmp_path):
    out = str(tmp_path / "out")
    runs = [_start(data, out)]
    time.sleep(1.0)  # "started a second apart", as the user did
    runs.append(_start(data, out))
    results = [(run.wait(timeout=600), *run.communicate()) for run in runs]
    codes = sorted(code for code, _, _ in results)
    assert codes[0] == 0 and codes[1] != 0, results
    loser = next(err for code, _, err in results if code != 0)
    assert (
        "another run" in loser and "published into this folder first" in loser
    ) or "already holds a conversion's output" in loser, loser
    assert "Traceback" not in loser and len(loser.strip().splitlines()) <= 3, loser
    assert _published_rows(out) == ROWS  # every source row exactly once
    assert not os.path.exists(os.path.join(out, staging.STAGING_DIR))


def test_a_killed_runs_staging_is_swept_by_the_next_run(data, tmp_path):
    out = str(tmp_path / "out")
    run = _start(data, out)
    progress = os.path.join(out, staging.STAGING_DIR, "*", "progress", "*")
    deadline = time.monotonic() + 120
    while not glob.glob(progress) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert glob.glob(progress), run.communicate()
    run.send_signal(signal.SIGKILL)
    run.wait()
    left = os.listdir(os.path.join(out, staging.STAGING_DIR))
    assert len(left) == 1 and not glob.glob(os.path.join(out, "Split-*"))

    again = subprocess.run([CLI, "convert", data, out], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{left[0]}, left by a run that is gone" in again.stderr
    assert _published_rows(out) == ROWS
    assert not os.path.exists(os.path.join(out, staging.STAGING_DIR))

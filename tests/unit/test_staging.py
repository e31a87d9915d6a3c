"""Runs sharing an output folder: each owns its staging folder, one publishes, the dead are swept."""

import json
import os
import socket
import subprocess
import sys

import pytest

from tfx_tabular.conversion import staging
from tfx_tabular.conversion.staging import OutputTakenError, Staging, clean_abandoned


def _folders(output_dir) -> set:
    parent = os.path.join(output_dir, staging.STAGING_DIR)
    return set(os.listdir(parent)) if os.path.isdir(parent) else set()


def _fake_run(output_dir, owner: dict) -> str:
    folder = os.path.join(output_dir, staging.STAGING_DIR, owner.pop("run_id"))
    os.makedirs(os.path.join(folder, "train"))
    with open(os.path.join(folder, "train", "shard"), "w") as handle:
        handle.write("partial")
    with open(os.path.join(folder, staging.OWNER_FILE), "w") as handle:
        json.dump(owner, handle)
    return os.path.basename(folder)


def _dead_process() -> dict:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    start = staging._process_start(child.pid)
    child.wait()
    return {"host": socket.gethostname(), "pid": child.pid, "process_start": start}


def test_of_two_runs_claiming_one_output_one_publishes_the_other_stops(tmp_path):
    first, second = Staging.create(str(tmp_path)), Staging.create(str(tmp_path))
    assert first.folder != second.folder
    first.claim({"train": 3})
    with pytest.raises(OutputTakenError, match=f"run {first.run_id}.*published into this folder"):
        second.claim({"train": 3})
    marker = json.loads((tmp_path / staging.PUBLISHED_MARKER).read_text())
    assert marker["run_id"] == first.run_id and marker["rows"] == {"train": 3}


def test_a_run_discards_only_its_own_staging(tmp_path):
    mine, other = Staging.create(str(tmp_path)), Staging.create(str(tmp_path))
    mine.discard()
    assert _folders(tmp_path) == {other.run_id}
    other.discard()
    assert not (tmp_path / staging.STAGING_DIR).exists()  # the last one out removes the parent


def test_staging_of_a_killed_run_is_swept_and_a_live_or_foreign_one_is_left(tmp_path, caplog):
    dead = _fake_run(str(tmp_path), {"run_id": "dead", **_dead_process()})
    live = _fake_run(str(tmp_path), {"run_id": "live", **staging._owner()})
    foreign = _fake_run(
        str(tmp_path), {"run_id": "foreign", **_dead_process(), "host": "another-host"}
    )
    left = clean_abandoned(str(tmp_path))
    assert _folders(tmp_path) == {live, foreign}
    assert sorted(os.path.basename(f) for f in left) == sorted([live, foreign])
    assert (
        "may still be running" in caplog.text
        and f"{dead}, left by a run that is gone" in caplog.text
    )
    Staging.create(str(tmp_path)).discard()  # a new run sweeps the same way and keeps them
    assert _folders(tmp_path) == {live, foreign}


def test_a_reused_pid_is_not_taken_for_the_dead_run(tmp_path):
    """Same host and pid but another process start time: the recorded run is gone."""
    owner = {**staging._owner(), "process_start": "1"}
    assert staging._is_dead(owner)
    assert not staging._is_dead(staging._owner())

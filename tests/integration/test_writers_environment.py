"""The writers' environment is made once, under a lock, when pytest-xdist workers ask for it at
the same time on a cold clone (a second worker once removed it while the first installed)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "writers"))
from environment import writers_python  # noqa: E402


def test_a_second_caller_waits_for_the_environment_being_made(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# nothing to install: the lock is what is tested\n")
    venvs = tmp_path / "venvs"
    venvs.mkdir()
    first = writers_python(requirements, venvs)
    key = Path(first).parents[1].name
    (Path(first).parents[1] / ".ready").unlink()  # as if the first caller were still installing
    pythons: list[str] = []
    with open(venvs / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        second = threading.Thread(
            target=lambda: pythons.append(writers_python(requirements, venvs))
        )
        second.start()
        second.join(timeout=2)
        assert second.is_alive(), "made the environment while another caller held its lock"
        assert Path(first).exists(), "removed the environment another caller was making"
    second.join(timeout=60)
    assert pythons == [first]
    version = subprocess.run([first, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("Python 3.11")

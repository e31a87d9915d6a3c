"""The writers' own environment: Python 3.11 with the writers of tests/writers/requirements.txt
(hash-pinned), in the git-ignored `.writers-venv/` at the repository root.

Created once and kept, keyed on the requirements file's hash: a changed file makes a new one.
Made under a lock: `make test`'s pytest-xdist workers ask for it at once on a cold clone, and one
must not remove the environment another is still installing.
`python tests/writers/environment.py` creates it (and prints its Python); the `writers_python`
fixture of tests/integration/test_writers.py calls `writers_python()`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REQUIREMENTS = HERE / "requirements.txt"
VENVS = ROOT / ".writers-venv"
UV = ROOT / ".tools" / "uv-0.13.9" / "bin" / "uv"


class WritersEnvironmentError(RuntimeError):
    """The writers' environment cannot be made here."""


def base_python() -> str:
    """The Python 3.11 the writers run on: $WRITERS_PYTHON, else `python3.11` on the PATH."""
    python = os.environ.get("WRITERS_PYTHON") or shutil.which("python3.11")
    if not python:
        raise WritersEnvironmentError(
            "no python3.11 on the PATH for the writers' environment; set WRITERS_PYTHON"
        )
    return python


def _run(command: list[str], log: Path) -> None:
    with open(log, "ab") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode:
        tail = log.read_text(errors="replace")[-3000:]
        raise WritersEnvironmentError(f"{' '.join(command[:3])} failed:\n{tail}")


def writers_python(requirements: Path = REQUIREMENTS, venvs: Path = VENVS) -> str:
    """The writers' environment's Python, made first if missing (a few minutes, cold)."""
    key = hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]
    venv = venvs / key
    if (venv / ".ready").exists():
        return str(venv / "bin" / "python")
    if not UV.exists():
        raise WritersEnvironmentError(f"{UV} is missing; run `make setup` first")
    venvs.mkdir(exist_ok=True)
    with open(venvs / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when this process ends, however it ends
        if not (venv / ".ready").exists():
            _make(venv, requirements, venvs / f"{key}.log")
    return str(venv / "bin" / "python")


def _make(venv: Path, requirements: Path, log: Path) -> None:
    if venv.exists():  # an interrupted earlier attempt
        shutil.rmtree(venv)
    log.write_bytes(b"")
    # The system's Python only: uv would otherwise download a managed one.
    _run([str(UV), "venv", "--python", base_python(), "--python-preference", "only-system",
          str(venv)], log)  # fmt: skip
    _run(
        [str(UV), "pip", "install", "--python", str(venv / "bin" / "python"), "--require-hashes",
         "--compile-bytecode", "-r", str(requirements)],
        log,
    )  # fmt: skip
    (venv / ".ready").write_text(venv.name + "\n")


if __name__ == "__main__":
    try:
        print(writers_python())
    except WritersEnvironmentError as e:
        sys.exit(str(e))

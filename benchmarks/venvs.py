"""Virtual environments made on demand from a hash-pinned requirements file, for tools whose pins
clash with the project's: the writers of tests/writers (Python 3.11) and the bench's peer loaders
(`peers.py`, Python 3.10). Standard library only: the tests import it without the bench.

`pinned_python(requirements, venvs, base)` gives `<venvs>/<hash of requirements>/bin/python`,
made first if missing with uv (`--require-hashes`, the given base Python, never a downloaded one)
and kept: a changed file makes a new environment. Made under a lock, since concurrent callers
(pytest-xdist workers on a cold clone) must not remove an environment another is installing.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UV = ROOT / ".tools" / "uv-0.13.9" / "bin" / "uv"


class VenvError(RuntimeError):
    """The environment cannot be made here (no uv, no base Python, an install that failed)."""


def key(requirements: Path) -> str:
    return hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]


def pinned_python(requirements: Path, venvs: Path, base: str) -> str:
    """The environment's Python, made first if missing (minutes, cold; uv's cache makes large
    wheels a one-time download)."""
    venv = venvs / key(requirements)
    if (venv / ".ready").exists():
        return str(venv / "bin" / "python")
    if not UV.exists():
        raise VenvError(f"{UV} is missing; run `make setup` first")
    venvs.mkdir(parents=True, exist_ok=True)
    with open(venvs / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when this process ends, however it ends
        if not (venv / ".ready").exists():
            _make(venv, requirements, base, venvs / f"{venv.name}.log")
    return str(venv / "bin" / "python")


def _run(command: list[str], log: Path) -> None:
    with open(log, "ab") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode:
        tail = log.read_text(errors="replace")[-3000:]
        raise VenvError(f"{' '.join(command[:3])} failed:\n{tail}")


def _make(venv: Path, requirements: Path, base: str, log: Path) -> None:
    if venv.exists():  # an interrupted earlier attempt
        shutil.rmtree(venv)
    log.write_bytes(b"")
    # The given Python only: uv would otherwise download a managed one.
    _run([str(UV), "venv", "--python", base, "--python-preference", "only-system", str(venv)], log)
    _run(
        [str(UV), "pip", "install", "--python", str(venv / "bin" / "python"), "--require-hashes",
         "--compile-bytecode", "-r", str(requirements)],
        log,
    )  # fmt: skip
    (venv / ".ready").write_text(venv.name + "\n")

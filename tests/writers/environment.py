"""The writers' environment: Python 3.11 with the writers of tests/writers/requirements.txt
(hash-pinned), in the git-ignored `.writers-venv/` at the repository root.

Created once and kept, keyed on the requirements file's hash, under a lock (`benchmarks/venvs.py`,
which the bench's peer loaders share). `python tests/writers/environment.py` creates it (and
prints its Python); the `writers_python` fixture of tests/integration/test_writers.py calls
`writers_python()`.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:  # run as a script, or imported with only tests/writers on the path
    sys.path.insert(0, str(ROOT))

from benchmarks import venvs as _venvs  # noqa: E402

REQUIREMENTS = HERE / "requirements.txt"
VENVS = ROOT / ".writers-venv"
WritersEnvironmentError = _venvs.VenvError


def base_python() -> str:
    """The Python 3.11 the writers run on: $WRITERS_PYTHON, else `python3.11` on the PATH."""
    python = os.environ.get("WRITERS_PYTHON") or shutil.which("python3.11")
    if not python:
        raise WritersEnvironmentError(
            "no python3.11 on the PATH for the writers' environment; set WRITERS_PYTHON"
        )
    return python


def writers_python(requirements: Path = REQUIREMENTS, venvs: Path = VENVS) -> str:
    """The writers' environment's Python, made first if missing (a few minutes, cold)."""
    return _venvs.pinned_python(requirements, venvs, base_python())


if __name__ == "__main__":
    try:
        print(writers_python())
    except WritersEnvironmentError as e:
        sys.exit(str(e))

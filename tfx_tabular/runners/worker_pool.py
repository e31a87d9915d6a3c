"""A local Beam SDK worker pool (`worker_pool_main`) whose workers run the right Python.

The pool starts each worker as `python` from ITS PATH: started from a virtualenv without that
folder first on PATH, its workers cannot import apache_beam (see `workers.check_sdk_workers`).
No Beam import here: a benchmark's parent process starts the pool without loading Beam.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Optional


def start_local_pool(log_path: str, path: Optional[str] = None, env: Optional[dict] = None):
    """Start `worker_pool_main` on a free loopback port, its workers running `python` from `path`
    (default: this interpreter's folder first, the right choice for a local pool); return
    (process, port) once it listens. For local runs, tests and benchmarks of the portable runner."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    default_path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    pool_env = dict(os.environ if env is None else env, PATH=path or default_path)
    with open(log_path, "wb") as log:
        pool = subprocess.Popen(
            [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main"]
            + [f"--service_port={port}"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=pool_env,
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("localhost", port), timeout=1).close()
            return pool, port
        except OSError:
            if pool.poll() is not None or time.monotonic() > deadline:
                pool.kill()
                raise RuntimeError(f"the worker pool did not start; see {log_path}") from None
            time.sleep(0.2)

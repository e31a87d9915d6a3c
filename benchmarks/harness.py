"""What the benchmark sections share: machine facts, datasets, measured child-process runs.

Every measured run is a fresh `python -m benchmarks.worker` child process; this (parent) process
only orchestrates, samples the child's whole process tree for peak RSS (Beam's DirectRunner
workers are grandchildren) and never imports TensorFlow or Beam, so it stays out of the way of
the cores being measured.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

import psutil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("tfx", "tfx-bsl", "apache-beam", "tensorflow", "pyarrow", "numba", "numpy")


@dataclasses.dataclass
class Context:
    """The command line, plus the datasets prepared so far (rows → folder)."""

    rows: int
    stock_rows: int
    repeats: int
    workdir: str
    out: str
    code: str = REPO  # where children import tfx_tabular and benchmarks from (see snapshot_code)
    started: float = dataclasses.field(default_factory=time.time)
    _datasets: dict = dataclasses.field(default_factory=dict)

    def path(self, *parts: str) -> str:
        return os.path.join(self.workdir, *parts)

    def dataset(self, rows: int) -> str:
        """A Criteo-shaped dataset of `rows` rows: generated for the main one (`--rows`) and larger
        ones, else the main one's first rows."""
        if rows not in self._datasets:
            if rows >= self.rows:
                self._datasets[rows] = generated_dataset(self.path("data"), rows)
            else:
                self._datasets[rows] = _subset_dataset(
                    self.dataset(self.rows), self.path("data"), rows
                )
        return self._datasets[rows]


# --- datasets --------------------------------------------------------------------------------

_DONE = ".bench-complete"


def _complete(root: str, rows: int) -> bool:
    try:
        with open(os.path.join(root, _DONE)) as handle:
            return json.load(handle).get("rows") == rows
    except (OSError, ValueError):
        return False


def _mark_complete(root: str, rows: int) -> None:
    with open(os.path.join(root, _DONE), "w") as handle:
        json.dump({"rows": rows}, handle)


def _parquet_files(root: str) -> list[str]:
    found = []
    for folder, _, names in os.walk(root):
        found += [os.path.join(folder, n) for n in names if n.endswith(".parquet")]
    return sorted(found)


def generated_dataset(data_dir: str, rows: int) -> str:
    from tfx_tabular.demo import criteo

    root = os.path.join(data_dir, f"criteo-{rows}")
    if _complete(root, rows):
        print(f"  dataset: reusing {rows:,} rows in {root}", flush=True)
        return root
    shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    print(f"  dataset: writing {rows:,} rows to {root} ...", flush=True)
    criteo.write_dataset(root, rows)
    _mark_complete(root, rows)
    print(f"  dataset: {rows:,} rows written in {time.perf_counter() - start:.1f} s", flush=True)
    return root


def _subset_dataset(source: str, data_dir: str, rows: int) -> str:
    """The first rows of every file of `source`, same folders and row-group size (same data)."""
    import numpy as np
    import pyarrow.parquet as pq

    root = os.path.join(data_dir, f"{os.path.basename(source)}-first-{rows}")
    if _complete(root, rows):
        return root
    shutil.rmtree(root, ignore_errors=True)
    files = _parquet_files(source)
    share = np.full(len(files), rows // len(files))
    share[: rows % len(files)] += 1
    for path, count in zip(files, share, strict=True):
        target = os.path.join(root, os.path.relpath(path, source))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        parquet = pq.ParquetFile(path)
        row_group = parquet.metadata.row_group(0).num_rows
        table = parquet.read_row_groups(list(range(parquet.num_row_groups))).slice(0, int(count))
        pq.write_table(table, target, row_group_size=row_group)
    open(os.path.join(root, "_SUCCESS"), "w").close()
    _mark_complete(root, rows)
    print(
        f"  dataset: {rows:,}-row subset (first rows of each of {len(files)} files) in {root}",
        flush=True,
    )
    return root


def dataset_facts(root: str) -> dict:
    import pyarrow.parquet as pq

    files = _parquet_files(root)
    meta = [pq.ParquetFile(f).metadata for f in files]
    days = sorted({os.path.basename(os.path.dirname(f)) for f in files})
    return {
        "files": len(files),
        "partitions": len(days),
        "first": days[0],
        "last": days[-1],
        "rows": sum(m.num_rows for m in meta),
        "row_groups": sum(m.num_row_groups for m in meta),
        "bytes": sum(os.path.getsize(f) for f in files),
    }


def folder_bytes(root: str, prefix: str = "") -> int:
    total = 0
    for folder, _, names in os.walk(root):
        total += sum(
            os.path.getsize(os.path.join(folder, n)) for n in names if n.startswith(prefix)
        )
    return total


# --- code snapshot ---------------------------------------------------------------------------

SNAPSHOT_PACKAGES = ("tfx_tabular", "benchmarks")


def code_digest(root: str) -> str:
    """sha256 over the .py files of the snapshotted packages under `root`."""
    import hashlib

    digest = hashlib.sha256()
    paths = []
    for package in SNAPSHOT_PACKAGES:
        for folder, dirs, names in os.walk(os.path.join(root, package)):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", ".cache")]
            paths += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    for path in sorted(paths):
        digest.update(os.path.relpath(path, root).encode() + b"\0")
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()


def snapshot_code(workdir: str) -> str:
    """Copy tfx_tabular/ and benchmarks/ as they are now into `<workdir>/code`.

    Every child runs from there (cwd and PYTHONPATH), Beam's worker processes included, so the
    whole run measures one version of the code even if the working tree changes meanwhile, and
    numba's kernel cache lives beside that copy.
    """
    target = os.path.join(workdir, "code")
    shutil.rmtree(target, ignore_errors=True)
    for package in SNAPSHOT_PACKAGES:
        shutil.copytree(
            os.path.join(REPO, package),
            os.path.join(target, package),
            ignore=shutil.ignore_patterns("__pycache__", ".cache", "*.pyc"),
        )
    return target


# --- measured runs ---------------------------------------------------------------------------


def _pss(pid: int) -> Optional[int]:
    """Proportional set size in bytes (/proc/PID/smaps_rollup), or None if unavailable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class RssSampler(threading.Thread):
    """Peak memory of a process and all its descendants.

    * `peak`: the sum of RSS over the tree, sampled every `interval` s. It counts pages shared
      between processes once per process, so it errs high, and a fork caught before its exec
      (Beam's workers run `lscpu`) briefly counts its parent's whole RSS twice.
    * `peak_pss`: the sum of PSS (RSS with each shared page split between its sharers) over the
      tree, sampled every `pss_interval` s: the tree's actual footprint, immune to fork copies.
      Reading smaps_rollup is costly for large processes, hence the longer interval.

    The descendant list is refreshed every `refresh` s (walking /proc is the expensive part).
    """

    def __init__(
        self, pid: int, interval: float = 0.05, refresh: float = 0.2, pss_interval: float = 0.25
    ):
        super().__init__(daemon=True)
        self._root = psutil.Process(pid)
        self._interval, self._refresh, self._pss_interval = interval, refresh, pss_interval
        self._stop_event = threading.Event()
        self.peak = 0
        self.peak_pss = 0
        self.peak_single = 0
        self.max_processes = 0

    def run(self) -> None:
        procs = {self._root.pid: self._root}
        refreshed = pss_read = 0.0
        while not self._stop_event.is_set():
            now = time.monotonic()
            if now - refreshed >= self._refresh:
                try:
                    kids = self._root.children(recursive=True)
                except psutil.Error:
                    break
                procs = {self._root.pid: self._root, **{k.pid: procs.get(k.pid, k) for k in kids}}
                refreshed = now
            total = alive = 0
            for proc in list(procs.values()):
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                total += rss
                alive += 1
                self.peak_single = max(self.peak_single, rss)
            self.peak = max(self.peak, total)
            self.max_processes = max(self.max_processes, alive)
            if now - pss_read >= self._pss_interval:
                pss_read = now
                self.peak_pss = max(self.peak_pss, sum(filter(None, map(_pss, list(procs)))))
            self._stop_event.wait(self._interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@dataclasses.dataclass
class Run:
    result: dict
    wall_seconds: float  # the child's whole life, interpreter start and imports included
    peak_rss: int  # sum of RSS over the tree
    peak_pss: int  # sum of PSS over the tree
    peak_single_rss: int
    max_processes: int


def child_env() -> dict:
    env = dict(os.environ)
    env.update(
        {
            "PYTHONWARNINGS": "ignore",
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "GRPC_VERBOSITY": "ERROR",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def run_task(
    ctx: Context,
    name: str,
    func: str,
    python: str = sys.executable,
    timeout: Optional[float] = None,
    unset: tuple = (),
    **params,
) -> Run:
    """Run `benchmarks.<module>:<function>(**params)` in a fresh child of `python` (another
    environment's, for the `peers` section, which `unset`s the variables that are ours only);
    returns its result dict. A child still running after `timeout` seconds is killed with its
    descendants, and the run fails.

    The child's stdout and stderr go to `<workdir>/logs/<name>.log`.
    """
    os.makedirs(ctx.path("logs"), exist_ok=True)
    result_path = ctx.path("logs", f"{name}.result.json")
    log_path = ctx.path("logs", f"{name}.log")
    if os.path.exists(result_path):
        os.remove(result_path)
    cmd = [python, "-m", "benchmarks.worker", func, json.dumps(params), result_path]
    start = time.perf_counter()
    # The child's temporary files, removed after it: given Beam arguments, TFX's Beam executors
    # package TFX into a temporary folder at every run and leave it (49 MB each).
    temporary = tempfile.mkdtemp(prefix=f"{name}-", dir=ctx.path("logs"))
    with open(log_path, "w") as log:
        env = {k: v for k, v in child_env().items() if k not in unset}
        env["PYTHONPATH"] = os.pathsep.join(
            [ctx.code] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        env["TMPDIR"] = temporary
        proc = subprocess.Popen(cmd, cwd=ctx.code, stdout=log, stderr=subprocess.STDOUT, env=env)
        sampler = RssSampler(proc.pid)
        sampler.start()
        code = _wait(proc, timeout)
        sampler.stop()
    wall = time.perf_counter() - start
    shutil.rmtree(temporary, ignore_errors=True)
    if code != 0 or not os.path.exists(result_path):
        with open(log_path) as log:
            tail = "".join(log.readlines()[-25:])
        raise RuntimeError(
            f"benchmark run {name} failed ({code if isinstance(code, str) else f'exit code {code}'}"
            f"); log {log_path}:\n{tail}"
        )
    with open(result_path) as handle:
        result = json.load(handle)
    return Run(
        result, wall, sampler.peak, sampler.peak_pss, sampler.peak_single, sampler.max_processes
    )


def _wait(proc: subprocess.Popen, timeout: Optional[float]) -> object:
    """The child's exit code, or "timed out after N s" once it has been killed with its
    descendants (a hung peer loader's worker processes included)."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        tree = psutil.Process(proc.pid).children(recursive=True) + [psutil.Process(proc.pid)]
        for process in tree:
            try:
                process.kill()
            except psutil.Error:
                pass
        proc.wait()
        return f"timed out after {timeout:.0f} s"


def sample(run: Run) -> dict:
    """One repeat as plain data: the task's result plus its process tree's peaks and wall time."""
    return {
        **run.result,
        "peak_rss": run.peak_rss,
        "peak_pss": run.peak_pss,
        "peak_single_rss": run.peak_single_rss,
        "processes": run.max_processes,
        "wall": run.wall_seconds,
    }


def machine() -> dict:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory = psutil.virtual_memory().total
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": model,
        "memory": memory,
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "load": os.getloadavg(),
    }


def _burn(n: int) -> None:
    total = 0
    for i in range(n):
        total += i * i


def core_scaling(n: int = 8_000_000, repeats: int = 3) -> dict:
    """How much faster 2 processes get through 2 units of pure-Python work than 1 process through 1.

    2.0 means two full cores; on a shared VM (vCPUs that are hyperthreads, or busy neighbours) it
    is lower, and every "2 processes" figure in the report is bounded by it.
    """
    import multiprocessing

    context = multiprocessing.get_context("fork")

    def timed(processes: int) -> float:
        procs = [context.Process(target=_burn, args=(n,)) for _ in range(processes)]
        start = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        return time.perf_counter() - start

    pairs = [(timed(1), timed(2)) for _ in range(repeats)]  # alternated, as drift hits both
    one, two = (statistics.median(times) for times in zip(*pairs, strict=True))
    return {"one": one, "two": two, "speedup": 2 * one / two}


def cpu_snapshot() -> dict:
    """System-wide busy and steal CPU seconds (/proc/stat), and this process tree's own CPU."""
    import resource

    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    own = sum(
        getattr(resource.getrusage(who), f)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for f in ("ru_utime", "ru_stime")
    )
    return {
        "busy": (user + nice + system + irq + softirq) / tick,
        "steal": steal / tick,
        "own": own,
        "wall": time.monotonic(),
    }


def cpu_contention(start: dict, end: dict, cores: int) -> dict:
    """Share of the machine's CPU capacity used by other processes (and stolen by the hypervisor)
    between two snapshots; the benchmark's children are counted once they have exited."""
    capacity = (end["wall"] - start["wall"]) * cores
    busy = end["busy"] - start["busy"]
    own = end["own"] - start["own"]
    return {
        "other": max(0.0, busy - own) / capacity,
        "own": own / capacity,
        "steal": (end["steal"] - start["steal"]) / capacity,
    }


def versions() -> dict:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "tfx_tabular"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} + uncommitted changes in tfx_tabular/" if dirty else head


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

"""Peer Parquet → TensorFlow loaders beside ours (issue 47), on the same data and epoch: our
`input_fn` (columnar batches) and TFXIO on the converted Examples, and on the Parquet a plain
pyarrow generator under `from_generator`, NVIDIA Merlin's dataloader (CPU), Petastorm, Ray Data,
tensorflow-io and Hugging Face datasets; batches of 4,096 and 65,536. Examples/s of wall time and
per CPU-second of the child's process tree, its peak RSS, and whether its batches equal the
Parquet values, nulls included (`peer_check`).

A peer whose pins clash with ours runs in its own Python 3.10 environment, made on demand from
`peer_envs/<peer>.txt` (hash-pinned; `venvs.py`) in the git-ignored `.peers-venv/` (after
editing a `.in`: `.tools/uv-0.13.9/bin/uv pip compile <peer>.in --python-version 3.10
--generate-hashes -o <peer>.txt` in that folder). A peer that fails on the data is tried again
on a copy with its nulls filled (0, '', []), and its row says so; one that cannot run at all gets
a row saying why, in one line.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks import harness, venvs
from benchmarks import targets as t
from benchmarks.harness import Context
from benchmarks.results import Recorder

BATCHES = (4096, 65_536)
# Each run reads this many examples after its warm-up batch (two epochs of the main data,
# repeated where it holds fewer rows), or as many as it reads in SECONDS, but at least
# LEAST_EXAMPLES: a window much shorter than a fast loader's read-ahead counts CPU it spent on
# batches never taken.
EXAMPLES = 2_097_152
LEAST_EXAMPLES = 262_144
SECONDS = 20
# A run still going after this long is stopped (one hung for good once it had failed).
TIMEOUT = 600
ENVS = Path(__file__).resolve().parent / "peer_envs"
VENVS = Path(harness.REPO) / ".peers-venv"
PEERS = {  # key of peer_tasks.LOADERS → (label, requirements file or None: our environment)
    "ours": (t.PEERS_OURS, None),
    "generator": ("pyarrow generator (from_generator)", None),
    "tfxio": ("TFXIO", None),
    "merlin": ("NVIDIA Merlin dataloader (CPU)", "merlin.txt"),
    "petastorm": ("Petastorm", "petastorm.txt"),
    "ray": ("Ray Data (to_tf)", "ray.txt"),
    "tensorflow_io": ("tensorflow-io (IODataset.from_parquet)", "tensorflow_io.txt"),
    "huggingface": ("Hugging Face datasets (to_tf_dataset)", "huggingface.txt"),
}


def label(peer: str, batch_size: int) -> str:
    return f"{PEERS[peer][0]}, batch {batch_size:,}"


def base_python() -> str:
    """The peers' Python 3.10: $PEERS_PYTHON, else pyenv's (its `python3.10` shim on the PATH
    fails unless 3.10 is pyenv's global version), else `python3.10` on the PATH (a missing one
    is then uv's error, in the peers' rows)."""
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10.*/bin/python3.10")))
    return os.environ.get("PEERS_PYTHON") or (pyenv and pyenv[-1]) or "python3.10"


# A line naming an exception (`ValueError: ...`), or C++'s `what():  ...` before an abort.
_EXCEPTION = re.compile(r"^(?:[\w.]+(?:Error|Exception)\b|what\(\):)")


def one_line(error: BaseException) -> str:
    """An error as one line of at most 300 characters: a timeout as such, else the last line of
    its text that names an exception (a child's log tail ends with its traceback), else its last
    line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if lines and "(timed out after" in lines[0]:
        return lines[0].split("(", 1)[1].split(")")[0]
    named = [line for line in lines if _EXCEPTION.match(line)]
    return " ".join((named or lines or [type(error).__name__])[-1].split())[:300]


def _start(peer: str) -> dict:
    """How to start the peer's child: its environment's Python, and what the child must not
    inherit from ours (tfx_tabular's TF_USE_LEGACY_KERAS=1: the peers' environments have
    Keras 3 and no tf-keras, so `tf.keras` would fail to import)."""
    requirements = PEERS[peer][1]
    if requirements is None:
        return {"python": sys.executable}
    python = venvs.pinned_python(ENVS / requirements, VENVS, base_python())
    return {"python": python, "unset": ("TF_USE_LEGACY_KERAS",)}


def filled_copy(parquet_dir: str, out_dir: str) -> str:
    """`parquet_dir` with every null filled (numbers 0, strings '', lists []), same files and
    folders; made once."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    done = os.path.join(out_dir, ".bench-complete")
    if os.path.exists(done):
        return out_dir
    for path in harness._parquet_files(parquet_dir):
        table = pq.read_table(path)
        columns = []
        for field, column in zip(table.schema, table.columns, strict=True):
            fill = [] if pa.types.is_list(field.type) else "" if field.type == pa.string() else 0
            columns.append(pc.fill_null(column, pa.scalar(fill, field.type)))
        target = os.path.join(out_dir, os.path.relpath(path, parquet_dir))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        pq.write_table(pa.table(columns, schema=table.schema), target, row_group_size=65_536)
    open(done, "w").close()
    return out_dir


def _attempt(ctx: Context, peer: str, batch_size: int, data: dict, refused: dict) -> dict:
    """One measured run, its scratch folder removed after it however it ended (a loader may
    abort or be killed)."""
    scratch = tempfile.mkdtemp(prefix="peer-", dir="/tmp")  # short: Ray's socket paths in it
    try:
        return _attempt_in(ctx, peer, batch_size, {**data, "scratch": scratch}, refused)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _attempt_in(ctx: Context, peer: str, batch_size: int, data: dict, refused: dict) -> dict:
    """One measured run: on the data; if that fails, on its null-filled copy, saying so (and
    remembering it in `refused`, so later runs of the peer go to the copy at once); if both
    fail (or the environment cannot be made), the reason in one line."""
    params = {"peer": peer, "examples_dir": data["examples"], "reference_dir": data["parquet"],
              "batch_size": batch_size, "examples": EXAMPLES, "least_examples": LEAST_EXAMPLES,
              "seconds": SECONDS, "scratch": data["scratch"]}  # fmt: skip
    name = f"peers-{peer}-{batch_size}-{data['repeat']}"
    try:
        start = _start(peer)
    except venvs.VenvError as e:
        return {"error": f"cannot install its environment: {one_line(e)}"}
    if peer not in refused:
        try:
            run = harness.run_task(ctx, name, "peer_tasks:task", **start, timeout=TIMEOUT,
                                   parquet_dir=data["parquet"], **params)  # fmt: skip
            return harness.sample(run)
        except RuntimeError as first:
            refused[peer] = one_line(first)
    note = f"fails on the data ({refused[peer]}): measured on a null-filled copy"
    try:
        run = harness.run_task(ctx, f"{name}-filled", "peer_tasks:task", **start,
                               timeout=TIMEOUT, parquet_dir=data["filled"], note=note,
                               **params)  # fmt: skip
        return harness.sample(run)
    except RuntimeError as second:
        return {"error": f"cannot run here: {refused[peer]}; "
                         f"on a null-filled copy: {one_line(second)}"}  # fmt: skip


def run(ctx: Context) -> list[dict]:
    """Measure the section; returns its rows (see `results`)."""
    parquet = ctx.dataset(ctx.rows)
    examples = ctx.path("schema", "examples")
    harness.run_task(ctx, "peers-convert", "schema_inference:task_convert", input_base=parquet,
                     output_dir=examples)  # fmt: skip
    filled = filled_copy(parquet, ctx.path("data", f"{os.path.basename(parquet)}-nulls-filled"))
    recorder, refused = Recorder("peers"), {}
    for repeat in range(ctx.repeats):  # interleaved, so drift in machine speed hits every peer
        data = {"parquet": parquet, "examples": examples, "filled": filled, "repeat": repeat}
        for batch_size in BATCHES:
            for peer in PEERS:
                sample = _attempt(ctx, peer, batch_size, data, refused)
                recorder.add(label(peer, batch_size), sample)
                shown = sample.get("error") or (
                    f"{sample['examples_per_second']:,.0f} ex/s, "
                    f"{sample['examples_per_cpu_second']:,.0f} ex/CPU-s; {sample['equality']}"
                )
                print(f"  {label(peer, batch_size)} {repeat + 1}/{ctx.repeats}: {shown}",
                      flush=True)  # fmt: skip
    return recorder.rows()

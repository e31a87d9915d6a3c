"""The conversion's numba kernels compiled once: the image's build step (the precompile command,
with the image's NUMBA_* environment) fills a cache, and marks it warm, that a second process
loads every kernel from as its conversions call them, compiling nothing, writing nothing and
converting no sample; a conversion that must compile says so once."""

import datetime
import decimal
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfx_tabular.statistics.precompile import MARKER, PORTABLE_TARGET

WORKER = str(pathlib.Path(__file__).with_name("kernels_worker.py"))
CLI = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")
COMPILING = "compiling the conversion's kernels"


def _image_env(cache: pathlib.Path) -> dict:
    # Not the progress switch: an in-process `--quiet` CLI test in this worker may have set it.
    env = {k: v for k, v in os.environ.items() if k != "TFX_TABULAR_PROGRESS"}
    return dict(env, NUMBA_CACHE_DIR=str(cache), **PORTABLE_TARGET)


def _listing(folder: pathlib.Path) -> dict:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
    }


@pytest.fixture(scope="module")
def image_cache(tmp_path_factory) -> pathlib.Path:
    """The Dockerfile's step: the precompile command into an empty cache, the image's target."""
    cache = tmp_path_factory.mktemp("numba") / "cache"
    cache.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "tfx_tabular.statistics.precompile"],
        env=_image_env(cache),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "kernels compiled in" in result.stderr, result.stderr
    assert len(list(cache.rglob(MARKER))) == 1
    return cache


def _every_type(folder: pathlib.Path) -> str:
    """Columns of most of the type table, written independently of the precompile's sample:
    dictionary-encoded and plain files, nulls, nested lists and structs."""
    n = 300
    ints = np.random.default_rng(1).integers(0, 1000, n)
    nulls = ints % 5 == 0
    table = pa.table(
        {
            "u64": pa.array(ints.astype(np.uint64)),
            "i16": pa.array(ints.astype(np.int16), mask=nulls),
            "i32": pa.array(ints.astype(np.int32)),
            "f32": pa.array(ints.astype(np.float32), mask=nulls),
            "large": pa.array([str(i) for i in ints], pa.large_string()),
            "blob": pa.array([bytes([i % 256]) for i in ints], pa.large_binary(), mask=nulls),
            "d64": pa.array([datetime.datetime(2020, 1, 1)] * n, pa.date64()),
            "t32": pa.array(ints.astype(np.int32), pa.time32("ms")),
            "ns": pa.array(ints * 1000, pa.timestamp("ns"), mask=nulls),
            "paris": pa.array(ints, pa.timestamp("s", "Europe/Paris")),
            "dec": pa.array(
                [decimal.Decimal(int(i)).scaleb(-5) for i in ints], pa.decimal128(18, 5), mask=nulls
            ),
            "ll": pa.array([[int(i)] * (i % 3) for i in ints], pa.large_list(pa.int64())),
            "structs": pa.array([[{"a": int(i), "b": "q"}] for i in ints]),
            "lists": pa.array([{"l": [int(i), 2]} for i in ints]),
            "nulls": pa.array([None] * n, pa.list_(pa.int64())),
            "fixed": pa.array([b"%03d" % i for i in ints], pa.binary(3), mask=nulls),
            "floats": pa.array([[float(i)] * (i % 4) if i % 7 else None for i in ints]),
            "deep": pa.array([[[str(i)]] for i in ints]),
            "bools": pa.array([[bool(i % 2)] for i in ints]),
            "cat": pa.array([None if i % 9 == 0 else f"v{i % 40}" for i in ints]),
        }
    )
    (folder / "k=1").mkdir(parents=True)
    pq.write_table(table, folder / "k=1" / "a.parquet", row_group_size=100, version="2.6")
    pq.write_table(
        table, folder / "k=1" / "b.parquet", row_group_size=100, use_dictionary=False, version="2.6"
    )
    return str(folder)


def test_a_second_process_loads_every_kernel_without_compiling(
    image_cache, tmp_path, demo_dataset, hive_dataset
):
    cache = tmp_path / "cache"  # the image's cache, as a task gets it
    shutil.copytree(image_cache, cache)
    before = _listing(cache)
    datasets = [demo_dataset, hive_dataset, _every_type(tmp_path / "types")]
    result = subprocess.run(
        [sys.executable, WORKER, *datasets],
        env=_image_env(cache),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["compiled"] == [], "\n".join(report["compiled"])
    assert report["loaded"] > 0
    assert report["warm"] and report["samples"] == 0
    assert _listing(cache) == before  # nothing added or rewritten: the image's cache suffices
    assert COMPILING not in result.stderr


def test_convert_says_once_that_it_compiles(image_cache, tmp_path, demo_dataset):
    """A cache without one of the kernels (its marker no longer matches): the conversion
    compiles it before its timed part, saying so once, and how long it took (with the whole
    cache, nothing is said: above), then marks the cache warm again."""
    cache = tmp_path / "cache"
    shutil.copytree(image_cache, cache)
    removed = list(cache.glob("coders_*/encoding.gather_records-*"))
    assert removed, sorted(_listing(cache))
    for path in removed:
        path.unlink()

    def convert(name: str) -> str:
        """The CLI's conversion into `name`, with the cache; its stderr."""
        result = subprocess.run(
            [CLI, "convert", demo_dataset, str(tmp_path / name)],
            env=_image_env(cache),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stderr

    first = convert("out")
    assert first.count(COMPILING) == 1
    assert "kernels compiled in" in first
    assert COMPILING not in convert("again")

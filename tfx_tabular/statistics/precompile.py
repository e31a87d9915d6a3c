"""Compile the conversion's numba kernels (the encoder's and the statistics') into numba's cache.

numba compiles a kernel on its first call in a process unless its on-disk cache already holds
it for this source, numba version and CPU target: compiling them all takes seconds, loading them
milliseconds. `compile_kernels` runs every kernel on a small generated dataset through
the conversion's own calls (read, encode, split, statistics, merge), so each kernel is compiled,
or loaded, with every argument type a conversion passes it.

`python -m tfx_tabular.statistics.precompile` does it once, ahead of time: the image runs it at
build time with the image's NUMBA_CACHE_DIR and the portable target below (PORTABLE_TARGET),
which its tasks then use too. numba keys cached code by CPU name and features, so code compiled
for the build machine's own CPU would not be used (nor safe) on another; this target is
x86-64-v2, which every x86-64 CPU since 2009 has (SSE4.2, with its CRC32C instruction, which the
encoder's TFRecord framing uses).

Once every kernel is in the cache, `compile_kernels` leaves a marker there (MARKER): the state
that decides whether numba would load them all (its version, the CPU target, the kernel modules'
source stamps and the cache's files). A later process that finds the same state skips the sample
conversion, and loads each kernel only when the conversion first calls it: loading all of them
up front held memory for kernels a conversion never calls.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import decimal
import json
import os
import sys
import tempfile
import threading
import time
from typing import Callable, Iterator, Optional

import llvmlite.binding
import numba
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numba.core import event

from tfx_tabular.coders import columnar, encoding, fingerprint, flatten, pools, tfrecord, wire
from tfx_tabular.source.dataset import Dataset, open_dataset
from tfx_tabular.source.mapping import features_of
from tfx_tabular.source.reading import read_batches
from tfx_tabular.statistics import (
    accumulators,
    batch_values,
    histograms,
    numeric,
    parts,
    quantiles,
    render,
    sketches,
    strings,
)
from tfx_tabular.statistics.options import LARGE_STRING_THRESHOLD

# The image's NUMBA_CPU_NAME and NUMBA_CPU_FEATURES (the Dockerfile sets them; a test checks):
# x86-64-v2's features in LLVM's names.
PORTABLE_TARGET = {
    "NUMBA_CPU_NAME": "generic",
    "NUMBA_CPU_FEATURES": "+64bit,+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+sse3,+ssse3,+sse4.1,"
    "+sse4.2,+crc32,+popcnt,+cx16,+sahf",
}
KERNEL_MODULES = (
    fingerprint,
    wire,
    tfrecord,
    encoding,
    columnar,
    batch_values,
    accumulators,
    histograms,
    numeric,
    quantiles,
    sketches,
    strings,
)
ROWS = 64  # per file: enough for every path the kernels take (dictionary pages, wide ranges)
ROW_GROUP_ROWS = 32
ENCODE_ROWS = 24  # the encoder's batches: smaller than a read batch, as in a conversion
COLUMNAR_ROWS = 16  # rows per columnar record: several per read batch, rows left for the next
# In the first kernel module's cache folder: the cache's state (`_cache_state`) when it last
# held every kernel.
MARKER = "tfx_tabular_kernels.json"


def kernels() -> list:
    """Every numba kernel of the conversion, by module."""
    return [
        value
        for module in KERNEL_MODULES
        for value in vars(module).values()
        if isinstance(value, numba.core.registry.CPUDispatcher)
    ]


def _sample_table(rows: int, rng: np.random.Generator) -> pa.Table:
    """Every kind of column the type mapping converts, with and without nulls."""
    ints = rng.integers(0, 50, rows)
    nulls = ints % 7 == 0
    words = np.array([f"w{i}" for i in ints], dtype=object)
    blobs = [bytes([0xFF, i % 256]) if i % 3 else b"x" * (LARGE_STRING_THRESHOLD + 1) for i in ints]
    return pa.table(
        {
            "int": pa.array(ints, mask=nulls),
            "dense": pa.array(ints),
            "wide": pa.array(ints.astype(np.int64) << 40),
            "small": pa.array(ints.astype(np.int8), mask=nulls),
            "flag": pa.array(ints % 2 == 0),
            "float": pa.array(np.where(ints == 3, np.nan, ints * 0.5), mask=nulls),
            "single": pa.array(np.where(ints == 4, np.inf, ints).astype(np.float32)),
            "price": pa.array(
                [decimal.Decimal(int(i)).scaleb(-2) for i in ints], pa.decimal128(10, 2)
            ),
            "day": pa.array([datetime.date(2024, 1, 1 + int(i) % 28) for i in ints]),
            "at": pa.array(ints * 1_000_000, pa.timestamp("us", "UTC")),
            "word": pa.array(words, mask=nulls),
            "text": pa.array([f"t{i}-{r}" for r, i in enumerate(ints)]),
            "blob": pa.array(blobs, pa.binary()),
            "blank": pa.array([""] * rows, mask=nulls),
            "code": pa.array([b"ab%02d" % (i % 10) for i in ints], pa.binary(4)),
            "tags": pa.array([[w] * (int(i) % 3) for i, w in zip(ints, words, strict=True)]),
            "ids": pa.array([list(range(int(i) % 4)) if i % 5 else None for i in ints]),
            "scores": pa.array([[float(i)] * (int(i) % 3) for i in ints]),
            "nested": pa.array([[[int(i)], []] for i in ints]),
            "pair": pa.array([[float(i), 1.0] for i in ints], pa.list_(pa.float32(), 2)),
            "record": pa.array(
                [{"a": int(i), "b": str(w)} for i, w in zip(ints, words, strict=True)]
            ),
            "empty": pa.nulls(rows),
        }
    )


def _write_sample(folder: str, rng: np.random.Generator) -> None:
    """Two hive partitions, a string and an integer key; plain (not dictionary) pages for
    `text`, as writers fall back to for high-cardinality strings."""
    for region, hour in (("eu", 3), ("us", 10)):
        path = os.path.join(folder, f"region={region}", f"hour={hour}")
        os.makedirs(path)
        table = _sample_table(ROWS, rng)
        dictionary = [name for name in table.column_names if name != "text"]
        pq.write_table(
            table,
            os.path.join(path, "part.parquet"),
            row_group_size=ROW_GROUP_ROWS,
            use_dictionary=dictionary,
        )


def _convert_file(dataset: Dataset, info, splits: list, key_features) -> None:
    """One file through the conversion's calls: read (dictionary pages kept), encode in
    batches, split by record hash and by key columns, gather a split, write its columnar
    records (several read batches to a record), count statistics."""
    order = flatten.written_order(dataset.features)
    records = columnar.RecordBuffer(order, COLUMNAR_ROWS, strings=True)
    fingerprints = pools.StringFingerprints()
    for batch in read_batches(
        dataset, info, range(len(info.row_group_rows)), ROWS, string_dictionaries=True
    ):
        columns = flatten.feature_columns(batch, dataset.features)
        pooled = pools.PooledColumns(columns, fingerprints)
        split_ids = []
        for start in range(0, batch.num_rows, ENCODE_ROWS):
            stop = min(start + ENCODE_ROWS, batch.num_rows)
            encoded = encoding.encode_rows(pooled, start, stop, framed=True)
            ids = (encoded.fingerprints() % np.uint64(len(splits))).astype(np.int64)
            encoding.gather_records(encoded.buffer, encoded.offsets, np.flatnonzero(ids == 0))
            split_ids.append(ids)
        keys = pa.RecordBatch.from_arrays(
            [batch.column(batch.schema.get_field_index(f.column)) for f in key_features],
            [f.column for f in key_features],
        )
        encoding.encode(keys, key_features).fingerprints()
        accumulators.add_batch(splits, columns, pooled, np.concatenate(split_ids))
        list(records.add(pooled, np.flatnonzero(np.concatenate(split_ids) == 0)))
    list(records.flush())


def _convert_sample(folder: str) -> None:
    dataset = open_dataset(folder)
    key_features = features_of(
        pa.schema([dataset.schema.field("word"), dataset.schema.field("day")])
    )
    shards = []
    for info in dataset.files:  # one shard per file, merged as `publish` merges them
        splits = [accumulators.SplitStatistics(dataset.features) for _ in range(2)]
        _convert_file(dataset, info, splits, key_features)
        shards.append([parts.encode_part(split) for split in splits])
    for split in range(2):
        merged = accumulators.SplitStatistics()
        for shard in shards:
            merged.merge(parts.decode_part(shard[split]))
        render.serialized_statistics_list(merged)


class _CompileWatch(event.Listener):
    """Calls `on_first()` when numba starts its first compilation (not a cache load)."""

    def __init__(self, on_first: Callable[[], None]):
        self._on_first = on_first
        self.compiled = 0

    def on_start(self, _event) -> None:
        if not self.compiled:
            self._on_first()
        self.compiled += 1

    def on_end(self, _event) -> None:
        pass


@contextlib.contextmanager
def watching_compiles(on_first: Callable[[], None]) -> Iterator[_CompileWatch]:
    """Counts the compilations in this process while inside (loads from the cache are not)."""
    watch = _CompileWatch(on_first)
    with event.install_listener("numba:compile", watch):
        yield watch


def _stamp(path: str) -> list:
    """A file's modification time and size: what numba compares to tell a stale cache entry."""
    st = os.stat(path)
    return [st.st_mtime_ns, st.st_size]


def _cache_state() -> dict:
    """What decides whether numba loads every kernel from its cache, as JSON values."""
    folders = sorted({k.stats.cache_path for k in kernels()})
    cpu = numba.config.CPU_NAME or llvmlite.binding.get_host_cpu_name()
    features = numba.config.CPU_FEATURES or llvmlite.binding.get_host_cpu_features().flatten()
    top = os.path.commonpath(folders)  # names below it: a copied cache stays warm
    files = {}
    for folder in folders:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith((".nbi", ".nbc")):
                    files[os.path.relpath(entry.path, top)] = _stamp(entry.path)
    return {
        "numba": numba.__version__,
        "cpu": [cpu, features],
        "sources": {module.__name__: _stamp(module.__file__) for module in KERNEL_MODULES},
        "cache": files,
    }


def _marker_path() -> str:
    return os.path.join(kernels()[0].stats.cache_path, MARKER)


def cache_is_warm() -> bool:
    """True when the marker says numba's cache holds every kernel for this process's state."""
    try:
        with open(_marker_path()) as f:
            return json.load(f) == _cache_state()
    except (OSError, ValueError):
        return False


def _write_marker() -> None:
    """The marker, written whole (a read-only cache goes without: the sample runs each time)."""
    path = _marker_path()
    temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(temporary, "w") as f:
            json.dump(_cache_state(), f)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(temporary)


_lock = threading.Lock()
_done = False  # the kernels are in this process, or in a cache it found warm


def _fingerprint_sample() -> None:
    """Fingerprint64 over every length branch, of both offset widths (categorical ids of a
    vocabulary, `training.categorical`, call it)."""
    values = ["", "ab", "abcde", "x" * 12, "y" * 20, "z" * 40, "w" * 100]
    for type_ in (pa.string(), pa.large_string()):
        fingerprint.fingerprints(pa.array(values, type_))


def compile_kernels(on_compiling: Optional[Callable[[], None]] = None) -> float:
    """Compile, or load from numba's cache, every kernel with every argument type a conversion
    uses, once per process, unless the cache is warm (`cache_is_warm`); returns the seconds
    spent compiling (0.0 when all came from the cache, or were here already). `on_compiling()`
    is called when the first kernel starts compiling."""
    global _done
    with _lock:
        if _done or cache_is_warm():
            _done = True
            return 0.0
        start = time.perf_counter()
        with watching_compiles(on_compiling or (lambda: None)) as watch:
            with tempfile.TemporaryDirectory(prefix="tfx-tabular-kernels-") as folder:
                _write_sample(folder, np.random.default_rng(0))
                _convert_sample(folder)
            _fingerprint_sample()
        _write_marker()
        _done = True
    return time.perf_counter() - start if watch.compiled else 0.0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tfx_tabular.statistics.precompile",
        description="Compile the conversion's numba kernels into numba's cache (NUMBA_CACHE_DIR, "
        "else beside the sources), for the CPU target numba is set to (NUMBA_CPU_NAME, "
        "NUMBA_CPU_FEATURES).",
    )
    parser.parse_args(argv)
    seconds = compile_kernels()
    found = kernels()
    where = {k.stats.cache_path for k in found}
    target = numba.config.CPU_NAME or "this machine's CPU"
    print(
        f"{len(found)} kernels compiled in {seconds:.1f} s for {target}"
        if seconds
        else f"{len(found)} kernels already compiled for {target}",
        f"(cache: {', '.join(sorted(where))})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

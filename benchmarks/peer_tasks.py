"""The `peers` section's measured runs: one loader, one batch size, in a child process of the
loader's own environment (`python -m benchmarks.worker peer_tasks:task ...` with that
environment's Python), so this module imports only the standard library at the top.

Every loader is built as its documentation shows a TensorFlow user, then read the same way: a
Python loop over its batches, as Keras `fit` takes a Python iterable (Merlin's loader is not a
tf.data dataset, so a compiled step could not take its batches), one batch of warm-up, then
`examples` examples timed, wall and CPU of this process and its descendants (Ray's and Merlin's
workers). The next batch is the sample compared with the Parquet values (`peer_check`).
"""

from __future__ import annotations

import glob
import os
import sys
import time
import traceback

from benchmarks import peer_check

CHECK_ROWS = 4096  # rows of the sample compared with pyarrow's read


def _parquet_files(parquet_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(parquet_dir, "**", "*.parquet"), recursive=True))


def _proc_cpu(stat: str, reaped: bool) -> float:
    """CPU seconds (user + system, and the reaped children's if `reaped`) of a /proc/PID/stat line."""
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    ticks = sum(int(f) for f in fields[11 : 15 if reaped else 13])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds() -> float:
    """CPU seconds of this process (with its reaped children) and of its live descendants."""
    parents, stats = {}, {}
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(path) as handle:
                stat = handle.read()
        except OSError:  # exited meanwhile
            continue
        pid = int(path.split("/")[2])
        parents[pid], stats[pid] = int(stat.rsplit(")", 1)[1].split()[1]), stat
    own, total, frontier = os.getpid(), 0.0, [os.getpid()]
    while frontier:
        pid = frontier.pop()
        total += _proc_cpu(stats[pid], reaped=pid == own) if pid in stats else 0.0
        frontier += [child for child, parent in parents.items() if parent == pid]
    return total


def _rows(batch) -> int:
    features, label = batch
    label = features["label"] if label is None else label
    if hasattr(label, "dense_shape"):
        return int(label.dense_shape[0])
    return int(label.shape[0]) if hasattr(label, "shape") else len(label)


def measure(batches, examples: int, least_examples: int, seconds: float) -> dict:
    """Examples/s of wall and per CPU-second over `examples` examples of `batches` (an iterator
    of (features, label)) or those read in `seconds`, but at least `least_examples`, after a
    first batch of warm-up."""
    _rows(next(batches))
    cpu, start, read = tree_cpu_seconds(), time.perf_counter(), 0
    while read < least_examples or (read < examples and time.perf_counter() - start < seconds):
        read += _rows(next(batches))
    seconds, cpu = time.perf_counter() - start, tree_cpu_seconds() - cpu
    return {
        "examples": read,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "examples_per_second": read / seconds,
        "examples_per_cpu_second": read / cpu,
    }


def _columns(batch) -> dict:
    """A batch's columns `per_row`, label included, at most CHECK_ROWS rows."""
    features, label = batch
    columns = dict(features)
    if label is not None:
        columns["label"] = label
    return {name: peer_check.per_row(v)[:CHECK_ROWS] for name, v in columns.items()}


def task(peer: str, parquet_dir: str, examples_dir: str, reference_dir: str, batch_size: int,
         examples: int, least_examples: int, seconds: float, scratch: str,
         note: str = "") -> dict:  # fmt: skip
    """One measured run of `peer` (a key of LOADERS) and its sample's verdict; `parquet_dir`
    is what it reads (the original or a null-filled copy), `reference_dir` the original;
    `scratch` a folder for the loader's own files, which the parent removes."""
    try:
        source = examples_dir if peer in ON_EXAMPLES else parquet_dir
        batches = iter(LOADERS[peer](source, batch_size, scratch))
        result = measure(batches, examples, least_examples, seconds)
        if peer == "ours":
            columns, strings_as = _ours_columns(next(batches)), _fingerprint
        else:
            columns = (_merlin_columns if peer == "merlin" else _columns)(next(batches))
            strings_as = None
        result["equality"] = peer_check.check(reference_dir, columns, note, strings_as)
    except Exception:
        traceback.print_exc()
        result = None
    if peer == "ray":
        import ray

        ray.shutdown()
    if result is None:
        # Exit at once: after a failed batch some loaders' threads keep the interpreter from
        # exiting (Hugging Face's hung for minutes).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    return result


# --- the loaders, each as its documentation shows a TensorFlow user ---------------------------


def _ours(examples_dir: str, batch_size: int, _scratch: str):
    from benchmarks.input_pipeline import _setup
    from tfx_tabular import input_fn

    schema, files = _setup(examples_dir)
    return input_fn(files, schema, batch_size, num_epochs=None, input_form="integers")


def _tfxio(examples_dir: str, batch_size: int, _scratch: str):
    from benchmarks.input_pipeline import tfxio_dataset

    return tfxio_dataset(examples_dir, batch_size).repeat()


def _generator(parquet_dir: str, batch_size: int, _scratch: str):
    """A plain pyarrow generator: each file's record batches as numpy columns, nulls filled by
    hand (`from_generator` takes no nulls), `history` as a ragged tensor, under
    `tf.data.Dataset.from_generator`."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import tensorflow as tf

    schema = pq.read_schema(_parquet_files(parquet_dir)[0])
    fills = {f.name: "" if f.type == pa.string() else 0 for f in schema if f.name != "history"}

    def batches():
        while True:
            for path in _parquet_files(parquet_dir):
                for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
                    columns = {n: pc.fill_null(batch[n], v).to_numpy(zero_copy_only=False)
                               for n, v in fills.items()}  # fmt: skip
                    history = batch["history"]
                    columns["history"] = tf.RaggedTensor.from_row_splits(
                        pc.list_flatten(history).to_numpy(), history.offsets.to_numpy()
                    )
                    yield _with_label(columns)

    spec = {n: tf.TensorSpec([None], tf.dtypes.as_dtype(schema.field(n).type.to_pandas_dtype()))
            for n in fills if schema.field(n).type != pa.string()}  # fmt: skip
    spec.update({n: tf.TensorSpec([None], tf.string) for n in fills if n not in spec})
    spec["history"] = tf.RaggedTensorSpec([None, None], tf.int64, row_splits_dtype=tf.int32)
    label = spec.pop("label")
    return tf.data.Dataset.from_generator(batches, output_signature=(spec, label)).prefetch(2)


def _with_label(features: dict):
    label = features.pop("label")
    return features, label


def _tensorflow_io(parquet_dir: str, batch_size: int, _scratch: str):
    """`tfio.IODataset.from_parquet` per file (its columns: the scalars; it reads no lists),
    concatenated, batched."""
    import functools

    import tensorflow_io as tfio

    scalars = [c for c in _schema_names(parquet_dir) if c != "history"]
    files = [tfio.IODataset.from_parquet(f, columns=scalars) for f in _parquet_files(parquet_dir)]
    dataset = functools.reduce(lambda a, b: a.concatenate(b), files)
    return dataset.batch(batch_size).map(lambda row: _with_label(dict(row))).repeat()


def _schema_names(parquet_dir: str) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_schema(_parquet_files(parquet_dir)[0]).names


def _petastorm(parquet_dir: str, batch_size: int, _scratch: str):
    """`make_batch_reader` + `make_petastorm_dataset`, unbatched and batched again (its README's
    recipe for non-Petastorm Parquet); the scalars only: its TensorFlow dataset takes no
    variable-length lists ("Length of all values in column 'history' are expected to be the
    same length")."""
    from petastorm import make_batch_reader
    from petastorm.tf_utils import make_petastorm_dataset

    scalars = [c for c in _schema_names(parquet_dir) if c != "history"]
    reader = make_batch_reader(f"file://{parquet_dir}", num_epochs=None, schema_fields=scalars)
    dataset = make_petastorm_dataset(reader).unbatch().batch(batch_size)
    return dataset.map(lambda row: _with_label(row._asdict()))


def _ray(parquet_dir: str, batch_size: int, scratch: str):
    """`ray.data.read_parquet(...).to_tf(...)` on a local Ray of this machine's cores."""
    import ray

    ray.init(_temp_dir=scratch, include_dashboard=False, log_to_driver=False)
    data = ray.data.read_parquet(parquet_dir)
    features = [c for c in data.columns() if c != "label"]
    dataset = data.to_tf(feature_columns=features, label_columns="label", batch_size=batch_size)
    return dataset.repeat()


def _huggingface(parquet_dir: str, batch_size: int, scratch: str):
    """`load_dataset("parquet", ...)` (it builds an Arrow cache first), then `to_tf_dataset`, of
    the scalars: it stacks a column's values per batch, so variable-length lists fail ("all input
    arrays must have the same shape")."""
    import datasets

    data = datasets.load_dataset(
        "parquet", data_files=_parquet_files(parquet_dir), split="train", cache_dir=scratch
    )
    features = [c for c in data.column_names if c not in ("label", "history")]
    return data.to_tf_dataset(
        columns=features, label_cols="label", batch_size=batch_size, shuffle=False
    ).repeat()


def _merlin(parquet_dir: str, batch_size: int, _scratch: str):
    """`merlin.io.Dataset(cpu=True)` into `merlin.dataloader.tensorflow.Loader`, epoch after
    epoch (the loader is a Python iterable of one epoch)."""
    from merlin.dataloader.tensorflow import Loader
    from merlin.io import Dataset

    loader = Loader(Dataset(_parquet_files(parquet_dir), engine="parquet", cpu=True), batch_size)
    while True:
        yield from loader


def _ours_columns(batch) -> dict:
    """Ours in the integer form: nullable scalars dense with masks, as rows holding a value or
    none (`ragged_scalars`); strings are their fingerprints (`_fingerprint`)."""
    from tfx_tabular.training.forms import ragged_scalars

    features, label = batch
    return _columns((ragged_scalars(features), label))


def _fingerprint(value: bytes) -> int:
    """A Parquet string as ours gives it in the integer form: its Fingerprint64, as int64."""
    import numpy as np

    from tfx_tabular.coders.fingerprint import fingerprint64

    data = np.frombuffer(value, np.uint8)
    return int(np.array(fingerprint64(data, 0, len(data)), np.uint64).view(np.int64))


def _merlin_columns(batch) -> dict:
    """Merlin's list columns come as `<name>__values` and `<name>__offsets`: joined back."""
    import numpy as np

    features, _ = batch
    columns = _columns(({k: v for k, v in features.items() if "__" not in k}, None))
    for name in {k.split("__")[0] for k in features if k.endswith("__offsets")}:
        values = np.asarray(features[f"{name}__values"]).ravel()
        offsets = np.asarray(features[f"{name}__offsets"]).ravel()[: CHECK_ROWS + 1]
        columns[name] = [list(values[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    return columns


ON_EXAMPLES = {"ours", "tfxio"}  # read the converted tf.Examples; the others read the Parquet
LOADERS = {
    "ours": _ours,
    "tfxio": _tfxio,
    "generator": _generator,
    "merlin": _merlin,
    "petastorm": _petastorm,
    "ray": _ray,
    "tensorflow_io": _tensorflow_io,
    "huggingface": _huggingface,
}

"""Reading columnar batches (`tfx_tabular.coders.columnar`) into the tensors the per-row parse
gives: a batch of `batch_size` rows (a multiple of the layout's slice rows) is slice s of
`batch_size / slice_rows` records, parsed in one `parse_example` call, their rows concatenated
with no copy after the parse; a batch of more than PARSE_RECORDS records' slices (a GPU's) joins
several such parses. Training shuffles the records and the (records, slice) pairs;
otherwise the records come in file order and each group's slices in order, so every row is read
once, in a fixed order (not the per-row records' order). Other batch sizes read the per-row
records (see `input_fn`).

Where `input_fn` finds the payload: in the `columnar/` folder of the Examples artifact whose
`Split-<name>` folder holds the per-row shards it was given (all of them: a subset of the shards
is read per row).
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from typing import Optional, Sequence

import tensorflow as tf

from tfx_tabular.coders import columnar
from tfx_tabular.source.mapping import Kind

_DTYPES = {Kind.INT: tf.int64, Kind.FLOAT: tf.float32, Kind.BYTES: tf.string}
# (records, slice) pairs shuffled before parsing, in `batches`: a few groups' worth.
SLICE_SHUFFLE = 64
# Records parsed together at most (8,192 rows of 512-row slices): a group is held until each
# of its slices is parsed, and the groups of a GPU-sized batch's records (a hundred and more)
# held in the shuffle took gigabytes; batches joined from smaller parses read as fast.
PARSE_RECORDS = 16
_SPLIT_FOLDER = re.compile(r"^(?P<uri>.*?)/?Split-(?P<split>[^/]+)$")


@dataclasses.dataclass(frozen=True)
class Payload:
    """One split's columnar records and the layout that describes them."""

    layout: columnar.ColumnarLayout
    files: tuple[str, ...]
    split: str


def _payload_of(uri: str, split: str) -> Optional[Payload]:
    folder = posixpath.join(uri, columnar.FOLDER)
    layout_path = posixpath.join(folder, columnar.LAYOUT_FILE)
    if not tf.io.gfile.exists(layout_path):
        return None
    with tf.io.gfile.GFile(layout_path, "r") as handle:
        layout = columnar.ColumnarLayout.from_json(handle.read(), layout_path)
    if split not in layout.rows:
        return None
    files = sorted(tf.io.gfile.glob(posixpath.join(folder, f"Split-{split}", "*")))
    return Payload(layout, tuple(files), split) if files else None


def find_payload(files: Sequence[str]) -> Optional[Payload]:
    """The columnar payload holding the same rows as per-row shards `files`: when they are all
    the shards of one `Split-<name>` folder of an Examples artifact that has one; else None."""
    folders = {posixpath.dirname(f) for f in files}
    if len(folders) != 1:
        return None
    folder = folders.pop()
    match = _SPLIT_FOLDER.match(folder)
    if match is None or set(files) != set(tf.io.gfile.glob(posixpath.join(folder, "*"))):
        return None
    return _payload_of(match.group("uri") or ".", match.group("split"))


def readable(spec: dict) -> bool:
    """Whether every entry of a parsing spec can be rebuilt from columnar batches."""
    for entry in spec.values():
        if isinstance(entry, tf.io.RaggedFeature):
            if any(not isinstance(p, tf.io.RaggedFeature.RowLengths) for p in entry.partitions):
                return False
        elif not isinstance(entry, (tf.io.FixedLenFeature, tf.io.VarLenFeature)):
            return False
    return True


def _keys_of(spec: dict, names: dict) -> dict:
    """Each spec entry's source features: name → [values feature, partition features...]."""
    keys = {}
    for name, entry in spec.items():
        if isinstance(entry, tf.io.RaggedFeature):
            keys[name] = [entry.value_key or name] + [p.key for p in entry.partitions]
        else:
            keys[name] = [name]
    missing = sorted({k for ks in keys.values() for k in ks if k not in names})
    if missing:
        raise ValueError(f"features {missing} are not in the columnar batches")
    return keys


class SliceParser:
    """Serialized columnar records (a batch of them) → each needed feature as a RaggedTensor of
    the rows of one slice of each record, then the spec's tensors."""

    def __init__(self, layout: columnar.ColumnarLayout, spec: dict):
        self._spec = spec
        self.slice_rows, self.slices = layout.slice_rows, layout.slices
        self._index = {name: i for i, (name, _, _) in enumerate(layout.features)}
        self._kinds = {name: kind for name, kind, _ in layout.features}
        self._lengths = {name: getattr(tf, dtype) for name, _, dtype in layout.features}
        self._keys = _keys_of(spec, self._index)
        self.needed = sorted({k for ks in self._keys.values() for k in ks})

    def _ragged(self, values: dict, lengths: dict) -> dict:
        """Each needed feature's rows from its values and its records' length bytes: the
        features whose lengths share a dtype are decoded together, a few ops for all of them
        (their records hold the same rows, so their joined length bytes are equally long)."""
        out = {}
        for dtype in sorted({self._lengths[n] for n in self.needed}, key=lambda d: d.name):
            names = [name for name in self.needed if self._lengths[name] == dtype]
            joined = tf.strings.reduce_join(tf.stack([lengths[n] for n in names]), axis=1)
            counts = tf.cast(tf.io.decode_raw(joined, dtype, little_endian=True), tf.int64)
            splits = tf.pad(tf.cumsum(counts, axis=1), [[0, 0], [1, 0]])
            for name, row_splits in zip(names, tf.unstack(splits, num=len(names)), strict=True):
                out[name] = tf.RaggedTensor.from_row_splits(
                    values[name], row_splits, validate=False
                )
        return out

    def slice_rows_of(self, serialized, slice_index) -> dict:
        """Each needed feature → RaggedTensor [rows, None]: the rows of slice `slice_index` (a
        scalar tensor) of every record, record after record (one parse, no copy after it).

        The parse's keys are tensors (`ParseExampleV2` takes them so), built from the slice
        index: one parse op for any slice, not one branch per slice."""
        suffix = tf.strings.as_string(slice_index)
        indices = [self._index[name] for name in self.needed]
        dtypes = [_DTYPES[Kind(self._kinds[name])] for name in self.needed]
        parsed = tf.raw_ops.ParseExampleV2(
            serialized=serialized,
            names=tf.constant([], tf.string),
            sparse_keys=tf.constant([], tf.string),
            dense_keys=tf.strings.join([[columnar.lengths_key(i, "") for i in indices], suffix]),
            ragged_keys=tf.strings.join([[columnar.values_key(i, "") for i in indices], suffix]),
            # A record's last slices may be missing (a shorter record): no rows.
            dense_defaults=[tf.constant(b"")] * len(indices),
            num_sparse=0,
            sparse_types=[],
            ragged_value_types=dtypes,
            ragged_split_types=[tf.int64] * len(indices),
            dense_shapes=[[]] * len(indices),
        )
        _, _, _, lengths, values, _ = parsed
        return self._ragged(
            dict(zip(self.needed, values, strict=True)),
            dict(zip(self.needed, lengths, strict=True)),
        )

    def tensors(self, rows: dict) -> dict:
        """The spec's tensors over `rows` as `tf.io.parse_example` gives them for per-row
        records (VarLenFeatures as SparseTensors)."""
        out = {}
        for name, entry in self._spec.items():
            tensor = self._tensor(name, entry, rows)
            out[name] = tensor.to_sparse() if isinstance(entry, tf.io.VarLenFeature) else tensor
        return out

    def _tensor(self, name: str, entry, rows: dict):
        keys = self._keys[name]
        if isinstance(entry, tf.io.FixedLenFeature):
            return _dense(name, rows[keys[0]], entry)
        if isinstance(entry, tf.io.VarLenFeature):
            return rows[keys[0]]
        if len(keys) == 1:
            return rows[keys[0]]
        nested = rows[keys[0]].values
        for key in reversed(keys[1:]):
            nested = tf.RaggedTensor.from_row_lengths(nested, rows[key].values, validate=False)
        return tf.RaggedTensor.from_row_lengths(nested, rows[keys[1]].row_lengths(), validate=False)


def _dense(name: str, rows: tf.RaggedTensor, entry: tf.io.FixedLenFeature) -> tf.Tensor:
    """A FixedLenFeature: a row without values takes the default, as the per-row parse does;
    a row of another size is an error there, and here."""
    dims = [int(d) for d in entry.shape]
    size = 1
    for d in dims:
        size *= d
    lengths = rows.row_lengths()
    check = tf.debugging.Assert(
        tf.reduce_all((lengths == 0) | (lengths == size)),
        [f"feature {name!r}: a row holds a number of values other than {size}"],
    )
    default = entry.default_value
    if default is None:
        check = tf.debugging.Assert(
            tf.reduce_all(lengths > 0), [f"feature {name!r} is required but missing in a row"]
        )
        default = tf.zeros([], entry.dtype)
    else:
        default = tf.reshape(tf.constant(default, entry.dtype), [-1])[0]
    with tf.control_dependencies([check]):
        dense = rows.to_tensor(default_value=default, shape=[None, size])
    return tf.reshape(dense, [-1] + dims)


def _rows_of(tensors: dict) -> tf.Tensor:
    first = next(iter(tensors.values()))
    if isinstance(first, tf.RaggedTensor):
        return first.nrows()
    return tf.shape(first, out_type=tf.int64)[0]


def readable_batches(layout: columnar.ColumnarLayout, batch_size: int) -> bool:
    """Whether batches of `batch_size` rows can be read from records of `layout`."""
    return batch_size % layout.slice_rows == 0


def _records_per_parse(batch_records: int) -> int:
    """Records parsed together for a batch of `batch_records` records' slices: the largest divisor
    of it not over PARSE_RECORDS."""
    return max(d for d in range(1, min(batch_records, PARSE_RECORDS) + 1) if batch_records % d == 0)


def _merged(rows: dict) -> dict:
    """Batched parses' rows ([parses, rows, ...]) as one batch's rows."""
    return {name: ragged.merge_dims(0, 1) for name, ragged in rows.items()}


def batches(
    records: tf.data.Dataset,
    parser: SliceParser,
    batch_size: int,
    shuffle: bool,
    seed: Optional[int],
    ordered: bool,
) -> tf.data.Dataset:
    """Columnar records → batches of `batch_size` rows (a multiple of the slice rows) of the
    spec's tensors: slice s of a group of records parsed at once gives their rows with no copy;
    a batch is one such parse, or (batches of more than PARSE_RECORDS records' slices) several
    parses of different groups joined (one copy). With `shuffle`, the (records, slice) pairs are
    shuffled so that consecutive parses come from different records. A group holding a file's
    last, shorter record gives shorter parses; no row is dropped."""
    batch_records = batch_size // parser.slice_rows
    count = _records_per_parse(batch_records)
    joined = batch_records // count
    pairs = records.batch(count).flat_map(
        lambda serialized: tf.data.Dataset.range(parser.slices).map(lambda s: (serialized, s))
    )
    if shuffle:
        pairs = pairs.shuffle(SLICE_SHUFFLE, seed=seed, reshuffle_each_iteration=True)

    def parse(serialized, s):
        rows = parser.slice_rows_of(serialized, s)
        return rows if joined > 1 else parser.tensors(rows)

    parsed = pairs.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered)
    # A file's last record may hold fewer slices: their parses are empty.
    parsed = parsed.filter(lambda t: _rows_of(t) > 0)
    if joined == 1:
        return parsed
    return parsed.batch(joined).map(
        lambda rows: parser.tensors(_merged(rows)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=ordered,
    )

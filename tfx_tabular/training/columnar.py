"""Reading columnar batches (`tfx_tabular.coders.columnar`) into the tensors the per-row parse
gives: records → chunks of `chunk_records` records parsed at once → rows shuffled within a chunk
(training) → the parsing spec's tensors for the whole chunk → batches of `batch_size`, the rows
left over carried into the next chunk, so no row is dropped between chunks.

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
# (records, slice) pairs shuffled before parsing, in `_sliced_batches`: a few chunks' worth.
SLICE_SHUFFLE = 64
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


class ChunkParser:
    """Serialized columnar records (a batch of them) → each needed feature as a RaggedTensor of
    rows (of one slice of each record, or of the whole records), then the spec's tensors."""

    def __init__(self, layout: columnar.ColumnarLayout, spec: dict):
        self._spec = spec
        self.batch_rows, self.slice_rows, self.slices = (
            layout.batch_rows,
            layout.slice_rows,
            layout.slices,
        )
        self._index = {name: i for i, (name, _, _) in enumerate(layout.features)}
        self._kinds = {name: kind for name, kind, _ in layout.features}
        self._lengths = {name: getattr(tf, dtype) for name, _, dtype in layout.features}
        self._keys = _keys_of(spec, self._index)
        self.needed = sorted({k for ks in self._keys.values() for k in ks})

    def _slice_spec(self, slice_index: int) -> dict:
        spec = {}
        for name in self.needed:
            i, dtype = self._index[name], _DTYPES[Kind(self._kinds[name])]
            spec[columnar.values_key(i, slice_index)] = tf.io.RaggedFeature(
                dtype, row_splits_dtype=tf.int64
            )
            # A record's last slices may be missing (a shorter record): no rows.
            spec[columnar.lengths_key(i, slice_index)] = tf.io.FixedLenFeature(
                [], tf.string, default_value=b""
            )
        return spec

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

    def _parse_slice(self, serialized, s: int) -> dict:
        parsed = tf.io.parse_example(serialized, self._slice_spec(s))
        keys = {name: self._index[name] for name in self.needed}
        return self._ragged(
            {n: parsed[columnar.values_key(i, s)].values for n, i in keys.items()},
            {n: parsed[columnar.lengths_key(i, s)] for n, i in keys.items()},
        )

    def slice_rows_of(self, serialized, slice_index) -> dict:
        """Each needed feature → RaggedTensor [rows, None]: the rows of slice `slice_index` (a
        scalar tensor) of every record, record after record (one parse, no copy after it)."""
        branches = [lambda s=s: self._parse_slice(serialized, s) for s in range(self.slices)]
        return tf.switch_case(tf.cast(slice_index, tf.int32), branches)

    def rows(self, serialized) -> dict:
        """Each needed feature → RaggedTensor [rows, None]: the records' rows in order, each row's
        list as in its per-row record."""
        spec = {}
        for s in range(self.slices):
            spec.update(self._slice_spec(s))
        parsed = tf.io.parse_example(serialized, spec)
        values, lengths = {}, {}
        for name in self.needed:
            i = self._index[name]
            # Per record, its slices one after the other.
            values[name] = tf.concat(
                [parsed[columnar.values_key(i, s)] for s in range(self.slices)], axis=1
            ).values
            lengths[name] = tf.strings.join(
                [parsed[columnar.lengths_key(i, s)] for s in range(self.slices)]
            )
        return self._ragged(values, lengths)

    def tensors(self, rows: dict) -> dict:
        """The spec's tensors over `rows` (what `tf.io.parse_example` gives per-row records),
        but VarLenFeatures still ragged: see `finish`."""
        return {name: self._tensor(name, entry, rows) for name, entry in self._spec.items()}

    def finish(self, tensors: dict) -> dict:
        """A batch of `tensors` as the per-row parse gives it: VarLenFeatures as SparseTensors."""
        return {
            name: t.to_sparse() if isinstance(self._spec[name], tf.io.VarLenFeature) else t
            for name, t in tensors.items()
        }

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


def _gather(tensor, rows):
    """Rows `rows` of a dense or ragged tensor, copying each value once."""
    if not isinstance(tensor, tf.RaggedTensor):
        return tf.gather(tensor, rows)
    lengths = tf.gather(tensor.row_lengths(), rows)
    starts = tf.gather(tensor.row_splits[:-1], rows)
    inner = tf.ragged.range(starts, starts + lengths, dtype=tf.int64).flat_values
    return tf.RaggedTensor.from_row_lengths(_gather(tensor.values, inner), lengths, validate=False)


def _take(tensor, start, stop):
    """Rows [start, stop) with a few slices per ragged level."""
    if not isinstance(tensor, tf.RaggedTensor):
        return tensor[start:stop]
    splits = tensor.row_splits
    low, high = splits[start], splits[stop]
    return tf.RaggedTensor.from_row_splits(
        _take(tensor.values, low, high), splits[start : stop + 1] - low, validate=False
    )


def _rows_of(tensors: dict) -> tf.Tensor:
    first = next(iter(tensors.values()))
    if isinstance(first, tf.RaggedTensor):
        return first.nrows()
    return tf.shape(first, out_type=tf.int64)[0]


def _batched(tensor, batch_size: int):
    """Rows [n * batch_size, ...] → [n, batch_size, ...], without copying values."""
    if isinstance(tensor, tf.RaggedTensor):
        return tf.RaggedTensor.from_uniform_row_length(tensor, batch_size, validate=False)
    shape = tf.shape(tensor, out_type=tf.int64)
    return tf.reshape(tensor, tf.concat([[-1, batch_size], shape[1:]], axis=0))


def split_chunk(tensors: dict, batch_size: int, shuffle: bool, seed: Optional[int]):
    """A chunk's rows (permuted first when `shuffle`: one gather per feature) as its whole
    batches, stacked, and the rows left over (fewer than `batch_size`, often none)."""
    rows = _rows_of(tensors)
    if shuffle:
        order = tf.random.shuffle(tf.range(rows), seed=seed)
        tensors = tf.nest.map_structure(lambda t: _gather(t, order), tensors)
    whole = (rows // batch_size) * batch_size
    stacked = tf.nest.map_structure(lambda t: _batched(_take(t, 0, whole), batch_size), tensors)
    tail = tf.nest.map_structure(lambda t: _take(t, whole, rows), tensors)
    return stacked, tail


def _unstacked(stacked: dict, tail: dict) -> tf.data.Dataset:
    """The batches of `split_chunk`'s output: the whole ones, then the rest if any."""
    rest = tf.data.Dataset.from_tensors(tail).filter(lambda t: _rows_of(t) > 0)
    return tf.data.Dataset.from_tensor_slices(stacked).concatenate(rest)


def chunk_records(batch_rows: int, batch_size: int, target_rows: int = 32_768) -> int:
    """Records parsed together: at least `target_rows` and one batch; where the record size and
    the batch size allow it, a whole number of batches (then only a chunk holding a file's last,
    shorter record ends with a shorter batch)."""
    count = max(1, -(-max(target_rows, batch_size) // batch_rows))
    if batch_size > batch_rows and batch_size % batch_rows == 0:
        step = batch_size // batch_rows
        count = -(-count // step) * step
    return count


def _sliced_batches(records, parser: ChunkParser, batch_size: int, seed, ordered: bool):
    """Training batches of a multiple of the slice rows: slice s of `batch_size / slice_rows`
    records parsed at once is a batch, mixing those records' rows with no copy; the (records,
    slice) pairs are shuffled so that consecutive batches come from different records."""
    count = batch_size // parser.slice_rows
    pairs = records.batch(count).flat_map(
        lambda serialized: tf.data.Dataset.range(parser.slices).map(lambda s: (serialized, s))
    )
    pairs = pairs.shuffle(SLICE_SHUFFLE, seed=seed, reshuffle_each_iteration=True)
    batches = pairs.map(
        lambda serialized, s: parser.finish(parser.tensors(parser.slice_rows_of(serialized, s))),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=ordered,
    )
    # A file's last record may hold fewer slices: their batches are empty.
    return batches.filter(lambda t: _rows_of(t) > 0)


def batches(
    records: tf.data.Dataset,
    parser: ChunkParser,
    batch_size: int,
    shuffle: bool,
    seed: Optional[int],
    ordered: bool,
) -> tf.data.Dataset:
    """Columnar records → batches of `batch_size` rows of the spec's tensors. Training with a
    batch size that is a multiple of the slice rows: `_sliced_batches`. Otherwise records are
    parsed a chunk at a time, rows shuffled within the chunk when asked; a chunk whose rows do
    not fill its last batch ends with a shorter one (no row is dropped or carried over)."""
    if shuffle and batch_size % parser.slice_rows == 0:
        return _sliced_batches(records, parser, batch_size, seed, ordered)

    def chunk(serialized):
        tensors = parser.tensors(parser.rows(serialized))
        return split_chunk(tensors, batch_size, shuffle, seed)

    chunks = records.batch(chunk_records(parser.batch_rows, batch_size)).map(
        chunk, num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered
    )
    return chunks.flat_map(_unstacked).map(
        parser.finish, num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered
    )

"""Reading columnar batches (`tfx_tabular.coders.columnar`, layout 3) into training batches.

Records are read GROUP_RECORDS at a time: one `parse_example` gives each needed column's raw
bytes per record, one `decode_raw` per column its values (no string is made: strings are their
fingerprints), validity and row offsets. Training shuffles records, then mixes each group's rows
in runs of RUN_ROWS neighbours: the group's rows are reordered run-major (run 0 of every record,
then run 1, ...), its runs in a random order, by one gather of whole runs, not of rows (a list's
rows are gathered by row). A group holding a shorter record (a shard's last, or all of a small
split) is mixed in runs of SHORT_RUN_ROWS over all its rows instead, in a random order. Batches
of exactly `batch_size` rows are then cut across groups (`_cut`: a scan carrying the rows left
after a group's whole batches), so each mixes the runs of several records and every batch but an
epoch's last has the size asked (a shard's last, shorter record included), and are shuffled a
few at a time. Otherwise records come in file order and rows in record order, so every row is
read once, in a fixed order (not the per-row records' order), the rows left at the end a last,
shorter batch.

The features come in the input form asked (`forms`): the integer form as the records hold it,
the exact form with nullable scalars as ragged rows, its strings made from the records' string
bytes, where they hold them (`columnar_strings`): a scalar's strings travel as their places in
the group's joined bytes while its rows are mixed and cut, and one `substr` per batch makes
those the batch holds (a nullable one's only where present); a list's are made at once.

Where `input_fn` finds the payload: in the `columnar/` folder of the Examples artifact whose
`Split-<name>` folder holds the per-row shards it was given (all of them: a subset of the shards
is read per row).
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfx_tabular.coders import columnar
from tfx_tabular.source.mapping import Kind
from tfx_tabular.training.categorical import fingerprint_strings
from tfx_tabular.training.forms import InputForm, present_key

_DTYPES = {Kind.INT: tf.int64, Kind.FLOAT: tf.float32, Kind.BYTES: tf.int64}
# Features at most read from columnar batches: the reader's graph has a few operations per
# feature in each of its steps, and at thousands of features building it took longer than
# reading the per-row records (wide tables read per row).
MAX_FEATURES = 256
# Records decoded together: the rows of a batch are mixed from this many records at most.
GROUP_RECORDS = 16
RUN_ROWS = columnar.RUN_ROWS
# Rows of the runs a group holding a shorter record is mixed in, over all its rows (its records
# cannot be taken run-major): finer than RUN_ROWS, as a small split is such a group.
SHORT_RUN_ROWS = 64
# Rows of the batches shuffled after they are cut (two batches at least): consecutive batches
# then come from different groups.
BATCH_SHUFFLE_ROWS = 1 << 16
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


def unreadable(spec: dict) -> Optional[str]:
    """Why columnar batches cannot give the spec's tensors, or None if they can."""
    for name, entry in spec.items():
        if isinstance(entry, tf.io.RaggedFeature):
            if any(not isinstance(p, tf.io.RaggedFeature.RowLengths) for p in entry.partitions):
                return f"feature {name!r} has a partition columnar batches cannot give"
        elif not isinstance(entry, (tf.io.FixedLenFeature, tf.io.VarLenFeature)):
            return f"feature {name!r} has a parsing spec entry columnar batches cannot give"
    if len(spec) > MAX_FEATURES:
        return f"{len(spec)} features, more than the {MAX_FEATURES} the columnar reader takes"
    return None


def strings_missing(layout: columnar.ColumnarLayout, form: InputForm) -> Optional[str]:
    """Why these columnar batches cannot give the form's strings, or None if they can."""
    if form.integers or not form.strings or layout.strings:
        return None
    first = sorted(form.strings)[0]
    return (
        f"input_form='exact' asks for strings ({first!r}, ...), and these columnar batches hold "
        "only their fingerprints (ParquetExampleGen's columnar_strings adds them)"
    )


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


def _flat(strings: tf.Tensor, dtype: tf.DType, equal: bool = False) -> tf.Tensor:
    """A group's raw bytes values of one column laid end to end, decoded: at once when they are
    `equal`ly long (a group of full records' scalars), else joined first (one more copy)."""
    if equal:
        return tf.reshape(tf.io.decode_raw(strings, dtype, little_endian=True), [-1])
    return tf.io.decode_raw(tf.strings.reduce_join(strings), dtype, little_endian=True)


class GroupDecoder:
    """Serialized columnar records (a group of them) → the needed features over the group's rows
    ({"values": name → a scalar's values or a list's rows, "present": name → a scalar's
    validity, only where the spec's entries use it}); then the spec's tensors."""

    def __init__(
        self,
        layout: columnar.ColumnarLayout,
        spec: dict,
        form: InputForm,
        run_rows: int = RUN_ROWS,
        short_run_rows: int = SHORT_RUN_ROWS,
    ):
        self._spec, self._form = spec, form
        self.batch_rows, self.run_rows = layout.batch_rows, run_rows
        self.short_run_rows = short_run_rows
        self._index = {name: i for i, (name, _, _) in enumerate(layout.features)}
        self._kinds = {name: Kind(kind) for name, kind, _ in layout.features}
        self._scalar = {name: shape == columnar.SCALAR for name, _, shape in layout.features}
        self._keys = _keys_of(spec, self._index)
        self.needed = sorted({k for ks in self._keys.values() for k in ks})
        for name in form.dense_scalars & set(spec):
            if not self._scalar[self._keys[name][0]]:
                raise ValueError(f"feature {name!r} is a list in the columnar batches")
        # Features read as their strings (the exact form, from records that hold them).
        strings = layout.strings and not form.integers
        self._strings = {n for n in self.needed if strings and self._kinds[n] == Kind.BYTES}
        # A column whose bytes say how many rows each record holds.
        first = self.needed[0]
        i = self._index[first]
        # (key, bytes a row, rows + this many items)
        if self._scalar[first] and first in self._strings:  # its ends
            self._row_key = (columnar.string_ends_key(i), 4, 1)
        elif self._scalar[first]:
            self._row_key = (columnar.values_key(i), _DTYPES[self._kinds[first]].size, 0)
        else:  # its offsets
            self._row_key = (columnar.offsets_key(i), 8, 1)
        self._masked = {
            self._keys[name][0]
            for name, entry in spec.items()
            if self._scalar[self._keys[name][0]] and not self._slots_suffice(name, entry)
        }

    def _slots_suffice(self, name: str, entry) -> bool:
        """Whether a scalar's slots alone give the entry: a fixed single value whose default is
        what a null's slot holds (no validity needed)."""
        if not isinstance(entry, tf.io.FixedLenFeature) or name in self._form.dense_scalars:
            return False
        if entry.default_value is None or int(np.prod(entry.shape or [1])) != 1:
            return False
        default = np.reshape(np.asarray(entry.default_value), [-1])[0]
        fill = columnar.NULL_FILL[self._kinds[self._keys[name][0]]]
        return default == b"" if entry.dtype == tf.string else default == fill

    def _parse(self, serialized) -> dict:
        keys = []
        for name in self.needed:
            i = self._index[name]
            if name in self._strings:
                keys += [columnar.string_bytes_key(i), columnar.string_ends_key(i)]
            else:
                keys.append(columnar.values_key(i))
            if name in self._masked:
                keys.append(columnar.mask_key(i))
            if not self._scalar[name]:
                keys.append(columnar.offsets_key(i))
        keys = sorted(set(keys) | {self._row_key[0]})
        return tf.io.parse_example(
            serialized, {k: tf.io.FixedLenFeature([], tf.string) for k in keys}
        )

    def decode(self, serialized) -> dict:
        """The needed features over the rows of records `serialized` (a vector), record after
        record (see the class docstring). One branch for the whole group, not one per column (a
        `cond` is a function call): all records of `batch_rows` rows, or not."""
        raw = self._parse(serialized)
        key, item_bytes, extra = self._row_key
        rows = tf.strings.length(raw[key]) // item_bytes - extra
        full = tf.reduce_all(tf.equal(rows, self.batch_rows))
        return tf.cond(
            full, lambda: self._decoded(raw, rows, True), lambda: self._decoded(raw, rows, False)
        )

    def _decoded(self, raw: dict, rows: tf.Tensor, full: bool) -> dict:
        values, present, lists, strings = {}, {}, {}, {}
        aligned = full and self.batch_rows % 8 == 0
        positions = None if aligned or not self._masked else _bit_positions(rows)
        for name in self.needed:
            i = self._index[name]
            scalar = self._scalar[name]
            if name in self._masked:
                present[name] = _bits(raw[columnar.mask_key(i)], positions)
            if name in self._strings:
                blob = raw[columnar.string_bytes_key(i)]
                located = _located(blob, raw[columnar.string_ends_key(i)], full and scalar)
                if scalar:  # made once cut into batches: their places are mixed and cut
                    strings[name] = located
                    continue
                flat, counts = _made(located), tf.strings.length(raw[columnar.string_ends_key(i)])
                counts = counts // 4 - 1
            else:
                raw_values = raw[columnar.values_key(i)]
                flat = _flat(raw_values, _DTYPES[self._kinds[name]], full and scalar)
                if scalar:
                    values[name] = flat
                    continue
                counts = tf.strings.length(raw_values) // flat.dtype.size
            splits = _joined_splits(raw[columnar.offsets_key(i)], counts)
            lists[name] = {"values": flat, "splits": splits}
        return {"values": values, "present": present, "lists": lists, "strings": strings}

    def mixed(self, rows: dict, seed: Optional[int]) -> dict:
        """A group's rows mixed (see the module docstring): in runs of `run_rows`, run-major,
        when every record of it is full, else in runs of `short_run_rows` over all its rows."""
        count = _rows(rows)
        runs = self.batch_rows // self.run_rows
        if runs * self.run_rows != self.batch_rows:
            return _runs_shuffled(rows, count, self.short_run_rows, seed)
        records = count // self.batch_rows
        full = tf.equal(count, records * self.batch_rows) & (records > 0)

        def run_major():
            # Run s of the output is run order[s] of every record: one gather of whole runs.
            order = tf.random.shuffle(tf.range(runs, dtype=tf.int64), seed=seed)
            runs_of = tf.reshape(order[:, None] + tf.range(records)[None, :] * runs, [-1])

            def mix(x):
                return tf.reshape(tf.gather(tf.reshape(x, [-1, self.run_rows]), runs_of), [-1])

            return _reordered(rows, count, mix)

        return tf.cond(
            full, run_major, lambda: _runs_shuffled(rows, count, self.short_run_rows, seed)
        )

    def tensors(self, rows: dict) -> dict:
        """The spec's tensors over `rows` in the input form (VarLenFeatures as SparseTensors,
        as `tf.io.parse_example` gives them)."""
        values = {name: tf.reshape(v, [-1]) for name, v in rows["values"].items()}
        values.update(rows["lists"])
        present = {name: tf.reshape(v, [-1]) for name, v in rows["present"].items()}
        out = {}
        for name, entry in self._spec.items():
            keys = self._keys[name]
            value = values.get(keys[0])
            if name in self._form.dense_scalars and self._form.integers:
                out[name], out[present_key(name)] = value[:, None], present[keys[0]][:, None]
                continue
            if self._scalar[keys[0]] and isinstance(entry, tf.io.VarLenFeature):
                out[name] = self._scalar_sparse(keys[0], value, present, rows["strings"])
                continue
            if self._scalar[keys[0]]:
                value = self._scalar_rows(keys[0], value, present, rows["strings"])
                if not isinstance(value, tf.RaggedTensor):  # the slots are the tensor
                    out[name] = tf.reshape(value, [-1, *[int(d) for d in entry.shape]])
                    continue
            if isinstance(entry, tf.io.FixedLenFeature):
                out[name] = _dense(name, value, entry)
            elif isinstance(entry, tf.io.VarLenFeature):
                out[name] = value.to_sparse()
            else:
                out[name] = _nested(value, [values[k] for k in keys[1:]])
        return out

    def _scalar_rows(self, name: str, slots, present: dict, strings: dict):
        """A scalar's slots, where they alone give it, else its rows of 0 or 1 value; a
        string's made from its places (only the present ones)."""
        if name not in self._masked:
            return _made(strings[name]) if name in strings else slots
        held = present[name]
        splits = tf.concat([[0], tf.cumsum(tf.cast(held, tf.int64))], 0)
        values = _held_values(slots, strings.get(name), tf.reshape(tf.where(held), [-1]))
        return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

    def _scalar_sparse(self, name: str, slots, present: dict, strings: dict) -> tf.SparseTensor:
        """A scalar's rows as a VarLenFeature's SparseTensor, as `tf.io.parse_example` gives
        it (no RaggedTensor made first)."""
        held = present[name]
        rows_held = tf.reshape(tf.where(held), [-1])
        values = _held_values(slots, strings.get(name), rows_held)
        indices = tf.stack([rows_held, tf.zeros_like(rows_held)], 1)
        shape = tf.stack([tf.size(held, tf.int64), tf.cast(tf.reduce_any(held), tf.int64)])
        return tf.SparseTensor(indices, values, shape)


def _bits(strings: tf.Tensor, positions: Optional[tf.Tensor]) -> tf.Tensor:
    """A group's validity bits (one bit a row, little-endian, each record's bytes padded to a
    whole byte) as bools, record after record: all of them when every record's rows fill its
    bytes (`positions` None), else those at `positions` (`_bit_positions`)."""
    packed = _flat(strings, tf.uint8, positions is None)
    shifts = tf.constant(list(range(8)), tf.uint8)
    bits = tf.bitwise.bitwise_and(tf.bitwise.right_shift(packed[:, None], shifts), 1)
    bits = tf.cast(tf.reshape(bits, [-1]), tf.bool)
    return bits if positions is None else tf.gather(bits, positions)


def _bit_positions(rows: tf.Tensor) -> tf.Tensor:
    """Where each row's bit is among a group's unpacked validity bits, records holding `rows`
    rows each (each record's padding bits skipped); computed once for all the group's masks."""
    padded = 8 * ((rows + 7) // 8)
    skipped = tf.cumsum(padded, exclusive=True) - tf.cumsum(rows, exclusive=True)
    return tf.repeat(skipped, rows) + tf.range(tf.reduce_sum(rows))


def _ragged(part: dict) -> tf.RaggedTensor:
    """A list's rows from its values and row splits."""
    return tf.RaggedTensor.from_row_splits(
        tf.reshape(part["values"], [-1]), tf.reshape(part["splits"], [-1]), validate=False
    )


def _rows(rows: dict) -> tf.Tensor:
    """How many rows a group's, a cut's or a batch's features hold (lists as values and row
    splits, or ragged)."""
    if rows["values"]:
        return tf.shape(next(iter(rows["values"].values())), out_type=tf.int64)[0]
    if rows["strings"]:
        return tf.shape(next(iter(rows["strings"].values()))["starts"], out_type=tf.int64)[0]
    first = next(iter(rows["lists"].values()))
    if isinstance(first, tf.RaggedTensor):
        return first.nrows()
    return tf.shape(first["splits"], out_type=tf.int64)[0] - 1


def _joined(a: dict, b: dict) -> dict:
    """Rows `a` then rows `b`."""

    def lists(x, y):
        splits = tf.concat([x["splits"], y["splits"][1:] + x["splits"][-1]], 0)
        return {"values": tf.concat([x["values"], y["values"]], 0), "splits": splits}

    def strings(x, y):
        moved = y["starts"] + tf.cast(tf.strings.length(x["blob"]), tf.int64)
        return {
            "blob": tf.strings.join([x["blob"], y["blob"]]),
            "starts": tf.concat([x["starts"], moved], 0),
            "lengths": tf.concat([x["lengths"], y["lengths"]], 0),
        }

    return {
        "values": {n: tf.concat([v, b["values"][n]], 0) for n, v in a["values"].items()},
        "present": {n: tf.concat([v, b["present"][n]], 0) for n, v in a["present"].items()},
        "lists": {n: lists(v, b["lists"][n]) for n, v in a["lists"].items()},
        "strings": {n: strings(v, b["strings"][n]) for n, v in a["strings"].items()},
    }


def _taken(rows: dict, start, stop) -> dict:
    """Rows [start, stop) (a list's values and splits moved to start at 0)."""

    def lists(part):
        splits = part["splits"][start : stop + 1]
        return {"values": part["values"][splits[0] : splits[-1]], "splits": splits - splits[0]}

    def strings(located):
        return {
            "blob": located["blob"],
            "starts": located["starts"][start:stop],
            "lengths": located["lengths"][start:stop],
        }

    return {
        "values": {n: v[start:stop] for n, v in rows["values"].items()},
        "present": {n: v[start:stop] for n, v in rows["present"].items()},
        "lists": {n: lists(v) for n, v in rows["lists"].items()},
        "strings": {n: strings(v) for n, v in rows["strings"].items()},
    }


def _compacted(rows: dict) -> dict:
    """`rows` with their strings' bytes in blobs of their own (rows carried to the next group
    keep no reference to their group's whole blob, which joining them would copy)."""

    def strings(located):
        made = _made(located)
        lengths = tf.cast(tf.strings.length(made), tf.int64)
        starts = tf.cumsum(lengths, exclusive=True)
        return {"blob": tf.strings.reduce_join(made), "starts": starts, "lengths": lengths}

    return {**rows, "strings": {n: strings(v) for n, v in rows["strings"].items()}}


def _reordered(rows: dict, count: tf.Tensor, mix: Callable[[tf.Tensor], tf.Tensor]) -> dict:
    """`rows` (`count` of them) reordered by `mix`, a permutation of a scalar's values; a list's
    rows are gathered by row at the positions `mix` gives (its values follow them)."""
    positions = mix(tf.range(count)) if rows["lists"] else None

    def lists(part):
        ragged = tf.gather(_ragged(part), positions)
        return {"values": ragged.values, "splits": ragged.row_splits}

    def places(located):
        return {**located, "starts": mix(located["starts"]), "lengths": mix(located["lengths"])}

    return {
        "values": {n: mix(v) for n, v in rows["values"].items()},
        "present": {n: mix(v) for n, v in rows["present"].items()},
        "lists": {n: lists(v) for n, v in rows["lists"].items()},
        "strings": {n: places(v) for n, v in rows["strings"].items()},
    }


def _runs_shuffled(rows: dict, count: tf.Tensor, run_rows: int, seed: Optional[int]) -> dict:
    """`rows` in runs of `run_rows` neighbours, the runs in a random order, record boundaries
    ignored; the rows past the last whole run stay last."""
    whole = count // run_rows * run_rows
    order = tf.random.shuffle(tf.range(count // run_rows), seed=seed)

    def mix(x):
        runs = tf.gather(tf.reshape(x[:whole], [-1, run_rows]), order)
        return tf.concat([tf.reshape(runs, [-1]), x[whole:]], 0)

    return _reordered(rows, count, mix)


def _empty(spec: dict) -> dict:
    """Rows of none, of a group's structure (`spec`: its element_spec)."""
    empty = tf.nest.map_structure(lambda s: tf.zeros([0], s.dtype), spec)
    for part in empty["lists"].values():
        part["splits"] = tf.zeros([1], tf.int64)
    for located in empty["strings"].values():
        located["blob"] = tf.constant(b"")
    return empty


def _as_batch(rows: dict) -> dict:
    """Rows as one batch (lists ragged)."""
    return {**rows, "lists": {n: _ragged(v) for n, v in rows["lists"].items()}}


def _cut(groups: tf.data.Dataset, batch_size: int, keep_last: bool) -> tf.data.Dataset:
    """Groups of rows → batches of exactly `batch_size` rows, cut across groups (the rows left
    after a group's whole batches carried to the next); the rows left at the end are a last,
    shorter batch with `keep_last`, or when no whole batch came (data smaller than a batch
    still trains). A group is joined to the rows carried before it only when there are some
    (a copy); batches are then slices of the rows."""
    spec = groups.element_spec
    tagged = groups.map(lambda rows: {"rows": rows, "last": tf.constant(False)})
    end = {"rows": _empty(spec), "last": tf.constant(True)}
    tagged = tagged.concatenate(tf.data.Dataset.from_tensors(end))

    def step(state, group):
        left, emitted = state
        # Nothing carried (a group of whole batches before it): the group's rows as they are.
        rows = tf.cond(_rows(left) > 0, lambda: _joined(left, group["rows"]), lambda: group["rows"])
        total = _rows(rows)
        whole = total // batch_size
        cut = whole * batch_size
        emitted += whole
        tail_end = tf.where(group["last"] & (keep_last or emitted == 0), total, cut)
        out = {"rows": rows, "whole": whole, "tail": _as_batch(_taken(rows, cut, tail_end))}
        return (_compacted(_taken(rows, tail_end, total)), emitted), out

    def batches_of(out):
        # Batch i is rows [i * batch_size, (i + 1) * batch_size): a slice, which shares the
        # rows' buffer where it starts on an aligned offset (from_tensor_slices would copy it).
        whole = tf.data.Dataset.range(out["whole"]).map(
            lambda i: _as_batch(_taken(out["rows"], i * batch_size, (i + 1) * batch_size))
        )
        tail = tf.data.Dataset.from_tensors(out["tail"]).filter(lambda t: _rows(t) > 0)
        return whole.concatenate(tail)

    initial = (_empty(spec), tf.constant(0, tf.int64))
    return tagged.scan(initial, step).flat_map(batches_of)


def _joined_splits(offsets: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
    """The row splits of a group's list column from each record's offsets (each starting at 0)
    and values per record: each record's offsets moved by the values before it, its first one
    dropped but the group's first (per record, not per row: no cumulative sum over rows)."""
    counts = tf.strings.length(offsets) // 8  # rows + 1 per record
    flat = _flat(offsets, tf.int64)
    before = tf.cumsum(tf.cast(values, tf.int64), exclusive=True)
    moved = flat + tf.repeat(before, counts)
    starts = tf.cumsum(counts, exclusive=True)
    keep = tf.tensor_scatter_nd_update(
        tf.ones_like(moved, tf.bool), starts[1:, None], tf.zeros_like(starts[1:], tf.bool)
    )
    return tf.boolean_mask(moved, keep)


def _located(blobs: tf.Tensor, ends: tf.Tensor, equal: bool) -> dict:
    """Where a group's strings of one column are: its records' bytes joined into one `blob`,
    and each string's `starts` and `lengths` there, from each record's int32 ends (the first 0;
    `equal`ly many per record: a group of full records' scalars)."""
    base = tf.cumsum(tf.cast(tf.strings.length(blobs), tf.int64), exclusive=True)
    blob = tf.strings.reduce_join(blobs)
    if equal:
        at = tf.cast(tf.io.decode_raw(ends, tf.int32, little_endian=True), tf.int64)
        at += base[:, None]
        starts, stops = tf.reshape(at[:, :-1], [-1]), tf.reshape(at[:, 1:], [-1])
        return {"blob": blob, "starts": starts, "lengths": stops - starts}
    counts = tf.strings.length(ends) // 4  # strings + 1 per record
    at = tf.cast(_flat(ends, tf.int32), tf.int64) + tf.repeat(base, counts)
    # a string starts at each end but a record's last
    last = tf.cumsum(counts) - 1
    starting = tf.tensor_scatter_nd_update(
        tf.ones_like(at, tf.bool), last[:, None], tf.zeros_like(last, tf.bool)
    )[:-1]
    starts = tf.boolean_mask(at[:-1], starting)
    return {"blob": blob, "starts": starts, "lengths": tf.boolean_mask(at[1:], starting) - starts}


def _made(located: dict) -> tf.Tensor:
    """The strings at `located`'s places."""
    return tf.strings.substr(located["blob"], located["starts"], located["lengths"])


def _held_values(slots, located: Optional[dict], rows: tf.Tensor) -> tf.Tensor:
    """A scalar's values at `rows`: from its slots, or its strings made from their places
    (`located`; only those rows' strings made)."""
    if located is None:
        return tf.gather(slots, rows)
    places = {k: v if k == "blob" else tf.gather(v, rows) for k, v in located.items()}
    return _made(places)


def _nested(values: tf.RaggedTensor, partitions: list) -> tf.RaggedTensor:
    """A ragged feature from its values feature's rows and its row-length partitions' rows."""
    if not partitions:
        return values
    nested = values.values
    for partition in reversed(partitions):
        nested = tf.RaggedTensor.from_row_lengths(nested, partition.values, validate=False)
    return tf.RaggedTensor.from_row_lengths(nested, partitions[0].row_lengths(), validate=False)


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
        default = tf.zeros([], rows.dtype)
    else:
        default = tf.reshape(tf.constant(default, entry.dtype), [-1])[0]
        if rows.dtype != entry.dtype:  # the integer form: a string default's fingerprint
            default = fingerprint_strings(default)
    with tf.control_dependencies([check]):
        dense = rows.to_tensor(default_value=default, shape=[None, size])
    return tf.reshape(dense, [-1] + dims)


# The reader branches with `tf.cond` and on Python values only: autograph's conversion of the
# functions these datasets trace (each traced with the status of the call that builds it) would
# only re-parse their source, seconds per pipeline.
@tf.autograph.experimental.do_not_convert
def batches(
    records: tf.data.Dataset,
    decoder: GroupDecoder,
    batch_size: int,
    training: bool,
    seed: Optional[int],
    ordered: bool,
    group_records: int = GROUP_RECORDS,
) -> tf.data.Dataset:
    """Columnar records → batches of exactly `batch_size` rows (an epoch's last may be shorter,
    and is dropped when `training`) of the spec's tensors in the decoder's form; mixed and
    shuffled when `training` (see the module docstring)."""

    def decode(serialized):
        rows = decoder.decode(serialized)
        return decoder.mixed(rows, seed) if training else rows

    groups = records.batch(group_records).map(
        decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered
    )
    cut = _cut(groups, batch_size, keep_last=not training)
    if training:
        buffer = max(2, BATCH_SHUFFLE_ROWS // batch_size)
        cut = cut.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    return cut.map(decoder.tensors, num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered)

"""Columnar batches: many rows in one TFRecord record, each feature's values together.

A record is one tf.Example of up to `batch_rows` rows cut into slices of `slice_rows` rows (the
last ones may be shorter). For each feature of the type mapping (values features and ragged
row-length partitions alike) and each slice s, it holds ``v<i>_<s>``, the feature's values over
the slice's rows in row order, and ``l<i>_<s>``, one bytes value: each row's value count (0 for
a null row) as uint8 for a scalar feature (0 or 1) or little-endian int32 for a list, read back
with one `decode_raw` instead of a varint per row. Row r of a slice is therefore exactly the list
the per-row record holds for that feature (a null, which the per-row record leaves without a
kind, has 0 values; so has an empty list, and the per-row parse gives both the same tensor).
Features are keyed by their index in the layout (``columnar.json``) so no column name, however
awkward, needs escaping.

Why slices: parsing slice s of several records in one `parse_example` call gives their rows
already concatenated, so a training batch mixes rows of several records with no copy beyond the
parse itself (see `tfx_tabular.training.columnar`).

A split's rows are staged as each read batch comes, while its pools (`pools.PooledColumns`,
which the per-row encoding has just read) are still in the CPU's caches: per kind, one compiled
pass writes each row's value count and the rows' values as their value lists hold them, noting
where each slice's part starts; the batch is then let go. A record is its frame and headers
laid out around the staged bytes, each piece's part of a (slice, feature) copied in whole.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator, Optional, Sequence

import numba
import numpy as np

from tfx_tabular.coders import intrinsics, tfrecord, wire
from tfx_tabular.coders.pools import PooledColumns
from tfx_tabular.source.mapping import Feature, Kind

LAYOUT_VERSION = 2
# Folder in an Examples artifact (beside the `Split-<name>` folders stock components read) that
# holds `columnar.json` and one `Split-<name>` folder of columnar records per split.
FOLDER = "columnar"
LAYOUT_FILE = "columnar.json"
DEFAULT_BATCH_ROWS = 8192
# Rows per slice of a record: a training batch of a multiple of it is read without a copy (see
# the module docstring); its rows come in runs of this many neighbours.
SLICE_ROWS = 512


def lengths_dtype(feature: Feature) -> str:
    """How a feature's row lengths are stored: uint8 for scalars (0 or 1 value), int32 for lists."""
    return "uint8" if feature.list_depth == 0 and feature.row_lengths_of is None else "int32"


def values_key(index: int, slice_index: int | str) -> str:
    """The key of feature `index`'s values in slice `slice_index` ("": the key's prefix, to
    which a reader appends slice indices it computes)."""
    return f"v{index}_{slice_index}"


def lengths_key(index: int, slice_index: int | str) -> str:
    """The key of feature `index`'s row lengths in slice `slice_index` ("": the prefix)."""
    return f"l{index}_{slice_index}"


@dataclasses.dataclass(frozen=True)
class ColumnarLayout:
    """What a columnar payload holds: `features` (name, kind, lengths dtype) in key order, rows
    per record and per slice, and rows per split. Readers refuse a `version` they do not know."""

    batch_rows: int
    features: tuple[tuple[str, int, str], ...]
    rows: dict
    slice_rows: int = SLICE_ROWS
    version: int = LAYOUT_VERSION

    @property
    def slices(self) -> int:
        """Slices in a full record."""
        return -(-self.batch_rows // self.slice_rows)

    def to_json(self) -> str:
        return json.dumps(
            {
                "layout_version": self.version,
                "batch_rows": self.batch_rows,
                "slice_rows": self.slice_rows,
                "features": [
                    {"name": n, "kind": Kind(k).name, "lengths": d} for n, k, d in self.features
                ],
                "rows": self.rows,
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str, source: str = "columnar.json") -> ColumnarLayout:
        data = json.loads(text)
        version = data.get("layout_version")
        if version != LAYOUT_VERSION:
            raise ValueError(
                f"{source}: columnar layout version {version!r} is not one this tfx-tabular "
                f"reads (it reads version {LAYOUT_VERSION}); convert again, or read the per-row "
                "Examples (input_fn(..., columnar_batches=False))"
            )
        features = tuple((f["name"], int(Kind[f["kind"]]), f["lengths"]) for f in data["features"])
        return cls(
            int(data["batch_rows"]), features, dict(data["rows"]), int(data["slice_rows"]), version
        )


def layout_of(
    features: Sequence[Feature], batch_rows: int, rows: dict, slice_rows: int = SLICE_ROWS
) -> ColumnarLayout:
    return ColumnarLayout(
        batch_rows,
        tuple((f.name, int(f.kind), lengths_dtype(f)) for f in features),
        rows,
        min(slice_rows, batch_rows),
    )


@numba.njit(cache=True, nogil=True)
def _stage_rows(kind, rows_of, items, ends, data, rows, row0, slice_rows, members, staged, pos):
    """Rows `rows` of a batch's features of `kind` (`members`: their indices in the layout and
    the batch alike), the first at row `row0` of a slice, into `staged` (lengths, sizes, starts,
    buf) from buf[pos] on: each row's value count into lengths[feature, row], then each feature's
    values as its value lists hold them, part by part (where each slice's values start and how
    many bytes they take into starts and sizes [part, feature]); returns where they end, or -1
    if buf has no room for a string."""
    lengths, sizes, starts, buf = staged
    firsts, list_positions, list_splits, valid = rows_of
    item_bytes = items.view(np.uint8)  # read for floats
    for f in members:
        first, at = firsts[f], list_positions[f]
        row, s, boundary = row0, 0, slice_rows
        starts[0, f] = pos
        for r in rows:
            if row == boundary:
                sizes[s, f] = pos - starts[s, f]
                s, boundary = s + 1, boundary + slice_rows
                starts[s, f] = pos
            # A scalar's row is its first slot plus r, a list's in the lists' splits; a null
            # has no values (a null scalar still owns a slot). Inline: a compiled helper taking
            # the arrays counted references at every call, several times this loop's work.
            if at < 0:
                start, n = first + r, 1 if valid[f, r] else 0
            else:
                start = list_splits[at, r]
                n = list_splits[at, r + 1] - start if valid[f, r] else 0
            lengths[f, row - row0] = n
            row += 1
            # The values as encoding._serialize writes them, inline for the same reason (and
            # held to wire's bytes by the same tests).
            if kind == Kind.FLOAT:  # packed fixed32
                for k in range(4 * n):
                    buf[pos + k] = item_bytes[4 * start + k]
                pos += 4 * n
            elif kind == Kind.INT:  # packed varints
                for k in range(start, start + n):
                    pos = wire.put_varint(buf, pos, items[k])
            else:  # strings: a tag and a length before each
                for k in range(start, start + n):
                    b0 = np.int64(items[k])
                    length = ends[k] - b0
                    if pos + 6 + length > len(buf):
                        return -1  # a dictionary's strings repeated past the room: more room
                    buf[pos] = wire.LIST_VALUE
                    pos = wire.put_varint(buf, pos + 1, length)
                    if length <= 8 and b0 + 8 <= len(data) and pos + 8 <= len(buf):
                        intrinsics.store_word(buf, pos, intrinsics.load_word(data, b0))
                    else:
                        for j in range(length):
                            buf[pos + j] = data[b0 + j]
                    pos += length
        sizes[s, f] = pos - starts[s, f]
    return pos


@numba.njit(cache=True, nogil=True)
def _place(data, starts, sizes, cursors, buf):
    """A staged piece's value bytes into a record: part (slice, feature) at that cursor into
    `buf`, moving the cursor on (a slice's next piece continues from there)."""
    for p in range(sizes.shape[0]):
        for f in range(sizes.shape[1]):
            n, start, at = sizes[p, f], starts[p, f], cursors[p, f]
            buf[at : at + n] = data[start : start + n]
            cursors[p, f] = at + n


@numba.njit(cache=True, nogil=True)
def _record_frame(headers, offsets, kinds, widths, payloads, lengths, slice_rows, tables):
    """A record's buffer with everything but the values: the TFRecord frame (its data CRC left
    to `_seal`), each value list's headers, and each (slice, feature)'s row-length bytes (uint8
    or little-endian int32, by `widths`); returns it and where each value list's values go."""
    slices, count = payloads.shape
    rows = lengths.shape[1]
    body = 0
    for s in range(slices):
        row_bytes = min(slice_rows, rows - s * slice_rows)
        for f in range(count):
            e = 2 * (s * count + f)
            body += wire.entry_bytes(offsets[e + 1] - offsets[e], kinds[f], payloads[s, f])
            nbytes = widths[f] * row_bytes
            lengths_payload = 1 + wire.varint_size(nbytes) + nbytes
            body += wire.entry_bytes(offsets[e + 2] - offsets[e + 1], Kind.BYTES, lengths_payload)
    total = tfrecord.FRAME_BYTES + 1 + wire.varint_size(body) + body
    buf = np.empty(total, dtype=np.uint8)
    pos = tfrecord.put_record_head(buf, 0, total - tfrecord.FRAME_BYTES, tables)
    pos = wire.put_field_head(buf, pos, wire.EXAMPLE_FEATURES, body)
    cursors = np.empty((slices, count), dtype=np.int64)
    for s in range(slices):
        first, stop = s * slice_rows, min(rows, (s + 1) * slice_rows)
        for f in range(count):
            e = 2 * (s * count + f)
            header = offsets[e + 1] - offsets[e]
            cursors[s, f] = wire.put_entry_head(
                buf, pos, headers, offsets[e], header, kinds[f], payloads[s, f]
            )
            pos = cursors[s, f] + payloads[s, f]
            nbytes = widths[f] * (stop - first)
            header = offsets[e + 2] - offsets[e + 1]
            lengths_payload = 1 + wire.varint_size(nbytes) + nbytes
            pos = wire.put_entry_head(
                buf, pos, headers, offsets[e + 1], header, Kind.BYTES, lengths_payload
            )
            pos = wire.put_field_head(buf, pos, wire.LIST_VALUE, nbytes)
            for r in range(first, stop):
                n = lengths[f, r]
                for k in range(widths[f]):
                    buf[pos + k] = np.uint8((n >> (8 * k)) & 0xFF)
                pos += widths[f]
    return buf, cursors


@numba.njit(cache=True, nogil=True)
def _seal(buf, tables):
    """The record's data CRC, once its values are written."""
    data_end = len(buf) - tfrecord.TAIL_BYTES
    tfrecord.put_masked_crc(buf, data_end, tfrecord.HEAD_BYTES, data_end, tables)


@dataclasses.dataclass
class StagedRows:
    """Rows of a read batch as a record will hold them, written while the batch is at hand:
    each feature's row lengths, and its values' bytes (as its value lists hold them) cut where
    slices end: part p of feature f, its values in the p-th slice the rows reach, is
    data[starts[p, f]:starts[p, f] + sizes[p, f]]."""

    lengths: np.ndarray  # [feature, row] int32
    sizes: np.ndarray  # [part, feature]
    starts: np.ndarray  # [part, feature]
    data: np.ndarray

    @property
    def rows(self) -> int:
        return self.lengths.shape[1]


class RecordEncoder:
    """Stages rows of read batches (`PooledColumns` of `features`) and writes records
    of them, in slices of `slice_rows` rows, as the module docstring says. A record's entries are
    ordered slice by slice, so a shorter record's keys are a prefix of a full one's."""

    def __init__(self, features: Sequence[Feature], batch_rows: int, slice_rows: int):
        self.slice_rows = slice_rows
        count = len(features)
        slices = -(-batch_rows // slice_rows)
        names = [
            key(i, s)
            for s in range(slices)
            for i in range(count)
            for key in (values_key, lengths_key)
        ]
        self._headers = wire.key_headers(names)
        self._kinds = np.array([int(f.kind) for f in features], np.int64)
        self._widths = np.array([1 if lengths_dtype(f) == "uint8" else 4 for f in features])
        self._members = {
            kind: np.array([i for i, f in enumerate(features) if f.kind == kind], np.int64)
            for kind in (Kind.INT, Kind.FLOAT, Kind.BYTES)
            if any(f.kind == kind for f in features)
        }

    def stage(self, batch: PooledColumns, rows: np.ndarray, offset: int) -> StagedRows:
        """Rows `rows` of `batch`, the first at row `offset` of a slice, staged: written in one
        pass into room for them (see `_room`), then shrunk to their size."""
        parts = (offset + len(rows) - 1) // self.slice_rows + 1
        sizes = np.empty((parts, len(self._kinds)), np.int64)
        starts = np.empty_like(sizes)
        lengths = np.empty((len(self._kinds), len(rows)), np.int32)
        room = np.empty(self._room(batch, len(rows)), np.uint8)
        pos = 0
        for kind, members, taken in self._taken(batch):
            staged = (lengths, sizes, starts, room)
            end = _stage_rows(kind, *taken, rows, offset, self.slice_rows, members, staged, pos)
            while end < 0:
                room = np.concatenate([room[:pos], np.empty(2 * len(room), np.uint8)])
                staged = (lengths, sizes, starts, room)
                end = _stage_rows(kind, *taken, rows, offset, self.slice_rows, members, staged, pos)
            pos = end
        room.resize(pos, refcheck=False)  # shrunk in place (realloc), not copied
        return StagedRows(lengths, sizes, starts, room)

    def _room(self, batch: PooledColumns, rows: int) -> int:
        """Room for `rows` rows of `batch` as value lists: a scalar's row holds at most one value,
        a list's rows at most its batch's values; an int64 takes at most 10 bytes, a string 6
        plus its bytes (every string byte of the batch, once: rows repeating a dictionary's
        strings can take more, and `stage` then makes more room)."""
        _, positions, list_splits, _ = batch.rows_of
        most = {Kind.BYTES: 6, Kind.INT: 10, Kind.FLOAT: 4}
        room = len(batch.pools[4])
        for kind, members in self._members.items():
            at = positions[members]
            listed = at[at >= 0]
            values = rows * int((at < 0).sum()) + int(
                (list_splits[listed, -1] - list_splits[listed, 0]).sum()
            )
            room += most[int(kind)] * values
        return room

    def encode(self, pieces: Sequence[StagedRows]) -> np.ndarray:
        """One framed TFRecord of the staged pieces' rows, in order (the first piece starting a
        slice)."""
        lengths = np.concatenate([piece.lengths for piece in pieces], axis=1)
        payloads = np.zeros((-(-lengths.shape[1] // self.slice_rows), len(self._kinds)), np.int64)
        first_slices = []
        row = 0
        for piece in pieces:
            first = row // self.slice_rows
            payloads[first : first + len(piece.sizes)] += piece.sizes
            first_slices.append(first)
            row += piece.rows
        buffer, offsets = self._headers
        buf, cursors = _record_frame(
            buffer,
            offsets,
            self._kinds,
            self._widths,
            payloads,
            lengths,
            self.slice_rows,
            tfrecord.CRC_TABLES,
        )
        for piece, first in zip(pieces, first_slices, strict=True):
            view = cursors[first : first + len(piece.sizes)]
            _place(piece.data, piece.starts, piece.sizes, view, buf)
        _seal(buf, tfrecord.CRC_TABLES)
        return buf

    def _taken(self, batch: PooledColumns):
        """Per kind: what the compiled pass reads of the batch."""
        ints, floats, string_starts, string_ends, data = batch.pools
        for kind, members in self._members.items():
            if kind == Kind.BYTES:
                yield int(kind), members, (batch.rows_of, string_starts, string_ends, data)
            else:
                items = ints if kind == Kind.INT else floats
                yield int(kind), members, (batch.rows_of, items, _NO_ENDS, _NO_DATA)


_NO_ENDS = np.zeros(0, np.int64)  # a numeric kind's string ends: none
_NO_DATA = np.zeros(0, np.uint8)


class RecordBuffer:
    """One split's rows waiting to become records of `batch_rows` rows, staged as they come
    (`RecordEncoder.stage`: a read batch is let go at once), a piece never crossing a record's
    end."""

    def __init__(self, features: Sequence[Feature], batch_rows: int, slice_rows: int = SLICE_ROWS):
        self._batch_rows = batch_rows
        self.encoder = RecordEncoder(features, batch_rows, min(slice_rows, batch_rows))
        self._pieces: list[StagedRows] = []
        self._rows = 0  # in the record being filled
        self.records = 0

    def add(self, batch: PooledColumns, rows: Optional[np.ndarray]) -> Iterator:
        """Adds rows `rows` (all when None) of `batch`; yields each record they complete."""
        rows = np.arange(batch.rows) if rows is None else rows
        while len(rows):
            taken, rows = (
                rows[: self._batch_rows - self._rows],
                rows[self._batch_rows - self._rows :],
            )
            offset = self._rows % self.encoder.slice_rows
            self._pieces.append(self.encoder.stage(batch, taken, offset))
            self._rows += len(taken)
            if self._rows == self._batch_rows:
                yield self._record()

    def flush(self) -> Iterator:
        """The last, shorter record, if rows are left."""
        if self._rows:
            yield self._record()

    def _record(self) -> np.ndarray:
        record = self.encoder.encode(self._pieces)
        self._pieces, self._rows = [], 0
        self.records += 1
        return record

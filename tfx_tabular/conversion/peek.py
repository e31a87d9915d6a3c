"""The first rows of a Parquet dataset or of an Examples split, as an Arrow table: what
`tfx-tabular head` shows. Reads only what it shows; loads neither TensorFlow nor Beam.
"""

from __future__ import annotations

import posixpath
import struct
from typing import Iterator, Optional

import pyarrow as pa
import pyarrow.fs as pafs

from tfx_tabular.source.dataset import open_dataset
from tfx_tabular.source.errors import InputError
from tfx_tabular.source.filesystems import resolve_filesystem
from tfx_tabular.source.reading import read_batches

SPLIT_PREFIX = "Split-"


def head_parquet(uri: str, rows: int) -> pa.Table:
    """The first `rows` rows of a Parquet dataset, partition columns included."""
    dataset = open_dataset(uri)
    taken, batches = 0, []
    for info in dataset.files:
        for batch in read_batches(dataset, info, range(len(info.row_group_rows)), rows):
            batches.append(batch.slice(0, rows - taken))
            taken += batches[-1].num_rows
            if taken >= rows:
                return pa.Table.from_batches(batches)
    return pa.Table.from_batches(batches) if batches else dataset.schema.empty_table()


def split_names(examples_uri: str) -> list[str]:
    filesystem, folder = resolve_filesystem(examples_uri)
    infos = filesystem.get_file_info(pafs.FileSelector(folder))
    return sorted(
        posixpath.basename(i.path)[len(SPLIT_PREFIX) :]
        for i in infos
        if i.type == pafs.FileType.Directory and posixpath.basename(i.path).startswith(SPLIT_PREFIX)
    )


def _records(filesystem: pafs.FileSystem, path: str) -> Iterator[bytes]:
    """The records of one TFRecord file (TFRecord framing; `.gz` files are gzip streams).
    Checksums are not verified: this is for looking, the Trainer's reader verifies them."""
    # Explicit, not pyarrow's default detection from the extension, which a second gzip reader
    # on top would decompress twice.
    compression = "gzip" if path.endswith(".gz") else None
    with filesystem.open_input_stream(path, compression=compression) as handle:
        while True:
            header = handle.read(12)
            if not header:
                return
            if len(header) < 12:
                raise InputError(f"{path}: truncated TFRecord header")
            (length,) = struct.unpack("<Q", header[:8])
            data = handle.read(length + 4)
            if len(data) < length + 4:
                raise InputError(f"{path}: truncated TFRecord record")
            yield data[:length]


def head_examples(
    examples_uri: str, rows: int, schema, split: Optional[str] = None
) -> tuple[str, pa.Table]:
    """(split, its first `rows` tf.Examples decoded with `schema` into Arrow columns)."""
    from tfx_bsl.coders import example_coder

    names = split_names(examples_uri)
    if not names:
        raise InputError(f"{examples_uri} holds no {SPLIT_PREFIX}* folders")
    split = split or ("train" if "train" in names else names[0])
    if split not in names:
        raise InputError(f"{examples_uri} has no split {split!r} (splits: {', '.join(names)})")
    filesystem, folder = resolve_filesystem(examples_uri)
    shards = sorted(
        i.path
        for i in filesystem.get_file_info(
            pafs.FileSelector(posixpath.join(folder, SPLIT_PREFIX + split))
        )
        if i.type == pafs.FileType.File
    )
    records = []
    for shard in shards:
        for record in _records(filesystem, shard):
            records.append(record)
            if len(records) >= rows:
                break
        if len(records) >= rows:
            break
    decoder = example_coder.ExamplesToRecordBatchDecoder(schema.SerializeToString())
    return split, pa.Table.from_batches([decoder.DecodeBatch(records)]) if records else pa.table({})

"""The per-row block shuffle's buffer is bounded in bytes: wide records get fewer blocks."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from tensorflow.python.framework import tensor_util  # noqa: E402
from tensorflow_metadata.proto.v0 import schema_pb2  # noqa: E402

from tfx_tabular.training import input_fn as module  # noqa: E402

WIDTH = 500  # floats per record: ~2 KiB serialized
SCHEMA = text_format.Parse(
    f"""
    feature {{ name: "x" type: FLOAT shape {{ dim {{ size: {WIDTH} }} }} }}
    feature {{ name: "label" type: INT shape {{ dim {{ size: 1 }} }} }}
    """,
    schema_pb2.Schema(),
)


def _shards(folder, compression: str) -> tuple[list[str], int]:
    example = tf.train.Example()
    example.features.feature["x"].float_list.value.extend([0.5] * WIDTH)
    example.features.feature["label"].int64_list.value.append(1)
    files = []
    for i in range(2):
        path = str(folder / f"part-{i}{'.gz' if compression else ''}")
        with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type=compression)) as w:
            for _ in range(40):
                w.write(example.SerializeToString())
        files.append(path)
    return files, example.ByteSize()


def _shuffle_buffers(dataset: tf.data.Dataset) -> list[int]:
    graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
    nodes = {n.name: n for n in graph.node}
    sizes = []
    for node in graph.node:
        if node.op.startswith("ShuffleDataset"):
            const = nodes[node.input[1].split(":")[0]]
            sizes.append(int(tensor_util.MakeNdarray(const.attr["value"].tensor)))
    return sorted(sizes)


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_the_block_shuffle_holds_at_most_its_bytes_of_records(tmp_path, monkeypatch, compression):
    files, record = _shards(tmp_path, compression)
    read = dict(batch_size=4, label_key="label", block_size=4, columnar_batches=False)
    # Without the bound: the files' shuffle (2) and the default 256 blocks.
    assert _shuffle_buffers(module.input_fn(files, SCHEMA, **read)) == [2, 256]
    monkeypatch.setattr(module, "BLOCK_SHUFFLE_BYTES", 10 * 4 * record)
    assert _shuffle_buffers(module.input_fn(files, SCHEMA, **read)) == [2, 10]
    monkeypatch.setattr(module, "BLOCK_SHUFFLE_BYTES", 1)
    assert _shuffle_buffers(module.input_fn(files, SCHEMA, **read)) == [2, 2]
    asked = module.input_fn(files, SCHEMA, block_shuffle_buffer=1, **read)
    assert _shuffle_buffers(asked) == [2]  # one block asked: no block shuffle
    assert _shuffle_buffers(module.input_fn(files, SCHEMA, training=False, **read)) == []

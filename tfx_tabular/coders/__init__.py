"""Coders: Arrow batches → serialized records, in compiled kernels (no TFX). `flatten` turns a
batch's columns into flat buffers by the type mapping of `tfx_tabular.source.mapping`; `pools`
lays them out as the writers read them; `encoding` writes per-row tf.Example records and
`columnar` records of many rows; both write the wire format of `wire`, framed as TFRecords by
`tfrecord`, with the LLVM operations of `intrinsics`. `fingerprint` computes FarmHash
Fingerprint64 of strings, as TensorFlow's string hashing does.
"""

__all__ = [
    "columnar",
    "encoding",
    "fingerprint",
    "flatten",
    "intrinsics",
    "pools",
    "tfrecord",
    "wire",
]

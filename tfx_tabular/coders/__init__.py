"""Coders: Arrow batches → serialized records, in compiled kernels. `encoding` writes per-row
tf.Example records (framed as TFRecords) by the type mapping of `tfx_tabular.source.mapping`.
"""

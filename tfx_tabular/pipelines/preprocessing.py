"""A default `preprocessing_fn` for stock TFX Transform, driven by the inputs' types:
vocabularies for categoricals (bytes), z-scores for numerics, the label passed through.

Replace it with your own: `create_pipeline(..., preprocessing_fn="my_project.prep:preprocessing_fn")`.
Nested lists (RaggedTensor inputs) are left out; write your own function to transform them.
"""

import re

import tensorflow as tf
import tensorflow_transform as tft


def preprocessing_fn(inputs, custom_config):
    label = custom_config.get("label")
    top_k = int(custom_config.get("vocabulary_size", 10_000))
    outputs = {}
    for index, (name, x) in enumerate(inputs.items()):
        if name == label:
            outputs[name] = x
        elif isinstance(x, tf.RaggedTensor):
            continue
        elif x.dtype == tf.string:
            outputs[name] = tft.compute_and_apply_vocabulary(
                x,
                top_k=top_k,
                num_oov_buckets=1,
                # A file name for any column name: "a b" and "a.b" must not share one.
                vocab_filename=f"f{index}_" + re.sub(r"[^A-Za-z0-9_]", "_", name)[:48],
            )
        else:
            outputs[name] = tft.scale_to_z_score(tf.cast(x, tf.float32))
    return outputs

"""The serving export: a SavedModel whose `serving_default` takes serialized tf.Examples."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.schemas.parsing import feature_spec
from tfx_tabular.training.input_fn import as_ragged
from tfx_tabular.training.task import Task


def export_serving_model(
    model: keras.Model,
    schema: schema_pb2.Schema,
    label: str,
    task: Task,
    export_dir: str,
    transform_output=None,
) -> None:
    """SavedModel whose `serving_default` takes serialized tf.Examples (`examples`), parsed with
    the schema's SERVING spec (label excluded), transformed by the Transform graph if any, and
    returns the task's outputs (`outputs`; multiclass: `scores` and `classes`)."""
    if transform_output is not None:
        raw_spec = {
            k: v
            for k, v in transform_output.raw_feature_spec().items()
            if k != label and k in feature_spec(schema, environment="SERVING")
        }
        tft_layer = transform_output.transform_features_layer()
    else:
        raw_spec = feature_spec(schema, environment="SERVING", exclude=(label,))
        tft_layer = None
    model.tft_layer = tft_layer  # tracked, so the Transform graph's assets are saved

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized):
        features = tf.io.parse_example(serialized, raw_spec)
        if tft_layer is not None:
            features = as_ragged(tft_layer(features))
        return task.serving_outputs(model(features))

    tf.saved_model.save(model, export_dir, signatures={"serving_default": serve})

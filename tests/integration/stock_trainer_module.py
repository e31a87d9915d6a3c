"""A module file for stock TFX Trainer (used by test_stock_trainer.py): TFX's own data accessor
(TFXIO) reads ParquetExampleGen's Examples with ParquetSchemaGen's Schema."""

import tensorflow as tf
import tf_keras as keras
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.trainer.fn_args_utils import FnArgs
from tfx.utils import io_utils
from tfx_bsl.public import tfxio


def run_fn(fn_args: FnArgs):
    schema = io_utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    dataset = fn_args.data_accessor.tf_dataset_factory(
        fn_args.train_files,
        tfxio.TensorFlowDatasetOptions(batch_size=32, label_key="label"),
        schema,
    )

    def dense(features, label):
        # TFXIO parsed every feature by our schema: nullable ones as SparseTensors, never-null
        # ones (shape [1]) dense. The toy model uses one dense feature.
        assert isinstance(features["I1"], tf.SparseTensor)
        return tf.cast(features["price"], tf.float32), tf.cast(label, tf.float32)

    model = keras.Sequential(
        [keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]
    )
    model.compile("adam", "binary_crossentropy")
    model.fit(dataset.map(dense), steps_per_epoch=fn_args.train_steps, epochs=1)
    model.save(fn_args.serving_model_dir, save_format="tf")

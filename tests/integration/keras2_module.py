"""A user module as TFX examples write them: `tf.keras`, a functional model over a dict of inputs
(under Keras 3 this fails with "`inputs` not connected to `outputs`" in TFX 1.16's stack)."""

import tensorflow as tf


def model_fn(schema, label):
    inputs = {name: tf.keras.Input(shape=(1,), name=name) for name in ("a", "b")}
    x = tf.keras.layers.Concatenate()(list(inputs.values()))
    model = tf.keras.Model(inputs=inputs, outputs=tf.keras.layers.Dense(1)(x))
    model.compile(optimizer="adam", loss="mse")
    return model


def keras_version() -> str:
    """Builds the model (Keras 3 would fail here) and says which Keras `tf.keras` is."""
    model_fn(None, None)
    return "2 (tf_keras)" if tf.keras.Model.__module__.startswith("tf_keras") else "3"

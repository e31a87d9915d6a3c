"""A user's model_fn whose predictions are NaN from the first step (test_non_finite): a loss
that diverges, whatever the data."""

import tensorflow as tf


def model_fn(schema, label):
    inputs = {"x": tf.keras.Input(shape=(1,), name="x")}
    output = tf.keras.layers.Dense(1)(inputs["x"])
    return tf.keras.Model(inputs, tf.keras.layers.Lambda(lambda y: y * float("nan"))(output))

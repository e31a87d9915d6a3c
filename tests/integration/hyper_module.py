"""A user's model_fn that declares hyperparameters and custom_config (test_trainer_component)."""

import tensorflow as tf


def model_fn(schema, label, hyperparameters, custom_config):
    inputs = {"price": tf.keras.Input(shape=(1,), name="price")}
    hidden = tf.keras.layers.Dense(hyperparameters["units"], name=custom_config["layer_name"])
    output = tf.keras.layers.Dense(1, activation="sigmoid")(hidden(inputs["price"]))
    return tf.keras.Model(inputs, output)

"""Named steps of the training loop that need no training run."""

import pytest

keras = pytest.importorskip("tf_keras")

from tfx_tabular.training import loop  # noqa: E402
from tfx_tabular.training.config import TrainingConfig  # noqa: E402


def test_mixed_precision_policy_is_restored_after_training_and_on_errors():
    assert keras.mixed_precision.global_policy().name == "float32"
    with loop._precision_policy(True):
        assert keras.mixed_precision.global_policy().name == "mixed_float16"
    assert keras.mixed_precision.global_policy().name == "float32"
    with pytest.raises(RuntimeError), loop._precision_policy(True):
        raise RuntimeError("a failing step")
    assert keras.mixed_precision.global_policy().name == "float32"


def test_a_batch_that_does_not_divide_over_the_replicas_fails_before_anything_is_built(tmp_path):
    class FourReplicas:
        num_replicas_in_sync = 4

    with pytest.raises(ValueError, match="batch_size 1022 is not a multiple of the 4 replicas"):
        loop.train(
            [],
            [],
            None,
            str(tmp_path),
            None,
            TrainingConfig(
                label="y",
                batch_size=1022,
                steps_per_epoch=1,
                epochs=1,
                learning_rate=1e-3,
                mixed_precision=False,
                strategy=FourReplicas(),
            ),
        )


def test_the_trainer_spec_parameters_build_the_training_config_by_name():
    from tfx_tabular.components.parameters import resolve
    from tfx_tabular.components.tabular_trainer import spec

    properties = {"epochs": 3, "label": "", "mixed_precision": 1, "model_fn": "pkg.module:fn"}
    params = resolve(properties, spec.PARAMETERS)
    config = TrainingConfig.from_parameters(params, steps_per_epoch=5, model_fn=None)
    defaults = {name: p.default for name, p in spec.PARAMETERS.items()}
    assert (config.batch_size, config.learning_rate) == (
        defaults["batch_size"],
        defaults["learning_rate"],
    )
    assert config.epochs == 3 and config.total_steps == 15
    assert config.label is None and config.mixed_precision is True and config.model_fn is None
    # The spec's model_fn is an import path: loading it is the caller's part.
    with pytest.raises(TypeError, match="model_fn must be a function"):
        TrainingConfig.from_parameters(params, steps_per_epoch=5)


def test_the_reference_model_takes_integers_unless_its_spec_is_read_per_row_for_its_width():
    from tfx_tabular.training.config import EXACT, INTEGERS

    def config(**kwargs):
        return TrainingConfig(batch_size=8, steps_per_epoch=1, epochs=1, learning_rate=1e-3,
                              mixed_precision=False, **kwargs)  # fmt: skip

    assert config().input_form_for(None) == INTEGERS
    assert config().input_form_for(None, columnar_width=False) == EXACT
    assert config(model_fn=lambda *a: None).input_form_for(None) == EXACT
    assert config().input_form_for(object()) == EXACT  # a Transform graph
    assert config(input_form=INTEGERS).input_form_for(None, columnar_width=False) == INTEGERS


def test_the_train_step_adds_the_models_regularization_losses_as_keras_fit_does():
    """A model_fn's kernel_regularizer counts in the loss the step minimises and reports: the
    step's loss is the batch's mean loss plus the model's losses, as `model.fit` would train."""
    import tensorflow as tf

    from tfx_tabular.training.task import REGRESSION, Task

    task = Task(REGRESSION)
    regularized = keras.layers.Dense(1, kernel_regularizer=keras.regularizers.L2(10.0))
    model = keras.Sequential([regularized])
    model.build([None, 2])
    regularized.kernel.assign([[1.0], [2.0]])
    trainable = loop._Trainable(
        model,
        keras.optimizers.SGD(0.0),  # the weights stay: the loss is checked before any update
        task.loss(),
        task.metrics(),
        tf.Variable(0, dtype=tf.int64),
        False,
    )
    strategy = tf.distribute.get_strategy()
    train_step, _ = loop._step_functions(strategy, trainable, 4)
    batch = (tf.zeros([4, 2]), tf.ones([4, 1]))
    loss, examples, _ = train_step(iter(tf.data.Dataset.from_tensors(batch).repeat()))
    # zero features: every prediction is the bias 0, a squared error of 1; L2: 10 · (1 + 4)
    assert int(examples) == 4
    assert float(loss) == pytest.approx(1.0 + 50.0)


def test_the_train_step_leaves_keras_unconverted_and_converts_a_subclassed_models_call():
    """Autograph calls Keras 2 (`tf_keras`) unconverted in the train step, as TensorFlow does for
    `keras` (converting it made every run's first step transpile hundreds of its functions),
    while a subclassed model's `call` is still converted: its `if` on a tensor traces as a
    `tf.cond`."""
    import tensorflow as tf
    from tensorflow.python.autograph.impl import conversion

    from tfx_tabular.training.task import REGRESSION, Task

    assert conversion.is_allowlisted(keras.layers.Dense(1).__call__)

    class Branching(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)

        def call(self, x, training=None):
            if tf.reduce_sum(x) > 0:  # a tensor: only autograph makes this a tf.cond
                return self.dense(x)
            return -self.dense(x)

    model = Branching()
    model(tf.ones([1, 2]))  # eagerly: `build` traces `call` without autograph
    task = Task(REGRESSION)
    trainable = loop._Trainable(
        model,
        keras.optimizers.SGD(0.1),
        task.loss(),
        task.metrics(),
        tf.Variable(0, tf.int64),
        False,
    )
    train_step, _ = loop._step_functions(tf.distribute.get_strategy(), trainable, 4)
    batch = (tf.ones([4, 2]), tf.ones([4, 1]))
    loss, examples, _ = train_step(iter(tf.data.Dataset.from_tensors(batch).repeat()))
    assert int(examples) == 4 and float(loss) >= 0

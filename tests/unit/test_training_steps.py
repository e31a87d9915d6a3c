"""Named steps of the training loop that need no training run."""

import pytest

keras = pytest.importorskip("tf_keras")

from tfx_tabular.training import loop  # noqa: E402


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
            label="y",
            batch_size=1022,
            steps_per_epoch=1,
            learning_rate=1e-3,
            strategy=FourReplicas(),
        )

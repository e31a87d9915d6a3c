"""A training process for the distribution and fault tests (run as a subprocess).

usage: python tests/train_worker.py EXAMPLES_DIR SCHEMA RUN_DIR MODEL_DIR STRATEGY STEPS_PER_EPOCH EPOCHS
STRATEGY: default | mirrored2 (MirroredStrategy over 2 logical CPUs) | multi_worker (TF_CONFIG)
Prints one line per epoch and, at the end, `total_steps=N replicas=R`.
"""

import glob
import os
import sys

import tensorflow as tf

examples, schema_path, run_dir, model_dir, kind, steps_per_epoch, epochs = sys.argv[1:8]
if kind == "mirrored2":
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()],
    )

from tfx_tabular import schemas  # noqa: E402  (after the device configuration)
from tfx_tabular.training import loop  # noqa: E402
from tfx_tabular.training import strategy as strategies  # noqa: E402
from tfx_tabular.training.config import TrainingConfig  # noqa: E402

strategy = strategies.choose_strategy(
    {"mirrored2": "mirrored", "multi_worker": "multi_worker"}.get(kind, "default")
)
result = loop.train(
    sorted(glob.glob(os.path.join(examples, "Split-train", "*"))),
    sorted(glob.glob(os.path.join(examples, "Split-eval", "*"))),
    schemas.load_schema(schema_path),
    run_dir,
    model_dir,
    TrainingConfig(
        label="label",
        # A multiple of 512 per replica: the columnar batches (see docs/trainer.md) are read.
        batch_size=1024,
        steps_per_epoch=int(steps_per_epoch),
        epochs=int(epochs),
        eval_steps=2,
        strategy=strategy,
        learning_rate=1e-3,
        mixed_precision=False,
        checkpoint_every=5,  # the kill test waits for a checkpoint inside the second epoch
    ),
    on_epoch=lambda s: print(
        f"epoch {s.epoch} steps {s.steps} wait {s.input_wait_fraction:.2f}", flush=True
    ),
)
print(f"total_steps={result.total_steps} replicas={strategy.num_replicas_in_sync}", flush=True)

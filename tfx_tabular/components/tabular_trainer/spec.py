"""TabularTrainer's parameters and their defaults, for component, executor, pipeline and CLI."""

from __future__ import annotations

from tfx_tabular.components.parameters import Parameter
from tfx_tabular.training.config import INPUT_FORMS
from tfx_tabular.training.task import TASKS

EXAMPLES = "examples"
SCHEMA = "schema"
TRANSFORM_GRAPH = "transform_graph"
BASE_MODEL = "base_model"
HYPERPARAMETERS = "hyperparameters"
MODEL = "model"
MODEL_RUN = "model_run"
DEFAULT_TRAIN_SPLIT = "train"
DEFAULT_EVAL_SPLIT = "eval"
# The figures of a run, written by the chief beside its ModelRun (a Vertex launcher reads it back).
RUN_SUMMARY_FILE = "run_summary.json"

PARAMETERS = {
    "epochs": Parameter(int, default=1, minimum=1, metavar="N", help="passes over the train split"),
    "batch_size": Parameter(
        int,
        default=1024,
        minimum=1,
        metavar="ROWS",
        help="the global training batch (it must divide evenly over the devices)",
    ),
    "label": Parameter(str, help="the label column the model learns"),
    "task": Parameter(
        str, choices=TASKS, help="the learning task (default: the one the label implies)"
    ),
    "model_fn": Parameter(
        str, metavar="MODULE:FUNCTION", help="package.module:function building the Keras model"
    ),
    "run_fn": Parameter(str, help="package.module:function, a stock Trainer run_fn(fn_args)"),
    "module_file": Parameter(str, help="a Python file defining model_fn, or run_fn"),
    "hyperparameter_values": Parameter(
        str,
        help="JSON values for model_fn / run_fn (the stock Tuner's artifact goes to "
        "`hyperparameters`)",
    ),
    "learning_rate": Parameter(
        float, default=1e-3, help="the learning rate (Adam's, unless model_fn compiles the model)"
    ),
    "cache": Parameter(
        str, help='cache the parsed batches after the first epoch: "memory" or a file path prefix'
    ),
    "data_service": Parameter(
        str,
        metavar="HOST:PORT",
        help="a tf.data service dispatcher whose input workers read and parse the train split "
        "(`tfx-tabular data-service`); default: the trainer reads it",
    ),
    "input_form": Parameter(
        str,
        choices=INPUT_FORMS,
        help="how the input hands features to the model: integers (no strings: each string's "
        "Fingerprint64, nullable scalars dense with a <name>.present mask; read from the "
        "columnar batches) or exact (tf.io.parse_example's tensors); default: integers for the "
        "reference model, exact for a model_fn, run_fn or Transform graph",
    ),
    "distribution": Parameter(
        str,
        default="auto",
        choices=("auto", "mirrored", "multi_worker", "default"),
        help="the tf.distribute strategy; auto: multi-worker from TF_CONFIG, mirrored over "
        "local GPUs, else one device",
    ),
    "gpu_memory_limit_mb": Parameter(int, minimum=1, help="each GPU's memory, at most"),
    "mixed_precision": Parameter(
        int, default=0, switch=True, help="train in mixed float16 precision"
    ),
    "custom_config": Parameter(
        str,
        help="stock Trainer's key and format (JSON): the user's dict, handed to model_fn / "
        "run_fn, plus the keys TFX's Vertex trainer executor reads (see vertex.py)",
    ),
}

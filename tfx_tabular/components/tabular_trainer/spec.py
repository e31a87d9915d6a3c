"""TabularTrainer's parameters and their defaults, for component, executor, pipeline and CLI."""

from __future__ import annotations

from tfx_tabular.components.parameters import Parameter

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
    "epochs": Parameter(int, default=1),
    "batch_size": Parameter(int, default=1024),
    "label": Parameter(str),
    # binary, multiclass or regression; unset: inferred from the label (training/task.py).
    "task": Parameter(str),
    "model_fn": Parameter(str),
    "run_fn": Parameter(str),
    "module_file": Parameter(str),
    # JSON values for model_fn / run_fn (the stock Tuner's artifact goes to `hyperparameters`).
    "hyperparameter_values": Parameter(str),
    "learning_rate": Parameter(float, default=1e-3),
    "cache": Parameter(str),
    "distribution": Parameter(str, default="auto"),
    "gpu_memory_limit_mb": Parameter(int),
    "mixed_precision": Parameter(int, default=0),
    # Stock Trainer's key and format (JSON): the user's dict, handed to model_fn / run_fn, plus
    # the keys TFX's Vertex trainer executor reads (see vertex.py).
    "custom_config": Parameter(str),
}

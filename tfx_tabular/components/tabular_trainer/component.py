"""TabularTrainer: trains on Examples with the Schema resolved through ML Metadata, outputs the
standard `Model` (a serving SavedModel taking serialized tf.Examples) and `ModelRun`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import trainer_pb2
from tfx.types import channel, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter
from tfx.utils import json_utils

from tfx_tabular.components.tabular_trainer import executor

if TYPE_CHECKING:  # imported when used: it loads the Vertex AI client libraries
    from tfx_tabular.components.tabular_trainer.vertex import VertexTraining


class TabularTrainerSpec(ComponentSpec):
    PARAMETERS = {
        "train_args": ExecutionParameter(type=trainer_pb2.TrainArgs),
        "eval_args": ExecutionParameter(type=trainer_pb2.EvalArgs),
        "epochs": ExecutionParameter(type=int, optional=True),
        "batch_size": ExecutionParameter(type=int, optional=True),
        "label": ExecutionParameter(type=str, optional=True),
        "model_fn": ExecutionParameter(type=str, optional=True),
        "module_file": ExecutionParameter(type=str, optional=True),
        "learning_rate": ExecutionParameter(type=float, optional=True),
        "cache": ExecutionParameter(type=str, optional=True),
        "distribution": ExecutionParameter(type=str, optional=True),
        "gpu_memory_limit_mb": ExecutionParameter(type=int, optional=True),
        "mixed_precision": ExecutionParameter(type=int, optional=True),
        # Stock Trainer's key and format: TFX's Vertex trainer executor reads it (see vertex.py).
        "custom_config": ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        "examples": ChannelParameter(type=standard_artifacts.Examples),
        "schema": ChannelParameter(type=standard_artifacts.Schema),
        "transform_graph": ChannelParameter(type=standard_artifacts.TransformGraph, optional=True),
    }
    OUTPUTS = {
        "model": ChannelParameter(type=standard_artifacts.Model),
        "model_run": ChannelParameter(type=standard_artifacts.ModelRun),
    }


class TabularTrainer(base_component.BaseComponent):
    """Trains a model on ParquetExampleGen's Examples with the tuned `tfx_tabular.input_fn`.

    Steps per epoch come from the row counts the Examples artifact records (no data pass);
    `train_args.num_steps`, when set, overrides `epochs`. The model comes from `model_fn`
    ("package.module:function", called as `function(schema, label)` and returning a Keras 2
    model), from `module_file` (a file defining `model_fn`), or else the reference model built from
    the schema. `distribution`: auto (multi-worker from TF_CONFIG, mirrored over local GPUs, else
    CPU), mirrored, multi_worker or default. `vertex_training` runs the training as a Vertex AI
    custom job (machine type, accelerators, replicas) that the pipeline task launches and awaits.
    """

    SPEC_CLASS = TabularTrainerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, examples: channel.BaseChannel, schema: channel.BaseChannel,
                 transform_graph: Optional[channel.BaseChannel] = None,
                 train_args: Optional[trainer_pb2.TrainArgs] = None,
                 eval_args: Optional[trainer_pb2.EvalArgs] = None, epochs: int = 1,
                 batch_size: int = 1024, label: Optional[str] = None,
                 model_fn: Optional[str] = None, module_file: Optional[str] = None,
                 learning_rate: float = 1e-3, cache: Optional[str] = None,
                 distribution: str = "auto", gpu_memory_limit_mb: Optional[int] = None,
                 mixed_precision: bool = False,
                 vertex_training: Optional[VertexTraining] = None):
        if model_fn and module_file:
            raise ValueError("give `model_fn` or `module_file`, not both")
        vertex_executor = None
        if vertex_training is not None:
            from tfx_tabular.components.tabular_trainer import vertex

            vertex_training.check_batch_size(batch_size)
            vertex_executor = executor_spec.ExecutorClassSpec(vertex.Executor)
        super().__init__(TabularTrainerSpec(
            examples=examples, schema=schema, transform_graph=transform_graph,
            train_args=train_args or trainer_pb2.TrainArgs(),
            eval_args=eval_args or trainer_pb2.EvalArgs(), epochs=epochs, batch_size=batch_size,
            label=label, model_fn=model_fn, module_file=module_file, learning_rate=learning_rate,
            cache=cache, distribution=distribution, gpu_memory_limit_mb=gpu_memory_limit_mb,
            mixed_precision=int(mixed_precision),
            custom_config=(json_utils.dumps(vertex_training.custom_config())
                           if vertex_training else None),
            model=channel.Channel(type=standard_artifacts.Model),
            model_run=channel.Channel(type=standard_artifacts.ModelRun)),
            custom_executor_spec=vertex_executor)

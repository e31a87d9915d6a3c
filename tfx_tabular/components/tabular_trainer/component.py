"""TabularTrainer: trains on Examples with the Schema resolved through ML Metadata, outputs the
standard `Model` (a serving SavedModel taking serialized tf.Examples) and `ModelRun`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import trainer_pb2
from tfx.types import channel, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter
from tfx.utils import json_utils

from tfx_tabular.components.parameters import execution_parameters
from tfx_tabular.components.tabular_trainer import executor, spec
from tfx_tabular.training.task import TASKS

if TYPE_CHECKING:  # imported when used: it loads the Vertex AI client libraries
    from tfx_tabular.components.tabular_trainer.vertex import VertexTraining


class TabularTrainerSpec(ComponentSpec):
    PARAMETERS = {
        "train_args": ExecutionParameter(type=trainer_pb2.TrainArgs),
        "eval_args": ExecutionParameter(type=trainer_pb2.EvalArgs),
        **execution_parameters(spec.PARAMETERS),
    }
    INPUTS = {
        spec.EXAMPLES: ChannelParameter(type=standard_artifacts.Examples),
        spec.SCHEMA: ChannelParameter(type=standard_artifacts.Schema),
        spec.TRANSFORM_GRAPH: ChannelParameter(
            type=standard_artifacts.TransformGraph, optional=True
        ),
        spec.BASE_MODEL: ChannelParameter(type=standard_artifacts.Model, optional=True),
        spec.HYPERPARAMETERS: ChannelParameter(
            type=standard_artifacts.HyperParameters, optional=True
        ),
    }
    OUTPUTS = {
        spec.MODEL: ChannelParameter(type=standard_artifacts.Model),
        spec.MODEL_RUN: ChannelParameter(type=standard_artifacts.ModelRun),
    }


class TabularTrainer(base_component.BaseComponent):
    """Trains a model on ParquetExampleGen's Examples with the tuned `tfx_tabular.input_fn`.

    Steps per epoch come from the row counts the Examples artifact records (no data pass);
    `train_args.num_steps`, when set, overrides `epochs`. `task` (binary, multiclass,
    regression; default: inferred from the label) picks the reference model's head, the loss and
    the metrics.

    The model comes from `model_fn` ("package.module:function", called as
    `function(schema, label, [task=, hyperparameters=, custom_config=])` and returning a Keras 2
    model; a compiled one keeps its optimizer, loss and metrics), from `module_file` (a file
    defining `model_fn`), or else the reference model built from the schema. A stock Trainer
    `run_fn(fn_args)` (`run_fn` as an import path, or a `module_file` defining `run_fn` and no
    `model_fn`) runs unchanged, its `data_accessor.tf_dataset_factory` served by our `input_fn`.
    `hyperparameters`: a dict, or the stock Tuner's `best_hyperparameters` channel.
    `base_model`: a previous Model whose weights start the training (a warm start).

    `distribution`: auto (multi-worker from TF_CONFIG, mirrored over local GPUs, else CPU),
    mirrored, multi_worker or default. `vertex_training` runs the training as a Vertex AI custom
    job (machine type, accelerators, replicas) that the pipeline task launches and awaits.
    """

    SPEC_CLASS = TabularTrainerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(
        self,
        examples: channel.BaseChannel,
        schema: channel.BaseChannel,
        transform_graph: Optional[channel.BaseChannel] = None,
        base_model: Optional[channel.BaseChannel] = None,
        hyperparameters: Union[dict, channel.BaseChannel, None] = None,
        train_args: Optional[trainer_pb2.TrainArgs] = None,
        eval_args: Optional[trainer_pb2.EvalArgs] = None,
        epochs: Optional[int] = None,
        batch_size: Optional[int] = None,
        label: Optional[str] = None,
        task: Optional[str] = None,
        model_fn: Optional[str] = None,
        run_fn: Optional[str] = None,
        module_file: Optional[str] = None,
        custom_config: Optional[dict] = None,
        learning_rate: Optional[float] = None,
        cache: Optional[str] = None,
        data_service: Optional[str] = None,
        input_form: Optional[str] = None,
        distribution: Optional[str] = None,
        gpu_memory_limit_mb: Optional[int] = None,
        mixed_precision: bool = False,
        vertex_training: Optional[VertexTraining] = None,
    ):
        """Parameters left None take their defaults from `spec.PARAMETERS`."""
        if sum(bool(code) for code in (model_fn, run_fn, module_file)) > 1:
            raise ValueError("give one of `model_fn`, `run_fn` and `module_file`")
        if task is not None and task not in TASKS:
            raise ValueError(f"task {task!r} is not one of {', '.join(TASKS)}")
        config = dict(custom_config or {})
        if vertex_training is not None:
            config.update(vertex_training.custom_config())
        tuned = hyperparameters if isinstance(hyperparameters, channel.BaseChannel) else None
        vertex_executor = None
        if vertex_training is not None:
            from tfx_tabular.components.tabular_trainer import vertex

            vertex_training.check_batch_size(batch_size or spec.PARAMETERS["batch_size"].default)
            vertex_executor = executor_spec.ExecutorClassSpec(vertex.Executor)
        super().__init__(
            TabularTrainerSpec(
                examples=examples,
                schema=schema,
                transform_graph=transform_graph,
                base_model=base_model,
                hyperparameters=tuned,
                hyperparameter_values=(
                    json_utils.dumps(hyperparameters) if isinstance(hyperparameters, dict) else None
                ),
                train_args=train_args or trainer_pb2.TrainArgs(),
                eval_args=eval_args or trainer_pb2.EvalArgs(),
                epochs=epochs,
                batch_size=batch_size,
                label=label,
                task=task,
                model_fn=model_fn,
                run_fn=run_fn,
                module_file=module_file,
                learning_rate=learning_rate,
                cache=cache,
                data_service=data_service,
                input_form=input_form,
                distribution=distribution,
                gpu_memory_limit_mb=gpu_memory_limit_mb,
                mixed_precision=int(mixed_precision),
                custom_config=json_utils.dumps(config) if config else None,
                model=channel.Channel(type=standard_artifacts.Model),
                model_run=channel.Channel(type=standard_artifacts.ModelRun),
            ),
            custom_executor_spec=vertex_executor,
        )

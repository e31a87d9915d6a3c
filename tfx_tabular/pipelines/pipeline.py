"""The tfx-tabular pipeline: ParquetExampleGen → ParquetSchemaGen → TabularTrainer, with optional
example statistics + stock ExampleValidator, Transform and Evaluator (their presence shows our
artifacts are standard TFX artifacts)."""

from __future__ import annotations

import os
from typing import Optional, Sequence, Union

DEFAULT_PREPROCESSING_FN = "tfx_tabular.pipelines.preprocessing.preprocessing_fn"
# with_example_statistics: "ours" (True) reads ParquetExampleGen's example statistics, computed
# while converting; "stock" adds stock StatisticsGen, a second pass over the Examples.
EXAMPLE_STATISTICS_SOURCES = ("ours", "stock")
# Old keyword → new: still accepted, with a DeprecationWarning, for one release.
RENAMED_PARAMETERS = {
    "with_statistics": "with_example_statistics",
    "schema_statistics": "sample_statistics",
}
# What the Evaluator computes for each task (TFMA metric or Keras metric class names).
EVALUATOR_METRICS = {
    "binary": ("ExampleCount", "AUC", "BinaryAccuracy"),
    "multiclass": ("ExampleCount", "SparseCategoricalAccuracy", "MultiClassConfusionMatrixPlot"),
    "regression": ("ExampleCount", "MeanSquaredError", "MeanAbsoluteError"),
}


def evaluator_task(
    data_root: str, label: str, task: Optional[str], curated_schema: Optional[str]
) -> str:
    """The task the Evaluator's metrics are for (TFMA fixes them when the pipeline is built):
    `task`, else the one the label has in a local data root's footers. A remote data root is not
    read here — compiling touches no cloud storage — so it needs `task`."""
    from tfx_tabular.schemas.source import schema_of
    from tfx_tabular.training.task import TASKS, kind_of

    if task:
        if task not in TASKS:
            raise ValueError(f"task {task!r} is not one of {', '.join(TASKS)}")
        return task
    if "://" in data_root:
        raise ValueError(
            f"the Evaluator's metrics follow the task, and the data root {data_root} is not "
            "read when a pipeline is built: pass task='binary', 'multiclass' or 'regression' "
            "(--task on the command line)"
        )
    try:
        schema = schema_of(data_root, label=label, curated=curated_schema, examples=False).schema
    except (OSError, ValueError) as error:
        raise ValueError(
            f"the Evaluator's metrics follow the task, and {data_root} could not be read to "
            f"infer it ({error}): pass task='binary', 'multiclass' or 'regression'"
        ) from error
    return kind_of(schema, label)


def create_pipeline(
    pipeline_name: str,
    pipeline_root: str,
    data_root: str,
    *,
    label: str = "label",
    task: Optional[str] = None,
    metadata_path: Optional[str] = None,
    split_by_partition: Optional[str] = None,
    eval_last_partitions: Optional[int] = None,
    curated_schema: Optional[str] = None,
    sample_statistics: Optional[bool] = None,
    epochs: Optional[int] = None,
    train_steps: Optional[int] = None,
    batch_size: Optional[int] = None,
    eval_steps: Optional[int] = None,
    model_fn: Optional[str] = None,
    with_example_statistics: Union[bool, str, None] = None,
    with_transform: bool = False,
    preprocessing_fn: str = DEFAULT_PREPROCESSING_FN,
    with_evaluator: bool = False,
    distribution: Optional[str] = None,
    beam_pipeline_args: Sequence[str] = (),
    enable_cache: bool = True,
    vertex_training=None,
    **deprecated,
):
    """A `tfx.dsl.Pipeline`. `metadata_path` (a SQLite file) is for local runs; compiled Kubeflow
    and Vertex pipelines use their platform's ML Metadata and leave it None. `vertex_training` (a
    `VertexTraining`) makes the Trainer task launch a Vertex AI custom training job. Parameters
    left None take the components' defaults (their `spec.py`). `task` (binary, multiclass,
    regression; default: the one the label implies) sets the Trainer's head and the Evaluator's
    metrics. `with_example_statistics` ("ours" or True, "stock") adds example statistics and
    stock ExampleValidator: "ours" has ParquetExampleGen compute them while converting and
    ParquetSchemaGen build a schema that holds on every split from them (unless
    `sample_statistics` asks for TFDV over a sample instead); "stock" runs stock StatisticsGen.
    `with_statistics` and `schema_statistics`, the old spellings of `with_example_statistics` and
    `sample_statistics`, still work for one release, with a DeprecationWarning."""
    from tfx import v1 as tfx

    from tfx_tabular.components import ParquetExampleGen, ParquetSchemaGen, TabularTrainer
    from tfx_tabular.components.deprecation import with_renamed

    renamed = with_renamed(
        "create_pipeline",
        {
            "with_example_statistics": with_example_statistics,
            "sample_statistics": sample_statistics,
        },
        deprecated,
        RENAMED_PARAMETERS,
    )
    with_example_statistics = renamed["with_example_statistics"]
    sample_statistics = renamed["sample_statistics"]
    source = "ours" if with_example_statistics is True else with_example_statistics or None
    if source is not None and source not in EXAMPLE_STATISTICS_SOURCES:
        raise ValueError(
            f"with_example_statistics must be True, False or one of "
            f"{EXAMPLE_STATISTICS_SOURCES}, not {with_example_statistics!r}"
        )
    example_gen = ParquetExampleGen(
        input_base=data_root,
        split_by_partition=split_by_partition,
        eval_last_partitions=eval_last_partitions,
        compute_example_statistics=source == "ours",  # nobody reads them otherwise
    )
    ours = example_gen.outputs["statistics"] if source == "ours" else None
    schema_gen = ParquetSchemaGen(
        examples=example_gen.outputs["examples"],
        statistics=None if sample_statistics else ours,
        label=label,
        curated_schema=curated_schema,
        sample_statistics=sample_statistics,
    )
    components = [example_gen, schema_gen]
    if source == "stock":
        stock = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
        components.append(stock)
    if source is not None:
        components.append(
            tfx.components.ExampleValidator(
                statistics=ours or stock.outputs["statistics"], schema=schema_gen.outputs["schema"]
            )
        )
    transform = None
    if with_transform:
        transform = tfx.components.Transform(
            examples=example_gen.outputs["examples"],
            schema=schema_gen.outputs["schema"],
            preprocessing_fn=preprocessing_fn,
            custom_config={"label": label},
            splits_config=tfx.proto.SplitsConfig(analyze=["train"], transform=[]),
        )
        components.append(transform)
    trainer = TabularTrainer(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        transform_graph=transform.outputs["transform_graph"] if transform else None,
        train_args=tfx.proto.TrainArgs(num_steps=train_steps or 0),
        eval_args=tfx.proto.EvalArgs(num_steps=eval_steps or 0),
        epochs=epochs,
        batch_size=batch_size,
        label=label,
        task=task,
        model_fn=model_fn,
        distribution=distribution,
        vertex_training=vertex_training,
    )
    components.append(trainer)
    if with_evaluator:
        import tensorflow_model_analysis as tfma

        eval_config = tfma.EvalConfig(
            model_specs=[tfma.ModelSpec(label_key=label, signature_name="serving_default")],
            slicing_specs=[tfma.SlicingSpec()],
            metrics_specs=[
                tfma.MetricsSpec(
                    metrics=[
                        tfma.MetricConfig(class_name=name)
                        for name in EVALUATOR_METRICS[
                            evaluator_task(data_root, label, task, curated_schema)
                        ]
                    ]
                )
            ],
        )
        components.append(
            tfx.components.Evaluator(
                examples=example_gen.outputs["examples"],
                model=trainer.outputs["model"],
                eval_config=eval_config,
            )
        )
    return tfx.dsl.Pipeline(
        pipeline_name=pipeline_name,
        pipeline_root=pipeline_root,
        components=components,
        enable_cache=enable_cache,
        beam_pipeline_args=list(beam_pipeline_args),
        metadata_connection_config=(
            tfx.orchestration.metadata.sqlite_metadata_connection_config(metadata_path)
            if metadata_path
            else None
        ),
    )


def local_metadata_path(pipeline_root: str) -> str:
    """Where local runs keep their SQLite ML Metadata store: inside the pipeline root."""
    return os.path.join(pipeline_root, "metadata.sqlite")

"""The tfx-tabular pipeline: ParquetExampleGen → ParquetSchemaGen → TabularTrainer, with optional
example statistics + stock ExampleValidator, Transform and Evaluator (their presence shows our
artifacts are standard TFX artifacts)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, List, Optional, Sequence, Union

from tfx_tabular.coders import columnar
from tfx_tabular.components.parameters import Parameter
from tfx_tabular.components.parquet_example_gen.spec import PARAMETERS as EXAMPLE_GEN
from tfx_tabular.components.parquet_schema_gen.spec import PARAMETERS as SCHEMA_GEN
from tfx_tabular.components.tabular_trainer.spec import PARAMETERS as TRAINER

DEFAULT_PREPROCESSING_FN = "tfx_tabular.pipelines.preprocessing.preprocessing_fn"
# with_example_statistics: "ours" (True) reads ParquetExampleGen's example statistics, computed
# while converting; "stock" adds stock StatisticsGen, a second pass over the Examples. Either adds
# stock ExampleValidator. Unset (None), ours are still computed and ParquetSchemaGen builds the
# schema from them (a string label's classes come from there); False turns them off.
EXAMPLE_STATISTICS_SOURCES = ("ours", "stock")
# create_pipeline's keyword options that take plain values, declared as the components' parameters
# are (the CLI's pipeline flags come from here); the components' own declarations where
# create_pipeline hands the value on unchanged.
PARAMETERS = {
    "label": dataclasses.replace(TRAINER["label"], default="label"),
    "columns": Parameter(
        List[str],
        metavar="COLUMN,...",
        help="convert and train on only these columns, the label among them (default: all)",
    ),
    "task": TRAINER["task"],
    "split_by_partition": EXAMPLE_GEN["split_by_partition"],
    "eval_last_partitions": EXAMPLE_GEN["eval_last_partitions"],
    "curated_schema": SCHEMA_GEN["curated_schema"],
    "sample_statistics": dataclasses.replace(
        SCHEMA_GEN["sample_statistics"],
        help="build the schema from sample statistics (TFDV over a sample), not from the "
        "example statistics",
    ),
    "epochs": TRAINER["epochs"],
    "train_steps": Parameter(
        int, minimum=1, metavar="STEPS", help="total training steps (overrides epochs)"
    ),
    "batch_size": TRAINER["batch_size"],
    "eval_steps": Parameter(
        int, minimum=1, metavar="STEPS", help="eval batches (default: the eval split once)"
    ),
    "model_fn": TRAINER["model_fn"],
    "with_example_statistics": Parameter(
        str,
        choices=EXAMPLE_STATISTICS_SOURCES,
        const="ours",
        help="add stock ExampleValidator on the example statistics: ours (the default; "
        "computed while converting) or stock (StatisticsGen, a second pass). Without it ours "
        "are still computed and the schema (a string label's classes) is built from them",
    ),
    "with_transform": Parameter(
        bool,
        default=False,
        switch=True,
        help="add stock Transform with the schema-driven preprocessing_fn",
    ),
    "preprocessing_fn": Parameter(
        str, default=DEFAULT_PREPROCESSING_FN, help="stock Transform's preprocessing_fn"
    ),
    "with_evaluator": Parameter(bool, default=False, switch=True, help="add stock Evaluator"),
    "distribution": TRAINER["distribution"],
    "data_service": TRAINER["data_service"],
    "input_form": TRAINER["input_form"],
    "columnar_batch_rows": dataclasses.replace(
        EXAMPLE_GEN["columnar_batch_rows"],
        default=columnar.DEFAULT_BATCH_ROWS,
        help="rows per columnar batch record ParquetExampleGen writes for TabularTrainer's "
        "input; 0: per-row Examples only, TabularTrainer then reads those",
    ),
    "enable_cache": Parameter(bool, default=True, switch=True, help="TFX's execution cache"),
}
# What the Evaluator computes for each task (TFMA metric or Keras metric class names).
EVALUATOR_METRICS = {
    "binary": ("ExampleCount", "AUC", "BinaryAccuracy"),
    "multiclass": ("ExampleCount", "SparseCategoricalAccuracy", "MultiClassConfusionMatrixPlot"),
    "regression": ("ExampleCount", "MeanSquaredError", "MeanAbsoluteError"),
}
# The Evaluator blesses a binary model whose AUC is at least chance's; the other tasks have no
# task-independent bar (chance accuracy depends on the classes), so their models are not validated.
EVALUATOR_THRESHOLDS = {"binary": {"AUC": 0.5}}


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
        schema = schema_of(
            data_root, label=label, curated_schema=curated_schema, examples=False
        ).schema
    except (OSError, ValueError) as error:
        raise ValueError(
            f"the Evaluator's metrics follow the task, and {data_root} could not be read to "
            f"infer it ({error}): pass task='binary', 'multiclass' or 'regression'"
        ) from error
    return kind_of(schema, label)


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """What `create_pipeline` builds, its keyword options in one object (see its docstring)."""

    pipeline_name: str
    pipeline_root: str
    data_root: str
    label: str = "label"
    columns: Optional[Sequence[str]] = None
    task: Optional[str] = None
    metadata_path: Optional[str] = None
    split_by_partition: Optional[str] = None
    eval_last_partitions: Optional[int] = None
    curated_schema: Optional[str] = None
    sample_statistics: Optional[bool] = None
    epochs: Optional[int] = None
    train_steps: Optional[int] = None
    batch_size: Optional[int] = None
    eval_steps: Optional[int] = None
    model_fn: Optional[str] = None
    with_example_statistics: Union[bool, str, None] = None
    with_transform: bool = False
    preprocessing_fn: str = DEFAULT_PREPROCESSING_FN
    with_evaluator: bool = False
    distribution: Optional[str] = None
    data_service: Optional[str] = None
    input_form: Optional[str] = None
    columnar_batch_rows: Optional[int] = None
    beam_pipeline_args: Sequence[str] = ()
    enable_cache: bool = True
    vertex_training: Any = None

    def __post_init__(self):
        if self.columns and self.label not in self.columns:
            raise ValueError(
                f"columns {list(self.columns)} leave out the label {self.label!r}: add it"
            )

    @property
    def example_statistics_source(self) -> Optional[str]:
        """Where the example statistics come from: "ours", "stock" or None (none). Unset, ours
        (for the schema, unless sample statistics replace them)."""
        source = self.with_example_statistics
        if source is None:
            return None if self.sample_statistics else "ours"
        source = "ours" if source is True else source or None
        if source is not None and source not in EXAMPLE_STATISTICS_SOURCES:
            raise ValueError(
                f"with_example_statistics must be True, False or one of "
                f"{EXAMPLE_STATISTICS_SOURCES}, not {self.with_example_statistics!r}"
            )
        return source

    @property
    def trainer_columnar_batch_rows(self) -> int:
        """ParquetExampleGen's columnar batch rows: on unless set to 0, since this pipeline's
        trainer, TabularTrainer, reads them."""
        from tfx_tabular.coders import columnar

        if self.columnar_batch_rows is None:
            return columnar.DEFAULT_BATCH_ROWS
        return self.columnar_batch_rows

    @property
    def trainer_columnar_strings(self) -> bool:
        """Whether ParquetExampleGen's columnar batches also hold the strings: when the Trainer
        reads exact strings (`input_form` "exact", or unset with a `model_fn` or Transform)."""
        if not self.trainer_columnar_batch_rows:
            return False
        if self.input_form is not None:
            from tfx_tabular.training.config import EXACT

            return self.input_form == EXACT
        return self.model_fn is not None or self.with_transform

    @property
    def validates_examples(self) -> bool:
        """Stock ExampleValidator runs only when example statistics were asked for."""
        return self.with_example_statistics not in (None, False)


def create_pipeline(
    pipeline_name: str,
    pipeline_root: str,
    data_root: str,
    *,
    label: str = "label",
    columns: Optional[Sequence[str]] = None,
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
    data_service: Optional[str] = None,
    input_form: Optional[str] = None,
    columnar_batch_rows: Optional[int] = None,
    beam_pipeline_args: Sequence[str] = (),
    enable_cache: bool = True,
    vertex_training=None,
):
    """A `tfx.dsl.Pipeline`. `metadata_path` (a SQLite file) is for local runs; compiled Kubeflow
    and Vertex pipelines use their platform's ML Metadata and leave it None. `vertex_training` (a
    `VertexTraining`) makes the Trainer task launch a Vertex AI custom training job. Parameters
    left None take the components' defaults (their `spec.py`). `columns` (default: all) are the
    columns ParquetExampleGen converts, the label among them, and so the features the model
    sees. `task` (binary, multiclass,
    regression; default: the one the label implies) sets the Trainer's head and the Evaluator's
    metrics (a binary model is blessed when its AUC is at least 0.5). ParquetExampleGen computes
    example statistics while converting, and ParquetSchemaGen builds a schema that holds on every
    split from them, a string label's classes included (unless `sample_statistics` asks for TFDV
    over a sample instead). `with_example_statistics` ("ours" or True, "stock") adds stock
    ExampleValidator on them; "stock" has stock StatisticsGen compute them instead, a second
    pass; False computes none (the schema is then the footers', and a string label needs
    `sample_statistics` or its classes in `curated_schema`). `columnar_batch_rows` (default
    `columnar.DEFAULT_BATCH_ROWS`, as TabularTrainer reads them; 0: per-row Examples only) sets
    ParquetExampleGen's columnar batch records; they hold the strings too when the Trainer reads
    them exactly (its input form is exact). `data_service` (a tf.data service
    dispatcher's HOST:PORT) has its input workers read the Trainer's train split. `input_form`
    ("integers" or "exact"; default: integers for the reference model, exact for `model_fn` or
    with Transform) is how the Trainer's input hands features to the model."""
    return build_pipeline(PipelineConfig(**locals()))


def build_pipeline(config: PipelineConfig):
    """The `tfx.dsl.Pipeline` of `config`: the data components, then Transform, the Trainer and
    the Evaluator as asked."""
    from tfx import v1 as tfx

    components = _data_components(config)
    example_gen, schema_gen = components[:2]
    transform = _transform(config, example_gen, schema_gen) if config.with_transform else None
    trainer = _trainer(config, example_gen, schema_gen, transform)
    components += [c for c in (transform, trainer) if c is not None]
    if config.with_evaluator:
        components.append(_evaluator(config, example_gen, trainer))
    return tfx.dsl.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.pipeline_root,
        components=components,
        enable_cache=config.enable_cache,
        beam_pipeline_args=list(config.beam_pipeline_args),
        metadata_connection_config=(
            tfx.orchestration.metadata.sqlite_metadata_connection_config(config.metadata_path)
            if config.metadata_path
            else None
        ),
    )


def _data_components(config: PipelineConfig) -> list:
    """ParquetExampleGen, ParquetSchemaGen (its schema built from the example statistics, unless
    sample statistics replace them) and, as asked, stock StatisticsGen ("stock") and
    ExampleValidator."""
    from tfx import v1 as tfx

    from tfx_tabular.components import ParquetExampleGen, ParquetSchemaGen
    from tfx_tabular.components.stock import without_local_packaging

    source = config.example_statistics_source
    example_gen = ParquetExampleGen(
        input_base=config.data_root,
        columns=list(config.columns) if config.columns else None,
        split_by_partition=config.split_by_partition,
        eval_last_partitions=config.eval_last_partitions,
        compute_example_statistics=source == "ours",  # nobody reads them otherwise
        columnar_batch_rows=config.trainer_columnar_batch_rows,
        columnar_strings=config.trainer_columnar_strings,
    )
    components = [example_gen]
    statistics = example_gen.outputs["statistics"] if source == "ours" else None
    if source == "stock":
        stock = without_local_packaging(
            tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
        )
        components.append(stock)
        statistics = stock.outputs["statistics"]
    schema_gen = ParquetSchemaGen(
        examples=example_gen.outputs["examples"],
        statistics=None if config.sample_statistics else statistics,
        label=config.label,
        curated_schema=config.curated_schema,
        sample_statistics=config.sample_statistics,
    )
    components.insert(1, schema_gen)
    if statistics is not None and config.validates_examples:
        components.append(
            tfx.components.ExampleValidator(
                statistics=statistics, schema=schema_gen.outputs["schema"]
            )
        )
    return components


def _transform(config: PipelineConfig, example_gen, schema_gen):
    from tfx import v1 as tfx

    from tfx_tabular.components.stock import without_local_packaging

    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn=config.preprocessing_fn,
        custom_config={"label": config.label},
        splits_config=tfx.proto.SplitsConfig(analyze=["train"], transform=[]),
    )
    return without_local_packaging(transform)


def _trainer(config: PipelineConfig, example_gen, schema_gen, transform):
    from tfx import v1 as tfx

    from tfx_tabular.components import TabularTrainer

    return TabularTrainer(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        transform_graph=transform.outputs["transform_graph"] if transform else None,
        train_args=tfx.proto.TrainArgs(num_steps=config.train_steps or 0),
        eval_args=tfx.proto.EvalArgs(num_steps=config.eval_steps or 0),
        epochs=config.epochs,
        batch_size=config.batch_size,
        label=config.label,
        task=config.task,
        model_fn=config.model_fn,
        distribution=config.distribution,
        data_service=config.data_service,
        input_form=config.input_form,
        vertex_training=config.vertex_training,
    )


def _metric(name: str, task: str):
    """A TFMA metric, with its lower bound where `EVALUATOR_THRESHOLDS` sets one."""
    import tensorflow_model_analysis as tfma

    bound = EVALUATOR_THRESHOLDS.get(task, {}).get(name)
    if bound is None:
        return tfma.MetricConfig(class_name=name)
    threshold = tfma.GenericValueThreshold(lower_bound={"value": bound})
    return tfma.MetricConfig(
        class_name=name, threshold=tfma.MetricThreshold(value_threshold=threshold)
    )


def _evaluator(config: PipelineConfig, example_gen, trainer):
    """Stock Evaluator with the metrics of the task (`evaluator_task`)."""
    import tensorflow_model_analysis as tfma
    from tfx import v1 as tfx

    from tfx_tabular.components.stock import without_local_packaging

    task = evaluator_task(config.data_root, config.label, config.task, config.curated_schema)
    eval_config = tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(label_key=config.label, signature_name="serving_default")],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[
            tfma.MetricsSpec(metrics=[_metric(name, task) for name in EVALUATOR_METRICS[task]])
        ],
    )
    evaluator = tfx.components.Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        eval_config=eval_config,
    )
    return without_local_packaging(evaluator)


def local_metadata_path(pipeline_root: str) -> str:
    """Where local runs keep their SQLite ML Metadata store: inside the pipeline root."""
    return os.path.join(pipeline_root, "metadata.sqlite")

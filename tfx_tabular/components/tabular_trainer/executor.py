"""TabularTrainer's executor: resolves artifacts and parameters into a `TrainingConfig`, then
trains with `training.loop.train` — or runs the user's stock-Trainer `run_fn` with our input
pipeline."""

from __future__ import annotations

import json
import logging
import math
import os
from typing import Any, Dict, List, Optional

import tensorflow as tf
from tfx.dsl.components.base import base_executor
from tfx.proto import trainer_pb2
from tfx.types import artifact_utils
from tfx.utils import json_utils, path_utils, proto_utils

from tfx_tabular import schemas
from tfx_tabular.components.parameters import resolve
from tfx_tabular.components.tabular_trainer import spec, user_code
from tfx_tabular.runners.progress import Progress
from tfx_tabular.training.config import TrainingConfig

log = logging.getLogger(__name__)


def row_counts(examples) -> Dict[str, int]:
    counts = examples.get_json_value_custom_property("row_counts")
    if not counts:
        raise ValueError(
            f"Examples {examples.uri} record no row_counts: they were not written by "
            "ParquetExampleGen, so steps per epoch cannot be known without a data pass "
            "(set train_args.num_steps)"
        )
    return {k: int(v) for k, v in counts.items()}


def split_files(examples, split: str) -> List[str]:
    """The split's shards; a split the Examples lack fails here, before any training."""
    names = artifact_utils.decode_split_names(examples.split_names or "[]")
    if split not in names:
        raise ValueError(
            f"Examples {examples.uri} have no split {split!r} (splits: {', '.join(names)}): "
            "name the splits to use in train_args.splits / eval_args.splits"
        )
    files = sorted(tf.io.gfile.glob(f"{artifact_utils.get_split_uri([examples], split)}/*"))
    if not files:
        raise ValueError(f"split {split!r} of Examples {examples.uri} has no files")
    return files


def record_run_summary(model_run, summary: Dict[str, Any]) -> None:
    """The run's figures as ModelRun custom properties (ints, floats, and JSON lists). A
    non-finite float (a loss that diverged) is recorded as its text, "nan" or "inf": ML
    Metadata's SQLite store writes a double into its SQL as text, where `nan` is not a value and
    fails the whole recording."""
    for name, value in summary.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            model_run.set_json_value_custom_property(name, value)
        elif isinstance(value, int):
            model_run.set_int_custom_property(name, value)
        elif not math.isfinite(value):
            log.warning("%s is %s: recorded on ModelRun as the string %r", name, value, str(value))
            model_run.set_string_custom_property(name, str(value))
        else:
            model_run.set_float_custom_property(name, value)


def _print_epoch(stats) -> None:
    print(
        f"epoch {stats.epoch}: {stats.steps} steps, loss {stats.loss:.4f}, "
        f"{stats.examples_per_second:,.0f} examples/s, "
        f"waiting on input: {stats.input_wait_fraction:.0%}",
        flush=True,
    )


def _run_summary(result, strategy, gpus: int, schema) -> Dict[str, Any]:
    last = result.epochs[-1] if result.epochs else None
    summary = {
        "total_steps": int(result.total_steps),
        "replicas": int(strategy.num_replicas_in_sync),
        "gpus": int(gpus),
        "parsed_features": sorted(schemas.feature_spec(schema)),
    }
    if last:
        summary.update(
            examples_per_second=float(last.examples_per_second),
            input_wait_fraction=float(last.input_wait_fraction),
        )
    if result.export_seconds is not None:
        summary["export_seconds"] = float(result.export_seconds)
    summary.update({f"eval_{name}": float(value) for name, value in result.eval_metrics.items()})
    return summary


def _base_model(input_dict: Dict[str, List]) -> Optional[str]:
    if not input_dict.get(spec.BASE_MODEL):
        return None
    base = artifact_utils.get_single_instance(input_dict[spec.BASE_MODEL])
    return path_utils.serving_model_path(base.uri, path_utils.is_old_model_artifact(base))


def _transform_output(input_dict: Dict[str, List]):
    if not input_dict.get(spec.TRANSFORM_GRAPH):
        return None
    import tensorflow_transform as tft

    return tft.TFTransformOutput(
        artifact_utils.get_single_instance(input_dict[spec.TRANSFORM_GRAPH]).uri
    )


def _steps_per_epoch(examples, split: str, batch_size: int) -> int:
    """Whole batches in the split's rows, at least one (a split smaller than a batch)."""
    return max(1, row_counts(examples)[split] // batch_size)


def _training_config(params, input_dict, exec_properties, hyperparameters, strategy):
    """The training stage's config: the spec's parameters named like its fields, and what is
    made of the others (the loaded model function, its arguments) and of the artifacts."""
    train_args, eval_args, (train_split, _) = _args(exec_properties)
    examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES])
    return TrainingConfig.from_parameters(
        params,
        steps_per_epoch=_steps_per_epoch(examples, train_split, params["batch_size"]),
        train_steps=train_args.num_steps or None,
        eval_steps=eval_args.num_steps or None,
        model_fn=user_code.load_model_fn(params["model_fn"], params["module_file"]),
        model_arguments={
            "hyperparameters": user_code.hyperparameter_values(hyperparameters),
            "custom_config": json_utils.loads(params["custom_config"] or "null"),
        },
        strategy=strategy,
    )


def _args(exec_properties: Dict[str, Any]):
    """TrainArgs, EvalArgs, and the (train, eval) split names."""
    train_args = proto_utils.json_to_proto(exec_properties["train_args"], trainer_pb2.TrainArgs())
    eval_args = proto_utils.json_to_proto(exec_properties["eval_args"], trainer_pb2.EvalArgs())
    splits = (
        (train_args.splits or [spec.DEFAULT_TRAIN_SPLIT])[0],
        (eval_args.splits or [spec.DEFAULT_EVAL_SPLIT])[0],
    )
    return train_args, eval_args, splits


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: Dict[str, List],
        output_dict: Dict[str, List],
        exec_properties: Dict[str, Any],
    ) -> None:
        from tfx_tabular.components.tabular_trainer import input_workers

        replica = input_workers.role()  # a Vertex job with input workers: this replica's part
        if replica is None:
            self._do(input_dict, output_dict, exec_properties)
            return
        input_workers.act(
            replica,
            artifact_utils.get_single_instance(output_dict[spec.MODEL_RUN]).uri,
            exec_properties.get("data_service"),
            lambda address: self._do(
                input_dict, output_dict, {**exec_properties, "data_service": address}
            ),
        )

    def _do(self, input_dict, output_dict, exec_properties) -> None:
        params = resolve(exec_properties, spec.PARAMETERS)
        examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES])
        train_args, _, splits = _args(exec_properties)
        files = {split: split_files(examples, split) for split in splits}
        hyperparameters = user_code.hyperparameters(
            input_dict, json.loads(params["hyperparameter_values"] or "null")
        )
        run_fn = user_code.load_run_fn(params["run_fn"], params["module_file"])
        if run_fn is None:
            self._train(input_dict, output_dict, exec_properties, params, files, hyperparameters)
            return
        # The stock Trainer needs train_args.num_steps; from the row counts, epochs work too.
        steps = None
        if not train_args.num_steps:
            steps = _steps_per_epoch(examples, splits[0], params["batch_size"]) * params["epochs"]
        run_fn(user_code.fn_args(input_dict, output_dict, exec_properties, hyperparameters, steps))

    def _train(
        self, input_dict, output_dict, exec_properties, params, files, hyperparameters
    ) -> None:
        from tfx_tabular.training import loop
        from tfx_tabular.training import strategy as strategies

        _, _, (train_split, eval_split) = _args(exec_properties)
        schema = schemas.load_schema(
            artifact_utils.get_single_instance(input_dict[spec.SCHEMA]).uri
        )
        gpus = strategies.configure_gpus(memory_limit_mb=params["gpu_memory_limit_mb"])
        strategy = strategies.choose_strategy(params["distribution"])
        service = params["data_service"]
        print(
            f"training with {strategies.strategy_name(strategy)}: "
            f"{strategy.num_replicas_in_sync} replica(s), {gpus} GPU(s) here"
            + (f"; train input through the tf.data service at {service}" if service else ""),
            flush=True,
        )
        config = _training_config(params, input_dict, exec_properties, hyperparameters, strategy)
        model = artifact_utils.get_single_instance(output_dict[spec.MODEL])
        model_run = artifact_utils.get_single_instance(output_dict[spec.MODEL_RUN])
        with Progress("training", config.total_steps, "steps") as progress:
            result = loop.train(
                files[train_split],
                files[eval_split],
                schema,
                model_run.uri,
                path_utils.serving_model_dir(model.uri),
                config,
                base_model=_base_model(input_dict),
                transform_output=_transform_output(input_dict),
                on_epoch=_print_epoch,
                on_progress=progress.update,
            )
        summary = _run_summary(result, strategy, gpus, schema)
        record_run_summary(model_run, summary)
        if strategies.is_chief(strategy):
            # A launcher running this executor elsewhere (a Vertex job) reads it back from here.
            with tf.io.gfile.GFile(
                os.path.join(model_run.uri, spec.RUN_SUMMARY_FILE), "w"
            ) as handle:
                handle.write(json.dumps(summary))

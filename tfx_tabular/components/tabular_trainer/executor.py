"""TabularTrainer's executor: resolves artifacts and parameters, then calls `training.loop.train`."""

from __future__ import annotations

import importlib
import json
import os
from typing import Any, Dict, List, Optional

import tensorflow as tf
from tfx.dsl.components.base import base_executor
from tfx.proto import trainer_pb2
from tfx.types import artifact_utils
from tfx.utils import import_utils, path_utils, proto_utils

from tfx_tabular import schemas
from tfx_tabular.components.parameters import resolve
from tfx_tabular.components.progress import Progress
from tfx_tabular.components.tabular_trainer import spec


def load_model_fn(model_fn: Optional[str], module_file: Optional[str]):
    """The user's model function: from an import path "pkg.module:function", or `model_fn` in a
    module file. Model code is only ever loaded from these two configured places."""
    if model_fn:
        module, _, name = model_fn.partition(":")
        if not name:
            raise ValueError(f"model_fn must look like 'package.module:function', not {model_fn!r}")
        return getattr(importlib.import_module(module), name)
    if module_file:
        return import_utils.import_func_from_source(module_file, "model_fn")
    return None


def row_counts(examples) -> Dict[str, int]:
    counts = examples.get_json_value_custom_property("row_counts")
    if not counts:
        raise ValueError(
            f"Examples {examples.uri} record no row_counts: they were not written by "
            "ParquetExampleGen, so steps per epoch cannot be known without a data pass"
        )
    return {k: int(v) for k, v in counts.items()}


def record_run_summary(model_run, summary: Dict[str, Any]) -> None:
    """The run's figures as ModelRun custom properties (ints, floats, and JSON lists)."""
    for name, value in summary.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            model_run.set_json_value_custom_property(name, value)
        elif isinstance(value, int):
            model_run.set_int_custom_property(name, value)
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
    summary.update({f"eval_{name}": float(value) for name, value in result.eval_metrics.items()})
    return summary


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: Dict[str, List],
        output_dict: Dict[str, List],
        exec_properties: Dict[str, Any],
    ) -> None:
        from tfx_tabular.training import loop
        from tfx_tabular.training import strategy as strategies

        params = resolve(exec_properties, spec.PARAMETERS)
        examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES])
        schema = schemas.load_schema(
            artifact_utils.get_single_instance(input_dict[spec.SCHEMA]).uri
        )
        transform_output = None
        if input_dict.get(spec.TRANSFORM_GRAPH):
            import tensorflow_transform as tft

            transform_output = tft.TFTransformOutput(
                artifact_utils.get_single_instance(input_dict[spec.TRANSFORM_GRAPH]).uri
            )
        train_args = proto_utils.json_to_proto(
            exec_properties["train_args"], trainer_pb2.TrainArgs()
        )
        eval_args = proto_utils.json_to_proto(exec_properties["eval_args"], trainer_pb2.EvalArgs())
        train_split = (train_args.splits or [spec.DEFAULT_TRAIN_SPLIT])[0]
        eval_split = (eval_args.splits or [spec.DEFAULT_EVAL_SPLIT])[0]

        counts = row_counts(examples)
        batch_size = params["batch_size"]
        steps_per_epoch = max(1, counts[train_split] // batch_size)
        files = {
            split: sorted(tf.io.gfile.glob(f"{artifact_utils.get_split_uri([examples], split)}/*"))
            for split in (train_split, eval_split)
        }

        gpus = strategies.configure_gpus(memory_limit_mb=params["gpu_memory_limit_mb"])
        strategy = strategies.choose_strategy(params["distribution"])
        print(
            f"training with {strategies.strategy_name(strategy)}: "
            f"{strategy.num_replicas_in_sync} replica(s), {gpus} GPU(s) here",
            flush=True,
        )
        model = artifact_utils.get_single_instance(output_dict[spec.MODEL])
        model_run = artifact_utils.get_single_instance(output_dict[spec.MODEL_RUN])
        total = train_args.num_steps or steps_per_epoch * params["epochs"]
        with Progress("training", total, "steps") as progress:
            result = loop.train(
                files[train_split],
                files[eval_split],
                schema,
                model_run.uri,
                path_utils.serving_model_dir(model.uri),
                label=params["label"] or None,
                model_fn=load_model_fn(params["model_fn"], params["module_file"]),
                batch_size=batch_size,
                steps_per_epoch=steps_per_epoch,
                epochs=params["epochs"],
                train_steps=train_args.num_steps or None,
                eval_steps=eval_args.num_steps or None,
                learning_rate=params["learning_rate"],
                cache=params["cache"] or None,
                strategy=strategy,
                mixed_precision=bool(params["mixed_precision"]),
                transform_output=transform_output,
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

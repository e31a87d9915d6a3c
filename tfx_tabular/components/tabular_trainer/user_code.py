"""The user's code, as TFX users already write it: a `model_fn` for our training loop, or a stock
Trainer `run_fn(fn_args)` whose `fn_args.data_accessor.tf_dataset_factory` is served by our
`input_fn`. Code is only ever loaded from the configured import path or module file."""

from __future__ import annotations

import importlib
import json
from typing import Any, Callable, Dict, List, Optional

import tensorflow as tf
from tfx.components.trainer import fn_args_utils
from tfx.types import artifact_utils
from tfx.utils import import_utils, io_utils, path_utils
from tfx_bsl.public.tfxio import TensorFlowDatasetOptions

from tfx_tabular import schemas
from tfx_tabular.components.tabular_trainer import spec
from tfx_tabular.training.input_fn import input_fn


def _import_path(path: str, what: str) -> Callable:
    """A function from an import path, "package.module:function"."""
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"{what} must look like 'package.module:function', not {path!r}")
    return getattr(importlib.import_module(module), name)


def _module_function(module_file: str, name: str) -> Optional[Callable]:
    try:
        return import_utils.import_func_from_source(module_file, name)
    except AttributeError:
        return None


def load_model_fn(model_fn: Optional[str], module_file: Optional[str]) -> Optional[Callable]:
    """The user's model function: from an import path, or `model_fn` in a module file (None:
    the module has none, or no code is configured)."""
    if model_fn:
        return _import_path(model_fn, "model_fn")
    if module_file:
        return _module_function(module_file, "model_fn")
    return None


def load_run_fn(run_fn: Optional[str], module_file: Optional[str]) -> Optional[Callable]:
    """A stock Trainer `run_fn`: from an import path, or from a module file without a
    `model_fn` (a module defining `model_fn` trains in our loop)."""
    if run_fn:
        return _import_path(run_fn, "run_fn")
    if module_file and _module_function(module_file, "model_fn") is None:
        found = _module_function(module_file, "run_fn")
        if found is None:
            raise ValueError(f"module_file {module_file} defines neither model_fn nor run_fn")
        return found
    return None


def hyperparameters(input_dict: Dict[str, List], values: Optional[dict]) -> Optional[dict]:
    """The stock Tuner's `best_hyperparameters` config (a keras_tuner HyperParameters config, as
    the stock Trainer hands it to `run_fn`), or the `hyperparameters` values given directly."""
    if input_dict.get(spec.HYPERPARAMETERS):
        uri = artifact_utils.get_single_uri(input_dict[spec.HYPERPARAMETERS])
        with tf.io.gfile.GFile(io_utils.get_only_uri_in_dir(uri)) as handle:
            return json.load(handle)
    return values


def hyperparameter_values(config: Optional[dict]) -> Optional[dict]:
    """Plain values for a `model_fn`: a HyperParameters config's `values`, or the dict itself."""
    if config is None:
        return None
    return dict(config["values"]) if isinstance(config.get("values"), dict) else dict(config)


def dataset_factory(default_schema, data_service: Optional[str] = None):
    """`DataAccessor.tf_dataset_factory` over our `input_fn`, with TFXIO's options: batches of
    `batch_size`, `(features, label)` with `label_key`, shuffled (blocks of records) when
    `shuffle`, repeated `num_epochs` times (None: forever); read by the tf.data service's workers
    when shuffled and `data_service` is set. Variable-length features come as SparseTensors, as
    TFXIO gives them, unless the schema declares them ragged."""

    def factory(file_pattern, options: TensorFlowDatasetOptions, schema=None) -> tf.data.Dataset:
        schema = schema or default_schema
        dataset = input_fn(
            file_pattern,
            schema,
            options.batch_size,
            options.label_key,
            training=options.shuffle,
            num_epochs=options.num_epochs,
            seed=options.shuffle_seed,
            sparse=True,
            data_service=data_service if options.shuffle else None,
        )
        if not options.shuffle and options.num_epochs != 1:
            return dataset.repeat(options.num_epochs)
        return dataset

    return factory


def fn_args(
    input_dict: Dict[str, List],
    output_dict: Dict[str, List],
    exec_properties: Dict[str, Any],
    hyperparameters_config: Optional[dict],
    default_train_steps: Optional[int],
) -> fn_args_utils.FnArgs:
    """The stock Trainer's FnArgs (TFX's own `get_common_fn_args`), with our dataset factory."""
    args = fn_args_utils.get_common_fn_args(input_dict, exec_properties)
    model_uri = artifact_utils.get_single_uri(output_dict[spec.MODEL])
    args.serving_model_dir = path_utils.serving_model_dir(model_uri)
    args.eval_model_dir = path_utils.eval_model_dir(model_uri)
    args.model_run_dir = artifact_utils.get_single_uri(output_dict[spec.MODEL_RUN])
    args.transform_output = args.transform_graph_path
    args.schema_file = args.schema_path
    args.hyperparameters = hyperparameters_config
    args.train_steps = args.train_steps or default_train_steps
    schema = schemas.load_schema(args.schema_path) if args.schema_path else None
    factory = dataset_factory(schema, exec_properties.get("data_service") or None)
    args.data_accessor = args.data_accessor._replace(tf_dataset_factory=factory)
    return args

"""The `tfx-tabular` command. Heavy imports (TensorFlow, Beam) happen inside the subcommands,
so `tfx-tabular --help` stays fast."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from typing import Optional, Sequence


def quiet(verbose: bool) -> None:
    """Silence TensorFlow / absl / Beam / google-api warning floods unless `verbose`."""
    if verbose:
        logging.basicConfig(level=logging.INFO)
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")  # Beam's worker processes inherit it
    warnings.filterwarnings("ignore")
    logging.basicConfig(level=logging.WARNING)
    for name in ("apache_beam", "absl", "tensorflow", "google", "tfx", "numba"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _pairs(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _csv(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def _add_conversion_arguments(p: argparse.ArgumentParser) -> None:
    from tfx_tabular.components.parquet_example_gen.spec import DEFAULT_SPLIT_BUCKETS, PARAMETERS

    buckets = ",".join(f"{name}={n}" for name, n in DEFAULT_SPLIT_BUCKETS.items())
    g = p.add_argument_group("input")
    g.add_argument("--columns", type=_csv, help="only these columns (comma-separated)")
    g.add_argument("--exclude", type=_csv, default=[], help="drop these columns")
    g.add_argument(
        "--partition-filter",
        type=_pairs,
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="keep files whose partition KEY is one of the values",
    )
    g.add_argument(
        "--partition-type",
        type=_pairs,
        action="append",
        default=[],
        metavar="KEY=int|string",
        help="override a partition value type",
    )
    g.add_argument(
        "--decimal-as", choices=["float", "bytes"], default=PARAMETERS["decimal_as"].default
    )
    g = p.add_argument_group(f"splits (default: hash buckets {buckets} over the whole row)")
    g.add_argument(
        "--split-buckets",
        type=_csv,
        metavar="NAME=N,...",
        help="hash buckets per split, e.g. train=9,eval=1",
    )
    g.add_argument("--split-keys", type=_csv, default=[], help="hash these columns, not the row")
    g.add_argument(
        "--split-by-partition",
        metavar="KEY",
        help="split by a partition value: the last --eval-last values → eval",
    )
    g.add_argument("--eval-last", type=int, default=PARAMETERS["eval_last_partitions"].default)
    g.add_argument(
        "--split-pattern",
        type=_pairs,
        action="append",
        default=[],
        metavar="NAME=GLOB",
        help="files matching GLOB (relative to INPUT) → split NAME",
    )
    g = p.add_argument_group("output")
    g.add_argument(
        "--compression", choices=["none", "gzip"], default=PARAMETERS["compression"].default
    )
    g.add_argument("--gzip-level", type=int, default=PARAMETERS["compression_level"].default)
    g.add_argument(
        "--num-shards",
        type=int,
        default=PARAMETERS["num_shards"].default,
        help="0: one per ~1M rows, at least 2",
    )
    g.add_argument(
        "--batch-size",
        type=int,
        default=PARAMETERS["batch_size"].default,
        help="rows per Arrow batch",
    )
    g.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="a Beam pipeline argument, e.g. --beam-arg=--direct_num_workers=2",
    )


def _add_pipeline_arguments(p: argparse.ArgumentParser) -> None:
    from tfx_tabular.components.tabular_trainer.spec import PARAMETERS

    p.add_argument("--pipeline-name", default="tfx-tabular")
    p.add_argument("--label", default="label")
    p.add_argument(
        "--split-by-partition",
        metavar="KEY",
        help="the last value of this partition key → eval (default: hash 2:1)",
    )
    p.add_argument("--curated-schema", help="a schema.pbtxt overlaid on the inferred schema")
    p.add_argument("--epochs", type=int, default=PARAMETERS["epochs"].default)
    p.add_argument("--train-steps", type=int, help="total training steps (overrides --epochs)")
    p.add_argument("--batch-size", type=int, default=PARAMETERS["batch_size"].default)
    p.add_argument("--model-fn", help="package.module:function building the Keras model")
    p.add_argument(
        "--with-statistics", action="store_true", help="add stock StatisticsGen + ExampleValidator"
    )
    p.add_argument(
        "--with-transform",
        action="store_true",
        help="add stock Transform with the schema-driven preprocessing_fn",
    )
    p.add_argument("--with-evaluator", action="store_true", help="add stock Evaluator")
    p.add_argument("--no-cache", action="store_true", help="disable TFX's execution cache")
    p.add_argument("--beam-arg", action="append", default=[], metavar="ARG")


def _convert(args, input_base: str, output_dir: str):
    from tfx_tabular.io import convert, plan

    dataset, splits = plan.plan_conversion(
        input_base,
        patterns=dict(args.split_pattern) or None,
        buckets={k: int(v) for k, v in map(_pairs, args.split_buckets or [])} or None,
        split_keys=args.split_keys,
        split_by_partition=args.split_by_partition,
        eval_last_partitions=args.eval_last,
        columns=args.columns,
        exclude_columns=args.exclude,
        partition_filter={k: _csv(v) for k, v in args.partition_filter},
        partition_types=dict(args.partition_type),
        decimal_as=args.decimal_as,
    )
    options = plan.OutputOptions(
        compression=args.compression,
        compression_level=args.gzip_level,
        num_shards=args.num_shards,
        batch_size=args.batch_size,
    )
    print(
        f"converting {dataset.num_rows:,} rows in {len(dataset.files)} files "
        f"({len(dataset.features)} features) → {output_dir}",
        flush=True,
    )
    result = convert.convert(dataset, output_dir, splits, options, args.beam_arg)
    for name, rows in result.rows.items():
        print(f"  Split-{name}: {rows:,} rows")
    print(
        f"  {sum(result.rows.values()):,} rows in {result.seconds:.1f} s = "
        f"{result.rows_per_second:,.0f} rows/s ({result.num_shards} shards, "
        f"compression {result.compression})"
    )
    return result


def cmd_convert(args) -> int:
    _convert(args, args.input, args.output_dir)
    return 0


def cmd_infer_schema(args) -> int:
    from tfx_tabular import schemas
    from tfx_tabular.schemas.source import schema_of

    start = time.perf_counter()
    inferred = schema_of(
        args.input,
        label=args.label,
        exclude_columns=args.exclude,
        statistics=args.stats,
        sample_rows=args.sample_rows,
        max_vocabulary=args.max_vocabulary,
        curated=args.curated,
        beam_pipeline_args=args.beam_arg,
    )
    source = (
        "the Examples artifact"
        if inferred.from_examples
        else f"{inferred.num_files} Parquet footers"
    )
    print(
        f"inferred {len(inferred.schema.feature)} features from {source} in "
        f"{time.perf_counter() - start:.2f} s (no pass over the "
        f"{inferred.metadata.num_rows:,} rows)"
    )
    if inferred.statistics is not None:
        print(
            f"statistics over {inferred.statistics.rows:,} sampled rows: "
            f"{inferred.statistics.seconds:.1f} s, {inferred.statistics.string_domains} string "
            "domains added"
        )
    schemas.write_schema(inferred.schema, args.output)
    print(f"schema written to {args.output}")
    return 0


def cmd_show_schema(args) -> int:
    from tfx_tabular import schemas

    print(schemas.describe(schemas.load_schema(args.file)))
    return 0


def _create_pipeline(
    args,
    data_root: str,
    pipeline_root: str,
    metadata_path: Optional[str] = None,
    vertex_training=None,
):
    from tfx_tabular.pipelines import create_pipeline

    return create_pipeline(
        args.pipeline_name,
        pipeline_root,
        data_root,
        label=args.label,
        metadata_path=metadata_path,
        split_by_partition=args.split_by_partition,
        curated_schema=args.curated_schema,
        epochs=args.epochs,
        train_steps=args.train_steps,
        batch_size=args.batch_size,
        with_statistics=args.with_statistics,
        with_transform=args.with_transform,
        with_evaluator=args.with_evaluator,
        model_fn=args.model_fn,
        beam_pipeline_args=args.beam_arg,
        enable_cache=not args.no_cache,
        vertex_training=vertex_training,
    )


def _run_pipeline(args, data_root: str, pipeline_root: str) -> int:
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

    from tfx_tabular.pipelines.pipeline import local_metadata_path
    from tfx_tabular.pipelines.run_report import print_run_report

    metadata_path = local_metadata_path(pipeline_root)
    pipeline = _create_pipeline(args, os.path.abspath(data_root), pipeline_root, metadata_path)
    start = time.perf_counter()
    print(
        f"running pipeline {args.pipeline_name!r} with TFX's BeamDagRunner "
        f"(ML Metadata: {metadata_path})",
        flush=True,
    )
    BeamDagRunner().run(pipeline)
    print(f"pipeline finished in {time.perf_counter() - start:.0f} s\n")
    print_run_report(metadata_path, args.pipeline_name)
    return 0


def cmd_run(args) -> int:
    return _run_pipeline(args, args.data_root, args.pipeline_root)


def cmd_demo(args) -> int:
    from tfx_tabular.io import demo_data

    data = os.path.join(args.workdir, "data")
    if not os.path.isdir(data):
        start = time.perf_counter()
        print(f"generating a Criteo-shaped dataset: {args.rows:,} rows → {data}", flush=True)
        demo_data.write_dataset(data, args.rows)
        print(f"  done in {time.perf_counter() - start:.1f} s")
    return _run_pipeline(args, data, os.path.abspath(os.path.join(args.workdir, "pipeline")))


def cmd_compile(args) -> int:
    from tfx_tabular.pipelines import kubeflow

    vertex_training, resources = (
        None,
        kubeflow.TrainerResources(
            gpus=args.gpus,
            gpu_type=args.gpu_type,
            cpu_limit=args.cpu_limit,
            memory_limit_gib=args.memory_limit,
        ),
    )
    job_flags = {
        "--training-job-region": args.training_job_region,
        "--training-job-machine-type": args.training_job_machine_type,
        "--training-job-replicas": args.training_job_replicas,
        "--training-job-service-account": args.training_job_service_account,
    }
    if not args.training_job_project and any(job_flags.values()):
        raise kubeflow.CompileError(
            f"{', '.join(f for f, v in job_flags.items() if v)} without --training-job-project"
        )
    if args.training_job_project:
        from tfx_tabular.components.tabular_trainer.vertex import VertexTraining

        if args.cpu_limit or args.memory_limit:
            raise kubeflow.CompileError(
                "--cpu-limit / --memory-limit size the Trainer task; with "
                "a training job, choose --training-job-machine-type"
            )
        try:
            vertex_training = VertexTraining(
                project=args.training_job_project,
                region=args.training_job_region,
                image=args.image,
                machine_type=args.training_job_machine_type or "n1-standard-8",
                accelerator_type=args.gpu_type,
                accelerator_count=args.gpus,
                replica_count=args.training_job_replicas or 1,
                service_account=args.training_job_service_account,
            )
        except ValueError as e:
            raise kubeflow.CompileError(f"Vertex AI training job: {e}") from None
        resources = kubeflow.TrainerResources()  # the job's machines train, not the task
    try:
        pipeline = _create_pipeline(
            args, args.data_root, args.pipeline_root, vertex_training=vertex_training
        )
    except ValueError as e:  # the components' own checks, e.g. the batch over the devices
        raise kubeflow.CompileError(str(e)) from None
    compiled = kubeflow.compile_pipeline(pipeline, args.target, args.image, args.output, resources)
    spec = compiled.get("pipelineSpec", compiled)
    print(
        f"wrote {args.output}: {args.target} pipeline {spec['pipelineInfo']['name']!r}, "
        f"{len(spec['root']['dag']['tasks'])} tasks on {args.image}, "
        f"schemaVersion {spec['schemaVersion']}"
    )
    return 0


def cmd_submit(args) -> int:
    import json

    from tfx_tabular.pipelines import kubeflow

    request = kubeflow.submit(
        args.compiled,
        args.project,
        args.region,
        pipeline_root=args.pipeline_root,
        service_account=args.service_account,
        enable_caching=False if args.no_cache else None,
        display_name=args.display_name,
        dry_run=args.dry_run,
    )
    if args.dry_run:
        print(json.dumps(request, indent=1, sort_keys=True))
    else:
        print(f"submitted {request['name']}")
    return 0


def cmd_run_compiled(args) -> int:
    from tfx_tabular.pipelines import compiled_runner

    compiled_runner.run_compiled(args.compiled, args.pipeline_root)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from tfx_tabular.components.parquet_schema_gen import spec as schema_gen

    parser = argparse.ArgumentParser(
        prog="tfx-tabular",
        description="Train TensorFlow models on partitioned Parquet larger than memory, in TFX.",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="show TensorFlow, absl and Beam logs and warnings"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "convert",
        help="Parquet → TFRecord tf.Example splits (ParquetExampleGen's "
        "Beam pipeline, outside TFX)",
    )
    p.add_argument("input", help="input folder or URI (hive partition folders allowed)")
    p.add_argument("output_dir", help="empty output folder or URI: Split-<name>/ folders go here")
    _add_conversion_arguments(p)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser(
        "infer-schema",
        help="a TFMD schema from Parquet footers (or a "
        "ParquetExampleGen output folder), no data pass",
    )
    p.add_argument("input", help="a Parquet folder, or a folder ParquetExampleGen wrote")
    p.add_argument("-o", "--output", required=True, help="schema.pbtxt to write")
    p.add_argument("--label", help="the label column (absent in the SERVING environment)")
    p.add_argument(
        "--stats",
        action="store_true",
        help="add vocabularies, value counts and presence from TFDV over a sample",
    )
    p.add_argument("--sample-rows", type=int, default=schema_gen.PARAMETERS["sample_rows"].default)
    p.add_argument(
        "--max-vocabulary", type=int, default=schema_gen.PARAMETERS["max_vocabulary_size"].default
    )
    p.add_argument("--curated", help="a schema.pbtxt whose features' settings win")
    p.add_argument("--exclude", type=_csv, default=[], help="drop these columns")
    p.add_argument("--beam-arg", action="append", default=[], metavar="ARG")
    p.set_defaults(func=cmd_infer_schema)

    p = sub.add_parser("show-schema", help="a schema.pbtxt as a readable table")
    p.add_argument("file", help="schema.pbtxt, or a Schema artifact folder")
    p.set_defaults(func=cmd_show_schema)

    p = sub.add_parser(
        "run",
        help="run the pipeline locally with TFX's BeamDagRunner "
        "(SQLite ML Metadata inside the pipeline root)",
    )
    p.add_argument("--data-root", required=True, help="the Parquet dataset (hive folders allowed)")
    p.add_argument("--pipeline-root", required=True)
    _add_pipeline_arguments(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "compile",
        help="compile the pipeline for Kubeflow Pipelines (PipelineSpec "
        "YAML) or Vertex AI (PipelineJob JSON)",
    )
    p.add_argument("--target", choices=["kubeflow", "vertex"], required=True)
    p.add_argument(
        "--data-root", required=True, help="the Parquet dataset URI, as the tasks see it"
    )
    p.add_argument("--pipeline-root", required=True, help="artifact root URI (e.g. gs://b/root)")
    p.add_argument("--image", required=True, help="the image every task runs (see Dockerfile)")
    p.add_argument(
        "-o", "--output", required=True, help="pipeline.yaml (kubeflow) or .json (vertex)"
    )
    g = p.add_argument_group("Trainer task resources")
    g.add_argument("--gpus", type=int, default=0, help="GPUs for the Trainer task")
    g.add_argument(
        "--gpu-type",
        help="kubeflow: a node resource name (default nvidia.com/gpu); "
        "vertex: an accelerator, e.g. NVIDIA_L4, NVIDIA_H100_80GB",
    )
    g.add_argument("--cpu-limit", type=float, default=0.0, help="vCPUs for the Trainer task")
    g.add_argument("--memory-limit", type=float, default=0.0, help="GiB for the Trainer task")
    g = p.add_argument_group(
        "Vertex AI training job",
        "train on a Vertex AI custom job instead of inside the Trainer "
        "task (either target); --gpus / --gpu-type (a Vertex accelerator name) then size each "
        "replica, and --image is the replicas' image",
    )
    g.add_argument(
        "--training-job-project",
        metavar="PROJECT",
        help="the Google Cloud project the job runs in (turns the job on)",
    )
    g.add_argument("--training-job-region", metavar="REGION", help="e.g. us-central1")
    g.add_argument("--training-job-machine-type", metavar="TYPE", help="default n1-standard-8")
    g.add_argument(
        "--training-job-replicas",
        type=int,
        metavar="N",
        help="> 1: multi-worker training, one chief and N-1 workers (TF_CONFIG); "
        "--batch-size must divide evenly over replicas × GPUs (default 1)",
    )
    g.add_argument("--training-job-service-account", metavar="SA")
    _add_pipeline_arguments(p)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("submit", help="submit a compiled pipeline to Vertex AI Pipelines")
    p.add_argument("compiled", help="pipeline.json or .yaml from `compile`")
    p.add_argument("--project", required=True)
    p.add_argument("--region", required=True)
    p.add_argument("--service-account")
    p.add_argument("--pipeline-root", help="override the compiled pipeline root")
    p.add_argument("--display-name")
    p.add_argument("--no-cache", action="store_true", help="disable Vertex's execution cache")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the CreatePipelineJob request; no network, no credentials",
    )
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser(
        "run-compiled",
        help="execute a compiled pipeline file locally, task by task, as the KFP v2 launcher would",
    )
    p.add_argument("compiled", help="pipeline.yaml or pipeline.json from `compile`")
    p.add_argument("--pipeline-root", required=True, help="local folder for the artifacts")
    p.set_defaults(func=cmd_run_compiled)

    p = sub.add_parser("demo", help="generate a Criteo-shaped demo dataset and run the pipeline")
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--workdir", default="out/demo")
    _add_pipeline_arguments(p)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    quiet(args.verbose)
    from tfx_tabular.io.parquet import InputError
    from tfx_tabular.pipelines.compiled_runner import RunError
    from tfx_tabular.pipelines.kubeflow import CompileError
    from tfx_tabular.schemas.infer import SchemaError

    try:
        return args.func(args)
    except (InputError, SchemaError, CompileError, RunError) as e:
        print(f"tfx-tabular: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

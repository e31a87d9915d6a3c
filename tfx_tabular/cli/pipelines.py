"""Pipeline commands: run and demo (TFX's BeamDagRunner, locally), compile (Kubeflow / Vertex),
submit, and run-compiled (a compiled file, task by task, locally)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import time
from typing import Optional

from tfx_tabular.cli.common import (
    BadInputError,
    UsageError,
    check_names,
    check_writable,
    key_values,
    non_negative_int,
    positive_int,
    say,
)
from tfx_tabular.cli.flags import add_parameter_flags, parameter_values

# create_pipeline's keyword options the pipeline commands' flags set (`pipeline.PARAMETERS`).
PIPELINE_FLAGS = (
    "label",
    "columns",
    "task",
    "split_by_partition",
    "eval_last_partitions",
    "curated_schema",
    "epochs",
    "train_steps",
    "batch_size",
    "model_fn",
    "data_service",
    "input_form",
    "columnar_batch_rows",
    "with_example_statistics",
    "with_transform",
    "with_evaluator",
    "enable_cache",
)


def _add_pipeline_arguments(p: argparse.ArgumentParser) -> None:
    from tfx_tabular.pipelines.pipeline import PARAMETERS

    p.add_argument(
        "--pipeline-name",
        default="tfx-tabular",
        help="the pipeline's name (its ML Metadata context, and the compiled pipeline's name)",
    )
    add_parameter_flags(p, PARAMETERS, PIPELINE_FLAGS)
    p.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="a Beam pipeline argument for the components (repeatable), e.g. "
        "--beam-arg=--direct_num_workers=2",
    )


def _create_pipeline(
    args,
    data_root: str,
    pipeline_root: str,
    metadata_path: Optional[str] = None,
    vertex_training=None,
):
    from tfx_tabular.pipelines import create_pipeline
    from tfx_tabular.pipelines.pipeline import PARAMETERS

    return create_pipeline(
        args.pipeline_name,
        pipeline_root,
        data_root,
        **parameter_values(args, PARAMETERS, PIPELINE_FLAGS),
        metadata_path=metadata_path,
        beam_pipeline_args=args.beam_arg,
        vertex_training=vertex_training,
    )


class _ComponentProgress(logging.Filter):
    """Which component runs, done of total, from TFX's BeamDagRunner log records ("node %s is
    running." / "... is finished."); other records pass only if they would have before."""

    def __init__(self, total: int, args, level: int):
        super().__init__()
        self._total, self._done, self._args, self._level = total, 0, args, level

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("node ") and message.endswith(" is running."):
            say(self._args, f"[{self._done + 1}/{self._total}] {message[5:-12]} running")
        elif message.startswith("node ") and message.endswith(" is finished."):
            self._done += 1
        return record.levelno >= self._level


@contextlib.contextmanager
def _component_progress(total: int, args):
    """Component progress lines while TFX runs. Without --verbose, a failing component's error
    ends the command in one line (`report_error`): the logs of that failure, a traceback each
    from TFX's launcher (absl) and from Beam, stay out."""
    absl, beam = logging.getLogger("absl"), logging.getLogger("apache_beam")
    levels = absl.level, beam.level
    shown = absl.getEffectiveLevel() if args.verbose else logging.CRITICAL
    watcher = _ComponentProgress(total, args, shown)
    absl.addFilter(watcher)
    absl.setLevel(min(absl.getEffectiveLevel(), logging.INFO))
    if not args.verbose:
        beam.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        absl.removeFilter(watcher)
        absl.setLevel(levels[0])
        beam.setLevel(levels[1])


def _run_pipeline(args, data_root: str, pipeline_root: str) -> dict:
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

    from tfx_tabular.pipelines.pipeline import local_metadata_path
    from tfx_tabular.pipelines.run_report import collect_run_report, format_run_report

    metadata_path = local_metadata_path(pipeline_root)
    pipeline = _create_pipeline(args, os.path.abspath(data_root), pipeline_root, metadata_path)
    start = time.perf_counter()
    say(
        args,
        f"running pipeline {args.pipeline_name!r} ({len(pipeline.components)} components) "
        f"with TFX's BeamDagRunner (ML Metadata: {metadata_path})",
    )
    with _component_progress(len(pipeline.components), args):
        BeamDagRunner().run(pipeline)
    seconds = time.perf_counter() - start
    say(args, f"pipeline finished in {seconds:.0f} s\n")
    report = collect_run_report(metadata_path)
    statistics = report["example_statistics"]
    if statistics:
        statistics["facets"] = _facets_page(statistics["uri"], pipeline_root)
    for line in format_run_report(report, args.pipeline_name):
        say(args, line)
    return {
        "pipeline_name": args.pipeline_name,
        "pipeline_root": pipeline_root,
        "metadata_path": metadata_path,
        "seconds": round(seconds, 1),
        **report,
    }


def _facets_page(statistics_uri: str, pipeline_root: str) -> str:
    """The run's example statistics as TFDV's Facets Overview page, in its pipeline root."""
    from tfx_tabular.cli.data import write_facets_page

    output = os.path.join(pipeline_root, "example_statistics.html")
    write_facets_page(statistics_uri, output)
    return output


def _check_label_kept(args) -> None:
    if args.columns and args.label not in args.columns:
        raise UsageError(
            f"--columns leaves out the label {args.label!r}: add it, or change --label"
        )


def _check_pipeline_inputs(args, data_root: str) -> None:
    """What the pipeline reads from the command line, checked before TFX loads: the columns
    --label and --split-by-partition name (the data root's footers), a --curated-schema that
    is a schema, a --data-service dispatcher that answers."""
    from tfx_tabular.cli.data import load_schema_file

    _check_label_kept(args)
    by_partition = [args.split_by_partition] if args.split_by_partition else []
    check_names(
        data_root,
        {"--label": [args.label], "--columns": args.columns or []},
        {"--split-by-partition": by_partition},
    )
    if args.curated_schema and "://" not in args.curated_schema:
        load_schema_file(args.curated_schema, "--curated-schema")
    if args.data_service:  # before converting, not once the trainer starts
        from tfx_tabular.training.data_service import DataServiceError, check_dispatcher

        try:
            check_dispatcher(args.data_service)
        except DataServiceError as error:
            raise DataServiceError(f"--data-service: {error}") from None


def cmd_run(args) -> dict:
    check_writable(args.pipeline_root, "--pipeline-root")
    _check_pipeline_inputs(args, args.data_root)
    return _run_pipeline(args, args.data_root, args.pipeline_root)


def cmd_demo(args) -> dict:
    from tfx_tabular.demo import criteo

    check_writable(args.workdir, "--workdir")
    data = os.path.join(args.workdir, "data")
    if not os.path.isdir(data):
        start = time.perf_counter()
        say(args, f"generating a Criteo-shaped dataset: {args.rows:,} rows → {data}")
        criteo.write_dataset(data, args.rows)
        say(args, f"  done in {time.perf_counter() - start:.1f} s")
    _check_pipeline_inputs(args, data)
    return _run_pipeline(args, data, os.path.abspath(os.path.join(args.workdir, "pipeline")))


def _vertex_training(args):
    """The Vertex AI training job the --training-job-* flags ask for, or None."""
    from tfx_tabular.pipelines.kubeflow import CompileError

    job_flags = {
        "--training-job-region": args.training_job_region,
        "--training-job-machine-type": args.training_job_machine_type,
        "--training-job-replicas": args.training_job_replicas,
        "--training-job-service-account": args.training_job_service_account,
        "--training-job-input-workers": args.training_job_input_workers,
        "--training-job-input-worker-machine-type": args.training_job_input_worker_machine_type,
    }
    if not args.training_job_project:
        if any(job_flags.values()):
            raise CompileError(
                f"{', '.join(f for f, v in job_flags.items() if v)} without --training-job-project"
            )
        return None
    from tfx_tabular.components.tabular_trainer.vertex import DEFAULT_MACHINE_TYPE, VertexTraining

    if args.cpu_limit or args.memory_limit:
        raise CompileError(
            "--cpu-limit / --memory-limit size the Trainer task; with a training "
            "job, choose --training-job-machine-type"
        )
    if args.training_job_input_worker_machine_type and not args.training_job_input_workers:
        raise CompileError(
            "--training-job-input-worker-machine-type without --training-job-input-workers"
        )
    if args.training_job_input_workers and args.data_service:
        raise CompileError(
            "--data-service names a dispatcher of yours, and --training-job-input-workers "
            "starts one on the job's chief: give one of them"
        )
    try:
        return VertexTraining(
            project=args.training_job_project,
            region=args.training_job_region,
            image=args.image,
            machine_type=args.training_job_machine_type or "n1-standard-8",
            accelerator_type=args.gpu_type,
            accelerator_count=args.gpus,
            replica_count=args.training_job_replicas or 1,
            service_account=args.training_job_service_account,
            input_worker_count=args.training_job_input_workers or 0,
            input_worker_machine_type=args.training_job_input_worker_machine_type
            or DEFAULT_MACHINE_TYPE,
        )
    except ValueError as e:
        raise CompileError(f"Vertex AI training job: {e}") from None


def _is_local_folder(uri: str) -> bool:
    return "://" not in uri and os.path.isdir(uri) and os.access(uri, os.R_OK | os.X_OK)


def cmd_compile(args) -> dict:
    from tfx_tabular.pipelines import kubeflow

    check_writable(args.output, "--output")
    _check_label_kept(args)
    vertex_training = _vertex_training(args)
    # The tasks read the data root, not this machine: it is checked only where it is here too.
    if _is_local_folder(args.data_root):
        _check_pipeline_inputs(args, args.data_root)
    # With a training job, the job's machines train, not the task.
    resources = (
        kubeflow.TrainerResources()
        if vertex_training
        else kubeflow.TrainerResources(
            gpus=args.gpus,
            gpu_type=args.gpu_type,
            cpu_limit=args.cpu_limit,
            memory_limit_gib=args.memory_limit,
        )
    )
    try:
        pipeline = _create_pipeline(
            args, args.data_root, args.pipeline_root, vertex_training=vertex_training
        )
    except ValueError as e:  # the components' own checks, e.g. the batch over the devices
        raise kubeflow.CompileError(str(e)) from None
    download_volume = None
    if args.download_volume_size:
        download_volume = kubeflow.DownloadVolume(
            args.download_volume_size, args.download_volume_storage_class
        )
    elif args.download_volume_storage_class:
        raise kubeflow.CompileError(
            "--download-volume-storage-class without --download-volume-size"
        )
    compiled = kubeflow.compile_pipeline(
        pipeline, args.target, args.image, args.output, resources, download_volume
    )
    spec = compiled.get("pipelineSpec", compiled)
    document = {
        "output": args.output,
        "target": args.target,
        "image": args.image,
        "pipeline_name": spec["pipelineInfo"]["name"],
        "tasks": sorted(spec["root"]["dag"]["tasks"]),
        "schema_version": spec["schemaVersion"],
        "parameters": {
            name: definition.get("defaultValue")
            for name, definition in spec["root"]
            .get("inputDefinitions", {})
            .get("parameters", {})
            .items()
        },
    }
    say(
        args,
        f"wrote {args.output}: {args.target} pipeline {document['pipeline_name']!r}, "
        f"{len(document['tasks'])} tasks on {args.image}, schemaVersion "
        f"{document['schema_version']}",
    )
    shown = {k: '""' if v == "" else v for k, v in document["parameters"].items()}
    parameters = ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
    say(args, f"pipeline parameters (set them with --param at run time): {parameters}")
    return document


COMPILED_FILE = "give the pipeline.yaml or pipeline.json that `tfx-tabular compile` wrote"


def _check_compiled_file(path: str) -> None:
    """A compiled file that is missing, unreadable or not a compiled pipeline is bad input
    (exit code 1), found before anything runs or is sent."""
    from tfx_tabular.pipelines import compiled_runner

    if "://" not in path and not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist")
    try:
        compiled_runner.load_compiled(path)
    except compiled_runner.RunError as e:
        raise BadInputError(str(e), hint=COMPILED_FILE) from None


def _check_region(region: str) -> None:
    """A Vertex AI region aiplatform knows, or a usage error naming the closest ones (rather than
    aiplatform's own message, which lists every region)."""
    import difflib

    from google.cloud.aiplatform import utils
    from google.cloud.aiplatform.constants import base

    try:
        utils.validate_region(region)
        return
    except ValueError:
        known = sorted(base.SUPPORTED_REGIONS | base.MREP_JURISDICTIONS)
        near = difflib.get_close_matches(region.lower(), known, n=3, cutoff=0.5)
    guess = f"; did you mean {' or '.join(near)}?" if near else ""
    raise UsageError(
        f"--region {region!r} is not a Vertex AI region{guess}",
        hint="the regions: https://cloud.google.com/vertex-ai/docs/general/locations "
        "(google.cloud.aiplatform.constants.base.SUPPORTED_REGIONS)",
    )


def cmd_submit(args) -> dict:
    from tfx_tabular.pipelines import submit

    _check_compiled_file(args.compiled)
    if args.target == "vertex" and args.region:
        _check_region(args.region)
    submission = submit.Submission(
        compiled_path=args.compiled,
        parameters=key_values(args.param, "--param"),
        labels=key_values(args.labels, "--labels"),
        service_account=args.service_account,
        enable_caching=args.enable_caching,
        experiment=args.experiment,
        display_name=args.display_name,
        pipeline_root=args.pipeline_root,
    )
    with parameter_errors_are_usage_errors():
        if args.target == "kubeflow":
            if args.project or args.region:
                raise UsageError("--project / --region are for --target vertex; give --host")
            document = submit.submit_kubeflow(
                submission, args.host, dry_run=args.dry_run, wait=args.wait
            )
        else:
            if args.host or not (args.project and args.region):
                raise UsageError("--target vertex takes --project and --region, not --host")
            document = submit.submit_vertex(
                submission, args.project, args.region, dry_run=args.dry_run, wait=args.wait
            )
    if args.dry_run and not args.json:
        print(json.dumps(document, indent=1, sort_keys=True))
    elif not args.dry_run:
        run = document.get("name") or document.get("run_id")
        say(args, f"submitted {run}" + (f": {document['state']}" if "state" in document else ""))
    return document


@contextlib.contextmanager
def parameter_errors_are_usage_errors():
    """A pipeline parameter or a submit option the platform refuses: exit code 2."""
    from tfx_tabular.pipelines.compiled_runner import ParameterError
    from tfx_tabular.pipelines.submit import SubmitError

    try:
        yield
    except ParameterError as e:
        raise UsageError(f"--param: {e}") from None
    except SubmitError as e:
        raise UsageError(str(e)) from None


def cmd_run_compiled(args) -> dict:
    from tfx_tabular.pipelines import compiled_runner

    parameters = key_values(args.param, "--param")
    _check_compiled_file(args.compiled)
    check_writable(args.pipeline_root, "--pipeline-root")
    with parameter_errors_are_usage_errors():
        return compiled_runner.run_compiled(
            args.compiled, args.pipeline_root, parameters, launcher=args.launcher
        )


def _add_param_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="set a pipeline parameter (repeatable): data_root, epochs, batch_size, "
        "learning_rate; default: the compiled value",
    )


def add_commands(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        parents=[common],
        name="run",
        help="run the pipeline locally with TFX's BeamDagRunner "
        "(SQLite ML Metadata inside the pipeline root)",
    )
    p.add_argument("--data-root", required=True, help="the Parquet dataset (hive folders allowed)")
    p.add_argument(
        "--pipeline-root",
        required=True,
        help="the folder for the run's artifacts and its ML Metadata (metadata.sqlite)",
    )
    _add_pipeline_arguments(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        parents=[common],
        name="compile",
        help="compile the pipeline for Kubeflow Pipelines (PipelineSpec "
        "YAML) or Vertex AI (PipelineJob JSON)",
    )
    p.add_argument(
        "--target",
        choices=["kubeflow", "vertex"],
        required=True,
        help="kubeflow: a KFP v2 PipelineSpec YAML; vertex: a Vertex AI PipelineJob JSON",
    )
    p.add_argument(
        "--data-root", required=True, help="the Parquet dataset URI, as the tasks see it"
    )
    p.add_argument("--pipeline-root", required=True, help="artifact root URI (e.g. gs://b/root)")
    p.add_argument("--image", required=True, help="the image every task runs (see Dockerfile)")
    p.add_argument(
        "-o", "--output", required=True, help="pipeline.yaml (kubeflow) or .json (vertex)"
    )
    g = p.add_argument_group("Trainer task resources")
    g.add_argument("--gpus", type=non_negative_int, default=0, help="GPUs for the Trainer task")
    g.add_argument(
        "--gpu-type",
        help="kubeflow: a node resource name (default nvidia.com/gpu); "
        "vertex: an accelerator, e.g. NVIDIA_L4, NVIDIA_H100_80GB",
    )
    g.add_argument(
        "--cpu-limit", type=float, default=0.0, help="vCPUs for the Trainer task; 0: no limit"
    )
    g.add_argument(
        "--memory-limit", type=float, default=0.0, help="GiB for the Trainer task; 0: no limit"
    )
    g = p.add_argument_group(
        "Kubeflow task disk",
        "the open-source KFP launcher copies each task's input artifacts (the Examples "
        "included) to the pod's local disk first: give each such task a volume of this size "
        "there (see docs/pipelines.md, Running on Kubeflow)",
    )
    g.add_argument(
        "--download-volume-size", metavar="QUANTITY", help="a Kubernetes quantity, e.g. 50Gi"
    )
    g.add_argument(
        "--download-volume-storage-class", metavar="CLASS", help="default: the cluster's default"
    )
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
        type=positive_int,
        metavar="N",
        help="> 1: multi-worker training, one chief and N-1 workers (TF_CONFIG); "
        "--batch-size must divide evenly over replicas × GPUs (default 1)",
    )
    g.add_argument(
        "--training-job-service-account",
        metavar="SA",
        help="the service account the job runs as (default: the project's Vertex AI one)",
    )
    g.add_argument(
        "--training-job-input-workers",
        type=positive_int,
        metavar="N",
        help="N more replicas (worker pool 2) that read and parse the train split as tf.data "
        "service workers for a dispatcher on the chief; the trainers only receive batches "
        "(default: none, the trainers read it)",
    )
    g.add_argument(
        "--training-job-input-worker-machine-type",
        metavar="TYPE",
        help="the input workers' machine type, without accelerators (default n1-standard-8)",
    )
    _add_pipeline_arguments(p)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser(
        "submit",
        parents=[common],
        help="submit a compiled pipeline to Vertex AI Pipelines or a Kubeflow Pipelines server",
    )
    p.add_argument("compiled", help="pipeline.json or .yaml from `compile`")
    p.add_argument(
        "--target",
        choices=["vertex", "kubeflow"],
        default="vertex",
        help="Vertex AI Pipelines, or a Kubeflow Pipelines v2 API server",
    )
    p.add_argument("--project", help="vertex: the Google Cloud project")
    p.add_argument("--region", help="vertex: e.g. us-central1")
    p.add_argument("--host", help="kubeflow: the KFP API server's URL, e.g. http://localhost:8888")
    _add_param_argument(p)
    p.add_argument(
        "--labels",
        action="append",
        metavar="KEY=VALUE",
        help="vertex: a label of the pipeline job (repeatable)",
    )
    p.add_argument(
        "--service-account",
        help="vertex: the job's service account; kubeflow: the run's Kubernetes service account",
    )
    p.add_argument(
        "--enable-caching",
        action=argparse.BooleanOptionalAction,
        help="turn the execution cache on or off for every task, ParquetExampleGen's too "
        "(default: as compiled, every task but ParquetExampleGen cached)",
    )
    p.add_argument(
        "--experiment",
        help="vertex: the Vertex AI experiment; kubeflow: the KFP experiment (default: Default)",
    )
    p.add_argument("--pipeline-root", help="override the compiled pipeline root")
    p.add_argument("--display-name", help="the job's (vertex) or run's (kubeflow) name")
    p.add_argument(
        "--wait",
        action="store_true",
        help="follow the run to its end; exit 0 if it succeeded, 3 if it failed or was cancelled",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the request(s) as JSON; no network, no credentials",
    )
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser(
        parents=[common],
        name="run-compiled",
        help="execute a compiled pipeline file locally, task by task, as the KFP v2 launcher would",
    )
    p.add_argument("compiled", help="pipeline.yaml or pipeline.json from `compile`")
    p.add_argument(
        "--pipeline-root",
        required=True,
        help="folder for the artifacts (gs:// too with --launcher kfp)",
    )
    p.add_argument(
        "--launcher",
        choices=["vertex", "kfp"],
        default="vertex",
        help="hand artifacts between tasks as Vertex AI does (typed), or as the open-source "
        "KFP v2 driver and launcher do (untyped, inputs downloaded to local disk first)",
    )
    _add_param_argument(p)
    p.set_defaults(func=cmd_run_compiled)

    p = sub.add_parser(
        "demo", parents=[common], help="generate a Criteo-shaped demo dataset and run the pipeline"
    )
    p.add_argument(
        "--rows",
        type=positive_int,
        default=200_000,
        help="rows of the generated dataset (generated once per --workdir)",
    )
    p.add_argument(
        "--workdir", default="out/demo", help="the folder for the dataset and the pipeline root"
    )
    _add_pipeline_arguments(p)
    # The demo shows its example statistics.
    p.set_defaults(func=cmd_demo, with_example_statistics="ours")

"""Compile the pipeline for Kubeflow Pipelines (PipelineSpec YAML) or Vertex AI (PipelineJob JSON)
with TFX's KubeflowV2DagRunner (submit.py sends a compiled file to either platform).

What TFX's runner leaves to us, and why:
- schemaVersion 2.1.0 for both targets: the KFP backend rejects TFX's default 2.0.0.
- No resolver nodes and no `module_file`: the KFP backend cannot run TFX resolvers, and TFX
  packages a module_file into `pipeline_root` at compile time (a cloud write from the laptop).
  Components take importable paths (`model_fn`, `preprocessing_fn`) from the image instead.
- ParquetExampleGen's task is never served from the KFP cache: that cache keys on the task's
  parameters, which do not change when files under `input_base` do (locally TFX's cache keys on
  the input fingerprint instead; on KFP the executor computes it and records it on the artifact).
- Pipeline parameters (PIPELINE_PARAMETERS) with the compiled values as defaults: TFX turns a
  `RuntimeParameter` into a root input of the PipelineSpec but writes no `defaultValue`, and the
  KFP API server refuses a run that leaves such a parameter out (apiserver/template/
  v2_template.go); we add them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from typing import Optional

from tfx_tabular.components.tabular_trainer import spec as trainer_spec

TARGETS = ("kubeflow", "vertex")
KUBEFLOW_GPU = "nvidia.com/gpu"  # the Kubernetes resource KFP asks the node for
TRAINER_ID = "TabularTrainer"
EXAMPLE_GEN_ID = "ParquetExampleGen"


class CompileError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class PipelineParameter:
    """A pipeline parameter of the compiled file: which component property it sets."""

    component: str
    exec_property: str
    ptype: type
    description: str


# What a compiled pipeline lets a run change without recompiling. Span / version patterns are not
# here: create_pipeline does not use them, and TFX cannot make a field inside a proto
# (input_config, range_config, train_args) a pipeline parameter. Neither can train steps
# (train_args.num_steps): a pipeline compiled with them has no `epochs` parameter.
def _trainer_parameter(name: str) -> PipelineParameter:
    """A TabularTrainer property as a pipeline parameter, with its declared type and help."""
    declared = trainer_spec.PARAMETERS[name]
    return PipelineParameter(TRAINER_ID, name, declared.type, declared.help)


PIPELINE_PARAMETERS = {
    "data_root": PipelineParameter(
        EXAMPLE_GEN_ID, "input_base", str, "the Parquet dataset ParquetExampleGen converts"
    ),
    **{
        name: _trainer_parameter(name)
        for name in ("epochs", "batch_size", "learning_rate", "data_service")
    },
}


@dataclasses.dataclass(frozen=True)
class TrainerResources:
    """Resources of the Trainer task. `gpu_type`: a Kubernetes resource name on Kubeflow
    (default nvidia.com/gpu), a Vertex accelerator name on Vertex (e.g. NVIDIA_L4)."""

    gpus: int = 0
    gpu_type: Optional[str] = None
    cpu_limit: float = 0.0
    memory_limit_gib: float = 0.0


def resource_spec(target: str, resources: TrainerResources):
    """The Trainer's `platform_config`, or None when no resource is asked for."""
    from kfp.pipeline_spec import pipeline_spec_pb2

    if resources.gpus < 0:
        raise CompileError(f"the GPU count must be ≥ 0, not {resources.gpus}")
    spec = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec(
        cpu_limit=resources.cpu_limit, memory_limit=resources.memory_limit_gib
    )
    if resources.gpus:
        gpu_type = resources.gpu_type or (KUBEFLOW_GPU if target == "kubeflow" else None)
        if target == "vertex":
            from tfx_tabular.components.tabular_trainer.vertex import check_accelerator

            try:
                check_accelerator(gpu_type, resources.gpus)
            except ValueError as e:
                raise CompileError(f"--gpu-type: {e}") from None
        spec.accelerator.type = gpu_type
        spec.accelerator.count = resources.gpus
    elif resources.gpu_type:
        raise CompileError("--gpu-type without --gpus")
    return spec if spec.ByteSize() else None


def _check_compilable(pipeline) -> None:
    from tfx.dsl.components.common import resolver

    for node in pipeline.components:
        if isinstance(node, resolver.Resolver):
            raise CompileError(f"{node.id} is a resolver node, which the KFP backend cannot run")
        if node.exec_properties.get("module_file"):
            raise CompileError(
                f"{node.id} has a module_file, which TFX would package into pipeline_root at "
                "compile time; give an importable path (model_fn / preprocessing_fn) instead"
            )


def _declared_default(component: str, exec_property: str):
    declared = {TRAINER_ID: trainer_spec.PARAMETERS}.get(component, {})
    return declared[exec_property].default if exec_property in declared else None


@contextlib.contextmanager
def _as_runtime_parameters(pipeline):
    """While compiling: the properties behind PIPELINE_PARAMETERS become TFX RuntimeParameters
    whose defaults are the values the pipeline was built with (the pipeline is restored after).
    Yields {name: default} of every RuntimeParameter in the pipeline, the user's own too."""
    from tfx import v1 as tfx

    nodes = {node.id: node for node in pipeline.components}
    saved = []
    try:
        for name, parameter in PIPELINE_PARAMETERS.items():
            node = nodes.get(parameter.component)
            if node is None or (name == "epochs" and _trains_by_steps(node)):
                continue
            properties, key = node.exec_properties, parameter.exec_property
            value = properties.get(key)
            if isinstance(value, tfx.dsl.experimental.RuntimeParameter):
                continue  # the pipeline's author made it one already
            if value is None:
                value = _declared_default(parameter.component, key)
            runtime = tfx.dsl.experimental.RuntimeParameter(
                name=name,
                ptype=parameter.ptype,
                # An unset text property is "", which the executor reads as unset.
                default=parameter.ptype() if value is None else parameter.ptype(value),
                description=parameter.description,
            )
            # The component's own type check, as if it had been built with the RuntimeParameter.
            node.spec.PARAMETERS[key].type_check(key, runtime)
            saved.append((properties, key, properties.get(key)))
            properties[key] = runtime
        yield {
            value.name: value.default
            for node in pipeline.components
            for value in node.exec_properties.values()
            if isinstance(value, tfx.dsl.experimental.RuntimeParameter)
        }
    finally:
        for properties, key, value in saved:
            properties[key] = value


def _trains_by_steps(trainer) -> bool:
    """train_args.num_steps set: epochs would change nothing."""
    from tfx.proto import trainer_pb2
    from tfx.utils import proto_utils

    train_args = trainer.exec_properties.get("train_args")
    if isinstance(train_args, str):
        train_args = proto_utils.json_to_proto(train_args, trainer_pb2.TrainArgs())
    return bool(train_args and train_args.num_steps)


def _set_parameter_defaults(spec: dict, defaults: dict) -> None:
    for name, definition in spec["root"].get("inputDefinitions", {}).get("parameters", {}).items():
        if defaults.get(name) is not None:
            definition["defaultValue"] = defaults[name]
            definition["isOptional"] = True


# TFX 1.16, TFT and TFMA are Keras 2 code; TFX's task entry point imports TensorFlow before any
# code of ours runs, so the task's environment must say it (the image's Dockerfile does too).
TASK_ENVIRONMENT = {"TF_USE_LEGACY_KERAS": "1"}


def _set_task_environment(spec: dict) -> None:
    for executor in spec["deploymentSpec"]["executors"].values():
        container = executor.get("container")
        if container is not None:
            env = [e for e in container.get("env", []) if e["name"] not in TASK_ENVIRONMENT]
            container["env"] = env + [{"name": k, "value": v} for k, v in TASK_ENVIRONMENT.items()]


TFX_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"
# TFX's entry point wrapped to accept the open-source KFP driver's untyped input artifacts and
# to leave no directory markers on gs:// (see the module).
TASK_ENTRYPOINT = "tfx_tabular.pipelines.task_entrypoint"


def _set_task_entrypoint(spec: dict) -> None:
    for executor in spec["deploymentSpec"]["executors"].values():
        container = executor.get("container", {})
        if container.get("command") == ["python", "-m", TFX_ENTRYPOINT]:
            container["command"] = ["python", "-m", TASK_ENTRYPOINT]


# The open-source KFP launcher copies every input artifact of a task to the pod's local disk, under
# /gcs, /s3 or /minio (launcher_v2.go LocalPathForURI), before the command runs. KFP has no way to
# request ephemeral storage for a task (PipelineSpec's ResourceSpec holds CPU, memory and
# accelerators; kubernetes_executor_config.proto no container resources), so the copy would land
# on the node's disk unaccounted for: a generic ephemeral volume (a PVC made and deleted with the
# pod; KFP backend ≥ 2.2) of a set size is mounted there instead.
LAUNCHER_DOWNLOAD_ROOTS = {"gs": "/gcs", "s3": "/s3", "minio": "/minio"}
QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")


@dataclasses.dataclass(frozen=True)
class DownloadVolume:
    """`size`: a Kubernetes quantity (e.g. 50Gi); `storage_class`: None for the cluster's
    default."""

    size: str
    storage_class: Optional[str] = None


def download_volume_platform_spec(spec: dict, pipeline_root: str, volume: DownloadVolume) -> dict:
    """The KFP PlatformSpec (the second document of the compiled YAML) giving each task that
    takes input artifacts a volume at the launcher's download folder."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    if not QUANTITY.fullmatch(volume.size):
        raise CompileError(f"--download-volume-size {volume.size!r} is not a Kubernetes quantity")
    scheme = pipeline_root.split("://")[0] if "://" in pipeline_root else None
    if scheme not in LAUNCHER_DOWNLOAD_ROOTS:
        raise CompileError(
            f"--download-volume-size: the KFP launcher downloads inputs only for "
            f"{sorted(LAUNCHER_DOWNLOAD_ROOTS)} pipeline roots, not {pipeline_root}"
        )
    claim = {
        "volumeName": "kfp-launcher-downloads",
        "mountPath": LAUNCHER_DOWNLOAD_ROOTS[scheme],
        "accessModes": ["ReadWriteOnce"],
        "size": volume.size,
        "defaultStorageClass": volume.storage_class is None,
    }
    if volume.storage_class:
        claim["storageClassName"] = volume.storage_class
    executors = {
        component["executorLabel"]: {"genericEphemeralVolume": [claim]}
        for component in spec["components"].values()
        if component.get("inputDefinitions", {}).get("artifacts")
    }
    platform = {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}}
    json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec())  # what KFP parses
    return platform


def compile_pipeline(
    pipeline,
    target: str,
    image: str,
    output_path: str,
    resources: TrainerResources = TrainerResources(),
    download_volume: Optional[DownloadVolume] = None,
) -> dict:
    """Write the compiled pipeline to `output_path` and return it as a dict (the PipelineSpec for
    kubeflow, the PipelineJob for vertex). `download_volume` (kubeflow only) adds a second YAML
    document, the PlatformSpec. Touches no cloud storage."""
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

    if target not in TARGETS:
        raise CompileError(f"target must be one of {TARGETS}, not {target!r}")
    if download_volume is not None and target != "kubeflow":
        raise CompileError(
            "--download-volume-size is for --target kubeflow (Vertex AI copies no inputs)"
        )
    _check_compilable(pipeline)
    trainer = next((n for n in pipeline.components if n.id == TRAINER_ID), None)
    platform_config = resource_spec(target, resources)
    if platform_config is not None:
        if trainer is None:
            raise CompileError(f"the pipeline has no {TRAINER_ID} to give resources to")
        if trainer.exec_properties.get("custom_config"):
            raise CompileError(
                f"{TRAINER_ID} trains on a Vertex AI training job: give the "
                "accelerators and machine to the job, not to its launching task"
            )
        trainer.with_platform_config(platform_config)
    root = pipeline.pipeline_info.pipeline_root
    if (
        trainer is not None
        and trainer.exec_properties.get("custom_config")
        and (not str(root).startswith("gs://"))
    ):
        raise CompileError(
            f"{TRAINER_ID} trains on a Vertex AI training job, whose replicas "
            f"read and write artifacts under the pipeline root: it must be a "
            f"gs:// URI, not {root}"
        )
    runner = v2.KubeflowV2DagRunner(
        config=v2.KubeflowV2DagRunnerConfig(default_image=image, use_pipeline_spec_2_1=True)
    )
    with _as_runtime_parameters(pipeline) as defaults:
        job = runner.run(pipeline, write_out=False)
    spec = job["pipelineSpec"]
    _set_parameter_defaults(spec, defaults)
    example_gen = spec["root"]["dag"]["tasks"].get(EXAMPLE_GEN_ID)
    if example_gen is not None:
        example_gen["cachingOptions"] = {"enableCache": False}
    _set_task_environment(spec)
    _set_task_entrypoint(spec)
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    if target == "kubeflow":
        import yaml

        spec["defaultPipelineRoot"] = pipeline.pipeline_info.pipeline_root
        documents = [spec]
        if download_volume is not None:
            documents.append(download_volume_platform_spec(spec, root, download_volume))
        with open(output_path, "w") as handle:
            yaml.safe_dump_all(documents, handle, sort_keys=True)
        return spec
    with open(output_path, "w") as handle:
        json.dump(job, handle, indent=1, sort_keys=True)
    return job

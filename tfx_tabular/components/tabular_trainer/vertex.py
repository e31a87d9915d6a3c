"""TabularTrainer on a Vertex AI custom training job: worker pools with their own machine type,
accelerators and replica count, for training larger than one pipeline task.

The pipeline task only launches the job and waits for it (TFX's Vertex trainer executor, given
our executor to run); every replica runs TabularTrainer's executor in the image. Vertex sets
TF_CONFIG on each replica when there are several (pool 0 is the chief, pool 1 the workers), so the
`auto` distribution becomes MultiWorkerMirroredStrategy, and only the chief exports. With input
workers, pool 2's replicas serve as tf.data service workers for the chief's dispatcher
(input_workers.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Optional

from tfx.extensions.google_cloud_ai_platform import constants, runner, training_clients
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer_executor
from tfx.utils import json_utils, name_utils

from tfx_tabular.components.tabular_trainer import executor as trainer_executor
from tfx_tabular.components.tabular_trainer import input_workers, spec
from tfx_tabular.training.data_service import DEFAULT_DISPATCHER_PORT

DEFAULT_MACHINE_TYPE = "n1-standard-8"


def vertex_accelerators() -> list[str]:
    from google.cloud.aiplatform_v1.types import AcceleratorType

    return [a.name for a in AcceleratorType if a.name != "ACCELERATOR_TYPE_UNSPECIFIED"]


def check_accelerator(name: Optional[str], count: int) -> None:
    """Vertex accelerator names are an enum (NVIDIA_L4, NVIDIA_H100_80GB, ...): check them when
    the pipeline is built, not when the job is refused in the cloud."""
    if count < 0:
        raise ValueError(f"the accelerator count must be ≥ 0, not {count}")
    if count and name not in vertex_accelerators():
        raise ValueError(
            f"Vertex needs an accelerator name, not {name!r} "
            f"(one of: {', '.join(vertex_accelerators())})"
        )
    if name and not count:
        raise ValueError(f"accelerator {name} given without a count")


@dataclasses.dataclass(frozen=True)
class VertexTraining:
    """Where the Trainer runs on Vertex AI. `replica_count` > 1 trains multi-worker: one chief plus
    `replica_count - 1` workers, each with the same machine and accelerators.
    `input_worker_count` > 0 adds that many replicas of `input_worker_machine_type` (worker pool
    2, no accelerators) that read and parse the train split as tf.data service workers, for a
    dispatcher the chief serves on `dispatcher_port` while it trains."""

    project: str
    region: str
    image: str
    machine_type: str = DEFAULT_MACHINE_TYPE
    accelerator_type: Optional[str] = None
    accelerator_count: int = 0
    replica_count: int = 1
    service_account: Optional[str] = None
    input_worker_count: int = 0
    input_worker_machine_type: str = DEFAULT_MACHINE_TYPE
    dispatcher_port: int = DEFAULT_DISPATCHER_PORT

    def __post_init__(self):
        check_accelerator(self.accelerator_type, self.accelerator_count)
        if self.replica_count < 1:
            raise ValueError(f"replica_count must be ≥ 1, not {self.replica_count}")
        if self.input_worker_count < 0:
            raise ValueError(f"input_worker_count must be ≥ 0, not {self.input_worker_count}")
        if not 0 < self.dispatcher_port < 65536:
            raise ValueError(
                f"dispatcher_port must be a port (1-65535), not {self.dispatcher_port}"
            )
        for field in ("project", "region", "image", "machine_type", "input_worker_machine_type"):
            if not getattr(self, field):
                raise ValueError(f"VertexTraining needs a {field}")

    def check_batch_size(self, batch_size: int) -> None:
        """The global batch splits evenly over every replica's accelerators (or its CPU)."""
        devices = self.replica_count * max(1, self.accelerator_count)
        if batch_size % devices:
            raise ValueError(
                f"batch_size {batch_size} is not a multiple of the {devices} devices "
                f"the Vertex job trains on ({self.replica_count} replica(s) × "
                f"{max(1, self.accelerator_count)})"
            )

    def worker_pool_specs(self) -> list[dict]:
        machine = {"machine_type": self.machine_type}
        if self.accelerator_count:
            machine.update(
                accelerator_type=self.accelerator_type, accelerator_count=self.accelerator_count
            )

        container = {"image_uri": self.image}
        if self.input_worker_count:  # every replica learns its part from it (input_workers.role)
            container["env"] = [
                {"name": input_workers.DISPATCHER_PORT_ENV, "value": str(self.dispatcher_port)}
            ]

        def pool(replicas: int, machine_spec: dict) -> dict:  # separate dicts: TFX writes the
            return {  # command into each
                "machine_spec": dict(machine_spec),
                "replica_count": replicas,
                "container_spec": json.loads(json.dumps(container)),
            }

        pools = [pool(1, machine)]
        if self.replica_count > 1:
            pools.append(pool(self.replica_count - 1, machine))
        if self.input_worker_count:
            if len(pools) == 1:
                pools.append({})  # Vertex's empty value: pool 1 skipped
            pools.append(
                pool(self.input_worker_count, {"machine_type": self.input_worker_machine_type})
            )
        return pools

    def custom_config(self) -> dict:
        """The `custom_config` TFX's Vertex trainer executor reads (its documented keys)."""
        job_spec = {"worker_pool_specs": self.worker_pool_specs()}
        if self.service_account:
            job_spec["service_account"] = self.service_account
        return {
            vertex_trainer_executor.TRAINING_ARGS_KEY: {
                "project": self.project,
                "job_spec": job_spec,
            },
            constants.ENABLE_VERTEX_KEY: True,
            constants.VERTEX_REGION_KEY: self.region,
        }


class Executor(vertex_trainer_executor.GenericExecutor):
    """Launches a Vertex custom job whose replicas run TabularTrainer's executor, then records
    the figures the chief wrote (steps, examples/s, input wait, eval metrics) on ModelRun."""

    def _GetExecutorClass(self):
        return trainer_executor.Executor

    def Do(self, input_dict, output_dict, exec_properties):
        if _has_skipped_pools(exec_properties):
            self._launch(input_dict, output_dict, exec_properties)
        else:
            super().Do(input_dict, output_dict, exec_properties)
        import tensorflow as tf

        model_run = output_dict["model_run"][0]
        path = os.path.join(model_run.uri, spec.RUN_SUMMARY_FILE)
        with tf.io.gfile.GFile(path) as handle:
            trainer_executor.record_run_summary(model_run, json.load(handle))

    def _launch(self, input_dict, output_dict, exec_properties) -> None:
        """TFX's launch (runner.start_cloud_training) with the skipped pools left empty: TFX writes
        its command and a default image into every pool, an empty one too, which would then be
        a pool with a container and no machine."""
        config = json_utils.loads(exec_properties["custom_config"])
        job_args = dict(config[vertex_trainer_executor.TRAINING_ARGS_KEY])
        project = job_args.pop("project")
        region = config[constants.VERTEX_REGION_KEY]
        client = training_clients.get_job_client(True, region)
        job = client.create_training_job(
            input_dict,
            output_dict,
            exec_properties,
            name_utils.get_full_name(self._GetExecutorClass()),
            job_args,
            config.get(vertex_trainer_executor.JOB_ID_KEY),
            None,
        )
        for pool in job["job_spec"]["worker_pool_specs"]:
            if not pool.get("replica_count"):
                pool.clear()
        runner._launch_cloud_training(
            project=project, training_job=job, enable_vertex=True, vertex_region=region
        )


def _has_skipped_pools(exec_properties) -> bool:
    config = json_utils.loads(exec_properties.get("custom_config") or "null") or {}
    job_spec = config.get(vertex_trainer_executor.TRAINING_ARGS_KEY, {}).get("job_spec", {})
    return any(not pool for pool in job_spec.get("worker_pool_specs", []))

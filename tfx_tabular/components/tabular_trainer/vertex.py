"""TabularTrainer on a Vertex AI custom training job: worker pools with their own machine type,
accelerators and replica count, for training larger than one pipeline task.

The pipeline task only launches the job and waits for it (TFX's Vertex trainer executor, given
our executor to run); every replica runs TabularTrainer's executor in the image. Vertex sets
TF_CONFIG on each replica when there are several (pool 0 is the chief, pool 1 the workers), so the
`auto` distribution becomes MultiWorkerMirroredStrategy, and only the chief exports.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Optional

from tfx.extensions.google_cloud_ai_platform import constants
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer_executor

from tfx_tabular.components.tabular_trainer import executor as trainer_executor
from tfx_tabular.components.tabular_trainer import spec


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
    `replica_count - 1` workers, each with the same machine and accelerators."""

    project: str
    region: str
    image: str
    machine_type: str = "n1-standard-8"
    accelerator_type: Optional[str] = None
    accelerator_count: int = 0
    replica_count: int = 1
    service_account: Optional[str] = None

    def __post_init__(self):
        check_accelerator(self.accelerator_type, self.accelerator_count)
        if self.replica_count < 1:
            raise ValueError(f"replica_count must be ≥ 1, not {self.replica_count}")
        for field in ("project", "region", "image", "machine_type"):
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

        def pool(replicas: int) -> dict:  # separate dicts: TFX writes the command into each
            return {
                "machine_spec": dict(machine),
                "replica_count": replicas,
                "container_spec": {"image_uri": self.image},
            }

        return [pool(1)] + ([pool(self.replica_count - 1)] if self.replica_count > 1 else [])

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
        super().Do(input_dict, output_dict, exec_properties)
        import tensorflow as tf

        model_run = output_dict["model_run"][0]
        path = os.path.join(model_run.uri, spec.RUN_SUMMARY_FILE)
        with tf.io.gfile.GFile(path) as handle:
            trainer_executor.record_run_summary(model_run, json.load(handle))

"""TabularTrainer on a Vertex AI custom job, offline: the job TFX's Vertex trainer executor would
create is a valid CustomJob with our worker pools, and its replicas' command — run here as two
local processes with the TF_CONFIG Vertex sets — trains multi-worker and exports the model.

Only the two network calls are replaced: the job client is built with anonymous credentials, and
the launch (create the job, poll it) hands the job to the test instead of to Vertex.
"""

import json
import os
import socket
import subprocess
import sys
import types

import pytest
import tensorflow as tf
from conftest import convert_to_examples, few_features
from google.auth import credentials as auth_credentials
from google.cloud import aiplatform_v1
from tfx.extensions.google_cloud_ai_platform import runner, training_clients
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.utils import io_utils, json_utils, path_utils, proto_utils

from tfx_tabular.components import TabularTrainer
from tfx_tabular.components.tabular_trainer import vertex
from tfx_tabular.conversion.source_metadata import read_source_metadata
from tfx_tabular.demo import criteo
from tfx_tabular.schemas.infer import infer_schema

IMAGE = "us-docker.pkg.dev/example/repo/tfx-tabular:1.0"


def _training(**kwargs):
    return vertex.VertexTraining(
        **{"project": "p", "region": "us-central1", "image": IMAGE, **kwargs}
    )


def test_worker_pools_have_one_chief_and_the_other_replicas_as_workers():
    pools = _training(
        machine_type="a2-highgpu-2g",
        accelerator_type="NVIDIA_TESLA_A100",
        accelerator_count=2,
        replica_count=3,
    ).worker_pool_specs()
    assert [p["replica_count"] for p in pools] == [1, 2]
    for pool in pools:
        assert pool["machine_spec"] == {
            "machine_type": "a2-highgpu-2g",
            "accelerator_type": "NVIDIA_TESLA_A100",
            "accelerator_count": 2,
        }
        assert pool["container_spec"] == {"image_uri": IMAGE}
    assert len(_training().worker_pool_specs()) == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"accelerator_type": "nvidia.com/gpu", "accelerator_count": 1}, "NVIDIA_L4"),
        ({"accelerator_type": "NVIDIA_L4"}, "without a count"),
        ({"replica_count": 0}, "replica_count"),
        ({"region": ""}, "region"),
    ],
)
def test_bad_training_jobs_fail_when_the_pipeline_is_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _training(**kwargs)


def test_the_batch_must_split_evenly_over_every_replicas_devices():
    training = _training(accelerator_type="NVIDIA_L4", accelerator_count=2, replica_count=3)
    training.check_batch_size(1200)
    with pytest.raises(ValueError, match="not a multiple of the 6 devices"):
        training.check_batch_size(1024)


def test_the_trainer_runs_the_vertex_executor_with_tfx_custom_config():
    training = _training(
        accelerator_type="NVIDIA_L4",
        accelerator_count=1,
        replica_count=2,
        service_account="sa@p.iam.gserviceaccount.com",
    )
    from tfx.types import channel
    from tfx.types import standard_artifacts as artifacts

    trainer = TabularTrainer(
        examples=channel.Channel(type=artifacts.Examples),
        schema=channel.Channel(type=artifacts.Schema),
        vertex_training=training,
    )
    assert trainer.executor_spec.executor_class is vertex.Executor
    config = json.loads(trainer.exec_properties["custom_config"])
    assert config["ai_platform_enable_vertex"] is True
    assert config["ai_platform_vertex_region"] == "us-central1"
    job = config["ai_platform_training_args"]
    assert job["project"] == "p"
    assert job["job_spec"]["service_account"] == "sa@p.iam.gserviceaccount.com"
    assert job["job_spec"]["worker_pool_specs"] == training.worker_pool_specs()


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:  # all bound at once, so the ports differ
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class _Launched(Exception):
    """Stops the executor where it would wait for the job on Vertex."""


@pytest.fixture
def trainer_run(tmp_path, monkeypatch):
    """Real Examples and Schema artifacts, the Vertex executor's arguments, and `run(launch)`:
    runs the executor with `launch(project, training_job, ...)` in place of creating the job on
    Vertex and waiting for it."""
    data, out = str(tmp_path / "data"), str(tmp_path / "examples")
    criteo.write_dataset(data, 3000, days=2, files_per_day=2, row_group_size=500)
    result = convert_to_examples(data, out)
    examples = standard_artifacts.Examples()
    examples.uri = out
    examples.split_names = '["train", "eval"]'
    examples.set_json_value_custom_property("row_counts", result.rows)
    schema = standard_artifacts.Schema()
    schema.uri = str(tmp_path / "schema")
    io_utils.write_pbtxt_file(
        os.path.join(schema.uri, "schema.pbtxt"),
        few_features(infer_schema(read_source_metadata(out), label="label")),
    )
    model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri, model_run.uri = str(tmp_path / "model"), str(tmp_path / "model_run")
    monkeypatch.setattr(
        training_clients.VertexJobClient,
        "create_client",
        lambda self: setattr(
            self,
            "_client",
            aiplatform_v1.JobServiceClient(credentials=auth_credentials.AnonymousCredentials()),
        ),
    )
    exec_properties = {
        "train_args": proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=6)),
        "eval_args": proto_utils.proto_to_json(trainer_pb2.EvalArgs(num_steps=2)),
        "batch_size": 64,
        "label": "label",
        "epochs": 1,
        "distribution": "auto",
        "custom_config": json_utils.dumps(_training(replica_count=2).custom_config()),
    }

    def run(launch):
        monkeypatch.setattr(runner, "_launch_cloud_training", launch)
        vertex.Executor().Do(
            {"examples": [examples], "schema": [schema]},
            {"model": [model], "model_run": [model_run]},
            exec_properties,
        )

    return types.SimpleNamespace(run=run, model=model, model_run=model_run)


def test_the_launched_job_is_a_valid_custom_job_running_our_executor(trainer_run):
    launched = []

    def launch(**job):
        launched.append(job)
        raise _Launched

    with pytest.raises(_Launched):
        trainer_run.run(launch)
    [job] = launched
    assert job["project"] == "p" and job["enable_vertex"] and job["vertex_region"] == "us-central1"
    custom_job = aiplatform_v1.CustomJob(job["training_job"])  # what the API accepts
    pools = custom_job.job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, 1]
    for pool in pools:
        assert pool.container_spec.image_uri == IMAGE
        command = list(pool.container_spec.command)
        assert command[:3] == ["python", "-m", "tfx.scripts.run_executor"]
        assert command[command.index("--executor_class_path") + 1] == (
            "tfx_tabular.components.tabular_trainer.executor.Executor"
        )


@pytest.mark.slow
def test_the_replicas_train_multi_worker_and_the_figures_reach_model_run(trainer_run, tmp_path):
    """The job run as Vertex would run it: each pool's command in the image (`python` is this
    environment's), with TF_CONFIG naming pool 0 the chief and pool 1 a worker."""

    def launch(training_job, **_):
        pools = training_job["job_spec"]["worker_pool_specs"]
        chief_port, worker_port = _free_ports(2)
        cluster = {"chief": [f"127.0.0.1:{chief_port}"], "worker": [f"127.0.0.1:{worker_port}"]}
        processes = []
        try:
            for task_type, pool in zip(("chief", "worker"), pools, strict=True):
                command = [sys.executable] + pool["container_spec"]["command"][1:]
                scratch = tmp_path / f"{task_type}-tmp"
                scratch.mkdir()
                env = {
                    **os.environ,
                    "TMPDIR": str(scratch),
                    "TF_CONFIG": json.dumps(
                        {
                            "cluster": cluster,
                            "task": {"type": task_type, "index": 0},
                            "environment": "cloud",
                        }
                    ),
                }
                with open(tmp_path / f"{task_type}.log", "w") as log:
                    processes.append(
                        (
                            task_type,
                            subprocess.Popen(
                                command, env=env, stdout=log, stderr=subprocess.STDOUT
                            ),
                        )
                    )
            for task_type, process in processes:
                code = process.wait(timeout=600)
                assert code == 0, (tmp_path / f"{task_type}.log").read_text()[-3000:]
        finally:  # one replica failing leaves the other waiting on its collectives
            for _, process in processes:
                process.kill()

    trainer_run.run(launch)
    chief_log = (tmp_path / "chief.log").read_text()
    assert "training with MultiWorkerMirroredStrategy: 2 replica(s)" in chief_log
    # Only the chief's checkpoints and export are kept: the worker wrote its own into scratch,
    # which is gone.
    assert "not the chief" not in chief_log
    assert "not the chief" in (tmp_path / "worker.log").read_text()
    assert not list((tmp_path / "worker-tmp").glob("tfx-tabular-worker-*"))
    serving = tf.saved_model.load(path_utils.serving_model_dir(trainer_run.model.uri))
    assert "serving_default" in serving.signatures
    properties = trainer_run.model_run.mlmd_artifact.custom_properties
    assert properties["total_steps"].int_value == 6
    assert properties["replicas"].int_value == 2
    assert "eval_auc" in properties and "input_wait_fraction" in properties

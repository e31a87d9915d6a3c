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

import pytest
import tensorflow as tf
from google.auth import credentials as auth_credentials
from google.cloud import aiplatform_v1
from tfx.extensions.google_cloud_ai_platform import runner, training_clients
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.utils import io_utils, json_utils, path_utils, proto_utils

from tfx_tabular import convert, demo_data, schemas
from tfx_tabular.components import TabularTrainer
from tfx_tabular.components.tabular_trainer import vertex
from tfx_tabular.schemas.infer import infer_schema

IMAGE = "us-docker.pkg.dev/example/repo/tfx-tabular:1.0"
IN_MEMORY = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]


def _training(**kwargs):
    return vertex.VertexTraining(**{"project": "p", "region": "us-central1", "image": IMAGE,
                                    **kwargs})


def test_worker_pools_have_one_chief_and_the_other_replicas_as_workers():
    pools = _training(machine_type="a2-highgpu-2g", accelerator_type="NVIDIA_TESLA_A100",
                      accelerator_count=2, replica_count=3).worker_pool_specs()
    assert [p["replica_count"] for p in pools] == [1, 2]
    for pool in pools:
        assert pool["machine_spec"] == {"machine_type": "a2-highgpu-2g",
                                        "accelerator_type": "NVIDIA_TESLA_A100",
                                        "accelerator_count": 2}
        assert pool["container_spec"] == {"image_uri": IMAGE}
    assert len(_training().worker_pool_specs()) == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"accelerator_type": "nvidia.com/gpu", "accelerator_count": 1}, "NVIDIA_L4"),
    ({"accelerator_type": "NVIDIA_L4"}, "without a count"),
    ({"replica_count": 0}, "replica_count"),
    ({"region": ""}, "region"),
])
def test_bad_training_jobs_fail_when_the_pipeline_is_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _training(**kwargs)


def test_the_trainer_runs_the_vertex_executor_with_tfx_custom_config():
    training = _training(accelerator_type="NVIDIA_L4", accelerator_count=1, replica_count=2,
                         service_account="sa@p.iam.gserviceaccount.com")
    from tfx.types import channel, standard_artifacts as artifacts

    trainer = TabularTrainer(examples=channel.Channel(type=artifacts.Examples),
                             schema=channel.Channel(type=artifacts.Schema),
                             vertex_training=training)
    assert trainer.executor_spec.executor_class is vertex.Executor
    config = json.loads(trainer.exec_properties["custom_config"])
    assert config["ai_platform_enable_vertex"] is True
    assert config["ai_platform_vertex_region"] == "us-central1"
    job = config["ai_platform_training_args"]
    assert job["project"] == "p"
    assert job["job_spec"]["service_account"] == "sa@p.iam.gserviceaccount.com"
    assert job["job_spec"]["worker_pool_specs"] == training.worker_pool_specs()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def launched_job(tmp_path, monkeypatch):
    """The Vertex executor run on real Examples and Schema artifacts: the CustomJob it launched,
    and the artifacts."""
    data, out = str(tmp_path / "data"), str(tmp_path / "examples")
    demo_data.write_dataset(data, 3000, days=2, files_per_day=2, row_group_size=500)
    dataset, splits = convert.plan_conversion(data)
    result = convert.convert(dataset, out, splits, convert.OutputOptions(num_shards=2), IN_MEMORY)
    examples = standard_artifacts.Examples()
    examples.uri = out
    examples.split_names = '["train", "eval"]'
    examples.set_json_value_custom_property("row_counts", result.rows)
    schema = standard_artifacts.Schema()
    schema.uri = str(tmp_path / "schema")
    io_utils.write_pbtxt_file(os.path.join(schema.uri, "schema.pbtxt"),
                              infer_schema(schemas.read_summary(out), label="label"))
    model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri, model_run.uri = str(tmp_path / "model"), str(tmp_path / "model_run")

    launched = []
    monkeypatch.setattr(training_clients.VertexJobClient, "create_client", lambda self: setattr(
        self, "_client", aiplatform_v1.JobServiceClient(
            credentials=auth_credentials.AnonymousCredentials())))
    monkeypatch.setattr(runner, "_launch_cloud_training", lambda **kwargs: launched.append(kwargs))
    training = _training(replica_count=2)
    exec_properties = {
        "train_args": proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=6)),
        "eval_args": proto_utils.proto_to_json(trainer_pb2.EvalArgs(num_steps=2)),
        "batch_size": 64, "label": "label", "epochs": 1, "distribution": "auto",
        "custom_config": json_utils.dumps(training.custom_config())}
    vertex.Executor().Do({"examples": [examples], "schema": [schema]},
                         {"model": [model], "model_run": [model_run]}, exec_properties)
    [job] = launched
    return job, model


def test_the_launched_job_is_a_valid_custom_job_running_our_executor(launched_job):
    job, _ = launched_job
    assert job["project"] == "p" and job["enable_vertex"] and job["vertex_region"] == "us-central1"
    custom_job = aiplatform_v1.CustomJob(job["training_job"])  # what the API accepts
    pools = custom_job.job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, 1]
    for pool in pools:
        assert pool.container_spec.image_uri == IMAGE
        command = list(pool.container_spec.command)
        assert command[:3] == ["python", "-m", "tfx.scripts.run_executor"]
        assert command[command.index("--executor_class_path") + 1] == (
            "tfx_tabular.components.tabular_trainer.executor.Executor")


@pytest.mark.slow
def test_the_replicas_command_trains_multi_worker_and_the_chief_exports(launched_job, tmp_path):
    """Run each pool's command as Vertex would in the image: `python` is this environment's, and
    TF_CONFIG names pool 0 the chief and pool 1 a worker."""
    job, model = launched_job
    pools = job["training_job"]["job_spec"]["worker_pool_specs"]
    cluster = {"chief": [f"127.0.0.1:{_free_port()}"], "worker": [f"127.0.0.1:{_free_port()}"]}
    processes = []
    for task_type, pool in zip(("chief", "worker"), pools):
        command = [sys.executable] + pool["container_spec"]["command"][1:]
        env = {**os.environ, "TF_CONFIG": json.dumps(
            {"cluster": cluster, "task": {"type": task_type, "index": 0}, "environment": "cloud"})}
        log = open(tmp_path / f"{task_type}.log", "w")
        processes.append((task_type, log, subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT)))
    for task_type, log, process in processes:
        code = process.wait(timeout=600)
        log.close()
        assert code == 0, (tmp_path / f"{task_type}.log").read_text()[-3000:]
    chief_log = (tmp_path / "chief.log").read_text()
    assert "training with MultiWorkerMirroredStrategy: 2 replica(s)" in chief_log
    serving = tf.saved_model.load(path_utils.serving_model_dir(model.uri))
    assert "serving_default" in serving.signatures

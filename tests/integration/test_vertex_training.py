"""TabularTrainer on a Vertex AI custom job, offline: the job TFX's Vertex trainer executor would
create is a valid CustomJob with our worker pools, and its replicas' command — run here as two
local processes with the TF_CONFIG Vertex sets — trains multi-worker and exports the model; with
input workers (pool 2), a chief and two input workers as processes with the variables Vertex
sets train through the service, every row read once, the input workers stopping after the chief.

Only the two network calls are replaced: the job client is built with anonymous credentials, and
the launch (create the job, poll it) hands the job to the test instead of to Vertex.
"""

import collections
import json
import os
import socket
import subprocess
import sys
import time
import types

import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from conftest import convert_to_examples, few_features, free_port, hive_table
from google.auth import credentials as auth_credentials
from google.cloud import aiplatform_v1
from tfx.extensions.google_cloud_ai_platform import runner, training_clients
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.utils import io_utils, json_utils, path_utils, proto_utils

from tfx_tabular.components import TabularTrainer
from tfx_tabular.components.tabular_trainer import input_workers, vertex
from tfx_tabular.conversion.source_metadata import read_source_metadata
from tfx_tabular.demo import criteo
from tfx_tabular.schemas.infer import infer_schema
from tfx_tabular.training.input_fn import input_fn

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

    def run(launch, training=None):
        monkeypatch.setattr(runner, "_launch_cloud_training", launch)
        properties = dict(exec_properties)
        if training is not None:
            properties["custom_config"] = json_utils.dumps(training.custom_config())
        vertex.Executor().Do(
            {"examples": [examples], "schema": [schema]},
            {"model": [model], "model_run": [model_run]},
            properties,
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


# Input workers: worker pool 2 serves the chief's dispatcher (docs/decisions/0042).


def _launched_job(trainer_run, training) -> dict:
    """The CustomJob the Vertex executor would create for `training`."""
    launched = []

    def launch(**job):
        launched.append(job["training_job"])
        raise _Launched

    with pytest.raises(_Launched):
        trainer_run.run(launch, training)
    return launched[0]


def test_input_workers_are_pool_2_running_our_executor_with_the_dispatcher_port(trainer_run):
    training = _training(input_worker_count=2, input_worker_machine_type="n2-highcpu-16")
    job = _launched_job(trainer_run, training)
    pools = job["job_spec"]["worker_pool_specs"]
    assert pools[1] == {}  # pool 1 skipped: Vertex's empty value, not TFX's command in it
    custom_job = aiplatform_v1.CustomJob(job)  # what the API accepts
    assert [p.replica_count for p in custom_job.job_spec.worker_pool_specs] == [1, 0, 2]
    chief, _, inputs = pools
    assert chief["machine_spec"] == {"machine_type": "n1-standard-8"}
    assert inputs["machine_spec"] == {"machine_type": "n2-highcpu-16"}  # no accelerators
    for pool in (chief, inputs):
        container = pool["container_spec"]
        assert container["image_uri"] == IMAGE
        assert container["env"] == [{"name": input_workers.DISPATCHER_PORT_ENV, "value": "5050"}]
        command = container["command"]
        assert command[:3] == ["python", "-m", "tfx.scripts.run_executor"]
        assert command[command.index("--executor_class_path") + 1] == (
            "tfx_tabular.components.tabular_trainer.executor.Executor"
        )
    assert inputs["container_spec"]["command"] == chief["container_spec"]["command"]


def test_input_workers_after_the_training_workers():
    pools = _training(replica_count=3, input_worker_count=4).worker_pool_specs()
    assert [p["replica_count"] for p in pools] == [1, 2, 4]
    assert all(p["container_spec"]["env"] for p in pools)
    assert "env" not in _training(replica_count=3).worker_pool_specs()[1]["container_spec"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"input_worker_count": -1}, "input_worker_count"),
        ({"input_worker_count": 1, "input_worker_machine_type": ""}, "input_worker_machine_type"),
        ({"input_worker_count": 1, "dispatcher_port": 0}, "dispatcher_port"),
    ],
)
def test_bad_input_workers_fail_when_the_pipeline_is_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _training(**kwargs)


def _vertex_environments(pools: list[dict], dispatcher_port: int) -> dict:
    """(pool, index) → the variables Vertex sets on that replica (CLUSTER_SPEC, TF_CONFIG: pool 0
    `chief`, 1 `worker`, 2 `ps`), each at its own loopback port, and the pools' own `env` with
    the dispatcher at `dispatcher_port`."""
    task_types = input_workers.TASK_TYPES
    ports = iter(_free_ports(sum(p.get("replica_count", 0) for p in pools)))
    cluster = {
        f"workerpool{i}": [f"127.0.0.1:{next(ports)}" for _ in range(p["replica_count"])]
        for i, p in enumerate(pools)
        if p
    }
    tf_cluster = {task_types[int(name[-1])]: addresses for name, addresses in cluster.items()}
    environments = {}
    for name, addresses in cluster.items():
        pool = int(name[-1])
        own = {e["name"]: e["value"] for e in pools[pool]["container_spec"].get("env", [])}
        own[input_workers.DISPATCHER_PORT_ENV] = str(dispatcher_port)
        for index in range(len(addresses)):
            task = {"type": name, "index": index, "trial": ""}
            environments[pool, index] = {
                **own,
                "CLUSTER_SPEC": json.dumps(
                    {"cluster": cluster, "environment": "cloud", "task": task}
                ),
                "TF_CONFIG": json.dumps(
                    {
                        "cluster": tf_cluster,
                        "task": {"type": task_types[pool], "index": index},
                        "environment": "cloud",
                    }
                ),
            }
    return environments


def _start_replicas(job: dict, folder, dispatcher_port: int, pools=(0, 1, 2)) -> dict:
    """Each replica of `pools` as Vertex runs it: its pool's command in the image (`python` is
    this environment's) with Vertex's variables; name → (process, log path)."""
    specs = job["job_spec"]["worker_pool_specs"]
    started = {}
    for (pool, index), variables in _vertex_environments(specs, dispatcher_port).items():
        if pool not in pools:
            continue
        name = f"pool{pool}-{index}"
        scratch = folder / f"{name}-tmp"
        scratch.mkdir()
        log = folder / f"{name}.log"
        command = [sys.executable] + specs[pool]["container_spec"]["command"][1:]
        env = {**os.environ, "TMPDIR": str(scratch), **variables}
        with open(log, "w") as out:
            process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        started[name] = (process, log)
    return started


@pytest.mark.slow
@pytest.mark.parametrize(
    "replicas, inputs, strategy",
    [(1, 2, "the default strategy"), (2, 1, "MultiWorkerMirroredStrategy")],
    ids=["chief-and-2-input-workers", "chief-worker-and-1-input-worker"],
)
def test_the_chief_trains_through_its_input_workers_and_they_stop_when_it_is_done(
    trainer_run, tmp_path, replicas, inputs, strategy
):
    """A chief (and a training worker) and input workers, as Vertex runs them: the chief serves
    the dispatcher, the trainers train through it (multi-worker: pool 2 left out of their
    TF_CONFIG, else the strategy waits on it); the input workers register, serve, and exit 0
    once the chief is done."""
    port = free_port()
    stopped_after = {}
    names = [f"pool2-{i}" for i in range(inputs)]

    def launch(training_job, **_):
        started = _start_replicas(training_job, tmp_path, port)
        assert sorted(started) == ["pool0-0"] + (["pool1-0"] if replicas > 1 else []) + names
        try:
            for name in ["pool0-0", "pool1-0"][:replicas]:
                process, log = started.pop(name)
                assert process.wait(timeout=600) == 0, log.read_text()[-3000:]
            done = time.monotonic()
            for name, (process, log) in started.items():
                assert process.wait(timeout=60) == 0, log.read_text()[-3000:]
                stopped_after[name] = time.monotonic() - done
        finally:
            for process, _ in started.values():
                process.kill()

    trainer_run.run(launch, _training(replica_count=replicas, input_worker_count=inputs))
    for name in ["pool0-0", "pool1-0"][:replicas]:
        log = (tmp_path / f"{name}.log").read_text()
        assert f"training with {strategy}: {replicas} replica(s)" in log
        assert f"train input through the tf.data service at 127.0.0.1:{port}" in log
    chief_log = (tmp_path / "pool0-0.log").read_text()
    assert f"dispatcher serving at 127.0.0.1:{port}, {inputs} of {inputs} worker(s)" in chief_log
    for name in names:
        log = (tmp_path / f"{name}.log").read_text()
        assert f"registered with 127.0.0.1:{port}" in log
        assert "stopped: the chief is done" in log
        assert "training with" not in log
    assert max(stopped_after.values()) < 30
    if replicas > 1:
        # Only the chief's checkpoints and export are kept: the training worker wrote its own
        # into scratch, which is gone.
        assert "not the chief" not in chief_log
        assert "not the chief" in (tmp_path / "pool1-0.log").read_text()
        assert not list((tmp_path / "pool1-0-tmp").glob("tfx-tabular-worker-*"))
    serving = tf.saved_model.load(path_utils.serving_model_dir(trainer_run.model.uri))
    assert "serving_default" in serving.signatures
    properties = trainer_run.model_run.mlmd_artifact.custom_properties
    assert properties["total_steps"].int_value == 6
    assert properties["replicas"].int_value == replicas
    assert "eval_auc" in properties and "input_wait_fraction" in properties


@pytest.mark.slow
def test_input_workers_read_every_row_once_for_the_chief(trainer_run, tmp_path, monkeypatch):
    """Two input workers started with pool 2's command and Vertex's variables; this process is
    the chief (`input_workers.act` with the chief's variables): reading the train split through
    its dispatcher yields every row once, and the workers stop when it is done."""
    job = _launched_job(trainer_run, _training(input_worker_count=2))
    port = free_port()
    started = _start_replicas(job, tmp_path, port, pools=(2,))
    try:
        data = tmp_path / "ids"
        data.mkdir()
        for index in range(4):
            pq.write_table(hive_table(index * 3000, 3000), data / f"part-{index}.parquet")
        out = str(tmp_path / "id-examples")
        rows = convert_to_examples(str(data), out, num_shards=4).rows["train"]
        schema = infer_schema(read_source_metadata(out))
        chief = _vertex_environments(job["job_spec"]["worker_pool_specs"], port)[0, 0]
        monkeypatch.setenv("TF_CONFIG", "")  # `act` sets the trainers' TF_CONFIG here
        replica = input_workers.role(chief)
        assert replica.kind == "dispatcher" and replica.dispatcher == f"127.0.0.1:{port}"
        assert "ps" not in json.loads(replica.tf_config)["cluster"]
        counts = collections.Counter()

        def train(address):
            dataset = input_fn(
                out, schema, 512, split="train", training=False, data_service=address
            )
            for batch in dataset:
                counts.update(batch["id"].numpy().ravel().tolist())

        input_workers.act(replica, trainer_run.model_run.uri, None, train)
        assert len(counts) == rows and set(counts.values()) == {1}
        for process, log in started.values():
            assert process.wait(timeout=60) == 0, log.read_text()[-3000:]
            assert "stopped: the chief is done" in log.read_text()
    finally:
        for process, _ in started.values():
            process.kill()

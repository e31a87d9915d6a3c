"""`input_workers.role`: each replica's part in a Vertex job with input workers, from the
variables Vertex sets (CLUSTER_SPEC, else TF_CONFIG) and the pools' dispatcher port."""

import json

import pytest

from tfx_tabular.components.tabular_trainer import input_workers

CLUSTER = {
    "workerpool0": ["cmle-training-workerpool0-ab-0:2222"],
    "workerpool1": ["cmle-training-workerpool1-ab-0:2222"],
    "workerpool2": ["cmle-training-workerpool2-ab-0:2222", "cmle-training-workerpool2-ab-1:2222"],
}
TF_CLUSTER = {"chief": CLUSTER["workerpool0"], "worker": CLUSTER["workerpool1"]}
TF_CLUSTER["ps"] = CLUSTER["workerpool2"]


def _env(pool: int, index: int = 0, cluster_spec: bool = True) -> dict:
    task_type = input_workers.TASK_TYPES[pool]
    env = {
        input_workers.DISPATCHER_PORT_ENV: "5050",
        "TF_CONFIG": json.dumps(
            {"cluster": TF_CLUSTER, "task": {"type": task_type, "index": index}}
        ),
    }
    if cluster_spec:
        task = {"type": f"workerpool{pool}", "index": index, "trial": ""}
        env["CLUSTER_SPEC"] = json.dumps({"cluster": CLUSTER, "task": task})
    return env


@pytest.mark.parametrize("cluster_spec", [True, False], ids=["CLUSTER_SPEC", "TF_CONFIG"])
def test_each_pool_has_its_part(cluster_spec):
    chief = input_workers.role(_env(0, cluster_spec=cluster_spec))
    assert (chief.kind, chief.dispatcher) == ("dispatcher", "cmle-training-workerpool0-ab-0:5050")
    assert chief.input_workers == 2
    trainer = input_workers.role(_env(1, cluster_spec=cluster_spec))
    assert (trainer.kind, trainer.dispatcher) == ("trainer", chief.dispatcher)
    for replica in (chief, trainer):  # pool 2 is no TensorFlow task
        assert json.loads(replica.tf_config)["cluster"] == {
            "chief": CLUSTER["workerpool0"],
            "worker": CLUSTER["workerpool1"],
        }
    worker = input_workers.role(_env(2, 1, cluster_spec=cluster_spec))
    assert (worker.kind, worker.host, worker.port) == (
        "input_worker",
        "cmle-training-workerpool2-ab-1",
        2222,
    )
    assert worker.dispatcher == chief.dispatcher


def test_runs_without_input_workers_have_no_part():
    env = _env(0)
    del env[input_workers.DISPATCHER_PORT_ENV]
    assert input_workers.role(env) is None
    assert input_workers.role({}) is None


@pytest.mark.parametrize(
    "env, message",
    [
        ({input_workers.DISPATCHER_PORT_ENV: "5050"}, "neither CLUSTER_SPEC nor TF_CONFIG"),
        ({**_env(0), "CLUSTER_SPEC": "{}"}, "unreadable Vertex cluster description"),
        (
            {
                input_workers.DISPATCHER_PORT_ENV: "5050",
                "TF_CONFIG": json.dumps({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief"}}),
            },
            "unreadable",
        ),
        (
            {
                input_workers.DISPATCHER_PORT_ENV: "5050",
                "TF_CONFIG": json.dumps(
                    {"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": 0}}
                ),
            },
            "has no pool 2",
        ),
    ],
)
def test_a_replica_that_cannot_take_its_part_says_why(env, message):
    with pytest.raises(input_workers.InputWorkerError, match=message):
        input_workers.role(env)


def test_the_chief_refuses_a_data_service_of_its_own(tmp_path):
    with pytest.raises(input_workers.InputWorkerError, match="leave data_service unset"):
        input_workers.act(input_workers.role(_env(0)), str(tmp_path), "h:1", lambda _: None)

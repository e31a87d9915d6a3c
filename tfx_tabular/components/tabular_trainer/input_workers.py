"""Input workers on a Vertex AI training job: worker pool 2's replicas serve as tf.data service
workers, the chief (pool 0) runs their dispatcher while it trains, and every trainer replica reads
its train split through it (`data_service`). See docs/decisions/0042-vertex-input-worker-pools.md.

TFX's Vertex trainer executor writes one command into every pool (TabularTrainer's executor), so
each replica learns its part here, in `role`, from what Vertex sets on it (CLUSTER_SPEC, else
TF_CONFIG) and the dispatcher port the job's pools carry (`DISPATCHER_PORT_ENV`, set by
`VertexTraining`). The chief writes `DONE_FILE` into its ModelRun once it has trained; the input
workers stop when they see it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Optional

# Set on every pool of a job with input workers: the port the chief's dispatcher serves on.
DISPATCHER_PORT_ENV = "TFX_TABULAR_DISPATCHER_PORT"
# Vertex's pools in order (CLUSTER_SPEC's names) and TF_CONFIG's task type for each.
POOLS = ("workerpool0", "workerpool1", "workerpool2", "workerpool3")
TASK_TYPES = ("chief", "worker", "ps", "evaluator")
INPUT_WORKER_POOL = 2
DONE_FILE = "input_workers_done"
# Vertex starts the replicas in parallel: an input worker waits this long for the chief's
# dispatcher, the chief as long for the input workers to register.
WAIT_SECONDS = 1800.0
POLL_SECONDS = 2.0


class InputWorkerError(RuntimeError):
    """A replica of a job with input workers cannot take its part."""


@dataclasses.dataclass(frozen=True)
class Role:
    """A replica's part: `dispatcher` (the chief: serves the dispatcher and trains), `trainer`
    (another training replica) or `input_worker` (serves at `host:port`)."""

    kind: str
    dispatcher: str
    input_workers: int
    host: str = ""
    port: int = 0
    # The trainers' TF_CONFIG without the input workers' pool, which is no TensorFlow task:
    # MultiWorkerMirroredStrategy would make its first task the coordination service's leader.
    tf_config: Optional[str] = None


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _cluster(environ: Mapping[str, str]) -> tuple[dict, str, int]:
    """(pool name → addresses, this replica's pool, its index) from CLUSTER_SPEC, else TF_CONFIG
    (task types mapped to their pools)."""
    if environ.get("CLUSTER_SPEC"):
        spec = json.loads(environ["CLUSTER_SPEC"])
        return spec["cluster"], spec["task"]["type"], int(spec["task"]["index"])
    if environ.get("TF_CONFIG"):
        spec = json.loads(environ["TF_CONFIG"])
        pools = {**dict(zip(TASK_TYPES, POOLS, strict=True)), "master": POOLS[0]}
        cluster = {pools[kind]: addresses for kind, addresses in spec["cluster"].items()}
        return cluster, pools[spec["task"]["type"]], int(spec["task"]["index"])
    raise InputWorkerError(
        f"{DISPATCHER_PORT_ENV} is set but neither CLUSTER_SPEC nor TF_CONFIG: input workers "
        "run on a Vertex AI training job"
    )


def role(environ: Mapping[str, str] = os.environ) -> Optional[Role]:
    """This replica's part in a job with input workers; None in any other run."""
    port = environ.get(DISPATCHER_PORT_ENV)
    if not port:
        return None
    try:
        cluster, pool, index = _cluster(environ)
        chief = _host_port(cluster[POOLS[0]][0])[0]
        workers = len(cluster.get(POOLS[INPUT_WORKER_POOL], []))
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise InputWorkerError(f"unreadable Vertex cluster description: {error!r}") from None
    if not workers:
        raise InputWorkerError(f"{DISPATCHER_PORT_ENV} is set but the job has no pool 2")
    dispatcher = f"{chief}:{int(port)}"
    if pool == POOLS[INPUT_WORKER_POOL]:
        host, own_port = _host_port(cluster[pool][index])
        return Role("input_worker", dispatcher, workers, host=host, port=own_port)
    if pool not in POOLS[:2]:
        raise InputWorkerError(f"a job with input workers has no part for pool {pool!r}")
    tf_config = environ.get("TF_CONFIG")
    if tf_config:
        spec = json.loads(tf_config)
        spec["cluster"].pop(TASK_TYPES[INPUT_WORKER_POOL], None)
        tf_config = json.dumps(spec)
    kind = "dispatcher" if pool == POOLS[0] else "trainer"
    return Role(kind, dispatcher, workers, tf_config=tf_config)


def _say(message: str) -> None:
    print(f"input workers: {message}", flush=True)


def _done(done_path: str) -> bool:
    import tensorflow as tf

    return tf.io.gfile.exists(done_path)


def _wait_for_dispatcher(address: str) -> None:
    from tfx_tabular.training import data_service

    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            data_service.check_dispatcher(address)
            return
        except data_service.DataServiceError:
            if time.monotonic() > deadline:
                raise InputWorkerError(
                    f"the chief's dispatcher at {address} did not answer in {WAIT_SECONDS:g} s"
                ) from None


def serve(replica: Role, done_path: str) -> None:
    """An input worker: registers with the chief's dispatcher once it answers, serves until the
    chief has written `done_path`, then stops (exit code 0: Vertex restarts only failed
    replicas)."""
    from tfx_tabular.training import data_service

    if _done(done_path):  # restarted after the training ended
        _say("the chief is done already")
        return
    _wait_for_dispatcher(replica.dispatcher)
    server = data_service.start_worker(replica.dispatcher, replica.port, replica.host)
    _say(f"worker {replica.host}:{replica.port} registered with {replica.dispatcher}")
    while not _done(done_path):
        time.sleep(POLL_SECONDS)
    server.stop()
    _say(f"worker {replica.host}:{replica.port} stopped: the chief is done")


@contextlib.contextmanager
def _dispatcher(replica: Role, done_path: str) -> Iterator[None]:
    """The chief's dispatcher, serving once the input workers registered (or WAIT_SECONDS
    passed, with at least one), until the training is over; `done_path` written if it
    succeeded."""
    import tensorflow as tf

    from tfx_tabular.training import data_service

    server = data_service.start_dispatcher(_host_port(replica.dispatcher)[1])
    deadline = time.monotonic() + WAIT_SECONDS
    while server._num_workers() < replica.input_workers and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    registered = server._num_workers()
    if not registered:
        server.stop()
        raise InputWorkerError(f"no input worker registered in {WAIT_SECONDS:g} s")
    _say(
        f"dispatcher serving at {replica.dispatcher}, {registered} of "
        f"{replica.input_workers} worker(s) registered"
    )
    try:
        yield
    except BaseException:
        server.stop()  # no DONE_FILE: Vertex fails the job, or restarts this replica
        raise
    tf.io.gfile.makedirs(os.path.dirname(done_path))
    with tf.io.gfile.GFile(done_path, "w") as handle:
        handle.write("the chief trained; its input workers stop\n")
    server.stop()
    _say("the training is over: dispatcher stopped, input workers told to stop")


def act(
    replica: Role, model_run_uri: str, data_service: Optional[str], train: Callable[[str], None]
) -> None:
    """Take `replica`'s part; the trainers call `train(dispatcher address)`."""
    done_path = os.path.join(model_run_uri, DONE_FILE)
    if replica.kind == "input_worker":
        serve(replica, done_path)
        return
    if data_service:
        raise InputWorkerError(
            f"data_service={data_service!r} names a dispatcher, and this job's input workers "
            "have their own on the chief: leave data_service unset"
        )
    if replica.tf_config is not None:  # before any strategy reads it
        os.environ["TF_CONFIG"] = replica.tf_config
    if replica.kind == "trainer":
        _wait_for_dispatcher(replica.dispatcher)
        train(replica.dispatcher)
        return
    with _dispatcher(replica, done_path):
        train(replica.dispatcher)

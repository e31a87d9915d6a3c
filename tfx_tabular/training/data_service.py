"""tf.data service: TabularTrainer's input pipeline run by input workers on other machines.

A dispatcher hands out the pipeline's files to the workers that registered with it
(`ShardingPolicy.DYNAMIC`: each file goes to one worker per epoch, so every row is read once per
epoch however many workers there are), the workers read and parse them, and the trainer only
receives finished batches. `start_dispatcher` / `start_worker` are what
`tfx-tabular data-service dispatcher|worker` run; `distribute` is `input_fn`'s last step on the
trainer's side. See docs/trainer.md#input-workers-tfdata-service.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

from tfx_tabular.runners import allocator

if TYPE_CHECKING:  # TensorFlow is imported where a server or dataset is made: the CLI's parser
    import tensorflow as tf  # and its errors read this module's names without it

DEFAULT_DISPATCHER_PORT = 5050
# How long `check_dispatcher` waits for an answer: a dispatcher on the same network answers in
# milliseconds; the client would otherwise retry a wrong address for ever.
CONNECT_SECONDS = 10.0
_PROTOCOL = "grpc"
_ADDRESS = re.compile(r"^(?:grpc://)?(?P<host>\[[^\]]+\]|[^:/\s]+):(?P<port>\d{1,5})$")


class DataServiceError(RuntimeError):
    """No tf.data service dispatcher answers at the address given (or it is malformed)."""


def host_port(address: str) -> str:
    """`host:port` of a dispatcher address given as `host:port` or `grpc://host:port`."""
    match = _ADDRESS.match(address.strip())
    if not match or not 0 < int(match["port"]) < 65536:
        raise DataServiceError(
            f"{address!r} is not a tf.data service dispatcher address: give HOST:PORT or "
            "grpc://HOST:PORT"
        )
    return f"{match['host']}:{match['port']}"


def check_dispatcher(address: str, timeout: float = CONNECT_SECONDS) -> str:
    """The dispatcher's `host:port`, once something answers gRPC there; a clear error otherwise,
    within `timeout` seconds."""
    import grpc

    target = host_port(address)
    channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise DataServiceError(
            f"no tf.data service dispatcher answers at {target} (waited {timeout:g} s); start "
            "one with `tfx-tabular data-service dispatcher`, or check the address"
        ) from None
    finally:
        channel.close()
    return target


def distribute(dataset: tf.data.Dataset, address: str, job_name: Optional[str]) -> tf.data.Dataset:
    """`dataset` read by the service's workers, each file by one of them. Consumers passing the
    same `job_name` share one stream (each batch goes to one of them: several trainer workers);
    None: this consumer's own job."""
    import tensorflow as tf

    return dataset.apply(
        tf.data.experimental.service.distribute(
            processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC,
            service=f"{_PROTOCOL}://{check_dispatcher(address)}",
            job_name=job_name,
            # Uncompressed: decompressing is most of what receiving costs the trainer, whose CPU
            # is what the service is there to free (and fingerprints, random 64-bit values,
            # hardly compress).
            compression=None,
        )
    )


def start_dispatcher(
    port: int = DEFAULT_DISPATCHER_PORT, work_dir: Optional[str] = None
) -> tf.data.experimental.service.DispatchServer:
    """A dispatcher serving on `port` (0: any free one). With `work_dir` (a folder or `gs://`
    path) it journals its state there and, restarted on the same folder, resumes its jobs."""
    import tensorflow as tf

    config = tf.data.experimental.service.DispatcherConfig(
        port=port, protocol=_PROTOCOL, work_dir=work_dir, fault_tolerant_mode=bool(work_dir)
    )
    return tf.data.experimental.service.DispatchServer(config)


def start_worker(
    dispatcher: str, port: int = 0, host: str = "localhost"
) -> tf.data.experimental.service.WorkerServer:
    """An input worker registered with `dispatcher`, serving on `port` (0: any free one); `host`
    is the name trainers reach it by (a pod's or VM's address, not localhost, across machines)."""
    import tensorflow as tf

    allocator.reuse_freed_memory(allocator.INPUT_KEPT_BYTES)  # it decodes the trainer's input
    config = tf.data.experimental.service.WorkerConfig(
        dispatcher_address=check_dispatcher(dispatcher),
        worker_address=f"{host}:%port%",
        port=port,
        protocol=_PROTOCOL,
    )
    return tf.data.experimental.service.WorkerServer(config)

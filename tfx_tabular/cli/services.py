"""The `data-service` command: a tf.data service dispatcher or input worker for TabularTrainer's
input (`run --data-service`), serving until Ctrl-C or SIGTERM. It loads TensorFlow, not Beam or
TFX."""

from __future__ import annotations

import argparse
import signal
import socket
from typing import NoReturn

from tfx_tabular.cli.common import non_negative_int, say


def _free_port() -> int:
    """A port nothing listens on now: the worker must know its own port to tell the dispatcher
    where trainers reach it."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def cmd_data_service(args) -> NoReturn:
    from tfx_tabular.training import data_service

    if args.role == "dispatcher":
        server = data_service.start_dispatcher(args.port, args.work_dir)
        address = server.target.removeprefix("grpc://")
        say(args, f"tf.data service dispatcher serving on {address}; Ctrl-C stops it")
    else:
        port = args.port or _free_port()
        server = data_service.start_worker(args.dispatcher, port, args.host)
        address = f"{args.host}:{port}"
        say(args, f"tf.data service worker {address} registered with {args.dispatcher}")
    while True:  # the servers run in TensorFlow's threads; this one waits for the signal
        signal.pause()


def add_commands(sub, common: argparse.ArgumentParser) -> None:
    from tfx_tabular.training.data_service import DEFAULT_DISPATCHER_PORT

    p = sub.add_parser(
        "data-service",
        parents=[common],
        help="a tf.data service dispatcher or input worker for `run --data-service`",
        description="Serve a tf.data service dispatcher or input worker until Ctrl-C or SIGTERM; "
        "trainers given the dispatcher's HOST:PORT (`run --data-service`) have the workers "
        "read and parse their input.",
    )
    roles = p.add_subparsers(dest="role", required=True, metavar="ROLE")
    d = roles.add_parser("dispatcher", parents=[common], help="hands the input files out")
    d.add_argument(
        "--port",
        type=non_negative_int,
        default=DEFAULT_DISPATCHER_PORT,
        help="the port to serve on (0: any free one)",
    )
    d.add_argument(
        "--work-dir",
        default=None,
        help="a folder or gs:// path where the dispatcher journals its state, so that, restarted "
        "on it, it resumes its jobs (default: none: a restart loses them)",
    )
    d.set_defaults(func=cmd_data_service)
    w = roles.add_parser("worker", parents=[common], help="reads and parses input for trainers")
    w.add_argument("--dispatcher", required=True, help="the dispatcher's HOST:PORT")
    w.add_argument(
        "--port", type=non_negative_int, default=0, help="the port to serve on (0: a free one)"
    )
    w.add_argument(
        "--host",
        default="localhost",
        help="the name or IP address trainers reach this worker by (across machines: the "
        "pod's or VM's address, not localhost)",
    )
    w.set_defaults(func=cmd_data_service)

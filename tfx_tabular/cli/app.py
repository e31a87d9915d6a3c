"""Conventions every subcommand shares: `--verbose` / `--quiet` / `--json` before or after the
subcommand, `--version`, one JSON document on stdout with `--json` (logs and progress on stderr),
and exit codes: 0 success, 1 bad input or data, 2 usage, 3 a pipeline task or platform failure.
Errors are one or two lines (a hint where there is one); `--verbose` adds the traceback. The
errors' codes and hints, and what the commands share, are in `common`."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import os
import sys
import warnings
from typing import Optional, Sequence

from tfx_tabular.cli import signals
from tfx_tabular.cli.common import PROG, Exit, Parser, report_error

VERSION_FLAG = "--version"


def configure_logging(verbose: bool, quiet: bool) -> None:
    """Silence TensorFlow / absl / Beam / google-api warning floods unless `verbose`."""
    if verbose:
        logging.basicConfig(level=logging.INFO)
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")  # Beam's worker processes inherit it
    warnings.filterwarnings("ignore")
    logging.basicConfig(
        level=logging.ERROR if quiet else logging.WARNING, format="%(levelname)s: %(message)s"
    )
    for name in ("apache_beam", "absl", "tensorflow", "google", "tfx", "numba"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def versions_document() -> dict:
    """The package's version and each of its dependencies' (the installed ones), for --json."""
    import platform
    import re
    from importlib import metadata

    requirements = [r for r in metadata.requires(PROG) or () if "extra ==" not in r]
    names = sorted({re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in requirements})
    return {
        "package": PROG,
        "version": _version(PROG),
        "python": platform.python_version(),
        "dependencies": {name: _version(name) for name in names},
    }


def _versions() -> str:
    return (
        f"{PROG} {_version(PROG)} (TFX {_version('tfx')}, TensorFlow "
        f"{_version('tensorflow')}, Apache Beam {_version('apache-beam')}, pyarrow "
        f"{_version('pyarrow')})"
    )


def _print_versions(argv: Sequence[str]) -> bool:
    """--version anywhere before `--` (before or after the subcommand, whatever else the command
    line lacks): print the versions, as JSON with --json, and say so."""
    flags = argv[: argv.index("--")] if "--" in argv else argv
    if VERSION_FLAG not in flags:
        return False
    if "--json" in flags:
        print(json.dumps(versions_document(), indent=1, sort_keys=True))
    else:
        print(_versions())
    return True


def global_flags(for_subcommand: bool) -> argparse.ArgumentParser:
    """--verbose / --quiet / --json / --version, accepted before or after the subcommand."""
    default = argparse.SUPPRESS if for_subcommand else False
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_mutually_exclusive_group()
    group.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        default=default,
        help="show TensorFlow, absl and Beam logs, and tracebacks",
    )
    group.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        default=default,
        help="errors only: no progress, no summaries",
    )
    flags.add_argument(
        "--json",
        action="store_true",
        default=default,
        help="one JSON document on stdout (logs and progress on stderr)",
    )
    flags.add_argument(
        VERSION_FLAG,
        action="store_true",
        default=default,
        help="print the versions of the package and its stack, and exit (with --json: of every "
        "dependency, as JSON)",
    )
    return flags


def build_parser() -> argparse.ArgumentParser:
    from tfx_tabular.cli import data, pipelines, services

    parser = Parser(
        prog=PROG,
        parents=[global_flags(for_subcommand=False)],
        description="Train TensorFlow models on partitioned Parquet larger than memory, in TFX.",
        epilog="exit codes: 0 success, 1 bad input or data, 2 usage, 3 a pipeline task or "
        "platform failure",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = global_flags(for_subcommand=True)
    data.add_commands(sub, common)
    pipelines.add_commands(sub, common)
    services.add_commands(sub, common)
    return parser


@contextlib.contextmanager
def _stdout_for_json(enabled: bool):
    """With --json, everything else written to stdout (our lines, TFX's and Beam's prints, child
    processes) goes to stderr; yields the real stdout for the one JSON document."""
    if not enabled:
        yield sys.stdout
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    real = os.fdopen(os.dup(saved), "w")
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield real
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        real.flush()
        real.close()


def _report_crashes() -> None:
    """A crash in compiled code (a segfault in a library's threads) prints every thread's Python
    stack to the standard error's file, which stays open when an interrupt mutes `sys.stderr`:
    otherwise the process ends with nothing said."""
    if not faulthandler.is_enabled():
        with contextlib.suppress(AttributeError, OSError, ValueError):  # no file (in-process)
            faulthandler.enable(file=sys.__stderr__, all_threads=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    # TFX 1.16, TFT and TFMA are Keras 2 code: `tf.keras` is Keras 2 here and in every process
    # this one starts (Beam workers, compiled tasks), before anything imports TensorFlow.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    _report_crashes()
    argv = list(sys.argv[1:] if argv is None else argv)
    if _print_versions(argv):
        return Exit.OK
    args = build_parser().parse_args(argv)  # usage errors exit 2 here
    configure_logging(args.verbose, args.quiet)
    if args.quiet:
        from tfx_tabular.runners.progress import QUIET_VARIABLE

        os.environ[QUIET_VARIABLE] = "off"  # the components this command runs stay quiet too
    with _stdout_for_json(args.json) as stdout, signals.handled():  # SIGTERM as Ctrl-C
        try:
            document = args.func(args)
        except KeyboardInterrupt:
            signals.leave(PROG)  # "interrupted"; exits at once, 130 or 143
        except Exception as error:  # every failure ends in one short message and an exit code
            if signals.interrupted():  # the interrupt, re-raised by a runner as its own error
                signals.leave(PROG)
            return report_error(error, args.verbose)
        if args.json:
            stdout.write(json.dumps(document, indent=1, sort_keys=True, default=str) + "\n")
    return Exit.OK

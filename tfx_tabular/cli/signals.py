"""Ctrl-C (SIGINT) and SIGTERM (what Kubernetes sends a task's container, and `kill`): both end a
command the same way, within seconds, leaving no half-published output.

While `handled()` is active, either signal raises `Interrupted` (a KeyboardInterrupt) in the main
thread, except during a step that must finish (publishing a conversion, see
`tfx_tabular.runners.interrupts`), which it then follows. The command's own cleanup runs as the
exception unwinds (a conversion discards its staging folder), then `leave` stops the threads
still converting and the processes the command started, and exits at once with 130 (SIGINT) or
143 (SIGTERM): not waiting for the runner's threads, which would keep the process alive until
their work was done. If the cleanup itself hangs, or a second signal comes, the process exits
after GRACE_SECONDS, or at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from typing import Iterator, NoReturn

from tfx_tabular.runners import interrupts

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE_SECONDS = 10.0  # for the cleanup as the interrupt unwinds, then the exit is forced
CHILD_GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL to the processes the command started
# Threads running this code are still converting when the main thread is interrupted.
CONVERTING = ("tfx_tabular.conversion.transform",)
# ...and these are discarding their staging folder once those stopped.
CONVERSION = ("tfx_tabular.conversion.convert", "tfx_tabular.conversion.publish")

_signals: list[int] = []  # received while `handled()`
_stderr = sys.stderr  # where `leave` says "interrupted", whatever is muted meanwhile


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, raised in the main thread; its message names the signal."""


def _force_exit(signum: int) -> NoReturn:
    interrupts.stop_child_processes(CHILD_GRACE_SECONDS)
    for stream in (sys.stdout, _stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(128 + signum)


def _exit_after_grace(signum: int) -> None:
    """Daemon thread: the cleanup had GRACE_SECONDS; a publish under way may still finish."""
    threading.Event().wait(GRACE_SECONDS)
    while interrupts.is_holding():
        threading.Event().wait(0.1)
    _force_exit(signum)


def _mute_stderr() -> None:
    logging.disable(logging.CRITICAL)
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the rest of this process)


def _handler(signum: int, _frame) -> None:
    if interrupts.hold(signum):
        return
    if _signals:  # a second signal: no more waiting for the cleanup
        _force_exit(signum)
    _signals.append(signum)
    if not logging.getLogger().isEnabledFor(logging.INFO):  # unless --verbose, the tracebacks
        _mute_stderr()  # of the runner's threads as they are stopped are noise
    threading.Thread(
        target=_exit_after_grace, args=(signum,), daemon=True, name="exit-after-grace"
    ).start()
    raise Interrupted(signal.Signals(signum).name)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` inside (the previous handlers come back after)."""
    global _stderr
    _signals.clear()
    _stderr = sys.stderr
    previous = {s: signal.signal(s, _handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def interrupted() -> bool:
    """Whether a signal came: a runner may re-raise the interrupt as an error of its own."""
    return bool(_signals)


def leave(prog: str) -> NoReturn:
    """Say "interrupted", stop what still converts and the processes started, and exit now with
    128 + the signal's number, as a shell reports a process a signal ended: 130, 143."""
    print(f"{prog}: interrupted", file=_stderr, flush=True)
    interrupts.stop_threads(CONVERTING, timeout=GRACE_SECONDS / 2)
    interrupts.wait_for_threads(CONVERSION, timeout=GRACE_SECONDS / 2)
    _force_exit(_signals[0] if _signals else signal.SIGINT)

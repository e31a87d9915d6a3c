"""Interruptions (Ctrl-C, SIGTERM): the steps that must not stop halfway, and what an interrupted
command must stop before it exits.

A command's signal handler (`tfx_tabular.cli.signals`) raises KeyboardInterrupt in the main
thread, unless a step inside `uninterruptible()` runs (publishing a conversion: all of it or none
of it must be in place); then it `hold`s the signal, which is delivered again when the step ends.

A KeyboardInterrupt reaches the main thread only. Threads still converting (the in-process
runner's workers, or a pipeline run inside a component executor's thread) would go on writing
until the process ends, and non-daemon ones keep it from ending: `stop_threads` raises an
exception in them, `stop_child_processes` ends the worker processes a runner started.
No Beam import here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from typing import Iterator, Sequence

_lock = threading.RLock()  # re-entrant: a signal handler may run while its thread holds it
_steps = 0  # uninterruptible steps running, in any thread
_held: list[int] = []  # signals that arrived during them


class Stopped(Exception):
    """Raised in a thread by `stop_threads`: its command was interrupted. An Exception, not a
    KeyboardInterrupt, so that a runner reports the failed bundle instead of losing its worker."""


@contextlib.contextmanager
def uninterruptible() -> Iterator[None]:
    """A step that must run to its end: a Ctrl-C or SIGTERM meanwhile takes effect after it."""
    global _steps
    with _lock:
        _steps += 1
    try:
        yield
    finally:
        with _lock:
            _steps -= 1
            pending = _held[:1] if not _steps else []
            if not _steps:
                _held.clear()
        for signum in pending:
            os.kill(os.getpid(), signum)  # the handler now raises in the main thread


def hold(signum: int) -> bool:
    """For a signal handler: True (and the signal kept for later) if an uninterruptible step runs."""
    with _lock:
        if _steps:
            _held.append(signum)
        return bool(_steps)


def is_holding() -> bool:
    with _lock:
        return bool(_steps)


def _threads_in(modules: Sequence[str]) -> list[threading.Thread]:
    """The other threads whose stack holds a frame of one of `modules` (by module name)."""
    frames = sys._current_frames()
    found = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident)
        if thread is threading.current_thread() or frame is None:
            continue
        while frame is not None and frame.f_globals.get("__name__") not in modules:
            frame = frame.f_back
        if frame is not None:
            found.append(thread)
    return found


def stop_threads(modules: Sequence[str], timeout: float, settle: float = 0.3) -> bool:
    """Raise `Stopped` in every other thread running code of `modules` (at its next Python
    instruction: a call into C, such as a compiled kernel or a read, finishes first), and in any
    that enters it again, until none has run it for `settle` seconds (a runner's thread between
    two elements of a bundle is about to start the next one); True if that happened within
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    previous: set[int] = set()
    while True:
        running = {thread.ident for thread in _threads_in(modules)}
        now = time.monotonic()
        if running:
            quiet_since = now
        elif now - quiet_since >= settle:
            return True
        if now > deadline:
            return not running
        for ident in running - previous:  # just entered: those still in it are unwinding
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(ident), ctypes.py_object(Stopped)
            )
        previous = running
        time.sleep(0.01)


def wait_for_threads(modules: Sequence[str], timeout: float) -> bool:
    """Wait up to `timeout` seconds until no other thread runs code of `modules`."""
    deadline = time.monotonic() + timeout
    while _threads_in(modules):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _child_processes() -> dict[int, list[int]]:
    """Every process's children, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
        children.setdefault(parent, []).append(int(name))
    return children


def descendants(pid: int) -> list[int]:
    """The processes `pid` started, and theirs."""
    children = _child_processes()
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def stop_child_processes(grace: float) -> None:
    """SIGTERM to every process this one started (Beam's SDK workers, a worker pool), and SIGKILL
    to those still running after `grace` seconds."""
    processes = descendants(os.getpid())
    for pid in processes:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while processes and time.monotonic() < deadline:
        time.sleep(0.05)
        processes = [pid for pid in processes if _is_running(pid)]
    for pid in processes:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _is_running(pid: int) -> bool:
    """Alive and not a zombie (a child that ended but was not waited for is no longer running)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

"""Interruptions inside a process: a step that must finish holds a Ctrl-C / SIGTERM until it
ends (in any thread), and the threads still converting can be stopped from another."""

import collections
import contextlib
import functools
import os
import signal
import threading
import time

import pytest

from tfx_tabular.runners import interrupts


def _raise_unless_held(signum, _frame):
    """What the CLI's handler does with a signal (tfx_tabular.cli.signals, which also exits)."""
    if interrupts.hold(signum):
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def _handler():
    previous = signal.signal(signal.SIGINT, _raise_unless_held)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_signal_during_an_uninterruptible_step_takes_effect_when_it_ends():
    steps = []
    with _handler(), pytest.raises(KeyboardInterrupt):
        with interrupts.uninterruptible():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # the handler ran meanwhile, and held the signal
            steps.append("step finished")
        time.sleep(2)
        steps.append("not reached")
    assert steps == ["step finished"]
    assert not interrupts.is_holding()


def test_a_step_in_another_thread_holds_the_main_threads_interrupt():
    started, finish = threading.Event(), threading.Event()

    def step():
        with interrupts.uninterruptible():
            started.set()
            finish.wait(10)

    thread = threading.Thread(target=step)
    with _handler():
        thread.start()
        assert started.wait(10)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # held: no KeyboardInterrupt while the step runs
        with pytest.raises(KeyboardInterrupt):
            finish.set()
            thread.join()
            time.sleep(2)  # delivered again as the step ended


def test_without_a_step_the_signal_is_not_held():
    with _handler(), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(2)


def _spin(until: threading.Event, outcome: list) -> None:
    try:
        while not until.is_set():
            time.sleep(0.01)
        outcome.append("finished")
    except interrupts.Stopped:
        outcome.append("stopped")


def test_stop_threads_stops_only_the_threads_running_the_modules_named():
    done = threading.Event()
    outcome = []
    mine = threading.Thread(target=_spin, args=(done, outcome), daemon=True)
    other = threading.Thread(target=done.wait, args=(10,), daemon=True)  # threading's code only
    mine.start()
    other.start()
    assert interrupts.stop_threads([__name__], timeout=5)
    mine.join(5)
    assert outcome == ["stopped"]
    assert other.is_alive()
    done.set()
    other.join(5)
    assert not other.is_alive()


_finished = threading.Event()


def _element(_):
    time.sleep(0.1)
    _finished.set()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_stop_threads_catches_a_thread_that_enters_the_code_again():
    """A runner's thread between two elements of a bundle runs its own code, then ours again."""
    gaps = iter(functools.partial(time.sleep, 0.2), "never")  # 0.2 s in C between elements
    bundle = functools.partial(collections.deque, map(_element, gaps), 0)
    thread = threading.Thread(target=bundle, daemon=True)
    thread.start()
    assert _finished.wait(5)  # between two elements now
    # settle far above the gap: on a loaded machine a thread back from its sleep may wait for
    # a core well past the gap itself.
    assert interrupts.stop_threads([__name__], timeout=30, settle=3)
    thread.join(5)
    assert not thread.is_alive()


def test_stop_threads_gives_up_on_a_thread_that_does_not_leave():
    done = threading.Event()

    def stubborn():
        while not done.is_set():
            with contextlib.suppress(interrupts.Stopped):
                time.sleep(0.01)

    thread = threading.Thread(target=stubborn, daemon=True)
    thread.start()
    try:
        assert not interrupts.stop_threads([__name__], timeout=0.5)
        assert thread.is_alive()
    finally:
        done.set()
        thread.join(5)

"""Progress of long work, for people: a live bar (rich) when stderr is a terminal, plain lines at
most every `every` seconds when it is not (CI, Kubeflow and Vertex logs), nothing when
TFX_TABULAR_PROGRESS=off (what `tfx-tabular --quiet` sets for the components it runs)."""

from __future__ import annotations

import os
import sys
import time
from typing import Optional, TextIO

# "off" under --quiet: the progress display and the conversion's compile notice stay silent (the
# CLI sets it for the components a command runs, which may run in other processes).
QUIET_VARIABLE = "TFX_TABULAR_PROGRESS"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """`with Progress("converting", total, "rows") as p: p.update(done, note)`: positions are
    absolute; `note` is extra text (loss, input wait, ...)."""

    def __init__(
        self,
        description: str,
        total: int,
        unit: str,
        *,
        stream: Optional[TextIO] = None,
        live: Optional[bool] = None,
        every: float = 10.0,
    ):
        self._description, self._total, self._unit = description, max(int(total), 1), unit
        self._stream = stream or sys.stderr
        self._off = os.environ.get(QUIET_VARIABLE) == "off"
        self._live = self._stream.isatty() if live is None else live
        self._every = every
        self._start = self._last_line = time.monotonic()
        self._done, self._note = 0, ""
        self._first: Optional[tuple[int, float]] = None  # (done, time) at the first update
        self._bar = None

    def __enter__(self) -> Progress:
        if self._live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(self._unit),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[note]}"),
                console=Console(file=self._stream),
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self._description, total=self._total, rate="", note="")
        return self

    def rate(self) -> float:
        """Per second since the first update (start-up, e.g. tracing a tf.function, excluded)."""
        if self._first is None:
            return 0.0
        done, at = self._first
        elapsed = time.monotonic() - at
        return (self._done - done) / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        """The plain-text state: `converting: 120,000/200,000 rows (60%), 95,000 rows/s, ETA 1s`."""
        rate = self.rate()
        text = (
            f"{self._description}: {self._done:,}/{self._total:,} {self._unit} "
            f"({self._done / self._total:.0%}), {rate:,.0f} {self._unit}/s"
        )
        if 0 < self._done < self._total and rate > 0:
            text += f", ETA {_duration((self._total - self._done) / rate)}"
        return text + (f", {self._note}" if self._note else "")

    def update(self, done: int, note: str = "") -> None:
        if self._first is None:
            self._first = (int(done), time.monotonic())
        self._done, self._note = int(done), note
        if self._bar is not None:
            self._bar.update(
                self._task, completed=self._done, rate=f"{self.rate():,.0f}/s", note=note
            )
        elif not self._off and time.monotonic() - self._last_line >= self._every:
            self._last_line = time.monotonic()
            print(self.line(), file=self._stream, flush=True)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif exc[0] is None and not self._off:
            print(
                self.line() + f" in {_duration(time.monotonic() - self._start)}",
                file=self._stream,
                flush=True,
            )

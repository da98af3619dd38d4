"""One progress facility for every long computation: named phases, optionally counted (``done`` of ``total``).

The library reports progress through a callback, ``progress(phase, done=None, total=None)`` (the shape of deeptime's
``ProgressCallback``: a description, a position and a total), and never prints. :func:`phase_reporter` adapts what a
caller passed to :func:`~tracetochain.analysis.analyze` and friends:

- ``None``: nothing is reported;
- a one-argument callable (the original ``progress: Callable[[str], None]``): called with the phase name once per
  phase, as before;
- a callable accepting ``(phase, done, total)``: called on every step, ``done``/``total`` None while a phase has no
  count yet.

The command line renders the same calls (:func:`console_progress`): on a terminal a live rich.progress bar with the
phase's name, its count, the elapsed time and the time remaining; elsewhere (CI logs, pipes) one plain line per
finished phase with its duration, on stderr; nothing with ``-q``. ``TRACETOCHAIN_PROGRESS`` overrides the choice:
``bar``, ``lines``, ``off`` (``auto``, the default, picks bar or lines from the stream).
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO

#: Environment variable choosing the command line's progress display (auto, bar, lines, off).
PROGRESS_ENV = "TRACETOCHAIN_PROGRESS"
#: In lines mode, phases shorter than this are not printed (a fast command stays quiet; a long one is narrated).
LINE_MIN_SECONDS = 2.0


class ProgressCallback(Protocol):
    """``progress(phase, done=None, total=None)``: the library's progress calls."""

    def __call__(self, phase: str, done: int | None = None, total: int | None = None) -> None: ...


def _accepts_counts(callback: Callable[..., Any]) -> bool:
    try:
        inspect.signature(callback).bind("phase", 0, 1)
    except TypeError:
        return False
    except ValueError:  # a builtin without a signature: call it the original way
        return False
    return True


def phase_reporter(progress: Callable[..., Any] | None) -> ProgressCallback:
    """The library-side adapter of a ``progress=`` argument (module docstring): always callable as
    ``report(phase, done=None, total=None)``."""
    if progress is None:
        return _silent
    if isinstance(progress, _Reporter):
        return progress
    return _Reporter(progress, _accepts_counts(progress))


def _silent(phase: str, done: int | None = None, total: int | None = None) -> None:
    return None


class _Reporter:
    """Forwards counted steps to a three-argument callback, and only phase changes to a one-argument one."""

    def __init__(self, callback: Callable[..., Any], counts: bool) -> None:
        self.callback = callback
        self.counts = counts
        self.phase: str | None = None

    def __call__(self, phase: str, done: int | None = None, total: int | None = None) -> None:
        if self.counts:
            self.callback(phase, done, total)
        elif phase != self.phase:
            self.callback(phase)
        self.phase = phase


def counted(progress: ProgressCallback, phase: str, items: list[Any] | range | tuple[Any, ...]) -> Iterator[Any]:
    """Iterate ``items`` reporting ``phase`` as ``done`` of ``len(items)`` (0 before the first, n after the last)."""
    total = len(items)
    progress(phase, 0, total)
    for i, item in enumerate(items):
        yield item
        progress(phase, i + 1, total)


class _Lines:
    """One plain line per finished phase with its wall time, for logs and pipes."""

    def __init__(self, stream: TextIO, min_seconds: float) -> None:
        self.stream = stream
        self.min_seconds = min_seconds
        self.phase: str | None = None
        self.start = 0.0
        self.count: tuple[int, int] | None = None

    def __call__(self, phase: str, done: int | None = None, total: int | None = None) -> None:
        if phase != self.phase:
            self.finish()
            self.phase, self.start, self.count = phase, time.perf_counter(), None
        if done is not None and total is not None:
            self.count = (done, total)

    def finish(self) -> None:
        if self.phase is None:
            return
        took = time.perf_counter() - self.start
        if took >= self.min_seconds:
            count = f" ({self.count[0]}/{self.count[1]})" if self.count else ""
            print(f"  {self.phase}{count}: {took:.1f} s", file=self.stream, flush=True)
        self.phase = None


class _Bar:
    """A live rich.progress bar: the phase's name, its count, elapsed time and time remaining (transient)."""

    def __init__(self, console: Any) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=console, transient=True)
        self.task: Any = None
        self.phase: str | None = None


    def __call__(self, phase: str, done: int | None = None, total: int | None = None) -> None:
        if phase != self.phase:
            if self.task is not None:
                self.progress.remove_task(self.task)
            self.task = self.progress.add_task(phase, total=total)
            self.phase = phase
            self.progress.update(self.task, completed=done or 0, total=total)
            self.progress.refresh()  # a new phase is shown at once, not at the next tick
            return
        self.progress.update(self.task, completed=done or 0, total=total)

    def stop(self) -> None:
        self.progress.stop()


def progress_mode(stream: TextIO, quiet: bool, *, terminal: bool | None = None) -> str:
    """``off``, ``bar`` or ``lines`` for a command writing progress to ``stream`` (module docstring); ``terminal``
    overrides the stream's own answer (a rich Console's ``is_terminal``)."""
    if quiet:
        return "off"
    chosen = os.environ.get(PROGRESS_ENV, "auto").strip().lower()
    if chosen in ("off", "bar", "lines"):
        return chosen
    if terminal is None:
        isatty = getattr(stream, "isatty", None)
        terminal = bool(callable(isatty) and isatty())
    return "bar" if terminal else "lines"


@contextmanager
def console_progress(quiet: bool = False, *, stream: TextIO | None = None, console: Any = None,
                     min_seconds: float | None = None) -> Iterator[ProgressCallback]:
    """The command line's progress display, as a callback to pass as ``progress=`` (module docstring).

    ``console``: a rich Console to draw the bar on (default: one on ``stream``, standard error). A phase still
    running when the block raises is not reported as finished. ``min_seconds``: shortest phase given a line
    (default :data:`LINE_MIN_SECONDS`)."""
    if stream is not None:
        out = stream
    else:
        out = console.file if console is not None else sys.stderr
    mode = progress_mode(out, quiet, terminal=None if console is None else console.is_terminal)
    if mode == "off":
        yield _silent
        return
    if mode == "lines":
        lines = _Lines(out, LINE_MIN_SECONDS if min_seconds is None else min_seconds)
        yield lines
        lines.finish()
        return
    from rich.console import Console

    bar = _Bar(console if console is not None else Console(file=out, force_terminal=True))
    bar.progress.start()
    try:
        yield bar
    finally:
        bar.stop()


__all__ = ["PROGRESS_ENV", "ProgressCallback", "console_progress", "counted", "phase_reporter", "progress_mode"]

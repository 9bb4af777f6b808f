"""The one progress bar: rich's on stderr when it is importable, else a one-line counter.

It shows tasks done of all, the time so far, an estimate of the time left and the task in hand
(with ``(+N)`` when N more run beside it). :meth:`Progress.log` prints a line above the bar, which
is where a task's own output goes, so the two never tear each other apart.
"""
from __future__ import annotations

import sys
import time
from typing import Any


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds + 0.5), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """A progress bar on stderr: rich's when it is importable, else a one-line counter."""

    def __init__(self, total: int, enabled: bool = True, label: str = "analyze") -> None:
        self.total, self.done, self.enabled, self.label = total, 0, enabled, label
        self.current = ""
        self._t0 = time.monotonic()
        self._rich = None
        if not enabled:
            return
        try:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            from rich.progress import Progress as RichProgress
        except ImportError:
            return
        self._rich = RichProgress(
            TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"),
            console=Console(file=sys.stderr), transient=False,
        )
        self._id = self._rich.add_task("", total=total)

    def __enter__(self) -> "Progress":
        self._t0 = time.monotonic()
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self._plain() and self.total:
            sys.stderr.write("\n")

    def _plain(self) -> bool:
        return self.enabled and self._rich is None and sys.stderr.isatty()

    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None before the first task is done."""
        if not self.done:
            return None
        return (time.monotonic() - self._t0) / self.done * (self.total - self.done)

    def start(self, name: str) -> None:
        """The task (or tasks) in hand."""
        self.current = name
        if self._rich is not None:
            self._rich.update(self._id, description=name)
        elif self._plain():
            self._draw()

    def advance(self, name: str) -> None:
        self.done += 1
        if self._rich is not None:
            self._rich.update(self._id, advance=1, description=self.current or name)
        elif self._plain():
            self._draw(self.current or name)

    def log(self, text: str) -> None:
        """A line (or several) above the bar, e.g. what a task printed."""
        if self._rich is not None:
            self._rich.console.print(text, markup=False, highlight=False, soft_wrap=True)
            return
        if self._plain():
            sys.stderr.write("\r\033[K")
        sys.stderr.write(text.rstrip("\n") + "\n")
        if self._plain():
            self._draw()

    def _draw(self, name: str | None = None) -> None:
        eta = self.eta_s()
        when = f"{_clock(time.monotonic() - self._t0)} ETA {_clock(eta) if eta is not None else '-:--'}"
        line = f"{self.label} [{self.done}/{self.total}] {when} {(name or self.current)[:50]}"
        sys.stderr.write(f"\r\033[K{line}")
        sys.stderr.flush()

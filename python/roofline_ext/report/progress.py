"""The one progress bar: rich's on stderr when it is importable, else a one-line counter."""
from __future__ import annotations

import sys
from typing import Any


class Progress:
    """A progress bar on stderr: rich's when it is importable, else a one-line counter."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total, self.done, self.enabled = total, 0, enabled
        self._rich = None
        if not enabled:
            return
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress
        except ImportError:
            return
        self._rich = RichProgress(
            TextColumn("[bold]analyze"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.description}"), console=Console(file=sys.stderr), transient=False,
        )
        self._id = self._rich.add_task("", total=total)

    def __enter__(self) -> "Progress":
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self.enabled and self.total and sys.stderr.isatty():
            sys.stderr.write("\n")

    def start(self, name: str) -> None:
        if self._rich is not None:
            self._rich.update(self._id, description=name)

    def advance(self, name: str) -> None:
        self.done += 1
        if self._rich is not None:
            self._rich.update(self._id, advance=1, description=name)
        elif self.enabled and sys.stderr.isatty():
            sys.stderr.write(f"\ranalyze [{self.done}/{self.total}] {name[:60]:<60}")
            sys.stderr.flush()

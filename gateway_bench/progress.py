"""The progress bar of a bench run, on stderr; or none (`--json -`, or not a terminal's wish).

It refreshes twice a second from rich's own thread: a bar that repaints often would take CPU
from the gateway being measured on the same two cores.
"""

from __future__ import annotations

from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class Reporter(Protocol):
    def start(self, total: int) -> None: ...
    def step(self, label: str) -> None:
        """The next run is `label`."""
        ...

    def advance(self) -> None: ...
    def stop(self) -> None: ...


class Silent:
    def start(self, total: int) -> None:
        return None

    def step(self, label: str) -> None:
        return None

    def advance(self) -> None:
        return None

    def stop(self) -> None:
        return None


class Bar:
    def __init__(self, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("[bold]gateway bench[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=console or Console(stderr=True),
            refresh_per_second=2,
            transient=True,
        )
        self._task = self._progress.add_task("", total=None)

    def start(self, total: int) -> None:
        self._progress.update(self._task, total=total, completed=0)
        self._progress.start()

    def step(self, label: str) -> None:
        self._progress.update(self._task, description=label)

    def advance(self) -> None:
        self._progress.advance(self._task)

    def stop(self) -> None:
        self._progress.stop()

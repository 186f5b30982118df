"""The progress bar of a conformance run, on stderr (or none: `--no-progress`, `--json -`).

bar = Bar(); bar.start(276); ...; bar.done(result); ...; bar.stop()
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gateway.conformance.run import Result


class Silent:
    def start(self, total: int) -> None:
        return None

    def done(self, result: Result) -> None:
        return None

    def stop(self) -> None:
        return None


class Bar(Silent):
    def __init__(self, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("[bold]gateway conformance[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console or Console(stderr=True),
            refresh_per_second=4,
            transient=True,
        )
        self._task = self._progress.add_task("", total=None)
        self._hidden = 0

    def start(self, total: int) -> None:
        self._progress.update(self._task, total=total, completed=0)
        self._progress.start()

    def done(self, result: Result) -> None:
        self._hidden += result.verdict == "hidden"
        shown = f"{result.id}" + (
            f"  [red]hidden so far: {self._hidden}[/red]" if self._hidden else ""
        )
        self._progress.update(self._task, advance=1, description=shown)

    def stop(self) -> None:
        self._progress.stop()

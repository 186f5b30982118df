"""What bounds an agent run: its limits and what a cut response does with its tool calls."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class CutPolicy(enum.StrEnum):
    """What a response cut at max tokens does with its tool calls."""

    REFUSE = "refuse"  # answer each with an error result and continue (the default)
    END = "end"  # end the run TRUNCATED without running them


@dataclass(frozen=True, slots=True)
class Limits:
    """`max_turns`: model turns per conversation (None: no limit but the others). `wall_clock`:
    seconds for the whole run, retry included. `max_steps` and `max_identical_calls`: the runaway
    guard. `max_stalled_iterations`: the stalled-iteration guard."""

    max_turns: int | None = None
    wall_clock: float | None = None
    max_steps: int = 256
    max_identical_calls: int = 4
    max_stalled_iterations: int = 3

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_steps", "max_identical_calls", "max_stalled_iterations"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"Limits.{name} must be at least 1, not {value}")
        if self.wall_clock is not None and self.wall_clock <= 0:
            raise ValueError(f"Limits.wall_clock must be positive, not {self.wall_clock}")

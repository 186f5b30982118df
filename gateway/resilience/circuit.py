"""Circuit breaking per target: skipped for a cool-down after repeated failures, then probed.
Replicas sharing a Redis share their open circuits (gateway.resilience.shared_circuits).

    closed --(failures in a row)--> open --(cooldown passed)--> half-open --(probe ok)--> closed
                                      ^---------------------(probe failed)------'

Only failures that say the target is unwell count (gateway.resilience.outcome). While half-open
one exchange at a time probes the target; the others skip it as if it were open. A target
without a failure costs one set lookup per attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

CLOSED: Final = "closed"
OPEN: Final = "open"
HALF_OPEN: Final = "half_open"
STATE_VALUES: Final = {CLOSED: 0, HALF_OPEN: 1, OPEN: 2}  # the metric's values


@dataclass(slots=True)
class _Circuit:
    failures: int = 0  # in a row
    opened_at: float | None = None
    probing: bool = False  # a half-open probe is under way
    trips: int = 0  # times it opened


class Circuits:
    """Every target's circuit; `on_state(target, state)` is told each change (the metrics)."""

    def __init__(
        self,
        failures: int,
        cooldown: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_state: Callable[[str, str], None] | None = None,
    ) -> None:
        self.threshold = failures  # 0: never open
        self.cooldown = cooldown
        self._clock = clock
        self._on_state = on_state
        self.on_local: Callable[[str, str], None] | None = None  # changes decided here (sync)
        self._circuits: dict[str, _Circuit] = {}  # targets that failed since their last success

    def state(self, target: str) -> str:
        circuit = self._circuits.get(target)
        if circuit is None or circuit.opened_at is None:
            return CLOSED
        if circuit.probing or self._clock() - circuit.opened_at >= self.cooldown:
            return HALF_OPEN
        return OPEN

    def admits(self, target: str) -> bool:
        """Whether an attempt may go to `target` now; a half-open target admits one probe."""
        circuit = self._circuits.get(target)
        if circuit is None or circuit.opened_at is None:
            return True
        if circuit.probing or self._clock() - circuit.opened_at < self.cooldown:
            return False
        circuit.probing = True
        self._tell(target, HALF_OPEN)
        return True

    def retry_in(self, targets: Iterable[str]) -> float:
        """Seconds until the first of `targets` half-opens (0 when one admits already)."""
        now = self._clock()
        waits = [
            max(0.0, circuit.opened_at + self.cooldown - now)
            for circuit in (self._circuits.get(t) for t in targets)
            if circuit is not None and circuit.opened_at is not None
        ]
        return min(waits, default=0.0)

    def succeeded(self, target: str) -> None:
        circuit = self._circuits.pop(target, None)
        if circuit is not None and circuit.opened_at is not None:
            self._tell(target, CLOSED)

    def failed(self, target: str) -> None:
        if self.threshold == 0:
            return
        circuit = self._circuits.get(target)
        if circuit is None:
            circuit = self._circuits[target] = _Circuit()
        circuit.failures += 1
        if circuit.probing or (circuit.opened_at is None and circuit.failures >= self.threshold):
            circuit.opened_at = self._clock()
            circuit.probing = False
            circuit.trips += 1
            self._tell(target, OPEN)

    def opened_elsewhere(self, target: str, ago: float) -> None:
        """A peer replica opened this target's circuit `ago` seconds back: open it here for the
        rest of that cool-down, unless it is open (or probing) here already."""
        if self.threshold == 0 or ago >= self.cooldown:
            return
        circuit = self._circuits.get(target)
        if circuit is None:
            circuit = self._circuits[target] = _Circuit()
        if circuit.opened_at is not None:
            return
        circuit.opened_at = self._clock() - ago
        circuit.failures = max(circuit.failures, self.threshold)
        circuit.trips += 1
        self._tell(target, OPEN, local=False)

    def released(self, target: str) -> None:
        """An attempt that neither succeeded nor failed (the client left): a probe may go again."""
        circuit = self._circuits.get(target)
        if circuit is not None and circuit.probing:
            circuit.probing = False

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Targets that failed since their last success: state, failures in a row, trips, and
        the seconds until an open one half-opens."""
        now = self._clock()
        out: dict[str, dict[str, Any]] = {}
        for target, circuit in self._circuits.items():
            row: dict[str, Any] = {
                "state": self.state(target),
                "consecutive_failures": circuit.failures,
                "opened": circuit.trips,
            }
            if circuit.opened_at is not None:
                row["half_open_in_s"] = round(max(0.0, circuit.opened_at + self.cooldown - now), 3)
            out[target] = row
        return out

    def _tell(self, target: str, state: str, *, local: bool = True) -> None:
        if self._on_state is not None:
            self._on_state(target, state)
        if local and self.on_local is not None:
            self.on_local(target, state)

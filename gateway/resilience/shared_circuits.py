"""Circuits shared by replicas through the shared state (`[state] redis`).

A replica whose circuit for a target opens writes `circuit:<target>` with the wall-clock time it
opened, expiring with the cool-down; one whose probe closes it deletes the key. Every replica
reads the keys of its configured targets once per `interval` and opens its own circuit for any
target a peer found failing, for what is left of that cool-down. Nothing of this runs on the
request path: writes are tasks started at a state change, reads a background loop, so a slow or
absent Redis costs a counter, never a request's time (a replica then trips on its own count).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from gateway.resilience.circuit import CLOSED, OPEN, Circuits
from gateway.state import SharedState, StateUnavailable

log = logging.getLogger("gateway.resilience")

PREFIX: Final = "circuit:"


class CircuitSync:
    def __init__(
        self,
        circuits: Circuits,
        state: SharedState,
        targets: Sequence[str],
        *,
        interval: float = 1.0,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.circuits = circuits
        self.state = state
        self.targets = tuple(dict.fromkeys(targets))
        self.interval = interval
        self._on_error = on_error
        self._writes: set[asyncio.Task[None]] = set()

    def retarget(self, circuits: Circuits, targets: Sequence[str]) -> None:
        """A reloaded configuration's circuits and targets."""
        circuits.on_local = self.changed
        self.circuits = circuits
        self.targets = tuple(dict.fromkeys(targets))

    def changed(self, target: str, state: str) -> None:
        """A local state change (the circuits' `on_state`): opened or closed, tell the peers."""
        if state == OPEN:
            opened = str(time.time()).encode()
            self._spawn(self.state.set(PREFIX + target, opened, ttl=self.circuits.cooldown))
        elif state == CLOSED:
            self._spawn(self.state.delete(PREFIX + target))

    def _spawn(self, operation: Awaitable[None]) -> None:
        task = asyncio.ensure_future(self._quietly(operation))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _quietly(self, operation: Awaitable[None]) -> None:
        try:
            await operation
        except StateUnavailable:
            self._failed("circuit_write")

    async def pull(self) -> None:
        """Open the local circuit of every target a peer reports open."""
        for target in self.targets:
            try:
                value = await self.state.get(PREFIX + target)
            except StateUnavailable:
                self._failed("circuit_read")
                return
            if value is None:
                continue
            try:
                opened = float(value)
            except ValueError:
                continue
            self.circuits.opened_elsewhere(target, max(0.0, time.time() - opened))

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.pull()

    async def drain(self) -> None:
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    def _failed(self, operation: str) -> None:
        log.warning("shared state unavailable for circuits (%s)", operation)
        if self._on_error is not None:
            self._on_error(operation)

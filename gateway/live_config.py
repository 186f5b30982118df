"""The configuration a serving process runs now, and its hot reload.

On the reload signal (SIGUSR1; SIGHUP stays a stop) the process rereads its configuration file.
A file that does not load is refused with one log line and the running configuration keeps
serving. One that loads becomes a new `Gateway` for the exchanges that start from then on:
routes, providers, retries, circuits, recovery, keys, the admin key and the key limits change.
The exchanges already running keep the `Gateway` they started with to their end; a provider the
new configuration no longer has is closed once the last of them is over.

What the process was started with stays, because changing it needs a restart: the listening
address and workers ([server]), the audit store, the shared state, the Responses store,
telemetry, logging and the HTTP size limits. A file changing any of them is applied without
those parts, and the log line names them.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path

from gateway.handlers.exchange_state import Gateway
from gateway.reread import ReloadRefused, reread
from gateway.settings import Settings
from providers.base import Provider

log = logging.getLogger("gateway.reload")

RETIRED_POLL = 0.1  # seconds between two looks at whether a retired configuration is idle

Rebuild = Callable[[Settings, Gateway], Awaitable[Gateway]]


class LiveConfig:
    """The `Gateway` new exchanges get, the ones retired by reloads that still run exchanges,
    and the reload itself (`rebuild` makes the new `Gateway` from the settings and the old one)."""

    def __init__(
        self,
        gateway: Gateway,
        rebuild: Rebuild,
        path: Path | None,
        env: Mapping[str, str] = os.environ,
        on_result: Callable[[str], None] | None = None,
        adapt: Callable[[Settings], Settings] | None = None,
    ) -> None:
        self.gateway = gateway
        self.generation = 1
        self.retired: list[Gateway] = []
        self._rebuild = rebuild
        self._path = path
        self._env = env
        self._on_result = on_result
        self._adapt = adapt or (lambda settings: settings)
        self._lock = asyncio.Lock()
        self._retiring: set[asyncio.Task[None]] = set()

    @property
    def settings(self) -> Settings:
        return self.gateway.settings

    def gateways(self) -> Iterator[Gateway]:
        yield self.gateway
        yield from self.retired

    def providers(self) -> list[Provider]:
        """Every provider still in use, each once."""
        seen: dict[int, Provider] = {}
        for gateway in self.gateways():
            for provider in gateway.providers.values():
                seen.setdefault(id(provider), provider)
        return list(seen.values())

    def stop_exchanges(self) -> None:
        for gateway in self.gateways():
            gateway.stop_exchanges()

    def closing(self) -> None:
        for gateway in self.gateways():
            gateway.closing = True

    async def reload(self) -> bool:
        """Reread the file and serve it; False (and one log line) when it is refused."""
        async with self._lock:
            old = self.gateway
            try:
                settings, ignored = reread(self._path, self._env, old.settings, self._adapt)
                new = await self._rebuild(settings, old)
            except ReloadRefused as exc:
                return self._refused(str(exc))
            except Exception as exc:  # a provider that cannot be built from the file
                return self._refused(f"{type(exc).__name__} while building the new configuration")
            self.gateway = new
            self.generation += 1
            self.retired.append(old)
            task = asyncio.create_task(self._retire(old))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)
        fields = {
            "generation": self.generation,
            "routes": len(settings.routes),
            "providers": sorted(settings.providers),
            "keys": [key.name for key in settings.keys],
        }
        if ignored:
            fields["needs_restart"] = ignored
        log.info("configuration reloaded", extra=fields)
        if self._on_result is not None:
            self._on_result("reloaded")
        return True

    def _refused(self, why: str) -> bool:
        log.error("configuration reload refused, the running one kept: %s", why)
        if self._on_result is not None:
            self._on_result("refused")
        return False

    async def _retire(self, old: Gateway) -> None:
        """Once `old` runs no exchange, close the providers the current configuration dropped."""
        while old.running:
            await asyncio.sleep(RETIRED_POLL)
        self.retired.remove(old)
        in_use = {id(provider) for provider in self.providers()}
        for provider in old.providers.values():
            if id(provider) not in in_use:
                await provider.close()

    async def close(self) -> None:
        """The app stops: no retirement is awaited any more (its providers close with the rest)."""
        for task in list(self._retiring):
            task.cancel()
        await asyncio.gather(*self._retiring, return_exceptions=True)

"""Rate limits, token budgets and concurrency, counted in a SharedState (gateway.state).

Per gateway key, in fixed windows of `[[keys]] window` seconds aligned on the epoch (so every
replica counts into the same window): `requests_per_window` requests, and `tokens_per_window`
input+output tokens, added once each exchange ended (so the exchange that crosses the budget is
served; the next one is refused). Concurrency: `[limits] max_concurrent` exchanges in this
process (never shared: it protects the process), `max_concurrent_per_key` per key (shared: slots
with a lease that this process renews while it holds them, so a replica that dies frees its slots
within one lease).

A shared state that fails (Redis down or slow) fails open: the request is admitted, a warning is
logged (at most once per WARN_EVERY seconds) and `gateway_shared_state_errors` counts it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from gateway.errors import RateLimited
from gateway.settings import KeySettings, LimitsSettings
from gateway.state import SharedState, StateUnavailable

log = logging.getLogger("gateway.access")

LEASE: Final = 30.0  # seconds a per-key slot stays taken without renewal
RENEW_EVERY: Final = 10.0
WARN_EVERY: Final = 10.0

# What the access checks decided, as `gateway_key_requests{outcome}` names it.
OUTCOMES: Final = ("served", "unauthorized", "forbidden", "rate_limited", "over_budget")


@dataclass(slots=True)
class Grant:
    """One exchange's way through the checks, and what it holds until it ends."""

    holder: str  # the exchange's request id: its slot's holder
    key: KeySettings | None = None
    outcome: str = "served"
    holds_global: bool = False
    slot_key: str | None = None  # the shared per-key slot set it may hold a slot in


def window_of(now: float, window: float) -> tuple[int, int]:
    """The fixed window `now` falls in, and the whole seconds until it ends (at least 1)."""
    index = math.floor(now / window)
    return index, max(1, math.ceil((index + 1) * window - now))


class Limiter:
    def __init__(
        self, limits: LimitsSettings, state: SharedState, on_failure: Callable[[str], None]
    ) -> None:
        self.state = state
        self.reconfigure(limits)
        self.active = 0  # exchanges holding a place under max_concurrent
        self.held: dict[str, dict[str, None]] = {}  # slot key -> holders in this process
        self._on_failure = on_failure
        self._warned_at = -math.inf

    def reconfigure(self, limits: LimitsSettings) -> None:
        """The limits for the exchanges entering from now on (a reloaded configuration)."""
        self.max_concurrent = limits.max_concurrent
        self.max_per_key = limits.max_concurrent_per_key

    # --- this process ---------------------------------------------------------------------------

    def enter(self, grant: Grant) -> None:
        """A place under `max_concurrent`, or RateLimited (retry-after 1)."""
        if not self.max_concurrent:
            return
        if self.active >= self.max_concurrent:
            grant.outcome = "rate_limited"
            raise RateLimited(
                f"The gateway is serving its limit of {self.max_concurrent} concurrent requests;"
                " retry shortly",
                "requests",
                1,
            )
        self.active += 1
        grant.holds_global = True

    # --- per key, shared ------------------------------------------------------------------------

    async def admit(self, grant: Grant, key: KeySettings) -> None:
        """The key's concurrency slot, token budget and request rate, in that order."""
        try:
            await self._admit(grant, key)
        except StateUnavailable as exc:
            self.failed("admit", exc)  # fail open

    async def _admit(self, grant: Grant, key: KeySettings) -> None:
        state = self.state
        if self.max_per_key:
            slot_key = f"slots:{key.name}"
            grant.slot_key = slot_key  # before the call: a cancelled acquire is still released
            self.held.setdefault(slot_key, {})[grant.holder] = None
            if not await state.acquire(slot_key, grant.holder, self.max_per_key, LEASE):
                grant.outcome = "rate_limited"
                raise RateLimited(
                    f"Key {key.name!r} has its limit of {self.max_per_key} concurrent requests "
                    "in flight; retry shortly",
                    "requests",
                    1,
                )
        if key.tokens_per_window is None and key.requests_per_window is None:
            return
        index, retry_after = window_of(time.time(), key.window)
        if key.tokens_per_window is not None:
            used = await state.get(f"tokens:{key.name}:{index}")
            if used is not None and int(used) >= key.tokens_per_window:
                grant.outcome = "over_budget"
                raise RateLimited(
                    f"Key {key.name!r} used its budget of {key.tokens_per_window} tokens per "
                    f"{key.window:g} s; retry in {retry_after} s",
                    "tokens",
                    retry_after,
                )
        if key.requests_per_window is not None:
            count = await state.incr(f"requests:{key.name}:{index}", 1, key.window)
            if count > key.requests_per_window:
                grant.outcome = "rate_limited"
                raise RateLimited(
                    f"Key {key.name!r} made its {key.requests_per_window} requests per "
                    f"{key.window:g} s; retry in {retry_after} s",
                    "requests",
                    retry_after,
                )

    async def settle(self, grant: Grant, tokens: int) -> None:
        """The exchange ended: its places back, its tokens counted."""
        if grant.holds_global:
            grant.holds_global = False
            self.active -= 1
        slot_key = grant.slot_key
        if slot_key is not None:
            grant.slot_key = None
            holders = self.held.get(slot_key)
            if holders is not None:
                holders.pop(grant.holder, None)
                if not holders:
                    del self.held[slot_key]
            try:
                await self.state.release(slot_key, grant.holder)
            except StateUnavailable as exc:
                self.failed("release", exc)  # the lease runs out by itself
        key = grant.key
        if key is None or key.tokens_per_window is None or tokens <= 0:
            return
        index, _ = window_of(time.time(), key.window)
        try:
            await self.state.incr(f"tokens:{key.name}:{index}", tokens, key.window)
        except StateUnavailable as exc:
            self.failed("settle", exc)

    async def renew(self) -> None:
        """Extend the leases of the slots this process holds (every RENEW_EVERY seconds)."""
        for slot_key, holders in list(self.held.items()):
            try:
                await self.state.renew(slot_key, list(holders), LEASE)
            except StateUnavailable as exc:
                self.failed("renew", exc)

    def failed(self, operation: str, exc: StateUnavailable) -> None:
        self._on_failure(operation)
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY:
            self._warned_at = now
            log.warning(
                "shared state unavailable: limits fail open",
                extra={"operation": operation, "cause": str(exc)},
            )

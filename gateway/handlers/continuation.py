"""Sending the request that continues a cut answer, target by target (gateway.handlers.recovery).

The targets are the route's, in the exchange's order, starting after the one whose answer was
cut and ending with it: a different target is tried at once; the cut one again only when its
retry table allows more than one attempt, after a backoff (full jitter up to `backoff`). A
target whose circuit is open is skipped; one that refuses (an error status: some refuse an
assistant prefill), cannot be reached or times out is noted and the next one is tried.

Every continuation is an attempt of the exchange's record, marked `"continues": true`; the
attempt whose answer was cut is noted first, as `broken` (or `answered` when it stopped at max
tokens), by `note_attempts` when the exchange ends.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.audit.record import AuditRecord
from gateway.client_formats import ClientFormat
from gateway.errors import GatewayError
from gateway.formats.registry import wire_for
from gateway.handlers.attempt_log import note_answer
from gateway.handlers.payload import upstream_payload
from gateway.handlers.recovery import LENGTH, Continuation
from gateway.handlers.upstream_errors import status_error
from gateway.resilience.circuit import Circuits
from gateway.resilience.outcome import (
    ANSWERED,
    BROKEN,
    CIRCUIT_OPEN,
    Outcome,
    attempt_entry,
    failed_outcome,
)
from gateway.settings import ResolvedTarget, RetrySettings
from providers.base import Provider, ProviderRequest


@dataclass(slots=True)
class Continuations:
    """One exchange's continuation requests: what they are built from, and what became of them."""

    client: ClientFormat
    obj: dict[str, Any]  # the client's request, as the first attempt sent it
    order: Sequence[ResolvedTarget]  # the route's targets in the exchange's order
    current: ResolvedTarget  # the target whose answer is being streamed
    providers: Mapping[str, Provider]
    circuits: Circuits
    retry: RetrySettings
    headers: Mapping[str, str]
    stream: bool = True  # continuations are streamed, as the answer they continue
    first_cut: str | None = None  # why the first attempt's answer was cut
    first_ended: float | None = None  # when (time.monotonic)
    entries: list[dict[str, Any]] = field(default_factory=list)  # the continuations' attempts
    _under_way: dict[str, Any] | None = None  # the entry of the continuation being streamed
    _started: float = 0.0  # when it was sent (time.monotonic)

    async def __call__(self, sent: str, cause: str) -> Continuation | None:
        now = time.monotonic()
        if self.first_cut is None:
            self.first_cut, self.first_ended = cause, now
        else:  # the continuation under way was cut in turn
            self.close(now, broke=cause != LENGTH)
        cut = self.current
        for target in [*self._after(cut), cut]:
            if target is cut:
                if self.retry.attempts < 2:
                    break
                await asyncio.sleep(random.uniform(0, self.retry.backoff))
            found = await self._try(target, sent)
            if found is not None:
                return found
        return None

    def _after(self, cut: ResolvedTarget) -> list[ResolvedTarget]:
        order = list(self.order)
        position = next((i for i, t in enumerate(order) if t.key == cut.key), -1)
        return [t for t in order[position + 1 :] + order[: max(position, 0)] if t.key != cut.key]

    async def _try(self, target: ResolvedTarget, sent: str) -> Continuation | None:
        if not self.circuits.admits(target.key):
            entry = Outcome(CIRCUIT_OPEN).entry(target.provider_name, target.upstream_model, 0.0)
            self.entries.append({**entry, "continues": True})
            return None
        provider = self.providers[target.provider_name]
        wire = wire_for(provider.wire_of(target.upstream_model))
        wire = wire.with_stop_reasons(provider.own_stop_reasons)
        text = sent.rstrip() if wire.prefill else sent  # a prefill must not end with whitespace
        body = self.client.continued_body(self.obj, text, not wire.prefill)
        started = time.monotonic()
        try:
            payload = upstream_payload(
                self.client, wire.name, body, orjson.dumps(body), target.upstream_model
            )
            upstream = ProviderRequest(
                payload.payload, self.stream, target.upstream_model, headers=self.headers
            )
            reply = await provider.send(upstream)
            if reply.status >= 400:
                try:
                    raise status_error(reply.status, reply.headers, await reply.read(), wire.name)
                finally:
                    reply.release()
        except GatewayError as exc:
            outcome = failed_outcome(exc, frozenset(self.retry.on_status))
            duration = time.monotonic() - started
            entry = outcome.entry(target.provider_name, target.upstream_model, duration)
            self.entries.append({**entry, "continues": True})
            if outcome.target_failed:
                self.circuits.failed(target.key)
            else:
                self.circuits.released(target.key)
            return None
        self.current, self._started = target, started
        entry = attempt_entry(target.provider_name, target.upstream_model, ANSWERED, 0.0, 200)
        self._under_way = {**entry, "status": reply.status, "continues": True}
        self.entries.append(self._under_way)
        return Continuation(reply, wire, target.key, blank_sent=text != sent)

    def discard(self) -> None:
        self.close(time.monotonic(), broke=True)

    def close(self, now: float, broke: bool) -> None:
        """The continuation under way (if any) ended: its outcome and duration, its circuit."""
        entry, self._under_way = self._under_way, None
        if entry is None:
            return
        entry["outcome"] = BROKEN if broke else ANSWERED
        entry["duration_ms"] = round((now - self._started) * 1000, 3)
        if broke:
            self.circuits.failed(self.current.key)
        else:
            self.circuits.succeeded(self.current.key)


def note_attempts(
    record: AuditRecord,
    continuations: Continuations,
    first: ResolvedTarget,
    started: float,
    status: int,
    broke: bool,
    pool_wait: float = 0.0,
) -> bool:
    """The attempts of an exchange that was continued, in order, with their circuits: the
    first one (cut: `broken`, or `answered` at max tokens), then each continuation, the last one
    `broke` or not. False when nothing was continued (the exchange notes its attempt as usual)."""
    if continuations.first_ended is None:
        return False
    first_broke = continuations.first_cut != LENGTH
    circuits, ended = continuations.circuits, continuations.first_ended
    note_answer(record, circuits, first, started, status, first_broke, pool_wait, ended)
    continuations.close(time.monotonic(), broke)
    record.attempts.extend(continuations.entries)
    return True

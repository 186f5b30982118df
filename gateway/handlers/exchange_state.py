"""What an exchange runs with: the gateway's shared parts (`Gateway`), one exchange's request-level
state (`Exchange`), and the endpoints beside a format's own model answers (`Endpoint`). Apart from
gateway.handlers.exchange, which runs them, so the endpoints' modules and the app can name them
without importing the exchange's control flow."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from gateway.access.control import AccessControl
from gateway.audit.record import AuditRecord
from gateway.client_formats import ClientFormat
from gateway.client_request import ClientRequest
from gateway.cost import Pricer
from gateway.handlers.attempt import Attempt
from gateway.handlers.chaining import Chain
from gateway.handlers.continuation import Continuations
from gateway.handlers.validation import RequestBody
from gateway.observer import ExchangeObserver
from gateway.resilience.plan import Resilience
from gateway.responses_store import OffStore, ResponseStore
from gateway.settings import ResolvedRoute, ResolvedTarget, Settings
from gateway.settings_price import PriceSettings
from providers.base import Provider

FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta", "x-api-key", "authorization")


class AttemptRun(Protocol):
    """One try at one target: sends the request and answers the client, or raises a
    GatewayError the attempts loop may retry elsewhere."""

    async def __call__(
        self,
        exchange: Exchange,
        gateway: Gateway,
        request: ClientRequest,
        provider: Provider,
        target: ResolvedTarget,
        body: RequestBody,
        obj: dict[str, Any],
        raw: bytes,
    ) -> web.StreamResponse: ...


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An endpoint other than a format's own model answers (a token count, embeddings): the
    body it takes and its attempt. It is routed, admitted, retried, failed over and recorded
    like every exchange; it has no stop reason and is never cut."""

    operation: str  # one of gateway.audit.record.OPERATIONS
    name: str  # how error messages name the endpoint
    body_model: type[RequestBody]
    run: AttemptRun


@dataclass(slots=True)
class Gateway:
    settings: Settings
    providers: Mapping[str, Provider]
    observer: ExchangeObserver
    responses: ResponseStore = field(default_factory=OffStore)  # for previous_response_id
    resilience: Resilience | None = None  # None: built from `settings`
    closing: bool = False  # the server is shutting down: what it cancels now, it ended
    access: AccessControl | None = None  # gateway keys and limits; None: neither configured
    running: set[asyncio.Task[Any]] = field(default_factory=set)  # the exchanges' tasks
    pricer: Pricer | None = None  # what exchanges cost; None: built from `settings`
    placeholder_keys: frozenset[str] = frozenset()  # providers whose key is a stand-in

    def __post_init__(self) -> None:
        if self.resilience is None:
            self.resilience = Resilience(self.settings)
        if self.pricer is None:
            self.pricer = Pricer.for_settings(self.settings)

    def stop_exchanges(self) -> None:
        """The shutdown grace is over: every exchange still running is ended by the server."""
        self.closing = True
        for task in self.running:
            task.cancel()


@dataclass(slots=True)
class Exchange:
    """Request-level state: identity, the client's format, the record; its current attempt."""

    id: str
    client: ClientFormat
    record: AuditRecord
    request_body: dict[str, Any] | None = None  # kept only for content logging
    attempt: Attempt | None = None
    ended_by: str | None = None  # one of audit.record.ENDED_BY when it ended early
    chain: Chain | None = None  # a Responses answer to keep, and the history it continued
    price: PriceSettings | None = None  # the current attempt's target's negotiated price
    pool_wait: float = 0.0  # seconds the current attempt waited for an upstream connection
    route: ResolvedRoute | None = None  # set once routed
    order: Sequence[ResolvedTarget] = ()  # the route's targets in this exchange's order
    continuations: Continuations | None = None  # the current attempt's, when it may be continued

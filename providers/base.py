"""The provider seam: one method that sends a request in the provider's own wire format.

A provider is transport plus named quirk flags. It knows one wire protocol (`wire`) and nothing of
clients: the gateway hands it a body already in that protocol, with the upstream model and the
operation (for wires that put them in the URL), and gets back the upstream's status, headers and
bytes. Foreign exceptions (aiohttp, timeouts) are mapped here, once, to `gateway.errors` types.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from gateway.events import StopReason

if TYPE_CHECKING:  # the pools (and the TLS trust store) are the HTTP providers' own
    from providers.http_pool import PoolStats


class Operation(enum.StrEnum):
    GENERATE = "generate"  # a model answer: chat completion, message, response
    COUNT_TOKENS = "count_tokens"  # the input's token count, where the upstream offers one
    EMBED = "embed"  # embedding vectors for the input


@dataclass(slots=True)
class ProviderRequest:
    body: bytes
    stream: bool
    model: str  # the upstream's name for the model (after a route's rename)
    operation: Operation = Operation.GENERATE
    # Client headers the upstream may need: anthropic-version / anthropic-beta, and the
    # client's own credential, used only when the provider has no key configured.
    headers: Mapping[str, str] = field(default_factory=dict)


class UpstreamReply(Protocol):
    status: int
    pool_wait: float  # seconds the request waited for an upstream connection (0.0: none)

    @property
    def headers(self) -> Mapping[str, str]:
        """The response's header fields, case-insensitive."""
        ...

    async def read(self) -> bytes:
        """The whole body (non-streaming replies and error replies)."""
        ...

    def iter_chunks(self) -> AsyncGenerator[bytes, None]:
        """The body as it arrives, in whatever pieces the transport gives."""
        ...

    def release(self) -> None: ...


class Provider(Protocol):
    name: str
    wire: str  # a row of gateway.formats.registry.WIRES: the wire of its answers
    # Native stop values its upstream sends of its own (quirk flags), read on top of its wire's
    # table (gateway.formats.registry.Wire.with_stop_reasons); most have none.
    own_stop_reasons: Mapping[str, StopReason]

    def wire_of(self, model: str) -> str:
        """The wire the provider speaks for `model` (`wire` for most; Vertex AI answers Gemini
        models on the Gemini wire and Claude models on Anthropic's)."""
        ...

    async def send(self, request: ProviderRequest) -> UpstreamReply:
        """Send and return once the status line and headers arrived.

        Raises UpstreamUnreachable or UpstreamTimeout; an error status is returned, not raised.
        """
        ...

    def offers(self, operation: Operation, model: str) -> bool:
        """Whether the upstream answers `operation` for `model` (every provider generates; a
        token count or embeddings only where the upstream has them)."""
        ...

    def offered_models(self) -> Sequence[str]:
        """Model names this provider answers on its own, beyond the routes' (for /v1/models)."""
        ...

    def pool_stats(self) -> PoolStats | None:
        """Its upstream connections (read by /metrics at scrape time); None: it opens none."""
        ...

    async def start(self) -> None:
        """Called once the server runs, on its loop: begin what the provider keeps in the
        background (Vertex AI fetches its first access token), without waiting for it."""
        ...

    async def close(self) -> None: ...


NO_OWN_STOP_REASONS: Mapping[str, StopReason] = MappingProxyType({})

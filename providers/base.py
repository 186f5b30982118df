"""The provider seam: one method that sends a request body in the provider's own wire format.

A provider is transport plus named quirk flags. It knows one wire protocol (`wire`) and nothing of
clients: the gateway hands it a body already in that protocol and gets back the upstream's status,
headers and bytes. Foreign exceptions (aiohttp, timeouts) are mapped here, once, to
`gateway.errors` types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

Wire = Literal["openai", "anthropic"]


@dataclass(slots=True)
class ProviderRequest:
    body: bytes
    stream: bool
    # Client headers the upstream may need: anthropic-version / anthropic-beta, and the
    # client's own credential, used only when the provider has no key configured.
    headers: Mapping[str, str] = field(default_factory=dict)


class UpstreamReply(Protocol):
    status: int
    headers: Mapping[str, str]

    async def read(self) -> bytes:
        """The whole body (non-streaming replies and error replies)."""
        ...

    def iter_chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives, in whatever pieces the transport gives."""
        ...

    def release(self) -> None: ...


class Provider(Protocol):
    name: str
    wire: Wire

    async def send(self, request: ProviderRequest) -> UpstreamReply:
        """Send and return once the status line and headers arrived.

        Raises UpstreamUnreachable or UpstreamTimeout; an error status is returned, not raised.
        """
        ...

    async def close(self) -> None: ...

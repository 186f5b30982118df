"""What the exchange endpoints read of a client's request, whichever HTTP path served it.

aiohttp's `web.Request` (gateway.edge) and the lean path's `LeanRequest` (gateway.lean_http) both
have it; the endpoints are typed with it, so reading more of aiohttp's request than the lean
path offers is a type error, not a failure on the lean path only.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from multidict import CIMultiDictProxy


class ClientRequest(Protocol):
    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def headers(self) -> CIMultiDictProxy[str]: ...

    @property
    def transport(self) -> asyncio.Transport | None:
        """None once the client left."""

    @property
    def content_length(self) -> int | None: ...

    @property
    def body_exists(self) -> bool: ...

    @property
    def client_max_size(self) -> int: ...

    async def read(self) -> bytes:
        """The whole body as sent (gateway.request_body.read_body bounds a decoded one)."""

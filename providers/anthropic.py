"""Anthropic Messages upstreams (api.anthropic.com or a compatible server at `base_url`)."""

from __future__ import annotations

from collections.abc import Sequence

from providers.base import NO_OWN_STOP_REASONS, Operation, ProviderRequest
from providers.http import (
    DEFAULT_POOL,
    DEFAULT_TIMEOUTS,
    HttpReply,
    HttpTransport,
    PoolLimits,
    PoolStats,
    Timeouts,
)

# The version the public API requires when the client sends none (PROTOCOLS.md c.1).
DEFAULT_VERSION = "2023-06-01"


class AnthropicProvider:
    """Sends Messages bodies to `<base_url>/v1/messages`.

        provider = AnthropicProvider("anthropic", "https://api.anthropic.com", api_key)
        reply = await provider.send(ProviderRequest(body=b'{"model": ...}', stream=False))

    `anthropic-version` and `anthropic-beta` are the client's, forwarded unchanged. Without a
    configured key the client's own credential is forwarded (`x-api-key`, else `authorization`,
    which newer SDKs and OAuth tokens use).
    """

    wire = "anthropic"
    own_stop_reasons = NO_OWN_STOP_REASONS

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str | None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        *,
        pool: PoolLimits = DEFAULT_POOL,
    ) -> None:
        self.name = name
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._count_url = self._url + "/count_tokens"
        self._api_key = api_key
        self._http = HttpTransport(name, timeouts, pool)

    def _headers(self, request: ProviderRequest) -> dict[str, str]:
        client = request.headers
        headers = {
            "content-type": "application/json",
            "anthropic-version": client.get("anthropic-version", DEFAULT_VERSION),
        }
        if "anthropic-beta" in client:
            headers["anthropic-beta"] = client["anthropic-beta"]
        if self._api_key is not None:
            headers["x-api-key"] = self._api_key
        elif "x-api-key" in client:
            headers["x-api-key"] = client["x-api-key"]
        elif "authorization" in client:
            headers["authorization"] = client["authorization"]
        return headers

    async def send(self, request: ProviderRequest) -> HttpReply:
        counting = request.operation is Operation.COUNT_TOKENS
        url = self._count_url if counting else self._url
        return await self._http.post(url, request.body, self._headers(request))

    def wire_of(self, model: str) -> str:
        return self.wire

    def offers(self, operation: Operation, model: str) -> bool:
        return operation in (Operation.GENERATE, Operation.COUNT_TOKENS)

    def offered_models(self) -> Sequence[str]:
        return ()

    async def start(self) -> None:
        pass

    def pool_stats(self) -> PoolStats | None:
        return self._http.stats

    async def close(self) -> None:
        await self._http.close()

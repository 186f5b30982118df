"""OpenAI Chat Completions upstreams: api.openai.com and any compatible server (vLLM, Ollama,
llama.cpp, Groq, ...) reached through `base_url`, its departures named by quirk flags
(`providers.quirks.OpenAIQuirks`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateway.events import StopReason
from providers.base import Operation, ProviderRequest
from providers.http import (
    DEFAULT_POOL,
    DEFAULT_TIMEOUTS,
    HttpReply,
    HttpTransport,
    PoolLimits,
    PoolStats,
    Timeouts,
)
from providers.quirks import NO_QUIRKS, OpenAIQuirks


class OpenAIProvider:
    """Sends Chat Completions bodies to `<base_url>/chat/completions`.

        provider = OpenAIProvider("openai", "https://api.openai.com/v1", api_key)
        reply = await provider.send(ProviderRequest(body=b'{"model": ...}', stream=True))

    Without a configured key the client's own `authorization` header is forwarded, so a local
    server that needs none, or a client that brings its own, both work. The quirk flags rewrite
    the body once per request and add the server's own finish reasons (`own_stop_reasons`).
    """

    wire = "openai"
    path = "/chat/completions"  # under base_url
    # Other operations' paths under base_url: the OpenAI API's embeddings, which every
    # OpenAI-compatible server offering embeddings serves at the same path.
    paths = {Operation.EMBED: "/embeddings"}

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str | None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        quirks: OpenAIQuirks = NO_QUIRKS,
        *,
        pool: PoolLimits = DEFAULT_POOL,
    ) -> None:
        self.name = name
        base = base_url.rstrip("/")
        self._url = base + self.path
        self._urls = {op: base + path for op, path in self.paths.items()}
        self._api_key = api_key
        self._http = HttpTransport(name, timeouts, pool)
        self.quirks = quirks
        # Read by the exchange (gateway.formats.registry.Wire.with_stop_reasons).
        self.own_stop_reasons: Mapping[str, StopReason] = quirks.finish_reasons

    def url(self, request: ProviderRequest) -> str:
        if request.operation is Operation.GENERATE:
            return self._url
        return self._urls[request.operation]

    async def auth_headers(self, request: ProviderRequest) -> dict[str, str]:
        """The credential headers (async: a subclass may read a token kept off the loop)."""
        if self._api_key is not None:
            return {"Authorization": f"Bearer {self._api_key}"}
        if "authorization" in request.headers:
            return {"Authorization": request.headers["authorization"]}
        return {}

    async def _headers(self, request: ProviderRequest) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        headers.update(await self.auth_headers(request))
        if request.stream:
            headers["Accept"] = "text/event-stream"
        return headers

    async def send(self, request: ProviderRequest) -> HttpReply:
        body = self.quirks.rewrite_body(request.body)
        headers = await self._headers(request)
        return await self._http.post(self.url(request), body, headers)

    def wire_of(self, model: str) -> str:
        return self.wire

    def offers(self, operation: Operation, model: str) -> bool:
        return operation is Operation.GENERATE or operation in self._urls

    def offered_models(self) -> Sequence[str]:
        return ()

    async def start(self) -> None:
        pass

    def pool_stats(self) -> PoolStats | None:
        return self._http.stats

    async def close(self) -> None:
        await self._http.close()

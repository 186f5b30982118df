"""Google Gemini upstreams on the Gemini API (Google AI Studio, `generativelanguage`).

The model and the operation are in the URL, not the body; the key goes in `x-goog-api-key`. The
URL and the credential headers are the two parts another Gemini-wire endpoint changes (Vertex AI:
a project and region path and a bearer token), so both are small overridable methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final
from urllib.parse import quote

import orjson

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

DEFAULT_API_VERSION: Final = "v1beta"
STREAM_QUERY: Final = "?alt=sse"  # SSE frames; without it the stream is one JSON array

# The method of `models/{model}:<method>` per operation; a stream of answers has its own.
METHODS: Final[Mapping[Operation, str]] = {
    Operation.GENERATE: "generateContent",
    Operation.COUNT_TOKENS: "countTokens",
    Operation.EMBED: "batchEmbedContents",  # one request per text, in one call
}
STREAM_METHOD: Final = "streamGenerateContent"


def method_path(request: ProviderRequest) -> str:
    """`<model>:<method>` (and the SSE query for a streamed answer), the model quoted."""
    model = quote(request.model, safe="-._~@")
    if request.stream and request.operation is Operation.GENERATE:
        return f"{model}:{STREAM_METHOD}{STREAM_QUERY}"
    return f"{model}:{METHODS[request.operation]}"


def count_envelope(request: ProviderRequest) -> bytes:
    """`countTokens` takes the whole generation request under `generateContentRequest`, with
    the model named inside it too (parsed once per count, never per chunk)."""
    body = orjson.loads(request.body)
    return orjson.dumps({"generateContentRequest": {"model": f"models/{request.model}", **body}})


def client_key(headers: Mapping[str, str]) -> str | None:
    """The client's own credential as a Gemini key: the `x-api-key` (Anthropic SDKs) or the
    Bearer token (OpenAI and newer Anthropic SDKs) it brought."""
    if headers.get("x-api-key"):
        return headers["x-api-key"]
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


class GeminiProvider:
    """Sends Gemini bodies to `<base_url>/<api_version>/models/<model>:<method>`.

        provider = GeminiProvider("gemini", "https://generativelanguage.googleapis.com", key)
        reply = await provider.send(ProviderRequest(b'{"contents": ...}', True, "gemini-2.5-pro"))

    Without a configured key the client's own credential is sent as the key (`client_key`).
    A subclass for another endpoint overrides `url` and `auth_headers`.
    """

    wire = "gemini"
    own_stop_reasons = NO_OWN_STOP_REASONS

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str | None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        api_version: str | None = None,
        *,
        pool: PoolLimits = DEFAULT_POOL,
    ) -> None:
        self.name = name
        self._base = f"{base_url.rstrip('/')}/{api_version or DEFAULT_API_VERSION}/models/"
        self._api_key = api_key
        self._http = HttpTransport(name, timeouts, pool)

    def url(self, request: ProviderRequest) -> str:
        return self._base + method_path(request)

    async def auth_headers(self, request: ProviderRequest) -> dict[str, str]:
        """The credential headers (async: a token-based endpoint may have to refresh first)."""
        key = self._api_key if self._api_key is not None else client_key(request.headers)
        return {"x-goog-api-key": key} if key else {}

    async def send(self, request: ProviderRequest) -> HttpReply:
        headers = {"content-type": "application/json", **await self.auth_headers(request)}
        if request.stream:
            headers["accept"] = "text/event-stream"
        body = (
            count_envelope(request) if request.operation is Operation.COUNT_TOKENS else request.body
        )
        return await self._http.post(self.url(request), body, headers)

    def wire_of(self, model: str) -> str:
        return self.wire

    def offers(self, operation: Operation, model: str) -> bool:
        return operation in METHODS

    def offered_models(self) -> Sequence[str]:
        return ()

    async def start(self) -> None:
        pass

    def pool_stats(self) -> PoolStats | None:
        return self._http.stats

    async def close(self) -> None:
        await self._http.close()

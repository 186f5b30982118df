"""Vertex AI upstreams: Google's Gemini models and Anthropic's Claude models in one project.

Vertex names a model under its publisher, and each publisher speaks its own wire: Gemini models
(publisher `google`) the Gemini wire, Claude models (publisher `anthropic`) the Anthropic
Messages wire through `rawPredict` / `streamRawPredict`. The publisher follows from the model's
name (`PUBLISHERS`, a table of rows, first match wins); so does the wire the gateway translates
to (`wire_of`). Token counting is a row too: Gemini's `countTokens`, and Anthropic's one
`count-tokens:rawPredict` endpoint for every Claude model (the model stays in its body).

    provider = VertexProvider("vertex", project="my-project", region="us-east5")
    request = ProviderRequest(body, stream=True, model="claude-sonnet-4@20250514")
    reply = await provider.send(request)

Requests carry `Authorization: Bearer <token>` from Application Default Credentials, kept fresh
off the request path (`providers.google_credentials`); a configured `api_key` (a Google Cloud
API key) is sent as `x-goog-api-key` instead, on the same project URLs (express mode's URLs
without a project are not built). The client's own credential is never forwarded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

import orjson

from gateway.errors import InvalidRequest, UpstreamCredentialsUnavailable
from providers.base import NO_OWN_STOP_REASONS, Operation, ProviderRequest
from providers.google_credentials import AccessTokens
from providers.http import (
    DEFAULT_POOL,
    DEFAULT_TIMEOUTS,
    HttpReply,
    HttpTransport,
    PoolLimits,
    PoolStats,
    Timeouts,
)

# The Messages version Vertex requires in the body (it takes no `anthropic-version` header).
VERTEX_ANTHROPIC_VERSION: Final = "vertex-2023-10-16"


def _rewritten(body: bytes, *, keep_model: bool) -> bytes:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body  # not ours to judge: the upstream answers it with its own error
    if not isinstance(obj, dict):
        return body
    if not keep_model:
        obj.pop("model", None)
    obj["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
    return orjson.dumps(obj)


def _anthropic_body(body: bytes) -> bytes:
    """The Messages body as Vertex takes it: the model is in the URL, the version in the body."""
    return _rewritten(body, keep_model=False)


def _anthropic_count_body(body: bytes) -> bytes:
    """Vertex's count-tokens endpoint is one for every Claude model: the model stays in the body."""
    return _rewritten(body, keep_model=True)


def _unchanged(body: bytes) -> bytes:
    return body


@dataclass(frozen=True, slots=True)
class Method:
    """What follows `models/` for one operation: the method (with its query) after the model,
    a fixed model segment where the endpoint is not per model, and the body's rewrite."""

    name: str
    rewrite: Callable[[bytes], bytes] = _unchanged
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Publisher:
    """One Vertex publisher: which models are its, the wire they speak, the method per
    (operation, streamed), and the client headers forwarded."""

    name: str  # the URL's `publishers/<name>` segment
    wire: str  # a row of gateway.formats.registry.WIRES
    prefixes: tuple[str, ...]  # model names it owns; () matches every model (the last row)
    methods: Mapping[tuple[Operation, bool], Method]
    forwarded: tuple[str, ...] = ()

    def owns(self, model: str) -> bool:
        return not self.prefixes or model.startswith(self.prefixes)


PUBLISHERS: Final[tuple[Publisher, ...]] = (
    Publisher(
        "anthropic",
        "anthropic",
        ("claude-",),
        {
            (Operation.GENERATE, False): Method("rawPredict", _anthropic_body),
            (Operation.GENERATE, True): Method("streamRawPredict", _anthropic_body),
            (Operation.COUNT_TOKENS, False): Method(
                "rawPredict", _anthropic_count_body, model="count-tokens"
            ),
        },
        forwarded=("anthropic-beta",),
    ),
    Publisher(
        "google",
        "gemini",
        (),
        {
            (Operation.GENERATE, False): Method("generateContent"),
            (Operation.GENERATE, True): Method("streamGenerateContent?alt=sse"),
            (Operation.COUNT_TOKENS, False): Method("countTokens"),
        },
    ),
)


def publisher_of(model: str) -> Publisher:
    return next(p for p in PUBLISHERS if p.owns(model))


# Regions served from a host of their own (the multi-region endpoints); every other region `r`
# is at `https://r-aiplatform.googleapis.com`.
_REGION_HOSTS: Final[Mapping[str, str]] = {
    "global": "https://aiplatform.googleapis.com",
    "us": "https://aiplatform.us.rep.googleapis.com",
    "eu": "https://aiplatform.eu.rep.googleapis.com",
}


def region_base_url(region: str) -> str:
    return _REGION_HOSTS.get(region, f"https://{region}-aiplatform.googleapis.com")


class VertexProvider:
    """Sends Gemini and Anthropic bodies to Vertex AI's publisher model endpoints (module doc).

    `base_url` (scheme and host) overrides the region's endpoint, for a proxy or a test server.
    """

    wire = "gemini"  # the wire of most models; wire_of(model) says which one a model speaks
    own_stop_reasons = NO_OWN_STOP_REASONS

    def __init__(
        self,
        name: str,
        project: str,
        region: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        tokens: AccessTokens | None = None,
        *,
        pool: PoolLimits = DEFAULT_POOL,
    ) -> None:
        self.name = name
        root = (base_url or region_base_url(region)).rstrip("/")
        self._models = f"{root}/v1/projects/{quote(project, safe='')}/locations/" + quote(
            region, safe=""
        )
        self._api_key = api_key
        self._tokens = tokens if tokens is not None or api_key is not None else AccessTokens(name)
        self._http = HttpTransport(name, timeouts, pool)

    def method(self, publisher: Publisher, operation: Operation, stream: bool) -> Method:
        method = publisher.methods.get((operation, stream))
        if method is None:
            streamed = " streamed" if stream else ""
            raise InvalidRequest(
                f"provider {self.name!r} does not offer {operation.value}{streamed} for "
                f"{publisher.name} models on Vertex AI"
            )
        return method

    def url(self, publisher: Publisher, method: Method, model: str) -> str:
        # The model is one path segment: `@` (Claude's version suffix) stays, `/`, `?`, `;` and
        # `:` are escaped so a name cannot reach another path or method.
        segment = method.model or quote(model, safe="@")
        return f"{self._models}/publishers/{publisher.name}/models/{segment}:{method.name}"

    async def _headers(self, publisher: Publisher, request: ProviderRequest) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        client = request.headers
        for name in publisher.forwarded:
            if name in client:
                headers[name] = client[name]
        if self._api_key is not None:
            headers["x-goog-api-key"] = self._api_key
        elif self._tokens is not None:
            headers["authorization"] = "Bearer " + await self._tokens.current()
        else:  # unreachable by construction; a clear error rather than an unsigned request
            raise UpstreamCredentialsUnavailable(f"upstream {self.name!r}: no credentials")
        return headers

    async def send(self, request: ProviderRequest) -> HttpReply:
        publisher = publisher_of(request.model)
        method = self.method(publisher, request.operation, request.stream)
        url = self.url(publisher, method, request.model)
        headers = await self._headers(publisher, request)
        return await self._http.post(url, method.rewrite(request.body), headers)

    def wire_of(self, model: str) -> str:
        return publisher_of(model).wire

    def offers(self, operation: Operation, model: str) -> bool:
        return (operation, False) in publisher_of(model).methods

    def offered_models(self) -> Sequence[str]:
        return ()

    async def start(self) -> None:
        """The first token is fetched now, so the first request does not wait for it."""
        if self._tokens is not None:
            self._tokens.begin()

    def pool_stats(self) -> PoolStats | None:
        return self._http.stats

    async def close(self) -> None:
        if self._tokens is not None:
            await self._tokens.close()
        await self._http.close()

"""Vertex AI upstreams: Google's Gemini models and Anthropic's Claude models in one project.

Vertex names a model under its publisher, and each publisher speaks its own wire: Gemini models
(publisher `google`) the Gemini wire, Claude models (publisher `anthropic`) the Anthropic
Messages wire through `rawPredict` / `streamRawPredict`. The publisher follows from the model's
name (`PUBLISHERS`, a table of rows, first match wins); so does the wire the gateway translates
to (`wire_of`).

    provider = VertexProvider("vertex", project="my-project", region="us-east5")
    request = ProviderRequest(body, stream=True, model="claude-sonnet-4@20250514")
    reply = await provider.send(request)

Requests carry `Authorization: Bearer <token>` from Application Default Credentials, kept fresh
off the request path (`providers.google_credentials`); a configured `api_key` (Vertex express
mode) is sent as `x-goog-api-key` instead. The client's own credential is never forwarded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

import orjson

from gateway.errors import InvalidRequest, UpstreamCredentialsUnavailable
from providers.base import Operation, ProviderRequest
from providers.google_credentials import AccessTokens
from providers.http import DEFAULT_TIMEOUTS, HttpReply, HttpTransport, Timeouts

# The Messages version Vertex requires in the body (it takes no `anthropic-version` header).
VERTEX_ANTHROPIC_VERSION: Final = "vertex-2023-10-16"


def _anthropic_body(body: bytes) -> bytes:
    """The Messages body as Vertex takes it: the model is in the URL, the version in the body."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body  # not ours to judge: the upstream answers it with its own error
    if not isinstance(obj, dict):
        return body
    obj.pop("model", None)
    obj["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
    return orjson.dumps(obj)


def _unchanged(body: bytes) -> bytes:
    return body


@dataclass(frozen=True, slots=True)
class Publisher:
    """One Vertex publisher: which models are its, the wire they speak, the URL method per
    (operation, streamed), the body rewrite, and the client headers forwarded."""

    name: str  # the URL's `publishers/<name>` segment
    wire: str  # a row of gateway.formats.registry.WIRES
    prefixes: tuple[str, ...]  # model names it owns; () matches every model (the last row)
    methods: Mapping[tuple[Operation, bool], str]
    rewrite: Callable[[bytes], bytes] = _unchanged
    forwarded: tuple[str, ...] = ()

    def owns(self, model: str) -> bool:
        return not self.prefixes or model.startswith(self.prefixes)


PUBLISHERS: Final[tuple[Publisher, ...]] = (
    Publisher(
        "anthropic",
        "anthropic",
        ("claude-",),
        {
            (Operation.GENERATE, False): "rawPredict",
            (Operation.GENERATE, True): "streamRawPredict",
        },
        rewrite=_anthropic_body,
        forwarded=("anthropic-beta",),
    ),
    Publisher(
        "google",
        "gemini",
        (),
        {
            (Operation.GENERATE, False): "generateContent",
            (Operation.GENERATE, True): "streamGenerateContent?alt=sse",
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

    def __init__(
        self,
        name: str,
        project: str,
        region: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        tokens: AccessTokens | None = None,
    ) -> None:
        self.name = name
        root = (base_url or region_base_url(region)).rstrip("/")
        self._models = f"{root}/v1/projects/{quote(project, safe='')}/locations/" + quote(
            region, safe=""
        )
        self._api_key = api_key
        self._tokens = tokens if tokens is not None or api_key is not None else AccessTokens(name)
        self._http = HttpTransport(name, timeouts)

    def url(self, publisher: Publisher, model: str, operation: Operation, stream: bool) -> str:
        method = publisher.methods.get((operation, stream))
        if method is None:
            raise InvalidRequest(
                f"provider {self.name!r} does not offer {operation.value} for {publisher.name} "
                "models on Vertex AI"
            )
        # The model is one path segment: `@` (Claude's version suffix) stays, `/`, `?`, `;` and
        # `:` are escaped so a name cannot reach another path or method.
        segment = quote(model, safe="@")
        return f"{self._models}/publishers/{publisher.name}/models/{segment}:{method}"

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
        url = self.url(publisher, request.model, request.operation, request.stream)
        headers = await self._headers(publisher, request)
        return await self._http.post(url, publisher.rewrite(request.body), headers)

    def wire_of(self, model: str) -> str:
        return publisher_of(model).wire

    def offered_models(self) -> Sequence[str]:
        return ()

    async def close(self) -> None:
        if self._tokens is not None:
            await self._tokens.close()
        await self._http.close()

"""Azure OpenAI upstreams: the OpenAI wires at an Azure resource's own URLs and headers.

The wire is OpenAI's (Chat Completions, or Responses for `AzureOpenAIResponsesProvider`), read
by the OpenAI decoders; what differs is where a request goes and how it authenticates:

- a dated `api_version` (e.g. `2024-10-21`): the route's `upstream_model` is the deployment, in
  the path, `<base_url>/openai/deployments/<deployment>/chat/completions?api-version=<v>`;
- `api_version = "v1"`: the OpenAI-compatible v1 API, `<base_url>/openai/v1/chat/completions`,
  with the deployment as the body's `model` (which the exchange writes anyway), no query.

`base_url` is the resource endpoint, `https://<resource>.openai.azure.com`. Credentials: the
configured key as `api-key`; or an Entra ID token as `Authorization: Bearer`
(`providers.azure_auth`); or, with neither, the client's own credential (its bearer token or
`x-api-key`) forwarded as `api-key`.

    provider = AzureOpenAIProvider("azure", "https://res.openai.azure.com", "2024-10-21",
                                   ApiKeyAuth(key))
"""

from __future__ import annotations

from typing import Protocol
from urllib.parse import quote

from providers.azure_auth import BearerTokenFile
from providers.base import Operation, ProviderRequest
from providers.http import DEFAULT_POOL, DEFAULT_TIMEOUTS, PoolLimits, Timeouts
from providers.openai import OpenAIProvider
from providers.quirks import NO_QUIRKS, OpenAIQuirks

V1 = "v1"  # the api_version that selects the v1 OpenAI-compatible API
# The path segment of the operations other than a model answer (the same on both paths).
OPERATION_SEGMENTS = {Operation.EMBED: "embeddings"}


class AzureAuth(Protocol):
    async def headers(self, request: ProviderRequest) -> dict[str, str]: ...


class ApiKeyAuth:
    """The configured key as `api-key`; None: the client's own credential, as `api-key`."""

    __slots__ = ("_key",)

    def __init__(self, key: str | None) -> None:
        self._key = key

    async def headers(self, request: ProviderRequest) -> dict[str, str]:
        if self._key is not None:
            return {"api-key": self._key}
        client = request.headers
        if "x-api-key" in client:
            return {"api-key": client["x-api-key"]}
        bearer = client.get("authorization", "")
        scheme, _, credential = bearer.partition(" ")
        if scheme.lower() == "bearer" and credential:
            return {"api-key": credential.strip()}
        return {}


class BearerAuth:
    """An Entra ID token as `Authorization: Bearer`: a fixed one (from `token_env`) or the
    current content of a token file."""

    __slots__ = ("_file", "_token")

    def __init__(self, token: str | None = None, file: BearerTokenFile | None = None) -> None:
        self._token = token
        self._file = file

    async def headers(self, request: ProviderRequest) -> dict[str, str]:
        token = self._token if self._file is None else await self._file.token()
        return {"Authorization": f"Bearer {token}"} if token else {}


class AzureOpenAIProvider(OpenAIProvider):
    """Chat Completions at an Azure OpenAI resource (deployment path or v1 path)."""

    operation = "chat/completions"

    def offers(self, operation: Operation, model: str) -> bool:
        return operation is Operation.GENERATE or operation in OPERATION_SEGMENTS

    def __init__(
        self,
        name: str,
        base_url: str,
        api_version: str,
        auth: AzureAuth,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        quirks: OpenAIQuirks = NO_QUIRKS,
        *,
        pool: PoolLimits = DEFAULT_POOL,
    ) -> None:
        super().__init__(name, base_url, None, timeouts, quirks, pool=pool)
        self._base = base_url.rstrip("/")
        self._version = api_version
        self._auth = auth

    def segment(self, request: ProviderRequest) -> str:
        generating = request.operation is Operation.GENERATE
        return self.operation if generating else OPERATION_SEGMENTS[request.operation]

    def url(self, request: ProviderRequest) -> str:
        if self._version == V1:
            return f"{self._base}/openai/v1/{self.segment(request)}"
        deployment = quote(request.model, safe="")
        version = quote(self._version, safe="")
        path = f"/openai/deployments/{deployment}/{self.segment(request)}"
        return f"{self._base}{path}?api-version={version}"

    async def auth_headers(self, request: ProviderRequest) -> dict[str, str]:
        return await self._auth.headers(request)


class AzureOpenAIResponsesProvider(AzureOpenAIProvider):
    """The Responses API of an Azure OpenAI resource: `<base_url>/openai/v1/responses`, or with
    a dated `api_version`, `<base_url>/openai/responses?api-version=<v>` (the deployment is the
    body's `model` on both)."""

    wire = "openai_responses"
    operation = "responses"

    def url(self, request: ProviderRequest) -> str:
        if self._version == V1 or request.operation is not Operation.GENERATE:
            return super().url(request)  # embeddings stay on the deployment path
        return f"{self._base}/openai/{self.operation}?api-version={quote(self._version, safe='')}"

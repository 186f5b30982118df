"""OpenAI Chat Completions upstreams: api.openai.com and any compatible server (vLLM, Ollama,
llama.cpp, Groq, ...) reached through `base_url`."""

from __future__ import annotations

from collections.abc import Sequence

from providers.base import Operation, ProviderRequest
from providers.http import DEFAULT_TIMEOUTS, HttpReply, HttpTransport, Timeouts


class OpenAIProvider:
    """Sends Chat Completions bodies to `<base_url>/chat/completions`.

        provider = OpenAIProvider("openai", "https://api.openai.com/v1", api_key)
        reply = await provider.send(ProviderRequest(body=b'{"model": ...}', stream=True))

    Without a configured key the client's own `authorization` header is forwarded, so a local
    server that needs none, or a client that brings its own, both work.
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
    ) -> None:
        self.name = name
        base = base_url.rstrip("/")
        self._url = base + self.path
        self._urls = {op: base + path for op, path in self.paths.items()}
        self._api_key = api_key
        self._http = HttpTransport(name, timeouts)

    def _headers(self, request: ProviderRequest) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        elif "authorization" in request.headers:
            headers["Authorization"] = request.headers["authorization"]
        if request.stream:
            headers["Accept"] = "text/event-stream"
        return headers

    async def send(self, request: ProviderRequest) -> HttpReply:
        generating = request.operation is Operation.GENERATE
        url = self._url if generating else self._urls[request.operation]
        return await self._http.post(url, request.body, self._headers(request))

    def wire_of(self, model: str) -> str:
        return self.wire

    def offers(self, operation: Operation, model: str) -> bool:
        return operation is Operation.GENERATE or operation in self._urls

    def offered_models(self) -> Sequence[str]:
        return ()

    async def close(self) -> None:
        await self._http.close()

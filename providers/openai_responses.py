"""OpenAI Responses upstreams: api.openai.com, Azure OpenAI's v1 API, or any server offering
`POST <base_url>/responses` (the OpenAI Responses wire)."""

from __future__ import annotations

from providers.openai import OpenAIProvider


class OpenAIResponsesProvider(OpenAIProvider):
    """Sends Responses bodies to `<base_url>/responses`; auth and transport as `OpenAIProvider`.

    provider = OpenAIResponsesProvider("gpt", "https://api.openai.com/v1", api_key)
    reply = await provider.send(ProviderRequest(body=b'{"model": ...}', stream=True))
    """

    wire = "openai_responses"
    path = "/responses"

"""The provider kinds, one row each: the table `[providers.<name>] kind = ...` is read against.

A row names the wire the kind speaks, its default base URL and how to build one. An unknown kind
is a configuration error naming the known ones; nothing else compares kind names.

    provider = build_provider("openai", settings.providers["openai"], os.environ)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from providers.anthropic import AnthropicProvider
from providers.azure_auth import BearerTokenFile, EntraSettings
from providers.azure_openai import (
    ApiKeyAuth,
    AzureAuth,
    AzureOpenAIProvider,
    AzureOpenAIResponsesProvider,
    BearerAuth,
)
from providers.base import Provider
from providers.bedrock import BedrockProvider
from providers.gemini import GeminiProvider
from providers.http import PoolLimits, Timeouts
from providers.mock import MockProvider
from providers.openai import OpenAIProvider
from providers.openai_responses import OpenAIResponsesProvider
from providers.quirks import OpenAIQuirks
from providers.vertex import VertexProvider


class ProviderOptions(Protocol):
    """The configured fields a provider is built from (gateway.settings.ProviderSettings)."""

    @property
    def kind(self) -> str: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def connect_timeout(self) -> float: ...
    @property
    def first_byte_timeout(self) -> float: ...
    @property
    def idle_timeout(self) -> float: ...
    @property
    def total_timeout(self) -> float: ...
    @property
    def region(self) -> str | None: ...
    @property
    def project(self) -> str | None: ...
    @property
    def api_version(self) -> str | None: ...
    @property
    def max_connections(self) -> int: ...
    @property
    def quirks(self) -> OpenAIQuirks: ...
    @property
    def entra(self) -> EntraSettings | None: ...

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None: ...


Builder = Callable[[str, ProviderOptions, str | None], Provider]


def _timeouts(options: ProviderOptions) -> Timeouts:
    return Timeouts(
        connect=options.connect_timeout,
        first_byte=options.first_byte_timeout,
        idle=options.idle_timeout,
        total=options.total_timeout,
    )


def _pool(options: ProviderOptions) -> PoolLimits:
    limit = options.max_connections
    return PoolLimits(max_connections=limit or None)


def _http(cls: type[OpenAIProvider] | type[AnthropicProvider]) -> Builder:
    def build(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
        assert options.base_url is not None  # settings fill in the kind's default
        return cls(name, options.base_url, api_key, _timeouts(options), pool=_pool(options))

    return build


def _openai(cls: type[OpenAIProvider]) -> Builder:
    """An OpenAI-wire kind: its quirk flags too."""

    def build(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
        assert options.base_url is not None  # settings fill in the kind's default
        return cls(
            name, options.base_url, api_key, _timeouts(options), options.quirks, pool=_pool(options)
        )

    return build


def _azure(cls: type[AzureOpenAIProvider]) -> Builder:
    """`api_key` is the resolved credential: the key, or with `entra.token_env` the token."""

    def build(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
        assert options.base_url is not None and options.api_version is not None  # `requires`
        entra = options.entra
        auth: AzureAuth
        if entra is None:
            auth = ApiKeyAuth(api_key)
        elif entra.token_file is not None:
            auth = BearerAuth(file=BearerTokenFile(name, entra.token_file, entra.reread))
        else:
            auth = BearerAuth(token=api_key)
        return cls(
            name,
            options.base_url,
            options.api_version,
            auth,
            _timeouts(options),
            options.quirks,
            pool=_pool(options),
        )

    return build


def _gemini(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    assert options.base_url is not None  # settings fill in the kind's default
    timeouts = _timeouts(options)
    return GeminiProvider(
        name, options.base_url, api_key, timeouts, options.api_version, pool=_pool(options)
    )


def _mock(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    return MockProvider(name)


def _vertex(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    assert options.project is not None and options.region is not None  # the row requires them
    return VertexProvider(
        name,
        options.project,
        options.region,
        options.base_url,
        api_key,
        _timeouts(options),
        pool=_pool(options),
    )


def _bedrock(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    """A configured api_key is a Bedrock API key (bearer); without one, SigV4 with the AWS
    credential chain. The base URL defaults to the region's endpoint (settings fill it in)."""
    assert options.region is not None and options.base_url is not None  # checked by settings
    timeouts = _timeouts(options)
    return BedrockProvider(
        name, options.base_url, options.region, api_key, timeouts, pool=_pool(options)
    )


@dataclass(frozen=True, slots=True)
class ProviderKind:
    name: str
    wire: str
    build: Builder
    default_base_url: str | None = None  # None: the kind takes no base_url (offline)
    requires: tuple[str, ...] = ()  # ProviderSettings keys the kind cannot do without
    quirks: bool = False  # takes `[providers.X.quirks]` (OpenAI Chat wire kinds)
    entra: bool = False  # takes `[providers.X.entra]` (an Entra ID token: Azure OpenAI)
    # How the kind authenticates without a configured key, when not by forwarding the client's
    # credential (the startup summary says it).
    keyless: str | None = None
    # The genai-prices provider id pricing this kind's answers (gateway.cost); None: the price
    # table matches the provider from the model name alone.
    price_provider: str | None = None


KINDS: Mapping[str, ProviderKind] = {
    kind.name: kind
    for kind in (
        ProviderKind(
            "openai",
            OpenAIProvider.wire,
            _openai(OpenAIProvider),
            "https://api.openai.com/v1",
            quirks=True,
            price_provider="openai",
        ),
        ProviderKind(
            "openai_responses",
            OpenAIResponsesProvider.wire,
            _http(OpenAIResponsesProvider),
            "https://api.openai.com/v1",
            price_provider="openai",
        ),
        ProviderKind(
            "anthropic",
            AnthropicProvider.wire,
            _http(AnthropicProvider),
            "https://api.anthropic.com",
            price_provider="anthropic",
        ),
        ProviderKind(
            "gemini",
            GeminiProvider.wire,
            _gemini,
            "https://generativelanguage.googleapis.com",
            price_provider="google",
        ),
        ProviderKind("mock", MockProvider.wire, _mock),
        # Vertex AI answers Google's and Anthropic's models: priced by the model's name.
        ProviderKind("vertex", VertexProvider.wire, _vertex, requires=("project", "region")),
        ProviderKind(
            "azure_openai",
            AzureOpenAIProvider.wire,
            _azure(AzureOpenAIProvider),
            requires=("base_url", "api_version"),
            quirks=True,
            entra=True,
            price_provider="azure",
        ),
        ProviderKind(
            "azure_openai_responses",
            AzureOpenAIResponsesProvider.wire,
            _azure(AzureOpenAIResponsesProvider),
            requires=("base_url", "api_version"),
            entra=True,
            price_provider="azure",
        ),
        ProviderKind(
            "bedrock",
            BedrockProvider.wire,
            _bedrock,
            "https://bedrock-runtime.{region}.amazonaws.com",
            requires=("region",),
            keyless="requests are signed with SigV4 and the AWS credential chain",
            price_provider="aws",
        ),
    )
}


def known_kinds() -> str:
    return ", ".join(sorted(KINDS))


def build_provider(name: str, options: ProviderOptions, env: Mapping[str, str]) -> Provider:
    kind = KINDS.get(options.kind)
    if kind is None:  # settings validation refuses it first; this guards other callers
        raise ValueError(f"unknown provider kind {options.kind!r} (known: {known_kinds()})")
    return kind.build(name, options, options.resolve_api_key(env))

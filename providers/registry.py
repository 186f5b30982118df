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
from providers.base import Provider
from providers.http import Timeouts
from providers.mock import MockProvider
from providers.openai import OpenAIProvider
from providers.openai_responses import OpenAIResponsesProvider


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

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None: ...


Builder = Callable[[str, ProviderOptions, str | None], Provider]


def _http(cls: type[OpenAIProvider] | type[AnthropicProvider]) -> Builder:
    def build(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
        assert options.base_url is not None  # settings fill in the kind's default
        timeouts = Timeouts(
            connect=options.connect_timeout,
            first_byte=options.first_byte_timeout,
            idle=options.idle_timeout,
            total=options.total_timeout,
        )
        return cls(name, options.base_url, api_key, timeouts)

    return build


def _mock(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    return MockProvider(name)


@dataclass(frozen=True, slots=True)
class ProviderKind:
    name: str
    wire: str
    build: Builder
    default_base_url: str | None = None  # None: the kind takes no base_url (offline)
    # The genai-prices provider id pricing this kind's answers (gateway.cost); None: the price
    # table matches the provider from the model name alone.
    price_provider: str | None = None


KINDS: Mapping[str, ProviderKind] = {
    kind.name: kind
    for kind in (
        ProviderKind(
            "openai",
            OpenAIProvider.wire,
            _http(OpenAIProvider),
            "https://api.openai.com/v1",
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
        ProviderKind("mock", MockProvider.wire, _mock),
    )
}


def known_kinds() -> str:
    return ", ".join(sorted(KINDS))


def build_provider(name: str, options: ProviderOptions, env: Mapping[str, str]) -> Provider:
    kind = KINDS.get(options.kind)
    if kind is None:  # settings validation refuses it first; this guards other callers
        raise ValueError(f"unknown provider kind {options.kind!r} (known: {known_kinds()})")
    return kind.build(name, options, options.resolve_api_key(env))

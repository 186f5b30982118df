"""The provider kinds, one row each: the table `[providers.<name>] kind = ...` is read against.

A row names the wire the kind speaks, its default base URL and how to build one. An unknown kind
is a configuration error naming the known ones; nothing else compares kind names. A kind's
provider module is imported by its builder, so a process imports only the kinds it configures
(and their dependencies: botocore for Bedrock, google-auth for Vertex AI).

    provider = build_provider("openai", settings.providers["openai"], os.environ)
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from providers.base import Provider

if TYPE_CHECKING:  # providers.http (the pools, the TLS trust store) only when one is built
    from providers.anthropic import AnthropicProvider
    from providers.azure_auth import EntraSettings
    from providers.azure_openai import AzureOpenAIProvider
    from providers.http import PoolLimits, Timeouts
    from providers.openai_responses import OpenAIResponsesProvider
    from providers.quirks import OpenAIQuirks


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
    from providers.http import Timeouts

    return Timeouts(
        connect=options.connect_timeout,
        first_byte=options.first_byte_timeout,
        idle=options.idle_timeout,
        total=options.total_timeout,
    )


def _pool(options: ProviderOptions) -> PoolLimits:
    from providers.http import PoolLimits

    limit = options.max_connections
    return PoolLimits(max_connections=limit or None)


def _http(
    cls: type[OpenAIResponsesProvider] | type[AnthropicProvider],
    name: str,
    options: ProviderOptions,
    api_key: str | None,
) -> Provider:
    assert options.base_url is not None  # settings fill in the kind's default
    return cls(name, options.base_url, api_key, _timeouts(options), pool=_pool(options))


def _azure(
    cls: type[AzureOpenAIProvider], name: str, options: ProviderOptions, api_key: str | None
) -> Provider:
    """`api_key` is the resolved credential: the key, or with `entra.token_env` the token."""
    from providers.azure_auth import BearerTokenFile
    from providers.azure_openai import ApiKeyAuth, AzureAuth, BearerAuth

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


# One builder per kind, importing its provider module when it runs (the module docstring).


def _openai(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    from providers.openai import OpenAIProvider

    assert options.base_url is not None  # settings fill in the kind's default
    timeouts, quirks = _timeouts(options), options.quirks
    return OpenAIProvider(name, options.base_url, api_key, timeouts, quirks, pool=_pool(options))


def _openai_responses(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    from providers.openai_responses import OpenAIResponsesProvider

    return _http(OpenAIResponsesProvider, name, options, api_key)


def _anthropic(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    from providers.anthropic import AnthropicProvider

    return _http(AnthropicProvider, name, options, api_key)


def _azure_openai(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    from providers.azure_openai import AzureOpenAIProvider

    return _azure(AzureOpenAIProvider, name, options, api_key)


def _azure_openai_responses(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    from providers.azure_openai import AzureOpenAIResponsesProvider

    return _azure(AzureOpenAIResponsesProvider, name, options, api_key)


def _gemini(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    from providers.gemini import GeminiProvider

    assert options.base_url is not None  # settings fill in the kind's default
    timeouts = _timeouts(options)
    return GeminiProvider(
        name, options.base_url, api_key, timeouts, options.api_version, pool=_pool(options)
    )


def _mock(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    from providers.mock import MockProvider

    return MockProvider(name)


def _vertex(name: str, options: ProviderOptions, api_key: str | None) -> Provider:
    from providers.vertex import VertexProvider

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
    from providers.bedrock import BedrockProvider

    assert options.region is not None and options.base_url is not None  # checked by settings
    timeouts = _timeouts(options)
    return BedrockProvider(
        name, options.base_url, options.region, api_key, timeouts, pool=_pool(options)
    )


@dataclass(frozen=True, slots=True)
class ProviderKind:
    name: str
    wire: str  # a row of gateway.formats.registry.WIRES: what its provider's `wire` says
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
    # What its module imports that the rest of the gateway does not, as (module, distribution)
    # pairs: settings check they are installed without importing them, so a missing one is a
    # configuration problem named at startup rather than an ImportError once the server runs.
    packages: tuple[tuple[str, str], ...] = ()

    def missing_packages(self) -> list[str]:
        """The distributions of `packages` that are not installed."""
        return [dist for module, dist in self.packages if not _installed(module)]


def _installed(module: str) -> bool:
    """Whether `module` can be imported, found without importing it (only its parents)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


KINDS: Mapping[str, ProviderKind] = {
    kind.name: kind
    for kind in (
        ProviderKind(
            "openai",
            "openai",
            _openai,
            "https://api.openai.com/v1",
            quirks=True,
            price_provider="openai",
        ),
        ProviderKind(
            "openai_responses",
            "openai_responses",
            _openai_responses,
            "https://api.openai.com/v1",
            price_provider="openai",
        ),
        ProviderKind(
            "anthropic",
            "anthropic",
            _anthropic,
            "https://api.anthropic.com",
            price_provider="anthropic",
        ),
        ProviderKind(
            "gemini",
            "gemini",
            _gemini,
            "https://generativelanguage.googleapis.com",
            price_provider="google",
        ),
        ProviderKind("mock", "anthropic", _mock),
        # Vertex AI answers Google's and Anthropic's models: priced by the model's name. Its
        # provider says per model which wire (`wire_of`); the row names the wire of most.
        ProviderKind(
            "vertex",
            "gemini",
            _vertex,
            requires=("project", "region"),
            packages=(("google.auth", "google-auth"), ("requests", "requests")),
        ),
        ProviderKind(
            "azure_openai",
            "openai",
            _azure_openai,
            requires=("base_url", "api_version"),
            quirks=True,
            entra=True,
            price_provider="azure",
        ),
        ProviderKind(
            "azure_openai_responses",
            "openai_responses",
            _azure_openai_responses,
            requires=("base_url", "api_version"),
            entra=True,
            price_provider="azure",
        ),
        ProviderKind(
            "bedrock",
            "bedrock",
            _bedrock,
            "https://bedrock-runtime.{region}.amazonaws.com",
            requires=("region",),
            keyless="requests are signed with SigV4 and the AWS credential chain",
            price_provider="aws",
            packages=(("botocore", "botocore"),),
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

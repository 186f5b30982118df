"""`[providers.<name>]`: one upstream, of a kind of `providers.registry.KINDS`, with its base URL,
key, timeouts, retry table and the keys its kind requires (region, project, api_version), the
quirk flags of OpenAI-wire kinds and Azure's Entra ID token.

    options = ProviderSettings(kind="bedrock", region="us-east-1")
    options.base_url   # "https://bedrock-runtime.us-east-1.amazonaws.com": the kind's default
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.settings_fields import Frozen, NonEmptyStr, Seconds
from gateway.settings_fields import parse_duration as _duration
from gateway.settings_resilience import RetrySettings
from providers.azure_auth import EntraSettings
from providers.pool_limits import DEFAULT_MAX_CONNECTIONS
from providers.quirks import OpenAIQuirks
from providers.registry import KINDS, known_kinds

# A cloud region as it goes into an endpoint's host name (us-east-1, europe-west4).
REGION: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# What a POSIX shell can export: the only names `api_key_env` can usefully hold.
ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# How providers' keys begin (OpenAI and most OpenAI-compatible ones, Anthropic, Google, xAI,
# Groq, OpenRouter, GitHub tokens, the gateway's own keys).
_KEY_PREFIXES: Final = ("sk-", "AIza", "xai-", "gsk_", "sk_", "ghp_", "github_pat_", "gw-")
NOT_A_NAME: Final = "this looks like a key, not a variable name"


def looks_like_key(name: str) -> bool:
    """Whether a value given where an environment variable's name belongs is not one: a key
    pasted in its place. Such a value is never echoed (it would land in logs)."""
    if not ENV_NAME.fullmatch(name) or name.startswith(_KEY_PREFIXES):
        return True
    # A long mixed-case token with digits: random, not a name someone chose (those are upper
    # snake case, OPENAI_API_KEY, or short).
    return (
        len(name) >= 32
        and any(c.islower() for c in name)
        and any(c.isupper() for c in name)
        and any(c.isdigit() for c in name)
    )


class ProviderSettings(Frozen):
    kind: str  # a row of providers.registry.KINDS
    base_url: str | None = None
    api_key: Annotated[SecretStr, Field(min_length=1)] | None = None
    api_key_env: NonEmptyStr | None = None
    timeout: Seconds | None = None  # shorthand: first_byte_timeout and idle_timeout both
    connect_timeout: Seconds = 10.0  # TCP (and TLS) connect
    first_byte_timeout: Seconds = 600.0  # request sent to response headers (a whole answer when
    # not streamed: the upstream sends its headers once it finished generating)
    idle_timeout: Seconds = 300.0  # the longest gap between two reads of the body
    total_timeout: Seconds = 1800.0  # one attempt, from the connect to the body's last byte
    # Open upstream connections at most (0: no limit); past it a request waits for one, and the
    # wait is counted in /metrics, logged and kept in the record's attempts (providers.http_pool).
    max_connections: Annotated[int, Field(ge=0)] = DEFAULT_MAX_CONNECTIONS
    retry: RetrySettings = RetrySettings()
    # Kind-specific keys; the kind's row says which it needs (providers.registry.KINDS).
    region: NonEmptyStr | None = None  # Bedrock and Vertex AI: the cloud region
    project: NonEmptyStr | None = None  # Vertex AI: the Google Cloud project
    api_version: NonEmptyStr | None = None  # Azure OpenAI: `api-version`, or "v1"
    # OpenAI Chat wire kinds: what the server does differently (providers.quirks).
    quirks: OpenAIQuirks = OpenAIQuirks()
    entra: EntraSettings | None = None  # Azure OpenAI: an Entra ID token instead of a key

    _durations = field_validator(
        "timeout",
        "connect_timeout",
        "first_byte_timeout",
        "idle_timeout",
        "total_timeout",
        mode="before",
    )(classmethod(lambda cls, v: _duration(v)))

    @model_validator(mode="before")
    @classmethod
    def _timeout_shorthand(cls, data: Any) -> Any:
        """`timeout = N` (the key of earlier versions) sets first_byte and idle when not given;
        a wrong value is left for the `timeout` field to report."""
        if not isinstance(data, dict) or "timeout" not in data:
            return data
        try:
            value = _duration(data["timeout"])
        except ValueError:
            return data
        if isinstance(value, float) and 0 < value < math.inf:
            data = {"first_byte_timeout": value, "idle_timeout": value, **data}
        return data

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in KINDS:
            raise ValueError(f'unknown provider kind "{kind}" (known: {known_kinds()})')
        return kind

    @model_validator(mode="before")
    @classmethod
    def _default_base_url(cls, data: Any) -> Any:
        if isinstance(data, dict) and "base_url" not in data:
            name = data.get("kind")
            kind = KINDS.get(name) if isinstance(name, str) else None
            if kind is not None and kind.default_base_url is not None:
                url = kind.default_base_url
                if "{region}" in url:  # a regional endpoint (Bedrock)
                    region = data.get("region")
                    if not isinstance(region, str) or not REGION.fullmatch(region):
                        return data  # `_kind_keys` names what is missing or wrong
                    url = url.format(region=region)
                return {**data, "base_url": url}
        return data

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, name: str | None) -> str | None:
        # Refused at load, not only kept out of the startup report: a key here is a key in the
        # config file, where it was not meant to be (config errors never echo a value).
        if name is not None and looks_like_key(name):
            raise ValueError(
                f"must be the name of an environment variable (letters, digits and _); "
                f"{NOT_A_NAME}: put the key in a variable and give its name here"
            )
        return name

    @field_validator("region")
    @classmethod
    def _check_region(cls, region: str | None) -> str | None:
        """It goes into an endpoint's host name."""
        if region is not None and not REGION.fullmatch(region):
            raise ValueError("must be a cloud region name, like us-east-1")
        return region

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL")
        if "@" in parts.netloc:  # never echoed: the user info is a credential
            raise ValueError("must not hold credentials (give the key as api_key_env)")
        # Providers append paths such as "/chat/completions".
        return url.rstrip("/")

    @model_validator(mode="after")
    def _one_key_source(self) -> ProviderSettings:
        if self.api_key is not None and self.api_key_env is not None:
            raise ValueError("give api_key or api_key_env, not both")
        if self.entra is not None and (self.api_key is not None or self.api_key_env is not None):
            raise ValueError("give api_key / api_key_env or entra, not both")
        return self

    @model_validator(mode="after")
    def _kind_keys(self) -> ProviderSettings:
        """The keys the kind's row requires, and the tables only some kinds take."""
        kind = KINDS[self.kind]
        missing = [key for key in kind.requires if getattr(self, key) is None]
        if missing:
            raise ValueError(f'kind "{self.kind}" requires {" and ".join(missing)}')
        if not kind.quirks and "quirks" in self.model_fields_set:
            raise ValueError(f'quirks: kind "{self.kind}" takes none (OpenAI Chat wire only)')
        if self.entra is not None and not kind.entra:
            raise ValueError(f'entra: kind "{self.kind}" takes none (Azure OpenAI only)')
        absent = kind.missing_packages()
        if absent:
            needs, install = " and ".join(absent), " ".join(absent)
            raise ValueError(f'kind "{self.kind}" needs {needs}: pip install {install}')
        return self

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None:
        """The key to send upstream (with `entra.token_env`, the token); None means forward
        the client's own credential (with `entra.token_file`, the provider reads the file)."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env is not None:
            return env.get(self.api_key_env) or None
        if self.entra is not None and self.entra.token_env is not None:
            return env.get(self.entra.token_env) or None
        return None

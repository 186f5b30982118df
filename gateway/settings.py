"""Configuration: the TOML file read once into a frozen, typed `Settings` (DESIGN §5).

    settings = load_settings("config/gateway.toml")   # None: $GATEWAY_CONFIG, else built-in
    route = settings.resolve_route("claude-sonnet-4-5")
    if route is not None:
        provider = settings.providers[route.provider_name]
        key = provider.resolve_api_key(os.environ)     # None: forward the client's credential

Every problem is a `ConfigError` naming the file and the key path in dotted form
(`providers.openai.kindd: unknown key`, `routes[1].provider: no provider named "foo" ...`).
Route indexes are 0-based, as in `ResolvedRoute.route_index`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from gateway.audit.location import default_store_url, resolve_store_url
from providers.registry import KINDS, known_kinds

_GLOB_CHARS: Final = frozenset("*?[")
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")

NonEmptyStr = Annotated[str, Field(min_length=1)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class ConfigError(Exception):
    """A configuration problem; `problems` holds (dotted key path or None, message) pairs."""

    def __init__(self, source: str | None, problems: Sequence[tuple[str | None, str]]) -> None:
        self.source = source
        self.problems = tuple(problems)
        where = f"config error in {source}" if source else "config error"
        lines = (f"{where}: {key}: {msg}" if key else f"{where}: {msg}" for key, msg in problems)
        super().__init__("\n".join(lines))


class _Frozen(BaseModel):
    # strict: TOML values are already typed, so `port = "80"` or `port = true` is a mistake.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class ServerSettings(_Frozen):
    host: NonEmptyStr = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8080
    # On SIGTERM, SIGINT or SIGHUP: seconds in-flight exchanges get to finish before the flush.
    shutdown_grace: Seconds = 30.0


class RetrySettings(_Frozen):
    """When a failed attempt is tried again (at the next target of its route), and after how long.

    Only before the first byte reached the client; backoff is full jitter (a random wait up to
    `backoff * 2**(n-1)`, at most `max_backoff`), taken when the next target was tried already;
    a `retry-after` longer than `max_retry_after` ends the retries there."""

    attempts: Annotated[int, Field(ge=1, le=100)] = 3  # tries in all, the first one included
    backoff: Seconds = 0.5
    max_backoff: Seconds = 8.0
    max_retry_after: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 30.0
    deadline: Seconds = 60.0  # no attempt starts later than this after the request arrived
    on_status: Annotated[tuple[Annotated[int, Field(ge=400, le=599)], ...], Field(strict=False)] = (
        408,
        429,
        500,
        502,
        503,
        504,
        529,
    )

    _durations = field_validator(
        "backoff", "max_backoff", "max_retry_after", "deadline", mode="before"
    )(classmethod(lambda cls, v: _duration(v)))


class ProviderSettings(_Frozen):
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
    retry: RetrySettings = RetrySettings()

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
                return {**data, "base_url": kind.default_base_url}
        return data

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
        return self

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None:
        """The key to send upstream; None means forward the client's own credential."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env is not None:
            return env.get(self.api_key_env) or None
        return None


class TargetSettings(_Frozen):
    """One place a route's requests may go: a provider and the model name it is asked for."""

    provider: NonEmptyStr
    upstream_model: NonEmptyStr | None = None  # None: the client's own model name
    # Share of the route's traffic; 0: a fallback only, tried when the others failed.
    weight: Annotated[float, Field(ge=0, allow_inf_nan=False, strict=False)] = 1.0

    @cached_property  # in the instance's __dict__ once read: a pydantic private attribute
    def key(self) -> str:  # would go through __getattr__ on every request
        """The target's name in circuits, /health and metrics: "provider/upstream_model", with
        "*" for the client's own model name."""
        return f"{self.provider}/{self.upstream_model or '*'}"


class RouteSettings(_Frozen):
    match: NonEmptyStr
    provider: NonEmptyStr | None = None  # one target (shorthand for `targets`)
    upstream_model: NonEmptyStr | None = None
    targets: Annotated[tuple[TargetSettings, ...], Field(strict=False)] = ()
    balance: Literal["weighted", "least_in_flight"] = "weighted"
    retry: RetrySettings | None = None  # None: the first target's provider's

    @model_validator(mode="after")
    def _one_target_form(self) -> RouteSettings:
        if self.targets and (self.provider is not None or self.upstream_model is not None):
            raise ValueError("give provider (and upstream_model) or targets, not both")
        if not self.targets and self.provider is None:
            raise ValueError("give provider or targets")
        if self.targets and not any(target.weight > 0 for target in self.targets):
            raise ValueError("targets: at least one needs a weight above 0")
        return self

    @cached_property
    def _target_list(self) -> tuple[TargetSettings, ...]:
        if self.targets:
            return self.targets
        assert self.provider is not None  # the validator above
        return (TargetSettings(provider=self.provider, upstream_model=self.upstream_model),)

    def target_list(self) -> tuple[TargetSettings, ...]:
        """`targets`, or the one target `provider` / `upstream_model` name (built once)."""
        return self._target_list


class CircuitSettings(_Frozen):
    """Per target: after `failures` failures in a row it is skipped for `cooldown`, then one
    request probes it (half-open): a success closes the circuit, a failure opens it again."""

    failures: Annotated[int, Field(ge=0)] = 5  # 0: no circuit breaking
    cooldown: Seconds = 30.0

    _cooldown = field_validator("cooldown", mode="before")(classmethod(lambda cls, v: _duration(v)))


class TruncationSettings(_Frozen):
    tool_calls: Literal["withhold", "pass"] = "withhold"


class AuditSettings(_Frozen):
    # Not configured: the per-user data directory; a relative SQLite path: beside the config
    # file. parse_settings resolves both (gateway.audit.location), so readers get one URL.
    store: NonEmptyStr = Field(default_factory=lambda: default_store_url(os.environ))
    log_content: bool = False
    queue_size: Annotated[int, Field(ge=1)] = 10000  # records waiting for the writer


_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)?")
_DURATION_UNITS: Final = {None: 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SIZE: Final = re.compile(r"(\d+)\s*(B|KiB|MiB|GiB)?")
_SIZE_UNITS: Final = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


def _duration(value: Any) -> Any:
    """Seconds as a number, or a string such as "90s", "30m", "1h", "24h", "7d"."""
    if isinstance(value, str):
        match = _DURATION.fullmatch(value.strip())
        if match is None:
            raise ValueError('must be seconds or a duration such as "30m", "1h", "24h"')
        return float(match[1]) * _DURATION_UNITS[match[2]]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _size(value: Any) -> Any:
    if isinstance(value, str):
        match = _SIZE.fullmatch(value.strip())
        if match is None:
            raise ValueError('must be bytes or a size such as "64MiB", "1GiB"')
        return int(match[1]) * _SIZE_UNITS[match[2]]
    return value


class ResponsesSettings(_Frozen):
    """The Responses API's store for `previous_response_id` (never the audit database)."""

    store: NonEmptyStr = "memory"  # "memory", "off" or "sqlite:///path"
    ttl: Seconds = 3600.0
    max_entries: Annotated[int, Field(ge=1)] = 10000
    max_bytes: Annotated[int, Field(ge=1)] = 256 * 1024**2
    unsupported_tools: Literal["drop", "reject"] = "drop"

    _ttl = field_validator("ttl", mode="before")(classmethod(lambda cls, v: _duration(v)))
    _bytes = field_validator("max_bytes", mode="before")(classmethod(lambda cls, v: _size(v)))

    @field_validator("store")
    @classmethod
    def _known_store(cls, store: str) -> str:
        if store in ("memory", "off") or (store.startswith("sqlite:///") and len(store) > 10):
            return store
        raise ValueError('must be "memory", "off" or a sqlite:/// URL')


class AgentGuardSettings(_Frozen):
    identical_tool_calls: Annotated[int, Field(ge=2)] = 4
    action: Literal["flag", "reject"] = "flag"


_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")


def _sha256(value: Any) -> Any:
    if isinstance(value, str):
        digest = value.strip().lower()
        if _SHA256_HEX.fullmatch(digest) is None:
            # Never echoed: someone may have pasted the key itself here.
            raise ValueError(
                "must be the key's SHA-256 as 64 hex digits (from `gateway keys hash`), "
                "never the key itself"
            )
        return digest
    return value


class _HashedKey(_Frozen):
    """A secret given by its SHA-256 (`sha256`) or by the environment variable holding it
    (`key_env`, hashed by parse_settings at load; the key itself is never kept)."""

    sha256: str | None = None
    key_env: NonEmptyStr | None = None

    _digest = field_validator("sha256", mode="before")(classmethod(lambda cls, v: _sha256(v)))

    @model_validator(mode="after")
    def _one_source(self) -> _HashedKey:
        if (self.sha256 is None) == (self.key_env is None):
            raise ValueError("give sha256 or key_env (exactly one)")
        return self


class KeySettings(_HashedKey):
    """One `[[keys]]` table: a gateway key that clients present, its routes and its limits."""

    name: NonEmptyStr
    routes: Annotated[tuple[NonEmptyStr, ...], Field(strict=False, min_length=1)] = ("*",)
    requests_per_window: Annotated[int, Field(ge=1)] | None = None
    tokens_per_window: Annotated[int, Field(ge=1)] | None = None
    window: Seconds = 60.0

    _window = field_validator("window", mode="before")(classmethod(lambda cls, v: _duration(v)))

    def allows(self, route: RouteSettings, model: str) -> bool:
        """Whether a glob of `routes` matches the route's `match` or the client's model name."""
        return any(fnmatchcase(route.match, g) or fnmatchcase(model, g) for g in self.routes)


class AdminSettings(_Frozen):
    """`[admin]`: the key `/metrics` asks for once gateway keys are on."""

    sha256: str | None = None
    key_env: NonEmptyStr | None = None

    _digest = field_validator("sha256", mode="before")(classmethod(lambda cls, v: _sha256(v)))

    @model_validator(mode="after")
    def _at_most_one_source(self) -> AdminSettings:
        if self.sha256 is not None and self.key_env is not None:
            raise ValueError("give sha256 or key_env, not both")
        return self

    @property
    def configured(self) -> bool:
        return self.sha256 is not None or self.key_env is not None


class LimitsSettings(_Frozen):
    max_concurrent: Annotated[int, Field(ge=0)] = 0  # exchanges at once, this replica; 0: none
    max_concurrent_per_key: Annotated[int, Field(ge=0)] = 0  # per gateway key; 0: no limit
    max_body_bytes: Annotated[int, Field(ge=1)] = 64 * 1024**2
    max_header_bytes: Annotated[int, Field(ge=1024, le=16384)] = 8190  # a header line, the URL
    max_headers: Annotated[int, Field(ge=16)] = 128
    metric_models: Annotated[int, Field(ge=1)] = 100  # distinct `model` labels on /metrics

    _bytes = field_validator("max_body_bytes", mode="before")(classmethod(lambda cls, v: _size(v)))


class StateSettings(_Frozen):
    """`[state]`: where rate limits, token budgets and per-key concurrency are counted."""

    redis: NonEmptyStr | None = None  # redis://[:password@]host:port/db; None: in memory
    prefix: NonEmptyStr = "llm-gateway:"  # of every Redis key the gateway writes
    timeout: Seconds = 0.5  # per Redis operation, before the limits fail open

    _timeout = field_validator("timeout", mode="before")(classmethod(lambda cls, v: _duration(v)))

    @field_validator("redis")
    @classmethod
    def _redis_url(cls, url: str | None) -> str | None:
        if url is not None and urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            raise ValueError("must be a redis://, rediss:// or unix:// URL")
        return url


def _duplicate_keys(keys: Sequence[KeySettings]) -> list[tuple[str | None, str]]:
    """Two keys of one name, or of one hash (then no one could tell them apart)."""
    problems: list[tuple[str | None, str]] = []
    names: dict[str, int] = {}
    digests: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key.name in names:
            problems.append((f"keys[{i}].name", f"keys[{names[key.name]}] has this name"))
        names.setdefault(key.name, i)
        if key.sha256 is not None:
            if key.sha256 in digests:
                problems.append((f"keys[{i}]", f"the same key as keys[{digests[key.sha256]}]"))
            digests.setdefault(key.sha256, i)
    return problems


@dataclass(frozen=True, slots=True)
class ResolvedTarget:
    key: str  # "provider/upstream_model" as configured ("*" for the client's name): its circuit
    provider_name: str
    upstream_model: str
    weight: float


@dataclass(frozen=True, slots=True)
class ResolvedRoute:
    route_index: int
    route: RouteSettings
    targets: tuple[ResolvedTarget, ...]

    @property
    def provider_name(self) -> str:
        """The first target's provider (the route's only one unless it lists targets)."""
        return self.targets[0].provider_name

    @property
    def upstream_model(self) -> str:
        return self.targets[0].upstream_model


class Settings(_Frozen):
    server: ServerSettings = ServerSettings()
    providers: Mapping[str, ProviderSettings] = Field(default_factory=dict)
    routes: Annotated[tuple[RouteSettings, ...], Field(strict=False)] = ()
    truncation: TruncationSettings = TruncationSettings()
    audit: AuditSettings = AuditSettings()
    agent_guard: AgentGuardSettings = AgentGuardSettings()
    responses: ResponsesSettings = ResponsesSettings()
    circuit: CircuitSettings = CircuitSettings()
    keys: Annotated[tuple[KeySettings, ...], Field(strict=False)] = ()
    admin: AdminSettings = AdminSettings()
    limits: LimitsSettings = LimitsSettings()
    state: StateSettings = StateSettings()

    @model_validator(mode="after")
    def _keys_are_distinct(self) -> Settings:
        problems = _duplicate_keys(self.keys)
        if problems:
            raise ConfigError(None, problems)
        return self

    @model_validator(mode="after")
    def _routes_name_providers(self) -> Settings:
        # Raised as ConfigError, not ValueError: pydantic would report it without the route index.
        configured = ", ".join(sorted(self.providers)) or "none"
        problems: list[tuple[str | None, str]] = []
        for i, route in enumerate(self.routes):
            for j, target in enumerate(route.target_list()):
                if target.provider not in self.providers:
                    where = f"routes[{i}].targets[{j}]" if route.targets else f"routes[{i}]"
                    problem = f'no provider named "{target.provider}" (configured: {configured})'
                    problems.append((f"{where}.provider", problem))
        if problems:
            raise ConfigError(None, problems)
        return self

    def resolve_route(self, model: str) -> ResolvedRoute | None:
        for index, route in enumerate(self.routes):
            if fnmatchcase(model, route.match):
                targets = route.target_list()
                if len(targets) == 1:  # the common case, without a generator
                    only = targets[0]
                    upstream = only.upstream_model or model
                    target = ResolvedTarget(only.key, only.provider, upstream, only.weight)
                    return ResolvedRoute(index, route, (target,))
                resolved = tuple(
                    ResolvedTarget(t.key, t.provider, t.upstream_model or model, t.weight)
                    for t in targets
                )
                return ResolvedRoute(index, route, resolved)
        return None

    def retry_for(self, route: ResolvedRoute) -> RetrySettings:
        """The route's retry table, else its first target's provider's."""
        if route.route.retry is not None:
            return route.route.retry
        return self.providers[route.provider_name].retry

    def model_names(self) -> list[str]:
        """Names for `GET /v1/models`: literal match patterns, and upstream names that route."""
        names: dict[str, None] = {}
        for route in self.routes:
            if _GLOB_CHARS.isdisjoint(route.match):
                names[route.match] = None
            for target in route.target_list():
                upstream = target.upstream_model
                if upstream is not None and self.resolve_route(upstream) is not None:
                    names[upstream] = None
        return list(names)


def parse_settings(
    data: Mapping[str, Any],
    source: str | None = None,
    *,
    config_dir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] = os.environ,
) -> Settings:
    """Validate already-parsed TOML data; every problem becomes a ConfigError naming `source`.

    The audit store is resolved with `config_dir` (the file's directory) and `env`.
    """
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, [_problem(err) for err in exc.errors()]) from None
    except ConfigError as exc:
        raise ConfigError(source, exc.problems) from None
    settings = _with_audit_store_located(settings, config_dir, env)
    settings = _with_keys_hashed(settings, source, env)
    return _with_responses_store_located(settings, config_dir)


def _with_keys_hashed(settings: Settings, source: str | None, env: Mapping[str, str]) -> Settings:
    """Each `key_env` read from `env` and replaced by its SHA-256 (the variable's name stays, for
    the startup report); the key itself is not kept. ConfigError when a variable is unset."""
    problems: list[tuple[str | None, str]] = []

    def hashed(item: _HashedKey | AdminSettings, where: str) -> Any:
        var = item.key_env
        if var is None or item.sha256 is not None:
            return item
        secret = env.get(var)
        if not secret:
            problems.append(
                (f"{where}.key_env", f"${var} is {'empty' if var in env else 'not set'}")
            )
            return item
        return item.model_copy(update={"sha256": hash_key(secret)})

    keys = tuple(hashed(key, f"keys[{i}]") for i, key in enumerate(settings.keys))
    admin = hashed(settings.admin, "admin")
    if problems:
        raise ConfigError(source, problems)
    if keys == settings.keys and admin is settings.admin:
        return settings
    duplicates = _duplicate_keys(keys)  # two variables may hold the same key
    if duplicates:
        raise ConfigError(source, duplicates)
    return settings.model_copy(update={"keys": keys, "admin": admin})


def hash_key(key: str) -> str:
    """The hex SHA-256 of a key, as `[[keys]] sha256` holds it (surrounding whitespace, such as
    the newline of `echo KEY | gateway keys hash`, is not part of the key)."""
    return hashlib.sha256(key.strip().encode()).hexdigest()


def _with_responses_store_located(
    settings: Settings, config_dir: str | os.PathLike[str] | None
) -> Settings:
    """A relative SQLite path for the responses store lies beside the configuration file."""
    responses = settings.responses
    path = responses.store.removeprefix("sqlite:///")
    if path == responses.store or os.path.isabs(path) or config_dir is None:
        return settings
    store = "sqlite:///" + os.path.join(os.fspath(config_dir), path)
    update = {"responses": responses.model_copy(update={"store": store})}
    return settings.model_copy(update=update)


def _with_audit_store_located(
    settings: Settings, config_dir: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> Settings:
    audit = settings.audit
    configured = audit.store if "store" in audit.model_fields_set else None
    store = resolve_store_url(configured, config_dir, env)
    if store == audit.store:
        return settings
    return settings.model_copy(update={"audit": audit.model_copy(update={"store": store})})


def load_settings(
    path: str | os.PathLike[str] | None, env: Mapping[str, str] = os.environ
) -> Settings:
    if path is None:
        path = env.get("GATEWAY_CONFIG") or None
        if path is None:
            return default_settings(env)
    source = os.fspath(path)
    try:
        with open(source, "rb") as file:
            data = tomllib.load(file)
    except FileNotFoundError:
        raise ConfigError(source, [(None, "file not found")]) from None
    except OSError as exc:
        raise ConfigError(source, [(None, f"cannot read: {exc.strerror}")]) from None
    except UnicodeDecodeError:
        raise ConfigError(source, [(None, "not valid UTF-8")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, [(None, f"invalid TOML: {exc}")]) from None
    return parse_settings(
        data, source, config_dir=os.path.dirname(os.path.abspath(source)), env=env
    )


def default_settings(env: Mapping[str, str] = os.environ) -> Settings:
    """The offline mock, plus OpenAI / Anthropic when their key is in `env`."""
    providers: dict[str, dict[str, str]] = {"mock": {"kind": "mock"}}
    for name, var in (("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")):
        if env.get(var):
            providers[name] = {"kind": name, "api_key_env": var}
    anthropic = "anthropic" if "anthropic" in providers else "mock"
    openai = "openai" if "openai" in providers else "mock"
    routes = [("mock*", "mock"), ("claude-*", anthropic)]
    routes += [(glob, openai) for glob in ("gpt-*", "o1*", "o3*", "o4*", "chatgpt-*")]
    data = {
        "providers": providers,
        "routes": [{"match": glob, "provider": name} for glob, name in routes],
    }
    return parse_settings(data, "<built-in default>", env=env)


_MESSAGES: Final[Mapping[str, str]] = {
    "extra_forbidden": "unknown key",
    "missing": "required key missing",
    "model_type": "must be a table",
    "dict_type": "must be a table",
    "tuple_type": "must be an array of tables",
    "string_too_short": "must not be empty",
    "too_short": "must not be empty",
}


def _problem(err: Mapping[str, Any]) -> tuple[str | None, str]:
    # Never echo err["input"]: it may be an API key.
    msg = _MESSAGES.get(err["type"])
    if msg is None:
        msg = err["msg"].removeprefix("Value error, ").replace("Input should be", "must be", 1)
    return _key_path(err["loc"]) or None, msg


def _key_path(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            key = part if _BARE_KEY.fullmatch(part) else json.dumps(part)
            path += f".{key}" if path else key
    return path

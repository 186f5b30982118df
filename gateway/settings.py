"""Configuration: the TOML file read once into a frozen, typed `Settings` (DESIGN §5).

    settings = load_settings("config/gateway.toml")   # None: $GATEWAY_CONFIG, else built-in
    route = settings.resolve_route("claude-sonnet-4-5")
    if route is not None:
        provider = settings.providers[route.provider_name]
        key = provider.resolve_api_key(os.environ)     # None: forward the client's credential

Every problem is a `ConfigError` naming the file and the key path in dotted form
(`providers.openai.kindd: unknown key`, `routes[1].provider: no provider named "foo" ...`).
Route indexes are 0-based, as in `ResolvedRoute.route_index`. The tables of providers
(gateway.settings_providers), resilience (gateway.settings_resilience) and access
(gateway.settings_access) are defined beside it and named here too.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Annotated, Any, Final, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from gateway.audit.location import default_store_url, resolve_store_url
from gateway.settings_access import (
    AdminSettings,
    KeySettings,
    LimitsSettings,
    StateSettings,
    _duplicate_keys,
    hash_key,
    hash_key_envs,
)
from gateway.settings_fields import ConfigError, Frozen, NonEmptyStr, Seconds, _problem
from gateway.settings_fields import parse_duration as _duration
from gateway.settings_fields import parse_size as _size
from gateway.settings_price import PriceSettings
from gateway.settings_providers import ProviderSettings
from gateway.settings_resilience import (
    CircuitSettings,
    RecoverySettings,
    RetrySettings,
    TargetSettings,
)
from gateway.settings_telemetry import LoggingSettings, TelemetrySettings, resolve_export

_GLOB_CHARS: Final = frozenset("*?[")
ROUTE_CACHE_SIZE: Final = 4096  # model names whose route `Settings.resolve_route` keeps


class ServerSettings(Frozen):
    host: NonEmptyStr = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8080
    # On SIGTERM, SIGINT or SIGHUP: seconds in-flight exchanges get to finish before the flush.
    shutdown_grace: Seconds = 30.0
    # Processes sharing the port (gateway.workers); None: one per core. `--workers` wins.
    workers: Annotated[int, Field(ge=1)] | None = None


class RouteSettings(Frozen):
    match: NonEmptyStr
    provider: NonEmptyStr | None = None  # one target (shorthand for `targets`)
    upstream_model: NonEmptyStr | None = None
    targets: Annotated[tuple[TargetSettings, ...], Field(strict=False)] = ()
    balance: Literal["weighted", "least_in_flight"] = "weighted"
    retry: RetrySettings | None = None  # None: the first target's provider's
    price: PriceSettings | None = None  # None: the price table's (gateway.cost)
    # Its keys over the top-level [recovery] table's; None: that table as it is.
    recovery: RecoverySettings | None = None

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


class TruncationSettings(Frozen):
    tool_calls: Literal["withhold", "pass"] = "withhold"


class AuditSettings(Frozen):
    # Not configured: the per-user data directory; a relative SQLite path: beside the config
    # file. parse_settings resolves both (gateway.audit.location), so readers get one URL.
    store: NonEmptyStr = Field(default_factory=lambda: default_store_url(os.environ))
    log_content: bool = False
    queue_size: Annotated[int, Field(ge=1)] = 10000  # records waiting for the writer


class ResponsesSettings(Frozen):
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


class AgentGuardSettings(Frozen):
    identical_tool_calls: Annotated[int, Field(ge=2)] = 4
    action: Literal["flag", "reject"] = "flag"


@dataclass(frozen=True, slots=True)
class ResolvedTarget:
    key: str  # "provider/upstream_model" as configured ("*" for the client's name): its circuit
    provider_name: str
    upstream_model: str
    weight: float
    price: PriceSettings | None = None  # the target's negotiated price, else its route's


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


class Settings(Frozen):
    server: ServerSettings = ServerSettings()
    providers: Mapping[str, ProviderSettings] = Field(default_factory=dict)
    routes: Annotated[tuple[RouteSettings, ...], Field(strict=False)] = ()
    truncation: TruncationSettings = TruncationSettings()
    audit: AuditSettings = AuditSettings()
    agent_guard: AgentGuardSettings = AgentGuardSettings()
    responses: ResponsesSettings = ResponsesSettings()
    circuit: CircuitSettings = CircuitSettings()
    recovery: RecoverySettings = RecoverySettings()
    keys: Annotated[tuple[KeySettings, ...], Field(strict=False)] = ()
    admin: AdminSettings = AdminSettings()
    limits: LimitsSettings = LimitsSettings()
    state: StateSettings = StateSettings()
    logging: LoggingSettings = LoggingSettings()
    telemetry: TelemetrySettings = TelemetrySettings()

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

    @cached_property
    def _resolved(self) -> tuple[tuple[RouteSettings, ...], dict[str, ResolvedRoute | None]]:
        """The routes, and what they resolved each model name to: a client sends a few names
        over and over, and matching them against every glob again cost more than the rest of
        routing (2-3 us a request with a handful of routes, growing with the table)."""
        return self.routes, {}

    def resolve_route(self, model: str) -> ResolvedRoute | None:
        """The first route whose glob matches `model`, resolved: its answer is kept per name
        (at most ROUTE_CACHE_SIZE names, then forgotten all at once, so a client making up
        names cannot grow it)."""
        routes, found = self._resolved
        if routes is not self.routes:  # a model_copy carried another table's answers over
            del self.__dict__["_resolved"]
            routes, found = self._resolved
        try:
            return found[model]
        except KeyError:
            pass
        resolved = self._match_route(model)
        if len(found) >= ROUTE_CACHE_SIZE:
            found.clear()
        found[model] = resolved
        return resolved

    def _match_route(self, model: str) -> ResolvedRoute | None:
        for index, route in enumerate(self.routes):
            if fnmatchcase(model, route.match):
                targets = route.target_list()
                if len(targets) == 1:  # the common case, without a generator
                    only = targets[0]
                    upstream = only.upstream_model or model
                    price = only.price or route.price
                    target = ResolvedTarget(only.key, only.provider, upstream, only.weight, price)
                    return ResolvedRoute(index, route, (target,))
                price = route.price
                resolved = tuple(
                    ResolvedTarget(
                        t.key, t.provider, t.upstream_model or model, t.weight, t.price or price
                    )
                    for t in targets
                )
                return ResolvedRoute(index, route, resolved)
        return None

    def retry_for(self, route: ResolvedRoute) -> RetrySettings:
        """The route's retry table, else its first target's provider's."""
        if route.route.retry is not None:
            return route.route.retry
        return self.providers[route.provider_name].retry

    def recovery_for(self, route: ResolvedRoute) -> RecoverySettings:
        """The route's recovery: the keys its own table sets over the top-level table's."""
        own = route.route.recovery
        if own is None:
            return self.recovery
        return self.recovery.model_copy(update=own.model_dump(exclude_unset=True))

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
    settings = _with_span_export(settings, source, env)
    return _with_responses_store_located(settings, config_dir)


def _with_span_export(settings: Settings, source: str | None, env: Mapping[str, str]) -> Settings:
    """`[telemetry]` and the OTEL_* variables resolved once (gateway.settings_telemetry)."""
    try:
        export = resolve_export(settings.telemetry, env)
    except ConfigError as exc:
        raise ConfigError(source, exc.problems) from None
    if export is None:
        return settings
    telemetry = settings.telemetry.model_copy(update={"export": export})
    return settings.model_copy(update={"telemetry": telemetry})


def _with_keys_hashed(settings: Settings, source: str | None, env: Mapping[str, str]) -> Settings:
    keys, admin, problems = hash_key_envs(settings.keys, settings.admin, env)
    if problems:
        raise ConfigError(source, problems)
    if keys == settings.keys and admin is settings.admin:
        return settings
    duplicates = _duplicate_keys(keys)  # two variables may hold the same key
    if duplicates:
        raise ConfigError(source, duplicates)
    return settings.model_copy(update={"keys": keys, "admin": admin})


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


__all__ = [
    "AdminSettings",
    "AgentGuardSettings",
    "AuditSettings",
    "CircuitSettings",
    "ConfigError",
    "KeySettings",
    "LimitsSettings",
    "LoggingSettings",
    "ProviderSettings",
    "RecoverySettings",
    "ResolvedRoute",
    "ResolvedTarget",
    "ResponsesSettings",
    "RetrySettings",
    "RouteSettings",
    "ServerSettings",
    "Settings",
    "StateSettings",
    "TargetSettings",
    "TelemetrySettings",
    "TruncationSettings",
    "default_settings",
    "hash_key",
    "load_settings",
    "parse_settings",
]

"""What `gateway serve` says it runs on, one line each on stderr before `listening on`.

    source = config_source(args.config, os.environ)
    settings = load_settings(source.path, os.environ)
    for line in startup_report(settings, source, os.environ, audit_store_url):
        print(line.render(), file=sys.stderr)

The report names the configuration file, each provider and where its key comes from (never the
key), the number of routes, the audit store, where spans go when exported, and the gateway keys
(their names) or, without any, that only loopback clients should reach it; it warns about an
unset key variable, a placeholder key (`unused`; never shown), a route an earlier one shadows,
model names a mock answers, and a gateway without keys listening beyond loopback. A key pasted
where a variable's name belongs is never shown either. It is a pure function of its arguments.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final, Literal

from gateway.audit.opening import open_store
from gateway.audit.store import OFF_NOTE, audit_off, redact_url, sqlite_path
from gateway.config_source import ConfigSource
from gateway.placeholder_keys import (
    PLACEHOLDER_LENGTH,
    is_loopback,
    on_loopback,
    placeholder_providers,
)
from gateway.responses_store import open_response_store
from gateway.responses_store.base import human_duration
from gateway.settings import ProviderSettings, RouteSettings, Settings, default_settings
from gateway.settings_providers import NOT_A_NAME, looks_like_key
from gateway.state import open_state
from gateway.workers import WorkersPlan
from providers.host_port import host_port
from providers.registry import KINDS

FORWARDED: Final = "the client's own credentials are forwarded"
# With gateway keys on, a client's credential is its gateway key: it never goes upstream.
NOT_FORWARDED: Final = "requests go upstream without a key (gateway keys are never forwarded)"
_GLOB_CHARS: Final = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Line:
    level: Literal["info", "warning"]
    text: str

    def render(self) -> str:
        return f"warning: {self.text}" if self.level == "warning" else self.text


def store_location(url: str) -> str:
    """Where the audit store at `url` keeps its records, for people to read: the absolute path a
    SQLite URL opens (relative paths start at the working directory), any other URL without its
    password; `off` says so. ValueError (naming the URL without its password) when the gateway
    cannot open it."""
    if audit_off(url):
        return OFF_NOTE
    open_store(url)  # constructs without connecting: only to refuse the URLs it refuses
    if url.partition(":")[0].lower() == "sqlite":
        path = sqlite_path(url)
        return "in memory (not kept)" if path == ":memory:" else os.path.abspath(path)
    return redact_url(url)


def startup_report(
    settings: Settings,
    source: ConfigSource,
    env: Mapping[str, str],
    audit_store: str,
    host: str | None = None,
    workers: WorkersPlan | None = None,
) -> list[Line]:
    """The startup lines, information first, then warnings. `audit_store` is the URL of the store
    the gateway will open; ValueError (from `store_location`) when it cannot be opened. `host`:
    where it listens (default: `[server] host`). `workers`: how many processes serve (one, when
    not given: then nothing is said about them)."""
    host = settings.server.host if host is None else host
    forwarding = FORWARDED if not settings.keys else NOT_FORWARDED
    info = [Line("info", f"configuration: {_describe_source(source)}")]
    info += [
        Line("info", f"provider {name}: {_describe_provider(provider, env, forwarding)}")
        for name, provider in settings.providers.items()
    ]
    info.append(Line("info", f"routes: {len(settings.routes)}"))
    info.append(Line("info", f"audit store: {store_location(audit_store)}"))
    info.append(Line("info", f"responses store: {_describe_responses(settings, workers)}"))
    export = settings.telemetry.export
    if export is not None:
        spans = f"spans of service {export.service_name!r} to {export.url} ({export.origin})"
        info.append(Line("info", f"OpenTelemetry: {spans}"))
    info += [Line("info", text) for text in _access(settings, host)]
    if workers is not None and workers.count > 1:
        info.append(Line("info", f"workers: {workers.count} ({workers.origin})"))
    warnings = [
        *_key_warnings(settings, env, forwarding),
        *_placeholder_keys(settings, env),
        *_shadowed_routes(settings.routes),
    ]
    if workers is not None and workers.fallback is not None:
        warnings.append(workers.fallback)
    if audit_off(audit_store):
        warnings.append("the audit trail is off: no exchange is recorded ([audit] store)")
    warnings += _mock_answers(settings, source)
    if not settings.keys and not is_loopback(host):
        warnings.append(
            f"no gateway keys and host {host} is not loopback: anyone who can reach it may use "
            "every route (and the providers' keys); configure [[keys]] (see README, Access and "
            "limits)"
        )
    return info + [Line("warning", text) for text in warnings]


def _access(settings: Settings, host: str) -> Iterator[str]:
    """Gateway keys (their names), who reads /metrics, the limits' shared state."""
    if not settings.keys:
        if is_loopback(host):
            yield (
                f"no gateway keys: only loopback clients can reach it (host {host}), and every "
                "one of them may use every route"
            )
    else:
        names = ", ".join(key.name for key in settings.keys)
        yield f"gateway keys: {len(settings.keys)} ({names})"
    if settings.keys or settings.admin.configured:
        admin = "the admin key" if settings.admin.configured else "401 (no [admin] key configured)"
        yield f"/metrics: {admin}"
    if settings.keys:
        yield f"limits state: {open_state(settings.state).describe()}"


def _describe_responses(settings: Settings, workers: WorkersPlan | None = None) -> str:
    """Where Responses answers are kept for previous_response_id: they hold prompts and answers,
    so an operator must know."""
    r = settings.responses
    if workers is not None and workers.shares_responses:
        return (
            f"a SQLite file the {workers.count} workers share, private to this gateway in "
            f"{tempfile.gettempdir()} and removed at exit, ttl {human_duration(r.ttl)} "
            "(holds prompts and answers)"
        )
    return open_response_store(r.store, r.ttl, r.max_entries, r.max_bytes).describe()


def _describe_source(source: ConfigSource) -> str:
    if source.path is None:
        return "built-in default (no --config, $GATEWAY_CONFIG not set)"
    if source.origin == "$GATEWAY_CONFIG":
        return f"{source.path} (from $GATEWAY_CONFIG)"
    return f"{source.path} ({source.origin})"


def _describe_provider(
    provider: ProviderSettings, env: Mapping[str, str], forwarding: str = FORWARDED
) -> str:
    if provider.kind == "mock":
        return "kind mock, no key (mock)"
    forwarding = KINDS[provider.kind].keyless or forwarding  # what happens without a key
    if provider.api_key is not None:
        key = "key in the config file"
    elif provider.api_key_env is not None:
        state = "set" if env.get(provider.api_key_env) else f"unset: {forwarding}"
        key = f"key from {_variable(provider.api_key_env)} ({state})"
    else:
        key = f"no key ({forwarding})"
    host = host_port(provider.base_url or "", default_port=False)
    return f"kind {provider.kind}, host {host}, {key}"


def _key_warnings(
    settings: Settings, env: Mapping[str, str], forwarding: str = FORWARDED
) -> Iterator[str]:
    for name, provider in settings.providers.items():
        var = provider.api_key_env
        if provider.kind == "mock" or var is None or env.get(var):
            continue
        state = "is empty" if var in env else "is not set"
        then = KINDS[provider.kind].keyless or forwarding
        yield f"provider {name!r}: {_variable(var)} {state}, so {then}"


def _variable(name: str) -> str:
    """`$NAME`, or what it is instead when a key was pasted where the name belongs (never the
    value: the report goes to the logs)."""
    return f"api_key_env ({NOT_A_NAME})" if looks_like_key(name) else f"${name}"


def _placeholder_keys(settings: Settings, env: Mapping[str, str]) -> Iterator[str]:
    """Providers whose key is a placeholder (never shown); not one on loopback."""
    for name in sorted(placeholder_providers(settings, env)):
        provider = settings.providers[name]
        if on_loopback(provider.base_url):
            continue
        where = (
            "its api_key in the config file"
            if provider.api_key is not None
            else _variable(provider.api_key_env or "")
        )
        yield (
            f"provider {name!r}: {where} looks like a placeholder, not a key (shorter than "
            f"{PLACEHOLDER_LENGTH} characters, one character repeated, or a stand-in word): the "
            "upstream will refuse it (401); set the real key, or leave the variable unset"
        )


def _shadowed_routes(routes: tuple[RouteSettings, ...]) -> Iterator[str]:
    for index, route in enumerate(routes):
        earlier = next(
            (i for i in range(index) if _always_taken(route.match, routes[i].match)), None
        )
        if earlier is not None:
            yield (
                f"routes[{index}] {route.match!r} can never match: routes[{earlier}] "
                f"{routes[earlier].match!r} takes every name it matches"
            )


def _always_taken(later: str, earlier: str) -> bool:
    """Whether every name `later` matches is matched by `earlier`, by rules that are sound (no
    false positives) though not complete."""
    if later == earlier or earlier == "*":
        return True
    if _GLOB_CHARS.isdisjoint(later):
        return fnmatchcase(later, earlier)
    prefix = earlier[:-1]
    return earlier.endswith("*") and _GLOB_CHARS.isdisjoint(prefix) and later.startswith(prefix)


def _mock_answers(settings: Settings, source: ConfigSource) -> Iterator[str]:
    """Routes of real-looking model names (not `mock*`) answered by a mock provider."""
    real = _built_in_upstreams() if source.path is None else {}
    for index, route in enumerate(settings.routes):
        mocks = [
            t.provider for t in route.target_list() if settings.providers[t.provider].kind == "mock"
        ]
        if not mocks or route.match.startswith("mock"):
            continue
        shown = f"routes[{index}] {route.match!r} is answered by the mock"
        if route.match in real:
            provider, var = real[route.match]
            yield f"{shown}: set ${var} to route it to {provider}"
        else:
            yield f"{shown} provider {mocks[0]!r}, not a real upstream"


def _built_in_upstreams() -> dict[str, tuple[str, str]]:
    """Route pattern -> (provider, key variable) of the built-in default with every key set."""
    every = default_settings(_EveryVariableSet())
    upstreams = {}
    for route in every.routes:
        provider = route.target_list()[0].provider
        var = every.providers[provider].api_key_env
        if var is not None:
            upstreams[route.match] = (provider, var)
    return upstreams


class _EveryVariableSet(Mapping[str, str]):
    """An environment in which every variable is set: the built-in default with every provider,
    telling which key variable would route each of its routes to a real upstream. OpenTelemetry's
    variables are not keys: they stay unset (span export off)."""

    def __getitem__(self, name: str) -> str:
        if name.startswith("OTEL_"):
            raise KeyError(name)
        return "set"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

"""`[logging]` and `[telemetry]`: what the gateway says about itself. Its log lines' level and
form, and one OpenTelemetry span per exchange sent over OTLP/HTTP (gateway.otel).

    [logging]
    level = "info"          # debug, info, warning, error; `gateway serve --log-level` wins
    format = "auto"         # json, console, auto (console on a terminal); `--log-format` wins

    [telemetry]
    otlp_endpoint = "http://otel-collector:4318"    # spans are POSTed to <endpoint>/v1/traces
    service_name = "llm-gateway"
    headers_env = { authorization = "OTLP_AUTH" }   # a header's value read from $OTLP_AUTH

Without `otlp_endpoint`, the standard variables apply: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the
whole URL), else OTEL_EXPORTER_OTLP_ENDPOINT (a base URL), and OTEL_SERVICE_NAME;
OTEL_SDK_DISABLED=true turns export off. `parse_settings` resolves all of it once into
`TelemetrySettings.export` (None: export is off), so workers export exactly what was checked.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from gateway.log_choices import LogFormat, LogLevel
from gateway.settings_fields import ConfigError, Frozen, NonEmptyStr, Seconds
from gateway.settings_fields import parse_duration as _duration

DEFAULT_SERVICE_NAME: Final = "llm-gateway"
TRACES_PATH: Final = "/v1/traces"
# What gateway.otel imports, as (module, distribution): checked without importing them.
OTEL_PACKAGES: Final = (
    ("opentelemetry.sdk.trace", "opentelemetry-sdk"),
    ("opentelemetry.exporter.otlp.proto.http", "opentelemetry-exporter-otlp-proto-http"),
)
OTEL_EXTRA: Final = "pip install 'llm-gateway[otel]'"

# RFC 9110 field names (tokens); a value must not break the header block.
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE: Final = re.compile(r"[\r\n\x00]")


class LoggingSettings(Frozen):
    level: LogLevel = "info"
    format: LogFormat = "auto"  # auto: console when stderr is a terminal, else JSON


class OtlpTarget(Frozen):
    """Where spans go, resolved from `[telemetry]` and the environment (never from a key)."""

    url: str  # the whole traces URL, <endpoint>/v1/traces
    origin: str  # where the URL came from, for the startup report
    service_name: str
    headers: Mapping[str, SecretStr] = Field(default_factory=dict)


class TelemetrySettings(Frozen):
    otlp_endpoint: str | None = None  # a base URL such as http://otel-collector:4318
    service_name: NonEmptyStr | None = None  # None: $OTEL_SERVICE_NAME, else llm-gateway
    headers: Mapping[str, Annotated[SecretStr, Field(min_length=1)]] = Field(default_factory=dict)
    headers_env: Mapping[str, NonEmptyStr] = Field(default_factory=dict)  # header -> variable
    export_timeout: Seconds = 3.0  # one export request, retries included
    batch_delay: Seconds = 1.0  # the longest a finished span waits to be sent with others
    queue_size: Annotated[int, Field(ge=1)] = 2048  # spans waiting; past it new ones are dropped
    # The share of new traces exported (OpenTelemetry's parentbased_traceidratio): a caller's
    # traceparent still decides for its own trace. Encoding a span costs the export thread ~80 us.
    sample_ratio: Annotated[float, Field(ge=0.0, le=1.0)] = 1.0
    # Set by parse_settings (`resolve_export`), never read from the file.
    export: OtlpTarget | None = None

    _durations = field_validator("export_timeout", "batch_delay", mode="before")(
        classmethod(lambda cls, v: _duration(v))
    )

    @field_validator("export", mode="before")
    @classmethod
    def _not_a_key(cls, value: Any) -> Any:
        raise ValueError("unknown key")

    @field_validator("otlp_endpoint")
    @classmethod
    def _check_endpoint(cls, url: str | None) -> str | None:
        if url is None:
            return None
        problem = _url_problem(url)
        if problem is not None:
            raise ValueError(problem)
        return url

    @field_validator("headers", "headers_env")
    @classmethod
    def _header_names(cls, headers: Mapping[str, Any]) -> Mapping[str, Any]:
        for name in headers:
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an HTTP header name")
        for value in headers.values():
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            if _BAD_VALUE.search(text):  # never echoed: it may be a credential
                raise ValueError("a value holds a line break or NUL")
        return headers


def _url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "must be an http:// or https:// URL"
    if "@" in parts.netloc:  # never echoed: the user info is a credential
        return "must not hold credentials (give them as headers_env)"
    return None


def resolve_export(telemetry: TelemetrySettings, env: Mapping[str, str]) -> OtlpTarget | None:
    """Where spans go, or None when export is off; ConfigError naming each problem."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    found = _endpoint(telemetry, env)
    if found is None:
        return None
    url, origin, key = found
    problems: list[tuple[str | None, str]] = []
    problem = _url_problem(url)
    if problem is not None:
        problems.append((key, problem))
    headers = dict(telemetry.headers)
    for name, var in telemetry.headers_env.items():
        value = env.get(var)
        if not value:
            state = "empty" if var in env else "not set"
            problems.append((f"telemetry.headers_env.{name}", f"${var} is {state}"))
        elif _BAD_VALUE.search(value):
            problems.append((f"telemetry.headers_env.{name}", f"${var} holds a line break"))
        else:
            headers[name] = SecretStr(value)
    missing = [dist for module, dist in OTEL_PACKAGES if not _installed(module)]
    if missing:
        needs = " and ".join(missing)
        problems.append((key, f"span export needs {needs}: {OTEL_EXTRA}"))
    if problems:
        raise ConfigError(None, problems)
    service = telemetry.service_name or env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    return OtlpTarget(url=url, origin=origin, service_name=service, headers=headers)


def _endpoint(telemetry: TelemetrySettings, env: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(traces URL, where it came from, the key problems name) or None: nothing configured."""
    if telemetry.otlp_endpoint is not None:
        url = telemetry.otlp_endpoint.rstrip("/") + TRACES_PATH
        return url, "[telemetry] otlp_endpoint", "telemetry.otlp_endpoint"
    whole = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if whole:
        var = "$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        return whole, var, var
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if base:
        var = "$OTEL_EXPORTER_OTLP_ENDPOINT"
        return base.rstrip("/") + TRACES_PATH, var, var
    return None


def _installed(module: str) -> bool:
    """Whether `module` can be imported, found without importing it (only its parents)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False

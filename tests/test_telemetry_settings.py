"""`[telemetry]` and `[logging]` as parse_settings reads them, with the OTEL_* variables.

Export is on exactly when an endpoint is found: `otlp_endpoint` in the file, else
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (a whole URL), else OTEL_EXPORTER_OTLP_ENDPOINT (a base);
OTEL_SDK_DISABLED=true turns it off. Header values come from the file or from variables named
there; a problem names its key or variable, never a header's value.
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway import settings_telemetry
from gateway.config_source import ConfigSource
from gateway.settings import ConfigError, parse_settings
from gateway.startup import startup_report

BASE: dict[str, Any] = {"audit": {"store": "sqlite:///:memory:"}}


def parse(telemetry: dict[str, Any] | None = None, env: dict[str, str] | None = None, **more: Any):
    data = {**BASE, **more}
    if telemetry is not None:
        data["telemetry"] = telemetry
    return parse_settings(data, "gateway.toml", env=env or {})


def problems(telemetry: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(telemetry, env)
    return str(caught.value)


def test_export_is_off_unless_an_endpoint_is_given():
    assert parse().telemetry.export is None
    assert parse({"service_name": "x"}).telemetry.export is None


def test_the_files_endpoint_is_a_base_url():
    export = parse({"otlp_endpoint": "http://collector:4318/"}).telemetry.export
    assert export is not None
    assert export.url == "http://collector:4318/v1/traces"
    assert export.origin == "[telemetry] otlp_endpoint"
    assert export.service_name == "llm-gateway"


@pytest.mark.parametrize(
    ("env", "url", "origin"),
    [
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
            "http://c:4318/v1/traces",
            "$OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://t.example/otlp/spans",
            },
            "https://t.example/otlp/spans",
            "$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ),
    ],
)
def test_the_standard_variables_apply_when_the_file_gives_no_endpoint(env, url, origin):
    export = parse(env={**env, "OTEL_SERVICE_NAME": "from-env"}).telemetry.export
    assert export is not None
    assert (export.url, export.origin, export.service_name) == (url, origin, "from-env")


def test_the_file_wins_over_the_variables():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SERVICE_NAME": "env"}
    telemetry = {"otlp_endpoint": "http://file:4318", "service_name": "file"}
    export = parse(telemetry, env).telemetry.export
    assert export is not None
    assert (export.url, export.service_name) == ("http://file:4318/v1/traces", "file")


def test_otel_sdk_disabled_turns_export_off():
    env = {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert parse({"otlp_endpoint": "http://c:4318"}, env).telemetry.export is None


def test_headers_from_the_file_and_from_variables():
    telemetry = {
        "otlp_endpoint": "http://c:4318",
        "headers": {"x-tenant": "ops"},
        "headers_env": {"authorization": "OTLP_AUTH"},
    }
    export = parse(telemetry, {"OTLP_AUTH": "Bearer SECRET-1"}).telemetry.export
    assert export is not None
    shown = {name: value.get_secret_value() for name, value in export.headers.items()}
    assert shown == {"x-tenant": "ops", "authorization": "Bearer SECRET-1"}
    assert "SECRET-1" not in repr(export)


def test_an_unset_header_variable_is_named():
    telemetry = {
        "otlp_endpoint": "http://c:4318",
        "headers": {"x-other": "SECRET-2"},
        "headers_env": {"authorization": "OTLP_AUTH"},
    }
    message = problems(telemetry)
    assert "gateway.toml: telemetry.headers_env.authorization: $OTLP_AUTH is not set" in message
    assert "SECRET-2" not in message
    assert "is empty" in problems(telemetry, {"OTLP_AUTH": ""})


@pytest.mark.parametrize(
    ("telemetry", "env", "expected"),
    [
        ({"otlp_endpoint": "collector:4318"}, {}, "telemetry.otlp_endpoint: must be an http://"),
        ({"otlp_endpoint": "http://u:SECRET-3@c:4318"}, {}, "must not hold credentials"),
        ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"}, "$OTEL_EXPORTER_OTLP_ENDPOINT: must be"),
        ({"export": {"url": "http://c"}}, {}, "telemetry.export: unknown key"),
        ({"otlp_endpoint": "http://c", "exporter": 1}, {}, "telemetry.exporter: unknown key"),
        ({"headers": {"bad name": "v"}}, {}, "'bad name' is not an HTTP header name"),
        ({"headers": {"x": "SECRET-4\r\nx: y"}}, {}, "a value holds a line break"),
        ({"queue_size": 0}, {}, "telemetry.queue_size"),
        ({"sample_ratio": 1.5}, {}, "telemetry.sample_ratio"),
        ({"sample_ratio": -0.1}, {}, "telemetry.sample_ratio"),
        ({"export_timeout": "soon"}, {}, "telemetry.export_timeout: must be seconds"),
    ],
)
def test_problems_name_their_key_and_never_a_secret(telemetry, env, expected):
    message = problems(telemetry, env)
    assert expected in message
    assert "SECRET" not in message


def test_durations_take_units():
    telemetry = parse({"export_timeout": "2s", "batch_delay": 0.5}).telemetry
    assert (telemetry.export_timeout, telemetry.batch_delay) == (2.0, 0.5)


def test_missing_packages_name_the_extra(monkeypatch):
    monkeypatch.setattr(
        settings_telemetry, "OTEL_PACKAGES", (("no_such_module_x.y", "opentelemetry-sdk"),)
    )
    message = problems({"otlp_endpoint": "http://c:4318"})
    assert "telemetry.otlp_endpoint: span export needs opentelemetry-sdk" in message
    assert "pip install 'llm-gateway[otel]'" in message
    assert parse().telemetry.export is None  # without export, nothing is needed


def test_logging_table():
    assert (parse().logging.level, parse().logging.format) == ("info", "auto")
    configured = parse(logging={"level": "warning", "format": "console"}).logging
    assert (configured.level, configured.format) == ("warning", "console")
    with pytest.raises(ConfigError) as caught:
        parse(logging={"level": "loud"})
    assert "logging.level: must be 'debug', 'info', 'warning' or 'error'" in str(caught.value)


def test_the_startup_report_says_where_spans_go():
    settings = parse({"otlp_endpoint": "http://c:4318"})
    lines = startup_report(
        settings, ConfigSource(None, "built-in default"), {}, "sqlite:///:memory:"
    )
    texts = [line.text for line in lines]
    expected = (
        "OpenTelemetry: spans of service 'llm-gateway' to http://c:4318/v1/traces "
        "([telemetry] otlp_endpoint)"
    )
    assert expected in texts
    off = startup_report(parse(), ConfigSource(None, "built-in default"), {}, "sqlite:///:memory:")
    assert not [line for line in off if "OpenTelemetry" in line.text]

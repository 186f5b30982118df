"""`startup_report`: the lines `gateway serve` writes before `listening on`, over real settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config_source import ConfigSource, config_source
from gateway.settings import default_settings, parse_settings
from gateway.startup import Line, startup_report, store_location

OPENAI_SECRET = "sk-startup-SECRET-openai"
ANTHROPIC_SECRET = "sk-ant-startup-SECRET"
LITERAL_SECRET = "sk-literal-SECRET-in-file"
SECRETS = (OPENAI_SECRET, ANTHROPIC_SECRET, LITERAL_SECRET, "pg-SECRET")
BUILT_IN = ConfigSource(None, "built-in default")
DEFAULT_STORE = "sqlite:///gateway-audit.db"
MEMORY_STORE = "memory, ttl 1h, at most 10000 responses / 256 MiB (lost at exit)"
NO_KEYS_LOOPBACK = (
    "no gateway keys: only loopback clients can reach it (host 127.0.0.1), and every one of them "
    "may use every route"
)


def texts(lines: list[Line], level: str) -> list[str]:
    return [line.text for line in lines if line.level == level]


def assert_no_secret(lines: list[Line]) -> None:
    for line in lines:
        for secret in SECRETS:
            assert secret not in line.render()


def file_source(tmp_path: Path) -> ConfigSource:
    return ConfigSource(tmp_path / "gateway.toml", "--config")


def settings_with_routes(*patterns: str) -> Any:
    return parse_settings(
        {
            "providers": {"up": {"kind": "openai", "api_key": LITERAL_SECRET}},
            "routes": [{"match": pattern, "provider": "up"} for pattern in patterns],
        }
    )


def test_built_in_default_without_keys(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env: dict[str, str] = {}
    lines = startup_report(default_settings(env), config_source(None, env), env, DEFAULT_STORE)

    assert texts(lines, "info") == [
        "configuration: built-in default (no --config, $GATEWAY_CONFIG not set)",
        "provider mock: kind mock, no key (mock)",
        "routes: 7",
        f"audit store: {tmp_path / 'gateway-audit.db'}",
        f"responses store: {MEMORY_STORE}",
        NO_KEYS_LOOPBACK,
    ]
    assert texts(lines, "warning") == [
        "routes[1] 'claude-*' is answered by the mock: set $ANTHROPIC_API_KEY to route it to "
        "anthropic",
        *(
            f"routes[{i}] '{glob}' is answered by the mock: set $OPENAI_API_KEY to route it to "
            "openai"
            for i, glob in enumerate(["gpt-*", "o1*", "o3*", "o4*", "chatgpt-*"], start=2)
        ),
    ]


def test_built_in_default_with_keys_names_the_variables_never_the_values():
    env = {"OPENAI_API_KEY": OPENAI_SECRET, "ANTHROPIC_API_KEY": ANTHROPIC_SECRET}
    lines = startup_report(default_settings(env), BUILT_IN, env, "sqlite:////var/gw/audit.db")

    assert texts(lines, "info") == [
        "configuration: built-in default (no --config, $GATEWAY_CONFIG not set)",
        "provider mock: kind mock, no key (mock)",
        "provider openai: kind openai, host api.openai.com, key from $OPENAI_API_KEY (set)",
        "provider anthropic: kind anthropic, host api.anthropic.com, "
        "key from $ANTHROPIC_API_KEY (set)",
        "routes: 7",
        "audit store: /var/gw/audit.db",
        f"responses store: {MEMORY_STORE}",
        NO_KEYS_LOOPBACK,
    ]
    assert texts(lines, "warning") == []
    assert_no_secret(lines)


def test_built_in_default_with_one_key_warns_for_the_other_provider_only():
    env = {"OPENAI_API_KEY": OPENAI_SECRET}
    lines = startup_report(default_settings(env), BUILT_IN, env, DEFAULT_STORE)

    warnings = texts(lines, "warning")
    assert len(warnings) == 1
    assert "'claude-*'" in warnings[0] and "$ANTHROPIC_API_KEY" in warnings[0]
    assert_no_secret(lines)


def test_every_kind_of_key_source(tmp_path):
    settings = parse_settings(
        {
            "providers": {
                "from_env": {"kind": "openai", "api_key_env": "GW_TEST_SET"},
                "env_unset": {
                    "kind": "anthropic",
                    "base_url": "https://llm.internal:8443/pg-SECRET?k=pg-SECRET",
                    "api_key_env": "GW_TEST_UNSET",
                },
                "env_empty": {"kind": "openai", "api_key_env": "GW_TEST_EMPTY"},
                "literal": {"kind": "openai", "api_key": LITERAL_SECRET},
                "forward": {"kind": "openai", "base_url": "http://127.0.0.1:9000/v1"},
            },
            "routes": [{"match": "m-*", "provider": "literal"}],
        }
    )
    env = {"GW_TEST_SET": OPENAI_SECRET, "GW_TEST_EMPTY": ""}
    lines = startup_report(settings, file_source(tmp_path), env, DEFAULT_STORE)

    forwarded = "the client's own credentials are forwarded"
    assert texts(lines, "info")[1:6] == [
        "provider from_env: kind openai, host api.openai.com, key from $GW_TEST_SET (set)",
        f"provider env_unset: kind anthropic, host llm.internal:8443, "
        f"key from $GW_TEST_UNSET (unset: {forwarded})",
        f"provider env_empty: kind openai, host api.openai.com, "
        f"key from $GW_TEST_EMPTY (unset: {forwarded})",
        "provider literal: kind openai, host api.openai.com, key in the config file",
        f"provider forward: kind openai, host 127.0.0.1:9000, no key ({forwarded})",
    ]
    assert texts(lines, "warning") == [
        f"provider 'env_unset': $GW_TEST_UNSET is not set, so {forwarded}",
        f"provider 'env_empty': $GW_TEST_EMPTY is empty, so {forwarded}",
    ]
    assert_no_secret(lines)


def test_configuration_line_names_the_file_and_where_it_came_from(tmp_path):
    path = tmp_path / "from-env.toml"
    source = config_source(None, {"GATEWAY_CONFIG": str(path)})
    lines = startup_report(settings_with_routes("x"), source, {}, DEFAULT_STORE)
    assert lines[0].text == f"configuration: {path} (from $GATEWAY_CONFIG)"

    lines = startup_report(settings_with_routes("x"), file_source(tmp_path), {}, DEFAULT_STORE)
    assert lines[0].text == f"configuration: {tmp_path / 'gateway.toml'} (--config)"


def test_relative_config_path_is_shown_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert config_source("conf/gw.toml", {}).path == tmp_path / "conf" / "gw.toml"


def shadow_warnings(*patterns: str) -> list[str]:
    lines = startup_report(settings_with_routes(*patterns), BUILT_IN, {}, DEFAULT_STORE)
    return texts(lines, "warning")


def test_shadowed_routes_are_named_with_the_route_that_shadows_them():
    assert shadow_warnings(
        "gpt-*",
        "gpt-4o",  # a literal the earlier glob matches
        "gpt-4*",  # starts with the earlier glob's literal prefix
        "gpt-*",  # the same pattern
        "claude-[0-9]*",
        "claude-3",  # a literal the earlier glob matches
        "*",
        "o1-anything",  # everything is taken by "*"
    ) == [
        "routes[1] 'gpt-4o' can never match: routes[0] 'gpt-*' takes every name it matches",
        "routes[2] 'gpt-4*' can never match: routes[0] 'gpt-*' takes every name it matches",
        "routes[3] 'gpt-*' can never match: routes[0] 'gpt-*' takes every name it matches",
        "routes[5] 'claude-3' can never match: routes[4] 'claude-[0-9]*' takes every name it "
        "matches",
        "routes[7] 'o1-anything' can never match: routes[6] '*' takes every name it matches",
    ]


@pytest.mark.parametrize(
    "patterns",
    [
        ("o1-*", "o1*"),  # "o1" itself only reaches the second
        ("gpt-4o", "gpt-*"),  # a literal first, then the glob
        ("*-mini", "gpt-*-mini"),  # overlapping globs the sound rules cannot decide
        ("g?t-4", "gpt-4*"),
        ("claude-[0-9]*", "claude-[0-9]-opus"),  # the later one is a glob, too
        ("mock*", "claude-*", "gpt-*", "o1*", "o3*", "o4*", "chatgpt-*"),  # the built-in routes
    ],
)
def test_no_false_shadowing(patterns):
    assert shadow_warnings(*patterns) == []


def test_mock_answering_real_model_names_in_a_config_file(tmp_path):
    settings = parse_settings(
        {
            "providers": {"fake": {"kind": "mock"}},
            "routes": [
                {"match": "mock-*", "provider": "fake"},
                {"match": "gpt-*", "provider": "fake"},
            ],
        }
    )
    lines = startup_report(settings, file_source(tmp_path), {}, DEFAULT_STORE)
    assert texts(lines, "warning") == [
        "routes[1] 'gpt-*' is answered by the mock provider 'fake', not a real upstream"
    ]


def test_audit_store_location():
    assert store_location("sqlite:////var/lib/gw/audit.db") == "/var/lib/gw/audit.db"
    assert store_location("sqlite:///:memory:") == "in memory (not kept)"
    shown = store_location("postgresql://gw:pg-SECRET@db.internal:5432/audit?sslmode=require")
    assert shown == "postgresql://gw:***@db.internal:5432/audit?sslmode=require"
    with pytest.raises(ValueError, match="unsupported audit store scheme 'mysql'"):
        store_location("mysql://gw:pg-SECRET@db/audit")


def test_audit_store_relative_path_is_absolute_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert store_location("sqlite:///trail/audit.db") == str(tmp_path / "trail" / "audit.db")


def test_postgres_store_line_hides_the_password(tmp_path):
    url = "postgresql://gw:pg-SECRET@db.internal/audit"
    lines = startup_report(settings_with_routes("x"), BUILT_IN, {}, url)
    assert "audit store: postgresql://gw:***@db.internal/audit" in texts(lines, "info")
    assert_no_secret(lines)


def test_warning_lines_render_with_their_prefix():
    assert Line("warning", "careful").render() == "warning: careful"
    assert Line("info", "routes: 1").render() == "routes: 1"


def test_the_responses_store_is_named_and_a_file_store_says_what_it_holds(tmp_path):
    config = {"responses": {"store": "sqlite:///chains.db", "ttl": "24h"}}
    settings = parse_settings(config, "x.toml", config_dir=tmp_path)

    lines = startup_report(settings, BUILT_IN, {}, DEFAULT_STORE)

    assert (
        f"responses store: {tmp_path / 'chains.db'} (SQLite, ttl 1d; holds prompts and answers)"
        in texts(lines, "info")
    )
    off = startup_report(
        parse_settings({"responses": {"store": "off"}}), BUILT_IN, {}, DEFAULT_STORE
    )
    assert "responses store: off (previous_response_id is never found)" in texts(off, "info")

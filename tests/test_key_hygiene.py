"""Provider keys where they do not belong: a key pasted as `api_key_env`, and placeholder keys.

A key pasted where a variable's name belongs is refused at config load, by a message that never
quotes it, and the startup report (were such settings built some other way) never shows it. A
placeholder key (`export OPENAI_API_KEY=unused` in the gateway's terminal) is warned about at
startup, naming the variable and the provider, never the value.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config_source import ConfigSource
from gateway.settings import ConfigError, default_settings, parse_settings
from gateway.settings_providers import ProviderSettings, looks_like_key
from gateway.startup import Line, startup_report

BUILT_IN = ConfigSource(None, "built-in default")
STORE = "sqlite:///:memory:"
PASTED = (
    "sk-proj-Abc123PastedSECRETvalue456",
    "sk-ant-api03-PastedSECRET-xyz",
    "AIzaSyPastedSECRET0123456789abcdefghij",
    "q8ZtR2mW9xLk4PvN7sYb3HdJ6gFc1TeU",  # a long random token of name characters
    "key with spaces",
    "1STARTS_WITH_DIGIT",
)


def rendered(lines: list[Line]) -> str:
    return "\n".join(line.render() for line in lines)


def config(var: str, **provider: object) -> dict[str, object]:
    return {
        "providers": {"up": {"kind": "openai", "api_key_env": var, **provider}},
        "routes": [{"match": "*", "provider": "up"}],
    }


@pytest.mark.parametrize("pasted", PASTED)
def test_a_key_pasted_as_the_variable_name_is_refused_without_echoing_it(pasted):
    with pytest.raises(ConfigError) as caught:
        parse_settings(config(pasted), env={pasted: "x"})
    message = str(caught.value)
    assert "providers.up.api_key_env" in message
    assert "this looks like a key, not a variable name" in message
    assert pasted not in message


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "my_key", "_K", "AWS_BEARER_TOKEN_BEDROCK"])
def test_variable_names_are_accepted(name):
    assert not looks_like_key(name)
    parse_settings(config(name), env={})


def test_gateway_serve_refuses_it_and_never_prints_it(tmp_path: Path):
    pasted = PASTED[0]
    path = tmp_path / "gateway.toml"
    path.write_text(
        f'[providers.up]\nkind = "openai"\napi_key_env = "{pasted}"\n\n'
        '[[routes]]\nmatch = "*"\nprovider = "up"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(path), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,  # with the old code it served (printing the key): killed here, a failure
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "this looks like a key, not a variable name" in done.stderr
    assert pasted not in done.stderr + done.stdout


@pytest.mark.parametrize("pasted", PASTED)
@pytest.mark.parametrize("env_set", [False, True])
def test_the_startup_report_never_shows_a_pasted_key(pasted, env_set):
    """Settings not built by parse_settings (validation bypassed) still keep it out."""
    settings = parse_settings(config("UP_KEY"), env={})
    provider = ProviderSettings.model_construct(
        **{**settings.providers["up"].__dict__, "api_key_env": pasted}
    )
    settings = settings.model_copy(update={"providers": {"up": provider}})
    env = {pasted: "sk-a-real-looking-key-0123456789"} if env_set else {}
    lines = startup_report(settings, BUILT_IN, env, STORE)
    text = rendered(lines)
    assert pasted not in text
    assert "api_key_env (this looks like a key, not a variable name)" in text
    if not env_set:
        assert any(line.level == "warning" and "'up'" in line.text for line in lines)


PLACEHOLDERS = (
    "unused",
    "dummy",
    "test",
    "sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "sk-your-api-key-goes-here-000",
    "sk-ant-PLACEHOLDER-0000000000",
)
REAL_LOOKING = "sk-proj-4fJ8kQ2mZ7xW1vB9nR5tY3hL6pD0sGcE"


@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_a_placeholder_key_is_warned_about_by_variable_and_provider(value):
    env = {"OPENAI_API_KEY": value, "ANTHROPIC_API_KEY": REAL_LOOKING}
    lines = startup_report(default_settings(env), BUILT_IN, env, STORE)
    warned = [line.text for line in lines if "placeholder" in line.text]
    assert len(warned) == 1, rendered(lines)
    assert warned[0].startswith("provider 'openai': $OPENAI_API_KEY looks like a placeholder")
    assert lines[[line.text for line in lines].index(warned[0])].level == "warning"
    assert value not in rendered(lines)


def test_real_looking_keys_and_local_upstreams_are_not_warned_about():
    env = {"OPENAI_API_KEY": REAL_LOOKING, "ANTHROPIC_API_KEY": REAL_LOOKING}
    assert "placeholder" not in rendered(
        startup_report(default_settings(env), BUILT_IN, env, STORE)
    )
    local = parse_settings(config("LOCAL_KEY", base_url="http://127.0.0.1:8000/v1"), env={})
    lines = startup_report(local, BUILT_IN, {"LOCAL_KEY": "unused"}, STORE)
    assert "placeholder" not in rendered(lines)


def test_a_placeholder_key_in_the_config_file_is_warned_about_unshown():
    settings = parse_settings(
        {
            "providers": {"up": {"kind": "anthropic", "api_key": "changeme"}},
            "routes": [{"match": "*", "provider": "up"}],
        },
        env={},
    )
    lines = startup_report(settings, BUILT_IN, {}, STORE)
    text = rendered(lines)
    assert "warning: provider 'up': its api_key in the config file looks like a placeholder" in text
    assert "changeme" not in text

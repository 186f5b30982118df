"""Configuring access: `[[keys]]`, `[admin]`, `[limits]`, `[state]` read and checked at load, what
`gateway serve` says about them at start, and `gateway keys hash|new` (the real console script),
down to a key made by `keys new` opening a served gateway to the openai SDK."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import openai
import pytest

from gateway.config_source import ConfigSource
from gateway.settings import ConfigError, parse_settings
from gateway.startup import Line, startup_report
from tests.test_cli import GATEWAY, USER, Server, clean_env

KEY = "gw-config-SECRET-key-0001"
DIGEST = hashlib.sha256(KEY.encode()).hexdigest()
SOURCE = ConfigSource(Path("/etc/gw/gateway.toml"), "--config")
STORE = "sqlite:///:memory:"


def settings(env: dict[str, str] | None = None, **tables: object):
    data = {"providers": {"up": {"kind": "openai", "api_key_env": "UP_KEY"}}, **tables}
    data.setdefault("routes", [{"match": "*", "provider": "up"}])
    return parse_settings(data, "gw.toml", env=env or {})


def problems(**tables: object) -> list[tuple[str | None, str]]:
    with pytest.raises(ConfigError) as err:
        settings(**tables)
    assert KEY not in str(err.value)
    return list(err.value.problems)


# --- settings -----------------------------------------------------------------------------------


def test_keys_have_defaults_and_durations():
    s = settings(keys=[{"name": "a", "sha256": DIGEST.upper()}, {"name": "b", "sha256": "1" * 64}])
    a = s.keys[0]

    assert (a.sha256, a.routes, a.window) == (DIGEST, ("*",), 60.0)
    assert (a.requests_per_window, a.tokens_per_window) == (None, None)
    b = settings(keys=[{"name": "b", "sha256": DIGEST, "window": "1h", "routes": ["x-*"]}]).keys[0]
    assert (b.window, b.routes) == (3600.0, ("x-*",))


def test_key_env_is_hashed_at_load_and_the_key_not_kept():
    s = settings(
        {"GW_KEY": KEY, "GW_ADMIN": "admin-SECRET"},
        keys=[{"name": "a", "key_env": "GW_KEY"}],
        admin={"key_env": "GW_ADMIN"},
    )

    assert s.keys[0].sha256 == DIGEST
    assert s.admin.sha256 == hashlib.sha256(b"admin-SECRET").hexdigest()
    dumped = repr(s) + str(s.model_dump())
    assert KEY not in dumped and "admin-SECRET" not in dumped


def test_a_missing_key_variable_is_a_config_error():
    assert problems(keys=[{"name": "a", "key_env": "NOPE"}]) == [
        ("keys[0].key_env", "$NOPE is not set")
    ]


def test_a_pasted_key_is_refused_without_being_echoed():
    ((where, message),) = problems(keys=[{"name": "a", "sha256": KEY}])

    assert where == "keys[0].sha256"
    assert "never the key itself" in message


@pytest.mark.parametrize(
    ("table", "where"),
    [
        ({"name": "a"}, "keys[0]"),  # neither sha256 nor key_env
        ({"name": "a", "sha256": DIGEST, "key_env": "X"}, "keys[0]"),
        ({"name": "a", "sha256": DIGEST, "limit": 3}, "keys[0].limit"),
        ({"name": "a", "sha256": DIGEST, "requests_per_window": 0}, "keys[0].requests_per_window"),
        ({"name": "a", "sha256": DIGEST, "window": "soon"}, "keys[0].window"),
        ({"name": "a", "sha256": DIGEST, "routes": []}, "keys[0].routes"),
    ],
)
def test_bad_key_tables_name_the_key_path(table, where):
    assert [p[0] for p in problems(keys=[table])] == [where]


def test_two_keys_of_one_name_or_one_hash_are_refused():
    assert problems(keys=[{"name": "a", "sha256": DIGEST}, {"name": "a", "sha256": "2" * 64}]) == [
        ("keys[1].name", "keys[0] has this name")
    ]
    assert problems(keys=[{"name": "a", "sha256": DIGEST}, {"name": "b", "sha256": DIGEST}]) == [
        ("keys[1]", "the same key as keys[0]")
    ]


def test_limits_and_state():
    s = settings(
        limits={"max_concurrent": 8, "max_body_bytes": "1MiB", "metric_models": 10},
        state={"redis": "redis://:pw@cache:6380/1", "timeout": "2s"},
    )

    assert (s.limits.max_concurrent, s.limits.max_body_bytes) == (8, 1024**2)
    assert (s.limits.max_concurrent_per_key, s.limits.max_headers) == (0, 128)
    assert (s.state.timeout, s.state.prefix) == (2.0, "llm-gateway:")
    assert [p[0] for p in problems(state={"redis": "http://cache"})] == ["state.redis"]
    assert [p[0] for p in problems(limits={"max_header_bytes": 65536})] == [
        "limits.max_header_bytes"
    ]


# --- the startup report -------------------------------------------------------------------------


# A key that looks real: a placeholder ("k", "unused") gets a warning of its own.
UP_ENV = {"UP_KEY": "sk-proj-4fJ8kQ2mZ7xW1vB9nR5tY3hL6pD0sGcE"}


def texts(lines: list[Line], level: str) -> list[str]:
    return [line.text for line in lines if line.level == level]


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_without_keys_on_loopback_the_report_says_only_loopback_clients(host):
    lines = startup_report(settings(UP_ENV), SOURCE, UP_ENV, STORE, host=host)

    assert (
        f"no gateway keys: only loopback clients can reach it (host {host}), and every one "
        "of them may use every route" in texts(lines, "info")
    )
    assert texts(lines, "warning") == []


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "gateway.internal"])
def test_without_keys_beyond_loopback_the_report_warns(host):
    lines = startup_report(settings(UP_ENV), SOURCE, UP_ENV, STORE, host=host)

    (warning,) = texts(lines, "warning")
    assert warning.startswith(f"no gateway keys and host {host} is not loopback: anyone")
    assert "[[keys]]" in warning
    assert not any(t.startswith("no gateway keys: only loopback") for t in texts(lines, "info"))


def test_with_keys_the_report_names_them_never_their_hashes():
    s = settings(
        {"GW_KEY": KEY},
        keys=[{"name": "ci", "key_env": "GW_KEY"}, {"name": "laptop", "sha256": "3" * 64}],
        state={"redis": "redis://:SECRET-pw@cache:6380/1"},
    )
    lines = startup_report(s, SOURCE, {}, STORE, host="0.0.0.0")

    info = texts(lines, "info")
    assert "gateway keys: 2 (ci, laptop)" in info
    assert "/metrics: 401 (no [admin] key configured)" in info
    assert "limits state: redis at cache:6380, shared by the replicas that use it" in info
    # The provider's key variable is unset: with gateway keys, nothing of the client's goes up.
    assert texts(lines, "warning") == [
        "provider 'up': $UP_KEY is not set, so requests go upstream without a key (gateway keys "
        "are never forwarded)"
    ]
    for line in lines:
        for secret in (KEY, DIGEST, "3" * 64, "SECRET-pw"):
            assert secret not in line.render()


# --- gateway keys -------------------------------------------------------------------------------


def keys_command(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GATEWAY, "keys", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        env=clean_env(),
    )


def test_keys_hash_prints_the_sha256_line_of_the_key_on_stdin():
    done = keys_command("hash", stdin=KEY + "\n")

    assert done.returncode == 0, done.stderr
    assert done.stdout == f'sha256 = "{DIGEST}"\n'
    assert KEY not in done.stdout + done.stderr


def test_keys_hash_without_a_key_is_exit_2():
    done = keys_command("hash", stdin="\n")

    assert done.returncode == 2
    assert "no key on standard input" in done.stderr


def test_a_key_from_keys_new_opens_the_gateway(tmp_path):
    done = keys_command("new")
    assert done.returncode == 0, done.stderr
    key, line = done.stdout.splitlines()
    assert key.startswith("gw-") and len(key) >= 40
    assert line == f'sha256 = "{hashlib.sha256(key.encode()).hexdigest()}"'
    again = keys_command("new").stdout.splitlines()[0]
    assert again != key

    config = tmp_path / "gw.toml"
    config.write_text(
        '[server]\nport = 0\n\n[providers.mock]\nkind = "mock"\n\n'
        '[[routes]]\nmatch = "mock-*"\nprovider = "mock"\n\n'
        f'[[keys]]\nname = "me"\n{line}\n\n[audit]\nstore = "sqlite:///audit.db"\n'
    )
    server = Server([GATEWAY, "serve", "--config", str(config)], tmp_path, clean_env())
    try:
        base = server.wait_ready()
        chat = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0).chat.completions
        assert chat.create(model="mock-text", messages=USER).choices[0].finish_reason == "stop"
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{base}/v1", api_key="gw-nope", max_retries=0).models.list()
    finally:
        assert server.stop() == 0
    assert "gateway keys: 1 (me)" in server.lines
    assert not any(key in line for line in server.lines)

"""Where the audit trail is: one place `gateway serve` and `gateway audit` both find, from any
working directory. The built-in default is the per-user data directory
(`$XDG_DATA_HOME/llm-gateway/audit.db`, else `~/.local/share/llm-gateway/audit.db`); a relative
SQLite path in a configuration file is relative to that file.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from gateway.audit.location import default_store_url, resolve_store_url
from gateway.settings import default_settings, load_settings, parse_settings
from tests.test_cli import GATEWAY, Server, clean_env, curl_chat

MOCK_ONLY = '[providers.mock]\nkind = "mock"\n\n[[routes]]\nmatch = "mock*"\nprovider = "mock"\n'


# --- the rules ---------------------------------------------------------------------------------


def test_default_is_in_xdg_data_home() -> None:
    env = {"XDG_DATA_HOME": "/srv/data", "HOME": "/home/ada"}
    assert default_store_url(env) == "sqlite:////srv/data/llm-gateway/audit.db"
    assert resolve_store_url(None, None, env) == default_store_url(env)


@pytest.mark.parametrize("xdg", [None, "", "relative/data"], ids=["unset", "empty", "relative"])
def test_default_falls_back_to_home_local_share(xdg: str | None) -> None:
    """The XDG spec: an unset, empty or relative XDG_DATA_HOME is ignored."""
    env = {"HOME": "/home/ada"} | ({} if xdg is None else {"XDG_DATA_HOME": xdg})
    assert default_store_url(env) == "sqlite:////home/ada/.local/share/llm-gateway/audit.db"


def test_default_without_home_in_env_uses_the_users_home() -> None:
    assert default_store_url({}) == f"sqlite:///{Path.home()}/.local/share/llm-gateway/audit.db"


@pytest.mark.parametrize(
    ("store", "expected"),
    [
        ("sqlite:///trail.db", "sqlite:////etc/gw/trail.db"),
        ("sqlite:///sub/dir/trail.db", "sqlite:////etc/gw/sub/dir/trail.db"),
        ("sqlite:///../trail.db", "sqlite:////etc/gw/../trail.db"),
        ("sqlite:////abs/trail.db", "sqlite:////abs/trail.db"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
        ("postgresql://u@db/audit", "postgresql://u@db/audit"),
    ],
)
def test_a_relative_sqlite_path_is_beside_the_config_file(store: str, expected: str) -> None:
    assert resolve_store_url(store, "/etc/gw", {}) == expected


def test_without_a_config_file_a_given_store_stays_as_given() -> None:
    """`--store` and programmatic settings: relative to where the command runs."""
    assert resolve_store_url("sqlite:///trail.db", None, {}) == "sqlite:///trail.db"


def test_settings_resolve_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "HOME": "/nonexistent"}
    default = f"sqlite:///{tmp_path}/xdg/llm-gateway/audit.db"
    assert default_settings(env).audit.store == default
    conf = tmp_path / "conf"
    conf.mkdir()
    without = conf / "without.toml"
    without.write_text(MOCK_ONLY)
    assert load_settings(without, env).audit.store == default
    relative = conf / "relative.toml"
    relative.write_text(MOCK_ONLY + '[audit]\nstore = "sqlite:///trail/audit.db"\n')
    expected = f"sqlite:///{conf}/trail/audit.db"
    assert load_settings(relative, env).audit.store == expected
    monkeypatch.chdir(tmp_path)  # a relative --config or $GATEWAY_CONFIG: the same file
    assert load_settings("conf/relative.toml", env).audit.store == expected
    assert load_settings(None, {**env, "GATEWAY_CONFIG": "conf/relative.toml"}).audit.store == (
        expected
    )
    assert parse_settings({"audit": {"store": "sqlite:///x.db"}}).audit.store == "sqlite:///x.db"


# --- both commands, from different directories --------------------------------------------------


def audit_json(cwd: Path, env: dict[str, str], *args: str) -> list[dict]:
    proc = subprocess.run(
        [GATEWAY, "audit", "--format", "json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def serve_one_exchange(cwd: Path, env: dict[str, str], *args: str) -> None:
    server = Server([GATEWAY, "serve", "--port", "0", *args], cwd, env)
    try:
        base = server.wait_ready()
        assert curl_chat(base)["choices"][0]["finish_reason"] == "stop"
    finally:
        assert server.stop() == 0


def directories(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    served, elsewhere = tmp_path / "served-from", tmp_path / "elsewhere"
    served.mkdir()
    elsewhere.mkdir()
    env = clean_env(XDG_DATA_HOME=str(tmp_path / "xdg"))
    return served, elsewhere, env


def test_builtin_default_trail_is_found_from_another_directory(tmp_path: Path) -> None:
    served, elsewhere, env = directories(tmp_path)
    serve_one_exchange(served, env)
    assert (tmp_path / "xdg" / "llm-gateway" / "audit.db").is_file()
    assert list(served.iterdir()) == []  # nothing in the working directory
    [summary] = audit_json(elsewhere, env)
    assert (summary["group"], summary["requests"]) == ("mock", 1)


@pytest.mark.parametrize("how", ["--config", "GATEWAY_CONFIG"])
def test_relative_sqlite_path_lands_beside_the_config_file(tmp_path: Path, how: str) -> None:
    served, elsewhere, env = directories(tmp_path)
    conf = tmp_path / "conf"
    conf.mkdir()
    config = conf / "gw.toml"
    config.write_text(MOCK_ONLY + '[audit]\nstore = "sqlite:///trail/audit.db"\n')
    if how == "--config":
        serve_one_exchange(served, env, "--config", str(config))
        found = audit_json(elsewhere, env, "--config", str(config))
    else:
        env = {**env, "GATEWAY_CONFIG": str(config)}
        serve_one_exchange(served, env)
        found = audit_json(elsewhere, env)
    assert (conf / "trail" / "audit.db").is_file()
    assert list(served.iterdir()) == [] and list(elsewhere.iterdir()) == []
    assert not (tmp_path / "xdg").exists()
    [summary] = found
    assert (summary["group"], summary["requests"]) == ("mock", 1)


def test_gateway_audit_before_any_trail_names_the_default_place(tmp_path: Path) -> None:
    _, elsewhere, env = directories(tmp_path)
    proc = subprocess.run(
        [GATEWAY, "audit"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert f"no audit store at sqlite:///{tmp_path}/xdg/llm-gateway/audit.db" in proc.stderr
    assert not (tmp_path / "xdg").exists()  # reading creates nothing

"""Every bad argument or value of the real console script gives one line on stderr, never a
traceback: exit 2 for what is wrong as written (an argument, the configuration), exit 1 when the
gateway cannot listen or its audit store cannot be opened.

Each case is one `gateway` process, all started together once, each in an empty working
directory with `XDG_DATA_HOME` in its own tmp dir: a refusal before listening leaves both empty,
so no audit store was opened.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.test_cli import GATEWAY, clean_env

POSTGRES_PASSWORD = "pw-s3cret-never-shown"
MOCK_ONLY = '[providers.mock]\nkind = "mock"\n\n[[routes]]\nmatch = "mock*"\nprovider = "mock"\n'
# A key with a limit counted in memory (no [state] redis): each worker would count it alone.
LIMITED_KEY = '[[keys]]\nname = "ci"\nsha256 = "' + "ab" * 32 + '"\nrequests_per_window = 10\n'


@dataclass
class Case:
    args: list[str]
    code: int
    needles: list[str]
    env: dict[str, str] = field(default_factory=dict)
    config: str | None = None  # written to {config} in the config dir
    one_line: bool = True  # False: startup lines come before the failure line


@dataclass
class Outcome:
    case: Case
    code: int
    lines: list[str]
    cwd: Path
    data: Path


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cases(busy: int, dead: int, config_dir: Path) -> dict[str, Case]:
    in_use = os.strerror(errno.EADDRINUSE)
    not_local = os.strerror(errno.EADDRNOTAVAIL)
    missing = str(config_dir / "missing.toml")
    pg = f"postgresql://gw:{POSTGRES_PASSWORD}@127.0.0.1:{dead}/audit"
    return {
        "port_too_big": Case(["serve", "--port", "99999"], 2, ["--port", "99999", "65535"]),
        "port_negative": Case(["serve", "--port", "-1"], 2, ["--port", "-1"]),
        "port_not_a_number": Case(["serve", "--port", "abc"], 2, ["--port", "'abc'"]),
        "port_float": Case(["serve", "--port", "1e3"], 2, ["--port", "1e3"]),
        "port_empty": Case(["serve", "--port="], 2, ["--port"]),
        "port_missing_value": Case(["serve", "--port"], 2, ["--port", "expected one argument"]),
        "host_empty": Case(["serve", "--host", ""], 2, ["--host", "empty"]),
        "host_missing_value": Case(["serve", "--host"], 2, ["--host", "expected one argument"]),
        "unknown_option": Case(["serve", "--bogus"], 2, ["--bogus"]),
        "extra_argument": Case(["serve", "extra"], 2, ["extra"]),
        "no_command": Case([], 2, ["command"]),
        "unknown_command": Case(["bogus"], 2, ["bogus"]),
        "config_missing_value": Case(["serve", "--config"], 2, ["--config"]),
        "config_empty": Case(["serve", "--config", ""], 2, ["--config", "empty"]),
        "config_not_found": Case(
            ["serve", "--config", missing], 2, ["--config", missing, "not found"]
        ),
        "config_is_a_directory": Case(
            ["serve", "--config", str(config_dir)], 2, ["--config", str(config_dir), "cannot read"]
        ),
        "env_config_not_found": Case(
            ["serve"], 2, ["$GATEWAY_CONFIG", missing, "not found"], env={"GATEWAY_CONFIG": missing}
        ),
        "store_scheme": Case(
            ["serve", "--config", "{config}"],
            2,
            ["{config}", "audit.store", "'foo'"],
            config=MOCK_ONLY + '[audit]\nstore = "foo://somewhere"\n',
        ),
        "store_without_path": Case(
            ["serve", "--config", "{config}"],
            2,
            ["{config}", "audit.store", "file path"],
            config=MOCK_ONLY + '[audit]\nstore = "sqlite:///"\n',
        ),
        "audit_limit": Case(["audit", "--limit", "abc"], 2, ["--limit", "abc"]),
        "workers_zero": Case(["serve", "--workers", "0"], 2, ["--workers", "at least 1", "0"]),
        "workers_negative": Case(["serve", "--workers", "-2"], 2, ["--workers", "-2"]),
        "workers_not_a_number": Case(["serve", "--workers", "abc"], 2, ["--workers", "'abc'"]),
        "workers_missing_value": Case(
            ["serve", "--workers"], 2, ["--workers", "expected one argument"]
        ),
        "config_workers_zero": Case(
            ["serve", "--config", "{config}"],
            2,
            ["{config}", "server.workers", "1"],
            config="[server]\nworkers = 0\n\n" + MOCK_ONLY,
        ),
        "config_workers_a_string": Case(
            ["serve", "--config", "{config}"],
            2,
            ["{config}", "server.workers"],
            config='[server]\nworkers = "4"\n\n' + MOCK_ONLY,
        ),
        "workers_would_split_memory_limits": Case(
            ["serve", "--config", "{config}", "--workers", "2"],
            2,
            ["{config}", "--workers", "keys[0].requests_per_window", "[state] redis"],
            config=MOCK_ONLY + LIMITED_KEY,
        ),
        "config_workers_would_split_memory_limits": Case(
            ["serve", "--config", "{config}"],
            2,
            ["{config}", "server.workers", "keys[0].requests_per_window", "[state] redis"],
            config="[server]\nworkers = 2\n\n" + MOCK_ONLY + LIMITED_KEY,
        ),
        "host_does_not_resolve": Case(
            ["serve", "--host", "nosuch.invalid", "--port", "0"],
            1,
            ["cannot listen", "--host", "nosuch.invalid"],
        ),
        "host_not_local": Case(
            ["serve", "--host", "198.51.100.77", "--port", "0"],
            1,
            ["cannot listen", "--host", "198.51.100.77", not_local],
        ),
        "port_in_use": Case(
            ["serve", "--port", str(busy)], 1, ["cannot listen", "--port", str(busy), in_use]
        ),
        "config_port_in_use": Case(
            ["serve", "--config", "{config}"],
            1,
            ["cannot listen", "server.port", "{config}", str(busy), in_use],
            config=f"[server]\nport = {busy}\n\n" + MOCK_ONLY,
        ),
        "store_unreachable": Case(
            ["serve", "--config", "{config}", "--port", "0"],
            1,
            ["audit store", "postgresql://gw:***@127.0.0.1", "ConnectionRefusedError"],
            config=MOCK_ONLY + f'[audit]\nstore = "{pg}"\n',
            one_line=False,
        ),
        "sqlite_store_unopenable": Case(  # a directory where the file should be
            ["serve", "--config", "{config}", "--port", "0"],
            1,
            ["cannot open the audit store", str(config_dir), "OperationalError (SQLITE_CANTOPEN)"],
            config=MOCK_ONLY + f'[audit]\nstore = "sqlite:///{config_dir}"\n',
            one_line=False,
        ),
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Outcome]:
    root = tmp_path_factory.mktemp("bad-arguments")
    config_dir = root / "configs"
    config_dir.mkdir()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    running = {}
    for name, case in cases(busy.getsockname()[1], closed_port(), config_dir).items():
        config = config_dir / f"{name}.toml"
        if case.config is not None:
            config.write_text(case.config)
        case.args = [arg.replace("{config}", str(config)) for arg in case.args]
        case.needles = [needle.replace("{config}", str(config)) for needle in case.needles]
        cwd, data = root / name, root / f"{name}-data"
        cwd.mkdir()
        data.mkdir()
        env = {**clean_env(**case.env), "XDG_DATA_HOME": str(data)}
        proc = subprocess.Popen(
            [GATEWAY, *case.args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        running[name] = (case, proc, cwd, data)
    out = {}
    for name, (case, proc, cwd, data) in running.items():
        try:
            _, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
        out[name] = Outcome(case, proc.returncode, stderr.splitlines(), cwd, data)
    busy.close()
    return out


NAMES = list(cases(1, 2, Path("/configs")))


@pytest.mark.parametrize("name", NAMES)
def test_bad_argument_gives_one_line(outcomes, name):
    outcome = outcomes[name]
    stderr = "\n".join(outcome.lines)
    assert outcome.code == outcome.case.code, stderr
    assert "Traceback" not in stderr
    assert not any(line.startswith("listening on") for line in outcome.lines), stderr
    if outcome.case.one_line:
        assert len(outcome.lines) == 1, stderr
        assert list(outcome.cwd.iterdir()) == [], "an audit store was created"
        assert list(outcome.data.iterdir()) == [], "an audit store was created"
    last = outcome.lines[-1] if outcome.lines else ""
    for needle in outcome.case.needles:
        assert needle in last, stderr
    assert POSTGRES_PASSWORD not in stderr

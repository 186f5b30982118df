"""The real console script in a subprocess: `gateway serve` on the built-in default and on files.

It prints one `listening on http://H:P` line to stderr once ready, serves the README's examples
(curl-style raw HTTP, the openai and anthropic SDKs), and exits 0 on SIGTERM, SIGINT and SIGHUP.
A bad configuration makes it exit non-zero with a message naming the key and the file.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import openai
import orjson
import pytest

from tests.conftest import free_port

VENV_BIN = Path(sys.executable).parent
GATEWAY = str(VENV_BIN / "gateway")
LISTENING = re.compile(r"^listening on http://(?P<host>[^\s:]+):(?P<port>\d+)$")
USER = [{"role": "user", "content": "hi"}]
READY_TIMEOUT = 20


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GATEWAY_CONFIG")
        and not k.startswith(("OPENAI_", "ANTHROPIC_"))
    }
    return {**env, **extra}


class Server:
    """A running `gateway serve` whose stderr is drained by a thread."""

    def __init__(
        self, argv: list[str], cwd: Path, env: dict[str, str], signal_on_ready: int | None = None
    ) -> None:
        self.signal_on_ready = signal_on_ready
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.match: re.Match[str] | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            line = line.rstrip("\n")
            self.lines.append(line)
            found = LISTENING.match(line)
            if found and self.match is None:
                if self.signal_on_ready is not None:
                    self.proc.send_signal(self.signal_on_ready)
                self.match = found
                self.ready.set()
        self.ready.set()  # the process ended

    def wait_ready(self) -> str:
        assert self.ready.wait(READY_TIMEOUT), f"not ready in time: {self.lines}"
        assert self.match is not None, f"exited before listening: {self.lines}"
        return f"http://{self.match['host']}:{self.match['port']}"

    @property
    def port(self) -> int:
        assert self.match is not None
        return int(self.match["port"])

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the gateway did not exit within 10 s of SIGTERM") from None
        self.reader.join(timeout=5)
        return code

    def listening_lines(self) -> list[str]:
        return [line for line in self.lines if line.startswith("listening on")]


@pytest.fixture
def start(tmp_path: Path) -> Iterator:
    servers: list[Server] = []

    def run(
        *args: str,
        argv0: list[str] | None = None,
        env: dict[str, str] | None = None,
        signal_on_ready: int | None = None,
    ) -> Server:
        argv = [*(argv0 or [GATEWAY]), *args]
        # The built-in default audit store is in the per-user data directory: keep it in tmp.
        env = {"XDG_DATA_HOME": str(tmp_path / "xdg-data"), **(env or clean_env())}
        server = Server(argv, tmp_path, env, signal_on_ready)
        servers.append(server)
        return server

    yield run
    for server in servers:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


def curl_chat(base: str, model: str = "mock-text") -> dict:
    """What `curl -s $BASE/v1/chat/completions -H 'content-type: application/json' -d ...` does."""
    body = orjson.dumps({"model": model, "messages": USER})
    req = urllib.request.Request(
        f"{base}/v1/chat/completions", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
        return orjson.loads(resp.read())


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        return orjson.loads(resp.read())


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- the built-in default -----------------------------------------------------------------------


def test_serve_builtin_default_readme_examples(start, tmp_path):
    server = start("serve", "--port", "0")
    base = server.wait_ready()
    assert server.match["host"] == "127.0.0.1"
    assert server.port != 0

    # curl
    completion = curl_chat(base)
    assert completion["choices"][0]["finish_reason"] == "stop"
    assert "offline mock provider" in completion["choices"][0]["message"]["content"]
    assert completion["gateway"]["provider"] == "mock"

    # the OpenAI SDK (OPENAI_BASE_URL=$BASE/v1), whole and streamed
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key="anything", max_retries=0)
    reply = oa.chat.completions.create(model="mock-tool", messages=USER)
    assert reply.choices[0].finish_reason == "tool_calls"
    assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"
    chunks = list(oa.chat.completions.create(model="mock-text", messages=USER, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "offline mock provider" in text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert "mock-text" in [m.id for m in oa.models.list()]

    # the Anthropic SDK (ANTHROPIC_BASE_URL=$BASE), whole and streamed
    an = anthropic.Anthropic(base_url=base, api_key="anything", max_retries=0)
    message = an.messages.create(model="mock-text", max_tokens=100, messages=USER)
    assert message.stop_reason == "end_turn"
    assert "offline mock provider" in message.content[0].text
    with an.messages.stream(model="mock-tool-cut", max_tokens=100, messages=USER) as s:
        final = s.get_final_message()
    assert final.stop_reason == "max_tokens"
    assert [b.type for b in final.content] == ["text"]

    # claude-* routes to the mock when no Anthropic key is in the environment
    message = an.messages.create(model="claude-gateway-test", max_tokens=100, messages=USER)
    assert message.stop_reason == "end_turn"

    assert get_json(f"{base}/healthz")["status"] == "ok"

    started = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - started < 5
    assert len(server.listening_lines()) == 1
    assert not any("Traceback" in line for line in server.lines)
    assert server.proc.stdout is not None and server.proc.stdout.read() == ""


def test_python_m_gateway_serve(start):
    server = start("serve", "--port", "0", argv0=[sys.executable, "-m", "gateway"])
    base = server.wait_ready()
    completion = curl_chat(base, "mock-parallel-tools")
    assert len(completion["choices"][0]["message"]["tool_calls"]) == 2
    an = anthropic.Anthropic(base_url=base, api_key="anything", max_retries=0)
    with an.messages.stream(model="mock-text", max_tokens=100, messages=USER) as s:
        assert s.get_final_message().stop_reason == "end_turn"
    assert server.stop() == 0
    assert len(server.listening_lines()) == 1


STOP_SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=[sig.name for sig in STOP_SIGNALS])
def test_signal_right_after_the_ready_line_exits_0(start, sig):
    # A supervisor may stop the gateway the moment it reports ready: the signal must already
    # be handled then (a clean exit 0), not kill the process with the default action.
    server = start("serve", "--port", "0", signal_on_ready=sig)
    server.wait_ready()
    assert server.proc.wait(timeout=10) == 0


# --- configuration files ------------------------------------------------------------------------

MOCK_CONFIG = """
[server]
host = "{host}"
port = {port}

[providers.mock]
kind = "mock"

[[routes]]
match = "{match}"
provider = "mock"
"""


def test_config_file_server_port_is_used(start, tmp_path):
    port = free_port()
    path = write(
        tmp_path, "gw.toml", MOCK_CONFIG.format(host="127.0.0.1", port=port, match="mock*")
    )
    server = start("serve", "--config", str(path))
    base = server.wait_ready()
    assert server.port == port
    assert server.listening_lines() == [f"listening on http://127.0.0.1:{port}"]
    assert curl_chat(base)["choices"][0]["finish_reason"] == "stop"
    assert server.stop() == 0


def test_host_and_port_flags_override_the_config(start, tmp_path):
    config_port, flag_port = free_port(), free_port()
    text = MOCK_CONFIG.format(host="127.0.0.2", port=config_port, match="mock*")
    path = write(tmp_path, "gw.toml", text)
    server = start("serve", "--config", str(path), "--host", "127.0.0.1", "--port", str(flag_port))
    base = server.wait_ready()
    assert server.listening_lines() == [f"listening on http://127.0.0.1:{flag_port}"]
    assert curl_chat(base)["choices"][0]["finish_reason"] == "stop"
    assert server.stop() == 0


def test_gateway_config_env_var_is_used(start, tmp_path):
    port = free_port()
    text = MOCK_CONFIG.format(host="127.0.0.1", port=port, match="only-this-model")
    path = write(tmp_path, "from-env.toml", text)
    server = start("serve", env=clean_env(GATEWAY_CONFIG=str(path)))
    base = server.wait_ready()
    assert server.port == port
    ids = [m["id"] for m in get_json(f"{base}/v1/models")["data"]]
    assert "only-this-model" in ids
    assert curl_chat(base, "only-this-model")["choices"][0]["finish_reason"] == "stop"
    assert server.stop() == 0


def test_config_flag_wins_over_env_var(start, tmp_path):
    env_path = write(tmp_path, "env.toml", "this is [not toml")
    port = free_port()
    text = MOCK_CONFIG.format(host="127.0.0.1", port=port, match="flag-model")
    flag_path = write(tmp_path, "flag.toml", text)
    server = start("serve", "--config", str(flag_path), env=clean_env(GATEWAY_CONFIG=str(env_path)))
    base = server.wait_ready()
    assert server.port == port
    assert "flag-model" in [m["id"] for m in get_json(f"{base}/v1/models")["data"]]
    assert server.stop() == 0


# --- bad configuration --------------------------------------------------------------------------
# Each case is one `gateway serve` that must refuse to start; they run concurrently, once.

BAD_CONFIGS = {
    "unknown_key": MOCK_CONFIG.format(host="127.0.0.1", port=0, match="mock*")
    + '\n[truncation]\ntool_call = "pass"\n',
    "unknown_provider_key": (
        '[providers.openai]\nkind = "openai"\napi_key = "sk-x"\nbase_ur = "http://x"\n'
    ),
    "missing_provider": (
        '[providers.mock]\nkind = "mock"\n\n[[routes]]\nmatch = "x*"\nprovider = "nope"\n'
    ),
    "invalid_toml": '[server\nport = "8080"\n',
    "env_var": "[server]\nprot = 8080\n",
    "missing_file": None,
}


@dataclass
class Refusal:
    path: Path
    returncode: int
    stderr: str


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, Refusal]:
    tmp = tmp_path_factory.mktemp("bad-configs")
    running = {}
    for name, text in BAD_CONFIGS.items():
        path = tmp / f"{name}.toml"
        if text is not None:
            path.write_text(text)
        xdg = str(tmp / "xdg-data")  # never the real per-user data directory
        if name == "env_var":
            args, env = ["serve"], clean_env(GATEWAY_CONFIG=str(path), XDG_DATA_HOME=xdg)
        else:
            args, env = ["serve", "--config", str(path)], clean_env(XDG_DATA_HOME=xdg)
        proc = subprocess.Popen(
            [GATEWAY, *args],
            cwd=tmp,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        running[name] = (path, proc)
    out = {}
    for name, (path, proc) in running.items():
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
        out[name] = Refusal(path, proc.returncode, stderr)
    return out


def assert_config_error(refusal: Refusal, *needles: str) -> None:
    assert refusal.returncode not in (0, None), refusal.stderr
    assert "listening on" not in refusal.stderr
    assert "Traceback" not in refusal.stderr
    assert str(refusal.path) in refusal.stderr, refusal.stderr
    for needle in needles:
        assert needle in refusal.stderr, refusal.stderr


def test_unknown_key_is_named(refusals):
    assert_config_error(refusals["unknown_key"], "truncation.tool_call", "unknown key")


def test_unknown_provider_key_is_named(refusals):
    refusal = refusals["unknown_provider_key"]
    assert_config_error(refusal, "providers.openai.base_ur")
    assert "sk-x" not in refusal.stderr


def test_route_to_missing_provider_is_named(refusals):
    assert_config_error(refusals["missing_provider"], "routes[0].provider", "nope")


def test_invalid_toml(refusals):
    assert_config_error(refusals["invalid_toml"], "TOML")


def test_bad_config_from_env_var_names_the_file(refusals):
    assert_config_error(refusals["env_var"], "server.prot")


def test_missing_config_file(refusals):
    assert_config_error(refusals["missing_file"], "not found")


# --- what it says at startup --------------------------------------------------------------------

STARTUP_KEY = "sk-startup-SECRET-in-the-environment"


def test_startup_lines_come_before_listening_and_never_show_a_key(start, tmp_path):
    # One worker: the report of one process (several add a line and share the responses store:
    # tests/test_workers.py, tests/test_startup.py).
    argv = ["serve", "--port", "0", "--workers", "1"]
    server = start(*argv, env=clean_env(OPENAI_API_KEY=STARTUP_KEY))
    server.wait_ready()
    assert server.stop() == 0
    stderr = "\n".join(server.lines)
    assert STARTUP_KEY not in stderr
    assert "Traceback" not in stderr

    plain = [line for line in server.lines if not line.startswith("{")]
    listening = plain.index(server.listening_lines()[0])
    startup = plain[:listening]
    assert startup[:4] == [
        "configuration: built-in default (no --config, $GATEWAY_CONFIG not set)",
        "provider mock: kind mock, no key (mock)",
        "provider openai: kind openai, host api.openai.com, key from $OPENAI_API_KEY (set)",
        "routes: 7",
    ]
    store = startup[4].removeprefix("audit store: ")
    assert startup[4].startswith("audit store: ") and Path(store).is_absolute(), startup
    assert Path(store).is_relative_to(tmp_path), startup  # the working or the data directory
    assert startup[5] == (
        "responses store: memory, ttl 1h, at most 10000 responses / 256 MiB (lost at exit)"
    )
    assert startup[6].startswith("no gateway keys: only loopback clients can reach it")
    assert startup[7:] == [
        "warning: routes[1] 'claude-*' is answered by the mock: set $ANTHROPIC_API_KEY to route "
        "it to anthropic"
    ]


def test_startup_lines_name_the_config_file(start, tmp_path):
    text = MOCK_CONFIG.format(host="127.0.0.1", port=0, match="x-*")
    path = write(tmp_path, "gw.toml", text + '\n[audit]\nstore = "sqlite:///trail/audit.db"\n')
    server = start("serve", "--config", "gw.toml")  # both relative to the working directory
    server.wait_ready()
    assert server.stop() == 0
    assert f"configuration: {path} (--config)" in server.lines
    assert f"audit store: {tmp_path / 'trail' / 'audit.db'}" in server.lines
    assert (tmp_path / "trail" / "audit.db").exists()
    mock = "warning: routes[0] 'x-*' is answered by the mock provider 'mock', not a real upstream"
    assert mock in server.lines

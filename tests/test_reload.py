"""Hot reload of the real `gateway serve` process: SIGUSR1 or `gateway reload --pid`.

The gateway runs as a subprocess on a configuration file in `tmp_path`, with OpenAI-wire
providers on loopback `FakeUpstream`s whose answers say which upstream served them. The test
rewrites the file and asks for a reload, then checks what new exchanges get (routes, providers,
keys, limits), that an exchange in flight across the reload ends whole on the configuration it
started with, and that a file that does not load is refused in one line while the running
configuration keeps serving.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.access_util import sha256
from tests.scenarios import Answer, script_for
from tests.test_audit_e2e import Servers
from tests.test_shutdown import GATEWAY, GatewayProcess, clean_env, exchange, records_by_id
from tests.upstream import FakeUpstream

NAMES = {"a": "alpha", "b": "bravo"}  # what each upstream answers
KEY = "gw-reload-test-key-0123456789abcdefghijklmnop"
SLOW = Answer(text="alpha " * 30)  # ~35 frames at 0.05 s: ~1.8 s


def upstream_for(label: str, *, slow: bool = False) -> FakeUpstream:
    """An upstream whose every answer says `label`, for any model a test asks."""
    upstream = FakeUpstream()
    answer = SLOW if slow else Answer(text=NAMES[label])
    for model in ("m-1", "m-2", "slow-1"):
        delay = 0.05 if slow and model == "slow-1" else 0.0
        upstream.script(model, script_for("openai", answer, model, stream=True, delay=delay))
    return upstream


def config(db: Path, providers: dict[str, str], route_to: str, extra: str = "") -> str:
    blocks = [
        f'[providers.{name}]\nkind = "openai"\nbase_url = "{url}/v1"\napi_key = "sk-up"\n'
        for name, url in providers.items()
    ]
    return "\n".join(
        [
            '[server]\nhost = "127.0.0.1"\nport = 0\nshutdown_grace = 5\n',
            *blocks,
            f'[[routes]]\nmatch = "*"\nprovider = "{route_to}"\n',
            f'[audit]\nstore = "sqlite:///{db}"\n',
            extra,
        ]
    )


class Stack:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.path = tmp_path / "gateway.toml"
        self.db = tmp_path / "trail.db"
        self.servers = Servers()
        self.urls: dict[str, str] = {}
        self.upstreams: dict[str, FakeUpstream] = {}
        self.gateway: GatewayProcess | None = None

    async def upstream(self, label: str, *, slow: bool = False) -> str:
        upstream = self.upstreams[label] = upstream_for(label, slow=slow)
        _, self.urls[label] = await self.servers.start(upstream.app())
        return self.urls[label]

    def write(self, text: str) -> None:
        self.path.write_text(text)

    def configure(self, providers: list[str], route_to: str, extra: str = "") -> None:
        self.write(config(self.db, {p: self.urls[p] for p in providers}, route_to, extra))

    async def start(self, *args: str) -> str:
        """`gateway serve`: one process unless `args` say otherwise."""
        self.gateway = GatewayProcess(self.path, self.tmp, *(args or ("--workers", "1")))
        return await self.gateway.ready()

    def lines(self, message: str) -> list[dict[str, Any]]:
        assert self.gateway is not None
        return [obj for obj in self.gateway.json_lines() if obj.get("message", "") == message]

    async def reload(self, expect: str, count: int = 1) -> list[dict[str, Any]]:
        """SIGUSR1, then wait for `count` more log lines starting with `expect`."""
        assert self.gateway is not None
        before = len(self.matching(expect))
        self.gateway.signal(signal.SIGUSR1)
        return (await self.wait_for(expect, before + count))[before:]

    def matching(self, prefix: str) -> list[dict[str, Any]]:
        assert self.gateway is not None
        return [o for o in self.gateway.json_lines() if o.get("message", "").startswith(prefix)]

    async def wait_for(self, prefix: str, count: int) -> list[dict[str, Any]]:
        for _ in range(200):
            found = self.matching(prefix)
            if len(found) >= count:
                return found
            await asyncio.sleep(0.05)
        assert self.gateway is not None
        raise AssertionError(f"no {count} lines {prefix!r}: {self.gateway.lines[-10:]}")


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    s = Stack(tmp_path)
    yield s
    if s.gateway is not None:
        s.gateway.kill()
    await s.servers.close()


async def ask(base: str, model: str = "m-1", headers: dict[str, str] | None = None) -> Any:
    """One streamed chat exchange on a new connection: (status, body)."""
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    connector = aiohttp.TCPConnector(force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.post(
            base + "/v1/chat/completions", data=orjson.dumps(body), headers=headers or {}
        ) as resp,
    ):
        return resp.status, await resp.read()


def streamed_text(body: bytes) -> str:
    """The text of a Chat Completions stream, its deltas joined."""
    parts = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            for choice in orjson.loads(line[6:]).get("choices", []):
                parts.append(choice.get("delta", {}).get("content") or "")
    return "".join(parts)


async def test_routes_and_providers_change_and_the_exchange_in_flight_ends_whole(stack):
    await stack.upstream("a", slow=True)
    await stack.upstream("b")
    stack.configure(["a"], "a")
    base = await stack.start()
    assert b"alpha" in (await ask(base))[1]

    first = asyncio.Event()
    async with aiohttp.ClientSession() as session:
        in_flight = asyncio.create_task(exchange(session, base, "openai", "slow-1", True, first))
        await asyncio.wait_for(first.wait(), 10)
        stack.configure(["b"], "b")  # provider a is gone, the route goes to b
        (line,) = await stack.reload("configuration reloaded")
        assert line["providers"] == ["b"] and line["generation"] == 2
        status, body = await ask(base)
        assert status == 200 and b"bravo" in body and b"alpha" not in body
        done = await in_flight
    # Started before the reload, it ended whole, from a, its terminator included.
    assert done.completed, done
    assert streamed_text(done.body) == SLOW.text
    assert len(stack.upstreams["a"].received["m-1"]) == 1  # a had no exchange after the reload
    assert len(stack.upstreams["b"].received["m-1"]) == 1
    assert stack.gateway is not None
    stack.gateway.signal(signal.SIGTERM)
    assert await stack.gateway.wait(15) == 0
    records = records_by_id(stack.db)
    assert done.request_id in records and records[done.request_id]["provider"] == "a"
    assert sorted(r["provider"] for r in records.values()) == ["a", "a", "b"]


async def test_keys_and_their_limits_come_and_change_with_a_reload(stack):
    await stack.upstream("a")
    stack.configure(["a"], "a")
    base = await stack.start()
    assert (await ask(base))[0] == 200  # no keys: open

    keys = f'[[keys]]\nname = "team"\nsha256 = "{sha256(KEY)}"\nrequests_per_window = 2\n'
    stack.configure(["a"], "a", keys)
    (line,) = await stack.reload("configuration reloaded")
    assert line["keys"] == ["team"]
    bearer = {"authorization": f"Bearer {KEY}"}
    assert (await ask(base))[0] == 401
    assert [(await ask(base, headers=bearer))[0] for _ in range(3)] == [200, 200, 429]

    stack.configure(["a"], "a", keys.replace("requests_per_window = 2", "requests_per_window = 5"))
    await stack.reload("configuration reloaded")
    # The window's count carries on: 3 asked so far (the refused one counts), 5 allowed.
    assert [(await ask(base, headers=bearer))[0] for _ in range(3)] == [200, 200, 429]

    stack.configure(["a"], "a")  # keys removed: open again
    await stack.reload("configuration reloaded")
    assert (await ask(base))[0] == 200


@pytest.mark.parametrize(
    "bad",
    [
        "this is [not toml\n",
        None,  # a route naming a provider the file does not have
        '[server]\nport = "eighty"\n',
    ],
    ids=["invalid-toml", "unknown-provider", "wrong-type"],
)
async def test_a_bad_file_is_refused_in_one_line_and_the_running_configuration_serves(stack, bad):
    await stack.upstream("a")
    await stack.upstream("b")
    stack.configure(["a"], "a")
    base = await stack.start()
    if bad is None:
        stack.write(config(stack.db, {"b": stack.urls["b"]}, "nowhere"))
    else:
        stack.write(bad)
    (line,) = await stack.reload("configuration reload refused")
    assert line["level"] == "error"
    assert "\n" not in line["message"] and "config error" in line["message"]
    assert not stack.matching("configuration reloaded")
    status, body = await ask(base)
    assert status == 200 and b"alpha" in body  # the running configuration, unchanged
    # Fixed, the next reload takes it.
    stack.configure(["b"], "b")
    await stack.reload("configuration reloaded")
    assert b"bravo" in (await ask(base))[1]


async def test_what_needs_a_restart_is_kept_and_named(stack):
    await stack.upstream("a")
    await stack.upstream("b")
    stack.configure(["a"], "a")
    base = await stack.start()
    text = config(stack.db, {"b": stack.urls["b"]}, "b").replace("port = 0", "port = 1")
    stack.write(text.replace("trail.db", "other.db"))
    (line,) = await stack.reload("configuration reloaded")
    assert line["needs_restart"] == ["server", "audit"]
    assert b"bravo" in (await ask(base))[1]  # the rest applied, on the same port
    assert stack.gateway is not None
    stack.gateway.signal(signal.SIGTERM)
    assert await stack.gateway.wait(15) == 0
    assert len(records_by_id(stack.db)) == 1 and not (stack.tmp / "other.db").exists()


def reload_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GATEWAY, "reload", *args], env=clean_env(), capture_output=True, text=True, timeout=30
    )


async def test_gateway_reload_reaches_every_worker_and_checks_the_file_first(stack):
    await stack.upstream("a")
    await stack.upstream("b")
    stack.configure(["a"], "a")
    base = await stack.start("--workers", "2")
    assert stack.gateway is not None
    pid = str(stack.gateway.proc.pid)

    stack.write("broken = [\n")
    done = await asyncio.to_thread(reload_command, "--pid", pid, "--config", str(stack.path))
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and "keeps its configuration" in done.stderr
    await asyncio.sleep(0.5)
    assert not stack.matching("configuration reload")  # the gateway was not asked

    stack.configure(["b"], "b")
    done = await asyncio.to_thread(reload_command, "--pid", pid, "--config", str(stack.path))
    assert done.returncode == 0, done.stderr
    lines = await stack.wait_for("configuration reloaded", 2)
    assert sorted(line["worker"] for line in lines) == [1, 2]
    # The workers' shared Responses file is what they made of the file's memory store: no restart.
    assert not [line for line in lines if "needs_restart" in line]
    answers = [await ask(base) for _ in range(12)]  # new connections: both workers serve
    assert all(status == 200 and b"bravo" in body for status, body in answers)

    # A worker restarted after the reload starts with the reloaded configuration.
    started = [o for o in stack.gateway.json_lines() if o.get("message") == "worker started"]
    victim = started[0]["pid"]
    os.kill(victim, signal.SIGKILL)
    await stack.wait_for("worker started", len(started) + 1)
    await asyncio.sleep(1.0)
    answers = [await ask(base) for _ in range(12)]
    assert all(status == 200 and b"bravo" in body for status, body in answers)


async def test_gateway_reload_names_a_process_it_cannot_signal():
    done = await asyncio.to_thread(reload_command, "--pid", "999999999")
    assert done.returncode == 1 and "cannot signal process 999999999" in done.stderr

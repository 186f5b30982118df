"""Graceful shutdown of the real `gateway serve` process, under load.

The gateway runs as a subprocess (`gateway serve --config <tmp toml> --port 0`) with the mock
provider and an OpenAI-wire provider on a loopback `FakeUpstream` served by the test's own loop
(slow streams), and a SQLite store in `tmp_path`. The test drives concurrent load, sends SIGTERM,
SIGINT or SIGHUP while requests are in flight, and then checks:

- new connections are refused while the in-flight exchanges are still running;
- the in-flight exchanges finish for their clients (whole streams, with their terminator);
- the process exits 0 within the grace period plus a few seconds;
- every exchange that completed for its client has its audit record (matched by request id),
  and one JSON log line;
- the SQLite file passes `PRAGMA integrity_check` and no WAL is left behind.

`GatewayProcess` is shared with tests/test_secrets_at_rest.py.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.scenarios import Answer, script_for
from tests.test_audit_e2e import Servers
from tests.upstream import FakeUpstream

GATEWAY = str(Path(sys.executable).parent / "gateway")
LISTENING = re.compile(r"^listening on (?P<url>http://\S+)$")
READY_TIMEOUT = 20
PROMPT = [{"role": "user", "content": "hi"}]
# SIGHUP too: a closed terminal sends it, and the audit trail must still be flushed.
STOP_SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


def clean_env() -> dict[str, str]:
    """This environment without provider keys or a config path that would change the gateway."""
    return {
        k: v
        for k, v in os.environ.items()
        if k != "GATEWAY_CONFIG" and not k.startswith(("OPENAI_", "ANTHROPIC_"))
    }


class GatewayProcess:
    """A running `gateway serve`; a thread keeps its stderr, line by line."""

    def __init__(
        self, config: Path, cwd: Path, *args: str, env: Mapping[str, str] | None = None
    ) -> None:
        """`env`: variables set beside the clean environment."""
        self.proc = subprocess.Popen(
            [GATEWAY, "serve", "--config", str(config), "--port", "0", *args],
            cwd=cwd,
            # XDG_DATA_HOME: not the real home
            env={**clean_env(), "XDG_DATA_HOME": str(cwd / "xdg-data"), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: list[str] = []
        self.raw = bytearray()  # stderr exactly as written
        self.url: str | None = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.raw += raw
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            found = LISTENING.match(line)
            if found and self.url is None:
                self.url = found["url"]
                self._ready.set()
        self._ready.set()  # the process ended

    async def ready(self) -> str:
        ok = await asyncio.to_thread(self._ready.wait, READY_TIMEOUT)
        assert ok, f"not ready within {READY_TIMEOUT}s: {self.lines}"
        assert self.url is not None, f"exited before listening: {self.lines}"
        return self.url

    @property
    def port(self) -> int:
        assert self.url is not None
        return int(self.url.rsplit(":", 1)[1])

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    async def wait(self, timeout: float) -> int:
        """The exit code; fails (and kills) when the process outlives `timeout` seconds."""
        try:
            code = await asyncio.to_thread(self.proc.wait, timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the gateway did not exit within {timeout}s") from None
        await asyncio.to_thread(self._reader.join, 5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def json_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.lines:
            if line.startswith("{"):
                out.append(orjson.loads(line))
        return out

    def exchange_ids(self) -> list[str]:
        """Request ids of the per-exchange log lines."""
        return [
            obj["id"]
            for obj in self.json_lines()
            if obj.get("logger") == "gateway.exchange" and obj.get("message") == "exchange"
        ]


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    """`launch(config_text)` starts a gateway; any still running at the end is killed."""
    started: list[GatewayProcess] = []

    def run(config_text: str, name: str = "gateway.toml") -> GatewayProcess:
        path = tmp_path / name
        path.write_text(config_text)
        gateway = GatewayProcess(path, tmp_path)
        started.append(gateway)
        return gateway

    yield run
    for gateway in started:
        gateway.kill()


def config_text(upstream_url: str, db: Path, grace: float) -> str:
    return f"""
[server]
host = "127.0.0.1"
port = 0
shutdown_grace = {grace}

[providers.slow]
kind = "openai"
base_url = "{upstream_url}/v1"
api_key = "sk-upstream-shutdown-test"
timeout = 10

[providers.mock]
kind = "mock"

[[routes]]
match = "slow-*"
provider = "slow"

[[routes]]
match = "mock-*"
provider = "mock"

[audit]
store = "sqlite:///{db}"
"""


def sqlite_rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def records_by_id(db: Path) -> dict[str, dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT * FROM audit_records").fetchall()
    finally:
        conn.close()
    return {row["id"]: dict(row) for row in rows}


# --- clients ------------------------------------------------------------------------------------


@dataclass
class Done:
    """One exchange as its client saw it."""

    request_id: str | None
    completed: bool  # the client got its whole response
    label: str
    error: str | None = None
    finished_at: float = 0.0
    body: bytes = b""


def _complete(client: str, stream: bool, status: int, body: bytes) -> bool:
    if status != 200:
        return False
    if stream:
        end = b"data: [DONE]" if client == "openai" else b"event: message_stop"
        return end in body
    try:
        return isinstance(orjson.loads(body), dict)
    except orjson.JSONDecodeError:
        return False


async def exchange(
    session: aiohttp.ClientSession,
    base: str,
    client: str,
    model: str,
    stream: bool,
    first_chunk: asyncio.Event | None = None,
) -> Done:
    path = "/v1/chat/completions" if client == "openai" else "/v1/messages"
    body: dict[str, Any] = {"model": model, "messages": PROMPT, "stream": stream}
    if client == "anthropic":
        body["max_tokens"] = 64
    label = f"{client}:{model}:{'stream' if stream else 'whole'}"
    request_id = None
    data = bytearray()
    try:
        async with session.post(base + path, data=orjson.dumps(body)) as resp:
            request_id = resp.headers.get("x-request-id")
            async for chunk in resp.content.iter_any():
                data += chunk
                if first_chunk is not None:
                    first_chunk.set()
            completed = _complete(client, stream, resp.status, bytes(data))
            return Done(request_id, completed, label, None, time.monotonic(), bytes(data))
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return Done(request_id, False, label, type(exc).__name__, time.monotonic(), bytes(data))


FAST = [
    ("openai", "mock-text", False),
    ("openai", "mock-tool-cut", True),
    ("anthropic", "mock-tool", False),
    ("anthropic", "mock-text", True),
]


async def fast_worker(base: str, n: int, stop: asyncio.Event, results: list[Done]) -> None:
    """Exchange after exchange, each on a new connection, until refused or told to stop."""
    client, model, stream = FAST[n % len(FAST)]
    connector = aiohttp.TCPConnector(force_close=True)
    timeout = aiohttp.ClientTimeout(total=15)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        while not stop.is_set():
            done = await exchange(session, base, client, model, stream)
            results.append(done)
            if done.error is not None:
                if "Connector" in done.error or "Refused" in done.error:
                    return  # the gateway no longer accepts connections
                await asyncio.sleep(0.01)


async def refused(port: int) -> bool:
    """Whether a new connection is refused; a reset (one caught by the socket closing) or an
    accepted connection means not yet."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        return False
    writer.close()
    return False


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=[sig.name for sig in STOP_SIGNALS])
async def test_signal_during_load_finishes_in_flight_and_keeps_every_record(sig, tmp_path, launch):
    grace = 5.0
    slow_answer = Answer(text="word " * 30)  # ~35 frames at 0.05 s: ~1.8 s per stream
    slow_models = [f"slow-{n}" for n in range(8)]
    upstream = FakeUpstream()
    for model in slow_models:
        upstream.script(model, script_for("openai", slow_answer, model, stream=True, delay=0.05))
    servers = Servers()
    try:
        _, upstream_url = await servers.start(upstream.app())
        db = tmp_path / "audit" / "trail.db"
        gateway = launch(config_text(upstream_url, db, grace))
        base = await gateway.ready()

        fast_results: list[Done] = []
        stop_fast = asyncio.Event()
        workers = [
            asyncio.create_task(fast_worker(base, n, stop_fast, fast_results)) for n in range(12)
        ]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while sum(d.completed for d in fast_results) < 20:  # fast traffic is flowing
            assert loop.time() < deadline, fast_results[-5:]
            await asyncio.sleep(0.02)
        # Then the slow streams start; the signal comes once each has reached its client.
        firsts = [asyncio.Event() for _ in slow_models]
        slow_session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        slow_tasks = [
            asyncio.create_task(
                exchange(slow_session, base, ("openai", "anthropic")[n % 2], model, True, first)
            )
            for n, (model, first) in enumerate(zip(slow_models, firsts, strict=True))
        ]
        await asyncio.wait_for(asyncio.gather(*(f.wait() for f in firsts)), 10)

        gateway.signal(sig)
        signalled = time.monotonic()

        # The listening socket closes at once, while the slow streams are still running.
        while not await refused(gateway.port):
            assert time.monotonic() - signalled < 3, "still accepting connections after signal"
            await asyncio.sleep(0.01)
        assert gateway.proc.poll() is None, "exited before letting in-flight exchanges finish"
        assert not all(t.done() for t in slow_tasks)

        slow = await asyncio.wait_for(asyncio.gather(*slow_tasks), grace + 5)
        await slow_session.close()
        code = await gateway.wait(grace + 5)
        exited = time.monotonic()
        stop_fast.set()
        await asyncio.wait_for(asyncio.gather(*workers), 10)
    finally:
        await servers.close()

    assert code == 0, gateway.lines[-20:]
    assert exited - signalled < grace + 5
    # In-flight exchanges were let finish: every slow stream reached its client whole.
    assert [d.error for d in slow] == [None] * len(slow)
    assert all(d.completed for d in slow), [d for d in slow if not d.completed]
    assert all(d.finished_at > signalled for d in slow)

    assert sqlite_rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert sqlite_rows(db, "PRAGMA journal_mode") == [("wal",)]
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "the WAL was not folded back at exit"

    records = records_by_id(db)
    completed = [d for d in [*slow, *fast_results] if d.completed]
    assert len(completed) >= 20 + len(slow)
    missing = [d for d in completed if d.request_id not in records]
    assert missing == [], f"{len(missing)} completed exchanges have no record"
    for d in slow:
        record = records[d.request_id]
        assert record["stop_reason"] == "stop", record
        assert (record["truncated"], record["client_aborted"]) == (0, 0), record
        assert record["terminator_seen"] == 1, record
        assert record["http_status"] == 200, record
    # One log line per exchange, for exactly the recorded ones; a clean, announced shutdown.
    logged = gateway.exchange_ids()
    assert sorted(logged) == sorted(records)
    shutdown = [obj for obj in gateway.json_lines() if obj.get("message") == "shutting down"]
    assert [obj.get("signal") for obj in shutdown] == [sig.name], shutdown
    assert not any("Traceback" in line for line in gateway.lines), gateway.lines


async def test_exchange_outliving_the_grace_period_is_cut_and_recorded(tmp_path, launch):
    """The grace period bounds the shutdown: a stream still running when it ends is cut, the
    process still exits 0 soon after, and the cut exchange is in the trail as cancelled."""
    grace = 1.0
    model = "slow-endless"
    upstream = FakeUpstream()
    endless = Answer(text="word " * 400)  # ~20 s at 0.05 s a frame
    upstream.script(model, script_for("openai", endless, model, stream=True, delay=0.05))
    servers = Servers()
    try:
        _, upstream_url = await servers.start(upstream.app())
        db = tmp_path / "trail.db"
        gateway = launch(config_text(upstream_url, db, grace))
        base = await gateway.ready()
        first = asyncio.Event()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            task = asyncio.create_task(exchange(session, base, "openai", model, True, first))
            await asyncio.wait_for(first.wait(), 10)
            gateway.signal(signal.SIGTERM)
            signalled = time.monotonic()
            code = await gateway.wait(grace + 5)
            exited = time.monotonic()
            done = await asyncio.wait_for(task, 10)
    finally:
        await servers.close()

    assert code == 0, gateway.lines[-20:]
    assert grace <= exited - signalled < grace + 5
    assert not done.completed  # the client got a cut stream, not a whole one
    # ... ending with the format's error event, not a silently closed socket.
    frames = [line for line in done.body.decode().splitlines() if line.startswith("data: ")]
    assert frames[-1] != "data: [DONE]"
    last = orjson.loads(frames[-1].removeprefix("data: "))
    assert last["error"]["code"] == "aborted", last
    assert last["gateway"]["truncated"] is True, last
    assert sqlite_rows(db, "PRAGMA integrity_check") == [("ok",)]
    records = records_by_id(db)
    assert list(records) == [done.request_id]
    record = records[done.request_id]
    assert record["truncated"] == 1, record
    assert record["cut_reason"] == "cancelled", record
    assert record["stop_reason"] == "aborted", record
    # The server ended it, not the client: the record and the log line say so.
    assert (record["ended_by"], record["client_aborted"]) == ("server", 0), record
    line = next(obj for obj in gateway.json_lines() if obj.get("id") == done.request_id)
    assert (line["ended_by"], line["client_aborted"]) == ("server", False)
    assert gateway.exchange_ids() == [done.request_id]


async def test_an_answer_not_started_when_the_grace_ends_is_a_503_to_retry(tmp_path, launch):
    """A whole answer still awaited from the upstream when the grace ends: the client gets a
    503 in its format with retry-after (to try another replica), not a closed socket."""
    grace = 1.0
    model = "slow-stalled"
    upstream = FakeUpstream()
    stalled = script_for("openai", Answer(text="too late"), model, stream=False)
    stalled.stall = 4  # beyond the grace
    upstream.script(model, stalled)
    servers = Servers()
    try:
        _, upstream_url = await servers.start(upstream.app())
        db = tmp_path / "trail.db"
        gateway = launch(config_text(upstream_url, db, grace))
        base = await gateway.ready()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            body = {"model": model, "messages": PROMPT}
            request = session.post(base + "/v1/chat/completions", data=orjson.dumps(body))
            task = asyncio.create_task(request)
            while not upstream.received[model]:
                await asyncio.sleep(0.02)
            gateway.signal(signal.SIGTERM)
            async with await task as resp:
                status, headers, reply = resp.status, resp.headers, await resp.json()
            code = await gateway.wait(grace + 5)
    finally:
        await servers.close()

    assert code == 0
    assert status == 503 and headers["retry-after"] == "1"
    assert reply["error"]["code"] == "service_unavailable"
    (record,) = records_by_id(db).values()
    assert (record["http_status"], record["ended_by"]) == (503, "server")

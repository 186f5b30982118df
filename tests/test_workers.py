"""`gateway serve --workers 2`: real processes on 127.0.0.1, the offline mock provider, a SQLite
trail in tmp_path, and /proc to see the processes and their sockets.

- the workers share the port (each its own listening socket, the supervisor none) and both
  serve; SIGTERM or SIGHUP stops everything with exit 0 and every answered exchange in the trail
  exactly once, both workers' among them, which `gateway audit` reads;
- a SIGKILLed worker is restarted, and the gateway answers throughout;
- the supervisor's SIGKILL leaves no worker running (they stop gracefully and flush the trail),
  nor the private directory;
- `/metrics` reports the sum over the workers, whichever answered the scrape;
- a `previous_response_id` stored by one worker is found by the other (the shared store);
- a worker that cannot start makes the supervisor give up: exit 1 and one line;
- per-key limits counted in Redis hold for the workers together;
- one worker is one process, as before.

Which worker served an exchange is read from its log line (`worker`), which every worker adds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.access_util import redis_url, sha256
from tests.mock_config import SERVER, mock_config
from tests.process_tree import (
    HAS_PROC,
    children,
    cmdline,
    environ,
    listening_inodes,
    running,
    socket_inodes,
)
from tests.test_shutdown import (
    FAST,
    GATEWAY,
    Done,
    GatewayProcess,
    clean_env,
    exchange,
    fast_worker,
    records_by_id,
    sqlite_rows,
)

pytestmark = pytest.mark.skipif(not HAS_PROC, reason="reads /proc")

WAIT = 30.0  # seconds any awaited condition gets before the test fails


def config_text(db: Path, extra: str = "") -> str:
    return mock_config(db, head=extra + SERVER + "shutdown_grace = 5\n")


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., GatewayProcess]]:
    """`launch(*args)` starts `gateway serve --workers 2 *args` on the mock; whatever still runs
    at the end (the supervisor and its workers) is killed."""
    started: list[GatewayProcess] = []

    def run(*args: str, workers: int = 2, extra: str = "") -> GatewayProcess:
        path = tmp_path / f"gateway-{len(started)}.toml"
        path.write_text(config_text(tmp_path / "trail.db", extra))
        started.append(GatewayProcess(path, tmp_path, "--workers", str(workers), *args))
        return started[-1]

    yield run
    for gateway in started:
        gateway.kill()
        # Every worker it ever started, by its log line: a test that failed may have left one
        # whose supervisor is gone (then children() no longer finds it).
        for obj in messages(gateway, "worker started"):
            if running(obj["pid"]) and b"gateway.worker" in cmdline(obj["pid"]):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(obj["pid"], signal.SIGKILL)


async def until(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not condition():
        assert loop.time() < deadline, f"not within {WAIT}s: {what}"
        await asyncio.sleep(0.05)


async def many(base: str, n: int, concurrency: int = 8) -> list[Done]:
    """`n` exchanges, each on a fresh connection (so the kernel spreads them over the workers),
    `concurrency` at a time, both client formats, whole and streamed."""
    connector = aiohttp.TCPConnector(force_close=True, limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        return list(
            await asyncio.gather(*(exchange(session, base, *FAST[i % len(FAST)]) for i in range(n)))
        )


def served_by(gateway: GatewayProcess) -> dict[str, int]:
    """Request id -> the worker whose exchange log line has it."""
    return {
        obj["id"]: obj["worker"]
        for obj in gateway.json_lines()
        if obj.get("logger") == "gateway.exchange" and obj.get("message") == "exchange"
    }


def messages(gateway: GatewayProcess, message: str) -> list[dict[str, Any]]:
    return [obj for obj in gateway.json_lines() if obj.get("message") == message]


def private_dir(worker: int) -> Path:
    """The supervisor's private directory, from the worker's environment."""
    return Path(environ(worker)["PROMETHEUS_MULTIPROC_DIR"]).parent


def audit_report(db: Path) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [GATEWAY, "audit", "--store", f"sqlite:///{db}", "--format", "json"],
        env=clean_env(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    report: list[dict[str, Any]] = json.loads(proc.stdout)
    return report


# --- sharing the port, stopping with the whole trail -------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
async def test_workers_share_the_port_and_a_stop_keeps_every_exchange_once(sig, tmp_path, launch):
    gateway = launch()
    base = await gateway.ready()
    supervisor = gateway.proc.pid
    workers = children(supervisor)
    assert len(workers) == 2, workers
    assert "workers: 2 (--workers)" in gateway.lines
    assert len([line for line in gateway.lines if line.startswith("listening on")]) == 1

    # Each worker listens on a socket of its own; the supervisor holds none that listens.
    listening = listening_inodes(gateway.port)
    assert len(listening) == 2, listening
    assert not socket_inodes(supervisor) & listening
    assert [len(socket_inodes(pid) & listening) for pid in workers] == [1, 1]
    shared = private_dir(workers[0])
    assert shared.is_dir() and private_dir(workers[1]) == shared

    first = await many(base, 120)
    assert all(d.completed for d in first), [d for d in first if not d.completed][:3]
    await until(lambda: len(served_by(gateway)) >= len(first), "every exchange logged")
    assert set(served_by(gateway).values()) == {1, 2}, "one worker served everything"

    # Load still running when the signal comes: what was answered must all be in the trail.
    stop, late = asyncio.Event(), []
    clients = [asyncio.create_task(fast_worker(base, n, stop, late)) for n in range(8)]
    await until(lambda: sum(d.completed for d in late) >= 40, "load under way")
    gateway.signal(sig)
    code = await gateway.wait(30)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*clients), WAIT)

    assert code == 0, gateway.lines[-20:]
    assert not any(running(pid) for pid in workers)
    assert not shared.exists(), "the private directory is left behind"
    answered = [d.request_id for d in [*first, *late] if d.completed]
    assert len(set(answered)) == len(answered), "a request id was given twice"
    records = records_by_id(tmp_path / "trail.db")
    assert set(records) == set(answered)  # nothing lost, nothing extra: each once (primary key)
    workers_of = served_by(gateway)
    assert {workers_of[request_id] for request_id in records} == {1, 2}
    assert sqlite_rows(tmp_path / "trail.db", "PRAGMA integrity_check") == [("ok",)]
    assert sum(group["requests"] for group in audit_report(tmp_path / "trail.db")) == len(records)
    # Announced once by the supervisor, once by each worker, with the signal.
    assert [obj["signal"] for obj in messages(gateway, "shutting down")] == [sig.name]
    stopped = messages(gateway, "worker shutting down")
    assert sorted((obj["worker"], obj["signal"]) for obj in stopped) == [
        (1, sig.name),
        (2, sig.name),
    ]
    assert not any("Traceback" in line for line in gateway.lines)


# --- a dead worker -------------------------------------------------------------------------------


async def test_a_killed_worker_is_restarted_and_the_gateway_keeps_answering(tmp_path, launch):
    gateway = launch()
    base = await gateway.ready()
    supervisor = gateway.proc.pid
    victim, survivor = children(supervisor)

    os.kill(victim, signal.SIGKILL)
    await until(lambda: victim not in children(supervisor), "the dead worker reaped")
    during = await many(base, 40, concurrency=1)  # the survivor alone, or with the new one
    await until(lambda: len(children(supervisor)) == 2, "a worker started in its place")
    (replacement,) = set(children(supervisor)) - {survivor}
    await until(
        lambda: any(obj.get("pid") == replacement for obj in messages(gateway, "worker ready")),
        "the new worker ready",
    )
    after = await many(base, 60)

    assert all(d.completed for d in [*during, *after]), [d for d in during if not d.completed]
    (death,) = messages(gateway, "worker exited; restarting")
    assert (death["pid"], death["status"]) == (victim, "SIGKILL")
    ids = {d.request_id for d in after}
    await until(lambda: ids <= set(served_by(gateway)), "every exchange logged")
    workers_of = served_by(gateway)
    assert {workers_of[d.request_id] for d in after} == {1, 2}, "the new worker serves"
    gateway.signal(signal.SIGTERM)
    assert await gateway.wait(30) == 0
    records = records_by_id(tmp_path / "trail.db")
    assert {d.request_id for d in [*during, *after]} <= set(records)


async def test_the_supervisors_sigkill_leaves_no_worker_behind(tmp_path, launch):
    gateway = launch()
    base = await gateway.ready()
    workers = children(gateway.proc.pid)
    shared = private_dir(workers[0])
    answered = await many(base, 40)

    gateway.proc.kill()
    assert await gateway.wait(10) == -signal.SIGKILL
    await until(lambda: not any(running(pid) for pid in workers), "the workers gone")

    assert not shared.exists(), "the last worker out did not remove the private directory"
    gone = messages(gateway, "the supervisor is gone: stopping")
    assert sorted(obj["worker"] for obj in gone) == [1, 2]
    # They stopped gracefully: every answered exchange reached the trail.
    records = records_by_id(tmp_path / "trail.db")
    assert {d.request_id for d in answered if d.completed} <= set(records)
    assert sqlite_rows(tmp_path / "trail.db", "PRAGMA integrity_check") == [("ok",)]


async def test_a_worker_that_cannot_start_stops_the_gateway(tmp_path, launch):
    """The first worker is killed as soon as the supervisor reports it started (long before its
    imports are done): at the first start, that is a worker that cannot start."""
    gateway = launch()
    await until(lambda: bool(messages(gateway, "worker started")), "a worker started")
    victim = messages(gateway, "worker started")[0]["pid"]
    others = [pid for pid in children(gateway.proc.pid) if pid != victim]
    os.kill(victim, signal.SIGKILL)

    assert await gateway.wait(30) == 1
    assert not any(line.startswith("listening on") for line in gateway.lines)
    last = gateway.lines[-1]
    assert last.startswith("gateway serve: worker ") and "could not start" in last, last
    assert "SIGKILL" in last
    assert not any(running(pid) for pid in others)


# --- what the workers share ---------------------------------------------------------------------


def metric_total(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


async def test_metrics_are_summed_across_the_workers(launch):
    gateway = launch()
    base = await gateway.ready()
    done = await many(base, 60)
    assert all(d.completed for d in done)
    await until(lambda: len(served_by(gateway)) >= len(done), "every exchange logged")
    assert set(served_by(gateway).values()) == {1, 2}

    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        scrapes = []
        for _ in range(10):  # fresh connections: both workers answer some of them
            async with session.get(base + "/metrics") as resp:
                assert resp.status == 200
                scrapes.append(await resp.text())
    for text in scrapes:
        assert metric_total(text, "gateway_requests_total{") == len(done)
        assert metric_total(text, "gateway_in_flight_exchanges") == 0
        assert metric_total(text, "gateway_request_duration_seconds_count{") == len(done)
    gateway.signal(signal.SIGTERM)
    assert await gateway.wait(30) == 0


async def test_previous_response_id_is_found_by_every_worker(launch):
    gateway = launch()
    base = await gateway.ready()
    shared = [line for line in gateway.lines if line.startswith("responses store: ")]
    assert shared == [
        "responses store: a SQLite file the 2 workers share, private to this gateway in "
        f"{Path(private_dir(children(gateway.proc.pid)[0])).parent} and removed at exit, "
        "ttl 1h (holds prompts and answers)"
    ]

    connector = aiohttp.TCPConnector(force_close=True)
    ids: list[str] = []
    async with aiohttp.ClientSession(connector=connector) as session:
        previous = None
        for turn in range(16):  # a chain, each turn on a fresh connection
            body: dict[str, Any] = {"model": "mock-text", "input": f"turn {turn}"}
            if previous is not None:
                body["previous_response_id"] = previous
            async with session.post(base + "/v1/responses", data=orjson.dumps(body)) as resp:
                reply = await resp.json()
                assert resp.status == 200, reply
            previous = reply["id"]
            ids.append(resp.headers["x-request-id"])
    await until(lambda: set(ids) <= set(served_by(gateway)), "every turn logged")
    workers_of = served_by(gateway)
    assert {workers_of[i] for i in ids[1:]} == {1, 2}, "every follow-up reached the same worker"
    gateway.signal(signal.SIGTERM)
    assert await gateway.wait(30) == 0


async def test_per_key_limits_in_redis_hold_across_the_workers(launch):
    """A key's requests per window, counted in the shared Redis: the workers together serve
    exactly the limit, whichever of them each request reaches."""
    limit, key = 5, f"gw-test-workers-{uuid.uuid4().hex}"
    extra = (
        f'[state]\nredis = "{redis_url()}"\nprefix = "gw-test-{uuid.uuid4().hex}:"\n\n'
        f'[[keys]]\nname = "ci"\nsha256 = "{sha256(key)}"\n'
        f'requests_per_window = {limit}\nwindow = "1d"\n\n'
    )
    gateway = launch(extra=extra)
    base = await gateway.ready()
    body = orjson.dumps({"model": "mock-text", "messages": [{"role": "user", "content": "hi"}]})
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    statuses, ids = [], []
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(4 * limit):
            async with session.post(f"{base}/v1/chat/completions", data=body, headers=headers) as r:
                statuses.append(r.status)
                ids.append(r.headers["x-request-id"])
    assert sorted(statuses) == [200] * limit + [429] * 3 * limit, statuses
    await until(lambda: set(ids) <= set(served_by(gateway)), "every exchange logged")
    assert {served_by(gateway)[i] for i in ids} == {1, 2}
    gateway.signal(signal.SIGTERM)
    assert await gateway.wait(30) == 0


async def test_one_worker_is_one_process(launch):
    gateway = launch(workers=1)
    base = await gateway.ready()
    assert children(gateway.proc.pid) == []
    assert listening_inodes(gateway.port) <= socket_inodes(gateway.proc.pid)
    assert not any(line.startswith("workers:") for line in gateway.lines)
    assert all(d.completed for d in await many(base, 8))
    assert not any("worker" in obj for obj in gateway.json_lines())
    gateway.signal(signal.SIGTERM)
    assert await gateway.wait(30) == 0


async def test_the_first_worker_starts_alone_and_the_others_once_it_is_ready(launch):
    """Started together, the workers' imports would share the cores and the first answer would
    wait for both; the second starts once the first is ready, and then serves too."""
    gateway = launch(workers=3)
    base = await gateway.ready()
    lines = [
        (obj["message"], obj["worker"])
        for obj in gateway.json_lines()
        if obj.get("message") in ("worker started", "worker ready")
    ]
    assert lines[:2] == [("worker started", 1), ("worker ready", 1)]
    assert sorted(lines[2:]) == sorted(
        [("worker started", 2), ("worker started", 3), ("worker ready", 2), ("worker ready", 3)]
    )
    assert all(d.completed for d in await many(base, 24))
    assert set(served_by(gateway).values()) <= {1, 2, 3}
    gateway.signal(signal.SIGTERM)
    assert await gateway.wait(30) == 0

"""Scale-out, for real: three replicas behind HAProxy, one PostgreSQL trail, one Redis
(tests/scale_stack.py), under mixed load (both client formats, whole answers and 20-chunk
streams paced 20 ms apart) through the load balancer.

- kill -9 of one replica mid-run: exchanges the survivors served all succeed; those in flight on
  the killed one end in a connection error at the client, never as a whole answer; the records
  lost are at most one audit batch, all of the killed replica; every record matches what its
  client saw; the replica restarted serves again.
- SIGTERM of one replica under load: HAProxy drains it, nothing fails and no record is lost.
- one key's requests_per_window and tokens_per_window hold across the three replicas within one
  request; a circuit opened on one replica is open on the others within 2 s.
- Redis killed: the limits fail open, no 500; PostgreSQL restarted: every record written.
- `gateway audit` over the shared trail counts what the clients saw.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest

from tests.scale_stack import AUDIT_BATCH, GATEWAY, KEY, ScaleStack, missing, sha256
from tests.test_shutdown import Done, exchange

pytestmark = pytest.mark.timeout(180)

MIX = [
    ("openai", "bench-c20", False),
    ("openai", "bench-c20-p20", True),
    ("anthropic", "bench-c20", False),
    ("anthropic", "bench-c20-p20", True),
]
CONNECTION_ERRORS = ("ClientPayloadError", "ServerDisconnectedError", "ClientOSError")
ADMIN = "gw-scale-admin-key-0123456789abcdefghijklmnopqr"


@pytest.fixture
def make_stack(tmp_path: Path) -> Iterator[Any]:
    lacking = missing()
    if lacking is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the scale-out stack lacks {lacking}: .ci/run provides it")
        pytest.skip(f"needs {lacking}")
    started: list[ScaleStack] = []

    def make(extra: str = "") -> ScaleStack:
        stack = ScaleStack.start(tmp_path / f"stack-{len(started)}", extra)
        started.append(stack)
        return stack

    yield make
    for stack in started:
        stack.close()


class Load:
    """`workers` clients, each exchange on a new connection (HAProxy balances connections),
    the MIX in turn, until stopped; every exchange as its client saw it in `done`."""

    def __init__(self, base: str, workers: int = 8) -> None:
        self.base = base
        self.done: list[Done] = []
        self._stop = asyncio.Event()
        self._tasks = [asyncio.create_task(self._run(n)) for n in range(workers)]

    async def _run(self, n: int) -> None:
        connector = aiohttp.TCPConnector(force_close=True)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            i = n
            while not self._stop.is_set():
                client, model, stream = MIX[i % len(MIX)]
                i += 1
                self.done.append(await exchange(session, self.base, client, model, stream))

    async def until(self, completed: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while sum(d.completed for d in self.done) < completed:
            assert time.monotonic() < deadline, self.done[-3:]
            await asyncio.sleep(0.02)

    async def stop(self) -> list[Done]:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        return self.done


async def records(stack: ScaleStack) -> dict[str, asyncpg.Record]:
    conn = await asyncpg.connect(stack.pg_url)
    try:
        rows = await conn.fetch("SELECT * FROM audit_records")
    finally:
        await conn.close()
    return {row["id"]: row for row in rows}


def stop_all(stack: ScaleStack) -> None:
    """SIGTERM every live replica: their trails flushed."""
    for replica in stack.replicas:
        if replica.alive():
            assert replica.terminate(30) == 0


def check_records_match(done: list[Done], rows: dict[str, asyncpg.Record]) -> None:
    """Every record belongs to an exchange a client saw, and says what that client saw."""
    seen = {d.request_id: d for d in done if d.request_id}
    assert set(rows) <= set(seen), set(rows) - set(seen)
    for rid, row in rows.items():
        d = seen[rid]
        if d.completed:
            assert row["http_status"] == 200 and not row["truncated"], dict(row)
            assert row["client_format"] == d.label.split(":")[0]


async def test_kill_9_one_replica_under_load_survivors_fail_nothing(make_stack):
    stack = make_stack()
    load = Load(stack.lb_url)
    await load.until(80)
    victim = stack.replicas[1]
    victim.kill()
    killed_at = len(load.done)
    await load.until(sum(d.completed for d in load.done) + 80)
    victim.start()  # the replica restarted rejoins once its checks pass
    before = len(victim.exchange_ids())
    deadline = time.monotonic() + 20
    while True:  # its log lines are written in batches: wait for one of its new exchanges
        await asyncio.sleep(0.2)
        if len(victim.exchange_ids()) > before:
            break
        assert time.monotonic() < deadline, "the restarted replica got no exchange"
    done = await load.stop()
    stop_all(stack)

    survivors = set().union(*(r.exchange_ids() for r in stack.replicas if r is not victim))
    failed = [d for d in done if not d.completed]
    # Survivors: every exchange they served reached its client whole.
    assert not [d for d in failed if d.request_id in survivors]
    # The killed one's in-flight exchanges: a connection error, never a whole answer.
    assert len(failed) <= 8, failed  # at most one per client in flight
    for d in failed:
        assert d.error in CONNECTION_ERRORS, d
    assert killed_at > 0
    rows = await records(stack)
    check_records_match(done, rows)
    lost = [d for d in done if d.completed and d.request_id not in rows]
    assert len(lost) <= AUDIT_BATCH
    assert not [d for d in lost if d.request_id in survivors]  # all the killed replica's
    # Every completed exchange of the survivors and of the restarted replica is recorded.
    assert all(d.request_id in rows for d in done if d.completed and d.request_id in survivors)


async def test_sigterm_one_replica_under_load_loses_and_fails_nothing(make_stack):
    stack = make_stack()
    load = Load(stack.lb_url)
    await load.until(80)
    assert stack.replicas[0].terminate(30) == 0
    await load.until(sum(d.completed for d in load.done) + 80)
    done = await load.stop()
    stop_all(stack)
    assert [d for d in done if not d.completed] == []
    rows = await records(stack)
    assert {d.request_id for d in done} == set(rows)
    check_records_match(done, rows)


def keyed_config(**limits: int) -> str:
    lines = "".join(f"{name} = {value}\n" for name, value in limits.items())
    return (
        f'[[keys]]\nname = "team"\nsha256 = "{sha256(KEY)}"\nwindow = "10m"\n{lines}\n'
        f'[admin]\nsha256 = "{sha256(ADMIN)}"\n'
    )


async def sequential(base: str, n: int, model: str = "bench-c20") -> list[tuple[int, str | None]]:
    """`n` whole Chat answers one after the other, each on a new connection (so HAProxy
    spreads them over the replicas): (status, request id) each."""
    out = []
    headers = {"authorization": f"Bearer {KEY}"}
    body = orjson.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(n):
            async with session.post(
                base + "/v1/chat/completions", data=body, headers=headers
            ) as resp:
                await resp.read()
                out.append((resp.status, resp.headers.get("x-request-id")))
    return out


async def test_requests_per_window_holds_across_replicas(make_stack):
    stack = make_stack(keyed_config(requests_per_window=30))
    statuses = [status for status, _ in await sequential(stack.lb_url, 40)]
    assert statuses == [200] * 30 + [429] * 10
    stop_all(stack)
    rows = await records(stack)
    served = {row["id"] for row in rows.values() if row["http_status"] == 200}
    assert len(served) == 30
    # Spread over the three: each replica served some of them.
    per_replica = [len(r.exchange_ids() & served) for r in stack.replicas]
    assert all(per_replica) and sum(per_replica) == 30, per_replica


async def test_tokens_per_window_holds_across_replicas_within_one_request(make_stack):
    budget = 1000
    stack = make_stack(keyed_config(tokens_per_window=budget))
    answers = await sequential(stack.lb_url, 60)
    statuses = [status for status, _ in answers]
    first_refused = statuses.index(429)
    assert set(statuses[first_refused:]) == {429}
    stop_all(stack)
    rows = await records(stack)
    used = [
        (rows[rid]["input_tokens"] or 0) + (rows[rid]["output_tokens"] or 0)
        for status, rid in answers[:first_refused]
    ]
    # Refused once the budget was used, and not a request later: within one request of exact.
    assert sum(used) >= budget > sum(used) - max(used), (sum(used), used)


async def health(session: aiohttp.ClientSession, port: int) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {ADMIN}"}
    async with session.get(f"http://127.0.0.1:{port}/health", headers=headers) as resp:
        return orjson.loads(await resp.read())


async def test_a_circuit_opened_on_one_replica_is_open_on_the_others_within_2_s(make_stack):
    stack = make_stack(keyed_config())
    first, *others = stack.replicas
    headers = {"authorization": f"Bearer {KEY}"}
    body = orjson.dumps({"model": "down-x", "messages": [{"role": "user", "content": "hi"}]})
    async with aiohttp.ClientSession() as session:
        for _ in range(4):  # straight to the first replica: its circuit opens
            async with session.post(
                f"http://127.0.0.1:{first.port}/v1/chat/completions", data=body, headers=headers
            ) as resp:
                assert resp.status in (502, 503), resp.status
        state = await health(session, first.port)
        assert state["targets"]["down/*"]["state"] == "open", state
        opened = time.monotonic()
        pending = {r.port for r in others}
        while pending:
            for port in list(pending):
                if (await health(session, port))["targets"]["down/*"]["state"] == "open":
                    pending.discard(port)
            assert time.monotonic() - opened < 2.0, pending
            await asyncio.sleep(0.05)


async def test_redis_killed_limits_fail_open_without_500s(make_stack):
    stack = make_stack(keyed_config(requests_per_window=1000, tokens_per_window=10**9))
    assert {s for s, _ in await sequential(stack.lb_url, 6)} == {200}
    stack.stop_redis()
    load = Load(stack.lb_url, workers=4)
    answers = await sequential(stack.lb_url, 30)
    await load.stop()
    assert {s for s, _ in answers} == {200}, answers
    stack.start_redis()
    assert {s for s, _ in await sequential(stack.lb_url, 6)} == {200}


async def test_postgres_restarted_every_buffered_record_is_written(make_stack):
    stack = make_stack()
    load = Load(stack.lb_url, workers=4)
    await load.until(40)
    stack.stop_postgres()
    down_from = sum(d.completed for d in load.done)
    await load.until(down_from + 120)  # served while the trail is down: buffered
    stack.start_postgres()
    await load.until(sum(d.completed for d in load.done) + 40)
    done = await load.stop()
    stop_all(stack)
    assert [d for d in done if not d.completed] == []
    rows = await records(stack)
    assert {d.request_id for d in done} == set(rows)  # nothing dropped


async def test_gateway_audit_over_the_shared_trail_equals_what_clients_saw(make_stack):
    stack = make_stack()
    load = Load(stack.lb_url, workers=6)
    await load.until(120)
    done = await load.stop()
    stop_all(stack)
    report = subprocess.run(
        [GATEWAY, "audit", "--store", stack.pg_url, "--format", "json", "--by", "client"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "GATEWAY_CONFIG"},
    )
    assert report.returncode == 0, report.stderr
    groups = {g["group"]: g for g in orjson.loads(report.stdout)}
    assert all(d.completed for d in done)
    for client in ("openai", "anthropic"):
        saw = [d for d in done if d.label.startswith(client + ":")]
        group = groups[client]
        assert group["requests"] == len(saw) and group["errors"] == 0, group
        assert group["truncated"] == 0 and group["missing_terminators"] == 0, group
    assert sum(g["requests"] for g in groups.values()) == len(done)

"""Soak: the scale-out stack (tests/scale_stack.py: three replicas behind HAProxy, one
PostgreSQL trail, one Redis) under mixed load and a fault mix for `--minutes` (default 10), as
root on a machine with .ci/postgres.sh, .ci/redis.sh and .ci/haproxy.sh sourced:

    .venv/bin/python scripts/soak.py --minutes 10 --out soak.json

The fault mix, all the time: upstream resets mid-stream, stalls past the provider's timeout,
429 and 503 answers (a loopback FaultUpstream); slow clients that read a chunk every 50 ms;
clients that leave after the first chunk. And every `--kill-every` seconds one replica in turn
is killed (-9) and started again; every `--term-every` seconds another gets SIGTERM and is started
again. Every 10 s each replica's RSS and open descriptors are sampled.

At the end every replica is stopped (SIGTERM) and the trail is compared with what the clients
saw: per replica (by its log lines), how many exchanges it served, how many of them have no
record (only a killed replica may lose any, at most one audit batch per kill), and the error
counts the clients met by kind. Not in CI: it runs for minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fault_upstream import (
    FaultUpstream,
    answer,
    error_status,
    reset_mid_body,
    stall_after,
)
from tests.scale_stack import AUDIT_BATCH, ScaleStack, missing

FAULT_ROUTES = """
[providers.faulty]
kind = "openai"
base_url = "{url}/v1"
api_key = "sk-soak-faulty"
timeout = 2

[[routes]]
match = "fault-*"
provider = "faulty"
"""
PROMPT = [{"role": "user", "content": "hi"}]
# (client format, model, stream, behaviour): mostly healthy traffic, a fault in every fifth.
MIX: list[tuple[str, str, bool, str]] = [
    ("openai", "bench-c20", False, "normal"),
    ("openai", "bench-c20-p20", True, "normal"),
    ("anthropic", "bench-c20", False, "normal"),
    ("anthropic", "bench-c20-p20", True, "normal"),
    ("openai", "bench-c20-p20", True, "slow-client"),
    ("anthropic", "bench-c20-p20", True, "disconnect"),
    ("openai", "bench-c20", False, "normal"),
    ("openai", "fault-reset", True, "normal"),
    ("anthropic", "fault-stall", True, "normal"),
    ("openai", "fault-429", False, "normal"),
    ("anthropic", "fault-503", False, "normal"),
    ("openai", "fault-ok", True, "normal"),
]


class Seen:
    def __init__(self) -> None:
        self.by_id: dict[str, str] = {}  # request id -> outcome
        self.outcomes: Counter[str] = Counter()

    def add(self, request_id: str | None, outcome: str) -> None:
        self.outcomes[outcome] += 1
        if request_id:
            self.by_id[request_id] = outcome


async def one(
    session: aiohttp.ClientSession, base: str, item: tuple[str, str, bool, str], seen: Seen
) -> None:
    client, model, stream, behaviour = item
    path = "/v1/chat/completions" if client == "openai" else "/v1/messages"
    body: dict[str, Any] = {"model": model, "messages": PROMPT, "stream": stream, "max_tokens": 64}
    request_id = None
    try:
        async with session.post(base + path, data=orjson.dumps(body)) as resp:
            request_id = resp.headers.get("x-request-id")
            data = bytearray()
            async for chunk in resp.content.iter_any():
                data += chunk
                if behaviour == "disconnect":
                    seen.add(request_id, "client-left")
                    return
                if behaviour == "slow-client":
                    await asyncio.sleep(0.05)
            if resp.status != 200:
                seen.add(request_id, f"http-{resp.status}")
            elif b'"truncated":true' in data or b'"error"' in data:
                seen.add(request_id, "reported-cut")  # the gateway said so, in the format
            elif stream and b"data: [DONE]" not in data and b"message_stop" not in data:
                seen.add(request_id, "cut-without-terminator")  # must stay 0
            else:
                seen.add(request_id, "ok")
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        seen.add(request_id, f"connection:{type(exc).__name__}")


async def client_loop(base: str, n: int, stop: asyncio.Event, seen: Seen) -> None:
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=60)
    ) as session:
        i = n
        while not stop.is_set():
            await one(session, base, MIX[i % len(MIX)], seen)
            i += 1


def sample(pid: int) -> tuple[int, int]:
    """RSS in KiB and open descriptors of `pid`."""
    rss = 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    faulty = FaultUpstream()
    faulty.start()
    faulty.script("fault-reset", reset_mid_body())
    faulty.script("fault-stall", stall_after(2, 10.0))
    faulty.script("fault-429", error_status(429, "1"))
    faulty.script("fault-503", error_status(503))
    faulty.script("fault-ok", answer("fine after all"))
    root = Path(tempfile.mkdtemp(prefix="gateway-soak-"))
    stack = ScaleStack.start(root, routes=FAULT_ROUTES.format(url=faulty.url))
    seen = Seen()
    stop = asyncio.Event()
    samples: dict[int, list[tuple[float, int, int]]] = {r.index: [] for r in stack.replicas}
    kills: Counter[int] = Counter()
    terms: Counter[int] = Counter()
    started = time.monotonic()
    clients = [
        asyncio.create_task(client_loop(stack.lb_url, n, stop, seen)) for n in range(args.clients)
    ]
    next_kill = started + args.kill_every
    next_term = started + args.term_every
    next_sample = started
    turn = 0
    try:
        while time.monotonic() - started < args.minutes * 60:
            now = time.monotonic()
            if now >= next_sample:
                for r in stack.replicas:
                    if r.alive():
                        rss, fds = sample(r.pid)
                        samples[r.index].append((round(now - started), rss, fds))
                next_sample += 10
            if now >= next_kill:
                victim = stack.replicas[turn % len(stack.replicas)]
                turn += 1
                victim.kill()
                kills[victim.index] += 1
                await asyncio.sleep(1.0)
                await asyncio.to_thread(victim.start)
                next_kill += args.kill_every
            if now >= next_term:
                victim = stack.replicas[(turn + 1) % len(stack.replicas)]
                await asyncio.to_thread(victim.terminate, 60)
                terms[victim.index] += 1
                await asyncio.to_thread(victim.start)
                next_term += args.term_every
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.gather(*clients)
        for r in stack.replicas:
            if r.alive():
                r.terminate(60)
    conn = await asyncpg.connect(stack.pg_url)
    try:
        recorded = {row["id"] for row in await conn.fetch("SELECT id FROM audit_records")}
    finally:
        await conn.close()
    replicas = []
    for r in stack.replicas:
        served = r.exchange_ids()
        without = served - recorded
        rows = samples[r.index]
        replicas.append(
            {
                "replica": r.index,
                "served": len(served),
                "without_record": len(without),
                "kills": kills[r.index],
                "sigterms": terms[r.index],
                "rss_mib_first_last_max": [
                    round(rows[0][1] / 1024, 1),
                    round(rows[-1][1] / 1024, 1),
                    round(max(x[1] for x in rows) / 1024, 1),
                ],
                "fds_first_last_max": [rows[0][2], rows[-1][2], max(x[2] for x in rows)],
            }
        )
    client_ids = set(seen.by_id)
    stack.close()
    faulty.stop()
    return {
        "minutes": args.minutes,
        "clients": args.clients,
        "exchanges_seen_by_clients": sum(seen.outcomes.values()),
        "outcomes": dict(seen.outcomes.most_common()),
        "records": len(recorded),
        "records_no_client_saw": len(recorded - client_ids),
        "client_ids_without_record": len(client_ids - recorded),
        "loss_bound_per_kill": AUDIT_BATCH,
        "replicas": replicas,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--kill-every", type=float, default=60.0)
    parser.add_argument("--term-every", type=float, default=90.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lacking = missing()
    if lacking is not None:
        print(f"soak: needs {lacking}", file=sys.stderr)
        return 2
    report = asyncio.run(soak(args))
    text = orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`kill -9` under load: the trail stays readable, a restart carries on, and what is lost is
bounded by the audit writer's queue.

A real `gateway serve` (subprocess, as in tests/test_shutdown.py) serves the offline mock
provider with a SQLite store and `[audit] queue_size` set small; eight client threads keep
exchanges going (Chat Completions and Messages, whole and streamed) for a second, then every
process of the gateway gets SIGKILL (with workers, the supervisor and each worker, as a cgroup's
kill would: the supervisor alone killed lets its workers stop gracefully, tests/test_workers.py).
Afterwards:

- the SQLite file opens and passes `PRAGMA integrity_check` (its WAL is recovered);
- `gateway audit` on that store exits 0 and reports every record it holds;
- a restarted `gateway serve` on the same store serves and records, beside the old records;
- the exchanges whose clients got a whole 2xx answer (with its `x-request-id`) but whose record
  is not in the store are at most LOST_BOUND per serving process.

What a SIGKILL can lose (gateway/audit/writer.py): records accepted but not yet committed. The
queue holds up to `queue_size`; the drain takes one record, lingers (20 ms) when nothing else is
queued, then takes up to `batch_size` records in all (at most `queue_size + 1`: the first one and
a full queue behind it), and while that batch is written the queue fills up again. A whole answer
is sent only once its record is queued; a stream's record is queued just after its last byte went
out, so a stream in that gap is lost too: at most one per client thread. Committed batches are
not lost (WAL, `synchronous=NORMAL`: durable across a process crash, not a power loss).
"""

from __future__ import annotations

import asyncio
import http.client
import inspect
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from gateway.audit.writer import AuditWriter
from tests.mock_config import SERVER, mock_config
from tests.process_tree import environ, tree
from tests.test_shutdown import GATEWAY, GatewayProcess, clean_env, records_by_id, sqlite_rows

THREADS = 8
QUEUE_SIZE = 64
BATCH_SIZE = inspect.signature(AuditWriter).parameters["batch_size"].default  # app.py keeps it
LOST_BOUND = QUEUE_SIZE + min(BATCH_SIZE, QUEUE_SIZE + 1) + THREADS
LOAD_SECONDS = 1.0
# (path, body) per exchange, in turn: both client formats, whole and streamed.
EXCHANGES = [
    ("/v1/chat/completions", {"model": "mock-text", "stream": False}),
    ("/v1/messages", {"model": "mock-text", "stream": True, "max_tokens": 64}),
    ("/v1/chat/completions", {"model": "mock-tool", "stream": True}),
    ("/v1/messages", {"model": "mock-tool", "stream": False, "max_tokens": 64}),
]
PROMPT = [{"role": "user", "content": "hi"}]


def config_text(db: Path) -> str:
    return mock_config(db, head=SERVER, audit=f"queue_size = {QUEUE_SIZE}\n")


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., GatewayProcess]]:
    """`launch(config_text, name)` starts a `gateway serve`; one still running at the end is
    killed."""
    started: list[GatewayProcess] = []

    def run(text: str, name: str = "gateway.toml") -> GatewayProcess:
        path = tmp_path / name
        path.write_text(text)
        started.append(GatewayProcess(path, tmp_path))
        return started[-1]

    yield run
    for gateway in started:
        gateway.kill()


@dataclass
class Received:
    request_id: str
    status: int


def exchange(conn: http.client.HTTPConnection, n: int) -> Received | None:
    """One exchange on `conn`; what the client got, when it got a whole 2xx answer."""
    path, body = EXCHANGES[n % len(EXCHANGES)]
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    conn.request("POST", path, json.dumps({**body, "messages": PROMPT}), headers)
    reply = conn.getresponse()
    data = reply.read()  # IncompleteRead when the process dies mid-answer: not received
    request_id = reply.getheader("x-request-id")
    whole = data.endswith((b"data: [DONE]\n\n", b'data: {"type":"message_stop"}\n\n'))
    if not body["stream"]:
        whole = data.startswith(b"{") and data.endswith(b"}")
    if 200 <= reply.status < 300 and request_id and whole:
        return Received(request_id, reply.status)
    return None


def client(base: str, n: int, stop: threading.Event, got: list[Received]) -> None:
    """Exchange after exchange until told to stop or the gateway is gone."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    count = n
    try:
        while not stop.is_set():
            try:
                received = exchange(conn, count)
            except (OSError, http.client.HTTPException):
                return  # killed: refused, reset or cut mid-answer
            if received is not None:
                got.append(received)
            count += 1
    finally:
        conn.close()


def audit_report(db: Path) -> tuple[int, Any]:
    proc = subprocess.run(
        [GATEWAY, "audit", "--store", f"sqlite:///{db}", "--format", "json"],
        env=clean_env(),
        capture_output=True,
        timeout=60,
    )
    assert proc.stderr.decode().count("Traceback") == 0, proc.stderr.decode()
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None


async def test_sigkill_under_load_loses_at_most_the_queued_records(tmp_path, launch):
    db = tmp_path / "audit" / "trail.db"
    config = config_text(db)
    gateway = launch(config)
    base = await gateway.ready()

    got: list[Received] = []
    stop = threading.Event()
    threads = [threading.Thread(target=client, args=(base, n, stop, got)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    await asyncio.sleep(LOAD_SECONDS)
    assert all(thread.is_alive() for thread in threads), "a client stopped before the kill"
    processes = tree(gateway.proc.pid)  # the gateway, or its supervisor first, then its workers
    serving = max(1, len(processes) - 1)
    # Killed whole, workers leave their private directory behind (the next supervisor removes
    # it once stale): this test removes it itself.
    private = [Path(environ(pid)["PROMETHEUS_MULTIPROC_DIR"]).parent for pid in processes[1:2]]
    for pid in processes:
        os.kill(pid, signal.SIGKILL)  # no signal handler, no flush
    stop.set()
    killed = time.monotonic()
    assert await gateway.wait(10) == -9
    for thread in threads:
        await asyncio.to_thread(thread.join, 15)
    assert not any(thread.is_alive() for thread in threads)
    assert time.monotonic() - killed < 20  # nothing hung on the dead process
    assert len(got) >= 50, f"too little load to mean anything: {len(got)} exchanges"

    # The file is consistent, and its WAL recovered on open.
    assert sqlite_rows(db, "PRAGMA integrity_check") == [("ok",)]
    for directory in private:
        shutil.rmtree(directory)
    records = records_by_id(db)
    missing = [r.request_id for r in got if r.request_id not in records]
    bound = LOST_BOUND * serving
    assert len(missing) <= bound, f"{len(missing)} of {len(got)} lost (bound {bound})"

    # The CLI reads the trail the killed process left, every record of it.
    code, report = audit_report(db)
    assert code == 0
    assert sum(group["requests"] for group in report) == len(records)

    # A new process on the same store serves and records, beside what was there.
    again = launch(config, name="again.toml")
    base = await again.ready()
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    fresh = [await asyncio.to_thread(exchange, conn, n) for n in range(len(EXCHANGES))]
    conn.close()
    again.signal(15)  # SIGTERM: the clean stop flushes the trail
    assert await again.wait(15) == 0, again.lines[-10:]
    assert all(f is not None for f in fresh)
    after = records_by_id(db)
    assert {f.request_id for f in fresh if f is not None} <= set(after)
    assert set(records) <= set(after)
    assert sqlite_rows(db, "PRAGMA integrity_check") == [("ok",)]

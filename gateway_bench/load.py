"""The bench's load generator: a process of its own, driven by JSON lines on stdin.

    python -m gateway_bench.load      # one job a line in, one result a line out

Jobs (`op`): `run` a closed loop of `concurrency` keep-alive connections, each sending the next
request as soon as its answer ended, for `duration` seconds (and at least `min_requests`) or
`max_requests` requests, after `warmup` requests whose results are dropped; `hold` opens
`count` more streams that stay open (idle, after their first byte) until `release` closes them.

It is written for cheapness, since on a two-core machine it competes with the gateway it
measures, and at concurrency 1 its own cost is part of every latency: uvloop, and the raw
protocol client of `gateway_bench.client`. Per request it keeps the latency (request written to
the answer's last byte), the time to first byte (the first byte of the body), the status and,
for a stream, whether its terminator arrived (`[DONE]`, `message_stop`, `response.completed`,
...). During a run it reads the CPU time and RSS of the process trees it is told to `watch`
(`gateway_bench.procstat`): CPU at the window's two ends, RSS every 100 ms. Those are plain
synchronous reads inside the loop, on purpose: /proc is generated in memory, a read takes
microseconds and never waits on a disk.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import orjson

from gateway import event_loop
from gateway.listen import raise_open_files_limit
from gateway_bench import stats
from gateway_bench.client import Connection, Request, RequestFailed, connect
from gateway_bench.procstat import ProcessTree

SETTLE_S: Final = 0.05  # quiet before and after a window: in-flight background work lands
RSS_EVERY_S: Final = 0.1
WATCHDOG_S: Final = 0.2
CONNECT_BACKOFF_S: Final = 0.01
OPEN_BATCH: Final = 50  # held streams connected at once (the target's accept backlog)


class ClosedLoop:
    """`concurrency` connections, each sending its next request when the last one ended."""

    def __init__(self, request: Request, concurrency: int, timeout: float) -> None:
        self.request = request
        self.timeout = timeout
        self.slots: list[Connection | None] = [None] * concurrency
        self.latencies: list[float] = []
        self.ttfbs: list[float] = []
        self.ttfts: list[float] = []
        self.errors: collections.Counter[str] = collections.Counter()
        self.issued = 0

    async def one(self, slot: int, errors: collections.Counter[str]) -> None:
        connection = self.slots[slot]
        if connection is None or connection.closed or not connection.keep_alive:
            if connection is not None and connection.transport is not None:
                connection.transport.close()
            try:
                connection = self.slots[slot] = await connect(self.request)
            except OSError:
                errors["connect failed"] += 1
                self.slots[slot] = None
                await asyncio.sleep(CONNECT_BACKOFF_S)
                return
        try:
            status, ttfb, latency, ended, ttft = await connection.send(self.request.data)
        except RequestFailed as exc:
            errors[exc.kind] += 1
            self.slots[slot] = None
            return
        if status != 200:
            errors[f"status {status}"] += 1
        elif not ended:
            errors["no terminator" if self.request.stream else "unexpected body"] += 1
        elif errors is self.errors:
            self.latencies.append(latency)
            self.ttfbs.append(ttfb)
            if ttft:
                self.ttfts.append(ttft)

    async def warm(self, slot: int, count: int, errors: collections.Counter[str]) -> None:
        for _ in range(count):
            await self.one(slot, errors)

    async def measure(self, slot: int, deadline: float, floor: int, cap: int) -> None:
        while self.issued < cap and (self.issued < floor or time.perf_counter() < deadline):
            self.issued += 1
            await self.one(slot, self.errors)

    async def watchdog(self) -> None:
        while True:
            await asyncio.sleep(WATCHDOG_S)
            now = time.perf_counter()
            for connection in self.slots:
                if connection is None or connection.transport is None:
                    continue
                if connection.started and now - connection.started > self.timeout:
                    connection.timed_out = True
                    connection.transport.abort()

    def close(self) -> None:
        for connection in self.slots:
            if connection is not None and connection.transport is not None:
                connection.transport.close()


class Watched:
    """The CPU and peak RSS of the watched process trees over one window."""

    def __init__(self, watch: dict[str, list[int]]) -> None:
        self.trees = {name: ProcessTree(pids) for name, pids in watch.items() if pids}
        self.cpu0 = {name: tree.cpu_seconds() for name, tree in self.trees.items()}
        self.rss0 = {name: tree.rss_bytes() for name, tree in self.trees.items()}
        self.rss_max = dict(self.rss0)
        self.largest_max = {name: tree.rss_of_largest() for name, tree in self.trees.items()}

    async def sample(self) -> None:
        while True:
            await asyncio.sleep(RSS_EVERY_S)
            for name, tree in self.trees.items():
                self.rss_max[name] = max(self.rss_max[name], tree.rss_bytes())
                self.largest_max[name] = max(self.largest_max[name], tree.rss_of_largest())

    def result(self) -> dict[str, Any]:
        out = {}
        for name, tree in self.trees.items():
            rss = tree.rss_bytes()
            out[name] = {
                "cpu_s": tree.cpu_seconds() - self.cpu0[name],
                "rss_start_mb": self.rss0[name] / 2**20,
                "rss_max_mb": max(self.rss_max[name], rss) / 2**20,
                "rss_end_mb": rss / 2**20,
                "process_rss_max_mb": max(self.largest_max[name], tree.rss_of_largest()) / 2**20,
                "pss_end_mb": tree.pss_bytes() / 2**20,
                "processes": len(tree.pids),
            }
        return out


def milliseconds(values: list[float]) -> list[float]:
    return sorted(value * 1000 for value in values)


async def run_job(state: Held, job: dict[str, Any]) -> dict[str, Any]:
    request = Request.from_job(job)
    concurrency = max(1, int(job["concurrency"]))
    loop = ClosedLoop(request, concurrency, float(job.get("timeout", 30.0)))
    watchdog = asyncio.create_task(loop.watchdog())
    warmup_errors: collections.Counter[str] = collections.Counter()
    per_slot = -(-max(int(job.get("warmup", 0)), concurrency) // concurrency)
    try:
        await asyncio.gather(*(loop.warm(i, per_slot, warmup_errors) for i in range(concurrency)))
        await asyncio.sleep(SETTLE_S)
        watched = Watched(job.get("watch", {}))
        sampler = asyncio.create_task(watched.sample())
        cpu0, start = time.process_time(), time.perf_counter()
        deadline = start + float(job["duration"])
        cap = int(job.get("max_requests", 10**9))
        floor = min(cap, int(job.get("min_requests", 0)))
        await asyncio.gather(*(loop.measure(i, deadline, floor, cap) for i in range(concurrency)))
        elapsed = time.perf_counter() - start
        own_cpu = time.process_time() - cpu0
        await asyncio.sleep(SETTLE_S)
        sampler.cancel()
        servers = watched.result()
    finally:
        watchdog.cancel()
        loop.close()
    latencies, ttfbs = milliseconds(loop.latencies), milliseconds(loop.ttfbs)
    ttfts = milliseconds(loop.ttfts)
    ok = len(latencies)
    result: dict[str, Any] = {
        "requests": loop.issued,
        "ok": ok,
        "errors": dict(loop.errors),
        "warmup_errors": dict(warmup_errors),
        "started_s": start,  # the load generator's clock: when the window opened
        "elapsed_s": elapsed,
        "rps": ok / elapsed if elapsed > 0 else 0.0,
        "latency_ms": stats.summary(latencies),
        "ttfb_ms": stats.summary(ttfbs),
        "ttft_ms": stats.summary(ttfts),
        "latency_quantiles_ms": stats.quantiles(latencies),
        "loadgen_cpu_s": own_cpu,
        "servers": servers,
    }
    if job.get("raw"):  # for a run measured in slices: `gateway_bench.slices` merges them
        result["raw_ms"] = {"latency": latencies, "ttfb": ttfbs, "ttft": ttfts}
    return result


class Held:
    """The streams `hold` opened, kept across jobs until `release`."""

    def __init__(self) -> None:
        self.connections: list[Connection] = []


async def hold_job(state: Held, job: dict[str, Any]) -> dict[str, Any]:
    request = Request.from_job({**job, "stream": True})
    count, timeout = int(job["count"]), float(job.get("timeout", 30.0))
    failures: collections.Counter[str] = collections.Counter()
    firsts: list[asyncio.Future[float]] = []
    for start in range(0, count, OPEN_BATCH):
        batch = range(start, min(count, start + OPEN_BATCH))
        results = await asyncio.gather(*(connect(request) for _ in batch), return_exceptions=True)
        for result in results:
            if isinstance(result, Connection):
                state.connections.append(result)
                firsts.append(result.open_stream(request.data))
            else:
                failures["connect failed"] += 1
    if firsts:
        await asyncio.wait(firsts, timeout=timeout)
    first_byte = 0
    for future in firsts:
        if not future.done():
            failures["no first byte"] += 1
            future.cancel()
        elif future.exception() is not None:
            failures[str(future.exception())] += 1
        else:
            first_byte += 1
    ended = sum(1 for connection in state.connections if connection.finished)
    return {
        "asked": count,
        "first_byte": first_byte,
        "open": sum(1 for c in state.connections if not c.closed and not c.finished),
        "ended_early": ended,
        "failures": dict(failures),
    }


async def release_job(state: Held, job: dict[str, Any]) -> dict[str, Any]:
    released = len(state.connections)
    for connection in state.connections:
        if connection.transport is not None:
            connection.transport.abort()
    state.connections.clear()
    await asyncio.sleep(SETTLE_S)
    return {"released": released}


Job = Callable[[Held, dict[str, Any]], Awaitable[dict[str, Any]]]
JOBS: Final[dict[str, Job]] = {"run": run_job, "hold": hold_job, "release": release_job}


async def serve_jobs() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    state = Held()
    while line := await reader.readline():
        job = orjson.loads(line)
        try:
            result = await JOBS[job["op"]](state, job)
        except Exception as exc:  # reported to the parent, which says what failed
            result = {"failed": f"{type(exc).__name__}: {exc}"}
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
        sys.stdout.flush()
    await release_job(state, {})


def main() -> int:
    # Ctrl-C reaches the whole process group: the bench stops this process itself (SIGTERM),
    # after its own cleanup, without a traceback from here in between.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise_open_files_limit()
    gc.freeze()  # what was imported is never garbage: keep collections short
    event_loop.run(serve_jobs())
    return 0


if __name__ == "__main__":
    sys.exit(main())

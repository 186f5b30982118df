"""`gateway serve --workers N`: N worker processes share the port under this supervisor.

The workers are started first (`Launch`, with `--workers N` before the configuration is even
read), so that each imports the serving stack (some 300 ms of CPU) while the supervisor reads
and validates the settings, reserves the address and opens the stores; a worker waits for its
spec before it builds anything. The supervisor has reserved the address (bound, never
listening: gateway.listen) before a worker gets a socket, so a port in use is the same one-line
error as with one process (the waiting workers are killed: they never said anything). Then it
opens the audit store once (migrations run here, not N times at once), prepares the shared
Responses store, hands each worker its spec (its sockets travel with it, SCM_RIGHTS), and prints
`listening on http://HOST:PORT` once every worker accepts. Each worker serves as soon as it
accepts: the first one ready answers while the others finish starting.
Each worker listens on a socket of its own bound to the same port with SO_REUSEPORT; the kernel
spreads new connections over the listening ones. A worker that dies takes its socket with it
(connections waiting in its accept queue are reset), and the others keep serving.

Workers are fresh interpreters (`python -m gateway.worker`, `subprocess` with `pass_fds`), not
forks of this process: uvloop and the threads behind SQLite and asyncpg do not survive a fork;
prometheus_client chooses its value class when it is imported, so a worker must start with
PROMETHEUS_MULTIPROC_DIR already set; and a fork would save little memory, as CPython's
reference counts write to the pages it would share. The settings travel on each worker's
channel exactly as validated once, so a restarted worker runs what the others run.

- A worker that dies is restarted, at once if it had run for a while, else after a delay that
  doubles while it keeps dying quickly (gateway.restart_policy). One that fails
  before it accepts ends the gateway (exit status 1, one line) at the first start, or later once
  no worker serves and it failed GIVE_UP_AFTER times in a row (`gives_up`). Each death and
  restart is a log line.
- SIGTERM, SIGINT and SIGHUP are forwarded to every worker (started with those signals blocked,
  so one that is still starting stops as soon as it can handle them); each stops as `gateway
  serve` does, and the supervisor exits 0 once they all exited 0.
- SIGUSR1 (`gateway reload`) rereads the configuration file: refused (one line) when it does not
  load, and then no worker is asked; else it is forwarded to every worker, each rereads the file
  itself (gateway.live_config), and a worker restarted later starts with it.
- Workers run in their own process group (a terminal's Ctrl-C reaches the supervisor, which
  forwards it once) and watch their channel: if the supervisor is killed, they stop gracefully.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from gateway.launch import MULTIPROC_ENV, Launch, Started, discard, start_worker, without
from gateway.listen import worker_sockets
from gateway.private_dir import PrivateDir
from gateway.reread import ReloadRefused, reread
from gateway.restart_policy import QUICK_DEATH, gives_up, restart_delay
from gateway.serving import cause
from gateway.signals import RELOAD_SIGNAL, STOP_SIGNALS
from gateway.worker_process import WorkerProcess
from gateway.workers import WorkerSpec, encode_spec, for_workers, send_fds

if TYPE_CHECKING:
    from gateway.price_subset import PendingPrices
    from gateway.settings import Settings

log = logging.getLogger("gateway.supervisor")

STAGGER_MAX_S: Final = 10.0  # the longest the other workers wait for the first to be ready


@dataclass
class Slot:
    """One of the N worker places; its process is replaced when it dies."""

    index: int
    process: WorkerProcess | None = None
    started: float = 0.0
    ready: bool = False
    failure: str | None = None  # what the worker said when its app could not start
    failed_starts: int = 0  # in a row, each before the worker was ready
    quick_deaths: int = 0  # in a row, each sooner than QUICK_DEATH after its start


def supervise(
    settings: Settings,
    count: int,
    reserved: list[socket.socket],
    shown_host: str,
    audit_location: str,
    config_path: str | None = None,
    launch: Launch | None = None,
    prices: PendingPrices | None = None,
) -> int:
    """Run `count` workers until a stop signal; the exit status of `gateway serve`. `launch`:
    the workers started already (else none); `prices`: the price table's child, asked."""
    launch = Launch() if launch is None else launch
    try:
        supervisor = Supervisor(
            for_workers(settings, launch.shared.path),
            count,
            reserved,
            shown_host,
            audit_location,
            launch.shared,
            launch.env,
            started=launch.started,
            prices=prices,
        )
        supervisor.config_path = config_path
        launch.started = []
        return asyncio.run(supervisor.run())
    finally:
        for sock in reserved:
            sock.close()
        launch.shared.leave()  # the workers are gone: this removes the directory


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        count: int,
        reserved: Sequence[socket.socket],
        shown_host: str,
        audit_location: str,
        shared: PrivateDir,
        env: Mapping[str, str] = os.environ,
        *,
        started: Sequence[Started] = (),
        prices: PendingPrices | None = None,
    ) -> None:
        self.settings = settings
        self.config_path: str | None = None  # the file a reload rereads
        self.slots = [Slot(index) for index in range(1, count + 1)]
        self._reserved = reserved
        self._shown_host = shown_host
        self._audit_location = audit_location
        self._shared = shared
        metrics = os.path.join(shared.path, "metrics")
        self._metrics_dir = metrics
        self._env = {**without(env, "prometheus_multiproc_dir"), MULTIPROC_ENV: metrics}
        # Started already (Launch), each taken by a slot's first run; the rest are discarded.
        self._started = dict(zip(range(1, count + 1), started, strict=False))
        self._pending_prices = prices
        self._prices: bytes | None = None  # the child's answer each worker gets; None: its own
        self._prices_for: object = None  # the providers it was asked for
        self._stopping = asyncio.Event()
        self._stop_signal: signal.Signals | None = None
        self._all_ready = asyncio.Event()
        # Set once a worker is ready, or one ended first: the others start only then (`_staggered`).
        self._first_settled = asyncio.Event()
        self._listening = False
        self._gave_up: str | None = None
        self._stop_problems: list[str] = []

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._stop, sig)
        loop.add_signal_handler(RELOAD_SIGNAL, self._reload)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, (RELOAD_SIGNAL,))  # blocked by `gateway serve`
        try:
            return await self._run()
        finally:
            discard(list(self._started.values()))  # none of them got a spec
            self._started.clear()

    async def _run(self) -> int:
        pending = self._pending_prices
        answer = None if pending is None else asyncio.create_task(asyncio.to_thread(pending.answer))
        problem = await self._open_stores()
        if answer is not None:
            self._prices = await answer
            self._prices_for = self.settings.providers
        if problem is not None:
            print(f"gateway serve: {problem}", file=sys.stderr, flush=True)
            return 1
        keepers = [asyncio.create_task(self._keep(slot)) for slot in self.slots]
        await _first(self._all_ready, self._stopping)
        if not self._stopping.is_set():
            self._listening = True
            port = self._reserved[0].getsockname()[1]
            print(f"listening on http://{self._shown_host}:{port}", file=sys.stderr, flush=True)
        await asyncio.gather(*keepers)
        for problem in filter(None, [self._gave_up, *self._stop_problems]):
            print(f"gateway serve: {problem}", file=sys.stderr, flush=True)
        return 1 if self._gave_up or self._stop_problems else 0

    async def _open_stores(self) -> str | None:
        """Open the audit store once (creating or migrating its schema) and the SQLite Responses
        store (its schema and owner secret), before any worker: the same failure line as with
        one process, and no N workers racing to migrate."""
        from gateway.audit.opening import open_store
        from gateway.audit.store import audit_off
        from gateway.responses_store import open_response_store

        try:
            if not audit_off(self.settings.audit.store):
                audit = open_store(self.settings.audit.store)
                await audit.open()
                await audit.close()
        except Exception as exc:
            return f"cannot open the audit store {self._audit_location}: {cause(exc)}"
        r = self.settings.responses
        responses = open_response_store(r.store, r.ttl, r.max_entries, r.max_bytes)
        try:
            await responses.open()
            await responses.close()
        except Exception as exc:
            return f"cannot open the responses store {r.store.split(':///')[-1]}: {cause(exc)}"
        return None

    def _stop(self, sig: signal.Signals, announce: bool = True) -> None:
        """Forward `sig` to every worker; the first one also stops restarts."""
        if self._stop_signal is None:
            self._stop_signal = sig
            self._stopping.set()
            if announce:
                grace = self.settings.server.shutdown_grace
                fields = {"signal": sig.name, "grace_s": grace, "workers": len(self.slots)}
                log.info("shutting down", extra=fields)
        for slot in self.slots:
            process = slot.process
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(sig)

    def _reload(self) -> None:
        """Check the file once here; when it loads, workers started from now on get it, and
        every worker running is told to reread it."""
        path = None if self.config_path is None else Path(self.config_path)
        try:
            adapt = functools.partial(for_workers, private_dir=self._shared.path)
            self.settings, _ = reread(path, os.environ, self.settings, adapt)
        except ReloadRefused as exc:
            log.error("configuration reload refused, the running one kept: %s", exc)
            return
        for slot in self.slots:
            process = slot.process
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(RELOAD_SIGNAL)

    def _give_up(self, reason: str) -> None:
        if self._gave_up is None and not self._stopping.is_set():
            self._gave_up = reason
            log.error("giving up: stopping every worker", extra={"reason": reason})
            self._stop(signal.SIGTERM, announce=False)

    async def _keep(self, slot: Slot) -> None:
        """Keep a worker running in `slot` until the gateway stops; a failure of the supervisor
        itself stops the gateway rather than leave a slot empty unnoticed."""
        try:
            await self._keep_running(slot)
        except Exception as exc:
            self._give_up(
                f"the supervisor failed ({type(exc).__name__}) keeping worker {slot.index}"
            )
            raise

    async def _staggered(self, slot: Slot) -> None:
        """The first worker starts alone, the others once it is ready: on a machine whose cores
        the workers' imports would share, the first answer then comes a whole import sooner, and
        the last worker is ready about when it would have been (each import takes a core)."""
        if slot.index > 1 and self._started.get(slot.index) is None:
            with contextlib.suppress(TimeoutError):  # a slow first: the others wait no longer
                await asyncio.wait_for(_first(self._first_settled, self._stopping), STAGGER_MAX_S)

    async def _keep_running(self, slot: Slot) -> None:
        delay = 0.0
        await self._staggered(slot)
        while not self._stopping.is_set():
            if delay and await _within(self._stopping, delay):
                return
            status = await self._run_worker(slot)
            self._first_settled.set()
            if self._stopping.is_set():
                self._stopped(slot, status)
                return
            next_delay = self._after_death(slot, status)
            if next_delay is None:
                return
            delay = next_delay

    async def _run_worker(self, slot: Slot) -> int | None:
        """Start a worker in `slot` and wait for it to exit: its exit status (negative: the
        signal that ended it), None when it could not be started at all."""
        slot.process, slot.ready, slot.failure = None, False, None
        slot.started = time.monotonic()
        try:
            started = self._started.pop(slot.index, None) or start_worker(self._env)
        except OSError as exc:
            slot.failure = f"cannot start a worker: {cause(exc)}"
            return None
        process = slot.process = started.process
        if self._stop_signal is not None:  # it came while the worker was being started
            process.send_signal(self._stop_signal)
        log.info("worker started", extra={"worker": slot.index, "pid": process.pid})
        try:
            reader, writer = await self._hand_spec(slot, started.channel)
        except OSError as exc:
            slot.failure = f"cannot start a worker: {cause(exc)}"
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            return await process.wait()
        watcher = asyncio.create_task(self._watch(slot, reader))
        status = await process.wait()
        with contextlib.suppress(TimeoutError):  # its end closed with it: at end of file
            await asyncio.wait_for(watcher, timeout=5.0)
        writer.close()
        # Its live gauges (in flight, queue depth, circuits) no longer count; counters stay.
        from prometheus_client.multiprocess import mark_process_dead

        mark_process_dead(process.pid, self._metrics_dir)  # type: ignore[no-untyped-call]
        return status

    async def _hand_spec(
        self, slot: Slot, channel: socket.socket
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The worker's spec on its channel, its sockets with it (they are the worker's from
        then on: none stays open here)."""
        try:
            sockets = worker_sockets(self._reserved)
            try:
                spec = WorkerSpec(
                    slot.index,
                    self.settings,
                    tuple(sock.fileno() for sock in sockets),
                    self._audit_location,
                    self._shared.path,
                    self.config_path,
                    self._prices if self._prices_for == self.settings.providers else None,
                )
                data = encode_spec(spec)
                send_fds(channel, data[:4], spec.sockets)  # a few bytes: never blocks
            finally:
                for sock in sockets:
                    sock.close()
            reader, writer = await asyncio.open_connection(sock=channel)
        except BaseException:
            channel.close()
            raise
        writer.write(data[4:])
        return reader, writer

    async def _watch(self, slot: Slot, reader: asyncio.StreamReader) -> None:
        """What the worker says: `ready` once it accepts, `failed <why>` when it cannot start.
        A worker killed before it read its spec resets the connection: that ends it too."""
        with contextlib.suppress(ConnectionError):
            await self._read_lines(slot, reader)

    async def _read_lines(self, slot: Slot, reader: asyncio.StreamReader) -> None:
        async for line in reader:
            if line == b"ready\n":
                slot.ready = True
                slot.failed_starts = 0
                self._first_settled.set()
                pid = slot.process.pid if slot.process is not None else None
                log.info("worker ready", extra={"worker": slot.index, "pid": pid})
                if all(s.ready for s in self.slots):
                    self._all_ready.set()
            elif line.startswith(b"failed "):
                slot.failure = line.removeprefix(b"failed ").decode(errors="replace").strip()

    def _after_death(self, slot: Slot, status: int | None) -> float | None:
        """Log the death; the delay before the restart, or None when the gateway gives up."""
        uptime = time.monotonic() - slot.started
        pid = slot.process.pid if slot.process is not None else None
        fields: dict[str, object] = {"worker": slot.index, "pid": pid, "uptime_s": round(uptime, 3)}
        fields["status"] = _status(status)
        if slot.failure:
            fields["error"] = slot.failure
        if not slot.ready:
            slot.failed_starts += 1
            why = slot.failure or f"it exited ({_status(status)}) before it was ready"
            serving = sum(other.ready for other in self.slots)
            if gives_up(slot.failed_starts, listening=self._listening, serving=serving):
                if not self._listening:
                    self._give_up(f"worker {slot.index} could not start: {why}")
                else:
                    self._give_up(
                        f"no worker is serving and worker {slot.index} failed to start "
                        f"{slot.failed_starts} times in a row (last: {why})"
                    )
                return None
        slot.quick_deaths = slot.quick_deaths + 1 if uptime < QUICK_DEATH else 0
        delay = restart_delay(slot.quick_deaths)
        log.warning("worker exited; restarting", extra={**fields, "restart_in_s": delay})
        return delay

    def _stopped(self, slot: Slot, status: int | None) -> None:
        """A worker ended after the stop: fine with status 0, or by the stop signal itself
        before it could handle it; anything else is reported, and the exit status is 1."""
        clean = status in (0, None) or (
            self._stop_signal is not None and status == -self._stop_signal
        )
        if clean:
            return
        pid = slot.process.pid if slot.process is not None else None
        log.error("worker failed while stopping", extra={"worker": slot.index, "pid": pid})
        self._stop_problems.append(f"worker {slot.index} exited ({_status(status)}) while stopping")


def _status(status: int | None) -> str:
    if status is None:
        return "not started"
    if status < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-status).name
    return f"status {status}"


async def _within(event: asyncio.Event, seconds: float) -> bool:
    """Whether `event` is set within `seconds`."""
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def _first(*events: asyncio.Event) -> None:
    waits = [asyncio.create_task(event.wait()) for event in events]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for wait in waits:
        wait.cancel()

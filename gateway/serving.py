"""One serving process: the app on its sockets until a stop signal, then a graceful stop.

`gateway serve` runs this in its own process with one worker, and each worker runs it when there
are several (gateway.worker); only what they say differs:

    await run_server(settings, sockets, audit_location, Serving(on_ready=print_listening))

Stopping is the same everywhere: on SIGTERM, SIGINT or SIGHUP (or `Serving.until`, a worker's
supervisor gone) stop accepting, let in-flight exchanges finish within the grace period, flush
the audit trail (the app's cleanup) and return. On SIGUSR1 the process rereads its configuration
file and serves it from then on (gateway.live_config); a file that does not load is refused.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway import logs
from gateway.listen import BACKLOG, raise_open_files_limit
from gateway.settings import Settings
from gateway.signals import RELOAD_SIGNAL, STOP_SIGNALS

if TYPE_CHECKING:
    from gateway.price_subset import GivenPrices, PendingPrices

log = logging.getLogger("gateway.cli")

GC_YOUNG = 10_000  # allocations between two young collections (the default: 700)
# How long after it listens a process settles its collector (`settle_collector`): that first
# full walk is some 30 ms of CPU, which the first answers, right after the start, do not wait for.
SETTLE_AFTER_S = 1.0


class StartupFailed(Exception):
    """The application could not start (its audit store did not open); the message says why."""


@dataclass(frozen=True, slots=True)
class Serving:
    """What one serving process says and watches besides its signals.

    `on_ready(port)`: called once every socket accepts. `until`: a stop reason other than a
    signal (it resolves to a name for the log). `stopping`: the log line of the stop, with the
    signal. `metrics_dir`: prometheus_client's multiprocess directory, when workers share one.
    """

    on_ready: Callable[[int], Awaitable[None] | None]
    until: Callable[[], Awaitable[str]] | None = None
    stopping: str = "shutting down"
    log_fields: dict[str, Any] = field(default_factory=dict)
    metrics_dir: str | None = None
    config_path: str | None = None  # the file a reload rereads; None: the built-in default
    adapt: Callable[[Settings], Settings] | None = None  # done to a reload's settings too
    # The price table on its way (gateway.price_subset); None: run_server starts its child.
    prices: PendingPrices | GivenPrices | None = None


def settle_collector() -> None:
    """Once the process has listened a while (SETTLE_AFTER_S): the collector, off while it
    started (`gateway serve` and a worker turn it off first: the imports' collections were
    30-50 ms of CPU before the first answer), collects the start's garbage once, then freezes
    what start-up made (modules, settings, the app: it lives as long as the process, and a full
    collection no longer walks it again and again), and runs from then on."""
    gc.collect()
    gc.freeze()
    gc.enable()


async def run_server(
    settings: Settings, listeners: list[socket.socket], audit_location: str, serving: Serving
) -> None:
    """Serve on `listeners` until SIGTERM, SIGINT or SIGHUP (or `serving.until`); then stop
    accepting, let in-flight exchanges finish within the grace period, flush the audit trail
    (the app's cleanup), and return. StartupFailed when the application cannot start (its audit
    store did not open). `listeners` may be bound without listening: the server listens."""
    # The price table's child process first: it reads the table while this one imports the app.
    pending_prices = serving.prices
    if pending_prices is None:
        from gateway.price_subset import PendingPrices

        pending_prices = PendingPrices.start(settings)
    # The app is imported here, not with this module: a supervisor (gateway.supervisor) reads
    # this module's signals and causes and never serves, and so never carries the app.
    from aiohttp import web

    from gateway.app import LIVE, STOP_MARGIN, build_app
    from gateway.edge import make_runner

    raise_open_files_limit()
    loop = asyncio.get_running_loop()
    received: asyncio.Future[str] = loop.create_future()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, _note, received, sig.name)
    # A worker blocks these signals until it can handle them: one sent meanwhile arrives now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    watcher = None
    if serving.until is not None:
        watcher = asyncio.create_task(_note_when(serving.until, received))
    prices = await pending_prices.result()
    config_path = None if serving.config_path is None else Path(serving.config_path)
    app = build_app(
        settings,
        metrics_dir=serving.metrics_dir,
        prices=prices,
        config_path=config_path,
        adapt=serving.adapt,
    )
    live = app[LIVE]
    reloads: set[asyncio.Task[bool]] = set()

    def reload() -> None:
        task = asyncio.create_task(live.reload())
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    runner = make_runner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=settings.server.shutdown_grace + STOP_MARGIN,
    )
    settling: asyncio.TimerHandle | None = None
    try:
        try:
            await runner.setup()
        except Exception as exc:
            for sock in listeners:
                sock.close()
            raise StartupFailed(
                f"cannot open the audit store {audit_location}: {cause(exc)}"
            ) from exc
        # An exchange allocates hundreds of containers, nearly all freed by their reference
        # counts: with the default threshold (700) a young collection ran about every 30
        # exchanges, 11 us of CPU per exchange in all (gc.callbacks, 20,000 exchanges); at
        # 10,000 it is about 1 us. Only cyclic garbage waits longer for its collection.
        gc.set_threshold(GC_YOUNG, 20, 20)
        for sock in listeners:
            await web.SockSite(runner, sock, backlog=BACKLOG).start()
        loop.add_signal_handler(RELOAD_SIGNAL, reload)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, (RELOAD_SIGNAL,))
        ready = serving.on_ready(listeners[0].getsockname()[1])
        settling = loop.call_later(SETTLE_AFTER_S, settle_collector)
        if ready is not None:
            await ready
        logs.batch_lines()
        reason = await received
        fields = {"signal": reason, "grace_s": settings.server.shutdown_grace}
        log.info(serving.stopping, extra={**fields, **serving.log_fields})
    finally:
        if watcher is not None:
            watcher.cancel()
        if settling is not None:  # a stop before the collector settled: it runs for the stop
            settling.cancel()
            gc.enable()
        await runner.cleanup()


def _note(received: asyncio.Future[str], reason: str) -> None:
    if not received.done():
        received.set_result(reason)


async def _note_when(until: Callable[[], Awaitable[str]], received: asyncio.Future[str]) -> None:
    _note(received, await until())


def cause(exc: BaseException) -> str:
    """The exception class and its errno or SQLite error name: never its message, which may
    quote a connection string."""
    name = type(exc).__name__
    if isinstance(exc, OSError) and exc.errno:
        return f"{name} ({os.strerror(exc.errno)})"
    sqlite3 = sys.modules.get("sqlite3")  # loaded only where a SQLite store is used
    if (
        sqlite3 is not None
        and isinstance(exc, sqlite3.Error)
        and getattr(exc, "sqlite_errorname", None)
    ):
        return f"{name} ({exc.sqlite_errorname})"
    return name

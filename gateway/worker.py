"""One worker of `gateway serve --workers N`, started by the supervisor as
`python -m gateway.worker FD`: a fresh interpreter, not a fork (gateway.supervisor says why).

It is started before the supervisor has read its configuration: it imports the serving stack
first (`preload`), then waits for its spec. A supervisor that does not start after all closes the
channel or kills it first: it ends without a word (exit status 0).

FD is its end of a socketpair with the supervisor. On it the worker reads its `WorkerSpec` (the
validated settings; its sockets come with it as descriptors, SCM_RIGHTS), writes `ready` once its
sockets accept, or `failed <why>` when its app cannot start, and then only waits: end of file
means the supervisor is gone (killed), and the worker stops as on SIGTERM, so it is never left
serving alone. It stops on SIGTERM, SIGINT and SIGHUP as `gateway serve` does (the supervisor
forwards them), exit status 0; 1 when its app could not start.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import os
import socket
import sys
from collections.abc import Sequence

from gateway import event_loop, logs
from gateway.price_subset import GivenPrices
from gateway.private_dir import PrivateDir
from gateway.serving import Serving, StartupFailed, run_server
from gateway.workers import WorkerSpec, for_workers, read_spec
from providers import tls_trust

log = logging.getLogger("gateway.worker")
SUPERVISOR_GONE = "supervisor gone"


def preload() -> None:
    """What serving imports, before the spec: the supervisor is preparing meanwhile."""
    tls_trust.import_aiohttp()  # before anything imports it: the trust store is read if needed
    import aiohttp.web  # noqa: F401

    import gateway.app
    import gateway.edge
    import gateway.price_subset  # noqa: F401


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    channel = socket.socket(fileno=int(args[0]))
    gc.disable()  # until it listens: gateway.serving's settle_collector
    preload()
    try:
        spec = read_spec(channel)
    except EOFError:  # the supervisor did not start after all: nothing to serve, nothing to say
        return 0
    form = spec.settings.logging  # `--log-level` and `--log-format` included (gateway.cli)
    logs.configure(form.level, always={"worker": spec.index}, form=form.format)
    shared = PrivateDir(spec.private_dir)
    shared.join()
    sockets = [socket.socket(fileno=fd) for fd in spec.sockets]
    try:
        event_loop.run(serve(spec, channel, sockets))
    except StartupFailed:
        return 1
    finally:
        shared.leave()  # removes the directory when the supervisor and the others are gone
    return 0


async def serve(spec: WorkerSpec, channel: socket.socket, sockets: list[socket.socket]) -> None:
    reader, writer = await asyncio.open_connection(sock=channel)

    async def ready(port: int) -> None:
        await _say(writer, b"ready\n")

    async def supervisor_gone() -> str:
        await reader.read()  # nothing more is sent: this returns at end of file
        log.warning("the supervisor is gone: stopping")
        return SUPERVISOR_GONE

    serving = Serving(
        on_ready=ready,
        until=supervisor_gone,
        stopping="worker shutting down",
        log_fields={"pid": os.getpid()},
        metrics_dir=spec.metrics_dir,
        config_path=spec.config_path,
        adapt=functools.partial(for_workers, private_dir=spec.private_dir),
        prices=None if spec.prices is None else GivenPrices(spec.settings, spec.prices),
    )
    try:
        await run_server(spec.settings, sockets, spec.audit_location, serving)
    except StartupFailed as exc:
        await _say(writer, f"failed {exc}\n".encode())
        raise
    finally:
        writer.close()


async def _say(writer: asyncio.StreamWriter, line: bytes) -> None:
    """Tell the supervisor; when it is gone, `supervisor_gone` stops this worker anyway."""
    try:
        writer.write(line)
        await writer.drain()
    except ConnectionError:
        pass


if __name__ == "__main__":
    sys.exit(main())

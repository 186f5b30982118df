"""The command line: `gateway serve [--config PATH] [--host H] [--port P]`, `gateway audit`,
`gateway keys hash|new` and `gateway bench`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn

from aiohttp import web

from gateway import event_loop, logs
from gateway.access.command import add_keys_parser, main_keys
from gateway.app import STOP_MARGIN, build_app
from gateway.audit.command import add_audit_parser, main_audit
from gateway.bench.command import add_bench_parser, main_bench
from gateway.edge import make_runner
from gateway.listen import ListenAddress, listen_failure, open_listeners
from gateway.settings import ConfigError, Settings, load_settings
from gateway.startup import ConfigSource, config_source, startup_report, store_location

log = logging.getLogger("gateway.cli")

EXIT_STATUS = (
    "exit status: 0 after a stop by SIGTERM, SIGINT or SIGHUP; 2 for a bad argument or "
    "configuration; 1 when the gateway cannot listen or cannot open its audit store"
)
# SIGHUP stops too: a closed terminal sends it, and the audit trail must still be flushed.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class OneLineErrorParser(argparse.ArgumentParser):
    """Reports a usage error as one line naming the argument, with exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535, not {value}")
    return value


def non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineErrorParser(prog="gateway", description=__doc__, epilog=EXIT_STATUS)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway", epilog=EXIT_STATUS)
    serve.add_argument(
        "--config", type=non_empty, help="TOML file (default: $GATEWAY_CONFIG, else built-in)"
    )
    serve.add_argument(
        "--host", type=non_empty, help="address to listen on (overrides [server] host)"
    )
    serve.add_argument("--port", type=port_number, help="port to listen on, 0 for any free one")
    add_audit_parser(commands)
    add_keys_parser(commands)
    add_bench_parser(commands)
    return parser.parse_args(argv)


class StartupFailed(Exception):
    """The application could not start (its audit store did not open); the message says why."""


async def run_server(
    settings: Settings, listeners: list[socket.socket], shown_host: str, audit_location: str
) -> None:
    """Serve on `listeners` until SIGTERM, SIGINT or SIGHUP; then stop accepting, let in-flight
    exchanges finish within the grace period, flush the audit trail (the app's cleanup), and
    return. StartupFailed when the application cannot start (its audit store did not open)."""
    loop = asyncio.get_running_loop()
    received: asyncio.Future[signal.Signals] = loop.create_future()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, _note_signal, received, sig)
    runner = make_runner(
        build_app(settings),
        access_log=None,
        handle_signals=False,
        shutdown_timeout=settings.server.shutdown_grace + STOP_MARGIN,
    )
    try:
        try:
            await runner.setup()
        except Exception as exc:
            for sock in listeners:
                sock.close()
            cause = _cause(exc)
            raise StartupFailed(f"cannot open the audit store {audit_location}: {cause}") from exc
        for sock in listeners:
            await web.SockSite(runner, sock).start()
        bound = listeners[0].getsockname()[1]
        print(f"listening on http://{shown_host}:{bound}", file=sys.stderr, flush=True)
        sig = await received
        log.info(
            "shutting down", extra={"signal": sig.name, "grace_s": settings.server.shutdown_grace}
        )
    finally:
        await runner.cleanup()


def _note_signal(received: asyncio.Future[signal.Signals], sig: signal.Signals) -> None:
    if not received.done():
        received.set_result(sig)


def _cause(exc: BaseException) -> str:
    """The exception class and its errno or SQLite error name: never its message, which may
    quote a connection string."""
    name = type(exc).__name__
    if isinstance(exc, OSError) and exc.errno:
        return f"{name} ({os.strerror(exc.errno)})"
    if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorname", None):
        return f"{name} ({exc.sqlite_errorname})"
    return name


def listen_address(
    args: argparse.Namespace, settings: Settings, source: ConfigSource
) -> ListenAddress:
    def origin(flag: str, field: str, given: object) -> str:
        if given is not None:
            return flag
        if source.path is not None and field in settings.server.model_fields_set:
            return f"server.{field} in {source.path}"
        return f"the default server.{field}; change it with {flag}"

    host = settings.server.host if args.host is None else args.host
    port = settings.server.port if args.port is None else args.port
    return ListenAddress(
        host, port, origin("--host", "host", args.host), origin("--port", "port", args.port)
    )


def serve(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    source = config_source(args.config, env)
    try:
        settings = load_settings(source.path, env)
    except ConfigError as exc:
        print(str(ConfigError(source.label(), exc.problems)), file=sys.stderr)
        return 2
    audit_store = settings.audit.store
    address = listen_address(args, settings, source)
    try:
        report = startup_report(settings, source, env, audit_store, host=address.host)
    except ValueError as exc:
        print(str(ConfigError(source.label(), [("audit.store", str(exc))])), file=sys.stderr)
        return 2
    try:
        listeners = open_listeners(address.host, address.port)
    except OSError as exc:
        print(f"gateway serve: {listen_failure(exc, address)}", file=sys.stderr)
        return 1
    for line in report:
        print(line.render(), file=sys.stderr)
    try:
        event_loop.run(
            run_server(settings, listeners, address.shown_host(), store_location(audit_store))
        )
    except StartupFailed as exc:
        print(f"gateway serve: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure()
    if args.command == "audit":
        return main_audit(args)
    if args.command == "keys":
        return main_keys(args)
    if args.command == "bench":
        return main_bench(args)
    return serve(args, os.environ)

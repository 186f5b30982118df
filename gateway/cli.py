"""The command line: `gateway serve [--config PATH] [--host H] [--port P]` and `gateway audit`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from gateway import logs
from gateway.app import build_app
from gateway.audit.command import add_audit_parser, main_audit
from gateway.edge import make_runner
from gateway.settings import ConfigError, Settings, load_settings

log = logging.getLogger("gateway.cli")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gateway", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", help="TOML file (default: $GATEWAY_CONFIG, else built-in)")
    serve.add_argument("--host", help="address to listen on (overrides [server] host)")
    serve.add_argument("--port", type=int, help="port to listen on, 0 for any free one")
    add_audit_parser(commands)
    return parser.parse_args(argv)


async def run_server(settings: Settings, host: str, port: int) -> None:
    """Serve until SIGTERM/SIGINT; then stop accepting, let in-flight exchanges finish within
    the grace period, flush the audit trail (the app's cleanup), and return."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    runner = make_runner(
        build_app(settings),
        access_log=None,
        handle_signals=False,
        shutdown_timeout=settings.server.shutdown_grace,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on http://{shown}:{bound}", file=sys.stderr, flush=True)
    try:
        await stop.wait()
        log.info("shutting down", extra={"grace_s": settings.server.shutdown_grace})
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure()
    if args.command == "audit":
        return main_audit(args)
    try:
        settings = load_settings(args.config, os.environ)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    host = args.host or settings.server.host
    port = settings.server.port if args.port is None else args.port
    try:
        asyncio.run(run_server(settings, host, port))
    except OSError as exc:
        print(f"cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0

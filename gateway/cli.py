"""The command line: `gateway serve [--config PATH] [--host H] [--port P]`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from gateway.app import build_app
from gateway.settings import ConfigError, Settings, load_settings


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gateway", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", help="TOML file (default: $GATEWAY_CONFIG, else built-in)")
    serve.add_argument("--host", help="address to listen on (overrides [server] host)")
    serve.add_argument("--port", type=int, help="port to listen on, 0 for any free one")
    return parser.parse_args(argv)


async def run_server(settings: Settings, host: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(build_app(settings), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on http://{shown}:{bound}", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
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

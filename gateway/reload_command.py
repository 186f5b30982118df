"""`gateway reload --pid PID [--config PATH]`: ask a running gateway to reread its configuration.

The file is checked here first: one that does not load is reported in one line (exit status 2)
and the gateway is not asked, so it keeps serving what it runs. Else the gateway (its supervisor
with several workers) gets the reload signal (gateway.reread) and logs `configuration reloaded`,
or `configuration reload refused` should the file change again meanwhile. `--config` names the
file the gateway was started with; without it, `$GATEWAY_CONFIG`, else nothing is checked here.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

EXIT_STATUS = (
    "exit status: 0 once the gateway was asked; 2 when the file does not load (the gateway is "
    "not asked); 1 when no process PID can be signalled"
)


def add_reload_parser(commands: Any) -> None:
    reload = commands.add_parser(
        "reload",
        help="ask a running gateway to reread its configuration file (SIGUSR1)",
        epilog=EXIT_STATUS,
    )
    reload.add_argument("--pid", type=int, required=True, help="the `gateway serve` process")
    reload.add_argument("--config", help="the file to check first (default: $GATEWAY_CONFIG)")


def main_reload(args: argparse.Namespace) -> int:
    # Imported here: `gateway --help` reads only the parser above.
    from gateway.config_source import config_source
    from gateway.settings import ConfigError, load_settings
    from gateway.signals import RELOAD_SIGNAL

    source = config_source(args.config, os.environ)
    if source.path is not None:
        try:
            load_settings(source.path, os.environ)
        except ConfigError as exc:
            line = "; ".join(str(ConfigError(source.label(), exc.problems)).splitlines())
            print(
                f"gateway reload: refused, the gateway keeps its configuration: {line}",
                file=sys.stderr,
            )
            return 2
    try:
        os.kill(args.pid, RELOAD_SIGNAL)
    except OSError as exc:
        print(f"gateway reload: cannot signal process {args.pid}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"gateway reload: asked process {args.pid} to reread its configuration", file=sys.stderr)
    return 0

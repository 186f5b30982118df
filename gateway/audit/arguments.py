"""`gateway audit`'s arguments, apart from the command (`gateway.audit.command`): `gateway.cli`
builds every command's parser, and this module does not import the report's renderers (rich)
that only `gateway audit` runs."""

from __future__ import annotations

import argparse
from typing import Any, Final

from gateway.arg_types import at_least_one

# gateway.audit.report's GroupBy (a test holds them equal): the parser reads no report code.
GROUP_BY: Final = ("provider", "model", "route", "client")

FORMATS: Final = ("table", "json", "csv")
DEFAULT_LIMIT: Final = 20


def add_audit_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `audit` to an `ArgumentParser.add_subparsers()` object; returns the new parser."""
    audit: argparse.ArgumentParser = subparsers.add_parser(
        "audit",
        help="report truncation and stop reasons from the audit store",
        description="Report truncation and stop reasons per provider, model, route or client "
        "format, or list the latest cut exchanges, from the audit store.",
    )
    audit.add_argument(
        "--store",
        metavar="URL",
        help="audit store, e.g. sqlite:///gateway-audit.db or postgresql://host/db "
        "(default: [audit] store of the configuration, else "
        "$XDG_DATA_HOME/llm-gateway/audit.db or ~/.local/share/llm-gateway/audit.db)",
    )
    audit.add_argument(
        "--config", metavar="PATH", help="TOML file (default: $GATEWAY_CONFIG, else built-in)"
    )
    audit.add_argument(
        "--since", metavar="DURATION", help="only the last 90s, 30m, 24h, 7d, 2w (default: all)"
    )
    audit.add_argument(
        "--by", choices=GROUP_BY, default="provider", help="group by (default: provider)"
    )
    audit.add_argument(
        "--format", choices=FORMATS, default="table", help="output format (default: table)"
    )
    audit.add_argument(
        "--truncated", action="store_true", help="list the latest cut exchanges instead"
    )
    audit.add_argument(
        "--limit",
        type=at_least_one("a whole number"),
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"how many cut exchanges --truncated lists (default: {DEFAULT_LIMIT})",
    )
    return audit

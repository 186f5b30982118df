"""`gateway audit`: the truncation and stop-reason report, read from the audit store.

    gateway audit [--store URL | --config PATH] [--since 24h] [--by provider|model|route|client]
                  [--format table|json|csv]
    gateway audit --truncated [--limit N] [--since 7d] [--format table|json|csv]

`run_audit` is the whole report over an already opened store (what tests call); `main_audit`
runs the command from the arguments `gateway.audit.arguments.add_audit_parser` reads.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from urllib.parse import urlsplit

from gateway.audit import render
from gateway.audit.arguments import FORMATS, add_audit_parser
from gateway.audit.report import GROUP_BY, parse_since, summarize, truncated_list
from gateway.audit.store import OFF_NOTE, AuditStore, audit_off, redact_url

__all__ = ("add_audit_parser", "main_audit", "redact_url", "run_audit")


async def run_audit(
    store: AuditStore,
    *,
    since: str | None,
    by: str,
    fmt: str,
    truncated: bool,
    limit: int,
    now: float | None = None,
    console_width: int = render.DEFAULT_WIDTH,
) -> str:
    """Fetch from an open store and render the report (or, with `truncated`, the cut list).

    `since` is a duration such as `24h` counted back from `now` (default: the current time);
    None means every record. Bad `since`, `by` or `fmt` values raise ValueError before any fetch.
    """
    if by not in GROUP_BY:
        raise ValueError(f"cannot group by {by!r}: expected one of {', '.join(GROUP_BY)}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    start = None if since is None else _window_start(since, now)
    if truncated:
        records = await store.fetch(since=start, truncated_only=True, limit=limit)
        items = truncated_list(records, limit)
        if fmt == "json":
            return render.render_truncated_json(items)
        if fmt == "csv":
            return render.render_truncated_csv(items)
        return render.render_truncated_table(items, console_width)
    summaries = summarize(await store.fetch(since=start), by)
    if fmt == "json":
        return render.render_json(summaries)
    if fmt == "csv":
        return render.render_csv(summaries)
    return render.render_table(summaries, by, console_width)


def _window_start(since: str, now: float | None) -> float:
    return (time.time() if now is None else now) - parse_since(since)


def _store_url(args: argparse.Namespace) -> str:
    if args.store:
        return str(args.store)
    from gateway.settings import load_settings

    return load_settings(args.config, os.environ).audit.store


def _terminal_width() -> int:
    return max(80, min(shutil.get_terminal_size((render.DEFAULT_WIDTH, 24)).columns, 160))


async def _open_and_run(url: str, args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(report, None) on success, (None, message) when the store cannot be opened or read."""
    from gateway.audit.opening import open_store
    from gateway.audit.store import sqlite_path

    shown = redact_url(url)
    secret = _password(url)
    if url.startswith("sqlite:") and not await asyncio.to_thread(os.path.exists, sqlite_path(url)):
        # Reading must not create an empty trail where the user expected one.
        return None, f"no audit store at {shown} (the gateway creates it on first use)"
    try:
        store = open_store(url)
        await store.open()
    except Exception as exc:  # any driver's failure to connect is reported the same way
        return None, f"cannot open audit store {shown}: {_describe(exc, secret)}"
    text: str | None = None
    problem: str | None = None
    try:
        text = await run_audit(
            store,
            since=args.since,
            by=args.by,
            fmt=args.format,
            truncated=args.truncated,
            limit=args.limit,
            console_width=_terminal_width(),
        )
    except Exception as exc:
        problem = f"cannot read audit store {shown}: {_describe(exc, secret)}"
    try:
        await store.close()
    except Exception as exc:
        problem = problem or f"cannot close audit store {shown}: {_describe(exc, secret)}"
    return (None, problem) if problem else (text, None)


def _password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _describe(exc: BaseException, secret: str | None) -> str:
    """`ClassName: message`, with the store password blotted out should a driver echo it."""
    text = str(exc)
    if secret:
        text = text.replace(secret, "***")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main_audit(args: argparse.Namespace) -> int:
    """Run `gateway audit` from parsed arguments: 0 on success, 2 on a usage or store problem."""
    from gateway.settings import ConfigError

    if args.since is not None:
        try:
            parse_since(args.since)
        except ValueError as exc:
            print(f"gateway audit: --since: {exc}", file=sys.stderr)
            return 2
    try:
        url = _store_url(args)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if audit_off(url):
        print(f"gateway audit: the audit trail is {OFF_NOTE}: nothing to report", file=sys.stderr)
        return 2
    text, problem = asyncio.run(_open_and_run(url, args))
    if problem is not None or text is None:
        print(f"gateway audit: {problem}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0

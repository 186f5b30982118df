"""`gateway conformance`: from arguments (`gateway.conformance.arguments`) to the scorecard.

`main_conformance` is what `gateway.cli` runs. Every argument is checked before anything starts
(a bad one is one line naming it, exit status 2); then the upstream starts (unless
`--upstream-port` names one already running), the cases run (`gateway.conformance.run`), and
the report is shown (`gateway.conformance.report`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from rich.console import Console

from gateway.conformance import configs, report
from gateway.conformance.cases import BY_ID, CASES, FORMATS, WIRES, Case
from gateway.conformance.client import Target
from gateway.conformance.progress import Bar, Silent
from gateway.conformance.run import Result, Selection, Unreachable, run_cases
from gateway.conformance.upstream import Background
from gateway.header_arg import header_line

HOST = "127.0.0.1"
DEFAULT_KEY = "sk-conformance"


@dataclass(frozen=True)
class Checked:
    url: str
    selection: Selection
    stall: float
    timeout: float
    concurrency: int
    upstream_port: int | None
    key: str
    headers: tuple[tuple[str, str], ...]


def names(flag: str, text: str, known: Sequence[str]) -> tuple[str, ...]:
    given = tuple(part.strip() for part in text.split(",") if part.strip())
    if given == ("all",):
        return tuple(known)
    unknown = [name for name in given if name not in known]
    if unknown or not given:
        shown = ", ".join(unknown) or "an empty list"
        raise ValueError(f"{flag}: unknown {shown} (known: {', '.join(known)}, all)")
    return tuple(name for name in known if name in given)


def number(flag: str, text: str, kind: type[float] | type[int]) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{flag}: not a number: {text!r}") from None
    if value <= 0:
        raise ValueError(f"{flag}: must be more than 0, not {text}")
    return value


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--upstream-port: not a port number: {text!r}") from None
    if not 0 < value < 65536:
        raise ValueError(f"--upstream-port: must be from 1 to 65535, not {value}")
    return value


def base_url(text: str | None) -> str:
    if not text:
        raise ValueError("URL: the gateway to test is required (e.g. http://127.0.0.1:8080)")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"URL: must be http://HOST:PORT or https://..., not {text!r}")
    path = parts.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return f"{parts.scheme}://{parts.netloc}{path}"


def check_arguments(args: argparse.Namespace, env: Mapping[str, str]) -> Checked:
    """ValueError naming the argument, before anything starts."""
    formats = names("--format", args.format, FORMATS)
    wires = names("--wires", args.wires, WIRES)
    cases: Sequence[Case] = CASES
    if args.only is not None:
        cases = [BY_ID[name] for name in names("--only", args.only, list(BY_ID))]
    key = DEFAULT_KEY
    if args.key_env is not None:
        key = env.get(args.key_env, "")
        if not key:
            raise ValueError(f"--key-env: ${args.key_env} is not set")
    return Checked(
        url=base_url(args.url),
        selection=Selection(formats, wires, cases),
        stall=number("--stall", args.stall, float),
        timeout=number("--timeout", args.timeout, float),
        concurrency=int(number("--concurrency", args.concurrency, int)),
        upstream_port=None if args.upstream_port is None else port(args.upstream_port),
        key=key,
        headers=tuple(header_line("--header", text) for text in args.header),
    )


def print_config(args: argparse.Namespace) -> int:
    if args.print_config not in configs.KINDS:
        raise ValueError(
            f"--print-config: unknown {args.print_config!r} (known: {', '.join(configs.KINDS)})"
        )
    chosen = configs.DEFAULT_PORT if args.upstream_port is None else port(args.upstream_port)
    sys.stdout.write(configs.render(args.print_config, chosen))
    return 0


def execute(checked: Checked, console: Console, progress: bool) -> tuple[list[Result], str]:
    upstream: Background | None = None
    chosen = checked.upstream_port
    if chosen is None:
        upstream = Background(HOST, configs.DEFAULT_PORT)
        chosen = upstream.start()
        console.print(
            f"scripted upstream on http://{HOST}:{chosen}; the target must route to it "
            "(gateway conformance --print-config gateway|litellm|portkey)",
            markup=False,
            highlight=False,
        )
    target = Target(
        checked.url,
        checked.key,
        checked.headers,
        checked.timeout,
        checked.stall,
        run=secrets.token_hex(4),
    )
    bar = Bar(console) if progress else Silent()
    try:
        results = asyncio.run(
            run_cases(
                target,
                checked.selection,
                f"http://{HOST}:{chosen}",
                checked.concurrency,
                on_start=bar.start,
                on_done=bar.done,
            )
        )
    finally:
        bar.stop()
        if upstream is not None:
            upstream.stop()
    return results, f"http://{HOST}:{chosen}"


def main_conformance(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    prog = "gateway conformance"
    try:
        if args.print_config is not None:
            return print_config(args)
        checked = check_arguments(args, env)
    except ValueError as exc:
        print(f"{prog}: {exc} (see {prog} --help)", file=sys.stderr)
        return 2
    to_stdout = args.json == "-"
    console = Console(stderr=to_stdout, highlight=False)
    started = time.time()
    try:
        results, upstream = execute(checked, Console(stderr=True), not args.no_progress)
    except OSError as exc:
        print(f"{prog}: the upstream cannot listen: {exc}", file=sys.stderr)
        return 1
    except Unreachable as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    console.print(report.scorecard(results, checked.selection.formats))
    found = report.findings(results)
    if found is not None:
        console.print(found)
    console.print(report.summary_line(results))
    if args.json:
        meta = {
            "tool": "gateway conformance",
            "target": checked.url,
            "upstream": upstream,
            "stall_seconds": checked.stall,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 1),
        }
        report.write_json(report.document(results, meta), args.json)
    return 3 if any(result.verdict == "hidden" for result in results) else 0

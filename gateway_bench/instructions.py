"""Instructions per request, counted by valgrind's callgrind: the gateway's own work, in a unit
no host's speed or load moves.

    python -m gateway_bench.instructions                    # Chat, Responses, Messages: whole
    python -m gateway_bench.instructions --stream --json out.json

A wall-clock or CPU figure on a shared 2-core machine moves by a few percent from run to run,
which is as wide as the margins the field suite judges (Responses within 10% of Chat). A count
of instructions repeats to a fraction of a percent, so it says whether a change made a wire
cheaper, and by how much, before a field run says whether that shows.

Each wire's figure comes from two starts of `gateway serve --workers 1` under callgrind, in
front of the bench's fake upstream: one answering `--base` requests, one `--base + --requests`.
The difference over `--requests` is what a request costs; the start, the imports and the
shutdown are in both and cancel out. The load generator is the bench's own (its warm-up is in
both runs as well). The audit trail is off unless `--audit on` (a SQLite file per start). One
start without valgrind goes first, so that both counted starts find the bytecode compiled and
the price cache written. Callgrind counts user-space instructions only: the kernel's share of
the bytes (gateway_bench's CPU figures have it) is not in them.

valgrind is Debian's `valgrind` package. A start under it takes some 30 s, a request some
50 times its usual time.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, Final

import orjson
from rich.console import Console
from rich.table import Table

from gateway.serving import SETTLE_AFTER_S
from gateway_bench.children import Child, ChildFailed, Children, LoadGenerator, free_port
from gateway_bench.gateway_config import gateway_env, render
from gateway_bench.plan import FORMATS, Format
from gateway_bench.scenario import Scenario
from gateway_bench.wires import WIRES

WIRE_FORMATS: Final = {"chat": "same", "responses": "responses", "messages": "anthropic"}
START_UNDER_VALGRIND_S: Final = 600.0
STOP_UNDER_VALGRIND_S: Final = 120.0  # the graceful stop, then callgrind writes its file
CONCURRENCY: Final = 16
# A process settles its collector (a full collection, then the freeze) SETTLE_AFTER_S after it
# listens. Under valgrind a short run can end before that and a long one not: both counted runs
# wait it out first, so that it is in both.
SETTLED_S: Final = 3 * SETTLE_AFTER_S
_TOTAL: Final = re.compile(rb"^(?:summary|totals):\s*(\d+)", re.MULTILINE)
# What a start is not to pay for (as gateway_bench.field_session's cold starts): with it, every
# start would compile the bytecode again, and the two counted starts would not cancel out.
NOT_COUNTED_ENV: Final = ("PYTHONDONTWRITEBYTECODE",)


class NoCount(RuntimeError):
    """Callgrind wrote no total: the run was killed, or the file is not callgrind's."""


def callgrind_total(data: bytes) -> int:
    """The instructions a callgrind output file counts (its `summary:` or `totals:` line)."""
    found = _TOTAL.search(data)
    if found is None:
        raise NoCount("no summary or totals line in the callgrind output")
    return int(found[1])


def per_request(fewer: int, more: int, requests: int) -> float:
    """What each of the `requests` more costs: the start and the shutdown are in both runs."""
    if requests < 1:
        raise ValueError("requests must be at least 1")
    if more <= fewer:
        raise ValueError(f"the longer run counted no more instructions ({more} <= {fewer})")
    return (more - fewer) / requests


@dataclass(frozen=True, slots=True)
class WireCount:
    wire: str
    stream: bool
    fewer: int  # instructions of the run answering `base` requests
    more: int  # of the run answering `base + requests`
    requests: int

    @property
    def per_request(self) -> float:
        return per_request(self.fewer, self.more, self.requests)


def valgrind_argv(out_dir: Path) -> list[str]:
    out = out_dir / "callgrind.%p"
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--trace-children=no"]


def stop_counted(child: Child) -> None:
    """SIGTERM, and time for the graceful stop and for callgrind to write its count."""
    child.process.terminate()
    child.process.wait(STOP_UNDER_VALGRIND_S)


class Counter:
    """One fake upstream and one load generator; a gateway start per count."""

    def __init__(
        self, children: Children, tmp: Path, *, audit: bool, concurrency: int = CONCURRENCY
    ) -> None:
        self.children, self.tmp, self.audit, self.concurrency = children, tmp, audit, concurrency
        self.upstream = children.upstream()
        self.load: LoadGenerator = children.load_generator()
        self.env = {k: v for k, v in gateway_env(os.environ).items() if k not in NOT_COUNTED_ENV}
        self.starts = 0

    def config(self, fmt: Format) -> Path:
        self.starts += 1
        audit_path = self.tmp / f"audit-{self.starts}.db"
        text = render(self.upstream.port, audit_path, formats=[fmt.name], audit_off=not self.audit)
        path = self.tmp / f"gateway-{self.starts}.toml"
        path.write_text(text, encoding="utf-8")
        return path

    def serve(self, fmt: Format, stream: bool, requests: int, counted: bool) -> int | None:
        """Starts the gateway (under callgrind when `counted`), sends `requests` requests at
        the counter's concurrency, stops it; the instructions callgrind counted."""
        out_dir = self.tmp / f"counts-{self.starts + 1}"
        out_dir.mkdir()
        wrapper = valgrind_argv(out_dir) if counted else []
        gateway = self.children.gateway(
            self.config(fmt),
            self.tmp / f"gateway-{self.starts + 1}.log",
            self.env,
            port=free_port(),
            workers=1,
            wrapper=wrapper,
            timeout=START_UNDER_VALGRIND_S,
        )
        try:
            time.sleep(SETTLED_S)
            self._send(gateway, fmt, stream, requests)
        finally:
            stop_counted(gateway)
        if not counted:
            return None
        files = sorted(out_dir.glob("callgrind.*"))
        if len(files) != 1:
            raise NoCount(f"callgrind wrote {len(files)} files in {out_dir}")
        return callgrind_total(files[0].read_bytes())

    def _send(self, gateway: Child, fmt: Format, stream: bool, requests: int) -> None:
        wire = WIRES[fmt.client_wire]
        model = Scenario().model(fmt.prefix)
        result = self.load.job(
            {
                "op": "run",
                "wire": fmt.client_wire,
                "model": model,
                "path": wire.request_path(model, stream),
                "host": "127.0.0.1",
                "port": gateway.port,
                "stream": stream,
                "concurrency": self.concurrency,
                "warmup": 0,
                "duration": 0,
                "min_requests": requests,
                "max_requests": requests,
                "timeout": 120.0,
            }
        )
        failed = sum(result["errors"].values()) + sum(result["warmup_errors"].values())
        if failed:
            raise ChildFailed(f"{failed} requests failed: {result['errors']}")

    def count(self, name: str, stream: bool, base: int, requests: int) -> WireCount:
        fmt = FORMATS[WIRE_FORMATS[name]]
        fewer = self.serve(fmt, stream, base, counted=True)
        more = self.serve(fmt, stream, base + requests, counted=True)
        assert fewer is not None and more is not None
        return WireCount(name, stream, fewer, more, requests)


def measure(args: argparse.Namespace) -> list[WireCount]:
    with TemporaryDirectory(prefix="gateway-instructions-") as tmp, Children() as children:
        counter = Counter(children, Path(tmp), audit=args.audit == "on")
        first = FORMATS[WIRE_FORMATS[args.wires[0]]]
        counter.serve(first, args.stream, args.base, counted=False)  # compiles, caches prices
        return [counter.count(name, args.stream, args.base, args.requests) for name in args.wires]


def document(counts: Sequence[WireCount], args: argparse.Namespace) -> dict[str, Any]:
    base = counts[0].per_request
    return {
        "stream": args.stream,
        "audit": args.audit,
        "concurrency": CONCURRENCY,
        "base_requests": args.base,
        "requests": args.requests,
        "wires": [
            {
                "wire": c.wire,
                "instructions_fewer": c.fewer,
                "instructions_more": c.more,
                "per_request": round(c.per_request),
                f"x_{counts[0].wire}": round(c.per_request / base, 4),
            }
            for c in counts
        ],
    }


def table(counts: Sequence[WireCount], stream: bool) -> Table:
    mode = "stream (20 chunks)" if stream else "whole answer"
    out = Table(title=f"Instructions per request, {mode}: callgrind, one worker")
    for head in ("wire", "per request", f"x {counts[0].wire}"):
        out.add_column(head, justify="left" if head == "wire" else "right")
    base = counts[0].per_request
    for c in counts:
        out.add_row(c.wire, f"{c.per_request:,.0f}", f"{c.per_request / base:.3f}x")
    return out


def wires_arg(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in WIRE_FORMATS]
    if not names or unknown:
        known = ", ".join(WIRE_FORMATS)
        raise argparse.ArgumentTypeError(f"wires are a comma list of: {known}")
    return names


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gateway_bench.instructions",
        description="The gateway's instructions per request for each wire (callgrind); "
        "the first wire is the ratios' base.",
    )
    parser.add_argument("--wires", type=wires_arg, default=list(WIRE_FORMATS))
    parser.add_argument("--stream", action="store_true", help="20-chunk streams")
    parser.add_argument("--requests", type=positive, default=1000, help="counted (1000)")
    parser.add_argument("--base", type=positive, default=50, help="the shorter run's (50)")
    parser.add_argument("--audit", choices=("on", "off"), default="off")
    parser.add_argument("--json", metavar="FILE", type=Path)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warn = Console(stderr=True)
    if shutil.which("valgrind") is None:
        warn.print("valgrind is not installed (Debian: apt-get install valgrind)")
        return 2
    try:
        counts = measure(args)
    except (ChildFailed, NoCount, ValueError, subprocess.TimeoutExpired) as exc:
        warn.print(f"counting failed: {exc}")
        return 1
    Console().print(table(counts, args.stream))
    if args.json is not None:
        args.json.write_bytes(orjson.dumps(document(counts, args), option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

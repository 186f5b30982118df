"""`gateway bench`: the command line, from arguments to the report.

`add_bench_parser` and `main_bench` are the seam `gateway.cli` wires in, as for `audit` and
`keys`. `execute` starts the processes (`gateway.bench.children`), runs the matrix and the idle
probe (or the growth series), and returns the JSON document the report is drawn from.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Final

from rich.console import Console

from gateway.bench import gateway_config, goals, growth, plot, report
from gateway.bench.children import ChildFailed, Children, free_port
from gateway.bench.gateway_log import GatewayLog
from gateway.bench.plan import FORMATS, MODES, Plan, preset
from gateway.bench.procstat import listening_pids, raise_open_files_limit
from gateway.bench.progress import Bar, Reporter, Silent
from gateway.bench.run import Bench
from gateway.bench.summary import summarize
from gateway.bench.targets import Target, split_url

DESCRIPTION: Final = """\
Measure what the gateway costs. gateway bench starts a zero-latency fake upstream that speaks
every wire the gateway does (OpenAI Chat and Responses, Anthropic Messages, Gemini, Bedrock
Converse), starts the gateway in front of it (audit trail on, its own config in a temporary
directory), and runs a closed-loop load generator against the upstream directly and through
the gateway, alternating them within each repetition. It prints medians and ratios per cell
(non-stream, 20-chunk stream in one burst, 20-chunk stream paced one chunk per write; same-
format Chat -> OpenAI and cross-format Chat -> Anthropic; concurrency 1, 32, 64): requests/s,
p50 and p99 latency and what the gateway adds to them, time to first byte, CPU per request and
per chunk (from /proc), peak RSS, errors; then RSS per idle open stream, and the gateway's
performance targets as a pass/fail checklist.

  gateway bench                                  # the default matrix, 3 repetitions
  gateway bench --quick                          # a smoke run of a few seconds
  gateway bench --compare http://127.0.0.1:4000 --compare-name litellm \\
      --compare-key-env LITELLM_KEY --upstream-port 18080
                                                 # another gateway in the same rounds
  gateway bench --growth                         # CPU growth with stream length, request
                                                 # size and open streams
  gateway bench --json out.json --plot out.png   # everything, and the latency CDFs

Another gateway given with --compare (or --gateway-url) must route the model names the bench
sends to the fake upstream: `bench-*` to its OpenAI Chat endpoint (<upstream>/v1), `xbench-*` to
its Anthropic endpoint (<upstream>), `hbench-*` (held streams) like `bench-*`; pin the upstream's
port with --upstream-port, and see --print-config for the gateway's own configuration of it.
The scenario is in the model name (`bench-c20-p1`: 20 chunks, paced 1 ms apart), so the other
gateway must pass the name through (--compare-model 'openai/{model}' rewrites it on the way).
Only loopback targets are accepted.
"""


def csv_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of numbers: {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be numbers of at least 1: {text!r}")
    return values


def csv_names(known: Sequence[str]) -> Any:
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(part.strip() for part in text.split(",") if part.strip())
        unknown = [name for name in names if name not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown) or 'empty list'} (known: {', '.join(known)})"
            )
        return names

    return parse


def positive(kind: type[float] | type[int]) -> Any:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
        return value

    return parse


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    bench: argparse.ArgumentParser = subparsers.add_parser(
        "bench",
        help="measure the gateway's cost against a built-in fake upstream (and other gateways)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = bench.add_argument_group("what to measure")
    what.add_argument("--quick", action="store_true", help="a smoke run: c1 and c8, 1 rep, 0.3 s")
    what.add_argument("--growth", action="store_true", help="the cost-growth series instead")
    what.add_argument("--reps", type=positive(int), help="repetitions per cell (default 3)")
    what.add_argument("--duration", type=positive(float), help="seconds per run (default 2)")
    what.add_argument("--max-requests", type=positive(int), help="cap per run (default 200000)")
    what.add_argument("--warmup", type=positive(int), help="requests before each run (50)")
    what.add_argument("--timeout", type=positive(float), help="seconds per request (30)")
    what.add_argument("--concurrency", type=csv_ints, help="e.g. 1,32,64 (the default)")
    what.add_argument("--modes", type=csv_names(list(MODES)), help="nonstream,burst,paced")
    what.add_argument("--formats", type=csv_names(list(FORMATS)), help="same,cross (default)")
    what.add_argument("--chunks", type=positive(int), help="content chunks per stream (20)")
    what.add_argument("--pace-ms", type=positive(float), help="ms between paced chunks (1)")
    what.add_argument(
        "--idle-streams", type=csv_ints, help="held-stream levels of the idle probe (100,500,1000)"
    )
    what.add_argument("--no-idle", action="store_true", help="skip the idle-stream probe")
    where = bench.add_argument_group("targets")
    where.add_argument("--gateway-url", help="a gateway already running, instead of starting one")
    where.add_argument("--gateway-pid", type=int, help="its process (default: found by its port)")
    where.add_argument("--workers", type=positive(int), help="passed on as gateway serve --workers")
    where.add_argument("--upstream-port", type=int, default=0, help="the fake upstream's port")
    where.add_argument("--compare", metavar="URL", help="another gateway, measured alongside")
    where.add_argument("--compare-name", default="compare", help="its name in the report")
    where.add_argument(
        "--compare-model",
        default="{model}",
        help="the model it is sent; {model} is the scenario's name (default: {model})",
    )
    where.add_argument("--compare-key", help="its key, sent as bearer and x-api-key; never shown")
    where.add_argument("--compare-key-env", help="the environment variable holding its key")
    where.add_argument("--compare-pid", type=int, help="its process (default: found by its port)")
    out = bench.add_argument_group("output")
    out.add_argument("--json", metavar="FILE", help="everything as JSON; '-' for stdout only")
    out.add_argument("--plot", metavar="FILE.png", help="latency distributions (needs [bench])")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    out.add_argument(
        "--print-config",
        action="store_true",
        help="print the gateway configuration for --upstream-port and exit",
    )
    return bench


def plan_of(args: argparse.Namespace) -> Plan:
    plan = preset(args.quick)
    changes: dict[str, Any] = {
        field: getattr(args, field)
        for field in (
            "reps",
            "duration",
            "max_requests",
            "warmup",
            "timeout",
            "concurrency",
            "modes",
            "formats",
            "chunks",
        )
        if getattr(args, field) is not None
    }
    if args.pace_ms is not None:
        changes["pace_ms"] = args.pace_ms
    if args.idle_streams is not None:
        changes["idle_levels"] = tuple(sorted(set(args.idle_streams)))
    if args.no_idle:
        changes["idle_levels"] = ()
    return replace(plan, **changes)


def compare_key(args: argparse.Namespace) -> str | None:
    key: str | None = args.compare_key
    if args.compare_key_env:
        key = os.environ.get(args.compare_key_env)
        if not key:
            raise ValueError(f"--compare-key-env: ${args.compare_key_env} is not set")
    return key


def pids_of(given: int | None, url: str, what: str, warn: Console) -> tuple[int, ...]:
    if given is not None:
        return (given,)
    _, port, _ = split_url(url)
    found = listening_pids(port)
    if not found:
        warn.print(
            f"gateway bench: no process of this user listens on port {port}: the CPU and RSS "
            f"of {what} are not measured (give its pid)",
            markup=False,
        )
    return tuple(found[:1])


def check_arguments(args: argparse.Namespace) -> None:
    """ValueError naming the argument, before any process starts."""
    for flag, url in (("--gateway-url", args.gateway_url), ("--compare", args.compare)):
        if url:
            try:
                split_url(url)
            except ValueError as exc:
                raise ValueError(f"{flag}: {exc}") from None
    if args.compare and args.compare_name in ("direct", "gateway"):
        raise ValueError(f"--compare-name: {args.compare_name!r} is taken")
    if args.plot:
        plot.require()
    if args.upstream_port and not 0 < args.upstream_port < 65536:
        raise ValueError(f"--upstream-port: not a port: {args.upstream_port}")


def execute(args: argparse.Namespace, plan: Plan, progress: Reporter, warn: Console) -> Any:
    started = time.time()
    raise_open_files_limit()
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as tmp, Children() as children:
        upstream = children.upstream(args.upstream_port)
        direct = Target("direct", "direct", "127.0.0.1", upstream.port, "", (upstream.pid,))
        logs: dict[str, GatewayLog] = {}
        if args.gateway_url:
            pids = pids_of(args.gateway_pid, args.gateway_url, "the gateway", warn)
            gateway = Target.from_url("gateway", "gateway", args.gateway_url, pids)
        else:
            config, log = Path(tmp, "gateway.toml"), Path(tmp, "gateway.log")
            config.write_text(gateway_config.render(upstream.port, Path(tmp, "audit.db")))
            env = gateway_config.gateway_env(os.environ)
            child = children.gateway(config, log, env, free_port(), args.workers)
            gateway = Target.from_url("gateway", "gateway", child.url, (child.pid,))
            logs["gateway"] = GatewayLog(log)
        targets = [gateway]
        if args.compare:
            pids = pids_of(args.compare_pid, args.compare, args.compare_name, warn)
            targets.append(
                Target.from_url(
                    "compare",
                    args.compare_name,
                    args.compare,
                    pids,
                    args.compare_model,
                    compare_key(args),
                )
            )
            if not targets[-1].follows_scenarios:
                warn.print(
                    "gateway bench: --compare-model has no {model}: every cell sends it the same "
                    "name, so its streams are not paced and it is left out of the idle probe",
                    markup=False,
                )
        bench = Bench(plan, direct, targets, children.load_generator(), progress, logs)
        document = measure(bench, args.growth)
    document["bench"] = about(args, started)
    return document


def measure(bench: Bench, growth_mode: bool) -> dict[str, Any]:
    plan = bench.plan
    targets = [bench.direct, *bench.targets]
    names = [t.name for t in targets]
    document: dict[str, Any] = {
        "plan": asdict(plan),
        "targets": [t.public() for t in targets],
    }
    if growth_mode:
        bench.progress.start(growth.growth_size(bench))
        try:
            document["growth"], document["runs"] = growth.measure(bench)
        finally:
            bench.progress.stop()
        return document
    bench.progress.start(bench.matrix_size() + bench.idle_probe_size())
    try:
        records = bench.matrix()
        idle = bench.idle_probe() if plan.idle_levels else {}
    finally:
        bench.progress.stop()
    cells = summarize(plan, records, names)
    document.update(
        cells=cells,
        idle=idle,
        goals=goals.check(plan, cells, records, idle, names[1:]),
        runs=records,
    )
    return document


def about(args: argparse.Namespace, started: float) -> dict[str, Any]:
    """The run's circumstances; the arguments without any key."""
    shown = {k: v for k, v in vars(args).items() if k != "compare_key" and not callable(v)}
    shown["compare_key"] = "(given)" if args.compare_key else None
    return {
        "version": 1,
        "started_at": datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(),
        "wall_s": time.time() - started,
        "arguments": shown,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
    }


def main_bench(args: argparse.Namespace) -> int:
    warn = Console(stderr=True)
    try:
        plan = plan_of(args)
        check_arguments(args)
        compare_key(args)
    except (ValueError, plot.PlotUnavailable) as exc:
        print(f"gateway bench: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        print(gateway_config.render(args.upstream_port or 18080, None), end="")
        return 0
    to_stdout = args.json == "-"
    quiet = to_stdout or args.no_progress or not warn.is_terminal
    progress: Reporter = Silent() if quiet else Bar(warn)
    try:
        document = execute(args, plan, progress, warn)
    except ChildFailed as exc:
        print(f"gateway bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gateway bench: interrupted; every process it started was stopped", file=sys.stderr)
        return 130
    if args.json:
        report.write_json(document, args.json)
    if not to_stdout:
        console = Console(width=max(Console().width, 180))
        for renderable in report.tables(document):
            console.print(renderable)
    if args.plot and "cells" in document:
        plot.plot(document, args.plot)
    return 0

"""One bench session: its processes started, its targets found, its measurements made, and the
JSON document of all of it (what the report, --json and --plot are drawn from).

The fake upstream always starts (on `--upstream-port` when given); the gateway too, unless
`--gateway-url` names one already running; `--compare` adds another gateway. A gateway the
bench did not start is measured through its process tree when its pid is given or found
behind its port; without one, its CPU and RSS are not measured, and a line says so.

    document = execute(args, plan, progress, warn_console)
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console

from gateway.header_arg import header_line
from gateway.listen import raise_open_files_limit
from gateway_bench import gateway_config, goals, growth
from gateway_bench.children import Children, free_port
from gateway_bench.gateway_log import GatewayLog
from gateway_bench.plan import Plan
from gateway_bench.procstat import listening_pids
from gateway_bench.progress import Reporter
from gateway_bench.run import Bench
from gateway_bench.summary import summarize
from gateway_bench.targets import Target, split_url


def compare_headers(args: argparse.Namespace) -> dict[str, str]:
    """`--compare-header`'s, ValueError naming the flag for one that is not `NAME: VALUE`."""
    return dict(header_line("--compare-header", text) for text in args.compare_header)


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


def compare_target(args: argparse.Namespace, warn: Console, find_pid: bool = True) -> Target:
    """The gateway `--compare` names, with its pid found behind its port when not given (and
    `find_pid`: not before it runs)."""
    pids = pids_of(args.compare_pid, args.compare, args.compare_name, warn) if find_pid else ()
    target = Target.from_url(
        "compare",
        args.compare_name,
        args.compare,
        pids,
        args.compare_model,
        compare_key(args),
        compare_headers(args),
    )
    if not target.follows_scenarios:
        warn.print(
            "gateway bench: --compare-model has no {model}: every cell sends it the same "
            "name, so its streams are not paced and it is left out of the idle probe",
            markup=False,
        )
    return target


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
            audit = Path(tmp, "audit.db")
            config.write_text(gateway_config.render(upstream.port, audit, formats=plan.formats))
            env = gateway_config.gateway_env(os.environ)
            child = children.gateway(config, log, env, free_port(), args.workers)
            gateway = Target.from_url("gateway", "gateway", child.url, (child.pid,))
            logs["gateway"] = GatewayLog(log)
        targets = [gateway]
        if args.compare:
            targets.append(compare_target(args, warn))
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
    """The run's circumstances; the arguments without any key, and `--compare-header`'s names
    without their values (a header may carry a key: Portkey's config holds the targets')."""
    shown = {k: v for k, v in vars(args).items() if k != "compare_key" and not callable(v)}
    shown["compare_key"] = "(given)" if args.compare_key else None
    shown["compare_header"] = [f"{name}: (given)" for name in compare_headers(args)]
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
